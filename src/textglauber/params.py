"""Profiles: one YAML file per profile under ``params/``, one section per chapter.

A chapter's section holds its ``notebook``, its ``parameters`` and, where it reads what other
chapters or tools wrote, ``reads`` (chapters of the same profile whose results it reads: it runs
after them and is executed again when their results change) and ``reads_files`` (other files it
reads: a pattern under ``results/`` is taken in the build's results folder, any other relative to
the repository root). The chapters' reads form no cycle.
"""
from __future__ import annotations

import fnmatch
from pathlib import Path

import yaml

from .results import repo_root


def profile_path(profile: str) -> Path:
    return repo_root() / "params" / f"{profile}.yaml"


def profiles() -> list[str]:
    return sorted(p.stem for p in (repo_root() / "params").glob("*.yaml"))


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
        raise ValueError(f"{path}: a derived profile holds only {DERIVED_KEYS}; found {unknown}")
    out = {"profile": spec.get("profile", path.stem), "description": spec.get("description", base.get("description")),
           "defaults": {**base.get("defaults", {}), **(spec.get("defaults") or {})},
           "artifacts": list(spec.get("artifacts", base.get("artifacts", []))), "derived_from": spec["derive"]}
    replace = spec.get("replace") or {}
    out["chapters"] = _renamed(base["chapters"], replace)
    for chapter, sizes in (spec.get("sizes") or {}).items():
        if chapter not in out["chapters"]:
            raise ValueError(f"{path}: sizes for chapter {chapter!r}, which {spec['derive']!r} does not have")
        _scale(out["chapters"][chapter]["parameters"], sizes, f"{path}: chapter {chapter!r} in {spec['derive']!r}")
    return out


def _scale(prm: dict, sizes: dict, where: str) -> None:
    """Set the counts in ``sizes`` on ``prm``; a dict of sizes sets counts inside a dict parameter
    (e.g. ``ising_fit: {replicates: 20}``) and leaves its other entries as the base has them."""
    extra = sorted(set(sizes) - set(prm))
    if extra:
        raise ValueError(f"{where}: sizes {extra} are not parameters")
    for key, value in sizes.items():
        if isinstance(value, dict):
            if not isinstance(prm[key], dict):
                raise ValueError(f"{where}: sizes give {key!r} entries, but it is not a mapping")
            prm[key] = dict(prm[key])
            _scale(prm[key], value, f"{where}, {key}")
        else:
            prm[key] = value


CHAPTER_KEYS = ("notebook", "parameters", "reads", "reads_files")


def _check_chapters(spec: dict, path: Path) -> None:
    chapters = spec["chapters"]
    for name, ch in chapters.items():
        if "notebook" not in ch or not (repo_root() / ch["notebook"]).exists():
            raise ValueError(f"{path}: chapter {name!r} names no existing notebook")
        unknown = sorted(set(ch) - set(CHAPTER_KEYS))
        if unknown:
            raise ValueError(f"{path}: chapter {name!r} has unknown keys {unknown}; a chapter holds {CHAPTER_KEYS}")
        ch.setdefault("parameters", {})
        reads = ch.setdefault("reads", [])
        if not isinstance(reads, list) or name in reads or any(r not in chapters for r in reads):
            raise ValueError(f"{path}: chapter {name!r} reads {reads!r}; 'reads' lists other chapters of "
                             f"this profile ({', '.join(chapters)})")
        files = ch.setdefault("reads_files", [])
        if not isinstance(files, list) or not all(isinstance(f, str) and f for f in files):
            raise ValueError(f"{path}: chapter {name!r}: 'reads_files' is a list of path patterns")
        timing = [f for f in files if fnmatch.fnmatch(f"results/{spec.get('profile', 'p')}/timings.json", f)]
        if timing:
            raise ValueError(f"{path}: chapter {name!r} reads {timing}, which match the chapters' wall times "
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


def load_profile(profile: str) -> dict:
    path = profile_path(profile)
    if not path.exists():
        raise ValueError(f"unknown profile {profile!r}; known: {', '.join(profiles())}")
    spec = yaml.safe_load(path.read_text())
    if isinstance(spec, dict) and "derive" in spec:
        if spec["derive"] == profile:
            raise ValueError(f"{path} derives from itself")
        spec = derive(load_profile(spec["derive"]), spec, path)
    if not isinstance(spec, dict) or "chapters" not in spec:
        raise ValueError(f"{path} must hold a mapping with a 'chapters' section")
    _check_chapters(spec, path)
    return spec


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


MODEL_KEYS = ("model", "models", "models_", "mlms", "control", "classifier", "topic_scorer")


def model_names(params: dict) -> list[str]:
    """Every model a chapter's parameters name (for the pre-flight check)."""
    names = []
    for key, val in params.items():
        if key in MODEL_KEYS:
            items = val if isinstance(val, list) else [val]
            for it in items:
                if isinstance(it, dict) and "name" in it:
                    names.append(it["name"])
                    emb = str(it.get("embedder", ""))
                    if emb.startswith("sentence:") and not emb.startswith("sentence:package:"):
                        names.append(emb.split(":", 1)[1])
                elif isinstance(it, str) and it.startswith("nli:"):
                    names.append(it.split(":", 1)[1])
                elif isinstance(it, str) and it and not it.startswith("embedding:"):
                    names.append(it)
    return names


def corpus_names(params: dict) -> list[str]:
    """Every corpus a chapter's parameters name (for the pre-flight check)."""
    names = []
    for key, val in params.items():
        if key in MODEL_KEYS:
            for it in (val if isinstance(val, list) else [val]):
                if isinstance(it, dict) and it.get("corpus"):
                    names.append(str(it["corpus"]))
    return names


if __name__ == "__main__":       # python -m textglauber.params PROFILE CHAPTER > p.yaml
    import sys

    if len(sys.argv) != 3:
        sys.exit("usage: python -m textglauber.params PROFILE CHAPTER  (prints papermill parameters as YAML)")
    print(yaml.safe_dump(chapter_parameters(sys.argv[1], sys.argv[2]), sort_keys=False))
