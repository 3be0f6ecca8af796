"""Re-rendering a chapter without re-running its science.

A chapter's notebook tags the code cells that hold its science ``compute``; the others render
(sentences, views, figures) or do cheap work. The stamp keys the science on everything but the
page modules (``textglauber/pages``, :mod:`textglauber.bookbuild.stamps`), so an edit to a page
module leaves the key as it was and the build re-renders instead of re-running:

- **A full run** executes a copy of the notebook in which every compute cell is bracketed by two
  hidden cells: one before it notes which objects the namespace holds (:func:`mark`), one after
  it stores what the cell bound or touched (:func:`save`), one pickle file per compute cell. The
  helper cells are taken out of the executed notebook again (:func:`without_helpers`).
- **A re-render** executes a copy in which each compute cell is replaced by its own import
  statements and :func:`load`, which puts back what the cell left; every other cell runs as
  written, with the page modules as they are now. The results are not written again: in this
  mode the chapter's manifest compares what the run would write with what its folder holds
  (:data:`textglauber.results.REPLAY_ENV`), and a difference stops the re-render. The executed
  notebook takes each compute cell, source and outputs, from the last full run (:func:`splice`).

What cannot be stored (a loaded model, a function defined in the notebook) is put back as a
stand-in that raises :class:`ReplayUnavailable` when anything uses it; either stop makes the
build run the chapter in full, so a re-render never shows what a full run would not.
"""
from __future__ import annotations

import ast
import copy
import importlib
import io
import os
import pickle
import types
from pathlib import Path

COMPUTE = "compute"
"""Tag of a source notebook's code cells that hold the chapter's science."""

MARK, SAVE, LOAD = "replay-mark", "replay-save", "replay-load"
"""Tags of the helper cells a run adds (and the executed notebook loses again)."""

LIMIT = 256 * 2**20
"""Largest pickle kept for one object; a larger one is stored as unavailable."""

_before: dict[str, object] = {}


class ReplayUnavailable(RuntimeError):
    """A re-rendered cell used an object the last full run could not store: the chapter runs in full."""


class Unavailable:
    """Stands for an object the last full run could not store; any use raises :class:`ReplayUnavailable`."""

    def __init__(self, name: str, why: str):
        object.__setattr__(self, "_said", f"{name} could not be stored by the last full run ({why})")

    def _stop(self, *args, **kwargs):
        raise ReplayUnavailable(object.__getattribute__(self, "_said"))

    __getattr__ = __call__ = __iter__ = __len__ = __getitem__ = __bool__ = __setattr__ = _stop
    __repr__ = __str__ = __format__ = _stop


# --------------------------------------------------------------------------- notebooks
def tags(cell) -> list[str]:
    """A notebook cell's tags (none: an empty list)."""
    return list(cell.get("metadata", {}).get("tags", []))


def compute_cells(nb) -> list[int]:
    """Indices of the code cells tagged :data:`COMPUTE`."""
    return [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code" and COMPUTE in tags(c)]


def _helper(source: str, tag: str, k: int) -> dict:
    return {"cell_type": "code", "execution_count": None, "id": f"{tag}-{k}",
            "metadata": {"tags": [tag, "remove-cell"]}, "outputs": [], "source": source}


def _names_read(source: str) -> list[str]:
    """Global names a cell reads (an object it may change in place, such as the run's generator)."""
    tree = ast.parse(source)
    return sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)})


def _imports(source: str) -> str:
    """The cell's top-level import statements, as written."""
    tree = ast.parse(source)
    return "\n".join(ast.get_source_segment(source, n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)))


def with_snapshots(nb, folder: Path):
    """A copy of ``nb`` whose compute cells store what they leave in ``folder`` (k.pkl for the k-th)."""
    out = copy.deepcopy(nb)
    cells = []
    k = 0
    for c in out["cells"]:
        if c["cell_type"] == "code" and COMPUTE in tags(c):
            src = "".join(c["source"])
            cells.append(_helper(f"import {__name__} as _replay\n_replay.mark(globals())", MARK, k))
            cells.append(c)
            cells.append(_helper(f"_replay.save(globals(), {str(folder)!r}, {k}, {_names_read(src)!r})", SAVE, k))
            k += 1
        else:
            cells.append(c)
    out["cells"] = cells
    return out


