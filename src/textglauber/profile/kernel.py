"""What a chapter's kernel checks when it starts (``globals().update(check_chapter(...))``, the first
line of every chapter): its parameters against its model (:func:`textglauber.profile.checks.check_values`),
a papermill run given a profile's name without its values, and where a relative results folder lies.
Imports :mod:`.checks` and :mod:`.loader`; neither imports it."""
from __future__ import annotations

from pathlib import Path

from ..paths import repo_root
from .checks import INJECTED, check_values
from .errors import ProfileError, show
from .loader import chapter_parameters, load_profile
from .notebooks import notebook_parameters


def check_chapter(notebook: str, values: dict) -> dict:
    """The values a chapter runs with (:func:`textglauber.profile.checks.check_values`), once they are
    known to be the named profile's (:func:`profile_without_values`), with ``results_root`` made
    absolute (:func:`anchored_results`). Raises :class:`ProfileError`, one line per problem."""
    out = check_values(notebook, values)
    line = profile_without_values(notebook, out)
    if line:
        raise ProfileError(line)
    if not Path(out["results_root"]).is_absolute():          # the build injects an absolute one
        out["results_root"] = str(anchored_results(out["results_root"]))
    return out


def anchored_results(results_root: str) -> Path:
    """The results folder a chapter writes to: a relative ``results_root`` (the notebooks' default
    ``../results``) is taken from ``book/``, where the notebooks lie, wherever papermill was started,
    so that a run without ``--cwd book`` still writes under the repository's ``results/``."""
    path = Path(results_root)
    return path if path.is_absolute() else (repo_root() / "book" / path).resolve()


def profile_without_values(notebook: str, values: dict) -> str | None:
    """Why a papermill run given ``-p profile P`` and nothing else must not run, or None: every other
    parameter still holds the notebook's default (the smoke profile's values) while P's differ, so the
    chapter would write results under P's name that P never asked for. The build, and a run given
    what ``python -m textglauber.profile P CHAPTER`` prints, inject them all."""
    path = repo_root() / notebook
    if not path.is_file():
        return None                                   # no notebook, no defaults a run could have kept
    defaults = notebook_parameters(path)
    profile = values.get("profile")
    if profile is None or profile == defaults.get("profile"):
        return None
    if any(values.get(k) != v for k, v in defaults.items() if k not in INJECTED):
        return None                                   # values were given: they were checked as they are
    try:
        spec = load_profile(profile)
    except ValueError:
        return None
    chapter = next((c for c, e in spec["chapters"].items() if e.get("notebook") == notebook), None)
    if chapter is None:
        return None
    want = chapter_parameters(profile, chapter, spec=spec)
    differ = [k for k in defaults if k not in INJECTED and k in want and want[k] != values.get(k)]
    if not differ:
        return None
    k = differ[0]
    return (f"{notebook}: profile = {profile!r} was given without the profile's values: {len(differ)} parameters hold "
            f"the notebook's defaults (first: {k} = {show(values.get(k))}, the profile says {show(want[k])}); "
            f"pass them all: python -m textglauber.profile {profile} {chapter} > p.yaml, then papermill ... -f p.yaml")
