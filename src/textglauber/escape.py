"""Escape from a perfect trap, timed by the jump engine (chapter 5's Arrhenius section).

A perfect trap x* is an argmax fixed point (:func:`textglauber.trapsearch.perfect_trap`). Its
basin of radius k is the Hamming ball {x : d(x, x*) < k}; the chain *escapes* at the first step
at which d(x, x*) >= k. With k = 1 that is the first change of state, whose law is geometric with
the one-state holding time h(T) = 1 / (1 - P(x*, x*)) as its mean, exact from the n conditionals
of x* (:func:`holding_times`). With k > 1 the chain may come back to x* many times before it gets
k sites away; nothing gives that law in closed form on a real model's vocabulary, so it is
sampled.

The chains run by jumps (:mod:`textglauber.engine.jump`): each holding time is drawn from its
geometric law in one draw, so a step that changes nothing costs nothing and a horizon of 1e10 or
more steps costs only the moves made. The cost is the number of moves and the rows scored: a
state's n rows are scored once, when some chain first stands in it (or again after the cache let
it go), so rows grow with the distinct states visited, not with the steps simulated.

Per trap and temperature the escape times of the chains are right-censored at the horizon (and at
the move budget ``max_jumps``, where a chain still in the basin stops at the step it reached);
:func:`summarize` gives the Kaplan-Meier median and restricted mean with bootstrap intervals, and
:func:`arrhenius` fits log tau = Delta_eff / T + c over the temperatures.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from . import exact
from .engine import ChainSpec, chain_cache, leave_probability, score_gap
from .engine.jump import ROW_BUDGET, ChainJumps, jumps


class RowMemo:
    """A scorer that keeps every row it scores, keyed by (state, site): the cells of one trap at
    other temperatures and distances reuse them (raw scores do not depend on T), which changes no
    draw. ``rows`` counts the rows the model scored, ``asked`` those the engine asked for."""

    def __init__(self, scorer, max_rows: int = 200_000):
        self.inner, self.vocab, self.max_rows = scorer, scorer.vocab, max_rows
        self.memo: dict[tuple, torch.Tensor] = {}
        self.rows = self.asked = 0

    @property
    def max_length(self) -> int:
        return self.inner.max_length

    def scores(self, states: torch.Tensor, sites: torch.Tensor) -> torch.Tensor:
        keys = [(tuple(x), i) for x, i in zip(states.tolist(), sites.tolist())]
        new = [j for j, key in enumerate(keys) if key not in self.memo]
        self.asked += len(keys)
        fresh = {}
        if new:
            out = self.inner.scores(states[new], sites[new]).cpu()
            self.rows += len(new)
            fresh = {keys[j]: out[r] for r, j in enumerate(new)}
            if len(self.memo) + len(fresh) <= self.max_rows:
                self.memo.update(fresh)
        return torch.stack([fresh[key] if key in fresh else self.memo[key] for key in keys])


@dataclass
class EscapeRun:
    """First passages of ``chains`` chains from one trap at one temperature (:func:`escape_times`):
    for each distance k = 1 .. k_max, the step at which each chain first stood k or more sites away."""

    times: np.ndarray        # (B, k_max) step of the first passage to distance >= k; where censored, the last step known
    censored: np.ndarray     # (B, k_max) bool: not there by the horizon, nor within the move budget
    moves: np.ndarray        # (B,) moves (changes of state) each chain made
    rows: int                # rows scored (one masked sequence at one site each)
    calls: int               # scorer calls
    distinct_states: int     # distinct states the chains stood in, the trap included

    def at(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(times, censored) of the escape to distance >= k."""
        return self.times[:, k - 1], self.censored[:, k - 1]


class _EscapingChains(ChainJumps):
    """Chains as jump units that record their first steps at each distance 1 .. k from ``center``
    and stop at distance k."""

    def __init__(self, scorer, states, cache, spec, center: torch.Tensor, k: int):
        super().__init__(scorer, states, cache, spec)
        self.center, self.k = center, k
        self.first = torch.full((len(states), k), math.nan, dtype=torch.float64)
        self.moves = torch.zeros(len(states), dtype=torch.long)
        self.seen = {tuple(s) for s in states.tolist()}

    def land(self, chains, sites, new, t, carried):
        super().land(chains, sites, new, t, carried)
        self.moves[chains] += 1
        self.seen.update(tuple(s) for s in self.states[chains].tolist())
        d = (self.states[chains] != self.center).sum(1)
        reached = (torch.arange(1, self.k + 1)[None] <= d[:, None]) & torch.isnan(self.first[chains])
        self.first[chains] = torch.where(reached, t.to(torch.float64)[:, None], self.first[chains])
        self.live[chains[d >= self.k]] = False


