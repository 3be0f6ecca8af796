"""Papermill runs outside the build (issue 65, item 4; issue 66, one home per parameter): a notebook's
parameters cell holds no values, so ``-p profile P`` alone runs with P's values, a value given with
``-p`` replaces the profile's, and a relative ``results_root`` lands under the repository's
``results/`` wherever papermill was started. All are decided by the first line of every chapter,
``check_chapter`` (test_bad_params checks that it is the first line)."""
from pathlib import Path

import pytest

from textglauber import profile as P
from textglauber import results
from textglauber.profile import notebooks

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted({(c, e["notebook"]) for c, e in P.load_profile("offline")["chapters"].items()})


def same(a, b) -> bool:
    """Equal and of one type (a list is not a tuple, 1 is not 1.0), the type checked at the top."""
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("chapter,notebook", CHAPTERS)
def test_a_profile_named_alone_runs_with_that_profiles_values(chapter, notebook):
    """``-p profile offline`` and nothing else: every value is the offline profile's, as the build
    would inject them, and differs from the smoke run's where the two profiles differ."""
    cell = P.notebook_parameters(ROOT / notebook)
    got = P.check_chapter(notebook, {**cell, "profile": "offline"})
    built = P.check_chapter(notebook, {**cell, **P.chapter_parameters("offline", chapter)})
    assert list(got) == list(built)
    for key in got:
        if key != "results_root":
            assert same(got[key], built[key]), (chapter, key, got[key], built[key])
    smoke = P.check_chapter(notebook, cell)
    differ = [k for k in got if k not in P.INJECTED and got[k] != smoke[k]]
    if chapter != "cost":
        assert differ, f"{chapter}: the offline and smoke profiles give the same values: nothing was tested"


def test_one_value_given_with_the_profile_replaces_the_profiles():
    nb = "book/05_traps.ipynb"
    values = {**P.notebook_parameters(ROOT / nb), "profile": "offline", "chains": 3}
    got = P.check_chapter(nb, values)
    offline = P.chapter_parameters("offline", "traps")
    assert got["chains"] == 3 != offline["chains"] and got["steps"] == offline["steps"]


@pytest.mark.parametrize("name, says", [("nosuch", "profile = 'nosuch': "), (None, "profile = null: ")])
def test_an_unknown_profile_is_refused_in_one_line_naming_it(name, says):
    nb = "book/05_traps.ipynb"
    with pytest.raises(P.ProfileError) as exc:
        P.check_chapter(nb, {**P.notebook_parameters(ROOT / nb), "profile": name})
    line = str(exc.value)
    assert "\n" not in line and line.startswith(f"{nb}: {says}"), line


def test_a_profile_without_the_chapter_is_refused_in_one_line(monkeypatch):
    nb = "book/05_traps.ipynb"
    spec = P.load_profile("smoke")
    spec = {**spec, "chapters": {k: v for k, v in spec["chapters"].items() if k != "traps"}}
    monkeypatch.setattr("textglauber.profile.kernel.load_profile", lambda name: spec)
    with pytest.raises(P.ProfileError, match=r"^book/05_traps.ipynb: profile = 'smoke': the profile runs no chapter"):
        P.check_chapter(nb, P.notebook_parameters(ROOT / nb))


def test_a_cell_that_holds_a_value_is_refused_naming_it(monkeypatch):
    """The check that keeps values out of the cells can fail: a cell that gives ``chains`` a value."""
    nb = "book/05_traps.ipynb"
    assert P.schema_mismatch(nb, ROOT) is None
    read = notebooks.notebook_parameters
    monkeypatch.setattr(notebooks, "notebook_parameters", lambda path: {**read(path), "chains": 4})
    line = P.schema_mismatch(nb, ROOT)
    assert line.startswith(f"{nb}: its parameters cell gives ['chains'] a value (each must be None there")


@pytest.mark.parametrize("start", ["repo", "tmp", "book"])
def test_a_relative_results_folder_is_taken_from_book_wherever_papermill_started(start, tmp_path, monkeypatch):
    monkeypatch.chdir({"repo": ROOT, "tmp": tmp_path, "book": ROOT / "book"}[start])
    nb = "book/05_traps.ipynb"
    got = P.check_chapter(nb, P.notebook_parameters(ROOT / nb))
    assert Path(got["results_root"]) == (ROOT / "results").resolve()


def test_an_absolute_results_folder_is_kept_as_given(tmp_path):
    nb = "book/05_traps.ipynb"
    got = P.check_chapter(nb, {**P.notebook_parameters(ROOT / nb), "results_root": str(tmp_path)})
    assert got["results_root"] == str(tmp_path)


SMOKE = sorted({(c, e["notebook"]) for c, e in P.load_profile("smoke")["chapters"].items()})


@pytest.mark.parametrize("chapter,notebook", SMOKE)
def test_a_bare_papermill_run_runs_the_smoke_profiles_values(chapter, notebook):
    """A run given no parameters at all names itself ``smoke`` (the cell's ``profile``) and runs with
    what the smoke build injects, key by key, from the one home of each value, ``params/smoke.yaml``."""
    cell = P.notebook_parameters(ROOT / notebook)
    assert cell["profile"] == "smoke"
    assert all(v is None for k, v in cell.items() if k not in P.INJECTED), cell
    got = results.manifest_parameters(P.check_chapter(notebook, cell))    # sections as the mappings given
    injected = P.chapter_parameters("smoke", chapter)
    differ = {k: (got.get(k), v) for k, v in injected.items() if k not in P.INJECTED and not same(got.get(k), v)}
    assert not differ, f"{notebook}: a bare run differs from params/smoke.yaml at {differ}"
