"""The book's plumbing: profiles, notebooks committed clean, and the site checker."""
import json
from pathlib import Path

import pytest

from textglauber import build, params

ROOT = Path(__file__).resolve().parents[1]


def _parameters_cell(nb_path):
    nb = json.loads(Path(nb_path).read_text())
    cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"{nb_path} needs exactly one cell tagged 'parameters'"
    ns = {}
    exec("".join(cells[0]["source"]), ns)
    return nb, {k for k in ns if not k.startswith("__")}


@pytest.mark.parametrize("profile", params.profiles())
def test_every_profile_parameter_exists_in_its_notebook(profile):
    spec = params.load_profile(profile)
    for chapter, ch in spec["chapters"].items():
        _, names = _parameters_cell(ROOT / ch["notebook"])
        prm = params.chapter_parameters(profile, chapter)
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
    for profile in params.profiles():
        for ch in params.load_profile(profile)["chapters"].values():
            assert Path(ch["notebook"]).with_suffix("").as_posix() in toc


def test_unknown_profile_and_chapter_are_refused():
    with pytest.raises(ValueError, match="unknown profile"):
        params.load_profile("nope")
    with pytest.raises(ValueError, match="no chapter"):
        params.chapter_parameters("smoke", "nope")


def test_network_loads_are_found_and_links_are_not(tmp_path):
    (tmp_path / "ok.html").write_text('<a href="https://arxiv.org/abs/2605.16378">paper</a>'
                                      '<script src="_static/x.js"></script><link rel="stylesheet" href="_static/a.css">')
    assert build.network_loads(tmp_path) == []
    (tmp_path / "bad.html").write_text('<script src="https://cdn.example.org/mathjax.js"></script>')
    (tmp_path / "s.css").write_text('@import url("https://fonts.example.org/x.css");')
    (tmp_path / "f.html").write_text('<link rel="stylesheet" href="//fonts.example.org/y.css">')
    found = build.network_loads(tmp_path)
    assert len(found) == 3


def test_site_check_wants_a_page_with_a_figure_per_chapter(tmp_path):
    (tmp_path / "book").mkdir()
    chapters = {"a": {"notebook": "book/01_a.ipynb"}, "b": {"notebook": "book/02_b.ipynb"}}
    (tmp_path / "book" / "01_a.html").write_text('<img alt="" src="../_images/fig.png" />')
    (tmp_path / "book" / "02_b.html").write_text("<p>no figure</p>")
    problems = build.check_site(tmp_path, chapters)
    assert problems == ["chapter b: the page shows no figure"]


def test_executed_notebooks_show_paths_relative_to_the_repository(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    root = str(build.repo_root())
    nb = new_notebook(metadata={"papermill": {"parameters": {"results_root": f"{root}/results"}, "input_path": f"{root}/book/x.ipynb"}})
    injected = new_code_cell(f'results_root = "{root}/results"', metadata={"tags": ["injected-parameters"]})
    done = new_code_cell("print(out)", outputs=[new_output("stream", name="stdout", text=f"results written to {root}/results/smoke/x\n"),
                                                new_output("display_data", data={"text/html": f"<p>{root}</p>", "image/png": "iVBOR"})])
    nb.cells = [injected, done]
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, path)
    build.tidy_executed(path, output_path=Path(root) / "_build" / "smoke" / "book" / "x.ipynb")
    text = path.read_text()
    assert root not in text
    back = nbformat.read(path, as_version=4)
    assert back.cells[0].source == 'results_root = "results"'
    assert back.cells[1].outputs[0].text == "results written to results/smoke/x\n"
    assert back.cells[1].outputs[1].data["text/html"] == "<p>.</p>" and back.cells[1].outputs[1].data["image/png"] == "iVBOR"
    assert back.metadata.papermill.output_path == "_build/smoke/book/x.ipynb"
    assert back.metadata.papermill.parameters.results_root == "results"
