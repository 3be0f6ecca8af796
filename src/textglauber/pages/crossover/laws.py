"""Page text of chapter 3's measured times (docs/science.md, chapter 3): the growth laws of the
hitting and coupling times in words (:func:`law_sentence`, :func:`law_caveat`), the coupling grid's
boundary and T* beside it, the design's power, the budget's gain, and the figures of medians, drift
and the coupling grid. The computation is in :mod:`textglauber.growth` and
:mod:`textglauber.crossover`; every sentence here is built from the tables and comparisons it is
given.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ... import growth
from ...crossover import BOUNDARY_LEVEL, boundary_verdict, tstar_comparison
from ...growth import CANNOT, MODERATE, NONE, LawComparison, worst_false
from ..bounds import tstar_sentence


def caveat(lengths) -> str:
    """What a fit over one range of lengths can say (no final full stop), for the chapter and findings."""
    lo, hi = int(min(lengths)), int(max(lengths))
    local = [1 + 1 / np.log(x) for x in (lo, hi)]
    return (f"a one-range fit: the exponent p describes how the times grow between n = {lo} and {hi}, not as n goes "
            f"to infinity; over this range an n log n law is locally a power law of exponent 1 + 1/ln n, "
            f"{local[0]:.2f} at n = {lo} to {local[1]:.2f} at n = {hi}, and with an offset it can pass for a power law "
            f"of nearby exponent, so a law is named only where it beats the other laws with a free offset (and n log n "
            f"the power law) and the design check shows that verdict rarely given for a wrong truth")


def law_exponent(c: LawComparison) -> str:
    """The power-law exponent and its interval, as the page says it."""
    if not np.isfinite(c.p):
        return "no power-law exponent (too few lengths with a median)"
    return f"power-law exponent p = {c.p:.2f} (95% interval {c.p_low:.2f} to {c.p_high:.2f})"


def law_sentence(c: LawComparison, check=None) -> str:
    """One sentence for the page (no final full stop), computed from the fields; with a design
    check, a verdict the check does not let stand is downgraded to 'cannot tell' and says why."""
    if c.best is None:
        return f"cannot tell: {c.reason}"
    v, p = c.verdict(), law_exponent(c)
    if v == NONE:
        slower = c.outside() == "slower"
        return (f"none of the three laws: the {p} lies {'below 1' if slower else 'above 2'}, so the medians grow "
                f"{'more slowly than n' if slower else 'faster than n^2'}; of the three, an {c.best} law misses "
                f"them least ({c.best_model}, goodness of fit p = {c.gof_p:.1g})")
    if v == CANNOT and c.margin < 0:
        return (f"cannot tell: a power law fits the medians better than any of the three laws (AIC margin "
                f"{-c.margin:.1f} over the nearest, an {c.best} law as {c.best_model}); {p}; {c.reason}")
    if v == CANNOT:
        return (f"cannot tell: an {c.best} law ({c.best_model}) is ahead of {c.runner_up} by only "
                f"{c.margin:.1f} in AIC (less than {MODERATE:g}); {p}; {c.reason}")
    claim = (f"an {c.best} law ({c.best_model}), {c.support} support (AIC margin {c.margin:.1f} over "
             f"{c.runner_up})")
    if check is not None and c.reported(check) == CANNOT:
        truth, count, reps = worst_false(check, v, strong=c.support == "strong")
        named = f"{v} (strong)" if c.support == "strong" else v
        return (f"cannot tell at this design: the medians point to {claim} but at these lengths and chains the "
                f"design check names {named} for a true {truth} in {count} of {reps} replicates; {p}")
    s = f"{claim}; {p}"
    if c.gof_p < 0.01:
        s += (f"; but even this law misses the medians by more than their bootstrap errors allow (goodness of fit "
              f"p = {c.gof_p:.1g}): it is only the nearest of the models")
    return s


def law_caveat(lengths) -> str:
    """The fit caveat the chapter and the findings page both show (:func:`caveat`, as a sentence)."""
    text = caveat(lengths)
    return text[0].upper() + text[1:] + "."


def cells_view(cells: pd.DataFrame, kappa: float) -> pd.DataFrame:
    """The coupling cells (:func:`coupling_cells`) with the column names the page shows."""
    return cells.rename(columns={"median": "median coupling time", "ci_low": "95% CI low", "ci_high": "95% CI high",
                                 "censored": "share censored", "limit": f"{kappa:g} n ln n"})


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
        text = " ".join(f"Coupling times at T = {T:g}: {law_sentence(c, check)}." for T, c in comps.items())
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

    from ...results import NotThisRun, read_manifest, vouched_table

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
