"""Trap search: states of a masked LM that the Glauber chain is slow to leave.

A perfect trap is an argmax fixed point, a state whose every site holds its own conditional's
argmax (:func:`perfect_trap` reaches them by coordinate ascent). Such a state need not hold the
chain: :func:`holding_steps` gives each state's exact expected holding time from its n
conditionals, and :func:`deep_traps` keeps the fixed points that hold at least
:data:`TRAP_HOLD` steps at :data:`TRAP_TEMPERATURE`. The benchmark's metastable grid starts its
trap cells there (:mod:`textglauber.bench.metastable`).

Kept apart from :mod:`textglauber.traps` (the detector of trapped windows along recorded chains):
the holding time needs :func:`textglauber.exact.conditionals`, and :mod:`textglauber.exact` runs
that detector on its enumerable chains, so one module holding both would import in a circle.
"""
from __future__ import annotations

import numpy as np
import torch

from .exact import conditionals

TRAP_TEMPERATURE = 0.25
TRAP_HOLD = 300             # least expected holding time (steps, at T = 0.25) of a trap cell's starts: chapter 5's window
TRAP_START_BATCHES = 8      # batches of random starts (chains each) searched for such traps


class NoFixedPoint(RuntimeError):
    """Coordinate ascent reached no argmax fixed point: a finding about the model (its conditionals
    cycle), which a caller may answer by drawing other starts. Any other error (a scorer that fails,
    a window longer than the model takes) is not this one and must not be caught as if it were."""


def perfect_trap(scorer, states: torch.Tensor, sweeps: int = 50) -> torch.Tensor:
    """Coordinate ascent from each state (every site in turn set to its conditional's argmax,
    kept where the current token ties with it) until no site changes: states whose every site is
    its own conditional's argmax, perfect traps.

    A masked LM's conditionals need not be those of one joint law, so the ascent can cycle from
    some starts. Returns the fixed points of the starts that reached one within ``sweeps`` sweeps,
    in their order; raises :class:`NoFixedPoint` only if none did. A start whose state after a sweep repeats one it held
    after an earlier sweep cycles (the sweep is a deterministic map) and is dropped at once."""
    x = torch.as_tensor(states, dtype=torch.long).clone()
    index_of = scorer.vocab.index_of
    ids = scorer.vocab.ids
    done = torch.zeros(len(x), dtype=torch.bool)
    cycling = torch.zeros(len(x), dtype=torch.bool)
    seen = [{tuple(r)} for r in x.tolist()]
    for _ in range(sweeps):
        changed = torch.zeros(len(x), dtype=torch.bool)
        live = (~done & ~cycling).nonzero().flatten()
        if not len(live):
            break
        for i in range(x.shape[1]):
            s = scorer.scores(x[live], torch.full((len(live),), i)).cpu()
            best = s.argmax(-1)
            here = index_of(x[live, i])
            better = s.gather(1, best[:, None])[:, 0] > s.gather(1, here[:, None])[:, 0]
            x[live[better], i] = ids[best[better]]
            changed[live[better]] = True
        done |= ~changed & ~cycling
        for b in (changed & ~cycling).nonzero().flatten().tolist():
            state = tuple(x[b].tolist())
            cycling[b] = state in seen[b]
            seen[b].add(state)
    if not done.any():
        raise NoFixedPoint(f"no start reached an argmax fixed point within {sweeps} sweeps")
    return x[done]


def holding_steps(scorer, states: torch.Tensor, temperature: float) -> np.ndarray:
    """Each state's exact expected holding time at ``temperature``, in steps: 1 / q with
    q = (1/n) sum_i (1 - pi_i(x_i | x_-i)) the chance that one Glauber step (uniform site, token
    from softmax(s_i / T)) leaves it; one model row per site (inf where q is 0)."""
    x = torch.as_tensor(states, dtype=torch.long)
    n = x.shape[1]
    out = []
    for state in x:                                   # one state at a time: n x |A| float64, not S x n x |A|
        p = conditionals(scorer, state[None].numpy(), list(range(n)), temperature)[0]
        p[np.arange(n), scorer.vocab.index_of(state).numpy()] = 0.0     # the other tokens' mass: no 1 - (1 - q)
        q = float(p.sum(-1).mean())
        out.append(np.inf if q == 0 else 1 / q)
    return np.asarray(out, dtype=float)


def deep_traps(scorer, n: int, chains: int, generator: torch.Generator, *, temperature: float = TRAP_TEMPERATURE,
               hold: float = TRAP_HOLD, batches: int = TRAP_START_BATCHES) -> tuple[torch.Tensor, dict]:
    """Perfect traps the chain stays in: argmax fixed points (:func:`perfect_trap`) whose exact
    expected holding time at ``temperature`` (:func:`holding_steps`) is at least ``hold`` steps.

    Random starts are drawn from ``generator`` ``chains`` at a time, at most ``batches`` times,
    until ``chains`` distinct such traps are found. Returns ``chains`` states (the traps found,
    repeated in order to fill) and what was found: ``trap_states`` (distinct traps the chains start
    from), ``trap_hold_min`` / ``trap_hold_median`` (their holding times), ``fixed_points`` (distinct
    fixed points reached) and ``deep`` (whether they hold at least ``hold``). Where no fixed point
    holds that long, the chains start from the deepest one reached and ``deep`` is false."""
    ids = scorer.vocab.ids
    found: dict[tuple, float] = {}
    for _ in range(batches):
        starts = ids[torch.randint(scorer.vocab.size, (chains, n), generator=generator)]
        try:
            fixed = perfect_trap(scorer, starts)
        except NoFixedPoint:
            continue
        new = list(dict.fromkeys(tuple(r) for r in fixed.tolist() if tuple(r) not in found))
        if new:
            found.update(zip(new, holding_steps(scorer, torch.tensor(new), temperature)))
        if sum(h >= hold for h in found.values()) >= chains:
            break
    if not found:
        raise NoFixedPoint(f"no start reached an argmax fixed point in {batches} batches of {chains} starts")
    deep = [k for k, h in found.items() if h >= hold][:chains]
    picked = deep or [max(found, key=found.get)]
    holds = np.array([found[k] for k in picked])
    x = torch.tensor(picked)[torch.arange(chains) % len(picked)]
    return x, {"trap_states": len(picked), "trap_hold_min": float(holds.min()),
               "trap_hold_median": float(np.median(holds)), "fixed_points": len(found), "deep": bool(deep)}