def with_loads(nb, folder: Path):
    """A copy of ``nb`` whose compute cells are replaced by their imports and :func:`load`."""
    out = copy.deepcopy(nb)
    for k, i in enumerate(compute_cells(out)):
        c = out["cells"][i]
        src = "".join(c["source"])
        c["source"] = "\n".join(filter(None, [_imports(src), f"import {__name__} as _replay",
                                              f"_replay.load(globals(), {str(folder)!r}, {k})"]))
        c["metadata"] = {**c.get("metadata", {}), "tags": tags(c) + [LOAD]}
        c["outputs"] = []
    return out


def without_helpers(nb):
    """``nb`` without the cells :func:`with_snapshots` added."""
    nb["cells"] = [c for c in nb["cells"] if not ({MARK, SAVE} & set(tags(c)))]
    return nb


def splice(replayed, previous):
    """The re-rendered notebook with each loaded cell replaced by the compute cell of the last full
    run's executed notebook (``previous``), its source, outputs and metadata."""
    ran = [c for c in previous["cells"] if c["cell_type"] == "code" and COMPUTE in tags(c)]
    loaded = [i for i, c in enumerate(replayed["cells"]) if LOAD in tags(c)]
    if len(ran) != len(loaded):
        raise ReplayUnavailable(f"the last full run has {len(ran)} compute cells, the re-render {len(loaded)}")
    for i, c in zip(loaded, ran):
        replayed["cells"][i] = copy.deepcopy(c)
    return replayed


# --------------------------------------------------------------------------- in the kernel
def mark(ns: dict) -> None:
    """Note which object each public name of the namespace holds before a compute cell runs (held
    until :func:`save`, so that no new object can take a freed one's place unseen)."""
    _before.clear()
    _before.update({k: v for k, v in ns.items() if not k.startswith("_")})


class _HoldsModel(Exception):
    pass


class _NoModels(pickle.Pickler):
    """A pickler that stops at a torch module: a loaded model is not stored (the re-render's own
    cells load it again where they need it), so a snapshot holds results, not weights."""

    def __init__(self, *args, **kwargs):
        import torch

        super().__init__(*args, **kwargs)
        self._module = torch.nn.Module          # looked up once: persistent_id sees every object pickled

    def persistent_id(self, obj):
        if isinstance(obj, self._module):
            raise _HoldsModel
        return None


def _pack(obj):
    import torch

    if isinstance(obj, types.ModuleType):
        return ("module", obj.__name__)
    if isinstance(obj, torch.Generator):
        return ("torch-generator", obj.get_state(), str(obj.device))
    if isinstance(obj, (types.FunctionType, type)) and obj.__module__ == "__main__":
        return ("unavailable", f"{obj.__qualname__} is defined in the notebook")
    try:
        buf = io.BytesIO()
        _NoModels(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
        data = buf.getvalue()
    except _HoldsModel:
        return ("unavailable", f"{type(obj).__name__} holds a model")
    except Exception as exc:       # anything pickle refuses: a handle, a closure
        return ("unavailable", f"{type(obj).__name__}: {type(exc).__name__}")
    if len(data) > LIMIT:
        return ("unavailable", f"{type(obj).__name__} of {len(data) / 2**20:.0f} MiB")
    return ("value", data)


def save(ns: dict, folder: str, k: int, read: list[str]) -> None:
    """Store, for the k-th compute cell, every public name it bound anew (a stand-in where it cannot
    be stored) and every name it read that can be stored (it may have changed that object in place),
    written whole or not at all."""
    bound = [n for n, v in ns.items() if not n.startswith("_") and (n not in _before or _before[n] is not v)]
    packed = {n: _pack(ns[n]) for n in bound}
    for n in read:                 # what could not be stored of these is left as the re-render's own cells make it
        if n in ns and n not in packed and not n.startswith("_") and (p := _pack(ns[n]))[0] != "unavailable":
            packed[n] = p
    path = Path(folder) / f"{k}.pkl"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        pickle.dump(packed, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)
    _before.clear()


def load(ns: dict, folder: str, k: int) -> None:
    """Put back what the k-th compute cell left (:func:`save`); a generator gets its state back in
    place, so that whatever holds it sees the same draws as in the full run."""
    import torch

    with open(Path(folder) / f"{k}.pkl", "rb") as f:
        packed = pickle.load(f)
    for name, (kind, *rest) in packed.items():
        if kind == "module":
            ns[name] = importlib.import_module(rest[0])
        elif kind == "torch-generator":
            gen = ns.get(name)
            if not isinstance(gen, torch.Generator):
                gen = ns[name] = torch.Generator(device=rest[1])
            gen.set_state(rest[0])
        elif kind == "value":
            ns[name] = pickle.loads(rest[0])
        else:
            ns[name] = Unavailable(name, rest[0])
