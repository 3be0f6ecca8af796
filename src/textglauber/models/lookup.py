"""From a model's name to where its files are (:func:`resolve`), without loading anything: a hub id,
a local directory, ``tiny-*``, ``trained:RUN[@CHECKPOINT]`` or ``package:NAME``."""
from __future__ import annotations

import json
from pathlib import Path

from .. import hub
from ..paths import local_path, models_root, standins_root
from . import packaged, tiny
from .source import ModelSource, ModelUnavailableError


def resolve(name: str) -> ModelSource:
    """Find a model's files without loading it; raise one clear error if impossible."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a model name must be a non-empty string, got {name!r}")
    if name.startswith("tiny-"):
        return ModelSource(name=name, path=str(tiny.build(name)), is_hub=False)
    if name.startswith("trained:"):
        return _trained(name)
    if name.startswith("package:"):
        registry = packaged.REGISTRY
        key = name.split(":", 1)[1]
        if key not in registry:
            raise ModelUnavailableError(
                f"unknown packaged model {name!r}; known: {', '.join('package:' + k for k in sorted(registry))}")
        return registry[key]()
    local = local_path(name)
    if local.is_dir():
        return ModelSource(name=name, path=str(local), is_hub=False)
    if name.startswith((".", "/", "~")):
        raise ModelUnavailableError(f"model {name!r}: no such local directory ({local})")
    repo, _, revision = name.partition("@")
    if not hub.is_repo_id(repo):
        fix = (" Fix: python -m textglauber.standins  (./run_all.sh --profile standin builds them first)"
               if local.is_relative_to(standins_root()) else "")
        raise ModelUnavailableError(
            f"model {name!r}: no such local directory ({local}), and the name is not a Hugging Face hub id either.{fix}")
    if hub.cached(repo, revision or None):
        return ModelSource(name=name, path=repo, is_hub=True, revision=revision or None)
    if hub.reachable():
        return ModelSource(name=name, path=repo, is_hub=True, revision=revision or None)
    raise ModelUnavailableError(
        f"model {name!r} is not in the local Hugging Face cache and the hub cannot be reached "
        f"(no network, or HF_HUB_OFFLINE is set). Fix: run once with network access so it is "
        f"cached under HF_HOME, or pass a local directory that holds the model, or use a profile "
        f"whose models install as packages (params/offline.yaml).")


def _trained(name: str) -> ModelSource:
    """``trained:RUN`` (the run's final model) or ``trained:RUN@SUB`` (a checkpoint) under :func:`models_root`."""
    run = name.split(":", 1)[1]
    run, _, sub = run.partition("@")          # trained:english@minilm/ckpt-2 names a checkpoint
    path = models_root() / run / (sub or "final")
    if not (path / "config.json").exists():
        raise ModelUnavailableError(
            f"model {name!r} has not been trained here ({path} is missing). Fix: "
            f"python -m textglauber.train_mlm --preset {run}  (./run_all.sh does this for the profiles that need it)")
    return ModelSource(name=name, path=str(path), is_hub=False, revision=_manifest_commit(path.parent))


def _manifest_commit(folder: Path) -> str | None:
    """The git commit a training run's manifest.json records (the run's folder or the one above)."""
    for f in (folder / "manifest.json", folder.parent / "manifest.json"):
        if f.exists():
            return (json.loads(f.read_text()).get("git") or {}).get("commit")
    return None
