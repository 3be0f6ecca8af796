"""The chains of a run in motion, as every mode's segment reads and advances them, and what a
segment reports to the auto mode's policy."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .cache import SiteCache
from .spec import ChainSpec, Scorer


@dataclass
class Batch:
    """B chains of a run: their states (changed in place), the run's generator and cache."""

    scorer: Scorer
    states: torch.Tensor         # (B, n) token ids
    spec: ChainSpec
    gen: torch.Generator
    cache: SiteCache
    max_rows: int | None = None  # the most rows of a jump's scorer call (None: from ROW_BUDGET)

    @property
    def free(self) -> torch.Tensor:
        return torch.arange(self.spec.prefix_len, self.states.shape[1])

    def no_moves(self) -> torch.Tensor:
        return torch.zeros(len(self.states), dtype=torch.long)


@dataclass
class Tally:
    """What a segment showed: each unit's moves, the rows and scorer calls it made, and (after
    jumps) each unit's exact leave probability where its state is fully scored."""

    moves: torch.Tensor          # (units,) long
    rows: int = 0
    calls: int = 0
    q_now: torch.Tensor | None = None
