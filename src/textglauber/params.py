"""Profiles: one YAML file per profile under ``params/``, one section per chapter."""
from __future__ import annotations

from pathlib import Path

import yaml

from .results import repo_root


def profile_path(profile: str) -> Path:
    return repo_root() / "params" / f"{profile}.yaml"


def profiles() -> list[str]:
    return sorted(p.stem for p in (repo_root() / "params").glob("*.yaml"))


def load_profile(profile: str) -> dict:
    path = profile_path(profile)
    if not path.exists():
        raise ValueError(f"unknown profile {profile!r}; known: {', '.join(profiles())}")
    spec = yaml.safe_load(path.read_text())
    if not isinstance(spec, dict) or "chapters" not in spec:
        raise ValueError(f"{path} must hold a mapping with a 'chapters' section")
    for name, ch in spec["chapters"].items():
        if "notebook" not in ch or not (repo_root() / ch["notebook"]).exists():
            raise ValueError(f"{path}: chapter {name!r} names no existing notebook")
        ch.setdefault("parameters", {})
    return spec


def chapter_parameters(profile: str, chapter: str, results_root: str | Path | None = None) -> dict:
    """The flat parameter dict papermill injects into a chapter's notebook."""
    spec = load_profile(profile)
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
