"""The package's house rules, read from its source: no module reaches for another module's
private names, and the package's imports form no circle."""
import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def _modules_under(root: Path):
    for f in root.rglob("*.py"):
        parts = f.relative_to(root).with_suffix("").parts
        yield (".".join(parts[:-1]) if parts[-1] == "__init__" else ".".join(parts)), f, parts[-1] == "__init__"


def _modules():
    return _modules_under(SRC)


def _resolve(name: str, level: int, here: str, is_pkg: bool) -> str:
    if not level:
        return name
    base = here.split(".") if is_pkg else here.split(".")[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _imports(f, here, is_pkg):
    """(module imported, names taken from it, local aliases of imported modules)."""
    tree = ast.parse(f.read_text(encoding="utf-8"))
    out, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = _resolve(node.module or "", node.level, here, is_pkg)
            out.append((mod, [a.name for a in node.names]))
            for a in node.names:
                aliases[a.asname or a.name] = f"{mod}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                out.append((a.name, []))
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
    return tree, out, aliases


def test_no_private_name_crosses_a_module():
    modules = {m for m, _, _ in _modules()}
    crossing = []
    for here, f, is_pkg in _modules():
        tree, imports, aliases = _imports(f, here, is_pkg)
        for mod, names in imports:
            if mod.startswith("textglauber") and mod != here:
                crossing += [f"{here}: from {mod} import {n}" for n in names
                             if n.startswith("_") and not n.startswith("__") and f"{mod}.{n}" not in modules]
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and aliases.get(node.value.id, "") in modules
                    and aliases[node.value.id] != here):
                crossing.append(f"{here}: {node.value.id}.{node.attr}")
    assert not crossing


def test_a_private_name_taken_across_modules_is_caught(tmp_path, monkeypatch):
    """The check above can fail: a module that takes another's private name is named."""
    pkg = tmp_path / "textglauber"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def _hidden():\n    return 1\n")
    (pkg / "b.py").write_text("from . import a\nfrom .a import _hidden\nx = a._hidden()\n")
    monkeypatch.setattr(__import__(__name__), "SRC", tmp_path)
    try:
        test_no_private_name_crosses_a_module()
    except AssertionError as e:
        assert "textglauber.b: from textglauber.a import _hidden" in str(e) and "textglauber.b: a._hidden" in str(e)
    else:
        raise AssertionError("the check passed a private name taken across modules")


def _shadowed(src: Path) -> list[str]:
    """Submodules that their package's ``__init__`` hides behind another object of the same name
    (``from .x import x`` makes ``import pkg.x`` hand out the function, not the module)."""
    out = []
    for init in src.rglob("__init__.py"):
        here = ".".join(init.parent.relative_to(src).parts)
        subs = {p.stem for p in init.parent.glob("*.py") if p.stem != "__init__"} | \
               {p.name for p in init.parent.iterdir() if (p / "__init__.py").is_file()}
        tree, imports, _ = _imports(init, here, True)
        for mod, names in imports:
            out += [f"{here}.{n}" for n in names if n in subs and mod != here]
    return sorted(out)


def test_no_package_hides_a_submodule_behind_a_name_it_exports():
    assert _shadowed(SRC) == []


