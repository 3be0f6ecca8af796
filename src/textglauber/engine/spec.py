"""What a run is asked and what it returns: the scorer's interface, the chain parameters, the
run's records, and the checks every input passes before any model call."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from ..vocabulary import AllowedVocab

MODES = ("plain", "memo", "jump", "auto")
MEMO_WINDOW = 4096            # steps the memo mode's chains run on their own clocks before they meet again


class Scorer(Protocol):
    """Raw scores s_i(. | x_{-i}) over the allowed vocabulary, one row per (state, site) pair."""

    vocab: AllowedVocab

    @property
    def max_length(self) -> int: ...

    def scores(self, states: torch.Tensor, sites: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class ChainSpec:
    temperature: float
    steps: int
    record_every: int = 1
    prefix_len: int = 0          # the first prefix_len content positions are frozen
    record_gaps: bool = False    # score gap of the token written at each step
    checkpoint_every: int = 1000
    mode: str = "auto"           # plain, memo, jump or auto (see the package docstring)


@dataclass
class ChainRun:
    """What a run recorded. ``states[r, b]`` is chain b at step ``steps[r]``."""

    steps: np.ndarray            # (R,)
    states: np.ndarray           # (R, B, n) token ids
    gaps: np.ndarray | None      # (S, B) raw-score gap of the written token at steps 1..S
    sites: np.ndarray | None     # (S, B) the site each chain updated (-1: held through a jump)
    spec: ChainSpec
    seed: int
    modes: list | None = None    # auto mode: the segments run, [mode, steps] each


def validate(scorer: Scorer, init: torch.Tensor, spec: ChainSpec) -> None:
    """Every bad input gets one clear error here, before any model call."""
    if not (isinstance(spec.temperature, (int, float)) and np.isfinite(spec.temperature) and spec.temperature > 0):
        raise ValueError(f"temperature must be a positive number, got {spec.temperature!r}")
    if init.ndim != 2 or init.shape[0] < 1 or init.shape[1] < 1:
        raise ValueError(f"initial states must be a (chains, n) array with n >= 1, got shape {tuple(init.shape)}")
    n = init.shape[1]
    if n > scorer.max_length:
        raise ValueError(f"sequence length n={n} exceeds what the model accepts ({scorer.max_length} "
                         f"content tokens after its special tokens)")
    if not 0 <= spec.prefix_len < n:
        raise ValueError(f"a frozen prefix of {spec.prefix_len} tokens leaves no free site in n={n}")
    if scorer.vocab.size == 0:
        raise ValueError("the allowed vocabulary is empty")
    if spec.steps < 0 or spec.record_every < 1 or spec.checkpoint_every < 1:
        raise ValueError(f"steps >= 0, record_every >= 1 and checkpoint_every >= 1 are required: {spec}")
    if spec.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {spec.mode!r}")
    if spec.mode == "jump" and spec.record_gaps:
        raise ValueError("record_gaps needs the site of every step, which the jump mode never draws for the "
                         "steps that change nothing: use mode='memo' (the plain trajectory) or 'auto'")
