"""Coupled Glauber chains and the maximal coupling (docs/science.md, chapter 3).

Two chains start from different states. At every step both update the *same* site; the two new
tokens come from a maximal coupling of the two conditionals: with probability
w = sum_a min(p, q)(a) one token drawn from min(p, q)/w is written into both, otherwise each chain
draws from its own residual. Once the two states are equal they see equal conditionals and stay
equal, so the first such step is the coupling (coalescence) time. By the coupling inequality
TV(P^t(x, .), P^t(y, .)) <= P(tau_{x,y} > t) for the two starts of a pair, and
d(t) = max_x TV(P^t(x, .), pi) <= max_{x,y} P(tau_{x,y} > t) over all pairs of starts.

Many pairs, each with its own temperature, advance as one batch: one scorer call per step serves
all live pairs (2 rows each); pairs that have coalesced leave the batch. The modes are the
chains' (:func:`couple`); a pair is a unit of the jump engine (:mod:`.jump`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .batch import Tally
from .cache import SiteCache
from .jump import ROW_BUDGET, jumps
from .policy import Policy
from .sampling import draw_from, keep_interval, search, without
from .spec import ChainSpec, validate

PAIR_FIELDS = ("w", "eq", "lo_c", "hi_c", "tot_c", "lo_x", "hi_x", "tot_x", "lo_y", "hi_y", "tot_y", "leave")


def coupling_tables(p: torch.Tensor, q: torch.Tensor):
    """What the maximal coupling of the rows p, q draws from: the overlap w = sum_a min(p, q)(a),
    whether the laws are equal, and the inverse-CDF tables of the common token and of each residual."""
    m = torch.minimum(p, q)
    w = m.sum(-1)
    eq = (p == q).all(-1)
    common = torch.cumsum(torch.where(w.unsqueeze(1) > 0, m, p), -1)
    x_res = torch.cumsum(torch.clamp(p - m, min=0) + 1e-300, -1)
    y_res = torch.cumsum(torch.clamp(q - m, min=0) + 1e-300, -1)
    return w, eq, common, x_res, y_res


def maximal_coupling(p: torch.Tensor, q: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw (X, Y) with X ~ p, Y ~ q and P(X != Y) = TV(p, q), row by row.

    ``u`` holds three uniforms per row (B, 3): the first decides whether to draw from the
    overlap, the other two drive the inverse-CDF draws.
    """
    p, q = p.double(), q.double()
    u = u.to(p.device).double()
    w, eq, common_cdf, x_cdf, y_cdf = coupling_tables(p, q)
    same = (u[:, 0] < w) | eq        # equal laws: always the same token
    common = search(common_cdf, u[:, 1])
    x = torch.where(same, common, search(x_cdf, u[:, 1]))
    y = torch.where(same, common, search(y_cdf, u[:, 2]))
    return x, y


def pair_summaries(p: torch.Tensor, q: torch.Tensor, xpos: torch.Tensor, ypos: torch.Tensor) -> dict:
    """Per (pair, site) with current tokens at positions xpos, ypos of A: the keep-intervals of the
    maximal coupling's three draws (both tokens stay exactly when (u0 < w or eq) and u1 falls in
    the common interval, or otherwise u1 and u2 fall in the residual intervals; the common interval
    is empty where the two tokens differ), and the pair's leave probability."""
    w, eq, common, x_res, y_res = coupling_tables(p, q)
    lo_c, hi_c, tot_c = keep_interval(common, torch.where(xpos == ypos, xpos, -1))
    lo_x, hi_x, tot_x = keep_interval(x_res, xpos)
    lo_y, hi_y, tot_y = keep_interval(y_res, ypos)
    return {"w": w.cpu(), "eq": eq.double().cpu(), "lo_c": lo_c, "hi_c": hi_c, "tot_c": tot_c, "lo_x": lo_x,
            "hi_x": hi_x, "tot_x": tot_x, "lo_y": lo_y, "hi_y": hi_y, "tot_y": tot_y,
            "leave": pair_leave(p, q, xpos, ypos).cpu()}


