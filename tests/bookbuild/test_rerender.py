"""A page edit re-renders a chapter from its last full run (issue 66): real papermill runs of a
small chapter whose science counts its own executions. An edit to a page module re-renders without
running the science, leaves the tables byte-identical and untouched and shows the new sentence; an
edit to the science, a page edit that would change a table, and a render cell that needs what the
last run could not store all run the chapter in full."""
import json
import os
from pathlib import Path

import nbformat
import pytest
import yaml

from textglauber import profile as P
from textglauber import reach as R
from textglauber.bookbuild import execute, replay
from textglauber.bookbuild import stamps as C
from textglauber.profile import loader as profile_loader

PROFILE = "t"

SCIENCE = '''import os
from pathlib import Path


def measure(n, gen):
    """The science: counts its calls in a file beside the results (COUNTER) and draws from gen."""
    counter = Path(os.environ["COUNTER"])
    counter.write_text(str(int(counter.read_text() or 0) + 1) if counter.exists() else "1")
    import torch
    return [float(torch.rand(1, generator=gen)) * n for _ in range(3)]
'''
PAGE = '''def sentence(values):
    return f"The largest value is {max(values):.3f}."


def table_label():
    return "values"
'''

SETUP = '''import pandas as pd
from IPython.display import Markdown, display
from fakepkg import science
from fakepkg.pages import words
from textglauber import results

out, gen = results.start_chapter(results_root, profile, "a", seed)'''
COMPUTE = '''values = science.measure(n, gen)
handle = open(os.devnull)          # what no pickle holds
draw = float(torch.rand(1, generator=gen))'''
RENDER = '''display(Markdown(words.sentence(values)))
later = float(torch.rand(1, generator=gen))        # the generator goes on as in the full run'''
WRITE = '''written = results.write_tables(out, {"values": pd.DataFrame({words.table_label(): values, "later": later})})
results.write_manifest(out, parameters={"n": n}, models=[], seed=seed, tables=written)'''


