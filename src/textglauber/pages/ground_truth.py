"""Chapter 6's page (docs/science.md, chapter 6), apart from its computation in
:mod:`textglauber.groundtruth`: the sentences on what the exact answers say, on the trap basins and
on the holding times, the comparison with the preprint, the chapter's figures, and its row on the
findings page: the simulated estimates against the exact mixing times of enumerable chains
(:func:`textglauber.groundtruth.compare` counts; this module words them)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..groundtruth import Comparison, cases, compare, holding_counts
from ..ising import clique_ratios
from ..profile import Holding
from . import Headline
from .reading import nowrap, table


def headline(folder: Path, root: Path, profile: str) -> Headline | None:
    t = table(folder, "ground_truth")
    if t is None:
        return None
    hl = compare(t, table(folder, "holding_times"))
    parts = clauses(hl)
    models = ", ".join(nowrap(m) for m in t.model.unique())
    opening = f"Over {hl.cases} model-temperature cases ({models}, restricted to a few tokens and short lengths): "
    text = opening + "; ".join(parts) + "."
    if hl.holding_traps:
        text += (f" Holding times in the deepest traps, simulated by jumps over {hl.holding_steps:,} "
                 f"chain-steps: the exact mean 1/(1 - P(x,x)) lies inside the simulated interval in "
                 f"{hl.holding_inside} of {hl.holding_traps} traps")
        text += ("." if hl.holding_left == hl.holding_traps else
                 f" ({hl.holding_traps - hl.holding_left} of them with no chain leaving within the budget, so a lower "
                 "bound only).")
    return Headline(opening + (parts[0] if parts else "no comparison") + ".", text)


def clauses(c: Comparison) -> list[str]:
    """The counts in words, one clause each, as the chapter and the findings page both say them."""
    out = []
    if c.coupling_cases:
        out.append(f"the coupling estimate from random pairs lies within a factor 2 of the exact mixing time in "
                   f"{c.coupling_near} of {c.coupling_cases} cases")
    if c.hitting_cases:
        out.append(f"the median hitting time is below the exact mixing time in {c.hitting_below} of "
                   f"{c.hitting_cases} cases (by a factor of up to {c.hitting_max_ratio:.3g})")
    if c.bound_cases:
        out.append(f"the contraction bound holds in {c.bound_holds} of {c.bound_cases} cases where the "
                   f"exact alpha is below one, on average {c.bound_mean_ratio:.1f} times the exact mixing time")
    else:
        out.append("the exact alpha is below one in no case, so the contraction bound never applies")
    return out


def preprint() -> str:
    return "No exact values: coupling and hitting times are used as the measure of mixing on BERT."


def summary(truth: pd.DataFrame, profile: str) -> str:
    """The chapter's sentences on what the exact answers say (Markdown)."""
    hl = compare(truth)
    lines = [c[0].upper() + c[1:] + "." for c in clauses(hl)]
    if hl.hitting_cases:
        lines.append("Reaching half the stationary drift says the chain has moved, not that it has forgotten its start.")
    per_model = truth.groupby("model", sort=False)["TV(pi, PL law)"].agg(["min", "max"])
    lines.append(f"The compatibility gap (TV between the true stationary law and the pseudo-likelihood reading) ranges "
                 f"from {per_model['min'].min():.3f} to {per_model['max'].max():.3f} over the models and temperatures; "
                 f"{int((truth['TV(pi, PL law)'] > 1e-3).sum())} of {len(truth)} cases exceed 0.001.")
    lines.append(f"Profile '{profile}'; models restricted to the tokens listed, so these are statements about those small "
                 "chains, not about the full-vocabulary models.")
    return " ".join(lines)


def basin_sentence(basins: pd.DataFrame, trap_window: int) -> str:
    """How the durations the detector saw compare with the basins' exact mean exit times (Markdown)."""
    ok = ~basins.censored
    ratio = (basins[ok]["duration"] / basins[ok]["exact mean exit time"])
    return (f"{len(basins)} traps on the exact chains ({int(basins.censored.sum())} still open when the run "
            f"ended). For the closed ones, the seen duration over the exact mean exit time has median "
            f"{ratio.median():.2f} (quartiles {ratio.quantile(0.25):.2f} to {ratio.quantile(0.75):.2f}); "
            f"{(ratio > 1).mean():.0%} of them lasted longer than the exact mean exit time: the detector only "
            f"reports stays longer than its {trap_window}-step window, so where a basin is left quickly it sees "
            f"only the long stays. {int((ratio < 0.1).sum())} of {len(ratio)} ended before a tenth of the exit "
            "time; such a trap closed on a move inside its basin and is a fragment of it.")