def _residual_parts(p, q, xpos, ypos):
    """The maximal coupling's pieces for exact jumps: overlap m, residuals r_p = (p - q)+ and
    r_q = (q - p)+ with their masses d_p, d_q (both TV(p, q)), and the shares a = r_p(not x) / d_p,
    b = r_q(not y) / d_q (1 where the laws are equal), all without subtracting near-equal numbers."""
    m = torch.minimum(p, q)
    rp, rq = torch.clamp(p - q, min=0), torch.clamp(q - p, min=0)
    dp, dq = rp.sum(-1), rq.sum(-1)
    one = torch.ones_like(dp)
    a = torch.where(dp > 0, without(rp, xpos).sum(-1) / torch.where(dp > 0, dp, one), one)
    b = torch.where(dq > 0, without(rq, ypos).sum(-1) / torch.where(dq > 0, dq, one), one)
    return m, rp, rq, dp, a, b


def pair_leave(p: torch.Tensor, q: torch.Tensor, xpos: torch.Tensor, ypos: torch.Tensor) -> torch.Tensor:
    """P(the pair's tokens at the site change) under the maximal coupling of p and q.

    The coupling writes (c, c) with probability min(p, q)(c) and (a, b) with probability
    r_p(a) r_q(b) / d otherwise. Equal tokens x stay with probability min(p, q)(x), so they leave
    with max(1 - p(x), 1 - q(x)); different tokens stay only through the residual draw, with
    probability d (1 - a)(1 - b), so they leave with w + d (a + b - ab)."""
    xpos, ypos = xpos.to(p.device), ypos.to(p.device)
    m, rp, rq, d, a, b = _residual_parts(p, q, xpos, ypos)
    same = (xpos == ypos) & (xpos >= 0)
    equal_tokens = torch.maximum(without(p, xpos).sum(-1), without(q, ypos).sum(-1))
    return torch.where(same, equal_tokens, m.sum(-1) + d * (a + b - a * b))


def pair_move(p: torch.Tensor, q: torch.Tensor, xpos: torch.Tensor, ypos: torch.Tensor, u: torch.Tensor):
    """New token positions (a, b) from the maximal coupling of p and q conditioned on
    (a, b) != (x, y), with four uniforms per row: the branch (common token or residual pair),
    which member leaves in the residual branch, and the two inverse-CDF draws."""
    xpos, ypos = xpos.to(p.device), ypos.to(p.device)
    u = u.to(p.device)
    m, rp, rq, d, sa, sb = _residual_parts(p, q, xpos, ypos)
    same_tok = (xpos == ypos) & (xpos >= 0)
    common_w = without(m, torch.where(same_tok, xpos, -1))
    w_common = common_w.sum(-1)
    w_res = d * (sa + sb - sa * sb)
    take_common = u[:, 0] * (w_common + w_res) < w_common
    c = draw_from(common_w, u[:, 1])
    # residual branch: X leaves x (then Y is free), or X stays at x and Y leaves y
    x_leaves = u[:, 1] * (sa + sb - sa * sb) < sa
    a_res = torch.where(x_leaves, draw_from(without(rp, xpos), u[:, 2]), xpos.clamp(min=0))
    b_res = torch.where(x_leaves, draw_from(rq, u[:, 3]), draw_from(without(rq, ypos), u[:, 3]))
    return torch.where(take_common, c, a_res), torch.where(take_common, c, b_res)


@dataclass
class CouplingRun:
    tau: np.ndarray          # (P,) coalescence step, NaN where censored
    censored: np.ndarray     # (P,) bool
    temperature: np.ndarray  # (P,)
    budget: int
    modes: list | None = None    # the auto mode's segments, [mode, steps] each
    rows: int = 0            # encoder rows scored (plain: 2 per live pair per step)


