"""The jump mode: rejection-free steps (the n-fold way of Bortz, Kalos and Lebowitz, 1975), for
single chains and for coupled pairs alike.

Once the m free sites of a unit's state are scored, the number of steps until its state changes
is geometric with leave probability q = (1/m) sum_i l_i, l_i the probability that a step at site
i changes it; the changing site has probability proportional to l_i, and the new token(s) are
drawn from the step's law conditioned on a change. This is exact in law (not the plain engine's
trajectory). Units run on their own clocks inside a segment; a holding time that ends beyond the
segment is discarded and drawn afresh in the next one, which is exact because it is memoryless.

The engine needs of its units only what :class:`JumpUnits` names: :class:`ChainJumps` are single
chains, and the coupled pairs of :mod:`.pairs` are units too. A move keeps the row it was drawn from as the new state's
row at that site (``moved_to``), and rows are held only inside a scorer call, at most
:data:`ROW_BUDGET` scores per call."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from .batch import Batch, Tally
from .cache import SiteCache, chain_cache, chain_summaries, first_of_each
from .sampling import cdf_of, draw_from, holding_time, restricted
from .spec import ChainSpec, Scorer, validate

ROW_BUDGET = 1 << 23          # scores (rows x |A|) per scorer call in a jump's batched pass
EVENT_KEYS = ("time", "chain", "site", "token")


class JumpUnits(Protocol):
    """What the jump engine reads and moves: chains, or coupled pairs."""

    cache: SiteCache             # the fields of each unit's current state, with ``leave``
    free: torch.Tensor           # the free sites
    live: torch.Tensor           # (units,) bool: the units that still move
    outputs: int                 # token positions a move draws (1 for a chain, 2 for a pair)
    move_draws: int              # uniforms a move takes
    rows_per_site: int           # scorer rows of one (unit, site)

    def material(self, units: torch.Tensor, sites: torch.Tensor) -> tuple:
        """Score the (unit, site) pairs: what ``summarize``, ``move`` and ``moved_to`` read."""

    def summarize(self, material: tuple) -> dict:
        """The cache's fields of those rows at the units' current tokens."""

    def move(self, material: tuple, u: torch.Tensor) -> tuple:
        """The new token position(s), drawn given that the unit changes at that site."""

    def moved_to(self, material: tuple, new: tuple) -> dict:
        """The cache's fields of the moving rows read at the new token(s)."""

    def land(self, units: torch.Tensor, sites: torch.Tensor, new: tuple, t: torch.Tensor, carried: dict) -> None:
        """The units move: write the new tokens at their steps t, keep the carried fields."""


def _groups(idx: torch.Tensor, sizes: torch.Tensor, budget: int):
    """Consecutive runs of ``idx`` whose sizes add up to at most ``budget`` (one at least)."""
    start, total = 0, 0
    sizes = sizes.tolist()
    for i, s in enumerate(sizes):
        if i > start and total + s > budget:
            yield idx[start:i]
            start, total = i, 0
        total += s
    if start < len(sizes):
        yield idx[start:]


class _Round:
    """The draws of one round of jumps for the units ``act``, filled in group by group."""

    def __init__(self, units: JumpUnits, act: torch.Tensor, clock: torch.Tensor, t_end: int, u: torch.Tensor):
        k = len(act)
        self.units, self.act, self.clock, self.t_end, self.u = units, act, clock, t_end, u
        self.t_next = torch.full((k,), math.inf, dtype=torch.float64)
        self.site = torch.full((k,), -1, dtype=torch.long)
        self.moved = torch.zeros(k, dtype=torch.bool)
        self.new = [torch.full((k,), -1, dtype=torch.long) for _ in range(units.outputs)]
        self.kept = {f: torch.zeros(k, dtype=torch.float64) for f in units.cache.fields}
        self.rows = self.calls = 0

    def score(self, units: torch.Tensor, sites: torch.Tensor) -> tuple:
        self.rows += len(units) * self.units.rows_per_site
        self.calls += 1
        return self.units.material(units, sites)

    def resolve(self, g: torch.Tensor) -> torch.Tensor:
        """Holding times of the units at positions g (their states fully known) and, for those
        that move by ``t_end``, the site; returns those positions."""
        leave = self.units.cache.leave(self.act[g], self.units.free)
        t = self.clock[self.act[g]] + holding_time(leave.mean(1), self.u[g, 0])
        go = t <= self.t_end
        self.t_next[g], self.moved[g] = t, go
        self.site[g[go]] = self.units.free[draw_from(leave[go], self.u[g[go], 1])]
        return g[go]

    def write(self, g: torch.Tensor, material: tuple) -> None:
        """The new tokens of the movers at positions g, from their rows ``material``."""
        if len(g) == 0:
            return
        toks = self.units.move(material, self.u[g, 2:])
        for out, tok in zip(self.new, toks):
            out[g] = tok.cpu()
        for f, v in self.units.moved_to(material, toks).items():
            self.kept[f][g] = v.to(torch.float64).cpu()


