"""The trap finder: perfect traps of a masked LM, searched for from its scores before any chain
runs (docs/science.md, chapter 5).

A perfect trap is an argmax fixed point, a state whose every site holds its own conditional's
argmax. Three functions, one the primitive and two its callers:

- :func:`coordinate_ascent`, the primitive: from *given* starts, every site in turn set to its
  argmax until nothing changes (a start whose ascent cycles is dropped);
- :func:`find_traps`, **the** finder: random starts in batches, each batch taken through
  :func:`coordinate_ascent`, the distinct fixed points kept in the order reached. The escape
  section's cells, its growth with length (:mod:`textglauber.traps.escape_section`) and the
  benchmark's trap cells all find their traps with it;
- :func:`deep_traps`, a thin caller of :func:`find_traps` named for what it keeps: the fixed points
  that hold the chain at least :data:`TRAP_HOLD` steps at :data:`TRAP_TEMPERATURE`
  (:func:`holding_steps`, exact from the n conditionals). The benchmark's metastable grid starts its
  trap cells there (:mod:`textglauber.bench.metastable`).

The trap catalogue of recorded chains (:mod:`textglauber.traps.detection`) finds no trap by
search: it reads metastable windows off chains that ran, and classifies each by its margins.
"""
from __future__ import annotations

import numpy as np
import torch

from ..exact import conditionals

TRAP_TEMPERATURE = 0.25
TRAP_HOLD = 300             # least expected holding time (steps, at T = 0.25) of a trap cell's starts: chapter 5's window
TRAP_START_BATCHES = 8      # batches of random starts (chains each) searched for such traps


class NoFixedPoint(RuntimeError):
    """Coordinate ascent reached no argmax fixed point: a finding about the model (its conditionals
    cycle), which a caller may answer by drawing other starts. Any other error (a scorer that fails,
    a window longer than the model takes) is not this one and must not be caught as if it were."""


def coordinate_ascent(scorer, states: torch.Tensor, sweeps: int = 50) -> torch.Tensor:
    """The finder's primitive: coordinate ascent from each of the given states (every site in turn
    set to its conditional's argmax, kept where the current token ties with it) until no site
    changes: states whose every site is its own conditional's argmax, perfect traps. Callers that
    want traps rather than the ascent from given states use :func:`find_traps`.

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


def find_traps(scorer, n: int, count: int | None, gen: torch.Generator, batches: int = 4, *,
               starts: int | None = None, enough=None) -> list[torch.Tensor]:
    """The trap finder: distinct perfect traps (argmax fixed points) of length n, in the order
    :func:`coordinate_ascent` reached them from random starts drawn from ``gen``, ``starts`` a batch
    (2 x count unless given), at most ``batches`` batches. After each batch that reached a fixed
    point the search stops once ``enough`` holds of the distinct traps found so far (token-id tuples,
    in order; by default: ``count`` of them). Returns the first ``count`` traps found, or all of them
    where ``count`` is None (then ``starts`` and ``enough`` must be given). A batch none of whose
    starts converges is passed over (:class:`NoFixedPoint`); any other error, such as a length the
    model cannot take, propagates."""
    if enough is None:
        def enough(found):
            return len(found) >= count
    per_batch = 2 * count if starts is None else starts
    found: dict[tuple, None] = {}
    for _ in range(batches):
        drawn = scorer.vocab.ids[torch.randint(scorer.vocab.size, (per_batch, n), generator=gen)]
        try:
            fixed = coordinate_ascent(scorer, drawn)
        except NoFixedPoint:
            continue
        found.update(dict.fromkeys(tuple(r) for r in fixed.tolist()))
        if enough(list(found)):
            break
    return [torch.tensor(t) for t in list(found)[:count]]


def deep_traps(scorer, n: int, chains: int, generator: torch.Generator, *, temperature: float = TRAP_TEMPERATURE,
               hold: float = TRAP_HOLD, batches: int = TRAP_START_BATCHES) -> tuple[torch.Tensor, dict]:
    """Perfect traps the chain stays in: the traps :func:`find_traps` reaches whose exact expected
    holding time at ``temperature`` (:func:`holding_steps`) is at least ``hold`` steps.

    The finder draws random starts from ``generator`` ``chains`` at a time, at most ``batches``
    times, until ``chains`` distinct such traps are found. Returns ``chains`` states (the traps found,
    repeated in order to fill) and what was found: ``trap_states`` (distinct traps the chains start
    from), ``trap_hold_min`` / ``trap_hold_median`` (their holding times), ``fixed_points`` (distinct
    fixed points reached) and ``deep`` (whether they hold at least ``hold``). Where no fixed point
    holds that long, the chains start from the deepest one reached and ``deep`` is false."""
    holds: dict[tuple, float] = {}

    def enough(found: list[tuple]) -> bool:            # holding times of the traps new in this batch, then the test
        new = [x for x in found if x not in holds]
        if new:
            holds.update(zip(new, holding_steps(scorer, torch.tensor(new), temperature)))
        return sum(holds[x] >= hold for x in found) >= chains

    traps = find_traps(scorer, n, None, generator, batches, starts=chains, enough=enough)
    if not traps:
        raise NoFixedPoint(f"no start reached an argmax fixed point in {batches} batches of {chains} starts")
    found = {x: holds[x] for x in (tuple(t.tolist()) for t in traps)}
    deep = [k for k, h in found.items() if h >= hold][:chains]
    picked = deep or [max(found, key=found.get)]
    held = np.array([found[k] for k in picked])
    x = torch.tensor(picked)[torch.arange(chains) % len(picked)]
    return x, {"trap_states": len(picked), "trap_hold_min": float(held.min()),
               "trap_hold_median": float(np.median(held)), "fixed_points": len(found), "deep": bool(deep)}
