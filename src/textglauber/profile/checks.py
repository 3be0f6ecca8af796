"""The checks of a whole profile, run before anything loads: its top level as written
(:func:`check_raw`), then its defaults, artifacts and every chapter's parameters as papermill would
inject them (:func:`profile_problems`); and a chapter's own check of its namespace when its
notebook runs (:func:`check_values`), which returns the values the chapter runs with."""
from __future__ import annotations

import difflib
import re
from pathlib import Path

from pydantic import BaseModel

from ..paths import repo_root
from .chapters import CHAPTERS
from .entries import Defaults, DerivedProfile, Profile
from .errors import ProfileError, show, where
from .messages import RENAMED, problems
from .notebooks import schema_mismatch
from .values import ARTIFACTS

INJECTED = ("profile", "results_root")  # set by the build for every chapter, never by a profile
DEFAULT_KEYS = ("seed", "device", "dtype", "on_missing_model")


def check_raw(spec, path: Path) -> None:
    """The top level of one profile file as written (before ``derive``): its keys, their types,
    ``defaults``, and each chapter's entry (its parameters are checked once the profile is whole)."""
    at = f"{where(path)}: "
    if not isinstance(spec, dict):
        raise ProfileError(f"{at}must hold a mapping (profile, description, defaults, artifacts, chapters)")
    model = DerivedProfile if "derive" in spec else Profile
    lines = problems(model, spec, at)
    if spec.get("profile") is not None and spec.get("profile") != Path(path).stem and not lines:
        lines.append(f"{at}profile = {show(spec['profile'])}: must be the file's own name {Path(path).stem!r} (or left out)")
    if lines:
        raise ProfileError("\n".join(lines))


def chapter_problems(spec: dict, chapter: str, path: Path, injected: dict) -> list[str]:
    """Every problem of one chapter's parameters, as papermill would inject them (``injected``: the
    profile's parameters for it, :func:`textglauber.profile.chapter_parameters`)."""
    at = f"{where(path)}" + (f" (derives from {spec['derived_from']!r})" if spec.get("derived_from") else "")
    at += f": chapter {chapter!r}: "
    entry = spec["chapters"][chapter]
    notebook = entry["notebook"]
    model = CHAPTERS.get(notebook)
    if model is None:
        return [f"{at}notebook = {notebook!r}: has no declared parameters (textglauber.profile.CHAPTERS lists "
                f"{', '.join(CHAPTERS)})"]
    lines = []
    mismatch = schema_mismatch(notebook, repo_root())
    if mismatch:
        lines.append(f"{at}{mismatch}")
    given = entry.get("parameters") or {}
    for key in INJECTED:
        if key in given:
            lines.append(f"{at}{key} = {show(given[key])}: set by the build, not by a profile")
    from_profile = set(given) | set(spec.get("defaults") or {})

    def note(key: str) -> str:
        top = re.split(r"[.\[]", key, maxsplit=1)[0]
        field = model.model_fields.get(top)
        if top in from_profile or field is None or field.is_required():
            return ""
        return " (the schema's default: the profile does not set it)"
    unstated = {f"{at}{key}: missing (required)" for key in DEFAULT_KEYS if key not in injected}   # said once, above
    lines += [ln for ln in problems(model, injected, at, noun=f"a parameter of {notebook}", note=note)
              if ln not in unstated]
    return lines


# what a kernel's namespace holds before a chapter's first cell runs, besides the parameters
KERNEL_NAMES = ("In", "Out", "exit", "quit", "get_ipython", "open")
PARAMETER_TYPES = (bool, int, float, str, list, dict, tuple, type(None))   # what papermill injects


def unknown_parameters(notebook: str, values: dict) -> list[str]:
    """Names in a notebook's namespace that look injected (plain data, as papermill writes them)
    but that its model does not declare: a misspelt parameter (``escpe``), which papermill only
    warns about and runs with the defaults. Modules, functions and classes a cell imported, and
    the kernel's own names, are not parameters."""
    declared = set(CHAPTERS[notebook].model_fields)
    return sorted(name for name, value in values.items()
                  if not name.startswith("_") and name not in declared and name not in KERNEL_NAMES
                  and isinstance(value, PARAMETER_TYPES))


def check_values(notebook: str, values: dict) -> dict:
    """A chapter's parameters as its notebook holds them when it runs (``values``: the notebook's
    namespace, of which the names its model declares are read), checked against that model before
    anything is computed. The build has checked the same values already; this stops a papermill
    run outside the build (``-p window 5``) too, and a name it injects that the chapter does not
    declare (:func:`unknown_parameters`). Raises :class:`ProfileError`, one line per problem.

    Returns the values the chapter runs with: every parameter its model declares, the model's
    default where ``values`` gives none. A section or model entry (a nested mapping, or a list of
    them) is the validated, typed object its model declares (:class:`~textglauber.profile.chapters.Escape`,
    :class:`~textglauber.profile.entries.ModelSpec`, ...), read by attribute; a plain value is as
    ``values`` gives it (an integer stays an integer). :func:`textglauber.results.manifest_parameters`
    writes them back as the mappings they were given as."""
    model = CHAPTERS[notebook]
    given = {name: values[name] for name in model.model_fields if name in values}
    lines = []
    for name in unknown_parameters(notebook, values):
        close = difflib.get_close_matches(name, list(model.model_fields), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        if RENAMED.get(name) in model.model_fields:
            hint = f" (renamed: it is {RENAMED[name]!r} now)"
        lines.append(f"{notebook}: {name} = {show(values[name])}: not a parameter of {notebook}{hint}; "
                     f"its parameters: {', '.join(model.model_fields)}")
    lines += problems(model, given, f"{notebook}: ", noun=f"a parameter of {notebook}")
    if lines:
        raise ProfileError("\n".join(lines))
    typed = model.model_validate(given)
    return {name: _sections(getattr(typed, name), given[name] if name in given else model.default_of(name))
            for name in model.model_fields}


def _sections(typed, given):
    """A parameter as the chapter reads it: the typed object where it is a section or a list of
    entries, else the value as given."""
    if isinstance(typed, BaseModel) or (isinstance(typed, list) and typed and isinstance(typed[0], BaseModel)):
        return typed
    return given


def profile_problems(spec: dict, path: Path, injected: dict[str, dict]) -> list[str]:
    """Every problem of a loaded profile (``spec``, read from ``path``): its defaults, its artifacts and
    each chapter's parameters (``injected[chapter]``: what papermill would inject). One line each."""
    at = f"{where(path)}: "
    lines = []
    defaults = spec.get("defaults") or {}
    for key in DEFAULT_KEYS:
        if key not in defaults:
            lines.append(f"{at}defaults.{key}: missing (every profile states {', '.join(DEFAULT_KEYS)}; "
                         "a derived one may take them from its base)")
    lines += problems(Defaults, defaults, f"{at}defaults.")
    lines += artifact_problems(spec.get("artifacts") or [], at)
    for chapter in spec["chapters"]:
        lines += chapter_problems(spec, chapter, path, injected[chapter])
    return lines


def artifact_problems(names: list[str], at: str) -> list[str]:
    known = ARTIFACTS
    out = []
    for k, name in enumerate(names):
        if name not in known:
            close = difflib.get_close_matches(str(name), known, n=1)
            out.append(f"{at}artifacts[{k}] = {show(name)}: not an artifact"
                       + (f" (did you mean {close[0]!r}?)" if close else "") + f"; known: {', '.join(known)}")
    return out
