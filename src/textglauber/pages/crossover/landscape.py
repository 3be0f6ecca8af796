"""Page text of chapter 3's landscape, covering chains and hot-regime yardstick (docs/science.md,
chapter 3): sentences, views and a figure read off the ``landscape``, ``landscape_check``,
``covering`` and ``phase_exact`` tables. Nothing here computes a chain.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...landscape.check import CHECK_MAX_STATES

CHECK_TOLERANCE = 0.15
"""How close T ln t_rel at the coldest resolved temperature must come to Gamma to count as agreeing."""


CAP_SHARE = 0.9
"""A transferred bound within this share below the uniform ceiling 1/(4 eps*) is called set by it."""


def _design(design: str) -> str:
    return "global pair" if design == "global" else f"nested {design.replace('-', ' ')}"


def landscape_view(table: pd.DataFrame) -> pd.DataFrame:
    return table[["model", "design", "n", "wells", "gamma", "gamma low", "gamma high", "complete", "finished",
                  "states opened", "ground well", "other wells"]]


def _gamma_text(r) -> str:
    """Gamma at one length: its value, "one well", its bracket where a search ran out between two
    wells, or that the search settled no cost between the wells."""
    if np.isnan(r.gamma):
        stopped = not bool(getattr(r, "complete", True)) and not bool(getattr(r, "finished", True))
        return "one well found before the search ran out" if stopped else "one well"
    if np.isfinite(r.gamma):
        return f"{r.gamma:.3g}"
    low, high = getattr(r, "low", np.nan), getattr(r, "high", np.nan)
    if np.isfinite(low) and np.isfinite(high):
        return f"between {low:.3g} and {high:.3g}"
    return "no cost between its wells settled within the budget"


def gamma_sentences(table: pd.DataFrame, verdicts: pd.DataFrame) -> list[str]:
    """One sentence per model and design: Gamma over n (listed, then searched), and the verdict."""
    out = []
    for v in verdicts.to_dict("records"):
        g = table[(table.model == v["model"]) & (table.design == v["design"])].sort_values("n")
        g = g.rename(columns={"gamma low": "low", "gamma high": "high"})
        values = ", ".join(f"{int(r.n)}: {_gamma_text(r)}" for r in g.itertuples())
        searched = g[~g.complete.astype(bool)]
        how = (f"every state listed up to n = {v['listed to']}" if v["listed to"] else "no length listed")
        if len(searched):
            unfinished = int((~searched.finished.astype(bool)).sum())
            how += (f"; n = {int(searched.n.min())} to {int(searched.n.max())} searched ({int(searched.wells.sum())} "
                    f"wells found over {len(searched)} lengths, {int(searched['states opened'].sum()):,} states opened"
                    + (f", {unfinished} search{'es' if unfinished != 1 else ''} stopped at {'their' if unfinished != 1 else 'its'} budget"
                       if unfinished else "") + ", not certified complete)")
        out.append(f"{v['model']}, {_design(v['design'])} (Γ by n: {values}; {how}): {v['words']} "
                   f"(verdict: {v['barrier']}).")
    return out


def check_sentence(summary: pd.DataFrame, landscape: pd.DataFrame | None = None) -> str:
    """How T ln t_rel at the coldest resolved temperature compares with Gamma, over the listed cells
    with two or more wells, why a cell misses, and (given the landscape) how many listed chains with
    a barrier were too long to check."""
    if summary.empty:
        return (f"No listed chain of at most {CHECK_MAX_STATES:,} states in this run has two wells with a barrier "
                "between them, so T ln t_rel had nothing to be checked against." + _unchecked_clause(landscape))
    ok = summary["off by"] <= CHECK_TOLERANCE
    line_ok = summary["line off by"] <= CHECK_TOLERANCE
    few = summary.resolved < 4
    text = (f"Over the {len(summary)} listed chains with two or more wells, T ln t_rel at the coldest temperature where "
            f"float64 still resolves the gap lies within {CHECK_TOLERANCE:.0%} of Γ in {int(ok.sum())} of "
            f"{len(summary)}, and the line through the two coldest resolved points meets Γ at T = 0 within "
            f"{CHECK_TOLERANCE:.0%} in {int(line_ok.sum())} of {len(summary)}.")
    if few.any():
        text += f" {int(few.sum())} of them resolve fewer than 4 temperatures."
    text += _hit_clause(summary) + _unchecked_clause(landscape)
    miss = summary[~ok]
    if len(miss):
        worst = miss.loc[miss["off by"].idxmax()]
        text += (f" Where the coldest point misses, T ln t_rel = Γ + T ln C still carries the prefactor's term at the "
                 f"coldest T that resolves (largest miss: {worst.model}, {_design(worst.design)}, n = {int(worst.n)}: "
                 f"{worst['T ln t_rel there']:.3g} against Γ = {worst.gamma:.3g} at T = {worst['coldest T']:.3g}; the "
                 f"line to T = 0 gives {worst['line to T = 0']:.3g}"
                 + (f"; the hitting time at T = {worst['hit T']:.3g} gives {worst['T ln hit there']:.3g}"
                    if np.isfinite(worst["T ln hit there"]) else "") + ").")
    return text


def _unchecked_clause(landscape: pd.DataFrame | None) -> str:
    """The listed chains with a barrier that are too long to check, counted from the landscape."""
    if landscape is None or not len(landscape):
        return ""
    g = landscape.gamma.astype(float)
    big = landscape[landscape.complete.astype(bool) & np.isfinite(g) & (g > 0)
                    & (2.0 ** landscape.n.astype(float) > CHECK_MAX_STATES)]
    if not len(big):
        return ""
    return (f" {len(big)} listed chain{'s' if len(big) != 1 else ''} with a barrier (n = "
            f"{', '.join(str(int(n)) for n in sorted(set(big.n)))}) {'have' if len(big) != 1 else 'has'} more than "
            f"{CHECK_MAX_STATES:,} states and {'are' if len(big) != 1 else 'is'} not checked: there a cold chain's "
            "sparse eigen solve takes minutes a temperature.")


def _hit_clause(summary: pd.DataFrame) -> str:
    """How the exact mean time to reach the ground well, solved colder than any gap resolves,
    compares with Gamma."""
    hit = summary[np.isfinite(summary["T ln hit there"].astype(float))]
    if hit.empty:
        return ""
    ok = hit["hit off by"] <= CHECK_TOLERANCE
    return (f" Colder than float64 resolves the gap, at T = Γ/{int(round(float((hit.gamma / hit['hit T']).max())))}, the "
            f"exact mean time to reach the ground well from the worst start gives T ln max E[τ] within "
            f"{CHECK_TOLERANCE:.0%} of Γ in {int(ok.sum())} of the {len(hit)} chains small enough to solve for it "
            f"(largest distance {hit['hit off by'].max():.1%}).")


def swing_sentences(table: pd.DataFrame, phase_table: pd.DataFrame, verdicts: pd.DataFrame) -> list[str]:
    """Where t_rel's growth cannot be told, the landscape events behind it: per model and design,
    the lengths where the second well's exponent jumps, and their wells."""
    out = []
    undecided = verdicts[verdicts["t_rel growth"] == "cannot tell"]
    for (model, design), _ in undecided.groupby(["model", "design"], sort=False):
        g = table[(table.model == model) & (table.design == design) & table.complete.astype(bool)].sort_values("n")
        if len(g) < 2:
            continue
        gam = g.gamma.fillna(0.0).to_numpy()
        jumps = [k for k in range(1, len(g)) if abs(gam[k] - gam[k - 1]) > 0.5 * max(gam[k - 1], gam[k], 1e-9)]
        if not jumps:
            continue
        parts = [f"n = {int(g.n.iloc[k])}: Γ {gam[k - 1]:.3g} → {gam[k]:.3g} ({int(g.wells.iloc[k])} well{'s' if int(g.wells.iloc[k]) != 1 else ''}; "
                 f"ground {g['ground well'].iloc[k]}" + (f"; other {g['other wells'].iloc[k]}" if g['other wells'].iloc[k]
                                                        else "") + ")" for k in jumps[:4]]
        out.append(f"{model}, {_design(design)}: t_rel/n swings with n where the landscape changes: " + "; ".join(parts)
                   + ". These are events of the model's scores at those lengths, not a growth law.")
    return out