def test_a_hidden_submodule_is_caught(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .catalogue import catalogue\n")
    (pkg / "catalogue.py").write_text("def catalogue():\n    return 1\n")
    assert _shadowed(tmp_path) == ["pkg.catalogue"]


def _map_names(doc: str) -> set[str]:
    import re
    return set(re.findall(r"``([a-z_]+)``", doc))


def test_the_package_map_names_every_module_and_package_and_nothing_else():
    """The map in ``textglauber/__init__`` is how a newcomer finds a chapter's science: it names every
    top-level module and package, and no name that is not one (words in double backquotes that are
    functions, such as ``start_chapter``, are allowed when the package defines them)."""
    import textglauber

    pkg = SRC / "textglauber"
    present = {p.stem for p in pkg.glob("*.py") if p.stem != "__init__"} | \
              {p.name for p in pkg.iterdir() if (p / "__init__.py").is_file()}
    named = _map_names(textglauber.__doc__)
    assert present - named == set(), "missing from the map"
    strays = {n for n in named - present if not any(n in f.read_text() for f in pkg.rglob("*.py") if f.name != "__init__.py")}
    assert strays == set(), "named in the map but nowhere in the package"


def _signatures(root: Path, name: str) -> dict[str, tuple]:
    """Per module under ``root``: (positional parameters, keyword-only parameters without a default) of
    every top-level function called ``name``."""
    out = {}
    for mod, f, _ in _modules_under(root):
        for node in ast.parse(f.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                a = node.args
                required = [k.arg for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is None]
                out[mod] = (tuple(p.arg for p in a.posonlyargs + a.args), tuple(required))
    return out


RUN_SHAPE = ("specs", "run")


def _run_models_problems(root: Path) -> list[str]:
    """Every chapter's ``run_models`` takes the model entries and the run's settings (generator,
    device, dtype, what to do with a missing model, scheduler: :class:`textglauber.scheduler.RunSettings`)
    as its only positional parameters; its protocol follows as keywords."""
    return [f"{mod}: {sig}" for mod, sig in sorted(_signatures(root, "run_models").items()) if sig[0] != RUN_SHAPE]


def test_every_run_models_has_one_shape():
    assert len(_signatures(SRC, "run_models")) >= 4
    assert _run_models_problems(SRC) == []


def test_a_run_models_of_another_shape_is_caught(tmp_path):
    (tmp_path / "a.py").write_text("def run_models(specs, run, *, n): ...\n")
    (tmp_path / "b.py").write_text("def run_models(mlms, score, *, gen, device='auto', dtype='auto', on_missing_model='skip'): ...\n")
    (tmp_path / "c.py").write_text("def run_models(specs, *, gen, device, dtype, on_missing_model, n): ...\n")
    assert _run_models_problems(tmp_path) == ["b: (('mlms', 'score'), ('gen',))", "c: (('specs',), ('gen', 'device', 'dtype', 'on_missing_model', 'n'))"]


def test_the_model_list_has_one_spelling():
    """``models`` everywhere: no profile, notebook or module reads ``mlms`` or ``models_`` (the schema
    refuses both, naming the new key: tests/bookbuild/test_bad_params.py)."""
    import re

    root = SRC.parent
    files = [*(root / "params").glob("*.yaml"), *(root / "book").glob("*.ipynb"), *SRC.rglob("*.py")]
    old = [f.name for f in files if re.search(r"\b(mlms|models_)\b", f.read_text(encoding="utf-8"))
           and f.name != "messages.py"]
    assert old == []


NOTEBOOK_CODE_LINES = 150


def _code_lines(nb: dict) -> int:
    """The lines of a notebook's code cells that are neither blank nor comments."""
    return sum(1 for c in nb["cells"] if c["cell_type"] == "code"
               for line in "".join(c["source"]).splitlines() if line.strip() and not line.strip().startswith("#"))


def test_every_chapter_notebook_keeps_its_logic_in_the_library():
    """A notebook reads like a chapter: at most NOTEBOOK_CODE_LINES lines of code, its sentences and
    sections in pages/ and its science in the library; the count sees an over-long notebook."""
    import json

    book = SRC.parent / "book"
    counts = {p.name: _code_lines(json.loads(p.read_text(encoding="utf-8"))) for p in sorted(book.glob("*.ipynb"))}
    assert len(counts) >= 7
    assert {k: v for k, v in counts.items() if v > NOTEBOOK_CODE_LINES} == {}
    long = {"cells": [{"cell_type": "code", "source": ["x = 1\n"] * (NOTEBOOK_CODE_LINES + 1) + ["# a note\n", "\n"]},
                      {"cell_type": "markdown", "source": ["words\n"] * 500}]}
    assert _code_lines(long) == NOTEBOOK_CODE_LINES + 1
