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


def law_caveat(lengths) -> str:
    """The fit caveat the chapter and the findings page both show (growth.caveat, as a sentence)."""
    text = growth.caveat(lengths)
    return text[0].upper() + text[1:] + "."


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


def cells_view(cells: pd.DataFrame, kappa: float) -> pd.DataFrame:
    """The coupling cells (:func:`coupling_cells`) with the column names the page shows."""
    return cells.rename(columns={"median": "median coupling time", "ci_low": "95% CI low", "ci_high": "95% CI high",
                                 "censored": "share censored", "limit": f"{kappa:g} n ln n"})


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


def threshold_trend(boundary: list[tuple[int, float]]) -> str:
    """How the fast threshold moves from the shortest to the longest length, with an end where no
    temperature is fast (inf) read as 'beyond the grid', never dropped."""
    if len(boundary) < 2:
        return "cannot be followed over a single length"
    first, last = boundary[0][1], boundary[-1][1]
    if np.isinf(first) and np.isinf(last):
        return "cannot be located: no temperature of the grid is fast at either end"
    if np.isinf(last):
        return "rises beyond the grid"
    if np.isinf(first):
        return "falls from beyond the grid"
    trend = "rises" if last > first else ("stays the same" if last == first else "falls")
    ts = [t for _, t in boundary]
    steps = np.diff(ts)
    if (steps > 0).any() and (steps < 0).any():
        trend += " (not monotonically: " + ", ".join(f"{t:g}" for t in ts) + ")"
    return trend


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


def _range(low: float, high: float) -> str:
    show = lambda t: "beyond the grid" if np.isinf(t) else f"{t:g}"
    return show(low) if low == high else f"{show(low)} to {show(high)}"


def boundary_interval_sentence(intervals: pd.DataFrame, kappa: float) -> str:
    """The boundary as a range per length and what the ranges allow one to say, as a sentence."""
    iv = intervals.sort_values("n")
    by_n = "; ".join(f"n = {r.n}: {_range(r.low, r.high)}" for r in iv.itertuples())
    verdict = boundary_verdict(iv)
    said = {"rises": "rises: its range at the longest length lies wholly above the one at the shortest",
            "falls": "falls: its range at the longest length lies wholly below the one at the shortest",
            "cannot tell": "may rise, stay or fall as far as these pairs can tell: the ranges at the shortest and "
                           "the longest length overlap"}[verdict]
    return (f"With each cell's pairs resampled ({int(iv.replicates.iloc[0])} bootstrap replicates), the lowest fast "
            f"temperature (median within {kappa:g} n ln n steps at it and above) ranges over the central "
            f"{BOUNDARY_LEVEL:.0%} of replicates as follows, {by_n}. The boundary {said}.")


def boundary_sentence(boundary, kappa: float) -> str:
    """The boundary by length, with the criterion named and no trend read off the point values
    (:func:`boundary_interval_sentence` says whether it moves; no final full stop)."""
    bt = ", ".join(f"n = {n}: " + ("no temperature of the grid" if np.isinf(t) else f"T ≥ {t:g}") for n, t in boundary)
    return (f"lowest temperature from which the median pair coupled within {kappa:g} n ln n steps at that and every "
            f"higher temperature of the grid, by length, read off the pairs as drawn: {bt} (point values: whether the "
            f"boundary moves with n is read from their bootstrap ranges, not from these)")


def boundary_line(boundary, kappa: float) -> str:
    """:func:`boundary_sentence` as a sentence of its own: capitalized (no final full stop)."""
    text = boundary_sentence(boundary, kappa)
    return text[0].upper() + text[1:]


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


