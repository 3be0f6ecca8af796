"""The book's plumbing: profiles, notebooks committed clean, and the site checker."""
import json
from pathlib import Path

import pytest

from textglauber import profile as P
from textglauber.bookbuild import execute, site

ROOT = Path(__file__).resolve().parents[2]


def _parameters_cell(nb_path):
    nb = json.loads(Path(nb_path).read_text())
    cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"{nb_path} needs exactly one cell tagged 'parameters'"
    ns = {}
    exec("".join(cells[0]["source"]), ns)
    return nb, {k for k in ns if not k.startswith("__")}


@pytest.mark.parametrize("profile", P.profiles())
def test_every_profile_parameter_exists_in_its_notebook(profile):
    spec = P.load_profile(profile)
    for chapter, ch in spec["chapters"].items():
        _, names = _parameters_cell(ROOT / ch["notebook"])
        prm = P.chapter_parameters(profile, chapter)
        unknown = set(prm) - names
        assert not unknown, f"{profile}/{chapter}: parameters {unknown} are not in the notebook's parameters cell"


def test_source_notebooks_carry_no_outputs():
    for nb_path in (ROOT / "book").glob("*.ipynb"):
        nb = json.loads(nb_path.read_text())
        for c in nb["cells"]:
            if c["cell_type"] == "code":
                assert not c.get("outputs") and not c.get("execution_count"), nb_path.name


def test_toc_lists_every_chapter_of_every_profile():
    toc = (ROOT / "_toc.yml").read_text()
    for profile in P.profiles():
        for ch in P.load_profile(profile)["chapters"].values():
            assert Path(ch["notebook"]).with_suffix("").as_posix() in toc


def test_unknown_profile_and_chapter_are_refused():
    with pytest.raises(ValueError, match="unknown profile"):
        P.load_profile("nope")
    with pytest.raises(ValueError, match="no chapter"):
        P.chapter_parameters("smoke", "nope")


def test_network_loads_are_found_and_links_are_not(tmp_path):
    (tmp_path / "ok.html").write_text('<a href="https://arxiv.org/abs/2605.16378">paper</a>'
                                      '<script src="_static/x.js"></script><link rel="stylesheet" href="_static/a.css">')
    assert site.network_loads(tmp_path) == []
    (tmp_path / "bad.html").write_text('<script src="https://cdn.example.org/mathjax.js"></script>')
    (tmp_path / "s.css").write_text('@import url("https://fonts.example.org/x.css");')
    (tmp_path / "f.html").write_text('<link rel="stylesheet" href="//fonts.example.org/y.css">')
    found = site.network_loads(tmp_path)
    assert len(found) == 3


def test_site_check_wants_a_page_with_a_figure_per_chapter(tmp_path):
    (tmp_path / "book").mkdir()
    chapters = {"a": {"notebook": "book/01_a.ipynb"}, "b": {"notebook": "book/02_b.ipynb"}}
    (tmp_path / "book" / "01_a.html").write_text('<img alt="" src="../_images/fig.png" />')
    (tmp_path / "book" / "02_b.html").write_text("<p>no figure</p>")
    problems = site.check_site(tmp_path, chapters)
    assert problems == ["chapter b: the page shows no figure"]


def test_executed_notebooks_show_paths_relative_to_the_repository(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    root = str(execute.repo_root())
    nb = new_notebook(metadata={"papermill": {"parameters": {"results_root": f"{root}/results"}, "input_path": f"{root}/book/x.ipynb"}})
    injected = new_code_cell(f'results_root = "{root}/results"', metadata={"tags": ["injected-parameters"]})
    done = new_code_cell("print(out)", outputs=[new_output("stream", name="stdout", text=f"results written to {root}/results/smoke/x\n"),
                                                new_output("display_data", data={"text/html": f"<p>{root}</p>", "image/png": "iVBOR"})])
    nb.cells = [injected, done]
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, path)
    execute.tidy_executed(path, output_path=Path(root) / "_build" / "smoke" / "book" / "x.ipynb")
    text = path.read_text()
    assert root not in text
    back = nbformat.read(path, as_version=4)
    assert back.cells[0].source == 'results_root = "results"'
    assert back.cells[1].outputs[0].text == "results written to results/smoke/x\n"
    assert back.cells[1].outputs[1].data["text/html"] == "<p>.</p>" and back.cells[1].outputs[1].data["image/png"] == "iVBOR"
    assert back.metadata.papermill.output_path == "_build/smoke/book/x.ipynb"
    assert back.metadata.papermill.parameters.results_root == "results"