def escape_times(scorer, center, k: int, temperature: float, chains: int, horizon: float, seed: int, *,
                 max_jumps: int = 100_000) -> EscapeRun:
    """``chains`` chains started at ``center`` (a state, (n,)), each run by exact jumps until its
    first step at Hamming distance >= ``k`` from it, or to step ``horizon`` (censored there), or
    until it has made ``max_jumps`` moves (censored at the step of its last move); the first steps
    at every distance 1 .. k are recorded on the way. One seeded generator; the same seed gives the
    same times on any machine (the draws are float64 on the CPU)."""
    center = torch.as_tensor(center, dtype=torch.long).flatten()
    n = len(center)
    if not 1 <= k <= n:
        raise ValueError(f"k = {k}: must be in [1, n = {n}] (the escape distance from the trap)")
    if not horizon >= 1:
        raise ValueError(f"horizon = {horizon}: must be at least one step")
    horizon = min(float(horizon), 1e300)          # an infinite horizon: run until every chain escapes or stops
    states = center.repeat(chains, 1)
    spec = ChainSpec(temperature=float(temperature), steps=1, mode="jump")
    units = _EscapingChains(scorer, states, chain_cache(states), spec, center, k)
    gen = torch.Generator().manual_seed(int(seed))
    clock = torch.zeros(chains, dtype=torch.float64)
    max_rows = max(1, ROW_BUDGET // scorer.vocab.size)
    _, rows, calls = jumps(units, gen, 0, horizon, max_rows, rounds=max_jumps, clock=clock)
    done = ~torch.isnan(units.first)
    times = torch.where(done, units.first, clock.clamp(max=horizon)[:, None])
    return EscapeRun(times=times.numpy(), censored=(~done).numpy(), moves=units.moves.numpy(), rows=int(rows),
                     calls=int(calls), distinct_states=len(units.seen))


# ----------------------------------------------------------------------------- exact one-state times
def site_scores(scorer, state) -> torch.Tensor:
    """The n rows of raw scores of ``state`` ((n,) token ids), one per masked site: (n, |A|)."""
    x = torch.as_tensor(state, dtype=torch.long).flatten()
    n = len(x)
    return scorer.scores(x.repeat(n, 1), torch.arange(n)).double().cpu()


def holding_times(rows: torch.Tensor, state, vocab, temperatures) -> np.ndarray:
    """The exact expected holding time 1 / q(T) of ``state`` at each temperature, from its n rows
    (:func:`site_scores`): q = (1/n) sum_i (1 - pi_i(x_i | x_-i)) summed over the other tokens, so
    it keeps its digits where q is far below 1e-16 (inf where q is 0 in float64)."""
    pos = vocab.index_of(torch.as_tensor(state, dtype=torch.long).flatten())
    out = []
    for T in np.atleast_1d(temperatures):
        q = float(leave_probability(rows, pos, float(T)).mean())
        out.append(math.inf if q == 0 else 1.0 / q)
    return np.asarray(out)


def margin(rows: torch.Tensor, state, vocab) -> float:
    """The trap's score margin Delta = min_i (s_i(x_i) - max_{a != x_i} s_i(a)) (chapter 2's
    definition, positive exactly at a perfect trap), from its n rows."""
    pos = vocab.index_of(torch.as_tensor(state, dtype=torch.long).flatten())
    return float(score_gap(rows, pos).min())


def temperatures_for(rows: torch.Tensor, state, vocab, targets, lo: float = 1e-3, hi: float = 1e3) -> np.ndarray:
    """The temperatures at which the exact one-state holding time equals each of ``targets`` (steps,
    each above the holding time at T = ``hi``), by bisection on log T: the holding time falls as T
    rises. Exact from the n rows; no chain is run."""
    out = []
    for target in np.atleast_1d(targets):
        a, b = math.log(lo), math.log(hi)
        for _ in range(60):
            mid = (a + b) / 2
            h = holding_times(rows, state, vocab, [math.exp(mid)])[0]
            a, b = (mid, b) if h > target else (a, mid)
        out.append(math.exp((a + b) / 2))
    return np.asarray(out)


# ----------------------------------------------------------------------------- statistics
def _km(times, observed):
    """Kaplan-Meier curves of each row of (R, m) times: (sorted times, events, survival after each),
    events before censorings at a tie (a unit censored at u is at risk at u)."""
    t, e = np.atleast_2d(np.asarray(times, float)), np.atleast_2d(np.asarray(observed, bool))
    order = np.lexsort((~e, t), axis=-1)
    t, e = np.take_along_axis(t, order, -1), np.take_along_axis(e, order, -1)
    m = t.shape[-1]
    return t, e, np.cumprod(1.0 - e / (m - np.arange(m)), -1)


def km_restricted_mean(times, observed):
    """The area under the Kaplan-Meier survival curve up to the largest time (per row of a 2-D
    array): the mean escape time when nothing is censored, a lower bound of it when the largest
    time is censored."""
    t, _, S = _km(times, observed)
    prev_t = np.concatenate([np.zeros((len(t), 1)), t[:, :-1]], 1)
    prev_S = np.concatenate([np.ones((len(t), 1)), S[:, :-1]], 1)
    area = (prev_S * (t - prev_t)).sum(-1)
    return float(area[0]) if np.ndim(times) == 1 else area


def km_medians(times, observed) -> np.ndarray:
    """Kaplan-Meier medians of each row (as :func:`textglauber.growth.km_median`: the first time the
    curve falls below 1/2, or the midpoint of the stretch where it sits at 1/2), inf where it never
    falls that low."""
    t, e, S = _km(times, observed)
    below = S < 0.5 - 1e-12
    at = (np.abs(S - 0.5) <= 1e-12) & e
    m = t.shape[-1]
    lt = np.where(below.any(-1), below.argmax(-1), m)
    eq = np.where(at.any(-1), at.argmax(-1), m)
    rows = np.arange(len(t))
    t_lt = np.where(lt < m, t[rows, np.minimum(lt, m - 1)], np.inf)
    t_eq = t[rows, np.minimum(eq, m - 1)]
    return np.where(eq < lt, np.where(lt < m, (t_eq + t_lt) / 2, np.inf), t_lt)


def summarize(times, censored, n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> dict:
    """Kaplan-Meier median and restricted mean of one cell's escape times with percentile bootstrap
    intervals (chains resampled; a replicate whose curve stays above 1/2 gives an infinite median)
    and the censored share. The mean is a lower bound where a time is censored."""
    t, e = np.asarray(times, float), ~np.asarray(censored, bool)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(t), (n_boot, len(t)))
    meds, means = km_medians(t[draws], e[draws]), km_restricted_mean(t[draws], e[draws])
    q = [(1 - level) / 2, 1 - (1 - level) / 2]
    return {"chains": len(t), "censored": float((~e).mean()), "median": _median(t, e),
            "median_low": float(np.quantile(meds, q[0])), "median_high": float(np.quantile(meds, q[1])),
            "mean": km_restricted_mean(t, e), "mean_low": float(np.quantile(means, q[0])),
            "mean_high": float(np.quantile(means, q[1])), "mean_is_lower_bound": bool((~e).any())}


def _median(t, e) -> float:
    return float(km_medians(t, e)[0])


# ----------------------------------------------------------------------------- the Arrhenius fit
@dataclass
class Arrhenius:
    """log tau = slope / T + intercept over the temperatures whose median escape time is finite."""

    slope: float
    slope_low: float
    slope_high: float
    intercept: float
    temperatures: int         # temperatures used in the fit
    chi2_p: float             # goodness of fit of the line against the medians' bootstrap errors
    span_decades: float       # log10 of the largest over the smallest median used

    def holds(self, alpha: float = 0.01) -> bool:
        """Whether a straight line in 1/T is consistent with the medians (goodness of fit p >= alpha)."""
        return self.temperatures >= 3 and self.chi2_p >= alpha


def _line(x, y):
    return np.linalg.lstsq(np.stack([x, np.ones_like(x)], 1), y, rcond=None)[0]


def arrhenius(temperatures, cells: list[tuple[np.ndarray, np.ndarray]], n_boot: int = 1000, seed: int = 0) -> Arrhenius:
    """Fit log(median escape time) against 1/T by least squares over the temperatures with a finite
    median; the slope's 95% interval from refits to bootstrap replicates (each temperature's chains
    resampled, each replicate fitted over the temperatures where all its medians are finite)."""
    T = np.asarray(temperatures, float)
    cells = [(np.asarray(t, float), ~np.asarray(c, bool)) for t, c in cells]       # (times, observed)
    meds = np.array([_median(t, e) for t, e in cells])
    use = np.isfinite(meds)
    if use.sum() < 2:
        return Arrhenius(math.nan, math.nan, math.nan, math.nan, int(use.sum()), math.nan, math.nan)
    x, y = 1 / T[use], np.log(meds[use])
    slope, icpt = _line(x, y)
    rng = np.random.default_rng(seed)
    boot = np.empty((n_boot, int(use.sum())))
    for j, (t, e) in enumerate(c for c, u in zip(cells, use) if u):
        d = rng.integers(0, len(t), (n_boot, len(t)))
        boot[:, j] = km_medians(t[d], e[d])
    fin = np.isfinite(boot).all(1)
    slopes = np.array([_line(x, np.log(b))[0] for b in boot[fin]])
    se = np.log(boot[fin]).std(0) if fin.sum() > 1 else np.full(len(x), math.nan)
    p = _chi2_p(y - (slope * x + icpt), se, len(x) - 2)
    lo, hi = (np.quantile(slopes, [0.025, 0.975]) if len(slopes) else (math.nan, math.nan))
    return Arrhenius(float(slope), float(lo), float(hi), float(icpt), int(use.sum()), p,
                     float(np.log10(meds[use].max() / meds[use].min())))


def _chi2_p(resid, se, dof) -> float:
    from scipy.stats import chi2

    if dof < 1 or not np.all(se > 0):
        return math.nan
    return float(chi2.sf(float(((resid / se) ** 2).sum()), dof))


# ----------------------------------------------------------------------------- against enumeration
def hamming_ball(states: np.ndarray, center: int, k: int) -> np.ndarray:
    """The members of {x : d(x, x*) < k} among the enumerated ``states`` (x* = states[center])."""
    return (np.asarray(states) != np.asarray(states)[center]).sum(1) < k


def exact_escape(chain, center: int, k: int) -> dict:
    """Exact expected escape time from states[center] out of its Hamming ball of radius k on an
    enumerated chain (:func:`textglauber.exact.exit_time`, no subtraction, so deep traps keep their
    digits), and the expected number of moves (changes of state) it takes, from the same solve on
    the jump chain P(x, y) / (1 - P(x, x))."""
    P = chain.kernel
    members = hamming_ball(chain.states, center, k)
    at = int(np.flatnonzero(members).searchsorted(center))
    leave = exact.leave_probabilities(P)
    J = sp.csr_matrix(P, copy=True)
    J.setdiag(0)
    J.eliminate_zeros()
    J = sp.diags(1 / leave) @ J
    return {"mean": float(exact.exit_time(P, members)[at]), "moves": float(exact.exit_time(J, members)[at]),
            "basin states": int(members.sum()), "holding": float(1 / leave[center])}


def check_against_exact(table_scorer, chain, center: int, k: int, temperature: float, chains: int, seed: int,
                        level: float, n_boot: int = 2000, max_jumps: int = 100_000, want: dict | None = None) -> dict:
    """One exactness case: the jump engine's escape times from an enumerated chain's state against
    the exact mean. ``level`` is the interval's coverage (a family of cases should share a
    Bonferroni level). No horizon: every chain runs until it escapes, within ``max_jumps`` moves.
    ``want``: :func:`exact_escape` of the case, where the caller has solved it already."""
    want = want or exact_escape(chain, center, k)
    run = escape_times(table_scorer, torch.as_tensor(chain.states[center]), k, temperature, chains, math.inf, seed,
                       max_jumps=max_jumps)
    t, c = run.at(k)
    got = summarize(t, c, n_boot=n_boot, level=level, seed=seed)
    inside = bool(not c.any() and got["mean_low"] <= want["mean"] <= got["mean_high"])
    return {"k": k, "temperature": temperature, "exact mean": want["mean"], "exact moves": want["moves"],
            "one-state holding time": want["holding"], "basin states": want["basin states"],
            "chains": chains, "censored": got["censored"], "mean": got["mean"], "mean_low": got["mean_low"],
            "mean_high": got["mean_high"], "level": level, "inside": inside, "rows": run.rows}
