"""The library code a notebook can reach: the modules its code cells import from the package, and
theirs in turn (every import statement counts, also one inside a function), with the package's
``__init__`` and that of every sub-package on the way (importing ``a.b`` runs ``a/__init__``);
the whole package wherever an import is dynamic (``import_module``, ``__import__``) or code does
not parse.

A build stamp and the benchmark's artifact key on the digests of these files (:func:`code_inputs`),
so that a change to a module no chapter reaches re-executes nothing."""
from __future__ import annotations

import ast
import json
import re
from functools import lru_cache
from pathlib import Path

from .paths import PACKAGE_DIR
from .provenance import file_digest

PACKAGE = "textglauber"
_DYNAMIC_IMPORT = re.compile(r"\bimport_module\s*\(|\b__import__\s*\(")


def _code_cells(nb_path: Path) -> list[str]:
    nb = json.loads(Path(nb_path).read_text())
    cells = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            src = "".join(cell.get("source", []))
            cells.append("\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))))
    return cells


def _module_file(package_dir: Path, dotted: str) -> Path | None:
    """The file of a module of the package ('' is the package's __init__), or None."""
    base = package_dir.joinpath(*dotted.split(".")) if dotted else package_dir
    for f in ((base.with_suffix(".py"),) if dotted else ()) + (base / "__init__.py",):
        if f.is_file():
            return f
    return None


def _statements(node: ast.AST):
    """Every statement under ``node``, at any depth (in functions, classes, branches, handlers);
    expressions, which hold no import statement, are not walked."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
            yield child
            yield from _statements(child)


@lru_cache(maxsize=4096)
def _import_statements(src: str, here: str | None, package: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(dotted module relative to the package, names imported from it) for every import of the
    package in ``src``, from its text alone: the parse is what costs, and a build asks it of the same
    files once per chapter and twice per build (its plan, then its run), so it is kept per text.
    Raises SyntaxError where ``src`` does not parse."""
    found = []
    for node in _statements(ast.parse(src)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == package or alias.name.startswith(package + "."):
                    found.append((alias.name[len(package):], ()))
        elif isinstance(node, ast.ImportFrom):
            names = tuple(a.name for a in node.names)
            if node.level == 0 and node.module and (node.module == package or node.module.startswith(package + ".")):
                found.append((node.module[len(package):], names))
            elif node.level and here is not None:
                parts = here.split(".") if here else []
                parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
                found.append((".".join(parts + ([node.module] if node.module else [])), names))
    return tuple(found)


def _imported(src: str, here: str | None, package_dir: Path, package: str) -> set[str]:
    """Modules of the package (dotted, relative to it; '' for its __init__) that the code ``src``
    imports and that exist as files now. ``here`` is the dotted name of the package the code sits
    in (None outside the package)."""
    found = set()
    for dotted, names in _import_statements(src, here, package):
        dotted = dotted.strip(".")
        found.add(dotted)
        for n in names:                       # from pkg import module
            sub = f"{dotted}.{n}".strip(".")
            if _module_file(package_dir, sub):
                found.add(sub)
    return {d for d in found if _module_file(package_dir, d)}


def code_files(nb_path: Path, package_dir: Path | None = None, package: str | None = None) -> list[Path]:
    """The package's files a notebook can reach (see the module docstring), sorted."""
    package_dir, package = package_dir or PACKAGE_DIR, package or PACKAGE
    everything = sorted(p for p in package_dir.rglob("*.py") if "__pycache__" not in p.parts)
    start = set()
    for src in _code_cells(nb_path):
        if _DYNAMIC_IMPORT.search(src):
            return everything
        try:
            start |= _imported(src, None, package_dir, package)
        except SyntaxError:
            return everything
    seen, todo = set(), sorted(start)
    while todo:
        dotted = todo.pop()
        parts = dotted.split(".") if dotted else []
        for i in range(len(parts)):            # importing a.b runs a/__init__ and the package's
            parent = ".".join(parts[:i])
            if parent not in seen and parent not in todo:
                todo.append(parent)
        if dotted in seen:
            continue
        seen.add(dotted)
        f = _module_file(package_dir, dotted)
        src = f.read_text()
        if _DYNAMIC_IMPORT.search(src):
            return everything
        package_of = dotted if f.name == "__init__.py" else ".".join(parts[:-1])
        todo += sorted(_imported(src, package_of, package_dir, package) - seen)
    return sorted(_module_file(package_dir, d) for d in seen)


def code_inputs(nb_path: Path, package_dir: Path | None = None, package: str | None = None) -> dict[str, str]:
    """{file relative to the package: SHA-256} of the reachable modules and every package data file."""
    package_dir = package_dir or PACKAGE_DIR
    files = code_files(nb_path, package_dir, package)
    files += [p for p in package_dir.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
              and "__pycache__" not in p.parts]
    return {p.relative_to(package_dir).as_posix(): file_digest(p) for p in sorted(set(files))}
