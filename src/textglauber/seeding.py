"""One seeded generator per run: the seeds of a run's independent parts (a model's cells, a trap's
chains, a topic's runs) are drawn from that generator, in order, by :func:`child_seed`, so the same
run seed gives the same parts whatever runs them and in whatever process."""
from __future__ import annotations

import torch

SEED_BOUND = 2**31 - 1
"""Child seeds lie in [0, SEED_BOUND): they fit every generator the project seeds (torch, numpy)."""


def child_seed(gen: torch.Generator) -> int:
    """The next child seed drawn from ``gen`` (advances it by one draw)."""
    return int(torch.randint(SEED_BOUND, (1,), generator=gen))