def tstar_sentence(cmp: dict | None, model: str, kappa: float) -> str:
    """One sentence setting T*-hat against the fast temperature at the same n (no final full stop)."""
    if cmp is None:
        return f"The coupling grid has no length, so T*-hat of {model} is not set against a fast temperature"
    where = (f"at the same length, n = {cmp['n']}" if cmp["same_n"] else
             f"at n = {cmp['n']}, the coupling length nearest to the bounds chapter's n = {cmp['bounds_n']} "
             "(the grid does not hold that length)")
    head = (f"T*-hat = {cmp['t_hat']:.2f} for {model}, estimated at n = {cmp['bounds_n']} as a maximum over sampled "
            "contexts and so a lower bound on the sufficient temperature T*")
    if not np.isfinite(cmp["fast"]):
        return f"{head}; {where}, no temperature of the grid is fast (within {kappa:g} n ln n steps), so there is no ratio"
    return (f"{head}; {where}, the lowest fast temperature is {cmp['fast']:g}, so T* is at least {cmp['ratio']:.2f} "
            "times it (the preprint reports about an order of magnitude)")


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


def sensitivity_view(sens: pd.DataFrame, column: str = "reported") -> pd.DataFrame:
    """The threshold-sensitivity table with a one-cell conclusion and exponent interval per row."""
    named = [v if v in ("cannot tell", "none of the three") or not s else f"{v} ({s})"
             for v, s in zip(sens[column], sens.support)]
    return sens.assign(conclusion=named, threshold=[f"δ = {d:g}" for d in sens.delta],
                       p_interval=[f"{p:.2f} [{lo:.2f}, {hi:.2f}]" if np.isfinite(p) else "–"
                                   for p, lo, hi in zip(sens.p, sens["p low"], sens["p high"])])


def sensitivity_sentence(sens: pd.DataFrame, column: str = "reported") -> str:
    """Whether each temperature's conclusion holds at every threshold."""
    lines = []
    for T, g in sens.groupby("temperature"):
        verdicts = sorted(set(g[column]))
        if len(verdicts) == 1:
            lines.append(f"At T = {T:g} the conclusion is the same ({verdicts[0]}) at every threshold from "
                         f"{g.delta.min():g} to {g.delta.max():g}.")
        else:
            by = ", ".join(f"δ = {d:g}: {v}" for d, v in zip(g.delta, g[column]))
            lines.append(f"At T = {T:g} the conclusion depends on the threshold ({by}).")
    return " ".join(lines)


def coupling_law_paragraph(comps: dict, check, lengths, pairs: int) -> str:
    """What the coupling times' growth law says at the fast temperatures, with the design's power
    to tell n from n log n at this range."""
    span = f"n = {min(lengths)} to {max(lengths)} (a factor of {max(lengths) / min(lengths):.3g})"
    if not comps:
        text = (f"No temperature of the grid is fast at three lengths or more of {span}, so no growth law of the "
                "coupling times is tested.")
    else:
        text = " ".join(f"Coupling times at T = {T:g}: {c.sentence(check)}." for T, c in comps.items())
    return text + " " + power_sentence(check, span, pairs)


def range_sentence(needed: pd.DataFrame, per_cell: int) -> str:
    """From growth.needed_range: the narrowest range of lengths that tells n from n log n with this
    many chains or pairs per length, or that none of those tried does."""
    ok = needed[needed["tells them apart"]]
    tried = ", ".join(f"{f:g}" for f in needed.factor)
    if not len(ok):
        return (f"With {per_cell} per length, none of the ranges tried (factors {tried} from the shortest length, five "
                "lengths each) tells a true n from a true n log n law reliably; more chains per length are needed as well.")
    r = ok.iloc[0]
    return (f"With {per_cell} per length, the narrowest range tried that tells a true n from a true n log n law reliably "
            f"is a factor of {r.factor:g} (lengths {', '.join(map(str, r.lengths))}).")