def covering_view(cov: pd.DataFrame) -> pd.DataFrame:
    return cov[["model", "n", "temperature", "epsilon", "left_out", "tokens_per_site", "states", "complete", "t_rel",
                "t_mix", "t_mix_full_lower", "transfer"]]


def covering_sentence(cov: pd.DataFrame) -> str:
    """What the covering chains carry over to the model's own chain, from the rows."""
    if cov.empty:
        return "No covering chain was run in this profile."
    done = cov[cov.complete.astype(bool)]
    holds = cov[np.isfinite(cov.t_mix_full_lower.astype(float))]
    text = (f"Of {len(cov)} covering cells (model, n, T), {len(done)} closed with at most the target mass left out "
            f"(largest left out: {done.left_out.max():.2g})" if len(done) else
            f"None of the {len(cov)} covering cells closed: the sets outgrew the state cap first")
    stopped = cov[~cov.complete.astype(bool)]
    if len(stopped):
        text += (f"; {len(stopped)} stopped before closing (the sets grow with T; the coldest cell that stopped is at "
                 f"T = {stopped.temperature.min():g}, n = {int(stopped.loc[stopped.temperature.idxmin()].n)})")
    text += "."
    if len(holds):
        best = holds.loc[holds.t_mix_full_lower.astype(float).idxmax()]
        opened = holds[~holds.complete.astype(bool)]
        text += (f" In {len(holds)} cell{'s' if len(holds) != 1 else ''} the coupling bound carries a lower bound to "
                 "the model's own chain" + (f" ({len(opened)} of them on sets that did not close: the bound weighs the "
                                            "mass left out at each state the chain passes, measured on the sets "
                                            "enumerated, and needs no closure)" if len(opened) else "") +
                 f"; the largest, {best.model} at n = {int(best.n)}, T = {best.temperature:g}: the full chain's "
                 f"t_mix(1/4) is at least {best.t_mix_full_lower:,.0f} steps (the restricted chain's own t_mix is "
                 f"{best.t_mix:,.0f}).")
        bound, ceiling = holds.t_mix_full_lower.astype(float), 1 / (4 * holds.step_left_out.astype(float))
        past, near = holds[bound > ceiling], holds[(bound >= CAP_SHARE * ceiling) & (bound <= ceiling)]
        if len(past):
            text += (f" In {len(past)} of these the bound passes 1/(4ε*), the most that charging the largest leak "
                     "ε* at every step could give: the leak met along the chain's path is smaller than ε*.")
        if len(near):
            text += (f" In {len(near)} the bound sits at that ceiling (within {1 - CAP_SHARE:.0%}): there it is set "
                     "by the mass the covering leaves out, a quantity of the design, not by how slowly the chain "
                     "mixes.")
    nothing = cov[~np.isfinite(cov.t_mix_full_lower.astype(float))]
    if len(nothing):
        reasons = nothing.transfer.value_counts()
        text += (" Elsewhere nothing transfers: " + "; ".join(f"{k} ({v})" for k, v in reasons.items()) + ". The bound "
                 "ends once the two starts have met about 1/4 of left-out mass between them, so a slow restricted "
                 "chain that leaks visibly on its way says nothing about the full chain beyond that.")
    return text


