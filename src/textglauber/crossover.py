"""The crossover chapter's analysis (docs/science.md, chapter 3), shared by its notebook and the findings page.

Budgets are counted in sweeps (one sweep = n steps) at every length: a chain or pair at length n
runs at most ``sweeps * n`` steps. A budget that is the same number of steps at every n would
censor more of the long sequences than of the short ones for no reason but their length, so any
time that grows with n (the fast phase's n log n included) would push the fast/slow boundary to
higher temperature as n grows, whatever the model does.

The boundary is then read with a criterion that does not move with n by itself. A coupling needs
every site where the two starts differ to be drawn at least once, which takes about n ln n steps
when sites are drawn uniformly (the coupon collector); the fast phase's coupling time is a
multiple c(T) of it. A cell (T, n) is *fast* when its median coupling time is within
``kappa * n ln n`` steps: under coupling times exactly c(T) n ln n the set of fast temperatures is
{T : c(T) <= kappa} at every n. Under any other law the criterion moves a little by itself: a law
c n ln n + b n does (its ratio to n ln n falls as b / ln n), and so does the coupon collector's
own median, whose ratio to n ln n falls from 1.20 at n = 6 to 1.10 at n = 48. So a shift of the
boundary is read only from intervals (:func:`boundary_intervals`): 'rises' where the range at the
longest length lies wholly above the one at the shortest. (Counting in sweeps alone removes the
factor n but keeps ln n, which still moves a threshold of B sweeps by ln(n_max) / ln(n_min)
across the grid.) The chapter's verdict on the crossover itself comes from the exact phase
diagram of two-token chains (:mod:`textglauber.phase`), not from these censored medians.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import growth
from .semantics import censored_median


def budgets(lengths, sweeps: float) -> dict[int, int]:
    """Steps per length for a budget of ``sweeps`` sweeps: round(sweeps * n), at least one."""
    return {int(n): max(1, int(round(float(sweeps) * int(n)))) for n in lengths}


def coupon_limit(n, kappa: float) -> float:
    """The fast criterion's limit at length n: kappa * n ln n steps."""
    return float(kappa) * float(n) * math.log(float(n))


def check_design(lengths, budget_sweeps: float, kappa: float) -> None:
    """Refuse a design whose budget cannot decide the criterion: at every length the budget must
    reach kappa n ln n, or a cell censored before that limit could be fast or slow."""
    for n in lengths:
        if budget_sweeps * n < coupon_limit(n, kappa):
            need = kappa * math.log(max(lengths))
            raise ValueError(f"budget_sweeps={budget_sweeps:g} is below fast_within * ln(n) = {coupon_limit(n, kappa) / n:.1f} "
                             f"sweeps at n = {n}: allowed budget_sweeps >= {need:.1f} for lengths up to {max(lengths)}")


def coupling_cells(pair_times: pd.DataFrame, kappa: float, seed: int = 0) -> pd.DataFrame:
    """Per (T, n): median coupling time with bootstrap interval and censored share (censored pairs
    at the length's budget), the budget, the criterion's limit kappa n ln n, and ``fast``."""
    rows = []
    for (T, n), g in pair_times.groupby(["temperature", "n"]):
        b = float(g.budget.iloc[0])
        med = censored_median(g.tau.to_numpy(), g.censored.to_numpy(), b, seed)
        limit = coupon_limit(n, kappa)
        rows.append({"temperature": float(T), "n": int(n), **med, "budget": b, "limit": limit,
                     "fast": bool(np.isfinite(med["median"]) and med["median"] <= limit)})
    return pd.DataFrame(rows)


def fast_threshold(cells: pd.DataFrame) -> list[tuple[int, float]]:
    """Per length: the lowest grid temperature from which every cell at that and every higher
    temperature is fast; inf where even the highest temperature is not. Cells without a ``fast``
    column count as fast when their median is within the budget (the old reading)."""
    fast = cells["fast"] if "fast" in cells else cells["median"].notna()
    out = []
    for n, g in cells.assign(_fast=fast.astype(bool)).groupby("n"):
        g = g.sort_values("temperature", ascending=False)
        ok = g["_fast"].to_numpy()
        run = int(np.argmin(ok)) if not ok.all() else len(ok)      # leading run of fast cells from the top
        out.append((int(n), float(g.temperature.iloc[run - 1]) if run else float("inf")))
    return out


BOUNDARY_LEVEL = 0.95      # the boundary's interval: the central 95% of its bootstrap replicates


def _fast_calls(t: np.ndarray, censored: np.ndarray, limit: float) -> np.ndarray:
    """Whether each replicate's (rows) median coupling time is within ``limit``: fewer than half of
    its pairs censored and its median, censored pairs counted at the budget, at most the limit
    (the rule of :func:`coupling_cells`)."""
    return (censored.mean(-1) < 0.5) & (np.median(t, axis=-1) <= limit)


def _threshold(temps: np.ndarray, fast: np.ndarray) -> np.ndarray:
    """Per replicate (rows of ``fast``, columns = ``temps`` ascending): the lowest temperature from
    which every cell at that and every higher temperature is fast (inf where the highest is not)."""
    run = np.cumprod(fast[:, ::-1], axis=1).sum(1)            # fast cells counted down from the top
    out = np.full(len(fast), np.inf)
    has = run > 0
    out[has] = temps[len(temps) - run[has]]
    return out