def _on(h: pd.DataFrame, i) -> str:
    """Which restricted chain row ``i`` of a holding-time table is on."""
    return f"{h.model[i]} on {{{', '.join(h.tokens[i].split())}}} at T = {h.temperature[i]:g}"


def holding_sentence(h: pd.DataFrame, holding: Holding, level: float) -> str:
    """What the holding times by jumps show against the exact means, and what they cost (Markdown)."""
    counts = holding_counts(h)
    seen = h[h.jumps > 0]
    rel = (seen["simulated mean holding time"] / seen["exact mean holding time"] - 1).abs()
    parts = [f"{counts['traps']} traps, the {holding.deepest} deepest of each restricted model at each temperature "
             f"({', '.join(f'T = {t:g}' for t in holding.temperatures)}), {holding.chains} chains each with a "
             f"budget of {holding.steps:,} steps: the exact mean hold lies inside the {level:.0%} interval of the "
             f"simulated one in {counts['inside']} of {counts['traps']}."]
    if len(seen):
        w = rel.idxmax()
        parts.append(f"Where chains left, the largest relative error of the simulated mean is {rel.max():.1%} "
                     f"({_on(h, w)}, exact mean {h['exact mean holding time'][w]:,.3g} "
                     f"steps, {int(h.censored[w])} of {int(h.chains[w])} chains censored).")
    deep = h["exact mean holding time"].idxmax()
    parts.append(f"The deepest trap holds for {h['exact mean holding time'][deep]:,.3g} steps on average (exact; "
                 f"{_on(h, deep)}), "
                 + ("more than the budget" if h['exact mean holding time'][deep] > holding.steps else "within the budget")
                 + "; "
                 + f"{int(h.censored[deep])} of {int(h.chains[deep])} of its chains were still there at the end.")
    none_left = h[h.jumps == 0]
    if len(none_left):
        parts.append(f"In {len(none_left)} case(s) no chain left within the budget: the estimate is infinite and only the "
                     "interval's lower end says something.")
    steps_total, rows_total = counts["steps"], int(h["rows scored"].sum())
    parts.append(f"All together the jumps simulated {steps_total:,} chain-steps with {int(h.jumps.sum()):,} jumps and "
                 f"{rows_total:,} scored rows, {steps_total / rows_total:,.3g} steps per row; the plain engine scores one row "
                 "per chain and step.")
    return " ".join(parts)


def _ratio(a: pd.Series, b: pd.Series) -> str:
    r = (a / b).replace([np.inf, -np.inf], np.nan).dropna()
    return f"{r.min():.3g} - {r.max():.3g}" if len(r) else "-"


PREPRINT = "preprint (arXiv 2605.16378)"


def preprint_table(truth: pd.DataFrame, holding: pd.DataFrame, by_clique: pd.DataFrame, profile: str,
                   level: float) -> pd.DataFrame:
    """What the preprint relies on beside what this run's exact chains say, one row per diagnostic."""
    names = ", ".join(truth.model.unique())
    c, h, _ = cases(truth)
    m = truth[truth["margin Delta"].notna()]
    wide, _ = clique_ratios(by_clique)
    run = f"this run ({profile}; {names})"
    return pd.DataFrame([
        {"diagnostic": "coupling time from random start pairs", PREPRINT: "used as the mixing measure",
         run: f"exact t_mix / estimate: {_ratio(c['exact t_mix'], c['coupling estimate'])}"},
        {"diagnostic": "embedding hitting time", PREPRINT: "used as the mixing measure",
         run: f"exact t_mix / median hitting time: {_ratio(h['exact t_mix'], h['hitting time (median)'])}"},
        {"diagnostic": "margin certificate of slow escape", PREPRINT: "a lower bound, vacuous on BERT's traps",
         run: f"exact / certified holding time: {_ratio(m['exact holding time'], m['certified holding time'])}"},
        {"diagnostic": "holding time in the deepest traps", PREPRINT: "stays seen inside fixed-length plain runs",
         run: f"exact mean inside the simulated {level:.0%} interval in "
              f"{int(holding['exact inside CI'].sum())} of {len(holding)}; "
              f"{holding['steps simulated'].sum() / holding['rows scored'].sum():,.3g} "
              "chain-steps per scored row by jumps"},
        {"diagnostic": "Li et al.: parallel vs k-site Gibbs at k = N", PREPRINT: "not studied",
         run: f"steps ratio {wide['independent parallel'].iloc[-1] / wide['k-site Gibbs'].iloc[-1]:.3g} "
              f"at clique {wide.index[-1]}"},
    ])


