"""Page text of chapter 3's exact phase diagram (docs/science.md, chapter 3): its sentences, views
and figure, all read off the ``phase_exact`` table, its verdicts
(:func:`textglauber.phasegrid.verdicts`) and its coupling calibration. Nothing here computes a
chain; every sentence is built from the rows it is given, so it holds on every profile.

Two-token chains are chains of a model's conditionals restricted to two tokens per site, not of
its free generation over the whole vocabulary: every sentence that reports them says so.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...phase.verdicts import DECISIVE, FIT_MAX, R_MIN

RESTRICTED = ("two-token chains (each site restricted to two tokens and the model's conditional renormalised "
              "over them), not the model's free generation over its whole vocabulary")


def _temps(values) -> str:
    vals = sorted(float(v) for v in values)
    return ", ".join(f"{v:g}" for v in vals) if vals else "none"


def design_label(design: str, tokens: str) -> str:
    return f"global pair {tokens}" if design == "global" else f"nested {design}"


GROWTH = ("exponential", "polynomial", "cannot tell", "unresolved")
"""The growth verdicts of t_rel (:func:`textglauber.phase.growth_verdict`), in the order the page lists them."""


def regimes(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Per model and design: the temperatures at which t_rel is named exponential, named polynomial,
    cannot be told or is unresolved; the lowest temperature from which every hotter one is named
    polynomial (``polynomial from``, inf where the hottest is not), the same for the exact t_mix, and
    the lowest temperature from which Dobrushin's alpha < 1 at every n and every hotter temperature."""
    rows = []
    for (model, design), g in verdicts.groupby(["model", "design"], sort=False):
        g = g.sort_values("temperature")
        kinds = g["t_rel growth"].to_numpy()
        temps = g.temperature.to_numpy(float)
        rows.append({"model": model, "design": design, "n from": int(g["n from"].min()), "n to": int(g["n to"].max()),
                     **{k: _temps(temps[kinds == k]) for k in GROWTH},
                     "polynomial from": _from_top(temps, kinds == "polynomial"),
                     "t_mix polynomial from": _from_top(temps, g["t_mix growth"].to_numpy() == "polynomial"),
                     "alpha < 1 from": _from_top(temps, g["dobrushin at every n"].to_numpy(bool))})
    return pd.DataFrame(rows, columns=["model", "design", "n from", "n to", *GROWTH, "polynomial from",
                                       "t_mix polynomial from", "alpha < 1 from"])


def _from_top(temps: np.ndarray, ok: np.ndarray) -> float:
    """The lowest temperature from which ``ok`` holds at it and every hotter one (inf if not at the top)."""
    run = 0
    for flag in ok[::-1]:
        if not flag:
            break
        run += 1
    return float(temps[len(temps) - run]) if run else math.inf


def _t(value: float) -> str:
    return "no temperature of the grid" if math.isinf(value) else f"T ≥ {value:g}"


WORDS = {"exponential": f"grows exponentially in n (a rate of at least {R_MIN:g} per site)",
         "polynomial": "grows at most polynomially in n", "cannot tell": "grows in a way these lengths cannot tell",
         "unresolved": "is not resolved at some n"}


