"""The memo mode: the plain engine's draws and trajectory, with a model call only for the steps
the cache cannot answer.

A window of steps draws the plain engine's sites and uniforms for the whole stretch first, in
its order (a site, then a uniform, per step), so the generator ends where the plain steps leave
it. A chain's steps depend only on its own draws and state, so each chain runs ahead on its own
clock through every step its cache answers (site remembered, uniform in the keep-interval: the
token stays; or in a remembered token's interval: it moves there) and waits at the first step that
needs its row; a round scores the rows of every waiting chain in one call. A step needs a row
exactly where the plain engine's draw could not be read from the cache, so the rows, moves and
trajectory are the plain engine's: bit for bit on a scorer whose rows do not depend on the batch
(a table), up to the float rounding of a row scored in another batch otherwise.

A round takes each waiting chain's next step that needs a row, wherever it lies in the window,
so a window costs as many rounds as its busiest chain has such steps. In a trap the needs come in
bursts, and a longer window evens them out over the chains: on rxnfp BERT's perfect traps at
n = 20 (16 chains, 4000 steps, T = 0.25), 643 calls of 2.92 rows each with windows of 256 steps,
332 calls of 5.66 rows with 4096, for the same rows. A round also scores, for the chains that wait
at a site their state does not know, some of the next sites they will need in that state
(:meth:`MemoWindow.ahead`, up to :data:`MEMO_AHEAD` each and as many rows in all as there are
chains): rows are functions of the state, so the trajectory is unchanged, and on a CPU a call
costs a fixed time of a few rows (rxnfp BERT at n = 20: about 7.6 ms a call, 1.75 ms a row)."""
from __future__ import annotations

import math

import torch

from .batch import Batch, Tally
from .cache import SiteCache, cached_moves, carry, chain_summaries, first_of_each, moved_summaries
from .plain import draws
from .sampling import cdf_of, score_gap, search
from .spec import MEMO_WINDOW, ChainSpec, Scorer

MEMO_DRAWS = 1 << 22          # (step, chain) draws a memo window holds at most (a shorter window for many chains)
MEMO_SCAN = 16                # steps a memo chain first reads ahead for its next row (doubling while it finds none)
MEMO_AHEAD = 8                # rows a memo chain may score in a round beyond the one it waits for (its next
                              # unknown sites), each only where the chain is estimated at least AHEAD_USE
AHEAD_USE = 0.5               # likely to still be in its state there
AHEAD_SCAN = 64               # steps a memo chain looks through for those sites
EVENT_KEYS = ("time", "chain", "site", "token")


def unique_rows(scorer: Scorer, states: torch.Tensor, cache: SiteCache, units: torch.Tensor, sites: torch.Tensor):
    """The scores at the (unit, site) pairs, with one row per distinct (state, site): units that
    share a state's slot share its rows. Returns (scores, rows scored)."""
    first, group = first_of_each(cache.slot[units] * states.shape[1] + sites)
    if len(first) == len(units):
        return scorer.scores(states[units], sites), len(units)
    s = scorer.scores(states[units[first]], sites[first])
    return s[group.to(s.device)], len(first)