def _chapter(path: Path, render: str = RENDER) -> None:
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell
    nb.cells = [nbformat.v4.new_markdown_cell("# A\n\nprose"),
                code('profile = "t"\nresults_root = "."\nseed = 0\nn = 2', metadata={"tags": ["parameters"]}),
                code("import os\nimport torch\n" + SETUP),
                code(COMPUTE, metadata={"tags": ["compute"]}),
                code(render), code(WRITE)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    pkg = root / "src" / "fakepkg"
    (pkg / "pages").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""fake"""\n')
    (pkg / "science.py").write_text(SCIENCE)
    (pkg / "pages" / "__init__.py").write_text("")
    (pkg / "pages" / "words.py").write_text(PAGE)
    (root / "book").mkdir()
    _chapter(root / "book" / "a.ipynb")
    for f in ("_config.yml", "_toc.yml"):
        (root / f).write_text("")
    (root / "params").mkdir()
    spec = {"profile": PROFILE, "defaults": {"seed": 0}, "chapters": {"a": {"notebook": "book/a.ipynb", "parameters": {"n": 3}}}}
    (root / "params" / f"{PROFILE}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    for mod in (C, profile_loader, execute):
        monkeypatch.setattr(mod, "repo_root", lambda: root)
    monkeypatch.setattr(R, "PACKAGE_DIR", pkg)
    monkeypatch.setattr(R, "PACKAGE", "fakepkg")
    monkeypatch.setattr(execute, "record_timing", lambda *a: None)
    monkeypatch.setattr(P, "chapter_parameters", lambda profile, chapter, results_root=None, spec=None: {
        "n": 3, "seed": 0, "profile": PROFILE, "results_root": str(results_root)})
    import textglauber
    here = str(Path(textglauber.__file__).resolve().parents[1])     # the kernel imports this checkout's package
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root / "src"), here, os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("COUNTER", str(tmp_path / "counter"))
    return root


@pytest.fixture
def build(project, tmp_path, capsys):
    results = tmp_path / "results"

    def run():
        spec = P.load_profile(PROFILE)
        staged = execute.stage(PROFILE, project / "_build")
        execute.run_chapters(PROFILE, spec, ["a"], staged, results)
        return capsys.readouterr().out

    run.results, run.staged, run.counter = results, project / "_build" / PROFILE, Path(os.environ["COUNTER"])
    return run


def _files(folder: Path) -> dict:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir()) if p.is_file()}


def _page(build) -> str:
    cells = nbformat.read(build.staged / "book" / "a.ipynb", as_version=4).cells
    return json.dumps([c.outputs for c in cells if c.source.startswith("display(Markdown(words")])


@pytest.mark.slow
def test_a_page_edit_re_renders_without_the_science_and_leaves_the_tables(project, build):
    build()
    assert build.counter.read_text() == "1"
    folder = build.results / PROFILE / "a"
    tables = _files(folder)
    page = project / "src" / "fakepkg" / "pages" / "words.py"
    page.write_text(PAGE.replace("The largest value is", "At most"))
    said = build()
    assert "re-rendering" in said and "runs:" not in said, said
    assert build.counter.read_text() == "1"                      # the science did not run
    assert _files(folder) == tables                              # byte-identical and untouched
    assert "At most" in _page(build) and "The largest value is" not in _page(build)
    executed = nbformat.read(C.executed_notebook(build.staged, "a"), as_version=4)
    compute = [c for c in executed.cells if "compute" in c.metadata.get("tags", [])]
    assert len(compute) == 1 and compute[0].source == COMPUTE    # the science's cell as it ran, not its stand-in
    assert not [c for c in executed.cells if {replay.MARK, replay.SAVE, replay.LOAD} & set(c.metadata.get("tags", []))]
    assert "skipped a" in build()                                # and the stamp says so now
    (project / "src" / "fakepkg" / "science.py").write_text(SCIENCE + "\n# an edit to the science\n")
    said = build()
    assert "a runs: its inputs changed: code (science.py)" in said
    assert build.counter.read_text() == "2"


@pytest.mark.slow
def test_a_page_edit_that_would_change_a_table_runs_the_chapter_in_full(project, build):
    build()
    page = project / "src" / "fakepkg" / "pages" / "words.py"
    page.write_text(PAGE.replace('return "values"', 'return "measured"'))
    said = build()
    assert "ReplayMismatch" in said and "the chapter runs in full" in said, said
    assert build.counter.read_text() == "2"
    assert "measured" in (build.results / PROFILE / "a" / "manifest.json").read_text() or \
        b"measured" in (build.results / PROFILE / "a" / "values.parquet").read_bytes()


@pytest.mark.slow
def test_a_render_cell_that_needs_what_was_not_stored_runs_the_chapter_in_full(project, build):
    _chapter(project / "book" / "a.ipynb", render=RENDER + "\nhandle.close()")
    build()
    (project / "src" / "fakepkg" / "pages" / "words.py").write_text(PAGE.replace("largest", "biggest"))
    said = build()
    assert "ReplayUnavailable" in said and "handle could not be stored" in said, said
    assert build.counter.read_text() == "2" and "biggest" in _page(build)


@pytest.mark.slow
def test_the_generator_goes_on_as_in_the_full_run(project, build):
    """A render cell draws from the run's generator after the compute cell: the re-render restores the
    generator's state, so the table it checks (which holds that draw) comes out the same; were the
    state not restored, the check would fail and the chapter would run in full."""
    build()
    (project / "src" / "fakepkg" / "pages" / "words.py").write_text(PAGE + "\n# a comment\n")
    said = build()
    assert "re-rendered" in said and "runs in full" not in said, said


def test_snapshots_name_what_a_compute_cell_bound_and_stand_in_for_what_cannot_be_stored(tmp_path):
    import torch

    ns = {"gen": torch.Generator().manual_seed(1), "kept": [1], "torch": torch}
    replay.mark(ns)
    ns["values"] = [1.0, 2.0]
    ns["handle"] = open(os.devnull)
    ns["kept"].append(2)                 # changed in place: stored because the cell reads it
    float(torch.rand(1, generator=ns["gen"]))
    replay.save(ns, str(tmp_path), 0, ["gen", "kept", "torch"])
    expected = float(torch.rand(1, generator=ns["gen"]))
    ns["handle"].close()
    fresh = {"gen": torch.Generator().manual_seed(1)}
    replay.load(fresh, str(tmp_path), 0)
    assert fresh["values"] == [1.0, 2.0] and fresh["kept"] == [1, 2] and fresh["torch"] is torch
    assert float(torch.rand(1, generator=fresh["gen"])) == expected
    with pytest.raises(replay.ReplayUnavailable, match="handle could not be stored"):
        fresh["handle"].close()


def _page_names(nb) -> set[str]:
    """Names a notebook binds to the page modules (``from textglauber.pages import x as y``)."""
    import ast

    names = set()
    for c in nb.cells:
        if c.cell_type == "code":
            for node in ast.walk(ast.parse(c.source)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("textglauber.pages"):
                    names |= {a.asname or a.name for a in node.names}
    return names


def _compute_cells_using_pages(nb) -> list[str]:
    import ast

    pages = _page_names(nb)
    return [c.source.splitlines()[0] for c in nb.cells if c.cell_type == "code" and replay.COMPUTE in c.metadata.get("tags", [])
            and {n.id for n in ast.walk(ast.parse(c.source)) if isinstance(n, ast.Name)} & pages]


@pytest.mark.parametrize("notebook", sorted(p.name for p in (Path(__file__).resolve().parents[2] / "book").glob("*.ipynb")))
def test_no_compute_cell_of_a_chapter_calls_a_page_module(notebook):
    """A compute cell's outputs are kept from the last full run, so none may show what a page module
    writes: else a page edit would not reach the page."""
    nb = nbformat.read(Path(__file__).resolve().parents[2] / "book" / notebook, as_version=4)
    assert _compute_cells_using_pages(nb) == []


def test_a_compute_cell_that_calls_a_page_module_is_caught():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from textglauber.pages import crossover as crossover_page"),
                nbformat.v4.new_code_cell("x = crossover_page.plot(t)", metadata={"tags": ["compute"]})]
    assert _compute_cells_using_pages(nb) == ["x = crossover_page.plot(t)"]


def test_a_snapshot_holds_no_model(tmp_path):
    """An object that holds a torch module (a loaded model inside a scorer) is not stored: it stands in."""
    import torch

    ns = {}
    replay.mark(ns)
    ns["scorer"] = {"model": torch.nn.Linear(2, 2), "name": "x"}
    ns["table"] = [1, 2]
    replay.save(ns, str(tmp_path), 0, [])
    fresh = {}
    replay.load(fresh, str(tmp_path), 0)
    assert fresh["table"] == [1, 2]
    with pytest.raises(replay.ReplayUnavailable, match="scorer could not be stored .*holds a model"):
        fresh["scorer"]["model"]


@pytest.mark.slow
def test_a_re_render_loads_no_model_check_but_a_re_render_that_stops_is_checked_before_it_runs(project, build,
                                                                                                monkeypatch):
    """The build resolves models before compute only for chapters that will compute (the plan's run
    and maybe): a re-render is not checked, and one that stops is checked before the full run, so a
    missing model still stops it with one line before the science runs."""
    build()
    asked = []

    def refuse(profile, chapters):
        asked.append(list(chapters))
        raise SystemExit("model 'x' is missing")

    monkeypatch.setattr(execute, "preflight", refuse)
    page = project / "src" / "fakepkg" / "pages" / "words.py"

    def again():
        return execute.run_chapters(PROFILE, P.load_profile(PROFILE), ["a"], execute.stage(PROFILE, project / "_build"),
                                    build.results, checked=set())

    page.write_text(PAGE.replace("The largest value is", "At most"))
    assert again() == [] and asked == []                         # re-rendered: nothing to check
    page.write_text(PAGE.replace('return "values"', 'return "measured"'))
    with pytest.raises(SystemExit, match="model 'x' is missing"):
        again()                                                  # the re-render stops; the check comes first
    assert asked == [["a"]] and build.counter.read_text() == "1"  # and the science did not run