def hot_sentence(hot: pd.DataFrame) -> str:
    """How the exact t_mix compares with the product chain of the same marginals over n, hot end."""
    if hot.empty:
        return "No temperature had an exact t_mix at three lengths or more, so the hot regime was not compared."
    counts = hot.verdict.value_counts()
    parts = ", ".join(f"{counts.get(k, 0)} {k}" for k in ("bounded", "grows", "cannot tell", "unresolved"))
    top = hot[hot.temperature == hot.temperature.max()]
    return (f"Against the product chain with the same single-site stationary marginals (independent sites; its t_mix "
            f"is exact and grows like n ln n), the ratio of the exact t_mix to it over n is, over {len(hot)} (model, "
            f"design, T) cases: {parts}. At the hottest temperature (T = {top.temperature.iloc[0]:g}) the ratio runs "
            f"from {top['ratio min'].min():.3g} to {top['ratio max'].max():.3g}. A bounded ratio says the chain mixes "
            "like independent sites (n ln n) over these lengths; it is a comparison with a yardstick, not a theorem "
            "for larger n.")


def plot_gamma(table: pd.DataFrame):
    """Gamma against n, one panel per model, one line per design; searched lengths as open marks."""
    import matplotlib.pyplot as plt

    from ... import figures

    models = list(dict.fromkeys(table.model))
    fig, axes = plt.subplots(1, max(len(models), 1), figsize=(figures.WIDTH_IN, 2.8), squeeze=False)
    for ax, model in zip(axes[0], models):
        for design, g in table[table.model == model].groupby("design", sort=False):
            g = g.sort_values("n")
            line, = ax.plot(g.n, g.gamma.fillna(0.0), "-", lw=1, label=_design(design))
            done = g.complete.astype(bool)
            ax.plot(g.n[done], g.gamma.fillna(0.0)[done], "o", ms=3, color=line.get_color())
            ax.plot(g.n[~done], g.gamma.fillna(0.0)[~done], "o", ms=4, mfc="none", color=line.get_color())
            if "gamma low" in g:
                b = g[np.isinf(g.gamma) & np.isfinite(g["gamma low"]) & np.isfinite(g["gamma high"])]
                ax.vlines(b.n, b["gamma low"], b["gamma high"], color=line.get_color(), lw=2, alpha=0.5)
        ax.set_title(model, fontsize=8)       # a panel is a third of the page: no more than the name
        ax.set_xlabel("n")
    axes[0][0].set_ylabel("Γ = W(1) − W(2) (logits)")
    axes[0][0].legend(fontsize=6)
    fig.suptitle("Γ(n): filled, every state listed; open, searched; bars, brackets", fontsize=8)
    fig.tight_layout()
    return fig