def boundary_intervals(pair_times: pd.DataFrame, kappa: float, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The fast threshold at each length with a bootstrap interval: every cell's pairs are resampled
    with replacement, each replicate's cells are called fast or slow by the rule of
    :func:`coupling_cells`, and the replicate's threshold is read as :func:`fast_threshold` reads
    it. Also each cell's share of replicates that call it fast. Returns per length: ``threshold``
    (from the pairs as drawn), ``low`` and ``high`` (the central :data:`BOUNDARY_LEVEL` of the
    replicates; inf where no temperature of the grid is fast)."""
    rng = np.random.default_rng(seed)
    rows = []
    for n, g in pair_times.groupby("n"):
        temps = np.sort(g.temperature.unique())
        limit = coupon_limit(n, kappa)
        fast_now, fast_boot = [], []
        for T in temps:
            c = g[g.temperature == T]
            t = np.where(c.censored.to_numpy(bool), c.budget.to_numpy(float), c.tau.to_numpy(float))
            cen = c.censored.to_numpy(bool)
            pick = rng.integers(len(t), size=(n_boot, len(t)))
            fast_now.append(_fast_calls(t[None], cen[None], limit)[0])
            fast_boot.append(_fast_calls(t[pick], cen[pick], limit))
        point = _threshold(temps, np.array([fast_now]))[0]
        boot = _threshold(temps, np.stack(fast_boot, axis=1))
        a = (1 - BOUNDARY_LEVEL) / 2
        rows.append({"n": int(n), "threshold": float(point), "low": float(np.quantile(boot, a, method="inverted_cdf")),
                     "high": float(np.quantile(boot, 1 - a, method="inverted_cdf")), "replicates": n_boot})
    return pd.DataFrame(rows)


def boundary_verdict(intervals: pd.DataFrame) -> str:
    """'rises' where the boundary's interval at the longest length lies wholly above the one at the
    shortest, 'falls' where wholly below, else 'cannot tell' (the intervals overlap)."""
    first, last = intervals.sort_values("n").iloc[[0, -1]].to_dict("records")
    if last["low"] > first["high"]:
        return "rises"
    if last["high"] < first["low"]:
        return "falls"
    return "cannot tell"


def tstar_comparison(t_hat: float, bounds_n: int, boundary) -> dict | None:
    """T*-hat (estimated at length ``bounds_n``) against the fast threshold at the same length, or
    at the nearest coupling length when the grid lacks it. None when no length is fast at all."""
    finite = [(n, t) for n, t in boundary if np.isfinite(t)]
    if not boundary:
        return None
    n_used, t_fast = min(boundary, key=lambda nt: (abs(nt[0] - bounds_n), nt[0]))
    if not np.isfinite(t_fast):
        return {"n": n_used, "same_n": n_used == bounds_n, "fast": float("inf"), "ratio": float("nan"),
                "t_hat": t_hat, "bounds_n": bounds_n, "any_fast": bool(finite)}
    return {"n": n_used, "same_n": n_used == bounds_n, "fast": t_fast, "ratio": t_hat / t_fast, "t_hat": t_hat,
            "bounds_n": bounds_n, "any_fast": True}


def law_table(times: pd.DataFrame, temperatures, *, seed: int = 0, check=None, min_lengths: int = 3):
    """Growth laws of censored times per temperature. ``times`` holds n, temperature, tau, censored
    and budget (per row, in steps). Returns (table, {T: LawComparison}); temperatures with medians at
    fewer than ``min_lengths`` lengths are compared all the same (the comparison says it cannot tell).
    ``check``: a design check (growth.design_check) whose reliability decides the reported verdict."""
    rows, comps = [], {}
    for T in temperatures:
        g = times[np.isclose(times.temperature, T)]
        if not len(g):
            continue
        c = growth.compare_laws(g.n.to_numpy(), g.tau.to_numpy(), g.censored.to_numpy(), g.budget.to_numpy(), seed=seed)
        comps[float(T)] = c
        lf, lo = c.log_factor, c.log_factor_offset
        rows.append({"temperature": float(T), "lengths with a median": f"{c.usable} of {len(c.cells)}",
                     "verdict": c.verdict(), "support": c.support if c.best else "",
                     "reported": c.reported(check) if check is not None else c.verdict(),
                     "best law": c.best, "margin": c.delta_chi2, "p": c.p, "p low": c.p_low, "p high": c.p_high,
                     "log factor a": lf.get("a", np.nan), "log factor p-value": lf.get("p_value", np.nan),
                     "with offset a": lo.get("a", np.nan), "with offset p-value": lo.get("p_value", np.nan),
                     "fit p-value": c.gof_p})
    return pd.DataFrame(rows), comps


def fast_temperatures(cells: pd.DataFrame, min_lengths: int = 3) -> list[float]:
    """Temperatures whose coupling cells are fast at ``min_lengths`` lengths or more: where a
    growth law of coupling times can be tested at all."""
    counts = cells[cells.fast].groupby("temperature").n.nunique()
    return sorted(float(T) for T, k in counts.items() if k >= min_lengths)