def verdict_sentences(verdicts: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """One sentence per model and design: how t_rel grows with n at each temperature, and where
    Dobrushin's condition holds beside where t_rel is named polynomial."""
    out = []
    tokens = table.drop_duplicates(["model", "design"]).set_index(["model", "design"]).tokens
    for r in regimes(verdicts).to_dict("records"):
        parts = [f"{WORDS[k]} at T = {r[k]}" for k in GROWTH if r[k] != "none"]
        where = design_label(r["design"], tokens.get((r["model"], r["design"]), ""))
        out.append(f"{r['model']}, {where}, n = {r['n from']} to {r['n to']}: t_rel " + "; ".join(parts)
                   + f". t_rel is named polynomial for {_t(r['polynomial from'])}, and the exact t_mix (where "
                   f"computed) for {_t(r['t_mix polynomial from'])}, while Dobrushin's condition α < 1 holds at "
                   f"every n for {_t(r['alpha < 1 from'])}.")
    return out


def rule_sentence(n_lo: int, n_hi: int) -> str:
    """What the growth verdict needs before it names a law, and how little the slowest exponential
    it names grows over the lengths run."""
    if n_hi <= n_lo:
        return ""
    rise = math.exp(R_MIN * (n_hi - n_lo))
    return (f" A growth law is named only when its family fits t_rel (root-mean-square log residual at most "
            f"{FIT_MAX:g}) and the other family misses by at least {DECISIVE:g} times as much; otherwise the verdict "
            f"is \"cannot tell\". Over n = {n_lo} to {n_hi} the slowest exponential it names, e^{{{R_MIN:g} n}}, grows "
            f"only {rise:.2g}x, so a slow exponential and a polynomial are often not told apart.")


def hot_and_cold(verdicts: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The model-and-design cases (:func:`regimes`); those named polynomial at the hottest
    temperatures; those named exponential at some temperature (decided slow mixing only); and those
    whose growth cannot be told or is unresolved at some temperature, which count as neither."""
    reg = regimes(verdicts)
    hot = reg[np.isfinite(reg["polynomial from"])]
    cold = reg[reg.exponential != "none"]
    undecided = reg[(reg["cannot tell"] != "none") | (reg.unresolved != "none")]
    return reg, hot, cold, undecided


def phase_verdict(verdicts: pd.DataFrame, table: pd.DataFrame) -> str:
    """The exact phase diagram's verdict in one short sentence (the findings page's opening)."""
    if table.empty:
        return "No exact phase diagram in this run."
    reg, hot, cold, undecided = hot_and_cold(verdicts)
    return (f"Exact two-token chains of {', '.join(dict.fromkeys(table.model))}, n = {int(table.n.min())} to "
            f"{int(table.n.max())}: t_rel is polynomial when hot in {len(hot)} of {len(reg)} cases, exponential at "
            f"some temperature in {len(cold)} of {len(reg)}, undecided at some temperature in {len(undecided)} "
            f"of {len(reg)}.")


def phase_headline(verdicts: pd.DataFrame, table: pd.DataFrame) -> str:
    """The chapter's verdict on the preprint's crossover claim, from the exact rows: slow mixing is
    counted only where t_rel is named exponential; undecided temperatures are listed apart."""
    if table.empty:
        return "No model of the phase section could be had, so there is no exact phase diagram in this run."
    reg, hot, cold, undecided = hot_and_cold(verdicts)
    models = ", ".join(dict.fromkeys(table.model))
    n_lo, n_hi = int(table.n.min()), int(table.n.max())
    text = (f"Computed exactly on {RESTRICTED}, for {models} at n = {n_lo} to {n_hi}: the relaxation time grows at "
            f"most polynomially in n at the hottest temperatures in {len(hot)} of {len(reg)} model-and-design cases, "
            f"and exponentially at some temperature in {len(cold)} of {len(reg)}.")
    if len(undecided):
        text += (f" In {len(undecided)} of {len(reg)} its growth cannot be told from these lengths or is not resolved "
                 f"at some temperature (" + "; ".join(_undecided(r) for r in undecided.to_dict("records"))
                 + "); those temperatures count neither as fast nor as slow mixing.")
    text += rule_sentence(n_lo, n_hi)
    text += (" These chains are restrictions, other chains than the models' own: what carries over to a model's own "
             "chain is said by the landscape and the covering chains, not by these counts.")
    if len(hot):
        later = int((hot["alpha < 1 from"] > hot["polynomial from"]).sum())
        text += (f" Of the {len(hot)} cases named polynomial when hot, Dobrushin's sufficient condition α < 1 (at "
                 f"every n) starts at a higher temperature than that polynomial growth in {later} of them"
                 + (": there the theorem's condition covers less than the fast phase." if later else "."))
    return text


def _undecided(r: dict) -> str:
    parts = [f"{w} at T = {r[k]}" for k, w in (("cannot tell", "cannot tell"), ("unresolved", "unresolved"))
             if r[k] != "none"]
    return f"{r['model']}, {r['design']}: " + ", ".join(parts)


def spikes(verdicts: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """For each (model, design, T) whose growth cannot be told and whose t_rel/n is not monotone in
    n: the length where t_rel/n peaks and the state that holds the most stationary mass there,
    beside the same at the neighbouring lengths."""
    rows = []
    for v in verdicts[verdicts["t_rel growth"] == "cannot tell"].to_dict("records"):
        g = table[(table.model == v["model"]) & (table.design == v["design"])
                  & np.isclose(table.temperature, v["temperature"])].sort_values("n")
        per = (g.t_rel / g.n).to_numpy(float)
        steps = np.diff(per)
        if not ((steps > 0).any() and (steps < 0).any()):
            continue
        k = int(np.argmax(per))
        for j in range(max(k - 1, 0), min(k + 2, len(g))):
            r = g.iloc[j]
            rows.append({"model": r.model, "design": r.design, "temperature": float(r.temperature), "n": int(r.n),
                         "peak": j == k, "t_rel/n": float(per[j]), "top state": r.top_state,
                         "its stationary mass": float(r.top_mass)})
    return pd.DataFrame(rows, columns=["model", "design", "temperature", "n", "peak", "t_rel/n", "top state",
                                       "its stationary mass"])


def verdict_view(verdicts: pd.DataFrame) -> pd.DataFrame:
    """The verdict table as the page shows it (its sentences are printed above it, not repeated in
    a column that would make every row a paragraph tall)."""
    return verdicts[["model", "design", "temperature", "n from", "n to", "t_rel growth", "t_mix growth", "max alpha",
                     "dobrushin at every n"]]


def calibration_view(cal: pd.DataFrame) -> pd.DataFrame:
    return cal.assign(**{"q75 / t_mix": cal.q75 / cal.t_mix})[
        ["model", "design", "n", "temperature", "starts", "pairs", "t_mix", "median", "q75", "q75 / t_mix"]]


def calibration_sentence(cal: pd.DataFrame) -> str:
    """By what factor the 75% quantile of coupling times from random starts falls short of the
    exact t_mix(1/4), and what the worst pair of starts gives."""
    if cal.empty:
        return ("No cell of the calibration had an exact t_mix short enough to couple within its budget, so the "
                "coupling protocol was not calibrated in this run.")
    rnd, worst = cal[cal.starts == "random pairs"], cal[cal.starts == "worst pair"]
    r = (rnd.q75 / rnd.t_mix).to_numpy()
    w = (worst.q75 / worst.t_mix).to_numpy()
    under = int((r < 1).sum())
    text = (f"On the exact chains at n = {int(cal.n.iloc[0])} ({len(rnd)} cells of model, design and temperature), the "
            f"75% quantile of coupling times from uniformly drawn pairs of starts is {r.min():.2g} to {r.max():.2g} "
            f"times the exact t_mix(1/4): below it in {under} of {len(r)} cells")
    if under:
        text += f", so coupling from such starts understates the mixing time by a factor of up to {1 / r.min():.2g}"
    text += (f". From the pair of starts chosen as the worst the ratio is {w.min():.2g} to {w.max():.2g}. By the "
             "coupling inequality only the worst pair's tail bounds the distance to stationarity, so a quantile from "
             "typical starts describes those starts and bounds nothing")
    if (w < 1).any():
        k = int((w < 1).sum())
        text += (f"; the chosen pair is a heuristic, and in the {k} cell{'s' if k != 1 else ''} where its ratio is "
                 "below 1 some other pair of starts stays further apart")
    return text + "."
    return text


def cost_sentence(cost: pd.DataFrame, notes: list[str]) -> str:
    parts = [f"{r['model']}: n up to {r['max_n']}, {r['rows_scored']:,} rows scored, {r['seconds']:.0f} s"
             for r in cost.to_dict("records")]
    text = ("Each (site, context) row is scored once per design and serves every temperature: "
            + "; ".join(parts) + "." if parts else "No model was scored.")
    return text + "".join(f" {n}." for n in notes)


def unresolved_sentence(table: pd.DataFrame) -> str:
    bad = table[~table.resolved.astype(bool)]
    if bad.empty:
        return "The second eigenvalue was resolved from 1 in float64 at every cell."
    return (f"At {len(bad)} of {len(table)} cells the spectral gap is below float64's resolution (or the sparse solver "
            f"did not converge), so t_rel is not given there; those cells report instead the lower bound "
            f"t_mix ≥ (1 − π(B) − ε)/max exit probability of the set B the chain leaves least readily "
            f"(largest: {bad.t_mix_lower.max():.3g} steps). The lower bound from t_rel, (t_rel − 1) ln 2, holds at "
            "every resolved cell without reversibility and is used nowhere as an upper bound.")


def plot(table: pd.DataFrame):
    """t_rel/n and t_mix/(n ln n) against n, one line per temperature, one row of two panels per
    model and design, log scales (unresolved and uncomputed cells left out)."""
    import matplotlib.pyplot as plt

    from ... import figures

    groups = list(table.groupby(["model", "design"], sort=False))
    fig, axes = plt.subplots(len(groups), 2, figsize=(figures.WIDTH_IN, 2.3 * len(groups) + 0.6), squeeze=False)
    temps = sorted(table.temperature.unique())
    colours = plt.cm.coolwarm(np.linspace(0, 1, len(temps)))
    for (key, g), (a, b) in zip(groups, axes):
        for T, c in zip(temps, colours):
            h = g[np.isclose(g.temperature, T)].sort_values("n")
            a.plot(h.n, h.t_rel / h.n, "o-", ms=3, color=c, label=f"T = {T:g}")
            b.plot(h.n, h.t_mix / (h.n * np.log(h.n)), "o-", ms=3, color=c)
        a.set_title(f"{key[0]} ({key[1]}): t_rel / n", fontsize=8)
        b.set_title(f"{key[0]} ({key[1]}): t_mix / (n ln n)", fontsize=8)
        for ax in (a, b):
            ax.set_yscale("log")
            ax.set_xlabel("n")
    axes[0][0].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return fig


def beside_preprint(table: pd.DataFrame, profile: str) -> str:
    models = ", ".join(dict.fromkeys(table.model)) or "no model"
    return (f"The exact phase diagram above is computed on the {profile} profile for {models}, as {RESTRICTED}; "
            "the preprint's hitting and coupling times are measured on full-vocabulary chains of BERT-family models, "
            "so the two are set side by side as shapes, not as the same numbers.")
