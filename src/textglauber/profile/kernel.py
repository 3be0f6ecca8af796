"""What a chapter's kernel checks when it starts (``globals().update(check_chapter(...))``, the first
line of every chapter): the values it runs with, each one its profile's unless papermill injected
another (:func:`profile_values`), checked against its model (:func:`textglauber.profile.checks.check_values`),
and where a relative results folder lies. Imports :mod:`.checks` and :mod:`.loader`; neither imports it."""
from __future__ import annotations

from pathlib import Path

from ..paths import repo_root
from .chapters import CHAPTERS
from .checks import check_values
from .errors import ProfileError, show
from .loader import chapter_parameters, load_profile


def check_chapter(notebook: str, values: dict) -> dict:
    """The values a chapter runs with (:func:`textglauber.profile.checks.check_values`): its profile's
    where ``values`` holds None (:func:`profile_values`), with ``results_root`` made absolute
    (:func:`anchored_results`). Raises :class:`ProfileError`, one line per problem."""
    out = check_values(notebook, profile_values(notebook, values))
    if not Path(out["results_root"]).is_absolute():          # the build injects an absolute one
        out["results_root"] = str(anchored_results(out["results_root"]))
    return out


def profile_values(notebook: str, values: dict) -> dict:
    """``values`` (a kernel's namespace) with each parameter that holds None (a notebook's parameters
    cell declares every one as None) taken from the profile ``values["profile"]`` names, at that
    profile's value for this notebook's chapter, or left out where the profile does not set it (its
    schema default then stands, as for a parameter ``values`` does not hold). A parameter papermill injected keeps its value, so ``-p profile
    offline`` runs with the offline profile's values and ``-p seq_len 12`` with one of them changed.
    Raises :class:`ProfileError` naming the profile when it cannot be read or has no such chapter."""
    model = CHAPTERS.get(notebook)
    if model is None:
        return dict(values)
    unset = [name for name in model.model_fields if name in values and values[name] is None]
    if not unset:
        return dict(values)                       # the build injects every value
    name = values.get("profile")
    try:
        spec = load_profile(name)
    except ValueError as exc:
        raise ProfileError(f"{notebook}: profile = {show(name)}: {exc}") from None
    chapter = next((c for c, e in spec["chapters"].items() if e.get("notebook") == notebook), None)
    if chapter is None:
        raise ProfileError(f"{notebook}: profile = {show(name)}: the profile runs no chapter of this notebook; "
                           f"its chapters: {', '.join(spec['chapters'])}")
    base = chapter_parameters(name, chapter, spec=spec)
    out = dict(values)
    for key in unset:
        if key in base:
            out[key] = base[key]
        else:
            out.pop(key, None)
    return out


def anchored_results(results_root: str) -> Path:
    """The results folder a chapter writes to: a relative ``results_root`` (the notebooks' default
    ``../results``) is taken from ``book/``, where the notebooks lie, wherever papermill was started,
    so that a run without ``--cwd book`` still writes under the repository's ``results/``."""
    path = Path(results_root)
    return path if path.is_absolute() else (repo_root() / "book" / path).resolve()