def _noop_from_cache(cache: SiteCache, pairs: torch.Tensor, sites: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Whether the maximal coupling with uniforms u keeps both tokens, read from the cache
    (exactly the plain draw's comparisons), for pairs whose site is cached."""
    c = cache.at(pairs, sites)

    def inside(tag, v):
        x = v * c["tot_" + tag]
        return (c["lo_" + tag] <= x) & (x < c["hi_" + tag])

    same = (u[:, 0] < c["w"]) | (c["eq"] > 0)
    return torch.where(same, inside("c", u[:, 1]), inside("x", u[:, 1]) & inside("y", u[:, 2]))


class _Pairs:
    """The live state of a coupled batch: both chains, their temperatures, coalescence times. The
    pairs are units of the jump engine (:class:`~textglauber.engine.jump.JumpUnits`)."""

    outputs, move_draws, rows_per_site = 2, 4, 2

    def __init__(self, scorer, x, y, temps, prefix_len):
        self.scorer, self.x, self.y, self.temps = scorer, x, y, temps
        self.prefix_len = prefix_len
        pairs, n = x.shape
        self.tau = np.full(pairs, np.nan)
        equal = (x == y).all(1)
        self.tau[equal.numpy()] = 0
        self.live = ~equal
        self.cache = SiteCache(pairs, n, PAIR_FIELDS)
        self.free = torch.arange(prefix_len, n)

    def material(self, pairs, sites):
        """(p, q, xpos, ypos) at the (pair, site) rows: one scorer call for both members."""
        s = self.scorer.scores(torch.cat([self.x[pairs], self.y[pairs]]), torch.cat([sites, sites])).double()
        T = self.temps[pairs].to(s.device).unsqueeze(1)
        r = len(pairs)
        index_of = self.scorer.vocab.index_of
        return (torch.softmax(s[:r] / T, -1), torch.softmax(s[r:] / T, -1), index_of(self.x[pairs, sites]),
                index_of(self.y[pairs, sites]))

    def summarize(self, mat):
        return pair_summaries(*mat)

    def move(self, mat, u):
        return pair_move(*mat, u)

    def moved_to(self, mat, new):
        return pair_summaries(mat[0], mat[1], *new)

    def land(self, pairs, sites, new, t, carried):
        self.write(pairs, sites, *new, t)
        self.cache.store(pairs, sites, carried)

    def write(self, pairs, sites, a, b, t):
        """New tokens (positions in A) at the pairs' sites at step(s) t; records coalescence."""
        ids = self.scorer.vocab.ids
        self.x[pairs, sites] = ids.to(a.device)[a].cpu()
        self.y[pairs, sites] = ids.to(b.device)[b].cpu()
        self.cache.clear(pairs)
        met = (self.x[pairs] == self.y[pairs]).all(1)
        self.tau[pairs[met].numpy()] = torch.as_tensor(t, dtype=torch.float64).expand(len(pairs))[met].numpy()
        self.live[pairs[met]] = False

    def step(self, t: int, gen: torch.Generator, memo: bool):
        """One coupled step of every live pair with the plain engine's draws. Returns (moved pairs, rows)."""
        idx = self.live.nonzero().flatten()
        n = self.x.shape[1]
        sites = torch.randint(self.prefix_len, n, (len(idx),), generator=gen)
        u = torch.rand((len(idx), 3), generator=gen, dtype=torch.float64)
        hit = torch.zeros(len(idx), dtype=torch.bool)
        if memo:
            known = self.cache.valid[idx, sites]
            hit[known] = _noop_from_cache(self.cache, idx[known], sites[known], u[known])
        need = (~hit).nonzero().flatten()
        if len(need) == 0:
            return need, 0
        rows, sn = idx[need], sites[need]
        p, q, xpos, ypos = self.material(rows, sn)
        a, b = maximal_coupling(p, q, u[need])
        kept = (a.cpu() == xpos) & (b.cpu() == ypos)
        if memo and kept.any():
            kd = kept.to(p.device)
            self.cache.store(rows[kept], sn[kept], pair_summaries(p[kd], q[kd], xpos[kept], ypos[kept]))
        moved = ~kept
        md = moved.to(p.device)
        self.write(rows[moved], sn[moved], a[md], b[md], t)
        if memo and moved.any():              # the rows it moved by are the new pair's at that site
            self.cache.store(rows[moved], sn[moved], pair_summaries(p[md], q[md], a[md], b[md]))
        return rows[moved], 2 * len(need)

    def segment(self, mode: str, t0: int, t1: int, gen: torch.Generator, max_rows: int) -> tuple[int, Tally]:
        """Steps t0 + 1 .. t1 in ``mode``, stepping (plain, memo) or jumping; a stepping segment
        ends early once every pair has met. Returns (the step reached, the segment's tally)."""
        moves = torch.zeros(len(self.x), dtype=torch.long)
        if mode == "jump":
            landed, rows, calls = jumps(self, gen, t0, t1, max_rows)
            for pairs, *_ in landed:
                moves[pairs] += 1
            return t1, Tally(moves, rows, calls, q_now=self.cache.mean_leave(self.free))
        tally, t = Tally(moves), t0
        while t < t1 and self.live.any():
            t += 1
            moved, rows = self.step(t, gen, memo=mode == "memo")
            tally.moves[moved] += 1
            tally.rows, tally.calls = tally.rows + rows, tally.calls + int(rows > 0)
        return t, tally


def couple(scorer, x0: torch.Tensor, y0: torch.Tensor, temperatures, budget: int, gen: torch.Generator,
           prefix_len: int = 0, mode: str = "auto", max_rows: int | None = None) -> CouplingRun:
    """Run coupled pairs (x0[p], y0[p]) at temperature temperatures[p] for at most ``budget`` steps.

    ``mode`` as for chains: ``plain`` scores both members of every live pair at every step;
    ``memo`` keeps the plain draws and skips the pairs whose site is remembered and whose uniforms
    keep both tokens (the same coalescence times, bit for bit on a table); ``jump`` draws the pair
    chain's holding time from the pair's own leave probability (1/m) sum_i P(the coupling changes
    a token at i), the site in proportion to it and the new pair of tokens from the maximal
    coupling conditioned on a change (exact in law); ``auto`` chooses per segment
    (:class:`~textglauber.engine.policy.Policy`). Coalesced pairs leave the batch in every mode."""
    x = torch.as_tensor(x0, dtype=torch.long).clone()
    y = torch.as_tensor(y0, dtype=torch.long).clone()
    if x.shape != y.shape:
        raise ValueError("the two starts of each pair must have the same shape")
    temps = torch.as_tensor(np.broadcast_to(np.asarray(temperatures, float), (len(x),)).copy())
    for t in set(temps.tolist()):
        validate(scorer, x, ChainSpec(temperature=t, steps=budget, prefix_len=prefix_len, mode=mode))
    validate(scorer, y, ChainSpec(temperature=1.0, steps=budget, prefix_len=prefix_len))
    st = _Pairs(scorer, x, y, temps, prefix_len)
    max_rows = max_rows or max(2, ROW_BUDGET // scorer.vocab.size)
    policy = Policy.for_pairs(scorer, x.shape[1], prefix_len, mode)
    t, spent = 0, 0
    while t < budget and st.live.any():
        md, length = policy.next()
        units = st.live.nonzero().flatten()
        end, tally = st.segment(md, t, min(budget, t + length), gen, max_rows)
        q_now = None if tally.q_now is None else tally.q_now[units]
        policy.observe(md, end - t, tally.moves[units], tally.rows, q_now, st.cache.unscored(st.free)[units])
        t, spent = end, spent + tally.rows
    return CouplingRun(tau=st.tau, censored=np.isnan(st.tau), temperature=temps.numpy(), budget=budget,
                       modes=policy.history if mode == "auto" else None, rows=int(spent))