def jump_round(units: JumpUnits, act: torch.Tensor, clock: torch.Tensor, t_end: int, u: torch.Tensor,
               max_rows: int):
    """One jump for every unit in ``act``: fill its unknown free sites (batched passes of whole
    units, at most ``max_rows`` rows each unless one unit needs more), draw its holding time,
    and, where the move falls at or before ``t_end``, the site and the new token(s). ``u`` holds
    the round's uniforms (hold, site, then the move's), drawn before any pass so that the
    grouping changes nothing. Units at one state share its slot, and it is scored once.

    Returns (positions in act that move, their step, site, tuple of new token positions, the
    fields carried into their new states, rows scored, scorer calls)."""
    cache, free, per = units.cache, units.free, units.rows_per_site
    k, n = len(act), cache.valid.shape[1]
    known = cache.valid[act][:, free]
    r = _Round(units, act, clock, t_end, u)
    later = []
    fill = (~known).any(1).nonzero().flatten()
    first, group = first_of_each(cache.slot[act[fill]])
    lead = first[group] == torch.arange(len(fill))
    fill, follow = fill[lead], fill[~lead]
    for g in _groups(fill, (~known[fill]).sum(1) * per, max_rows):
        gi, gs = (~known[g]).nonzero(as_tuple=True)
        at, sites = act[g][gi], free[gs]
        mat = r.score(at, sites)
        cache.store(at, sites, units.summarize(mat))
        go = r.resolve(g)
        where = torch.full((k, n), -1, dtype=torch.long)
        where[g[gi], sites] = torch.arange(len(at))
        j = where[go, r.site[go]]
        r.write(go[j >= 0], tuple(t[j[j >= 0].to(t.device)] for t in mat))
        later.append(go[j < 0])
    full = torch.cat([known.all(1).nonzero().flatten(), follow])
    if len(full):
        later.append(r.resolve(full))
    later = torch.cat(later) if later else torch.zeros(0, dtype=torch.long)
    for g in _groups(later, torch.full((len(later),), per), max_rows):
        r.write(g, r.score(act[g], r.site[g]))
    mv = r.moved.nonzero().flatten()
    return (mv, r.t_next[mv], r.site[mv], tuple(out[mv] for out in r.new), {f: v[mv] for f, v in r.kept.items()},
            r.rows, r.calls)


def jumps(units: JumpUnits, gen: torch.Generator, t0: int, t1: int, max_rows: int, rounds: int | None = None):
    """Every live unit from step t0 to step t1 by jumps, each on its own clock. With ``rounds``,
    it stops after that many rounds: ``rounds=1`` gives each unit's first move up to t1 only.
    Returns (the moves of each round: (units, steps, sites, new token positions), rows, calls)."""
    clock = torch.full((len(units.live),), float(t0), dtype=torch.float64)
    landed, rows, calls = [], 0, 0
    while rounds is None or len(landed) < rounds:
        act = (units.live & (clock < t1)).nonzero().flatten()
        if len(act) == 0:
            break
        u = torch.rand((len(act), 2 + units.move_draws), generator=gen, dtype=torch.float64)
        mv, t_next, site, new, carried, r, c = jump_round(units, act, clock, t1, u, max_rows)
        rows, calls = rows + r, calls + c
        moving = act[mv]
        units.land(moving, site, new, t_next, carried)
        clock[act] = float(t1)
        clock[moving] = t_next
        landed.append((moving, t_next, site, new))
    return landed, rows, calls