class MemoWindow:
    """Steps t0 + 1 .. t1 of the memo mode for the chains at ``states`` (changed in place)."""

    def __init__(self, scorer: Scorer, states: torch.Tensor, spec: ChainSpec, gen: torch.Generator,
                 cache: SiteCache, t0: int, t1: int):
        self.scorer, self.states, self.spec, self.cache, self.t0 = scorer, states, spec, cache, t0
        b, n = states.shape
        self.S = S = t1 - t0
        drawn = [draws(b, n, spec, gen) for _ in range(S)]
        self.sites = torch.stack([d[0] for d in drawn]) if S else torch.zeros((0, b), dtype=torch.long)
        self.u = torch.stack([d[1] for d in drawn]) if S else torch.zeros((0, b), dtype=torch.float64)
        self.gaps = torch.full((S, b), math.nan, dtype=torch.float32) if spec.record_gaps else None
        self.ptr = torch.zeros(b, dtype=torch.long)     # the next step (0-based in the window) of each chain
        self.events, self.rows, self.calls = [], 0, 0
        self.fresh_steps = self.fresh_moves = 0         # steps at sites not known yet, and how many of them moved

    def read(self, chains: torch.Tensor, first: torch.Tensor, width: int, fields: tuple[str, ...]):
        """Each chain's steps first, first + 1, ... (``width`` of them, (k, width), clamped to the
        window): the steps, whether each lies inside the window, its site, whether that site is
        known in the chain's current state, whether the cache says it keeps the token there, and
        the named cached fields."""
        at = first[:, None] + torch.arange(width)[None, :]
        inside = at < self.S
        at = at.clamp(max=self.S - 1)
        col = chains[:, None].expand_as(at)
        st = self.sites[at, col]
        known = self.cache.valid[col, st]
        c = self.cache.at(col, st, ("lo", "hi", "tot", *fields))
        v = self.u[at, col] * c["tot"]
        return at, inside, st, known, known & (c["lo"] <= v) & (v < c["hi"]), c

    def ahead(self, chains: torch.Tensor, at: torch.Tensor, budget: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(chain, site) pairs to score with this round's needs, at most ``budget``: each chain's
        next sites that its current state does not know, in step order up to the first step its
        cache says moves, and only as deep as the chain is likely still to be in this state there
        ((1 - m)^depth >= AHEAD_USE, with m the share of the steps at unknown sites that moved so
        far); the shallowest first across chains."""
        m = (self.fresh_moves + 1) / (self.fresh_steps + 2)
        depth = min(MEMO_AHEAD, int(math.log(AHEAD_USE) / math.log1p(-m)))
        if budget <= 0 or depth < 1 or len(chains) == 0:
            return torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long)
        _, inside, st, known, kept, _ = self.read(chains, at + 1, AHEAD_SCAN, ())
        stop = ((known & ~kept) | ~inside).cumsum(1) > 0
        cand = ~known & ~stop & (st != self.sites[at, chains][:, None])
        w = torch.arange(AHEAD_SCAN)
        cand &= ~((st[:, :, None] == st[:, None, :]) & (w[None, :] < w[:, None])[None] & cand[:, None, :]).any(2)
        level = cand.cumsum(1)
        cand &= level <= depth
        k_i, j_i = cand.nonzero(as_tuple=True)
        pick = torch.argsort(level[k_i, j_i] * len(chains) + k_i, stable=True)[:budget]
        return chains[k_i[pick]], st[k_i[pick], j_i[pick]]

    def advance(self, chains: torch.Tensor) -> None:
        """Move each chain's pointer past the steps its cache answers (keeping their remembered
        gaps), to its next step that needs a row. It reads in blocks that double while a chain
        finds nothing to score (16 steps, then 32, ...), so a round costs about the steps the
        chains skip, not the window's length."""
        width = MEMO_SCAN
        while len(chains):
            at, inside, _, _, hit, c = self.read(chains, self.ptr[chains], width, ("gap",))   # (k, width) steps
            hit &= inside
            found = (~hit & inside).any(1)
            first = torch.where(found, (~hit).float().argmax(1), inside.sum(1))   # skipped steps in the block
            if self.gaps is not None:
                k_i, j_i = (hit & (torch.arange(width)[None, :] < first[:, None])).nonzero(as_tuple=True)
                self.gaps[at[k_i, j_i], chains[k_i]] = c["gap"][k_i, j_i].float()
            self.ptr[chains] += first
            chains = chains[~found & (self.ptr[chains] < self.S)]
            width *= 2

    def move(self, chains: torch.Tensor, steps: torch.Tensor, sites: torch.Tensor, tok: torch.Tensor) -> None:
        """The chains write ``tok`` at their ``sites`` at their window ``steps`` and enter their new states."""
        self.states[chains, sites] = tok
        self.cache.enter(chains, self.states[chains])
        self.events.append(torch.stack([self.t0 + steps + 1, chains, sites, tok.cpu()]))

    def from_cache(self, wait: torch.Tensor, at: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The waiting chains whose uniform falls in a remembered token's interval move there
        without their row (the sampler would draw that token from it) and run on; returns the
        others, which wait for a row."""
        rank = cached_moves(self.cache, wait, self.sites[at, wait], self.u[at, wait])
        hit = rank >= 0
        if not hit.any():
            return wait, at
        c, ci = wait[hit], at[hit]
        sc = self.sites[ci, c]
        rec, new = moved_summaries(self.cache.at(c, sc), rank[hit])
        if self.gaps is not None:
            self.gaps[ci, c] = rec["gap"].float()
        self.move(c, ci, sc, self.scorer.vocab.ids[new].to(self.states.device))
        self.cache.fill(c, sc, rec)
        self.ptr[c] += 1
        self.advance(c)
        return wait[~hit], at[~hit]

    def scored(self, wait: torch.Tensor, at: torch.Tensor) -> None:
        """One round: the rows the waiting chains need at their steps ``at`` (and some ahead), one
        scorer call; every row is remembered, and the chains take their steps."""
        b, spec = len(self.states), self.spec
        sn, uw = self.sites[at, wait], self.u[at, wait]
        fresh = ~self.cache.valid[wait, sn]
        more_c, more_s = self.ahead(wait[fresh], at[fresh], b - len(wait))
        units, where = torch.cat([wait, more_c]), torch.cat([sn, more_s])
        s_all, r = unique_rows(self.scorer, self.states, self.cache, units, where)
        self.rows, self.calls = self.rows + r, self.calls + 1
        cdf_all = cdf_of(s_all, spec.temperature)
        # every row scored is the conditional of the chain's state before this step: remember it
        pos_all = self.scorer.vocab.index_of(self.states[units, where])
        self.cache.store(units, where, chain_summaries(s_all, cdf_all, pos_all, spec))
        s, cdf, pos = s_all[:len(wait)], cdf_all[:len(wait)], pos_all[:len(wait)]
        idx = search(cdf, uw)
        go = idx.cpu() != pos
        self.fresh_steps += int(fresh.sum())
        self.fresh_moves += int((fresh & go).sum())
        if self.gaps is not None:
            self.gaps[at, wait] = score_gap(s, idx).float().cpu()
        if go.any():
            mv = wait[go]
            tok = self.scorer.vocab.ids.to(idx.device)[idx[go.to(idx.device)]]
            self.move(mv, at[go], sn[go], tok.to(self.states.device))
            carry(self.cache, mv, sn[go], s, cdf, idx, go, spec)
        self.ptr[wait] += 1
        self.advance(wait)

    def run(self):
        """Returns (sites (S, B) long, gaps (S, B) or None, moves: dict of arrays time, chain, site
        and token in the order of time, rows scored, scorer calls made)."""
        self.advance(torch.arange(len(self.states)))
        while True:
            wait = (self.ptr < self.S).nonzero().flatten()
            if len(wait) == 0:
                break
            wait, at = self.from_cache(wait, self.ptr[wait])
            if len(wait):
                self.scored(wait, at)
        ev = torch.cat(self.events, 1) if self.events else torch.zeros((4, 0), dtype=torch.long)
        ev = ev[:, torch.argsort(ev[0], stable=True)].numpy()
        return self.sites, self.gaps, dict(zip(EVENT_KEYS, ev)), self.rows, self.calls


def memo_window(scorer: Scorer, states: torch.Tensor, spec: ChainSpec, gen: torch.Generator, cache: SiteCache,
                t0: int, t1: int):
    """Steps t0 + 1 .. t1 of the memo mode, each chain on its own clock (:class:`MemoWindow`)."""
    return MemoWindow(scorer, states, spec, gen, cache, t0, t1).run()


def segment(batch: Batch, rec, t0: int, t1: int) -> Tally:
    """Steps t0 + 1 .. t1 of the memo mode in windows of at most :data:`MEMO_WINDOW` steps (fewer
    for many chains: :data:`MEMO_DRAWS`), recorded in ``rec`` (a ``store.Recorder``)."""
    b = len(batch.states)
    window = max(1, min(MEMO_WINDOW, MEMO_DRAWS // b))
    tally = Tally(batch.no_moves())
    for a in range(t0, t1, window):
        z = min(t1, a + window)
        before = batch.states.numpy().copy()
        sites, gaps, ev, rows, calls = memo_window(batch.scorer, batch.states, batch.spec, batch.gen, batch.cache,
                                                   a, z)
        rec.drawn(a, z, before, sites, gaps, ev)
        tally.moves += torch.bincount(torch.as_tensor(ev["chain"]), minlength=b)
        tally.rows, tally.calls = tally.rows + rows, tally.calls + calls
    return tally
