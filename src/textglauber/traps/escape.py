"""Escape from a perfect trap, timed exactly in law (docs/science.md, chapter 5: the escape section).

A perfect trap x* is an argmax fixed point (:func:`textglauber.traps.finder.coordinate_ascent`). Its
basin of radius k is the Hamming ball {x : d(x, x*) < k}; the chain *escapes* at the first step
at which d(x, x*) >= k. With k = 1 that is the first change of state, whose law is geometric with
the one-state holding time h(T) = 1 / (1 - P(x*, x*)) as its mean, exact from the n conditionals
of x* (:func:`holding_times`). With k > 1 the chain comes back to x* many times before it gets k
sites away (at low temperature, about exp(V / T) times, with V the least cost of a path out:
:mod:`textglauber.traps.quasipotential`); nothing gives that law in closed form on
a real model's vocabulary, so it is sampled.

A jump engine pays for every move, and those returns are moves: at the temperatures where the
escape is slow, a chain would need millions of them. :func:`escape_times` therefore keeps a
superbasin S: the trap, and each state of the ball the chains have come to twice. A chain standing
in S leaves it in one exact draw (:mod:`textglauber.engine.superbasin`: the first exit of the chain
restricted to S, by doubling); outside S it makes single exact jumps (a geometric holding time,
then the move). Both are exact in law for any S, so S decides only the cost, which is the events
(exits and jumps) and the rows scored: a state's n rows once, when a chain first stands in it.

Per trap and temperature the escape times of the chains are right-censored at the horizon (and at
the event budget ``max_jumps``, where a chain still in the basin stops at the step it reached);
:mod:`textglauber.traps.fits` gives their Kaplan-Meier medians and means and the Arrhenius fit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from .. import exact
from ..engine import draw_from, holding_time, leave_probability, score_gap, superbasin, without
from ..engine.superbasin import exit_cdf, exit_quantile
from .fits import mean_interval

LAW_BYTES = 1.5e9        # float64 conditionals of the states one cell holds at once (recomputed from rows past it)
BASIN_CAP = 256          # the superbasin's most states (the trap and the states come to twice)


class RowMemo:
    """A scorer that keeps every row it scores, keyed by (masked context, site): a row of site i does
    not read the token at i, so the states that differ only there share it, and the cells of one trap
    at other temperatures and distances reuse it (raw scores do not depend on T), as does the
    quasi-potential search (:mod:`textglauber.traps.quasipotential`); no draw changes. ``rows`` counts the
    rows the model scored."""

    def __init__(self, scorer, max_bytes: float = 3e9):
        self.inner, self.vocab = scorer, scorer.vocab
        self.max_rows = int(max_bytes // (4 * scorer.vocab.size))        # float32 rows kept
        self.memo: dict[tuple, torch.Tensor] = {}
        self.rows = 0

    @property
    def max_length(self) -> int:
        return self.inner.max_length

    def scores(self, states: torch.Tensor, sites: torch.Tensor) -> torch.Tensor:
        keys = [(tuple(x[:i]) + (-1,) + tuple(x[i + 1:]), i) for x, i in zip(states.tolist(), sites.tolist())]
        first = {}
        for j, key in enumerate(keys):
            if key not in self.memo:
                first.setdefault(key, j)
        fresh = {}
        if first:
            new = list(first.values())
            out = self.inner.scores(states[new], sites[new]).cpu()
            self.rows += len(new)
            fresh = {keys[j]: out[r] for r, j in enumerate(new)}
            if len(self.memo) + len(fresh) <= self.max_rows:
                self.memo.update(fresh)
        return torch.stack([fresh[key] if key in fresh else self.memo[key] for key in keys])


@dataclass
class EscapeRun:
    """First passages of ``chains`` chains from one trap at one temperature to Hamming distance >= k
    (:func:`escape_times`)."""

    k: int
    times: np.ndarray        # (B,) step of the first passage; where censored, the last step known
    censored: np.ndarray     # (B,) bool: not there by the horizon, nor within the move budget
    moves: np.ndarray        # (B,) events each chain made: single moves and superbasin exits
    exits: np.ndarray        # (B,) of which superbasin exits (each stands for any number of moves inside it)
    rows: int                # rows the engine asked for (one masked sequence at one site each)
    calls: int               # states scored (n rows each)
    distinct_states: int     # distinct states the chains stood in, the trap included
    basin_states: int        # members of the superbasin at the end


class _Cell:
    """One trap at one temperature and distance: the laws of the states the chains stand in, and the
    superbasin S (the trap, and every state of the ball that chains have come to ``visits`` times,
    at most ``cap``), with the exit tables of S built when a chain next stands in it."""

    def __init__(self, scorer, center: tuple, k: int, T: float, horizon: float, cap: int, visits: int):
        self.scorer, self.center, self.k, self.T, self.horizon = scorer, center, k, T, horizon
        self.cap, self.visits = cap, visits
        n, size = len(center), scorer.vocab.size
        self.keep = max(cap + 64, int(LAW_BYTES // (8 * n * size)))     # laws held at once
        self.laws: dict[tuple, tuple] = {}
        self.members, self.index = [center], {center: 0}
        self.arrivals: dict[tuple, int] = {}
        self.pending: list[tuple] = []
        self.tables = None
        self.calls = 0

    def distance(self, x: tuple) -> int:
        return sum(a != b for a, b in zip(x, self.center))

    def law(self, x: tuple):
        """(log pi_i(. | x_-i) as (n, |A|) float64, positions of x's tokens, leave chance per site)."""
        if x not in self.laws:
            if len(self.laws) >= self.keep:
                del self.laws[next(y for y in self.laws if y not in self.index)]
            state = torch.tensor(x)
            rows = site_scores(self.scorer, state)
            self.calls += 1
            pos = self.scorer.vocab.index_of(state)
            self.laws[x] = (torch.log_softmax(rows / self.T, -1), pos, leave_probability(rows, pos, self.T).numpy())
        return self.laws[x]

    def arrive(self, x: tuple) -> None:
        """Count an arrival at x. A state of the ball come to ``visits`` times waits to join S; the
        waiting states join together once they are a quarter of S (few rebuilds of the tables), or
        at once when one of them is come to twice as often (a state the chains keep returning to
        is not left outside)."""
        self.arrivals[x] = self.arrivals.get(x, 0) + 1
        if x not in self.index and self.arrivals[x] == self.visits:
            self.pending.append(x)
        room = self.cap - len(self.members)
        again = x not in self.index and self.arrivals[x] >= 2 * self.visits
        if room > 0 and self.pending and (again or len(self.pending) >= max(1, len(self.members) // 4)):
            for y in self.pending[:room]:
                self.index[y] = len(self.members)
                self.members.append(y)
            self.pending, self.tables = self.pending[room:], None

    def exit_tables(self):
        """(ExitLaw of S, (m, n) one-step exit chance by site, excluded (site, column) per member)."""
        if self.tables is None:
            laws = [self.law(y) for y in self.members]
            inside, excluded = self._inside(laws)
            site_exit = np.stack([_masked_mass(logp, excluded[a]) for a, (logp, _, _) in enumerate(laws)])
            self.tables = (superbasin.exit_law(inside, site_exit.sum(1), self.horizon), site_exit, excluded)
        return self.tables

    def _inside(self, laws):
        """The one-step chances between members (they differ at one site), and per member the (site,
        column) pairs a move out of S may not take: its own tokens, and the moves onto members."""
        M = torch.tensor(self.members)
        m, n = M.shape
        differ = M[:, None, :] != M[None, :, :]
        a_idx, b_idx = (differ.sum(-1) == 1).nonzero(as_tuple=True)
        sites = differ[a_idx, b_idx].float().argmax(-1)
        inside = np.zeros((m, m))
        excluded = [[(i, int(laws[a][1][i])) for i in range(n)] for a in range(m)]
        for a, b, i in zip(a_idx.tolist(), b_idx.tolist(), sites.tolist()):
            col = int(laws[b][1][i])
            inside[a, b] = math.exp(float(laws[a][0][i, col])) / n
            excluded[a].append((i, col))
        return inside, excluded

    def leave_basin(self, x: tuple, u: np.ndarray) -> tuple[float, tuple]:
        """A superbasin exit from member x: (steps it took, the state outside S it reached)."""
        law, site_exit, excluded = self.exit_tables()
        dt, a = superbasin.sample_exit(law, self.index[x], u[0], u[1])
        if not math.isfinite(dt):
            return dt, x
        i = int(draw_from(torch.as_tensor(site_exit[a])[None], torch.tensor([u[2]]))[0])
        p = self.law(self.members[a])[0][i].exp()
        p[[c for s, c in excluded[a] if s == i]] = 0
        return dt, self._put(self.members[a], i, p, u[3])

    def single_move(self, x: tuple, u: np.ndarray) -> tuple[float, tuple]:
        """One jump from x (not in S): its geometric holding time and the state it moves to."""
        logp, pos, leave = self.law(x)
        dt = float(holding_time(torch.tensor(leave.mean(), dtype=torch.float64), torch.tensor(u[0])))
        if not math.isfinite(dt):
            return dt, x
        i = int(draw_from(torch.as_tensor(leave)[None], torch.tensor([u[2]]))[0])
        return dt, self._put(x, i, without(logp[i:i + 1].exp(), pos[i:i + 1])[0], u[3])

    def _put(self, x: tuple, i: int, weights: torch.Tensor, u: float) -> tuple:
        col = int(draw_from(weights[None], torch.tensor([u], dtype=torch.float64))[0])
        y = list(x)
        y[i] = int(self.scorer.vocab.ids[col])
        return tuple(y)


def _masked_mass(logp: torch.Tensor, excluded: list[tuple[int, int]]) -> np.ndarray:
    """Per site, the chance that a step there picks it (1/n) and moves to a token not ``excluded``:
    a log-sum-exp over the allowed tokens, so a tiny chance beside a large excluded one keeps its digits."""
    i, c = torch.tensor(excluded).T
    masked = logp.index_put((i, c), torch.tensor(-math.inf, dtype=logp.dtype))
    return torch.logsumexp(masked, -1).exp().numpy() / logp.shape[0]


def escape_times(scorer, center, k: int, temperature: float, chains: int, horizon: float, seed: int, *,
                 max_jumps: int = 100_000, basin_cap: int = BASIN_CAP, visits: int = 2) -> EscapeRun:
    """``chains`` chains started at ``center`` (a state, (n,)), each run until its first step at
    Hamming distance >= ``k`` from it, or to step ``horizon`` (censored there), or until it has made
    ``max_jumps`` events (censored at the step of its last one). A chain outside the superbasin
    makes single exact jumps (a geometric holding time, then a move); inside it, it leaves the
    superbasin in one exact draw (:mod:`textglauber.engine.superbasin`). ``basin_cap=1`` keeps S to
    the trap alone: plain jumps. The chains share S, run one after another, and draw from one
    seeded generator; the same seed gives the same times on any machine (float64 on the CPU)."""
    center = tuple(torch.as_tensor(center, dtype=torch.long).flatten().tolist())
    n = len(center)
    if not 1 <= k <= n:
        raise ValueError(f"k = {k}: must be in [1, n = {n}] (the escape distance from the trap)")
    if not horizon >= 1:
        raise ValueError(f"horizon = {horizon}: must be at least one step")
    cell = _Cell(scorer, center, k, float(temperature), float(horizon), max(1, basin_cap), visits)
    rng = np.random.default_rng(int(seed))
    times, cens = np.zeros(chains), np.zeros(chains, bool)
    moves, exits = np.zeros(chains, np.int64), np.zeros(chains, np.int64)
    for c in range(chains):
        x, t = center, 0.0
        cell.arrive(x)
        while True:
            if moves[c] >= max_jumps:
                cens[c] = True
                break
            inside = x in cell.index
            dt, x = (cell.leave_basin if inside else cell.single_move)(x, rng.random(4))
            if t + dt > horizon:
                t, cens[c] = horizon, True
                break
            t, moves[c], exits[c] = t + dt, moves[c] + 1, exits[c] + inside
            if cell.distance(x) >= k:
                break
            cell.arrive(x)
        times[c] = t
    return EscapeRun(k=k, times=times, censored=cens, moves=moves, exits=exits, rows=cell.calls * n, calls=cell.calls,
                     distinct_states=len(cell.arrivals), basin_states=len(cell.members))


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
    """The temperatures at which the exact one-state holding time equals each of ``targets`` (steps),
    by bisection on log T: the holding time falls as T rises. The bracket starts at [lo, hi]; where
    the holding time at ``lo`` is still below a target (a trap with a tiny margin), lo falls by
    tenfold steps down to 1e-12. A target out of reach raises. Exact from the n rows; no chain is run."""
    def hold(T):
        return holding_times(rows, state, vocab, [T])[0]

    out = []
    for target in np.atleast_1d(targets):
        low = lo
        while hold(low) < target and low > 1e-12:
            low /= 10
        if not hold(low) >= target >= hold(hi):
            raise ValueError(f"holding time {target:g}: out of reach of this state, whose holding time is "
                             f"{hold(hi):.3g} at T = {hi:g} and {hold(low):.3g} at T = {low:g}")
        a, b = math.log(low), math.log(hi)
        for _ in range(60):
            mid = (a + b) / 2
            a, b = (mid, b) if hold(math.exp(mid)) > target else (a, mid)
        out.append(math.exp((a + b) / 2))
    return np.asarray(out)


# ----------------------------------------------------------------------------- against enumeration
def within_escape_distance(states: np.ndarray, center: int, k: int) -> np.ndarray:
    """The members of {x : d(x, x*) < k} among the enumerated ``states`` (x* = states[center]): the
    states a chain has not yet escaped from at distance k (strictly inside; the phase section's
    :func:`textglauber.phase.mixing.hamming_ball` is the closed ball d <= r)."""
    return (np.asarray(states) != np.asarray(states)[center]).sum(1) < k


def exact_exit_law(chain, center: int, k: int, horizon: float = 2.0 ** 1000) -> tuple[superbasin.ExitLaw, int]:
    """The exact law of the escape time from states[center] out of its ball of radius k on an
    enumerated chain, as the superbasin's doubling tables of the whole ball (no subtraction): with
    :func:`textglauber.engine.superbasin.exit_cdf` and ``exit_quantile`` it gives the distribution
    the chains are drawn from. Returns (tables, the center's row in them)."""
    members = within_escape_distance(chain.states, center, k)
    law = superbasin.exit_law(*exact.ball_split(chain.kernel, members), horizon)
    return law, int(np.flatnonzero(members).searchsorted(center))


def exact_escape(chain, center: int, k: int) -> dict:
    """Exact expected escape time from states[center] out of its Hamming ball of radius k on an
    enumerated chain (:func:`textglauber.exact.exit_time`, no subtraction, so deep traps keep their
    digits), and the expected number of moves (changes of state) it takes, from the same solve on
    the jump chain P(x, y) / (1 - P(x, x))."""
    P = chain.kernel
    members = within_escape_distance(chain.states, center, k)
    at = int(np.flatnonzero(members).searchsorted(center))
    leave = exact.leave_probabilities(P)
    J = sp.csr_matrix(P, copy=True)
    J.setdiag(0)
    J.eliminate_zeros()
    J = sp.diags(1 / leave) @ J
    return {"mean": float(exact.exit_time(P, members)[at]), "moves": float(exact.exit_time(J, members)[at]),
            "basin states": int(members.sum()), "holding": float(1 / leave[center])}


def distribution_test(times, law: superbasin.ExitLaw, start: int, bins: int = 10) -> dict:
    """A chi-square test of uncensored escape times against their exact law (:func:`exact_exit_law`):
    the bins are cut at the exact deciles (steps; a step that carries several deciles cuts once),
    their chances read off the exact CDF at those steps, so a discrete law is tested at its own
    atoms. Returns the statistic, its degrees of freedom, the p-value and the exact median."""
    from scipy.stats import chi2

    t = np.asarray(times, float)
    edges = sorted({exit_quantile(law, start, q) for q in np.arange(1, bins) / bins} - {math.inf})
    cdf = np.array([exit_cdf(law, start, e) for e in edges] + [1.0])
    probs = np.diff(np.concatenate([[0.0], cdf]))
    observed = np.diff(np.concatenate([[0], [(t <= e).sum() for e in edges], [len(t)]]))
    use = probs > 0
    expected = probs[use] * len(t)
    stat = float(((observed[use] - expected) ** 2 / expected).sum())
    dof = int(use.sum()) - 1
    return {"chi2": stat, "chi2 dof": dof, "chi2 p": float(chi2.sf(stat, dof)) if dof > 0 else math.nan,
            "exact median": exit_quantile(law, start, 0.5)}


def check_against_exact(table_scorer, chain, center: int, k: int, temperature: float, chains: int, seed: int,
                        level: float, max_jumps: int = 100_000, want: dict | None = None, basin_cap: int = BASIN_CAP) -> dict:
    """One exactness case: the escape times from an enumerated chain's state against their exact law.
    The mean by :func:`textglauber.traps.fits.mean_interval` at ``level``, and the whole distribution by
    :func:`distribution_test`, failed where its p-value is below 1 - ``level`` (a family of cases
    should share a Bonferroni level). No horizon: every chain runs until it escapes, within
    ``max_jumps`` events (a chain stopped there fails the case). ``want``: :func:`exact_escape` of the
    case, where the caller has solved it; ``basin_cap``: the superbasin's cap, lowered to run the
    capping code (``cap reached`` says whether the superbasin filled)."""
    want = want or exact_escape(chain, center, k)
    run = escape_times(table_scorer, torch.as_tensor(chain.states[center]), k, temperature, chains, math.inf, seed,
                       max_jumps=max_jumps, basin_cap=basin_cap)
    mean, lo, hi = mean_interval(run.times, level)
    dist = distribution_test(run.times, *exact_exit_law(chain, center, k))
    clean = not run.censored.any()
    mean_ok = bool(clean and lo <= want["mean"] <= hi)
    dist_ok = bool(clean and not dist["chi2 p"] < 1 - level)
    return {"k": k, "temperature": temperature, "exact mean": want["mean"], "exact moves": want["moves"],
            "one-state holding time": want["holding"], "basin states": want["basin states"],
            "chains": chains, "censored": float(run.censored.mean()), "mean": mean, "mean_low": lo, "mean_high": hi,
            "median": float(np.median(run.times)), **dist, "level": level, "mean inside": mean_ok,
            "distribution passes": dist_ok, "inside": mean_ok and dist_ok, "basin cap": basin_cap,
            "cap reached": bool(run.basin_states >= basin_cap), "rows": run.rows}
