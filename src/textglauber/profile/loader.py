"""Loading a profile: one YAML file per profile under ``params/``, one section per chapter.

A chapter's section holds its ``notebook``, its ``parameters`` and, where it reads what other
chapters or tools wrote, ``reads`` (chapters of the same profile whose results it reads: it runs
after them and is executed again when their results change) and ``reads_files`` (other files it
reads: a pattern under ``results/`` is taken in the build's results folder, any other relative to
the repository root). The chapters' reads form no cycle.

A profile is named by its file: NAME is letters, digits, ``_`` and ``-`` only and names an existing
``params/NAME.yaml`` (never a path). Every key of a profile is declared in the schema
(:mod:`textglauber.profile.entries`, :mod:`textglauber.profile.chapters`), which
:func:`validate_or_exit` applies in full before the build loads anything.
"""
from __future__ import annotations

import fnmatch
import re
import sys
from pathlib import Path

import yaml

from ..paths import repo_root
from .checks import check_raw, profile_problems
from .errors import NAME_RE, ProfileError, where
from .strict import read_profile_yaml


def params_dir() -> Path:
    return repo_root() / "params"


def profile_path(profile: str) -> Path:
    """``params/NAME.yaml``; a NAME that is not a plain name (a path, say) is refused."""
    if not isinstance(profile, str) or not re.fullmatch(NAME_RE, profile):
        raise ProfileError(f"profile {profile!r}: a profile is the name of a file params/NAME.yaml, NAME made of "
                           f"letters, digits, _ and - (no path); known: {', '.join(profiles())}")
    return params_dir() / f"{profile}.yaml"


def profiles() -> list[str]:
    return sorted(p.stem for p in params_dir().glob("*.yaml") if re.fullmatch(NAME_RE, p.stem))


DERIVED_KEYS = ("profile", "derive", "description", "artifacts", "defaults", "replace", "sizes")


def _renamed(value, replace: dict):
    """``value`` with every string that names a key of ``replace`` (alone, or after a ``kind:``
    prefix such as ``sentence:`` or ``nli:``) swapped for its stand-in, recursively."""
    if isinstance(value, dict):
        return {k: _renamed(v, replace) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, replace) for v in value]
    if isinstance(value, str):
        if value in replace:
            return replace[value]
        kind, sep, rest = value.partition(":")
        if sep and rest in replace:
            return f"{kind}:{replace[rest]}"
    return value


def derive(base: dict, spec: dict, path: Path) -> dict:
    """A profile written as another one with names replaced and counts scaled (``derive:``)."""
    unknown = sorted(set(spec) - set(DERIVED_KEYS))
    if unknown:
        raise ProfileError(f"{where(path)}: a derived profile holds only {DERIVED_KEYS}; found {unknown}")
    out = {"profile": spec.get("profile", path.stem), "description": spec.get("description", base.get("description")),
           "defaults": {**base.get("defaults", {}), **(spec.get("defaults") or {})},
           "artifacts": list(spec.get("artifacts", base.get("artifacts", []))), "derived_from": spec["derive"]}
    replace = spec.get("replace") or {}
    out["chapters"] = _renamed(base["chapters"], replace)
    for chapter, sizes in (spec.get("sizes") or {}).items():
        if chapter not in out["chapters"]:
            raise ProfileError(f"{where(path)}: sizes for chapter {chapter!r}, which {spec['derive']!r} does not have")
        _scale(out["chapters"][chapter]["parameters"], sizes, f"{where(path)}: chapter {chapter!r} in {spec['derive']!r}")
    return out


def _scale(prm: dict, sizes: dict, where: str) -> None:
    """Set the counts in ``sizes`` on ``prm``; a dict of sizes sets counts inside a dict parameter
    (e.g. ``ising_fit: {replicates: 20}``) and leaves its other entries as the base has them."""
    extra = sorted(set(sizes) - set(prm))
    if extra:
        raise ProfileError(f"{where}: sizes {extra} are not parameters")
    for key, value in sizes.items():
        if isinstance(value, dict):
            if not isinstance(prm[key], dict):
                raise ProfileError(f"{where}: sizes give {key!r} entries, but it is not a mapping")
            prm[key] = dict(prm[key])
            _scale(prm[key], value, f"{where}, {key}")
        else:
            prm[key] = value


CHAPTER_KEYS = ("notebook", "parameters", "reads", "reads_files")


def _check_chapters(spec: dict, path: Path) -> None:
    chapters = spec["chapters"]
    for name, ch in chapters.items():
        if "notebook" not in ch or not (repo_root() / ch["notebook"]).exists():
            raise ProfileError(f"{where(path)}: chapter {name!r}: notebook = {ch.get('notebook')!r}: no such notebook "
                               "(book/NAME.ipynb in the repository)")
        unknown = sorted(set(ch) - set(CHAPTER_KEYS))
        if unknown:
            raise ProfileError(f"{where(path)}: chapter {name!r} has unknown keys {unknown}; a chapter holds {CHAPTER_KEYS}")
        ch.setdefault("parameters", {})
        reads = ch.setdefault("reads", [])
        if not isinstance(reads, list) or name in reads or any(r not in chapters for r in reads):
            raise ProfileError(f"{where(path)}: chapter {name!r} reads {reads!r}; 'reads' lists other chapters of "
                             f"this profile ({', '.join(chapters)})")
        files = ch.setdefault("reads_files", [])
        if not isinstance(files, list) or not all(isinstance(f, str) and f for f in files):
            raise ProfileError(f"{where(path)}: chapter {name!r}: 'reads_files' is a list of path patterns")
        timing = [f for f in files if fnmatch.fnmatch(f"results/{spec.get('profile', 'p')}/timings.json", f)]
        if timing:
            raise ProfileError(f"{where(path)}: chapter {name!r} reads {timing}, which match the chapters' wall times "
                             "(results/<profile>/timings.json); the build rewrites them after every execution, "
                             "so such a chapter would run again whenever any other ran (the findings page shows them)")
    build_order(spec, list(chapters))          # raises on a cycle