def power_sentence(check: pd.DataFrame, span: str, per_cell: int) -> str:
    """The design's power to tell n from n log n, read off its design check: how often a true n and
    a true n log n law are named right, and whether either is ever named for the other."""
    rows = check.set_index("truth")
    if not {"n", "n log n"} <= set(rows.index):
        return ""
    reps = int(rows.loc["n", "replicates"])
    right_n, right_nl = int(rows.loc["n", "right"]), int(rows.loc["n log n", "right"])
    text = (f"At this design ({span}, {per_cell} per cell) the rule names a true n law in {right_n} and a true n log n "
            f"law in {right_nl} of {reps} synthetic replicates")
    if min(right_n, right_nl) >= 0.8 * reps:
        return text + ": it can tell the two apart."
    return (text + ": it cannot reliably tell n from n log n at this range, so a 'cannot tell' here is the design's "
            "limit, not evidence against either law. Telling them apart needs a wider range of lengths or more chains per "
            "cell (the two laws' local exponents differ by only 1/ln n).")


def budget_sentence(gain: pd.DataFrame, reference_sweeps: float, budget_sweeps: float) -> str:
    """What the longer coupling budget bought, from the budget-comparison table."""
    tot = gain.set_index("n").loc["all"]
    ratio = tot["engine / plain at reference"]
    text = (f"Over the {int(tot.pairs)} pairs of the grid, {tot['censored at reference']:.0%} had not coupled within "
            f"{reference_sweeps:g} sweeps and {tot['censored at budget']:.0%} had not within {budget_sweeps:g}. The engine "
            f"scored {int(tot['engine rows at budget']):,} encoder rows for the longer budget: ")
    if ratio <= 1:
        text += f"{ratio:.2f} times the plain engine's cost at the shorter budget, so the longer budget came at no more work."
    else:
        text += (f"{ratio:.2f} times the plain engine's cost at the shorter budget ({int(tot['plain rows at reference']):,} "
                 f"rows) and {tot['engine rows at budget'] / tot['plain rows at budget']:.2f} times what the plain engine "
                 f"would have needed for the same budget ({int(tot['plain rows at budget']):,} rows).")
    if tot["censored at budget"] > 0:
        text += (f" Pairs still censored at {budget_sweeps:g} sweeps are lower bounds on their coupling times, and the "
                 "cells they fill stay marked `>budget`.")
    return text


def tstar_line(bounds_dir, model: str, boundary, kappa: float) -> str:
    """T*-hat from the bounds chapter's results (if any) against the fast temperature at its length."""
    from pathlib import Path

    from .results import NotThisRun, read_manifest, vouched_table

    bounds_dir = Path(bounds_dir)
    if not (bounds_dir / "alpha.parquet").exists() or read_manifest(bounds_dir) is None:
        return "The bounds chapter has no results for this profile, so T* is not set against the fast temperature here"
    try:
        tab = vouched_table(bounds_dir, "alpha")
    except NotThisRun as exc:
        return f"T* is not set against the fast temperature here: {exc}"
    mine = tab[tab.model == model]
    if not len(mine):
        return (f"The bounds chapter of this profile did not estimate T* for {model}, so it is not set against the fast "
                "temperature here")
    bounds_n = int(read_manifest(bounds_dir)["parameters"]["seq_len"])
    return tstar_sentence(tstar_comparison(float(mine.t_star.iloc[0]), bounds_n, boundary), model, kappa)


def model_sentence(model: str, lm_name: str, embedder: str, *, profile: str, trials: int, pairs: int) -> str:
    """The run's model, embedder and sample sizes beside the preprint's 100 trials on BERT."""
    return (f"Model: {lm_name} with embedder {embedder}, profile '{profile}', {trials} chains per (T, n) for the hitting "
            f"times and {pairs} pairs per cell for coupling, against the preprint's 100 trials on BERT"
            + ("." if model == "bert-base-uncased" else f"; the thresholds here describe {lm_name}, not BERT."))