def plot_exact_crossover(truth: pd.DataFrame) -> None:
    """Draw and show the exact t_mix against temperature with the coupling estimate, contraction
    bound and median hitting time per model (left), and the compatibility gap against the mean
    rectangle R (right)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from .. import figures

    fig, axes = figures.panels(2)
    for (m, g), color in zip(truth.groupby("model", sort=False), sns.color_palette()):
        axes[0].plot(g.temperature, g["exact t_mix"], marker="o", color=color, label=f"{m}: exact")
        axes[0].plot(g.temperature, g["coupling estimate"], ls="--", marker="x", color=color)
        ok = np.isfinite(g["contraction bound"])
        axes[0].plot(g.temperature[ok], g["contraction bound"][ok], ls=":", marker="^", color=color)
        axes[0].plot(g.temperature, g["hitting time (median)"], ls="-.", marker="s", color=color, alpha=0.6)
        axes[1].plot(g["mean R at T"], g["TV(pi, PL law)"], marker="o", color=color, label=m)
    axes[0].set_xscale("log"); axes[0].set_yscale("log")
    axes[0].set_xlabel("temperature T"); axes[0].set_ylabel("steps")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2,
               frameon=False, title="solid: exact, dashed: coupling, dotted: bound, dash-dot: hitting time")
    axes[1].set_xlabel("mean rectangle R at T"); axes[1].set_ylabel("TV(pi_T, pseudo-likelihood law)")
    axes[1].set_xscale("log"); axes[1].set_yscale("log")
    fig.tight_layout()
    plt.show()


def plot_basins(basins: pd.DataFrame) -> None:
    """Draw and show each closed trap's duration against its basin's exact mean exit time."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(6.8, 4.4))
    ok = ~basins.censored
    for (m, g), color in zip(basins[ok].groupby("model", sort=False), sns.color_palette()):
        ax.scatter(g["exact mean exit time"], g["duration"], s=8, alpha=0.4, color=color, label=m)
    lim = [1, np.nanmax([basins["exact mean exit time"].replace(np.inf, np.nan).max(), basins["duration"].max()]) * 2]
    ax.plot(lim, lim, color="grey", lw=1, ls="--")
    ax.set_xscale("log"); ax.set_yscale("log")
    ax.set_xlabel("exact mean exit time of the basin (steps)"); ax.set_ylabel("trap duration seen (steps)")
    ax.legend()
    fig.tight_layout()
    plt.show()


def plot_holding(holding_times: pd.DataFrame, budget: int) -> None:
    """Draw and show the simulated mean holding times with their intervals against the exact means
    (a triangle at the interval's lower end where no chain left within the ``budget``)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(6.8, 4.4))
    for (m, g), color in zip(holding_times.groupby(["model", "tokens"], sort=False), sns.color_palette()):
        seen = g[g.jumps > 0]
        ax.errorbar(seen["exact mean holding time"], seen["simulated mean holding time"],
                    yerr=[seen["simulated mean holding time"] - seen["CI low"],
                          seen["CI high"] - seen["simulated mean holding time"]],
                    fmt="o", capsize=3, color=color, label=f"{m[0]} ({m[1]})")
        gone = g[g.jumps == 0]                     # no chain left: only the interval's lower end
        ax.scatter(gone["exact mean holding time"].clip(upper=1e300), gone["CI low"], marker="^", color=color)
    finite = holding_times["exact mean holding time"].replace(np.inf, np.nan)
    lim = [0.5, np.nanmax([finite.max(), holding_times["CI high"].replace(np.inf, np.nan).max()]) * 2]
    ax.plot(lim, lim, color="grey", lw=1, ls="--")
    ax.axhline(budget, color="grey", lw=1, ls=":")
    ax.set_xscale("log"); ax.set_yscale("log")
    ax.set_xlabel("exact mean holding time 1/(1 - P(x,x)) (steps)"); ax.set_ylabel("simulated mean holding time (steps)")
    ax.legend(loc="upper left", fontsize="small", title="dashed: simulated = exact; dotted: budget"
              + ("; triangles: no chain left, lower end" if (holding_times.jumps == 0).any() else ""))
    fig.tight_layout()
    plt.show()