def build_order(spec: dict, chapters: list[str]) -> list[str]:
    """``chapters`` in the order they must run: each after the chapters it reads (directly or
    through chapters not selected), otherwise in the profile's order. A cycle is an error."""
    order, done, path = [], set(), []

    def visit(name: str) -> None:
        if name in done:
            return
        if name in path:
            cycle = path[path.index(name):] + [name]
            raise ValueError(f"chapters read each other's results in a cycle: {' -> '.join(cycle)}")
        path.append(name)
        for upstream in spec["chapters"][name].get("reads", []):
            visit(upstream)
        path.pop()
        done.add(name)
        if name in chapters:
            order.append(name)

    for name in spec["chapters"]:
        visit(name)
    return order


def load_profile(profile: str, _deriving: tuple[str, ...] = ()) -> dict:
    """The profile as the build runs it (``derive`` applied). Its name, its top-level keys and their
    types, and its chapters' entries are checked here (:func:`textglauber.profile.check_raw`); the
    chapters' parameters by :func:`check_profile`."""
    path = profile_path(profile)
    if not path.is_file():
        raise ProfileError(f"unknown profile {profile!r} (no file params/{profile}.yaml); known: {', '.join(profiles())}")
    if profile in _deriving:
        cycle = " -> ".join(_deriving[_deriving.index(profile):] + (profile,))
        raise ProfileError(f"{where(profile_path(_deriving[-1]))}: derive = {profile!r}: the profiles derive from each "
                           f"other in a cycle ({cycle}); a chain of derive must end at a profile written out in full")
    spec = read_profile_yaml(path)           # bounded, no aliases, no key twice (textglauber.profile.strict)
    check_raw(spec, path)
    if "derive" in spec:
        spec = derive(load_profile(spec["derive"], _deriving + (profile,)), spec, path)
    _check_chapters(spec, path)
    return spec


def check_profile(profile: str, chapters: list[str] | None = None) -> dict:
    """Load ``profile`` and check all of it against its schema (:mod:`textglauber.profile`); return the loaded profile.
    ``chapters`` (names given on a command line) must be chapters of it. Raises :class:`ProfileError`:
    one line per problem."""
    spec = load_profile(profile)            # name, file, top-level keys, derive, chapter entries
    path = profile_path(profile)
    injected = {chapter: chapter_parameters(profile, chapter, spec=spec) for chapter in spec["chapters"]}
    lines = profile_problems(spec, path, injected)
    for name in chapters or []:
        if name not in spec["chapters"]:
            lines.append(f"{where(path)}: --chapter {name!r}: not a chapter of this profile; known: "
                         f"{', '.join(spec['chapters'])}")
    if lines:
        raise ProfileError("\n".join(lines))
    return spec


def validate_or_exit(profile: str, chapters: list[str] | None = None) -> dict:
    """:func:`check_profile` for a command line: each problem on one line of stderr and exit status
    2, no traceback; else the loaded profile."""
    try:
        return check_profile(profile, chapters)
    except ValueError as exc:
        for line in str(exc).splitlines():
            print(line, file=sys.stderr)
        raise SystemExit(2) from None


def chapter_parameters(profile: str, chapter: str, results_root: str | Path | None = None,
                       spec: dict | None = None) -> dict:
    """The flat parameter dict papermill injects into a chapter's notebook (``spec``: the loaded
    profile, when the caller has it)."""
    spec = spec or load_profile(profile)
    if chapter not in spec["chapters"]:
        raise ValueError(f"profile {profile!r} has no chapter {chapter!r}; it has {sorted(spec['chapters'])}")
    params = dict(spec.get("defaults", {}))
    params.update(spec["chapters"][chapter]["parameters"])
    params["profile"] = profile
    params["results_root"] = str(Path(results_root or repo_root() / "results").resolve())
    return params


def chapter_notebooks(profile: str) -> dict[str, str]:
    """{chapter: notebook} of a profile, for the callers that hold only a chapter's parameters;
    empty where the profile cannot be loaded (the models are then found from the parameters alone,
    :func:`textglauber.profile.model_refs`)."""
    try:
        spec = load_profile(profile)
    except ValueError:
        return {}
    return {ch: entry.get("notebook") for ch, entry in spec["chapters"].items()}


def main(argv: list[str] | None = None) -> int:
    """``python -m textglauber.profile PROFILE CHAPTER > p.yaml``: the chapter's papermill parameters,
    once the whole profile has passed its schema (else one line per problem and exit status 2)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m textglauber.profile PROFILE CHAPTER  (prints papermill parameters as YAML)",
              file=sys.stderr)
        return 2
    spec = validate_or_exit(argv[0], [argv[1]])
    print(yaml.safe_dump(chapter_parameters(argv[0], argv[1], spec=spec), sort_keys=False))
    return 0
