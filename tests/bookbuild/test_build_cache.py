"""The build's cache (issue 23): a chapter's key changes with each of its inputs and with nothing
else; the build skips what is complete and unchanged, executes the rest in data order, and a chapter
killed midway leaves nothing that a later run takes for complete. Papermill is replaced by a fake
that copies the notebook and writes one result file, on a fake project in a temporary folder."""
import json
import os
from pathlib import Path

import nbformat
import papermill
import pytest
import yaml

from textglauber import profile as P
from textglauber.paths import repo_root
from textglauber.profile import loader as profile_loader
from textglauber import reach as R
from textglauber.bookbuild import execute
from textglauber.bookbuild import stamps as C

PROFILE = "t"


def _notebook(path: Path, prose: str, code: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(prose),
                nbformat.v4.new_code_cell("n = 1", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(code)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def _edit_cell(path: Path, index: int, **changes) -> None:
    nb = nbformat.read(path, as_version=4)
    for k, v in changes.items():
        nb.cells[index][k] = v
    nbformat.write(nb, path)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A repository with a package ``fakepkg`` (a imports b; c stands alone; one data file), three
    chapters (b reads a's results; c reads a data file) and one model and corpus on disk."""
    root = tmp_path / "repo"
    pkg = root / "src" / "fakepkg"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""fake"""\n')
    (pkg / "a.py").write_text("from . import b\n\ndef f():\n    return b.g()\n")
    (pkg / "b.py").write_text("def g():\n    return 1\n")
    (pkg / "c.py").write_text("def h():\n    return 2\n")
    (pkg / "data" / "words.txt").write_text("alpha\n")
    (root / "book").mkdir()
    _notebook(root / "book" / "a.ipynb", "# A\n\nprose of a", "from fakepkg import a\nx = a.f()")
    _notebook(root / "book" / "b.ipynb", "# B\n\nprose of b", "import fakepkg.c\ny = 2")
    _notebook(root / "book" / "c.ipynb", "# C\n\nprose of c", "z = 3")
    (root / "model").mkdir()
    (root / "model" / "weights.bin").write_bytes(b"\x00\x01")
    (root / "corpus.txt").write_text("one text\n")
    (root / "notes").mkdir()
    (root / "notes" / "n.txt").write_text("read by c\n")
    for f in ("_config.yml", "_toc.yml"):
        (root / f).write_text("")
    (root / "params").mkdir()
    spec = {"profile": PROFILE, "defaults": {"seed": 0},
            "chapters": {"a": {"notebook": "book/a.ipynb",
                               "parameters": {"n": 3, "models": [{"name": str(root / "model"), "corpus": str(root / "corpus.txt")}]}},
                         "b": {"notebook": "book/b.ipynb", "reads": ["a"], "parameters": {"n": 1}},
                         "c": {"notebook": "book/c.ipynb", "reads_files": ["notes/*.txt"],
                               "parameters": {"n": 1}}}}
    (root / "params" / f"{PROFILE}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    for mod in (C, profile_loader, execute):
        monkeypatch.setattr(mod, "repo_root", lambda: root)
    monkeypatch.setattr(R, "PACKAGE_DIR", pkg)
    monkeypatch.setattr(R, "PACKAGE", "fakepkg")
    monkeypatch.setattr(C, "versions", lambda: {"python": "3.x", "torch": "1"})
    return root


def _set_param(root: Path, chapter: str, key: str, value) -> None:
    path = root / "params" / f"{PROFILE}.yaml"
    spec = yaml.safe_load(path.read_text())
    spec["chapters"][chapter]["parameters"][key] = value
    path.write_text(yaml.safe_dump(spec, sort_keys=False))


def _keys(results: Path) -> dict:
    spec = P.load_profile(PROFILE)
    return {ch: C.digest(C.chapter_inputs(spec, PROFILE, ch, results)) for ch in spec["chapters"]}


def _write_results(results: Path, chapter: str, table: str, created: str = "2026-01-01") -> None:
    folder = results / PROFILE / chapter
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "table.parquet").write_text(table)
    (folder / "manifest.json").write_text(json.dumps({"created": created, "git": {"commit": created},
                                                      "parameters": {"n": 3}, "tables": ["table"]}))


def test_key_changes_with_each_input_and_nothing_else(project, monkeypatch, tmp_path):
    root, results = project, tmp_path / "results"
    _write_results(results, "a", "v1")
    (results / PROFILE / "timings.json").write_text(json.dumps({"a": {"seconds": 1}, "c": {"seconds": 1}}))
    before = _keys(results)

    def expect(change, *moved):
        nonlocal before
        change()
        now = _keys(results)
        assert {ch for ch in now if now[ch] != before[ch]} == set(moved), change.__doc__
        before = now

    def prose():
        """a markdown cell of a"""
        _edit_cell(root / "book" / "a.ipynb", 0, source="# A\n\nother prose of a")

    def code():
        """a code cell of a"""
        _edit_cell(root / "book" / "a.ipynb", 2, source="from fakepkg import a\nx = a.f() + 1")

    def tag():
        """a cell tag of b (how its page renders)"""
        _edit_cell(root / "book" / "b.ipynb", 2, metadata={"tags": ["remove-input"]})

    def parameter():
        """a parameter of a"""
        _set_param(root, "a", "n", 4)

    def module_imported():
        """a module that a's notebook imports"""
        (root / "src" / "fakepkg" / "a.py").write_text("from . import b\n\ndef f():\n    return b.g() + 0\n")

    def module_reached():
        """a module that the imported module imports"""
        (root / "src" / "fakepkg" / "b.py").write_text("def g():\n    return 2\n")

    def module_of_b():
        """c.py: imported by b's notebook only"""
        (root / "src" / "fakepkg" / "c.py").write_text("def h():\n    return 3\n")

    def package_data():
        """package data: every chapter could read it"""
        (root / "src" / "fakepkg" / "data" / "words.txt").write_text("beta\n")

    def model():
        """the weights of a local model"""
        (root / "model" / "weights.bin").write_bytes(b"\x00\x02")

    def corpus():
        """a local corpus"""
        (root / "corpus.txt").write_text("another text\n")

    def upstream_table():
        """a's result table, read by b"""
        _write_results(results, "a", "v2")

    def upstream_manifest():
        """a's manifest parameters, read by b"""
        m = results / PROFILE / "a" / "manifest.json"
        m.write_text(json.dumps({**json.loads(m.read_text()), "parameters": {"n": 4}}))

    def read_file():
        """a file that c's reads_files names"""
        (root / "notes" / "n.txt").write_text("changed\n")

    def env():
        """the version of a package that computes the numbers"""
        monkeypatch.setattr(C, "versions", lambda: {"python": "3.x", "torch": "2"})

    for change, moved in ((code, "a"), (tag, "b"), (parameter, "a"), (module_imported, "a"),
                          (module_reached, "a"), (module_of_b, "b"), (package_data, "abc"), (model, "a"), (corpus, "a"),
                          (upstream_table, "b"), (upstream_manifest, "b"), (read_file, "c"),
                          (env, "abc")):
        expect(change, *moved)

    # ... and nothing else
    def touch():
        """modification times of every file"""
        for f in list(root.rglob("*")) + list(results.rglob("*")):
            os.utime(f, (1, 1))

    def unrelated_module():
        """a module no notebook reaches"""
        (root / "src" / "fakepkg" / "unused.py").write_text("X = 1\n")

    def outputs_in_source():
        """outputs saved into a source notebook"""
        nb = nbformat.read(root / "book" / "a.ipynb", as_version=4)
        nb.cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="hi")]
        nb.cells[2].execution_count = 7
        nbformat.write(nb, root / "book" / "a.ipynb")

    def volatile_manifest():
        """the time and commit in a's manifest"""
        m = results / PROFILE / "a" / "manifest.json"
        m.write_text(json.dumps({**json.loads(m.read_text()), "created": "2027-05-05", "git": {"commit": "f00"}}))

    def timings():
        """the chapters' wall times (rewritten after every execution)"""
        (results / PROFILE / "timings.json").write_text(json.dumps({"a": {"seconds": 2}, "c": {"seconds": 99}}))

    def stamps_and_site():
        """stamps, executed notebooks, a site: outputs, not inputs"""
        C.stamps_dir(root / "_build" / PROFILE).mkdir(parents=True)
        C.stamp_path(root / "_build" / PROFILE, "a").write_text("{}")

    for change in (prose, touch, unrelated_module, outputs_in_source, volatile_manifest, timings, stamps_and_site):
        expect(change)
    # the results folder is not an input: the same results elsewhere give the same keys
    moved = tmp_path / "elsewhere"
    os.rename(results, moved)
    assert _keys(moved) == before


def test_code_closure_follows_imports_and_falls_back_to_the_whole_package(project):
    pkg = project / "src" / "fakepkg"
    reached = [p.name for p in R.code_files(project / "book" / "a.ipynb")]
    assert reached == ["__init__.py", "a.py", "b.py"]
    assert [p.name for p in R.code_files(project / "book" / "c.ipynb")] == []
    assert "data/words.txt" in R.code_inputs(project / "book" / "c.ipynb")      # data: every chapter
    (pkg / "b.py").write_text("import importlib\nmod = importlib.import_module('fakepkg.c')\n")
    assert {p.name for p in R.code_files(project / "book" / "a.ipynb")} == {"__init__.py", "a.py", "b.py", "c.py"}


def test_code_closure_enters_sub_packages(project):
    """Importing a sub-package reaches its ``__init__``, the modules that imports (relative imports
    one and two levels up included), and not its other modules."""
    pkg = project / "src" / "fakepkg"
    (pkg / "engine").mkdir()
    (pkg / "engine" / "__init__.py").write_text("from .core import run\n")
    (pkg / "engine" / "core.py").write_text("from .. import b\nfrom ..c import h\n\ndef run():\n    return b.g()\n")
    (pkg / "engine" / "unused.py").write_text("x = 1\n")
    _notebook(project / "book" / "e.ipynb", "# E", "from fakepkg import engine\nengine.run()")
    _notebook(project / "book" / "f.ipynb", "# F", "from fakepkg.engine.unused import x")
    rel = lambda files: sorted(p.relative_to(pkg).as_posix() for p in files)
    assert rel(R.code_files(project / "book" / "e.ipynb")) == ["__init__.py", "b.py", "c.py", "engine/__init__.py",
                                                               "engine/core.py"]
    assert rel(R.code_files(project / "book" / "f.ipynb")) == ["__init__.py", "b.py", "c.py", "engine/__init__.py",
                                                               "engine/core.py", "engine/unused.py"]
    assert "engine/core.py" in R.code_inputs(project / "book" / "e.ipynb")


def test_the_real_chapters_reach_the_modules_they_call():
    reached = R.code_files(repo_root() / P.load_profile("smoke")["chapters"]["crossover"]["notebook"])
    files = {p.name for p in reached}
    assert {"growth.py", "semantics.py", "coupling.py", "driver.py", "pairs.py", "scorers.py", "loading.py", "__init__.py"} <= files
    assert not [p for p in reached if p.relative_to(R.PACKAGE_DIR).parts[0] == "bench"]   # no module of the benchmark
    assert not [p for p in reached if p.relative_to(R.PACKAGE_DIR).parts[0] == "build"]   # no module of the build
    from textglauber import corpus
    assert set(C.CORPUS_PACKAGES) | {"msmarco"} == set(corpus.SOURCES)   # a new corpus needs an identity rule


# --------------------------------------------------------------------------- the build loop, papermill faked
class FakePapermill:
    """Copies the notebook, writes ``table.parquet`` from the parameter ``n`` (and the value of the
    chapter it reads), and can be told to die midway through a chapter."""

    def __init__(self, results: Path):
        self.results, self.ran, self.kill = results, [], None

    def __call__(self, input_path, output_path, parameters, **kwargs):
        chapter = Path(input_path).stem
        self.ran.append(chapter)
        folder = self.results / PROFILE / chapter
        folder.mkdir(parents=True, exist_ok=True)
        nb = nbformat.read(input_path, as_version=4)
        nb.metadata["papermill"] = {"output_path": output_path, "input_path": str(input_path)}
        nb.cells[-1].outputs = [nbformat.v4.new_output(                 # what the last code cell printed
            "stream", name="stdout", text=f"results written to {execute.repo_root()}/results/{PROFILE}/{chapter}\n")]
        nbformat.write(nb, output_path)
        if self.kill == chapter:
            (folder / "table.parquet").write_text("half")
            raise KeyboardInterrupt(f"killed during {chapter}")
        upstream = (self.results / PROFILE / "a" / "table.parquet").read_text() if chapter == "b" else ""
        (folder / "table.parquet").write_text(f"n={parameters['n']} {upstream}")
        (folder / "manifest.json").write_text(json.dumps({"created": str(len(self.ran)), "parameters": parameters,
                                                          "tables": ["table"]}))


@pytest.fixture
def builder(project, tmp_path, monkeypatch):
    """Runs the build loop on the fake project. Every execution records a new wall time, which no
    chapter reads."""
    results = tmp_path / "results"
    fake = FakePapermill(results)
    monkeypatch.setattr(papermill, "execute_notebook", fake)
    record, clock = execute.record_timing, iter(range(1, 10**6))
    monkeypatch.setattr(execute, "record_timing", lambda folder, chapter, seconds, probe=None: record(folder, chapter, next(clock), probe))

    def run(chapters=None, forced=None):
        fake.ran.clear()
        spec = P.load_profile(PROFILE)
        staged = execute.stage(PROFILE, project / "_build")
        execute.run_chapters(PROFILE, spec, chapters or list(spec["chapters"]), staged, results, forced)
        return list(fake.ran)

    run.fake, run.results, run.staged = fake, results, project / "_build" / PROFILE
    return run


def test_unchanged_chapters_are_skipped_and_say_why(project, builder, capsys):
    assert builder() == ["a", "b", "c"]
    for ch in "abc":        # the executed notebooks the build keeps name no folder of this machine
        kept = C.executed_notebook(builder.staged, ch).read_text()
        assert f"results written to results/{PROFILE}/{ch}" in kept and str(project) not in kept
    capsys.readouterr()
    assert builder() == []
    out = capsys.readouterr().out
    for ch in "abc":
        assert f"skipped {ch}: inputs unchanged" in out
    table = (builder.results / PROFILE / "b" / "table.parquet").read_bytes()
    _edit_cell(project / "book" / "b.ipynb", 0, source="# B\n\nnew prose")       # prose of one chapter
    assert builder() == []                      # re-rendered, not executed
    page = nbformat.read(builder.staged / "book" / "b.ipynb", as_version=4)
    assert page.cells[0].source == "# B\n\nnew prose" and "results written to" in page.cells[2].outputs[0].text
    assert (builder.results / PROFILE / "b" / "table.parquet").read_bytes() == table
    _edit_cell(project / "book" / "b.ipynb", 2, source="import fakepkg.c\ny = 3")   # its code: it runs
    assert builder() == ["b"]
    assert "b runs: its inputs changed: notebook" in capsys.readouterr().out
    _edit_cell(project / "book" / "a.ipynb", 2, source="from fakepkg import a\nx = a.f() * 1")   # same results: b stays
    assert builder() == ["a"]
    _set_param(project, "a", "n", 5)             # new results of a: b runs again, after a
    assert builder() == ["a", "b"]
    assert "b runs: its inputs changed: reads (a)" in capsys.readouterr().out
    (project / "notes" / "n.txt").write_text("changed\n")              # a file c reads
    assert builder() == ["c"]
    assert "c runs: its inputs changed: files (notes/n.txt)" in capsys.readouterr().out
    (builder.results / PROFILE / "b" / "table.parquet").unlink()
    assert builder() == ["b"]
    assert "result files are missing or changed (table.parquet)" in capsys.readouterr().out
    C.executed_notebook(builder.staged, "c").unlink()
    assert builder() == ["c"]
    assert "c runs: the executed notebook is missing" in capsys.readouterr().out
    (builder.staged / "book" / "c.ipynb").unlink()              # a page is rendered again, not executed
    assert builder() == []
    assert "hide-input" in nbformat.read(builder.staged / "book" / "c.ipynb", as_version=4).cells[2].metadata.tags
    assert builder(forced="--force") == ["a", "b", "c"]
    assert builder(["b"], forced="named with --chapter") == ["b"]


def test_readers_run_after_what_they_read(project, builder):
    spec = yaml.safe_load((project / "params" / f"{PROFILE}.yaml").read_text())
    spec["chapters"] = {k: spec["chapters"][k] for k in ("b", "c", "a")}     # b listed before a
    (project / "params" / f"{PROFILE}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert builder() == ["a", "b", "c"]


def test_a_chapter_killed_midway_is_never_taken_for_complete(project, builder):
    builder.fake.kill = "b"                      # the first run dies in its second chapter
    with pytest.raises(KeyboardInterrupt):
        builder()
    assert not C.stamp_path(builder.staged, "b").exists()
    assert C.read_stamp(C.stamp_path(builder.staged, "a"))
    source = nbformat.read(project / "book" / "b.ipynb", as_version=4)
    assert nbformat.read(builder.staged / "book" / "b.ipynb", as_version=4) == source   # not the partial one
    builder.fake.kill = None
    assert builder() == ["b", "c"]               # a is complete and skipped (c never ran)
    assert (builder.results / PROFILE / "b" / "table.parquet").read_text().startswith("n=1 n=3")

    before = (builder.staged / "book" / "a.ipynb").read_bytes()
    builder.fake.kill = "a"                      # a complete chapter, re-executed and killed
    with pytest.raises(KeyboardInterrupt):
        builder(forced="--force")
    spec = P.load_profile(PROFILE)
    # its old stamp stays (a run that fails costs nothing that was there), but it vouches for the
    # old results only: the half-written table makes the chapter incomplete
    assert C.stamp_path(builder.staged, "a").exists()
    assert not C.status(C.stamp_path(builder.staged, "a"), C.chapter_inputs(spec, PROFILE, "a", builder.results),
                        C.executed_notebook(builder.staged, "a"), builder.results / PROFILE / "a")[0]
    assert (builder.staged / "book" / "a.ipynb").read_bytes() == before
    with pytest.raises(SystemExit, match="reads the results of a, which are not complete"):
        builder(["b"], forced="named with --chapter")           # b will not read a's half results
    builder.fake.kill = None
    assert builder() == ["a"]                    # a's results came out as b read them: b is skipped
    assert C.status(C.stamp_path(builder.staged, "a"), C.chapter_inputs(spec, PROFILE, "a", builder.results),
                    C.executed_notebook(builder.staged, "a"), builder.results / PROFILE / "a")[0]


def test_stamps_are_written_whole_or_not_at_all(tmp_path, monkeypatch):
    path = tmp_path / "s.json"
    C.write_json_atomic(path, {"v": 1})

    def die(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(C.json, "dump", die)
    with pytest.raises(KeyboardInterrupt):
        C.write_json_atomic(path, {"v": 2})
    assert json.loads(path.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


def test_stamps_left_where_the_site_build_reads_are_moved(project, builder):
    assert builder() == ["a", "b", "c"]
    legacy = builder.staged / ".stamps"
    C.stamps_dir(builder.staged).rename(legacy)
    assert builder() == []                       # found again, and nothing is left for Sphinx to read
    assert not legacy.exists()


def test_current_prose_is_merged_into_a_papermill_run_and_never_onto_other_code():
    """The page of a skipped chapter: the source's markdown, each code cell's outputs from the run,
    papermill's injected cell right after the parameters cell; code that differs keeps the run as is."""
    new = nbformat.v4.new_markdown_cell
    source = nbformat.v4.new_notebook()
    source.cells = [new("# T\n\nold words"), nbformat.v4.new_code_cell("n = 1", metadata={"tags": ["parameters"]}),
                    new("between"), nbformat.v4.new_code_cell("print(n)")]
    ran = nbformat.from_dict(json.loads(json.dumps(source)))
    ran.cells.insert(2, nbformat.v4.new_code_cell("n = 5", metadata={"tags": ["injected-parameters"]}))
    ran.cells[4].outputs = [nbformat.v4.new_output("stream", name="stdout", text="5\n")]
    source.cells[0].source = "# T\n\nnew words"
    source.cells.insert(3, new("a paragraph added"))
    merged = execute.with_current_prose(nbformat.from_dict(json.loads(json.dumps(ran))), source)
    assert [c.source for c in merged.cells] == ["# T\n\nnew words", "n = 1", "n = 5", "between", "a paragraph added",
                                                "print(n)"]
    assert merged.cells[5].outputs[0].text == "5\n"
    source.cells[4].source = "print(n + 1)"                   # other code: the run's notebook as it was
    kept = execute.with_current_prose(nbformat.from_dict(json.loads(json.dumps(ran))), source)
    assert [c.source for c in kept.cells] == [c.source for c in ran.cells]
