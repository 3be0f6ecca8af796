"""One call of the training: the key that decides whether a saved run or an interrupted one is
reused, the lock on the output and ``train`` over every start (the cheap checks ``is_current`` and
``ensure``: :mod:`textglauber.train_mlm.current`)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import torch

from ..paths import models_root
from .data import prepare
from .loop import train_start, write_json
from .presets import RESUME_FORMAT, Preset, resolve_preset


def resume_key(preset_name: str, preset: Preset, seed: int, docs: list[str]) -> dict:
    """Everything that decides the trained weights: a saved run or state is reused only under the same key.
    The guard (max_hours) and how often state is saved (save_every) do not change the weights."""
    settings = preset.weight_settings()
    digest = hashlib.sha256("\x1e".join(docs).encode()).hexdigest()
    return json.loads(json.dumps({"format": RESUME_FORMAT, "preset": preset_name, "settings": settings,
                                  "seed": seed, "corpus": {"name": preset.corpus, "documents": len(docs),
                                                           "sha256": digest}}))


def _lock(out: Path):
    """An exclusive lock on ``out`` (blocks while another process trains the same run)."""
    import fcntl

    out.parent.mkdir(parents=True, exist_ok=True)
    f = open(out.with_name(out.name + ".lock"), "w")
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


def train(preset_name: "str | Preset" = "english", out: str | Path | None = None, max_steps: int | None = None,
          seed: int = 0, progress: bool = True, *, max_hours: float | None = None, reuse: bool = False,
          on_step: Callable[[str, int], None] | None = None) -> dict:
    """Train every start of the preset for its fixed number of steps; write ``out`` and return its manifest.

    An interrupted call leaves ``out.partial``; the next call with the same key (``resume_key``)
    continues from its last saved state, any other call starts afresh. With ``reuse``, a finished
    ``out`` with the same key is returned without training."""
    from .. import corpus
    from ..provenance import git_commit, versions

    preset_name, preset = resolve_preset(preset_name, max_steps, max_hours)
    out = Path(out) if out else models_root() / preset_name
    tmp = out.with_name(out.name + ".partial")
    deadline = time.time() + 3600 * preset.max_hours
    docs = corpus.texts(preset.corpus)
    key = resume_key(preset_name, preset, seed, docs)
    lock = _lock(out)
    try:
        if reuse and (out / "final" / "config.json").exists():
            try:
                manifest = json.loads((out / "manifest.json").read_text())
            except (OSError, ValueError):
                manifest = {}
            if manifest.get("resume_key") == key:
                return manifest
        key_file = tmp / "resume.json"
        try:
            resuming = json.loads(key_file.read_text()) == key
        except (OSError, ValueError):
            resuming = False
        if not resuming:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            write_json(key_file, key)
        elif progress:
            print(f"resuming the interrupted training in {tmp}")
        torch.manual_seed(seed)
        data, sizes = prepare(preset, seed, tmp, docs)
        torch.set_num_threads(os.cpu_count() or 1)
        runs = [train_start(start, preset, data, tmp, seed, progress, on_step, deadline) for start in preset.starts]
        best = max(runs, key=lambda r: r["final"]["top1"])
        shutil.rmtree(tmp / "final", ignore_errors=True)
        shutil.copytree(tmp / best["final"]["path"], tmp / "final")
        manifest = {"preset": preset_name, "settings": asdict(preset), "seed": seed, "git": git_commit(),
                    "versions": versions(), "resume_key": key, "corpus": {
                        "name": preset.corpus, "documents": len(docs), **sizes, "sha256": key["corpus"]["sha256"]},
                    "runs": runs, "chosen": best["start"],
                    "steps": {r["start"]: r["steps"] for r in runs},
                    "seconds": round(sum(r["seconds"] for r in runs), 1),
                    "cpu_seconds": round(sum(r["cpu_seconds"] for r in runs), 1),
                    "final": {"path": "final", **{k: best["final"][k] for k in ("top1", "top5", "heldout_loss")},
                              "pseudo_perplexity": best["pseudo_perplexity"]}}
        write_json(tmp / "manifest.json", manifest)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        return manifest
    finally:
        lock.close()