def best_curve(c, grid) -> np.ndarray | None:
    """The fitted curve of the comparison's best law in its better form (a f(n) + b), or None."""
    row = next((m for m in c.models if m.get("model") == c.best_model), None) if c.best_model else None
    if row is None or row.get("law") not in growth.LAWS:
        return None
    return row["a"] * growth.LAWS[row["law"]](np.asarray(grid, float)) + (row.get("b") or 0.0)


def plot_medians(ax, comps: dict, ylabel: str) -> None:
    """Per temperature: the cell medians with bootstrap intervals against n (log-log), and the
    curve of the model the rule found best where it has one."""
    for T, c in comps.items():
        g = c.cells
        ok = g["median"].notna()
        yerr = np.clip([g["median"][ok] - g.ci_low[ok], g.ci_high[ok] - g["median"][ok]], 0, None)
        line = ax.errorbar(g.n[ok], g["median"][ok], yerr=yerr, marker="o", capsize=3, label=f"T = {T:g}")
        grid = np.linspace(g.n.min(), g.n.max(), 50)
        fit = best_curve(c, grid)
        if fit is not None:
            ax.plot(grid, fit, ls=":", color=line[0].get_color())
    ax.set_xscale("log"); ax.set_yscale("log")
    ax.set_xlabel("sequence length n"); ax.set_ylabel(ylabel)
    ax.set_title("medians with bootstrap 95% intervals; dotted: the best-fitting model")
    if comps:
        ax.legend()


def plot_coupling_grid(ax, cells: pd.DataFrame) -> None:
    """Heat map of log10 median coupling time over (T, n); censored cells marked '>budget', fast
    cells starred, the censored share under each median."""
    import seaborn as sns

    med = cells.pivot(index="temperature", columns="n", values="median").sort_index(ascending=False)
    cen = cells.pivot(index="temperature", columns="n", values="censored").reindex(med.index)
    fast = cells.pivot(index="temperature", columns="n", values="fast").reindex(med.index)
    budget = cells.pivot(index="temperature", columns="n", values="budget").reindex(med.index)
    labels = med.copy().astype(object)
    for T in med.index:
        for n in med.columns:
            m = med.loc[T, n]
            head = ">budget" if np.isnan(m) else f"{m:.0f}{'*' if fast.loc[T, n] else ''}"
            labels.loc[T, n] = f"{head}\n{cen.loc[T, n]:.0%} cens."
    sns.heatmap(np.log10(med.fillna(budget * 2).astype(float)), annot=labels.values, fmt="", cmap="rocket_r", ax=ax,
                cbar_kws={"label": "log10 median coupling time"}, annot_kws={"fontsize": 10.5})
    ax.set_xlabel("sequence length n"); ax.set_ylabel("temperature T")


def plot_drift(axes, curves: pd.DataFrame, temperatures, fixed_t: int, delta: float) -> None:
    """Left: the mean drift against sweeps at the temperature of the grid nearest 1, one line per
    length, the threshold dashed. Right: the drift at the last record within ``fixed_t`` steps
    (median and quartiles) against n, one line per temperature."""
    T1 = min(temperatures, key=lambda t: abs(t - 1.0))
    at_fixed = curves[curves.step == curves.step[curves.step <= fixed_t].max()]
    for n, g in curves[curves.temperature == T1].groupby("n"):
        axes[0].plot(g.step / n, g.mean_drift, label=f"n = {n}")
    axes[0].axhline(delta, color="k", ls="--", lw=1)
    axes[0].set_xlabel("sweeps t / n"); axes[0].set_ylabel("mean drift d_t"); axes[0].set_title(f"T = {T1:g}"); axes[0].legend()
    for T, g in at_fixed.groupby("temperature"):
        axes[1].errorbar(g.n, g.median_drift, yerr=[g.median_drift - g.q25, g.q75 - g.median_drift], marker="o", capsize=3,
                         label=f"T = {T:g}")
    axes[1].set_xlabel("sequence length n"); axes[1].set_ylabel(f"drift at t = {int(at_fixed.step.iloc[0])} (median, quartiles)")
    axes[1].legend()
