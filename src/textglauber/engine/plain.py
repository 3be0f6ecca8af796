"""The plain mode: every chain draws a free site and a uniform, and every chain is scored, at
every step. Its draws (a site, then a uniform, per chain and step) are the ones the memo mode
replays."""
from __future__ import annotations

import torch

from .batch import Batch, Tally
from .sampling import sample_index, score_gap
from .spec import ChainSpec, Scorer


def draws(b: int, n: int, spec: ChainSpec, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One step's draws for b chains: each chain's free site, then its uniform (float64)."""
    sites = torch.randint(spec.prefix_len, n, (b,), generator=gen)
    return sites, torch.rand(b, generator=gen, dtype=torch.float64)


def plain_step(scorer: Scorer, states: torch.Tensor, spec: ChainSpec, gen: torch.Generator):
    """One step for every chain, in place. Returns (sites, gaps or None, which chains changed)."""
    b, n = states.shape
    sites, u = draws(b, n, spec, gen)
    s = scorer.scores(states, sites)
    idx = sample_index(s, spec.temperature, u)
    rows = torch.arange(b)
    old = states[rows, sites]
    states[rows, sites] = scorer.vocab.ids.to(idx.device)[idx].to(states.device)
    gaps = score_gap(s, idx).float().cpu() if spec.record_gaps else None
    return sites, gaps, states[rows, sites] != old


def step(scorer: Scorer, states: torch.Tensor, spec: ChainSpec, gen: torch.Generator):
    """One Glauber step for every chain, in place. Returns (sites, gaps or None)."""
    sites, gaps, _ = plain_step(scorer, states, spec, gen)
    return sites, gaps


def segment(batch: Batch, rec, t0: int, t1: int) -> Tally:
    """Steps t0 + 1 .. t1 of the plain mode, each recorded in ``rec`` (a ``store.Recorder``)."""
    tally = Tally(batch.no_moves())
    for t in range(t0 + 1, t1 + 1):
        sites, gaps, moved = plain_step(batch.scorer, batch.states, batch.spec, batch.gen)
        mv = moved.nonzero().flatten()
        batch.cache.enter(mv, batch.states[mv])
        tally.moves += moved
        tally.rows += len(batch.states)
        tally.calls += 1
        rec.step(t, batch.states, sites, gaps)
    return tally
