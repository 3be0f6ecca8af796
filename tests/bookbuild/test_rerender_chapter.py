"""A prose edit on a built chapter, the real one (issue 66): chapter 3 on the smoke profile, built in
a copy of this checkout by the build's own command line, then rebuilt after an edit to one sentence
of the notebook's Markdown and after an edit to one sentence that ``pages/crossover/`` writes. Each
rebuild leaves the chapter's tables byte-identical and untouched (same bytes, same modification
time), does not run the science, and puts the new sentence on the page. The mechanism's own tests,
on a small chapter, are in test_rerender.py; how long a rebuild takes is measured, not tested here
(README, "What a build executes again")."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGE_MODULE = Path("src/textglauber/pages/crossover/phase.py")
PAGE_OLD, PAGE_NEW = "rows scored, ", "rows scored (an edited page sentence), "
PROSE_NEW = "An edited sentence of the notebook's prose."

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A copy of this checkout whose smoke profile runs chapter 3 and the chapter it reads (bounds)."""
    root = tmp_path_factory.mktemp("clone") / "repo"
    shutil.copytree(ROOT, root, ignore=shutil.ignore_patterns(".git", ".venv", "_build", "results", "__pycache__",
                                                             "*.pyc", ".pytest_cache"))
    spec_path = root / "params" / "smoke.yaml"
    spec = yaml.safe_load(spec_path.read_text())
    spec["chapters"] = {k: v for k, v in spec["chapters"].items() if k in ("bounds", "crossover")}
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return root


def _build(root: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(root / "src")}     # the copy's package, not this checkout's
    done = subprocess.run([sys.executable, "-m", "textglauber.bookbuild", "--profile", "smoke", "--no-book",
                           "--results", str(root / "results"), "--build-dir", str(root / "_build")],
                          cwd=root, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _tables(root: Path) -> dict:
    folder = root / "results" / "smoke" / "crossover"
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir()) if p.is_file()}


def _page(root: Path) -> str:
    """Every output and Markdown cell of the chapter as the site would show it."""
    nb = json.loads((root / "_build" / "smoke" / "book" / "03_crossover.ipynb").read_text())
    return json.dumps([c.get("outputs", []) if c["cell_type"] == "code" else c["source"] for c in nb["cells"]])


def _edit_markdown(root: Path) -> None:
    path = root / "book" / "03_crossover.ipynb"
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if c["cell_type"] == "markdown" and len("".join(c["source"])) > 200)
    cell["source"] = ["".join(cell["source"]) + "\n\n" + PROSE_NEW]
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def test_prose_and_page_edits_on_the_built_crossover_chapter_keep_its_tables(clone):
    first = _build(clone)
    assert "executing book/03_crossover.ipynb" in first, first[-2000:]
    before, page = _tables(clone), _page(clone)
    assert "manifest.json" in before and any(name.endswith(".parquet") for name in before)
    assert PAGE_OLD in page and PAGE_NEW not in page and PROSE_NEW not in page

    _edit_markdown(clone)
    out = _build(clone)
    assert "executing book/03" not in out and "re-render" not in out, out[-2000:]      # nothing executes
    assert _tables(clone) == before, "a Markdown edit touched the chapter's tables"
    assert PROSE_NEW in _page(clone), out[-2000:]

    module = clone / PAGE_MODULE
    source = module.read_text()
    assert source.count(PAGE_OLD) == 1
    module.write_text(source.replace(PAGE_OLD, PAGE_NEW))
    out = _build(clone)
    assert "crossover: re-rendered in" in out and "runs in full" not in out, out[-2000:]
    assert "executing book/03" not in out and "executing book/02" not in out, out[-2000:]
    assert _tables(clone) == before, "a page edit touched the chapter's tables"
    page = _page(clone)
    assert PAGE_NEW in page and PROSE_NEW in page, out[-2000:]