class ChainJumps:
    """Single chains as jump units (``states`` changed in place)."""

    outputs, move_draws, rows_per_site = 1, 1, 1

    def __init__(self, scorer: Scorer, states: torch.Tensor, cache: SiteCache, spec: ChainSpec):
        self.scorer, self.states, self.cache, self.spec = scorer, states, cache, spec
        self.free = torch.arange(spec.prefix_len, states.shape[1])
        self.live = torch.ones(len(states), dtype=torch.bool)

    def material(self, chains, sites):
        return self.scorer.scores(self.states[chains], sites), self.scorer.vocab.index_of(self.states[chains, sites])

    def summarize(self, mat):
        s, pos = mat
        return chain_summaries(s, cdf_of(s, self.spec.temperature), pos, self.spec)

    def move(self, mat, u):
        s, pos = mat
        return (draw_from(restricted(torch.softmax(s.double() / self.spec.temperature, -1), pos), u[:, 0]),)

    def moved_to(self, mat, new):
        return self.summarize((mat[0], new[0]))

    def land(self, chains, sites, new, t, carried):
        self.states[chains, sites] = self.scorer.vocab.ids[new[0]].to(self.states.device)
        self.cache.enter(chains, self.states[chains])
        self.cache.fill(chains, sites, carried)


def chain_jumps(scorer: Scorer, states: torch.Tensor, cache: SiteCache, spec: ChainSpec, gen: torch.Generator,
                t0: int, t1: int, max_rows: int | None = None, rounds: int | None = None):
    """Every chain from its state at step t0 to its state at step t1 by jumps (``states`` in
    place). Returns the moves, a dict of arrays time, chain, site, token in the order drawn, the
    rows scored and the scorer calls made (``rounds``: as for :func:`jumps`)."""
    max_rows = max_rows or max(1, ROW_BUDGET // scorer.vocab.size)
    landed, rows, calls = jumps(ChainJumps(scorer, states, cache, spec), gen, t0, t1, max_rows, rounds)
    ids = scorer.vocab.ids
    events = [torch.stack([t.long(), chains, site, ids[tok]]) for chains, t, site, (tok,) in landed]
    ev = torch.cat(events, 1).numpy() if events else np.zeros((4, 0), np.int64)
    return dict(zip(EVENT_KEYS, ev)), rows, calls


def segment(batch: Batch, rec, t0: int, t1: int) -> Tally:
    """Steps t0 + 1 .. t1 of the jump mode, recorded in ``rec`` (a ``store.Recorder``)."""
    before = batch.states.numpy().copy()
    ev, rows, calls = chain_jumps(batch.scorer, batch.states, batch.cache, batch.spec, batch.gen, t0, t1,
                                  batch.max_rows)
    rec.jumps(t0, t1, before, ev)
    moves = batch.no_moves() + torch.bincount(torch.as_tensor(ev["chain"]), minlength=len(batch.states))
    return Tally(moves, rows, calls, q_now=batch.cache.mean_leave(batch.free))


@dataclass
class FirstChanges:
    """Each chain's first change of state (:func:`first_changes`)."""

    steps: np.ndarray            # (B,) the step at which chain b first changed; 0 where censored
    censored: np.ndarray         # (B,) bool: no change within the budget
    states: np.ndarray           # (B, n) the state each chain moved to (its start where censored)
    rows: int                    # rows scored (one masked sequence each)


def first_changes(scorer: Scorer, init: torch.Tensor, spec: ChainSpec, seed: int, *,
                  max_rows: int | None = None) -> FirstChanges:
    """The step at which each chain first leaves its start, within ``spec.steps`` steps, by the jump
    engine: each chain's free sites are scored once (batched passes), its holding time is drawn
    from the geometric law with its leave probability, and its move is drawn where that time is
    within the budget. A hold of millions of steps costs m rows, where the plain engine scores a
    row per step (chains that start at one state share its m rows, and a chain that moves scores
    the row it draws its new token from); a chain whose holding time exceeds the budget is censored.

    The mode in ``spec`` is not read (this is the jump engine). Same seed: the first moves of
    ``run(scorer, init, spec, seed)`` in mode ``jump`` with ``checkpoint_every >= spec.steps``,
    whose ``sites[t - 1, b]`` is the first entry >= 0 of chain b at t = its first step of change."""
    init = torch.as_tensor(init, dtype=torch.long)
    spec = dataclasses.replace(spec, mode="jump")
    validate(scorer, init, spec)
    gen = torch.Generator().manual_seed(int(seed))
    states = init.clone()
    ev, rows, _ = chain_jumps(scorer, states, chain_cache(states), spec, gen, 0, spec.steps, max_rows, rounds=1)
    at = np.zeros(len(states), np.int64)
    at[ev["chain"]] = ev["time"]
    return FirstChanges(steps=at, censored=at == 0, states=states.numpy(), rows=int(rows))