def _prose(path):
    """A page's text with runs of whitespace made single spaces: a Markdown file, or the cells of
    a notebook (markdown and code, where sentences are written too)."""
    import re

    path = Path(path)
    text = path.read_text()
    if path.suffix == ".ipynb":
        text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"])
    return re.sub(r"\s+", " ", text)


def _sentences(text):
    import re

    return re.split(r"(?<=[.;:!?])\s+(?=[A-Z(`$*\[])", text)


def test_no_page_calls_the_drift_a_certificate_of_slow_escape():
    """A positive drift at the one level N = k makes a step up likelier than a step down there and
    no more; exponentially slow escape needs drift against escape across many levels. Every
    sentence that speaks of the drift and of certifying says that it does not certify (the
    margin bound is the theorem)."""
    pages = [*(ROOT / "book").glob("*.md"), *(ROOT / "book").glob("*.ipynb"), ROOT / "README.md",
             ROOT / "src" / "textglauber" / "bookbuild" / "findings.py"]
    wrong = [(p.name, s) for p in pages for s in _sentences(_prose(p))
             if "drift" in s.lower() and "certif" in s.lower() and " not" not in s.lower()]
    assert not wrong, wrong


def test_the_incompatibility_chapter_names_the_tests_that_check_the_scorer():
    """A compatible control gives R = 0 for any joint, so it cannot check the masked-LM scorer (mask
    offset, pruned last layer) or the causal LM; the chapter says so and names the tests that
    compare them with direct model calls, each of which must exist."""
    import re

    text = _prose(ROOT / "book" / "01_incompatibility.ipynb")
    assert "What the control checks, and what it cannot" in text
    named = set(re.findall(r"`(test_\w+)`", text))
    assert {"test_scorer_matches_direct_masked_call", "test_last_layer_on_masked_rows_equals_the_full_encoder",
            "test_causal_logprob_matches_token_by_token"} <= named
    defined = {m for f in (ROOT / "tests").rglob("test_*.py") for m in re.findall(r"^def (test_\w+)", f.read_text(), re.M)}
    assert named <= defined, named - defined


def test_the_traps_chapter_counts_vacuous_bounds_over_perfect_traps_and_says_what_the_plot_compares():
    import inspect

    from textglauber.pages import traps as traps_page

    closing = inspect.getsource(traps_page.closing_blocks)               # the chapter's closing comparison
    text = _prose(ROOT / "book" / "05_traps.ipynb") + closing
    assert "traps_page.closing_blocks(cat," in text
    assert 'int((cat["predicted escape time (steps)"] < 1).sum())' not in text   # every trap, approximate ones at 0
    assert "vacuous(cat)" in closing and "perfect traps where the bound is vacuous" in closing
    assert "holding time of one state" in text and "present at step 0" in text and "censored" in text


def test_the_cost_appendix_no_longer_asks_2x_where_most_steps_change_nothing():
    """Retired: on a CPU the rows memo must score there (one per distinct (state, site) pair the
    chains visit) can cap auto below 2x; the appendix states that ceiling instead."""
    import re

    text = _prose(ROOT / "book" / "90_cost.ipynb")
    targets = re.search(r"The engine's targets are(.*?)\. [A-Z]", text).group(1)
    assert "twice" not in targets and "0.9 or more" not in targets and "20 times" in targets
    assert "A retired target." in text and "metastable.row_bounds(m)" in text
