"""Papermill runs outside the build (issue 65, item 4): ``-p profile P`` alone is refused, since the
chapter would run with the notebook's defaults under P's name; a relative ``results_root`` lands
under the repository's ``results/`` wherever papermill was started. Both are decided by the first
line of every chapter, ``check_chapter`` (test_bad_params checks that it is the first line)."""
from pathlib import Path

import pytest

from textglauber import profile as P

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted({(c, e["notebook"]) for c, e in P.load_profile("offline")["chapters"].items()})


@pytest.mark.parametrize("chapter,notebook", CHAPTERS)
def test_a_profile_named_without_its_values_is_refused_in_one_line(chapter, notebook):
    defaults = P.notebook_parameters(ROOT / notebook)
    want = P.chapter_parameters("offline", chapter)
    if all(want.get(k) == v for k, v in defaults.items() if k not in P.INJECTED):
        pytest.skip("the notebook's defaults are the offline profile's values")
    with pytest.raises(P.ProfileError) as exc:
        P.check_chapter(notebook, {**defaults, "profile": "offline"})
    line = str(exc.value)
    assert "\n" not in line and line.startswith(f"{notebook}: profile = 'offline' was given without the profile's values")
    assert f"python -m textglauber.profile offline {chapter}" in line


@pytest.mark.parametrize("chapter,notebook", CHAPTERS)
def test_the_profiles_own_values_under_its_name_run(chapter, notebook):
    got = P.check_chapter(notebook, {**P.notebook_parameters(ROOT / notebook), **P.chapter_parameters("offline", chapter)})
    assert got["profile"] == "offline"


def test_one_value_given_with_the_profile_is_checked_as_given_not_refused():
    """A run that sets its own values (a smaller test, say) is the user's choice: only the case where
    nothing but the name was given is refused."""
    nb = "book/05_traps.ipynb"
    values = {**P.notebook_parameters(ROOT / nb), "profile": "offline", "chains": 3}
    assert P.check_chapter(nb, values)["chains"] == 3


def test_an_unknown_profile_name_is_not_this_checks_business():
    nb = "book/05_traps.ipynb"
    assert P.profile_without_values(nb, {**P.notebook_parameters(ROOT / nb), "profile": "nosuch"}) is None


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
    """A run given no parameters at all names itself ``smoke`` (the cell's ``profile``), so the cell's
    defaults must be what the smoke build injects, key by key: otherwise ``results/smoke/<chapter>``
    would hold tables the smoke profile never asked for."""
    defaults = P.notebook_parameters(ROOT / notebook)
    assert defaults["profile"] == "smoke"
    injected = P.chapter_parameters("smoke", chapter)
    differ = {k: (defaults.get(k), v) for k, v in injected.items() if k not in P.INJECTED and defaults.get(k) != v}
    assert not differ, f"{notebook}: the parameters cell differs from params/smoke.yaml at {differ}"
