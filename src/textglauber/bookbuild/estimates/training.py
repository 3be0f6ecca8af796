"""The work of a training preset, and the part of it an interrupted training has done."""
from __future__ import annotations

import json
from pathlib import Path

from .costs import MINILM_SHAPE


def training_work(preset) -> float:
    """Optimiser steps of a training preset, each weighed by its start's cost per step relative to
    the MiniLM start's (the layers over the padded batch and the head on the masked rows)."""
    def per_token(layers, h, inter, vocab):
        return layers * (4 * h * h + 2 * h * inter) + preset.mask_prob * h * vocab

    vocab = MINILM_SHAPE[3] if preset.tokenizer == "minilm" else 200
    ref = per_token(6, 384, 1536, MINILM_SHAPE[3]) * 32 * 128
    total = 0.0
    for start in preset.starts:
        if start == "minilm":
            shape = (6, 384, 1536)
        else:
            shape = (preset.scratch["layers"], preset.scratch["hidden"], 4 * preset.scratch["hidden"])
        total += preset.steps_of(start) * per_token(*shape, vocab) * preset.batch * preset.max_len / ref
    return total


def training_done(preset, partial: Path) -> float:
    """The part of :func:`training_work` an interrupted training has done (finished starts, and
    the saved step of the one it was in, where its progress file says)."""
    done = 0.0
    for start in preset.starts:
        one = type(preset)(**{**preset.__dict__, "starts": (start,)})
        folder = partial / start
        if (folder / "run.json").exists():
            done += training_work(one)
            continue
        try:
            step = json.loads((folder / "progress.json").read_text())["step"]
        except (OSError, ValueError, KeyError):
            continue
        done += training_work(one) * min(1.0, step / max(1, preset.steps_of(start)))
    return done
