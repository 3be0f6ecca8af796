"""A notebook's parameters cell, read without executing anything, and whether it declares exactly
the names its chapter's model does, holding no value the profile files hold."""
from __future__ import annotations

import ast
import json
from functools import lru_cache
from pathlib import Path

from .chapters import CHAPTERS
from .errors import ProfileError


def notebook_parameters(path: Path) -> dict:
    """The names and values of a notebook's parameters cell (literals only, read without
    executing anything)."""
    path = Path(path)
    return dict(_notebook_parameters(str(path), path.stat().st_mtime_ns))


@lru_cache(maxsize=32)
def _notebook_parameters(path: str, _mtime: int) -> tuple:
    nb = json.loads(Path(path).read_text())
    cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ProfileError(f"{path}: needs exactly one cell tagged 'parameters', has {len(cells)}")
    src = cells[0]["source"]
    out = []
    for node in ast.parse(src if isinstance(src, str) else "".join(src)).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            raise ProfileError(f"{path}: the parameters cell holds something other than NAME = literal "
                               f"(line {node.lineno})")
        try:
            value = ast.literal_eval(node.value)
        except ValueError:
            raise ProfileError(f"{path}: parameter {node.targets[0].id} is not a literal (line {node.lineno})") from None
        out.append((node.targets[0].id, value))
    return tuple(out)


HELD_BY_THE_CELL = ("profile", "results_root")   # the only names a parameters cell gives a value


def schema_mismatch(notebook: str, root: Path) -> str | None:
    """Why a notebook's parameters cell and its model differ, or None: the cell declares exactly the
    model's names, each None (the profile's value) but ``profile`` and ``results_root``."""
    declared = set(CHAPTERS[notebook].model_fields)
    cell = notebook_parameters(root / notebook)
    names = set(cell)
    held = sorted(k for k, v in cell.items() if v is not None and k in declared and k not in HELD_BY_THE_CELL)
    lines = [f"its parameters cell gives {held} a value (each must be None there: the profile file holds "
             "the values)"] if held else []
    if names - declared:
        lines.append(f"its parameters cell declares {sorted(names - declared)}, which the schema does not")
    if declared - names:
        lines.append(f"the schema declares {sorted(declared - names)}, which its parameters cell does not")
    if not lines:
        return None
    return (f"{notebook}: " + "; ".join(lines) + f" (textglauber.profile.{CHAPTERS[notebook].__name__} declares "
            "exactly the cell's names: change both together)")
