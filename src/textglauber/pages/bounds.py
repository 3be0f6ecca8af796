"""Chapter 2's page (docs/science.md, chapter 2), apart from its computation in
:mod:`textglauber.influence`: the plot of alpha-hat(T), the sentences on where the theorem is ruled
out or left open, the comparison with the preprint; and the chapter's headline on the findings
page: the estimated T* per model (a lower bound on T*), set against the crossover chapter's lowest
fast temperature at the same length."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import crossover, reported
from ..tables import number
from . import Headline
from .reading import esc, manifest, nowrap, table


def tstar_sentence(cmp: dict | None, model: str, kappa: float) -> str:
    """One sentence setting T*-hat against the fast temperature at the same n (no final full stop): this
    chapter's headline and chapter 3's page both say it, so it lives here, which chapter 3's page imports
    (a page edit to chapter 3 then re-renders chapter 3 alone)."""
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


def coupling_boundary(root: Path, profile: str) -> tuple[str | None, list, float]:
    """The crossover chapter's model, the fast threshold per coupling length, and its criterion."""
    cross = root / profile / "crossover"
    m, summary = manifest(cross), table(cross, "summary")
    if m is None or summary is None or "fast" not in summary:
        return None, [], float("nan")
    cells = summary[summary.kind == "coupling"]
    return m["parameters"]["model"]["name"], crossover.fast_threshold(cells), float(m["parameters"]["fast_within"])


def headline(folder: Path, root: Path, profile: str) -> Headline | None:
    alpha = table(folder, "alpha")
    if alpha is None:
        return None
    t_star = alpha.groupby("model", sort=False).t_star.first()
    verdict = ("Estimated T* (a lower bound on T*): "
               + "; ".join(f"{nowrap(m)} {number(t)}" for m, t in t_star.items()) + ".")
    model, boundary, kappa = coupling_boundary(root, profile)
    if model is None:
        details = "The crossover chapter has not run, so there is no empirical fast temperature to set it against."
    elif model not in t_star:
        details = f"The crossover chapter ran {nowrap(model)}, which this chapter did not estimate."
    else:
        seq_len = int((manifest(folder) or {}).get("parameters", {}).get("seq_len", 0))
        cmp = crossover.tstar_comparison(float(t_star[model]), seq_len, boundary)
        details = esc(tstar_sentence(cmp, model, kappa)) + "."
    return Headline(verdict, details)


def preprint() -> str:
    return esc(reported.BOUNDS["t_star_vs_empirical"]) + " (one 14-token sentence)."


def plot_alpha(ax, alpha_all: pd.DataFrame) -> None:
    """alpha-hat(T) per model on log axes, each model's T*-hat dotted, the line alpha = 1 dashed."""
    for name, g in alpha_all.groupby("model", sort=False):
        line, = ax.plot(g.temperature, g["alpha (lower bound)"], marker="o", label=name)
        ax.axvline(g.t_star.iloc[0], color=line.get_color(), ls=":", lw=1)
    ax.axhline(1.0, color="k", ls="--", lw=1)
    ax.set_xscale("log"); ax.set_yscale("log")
    ax.set_xlabel("temperature T"); ax.set_ylabel("alpha(T), lower bound")
    ax.legend()


def alpha_sentences(alpha_all: pd.DataFrame) -> str:
    """Per model: where alpha-hat >= 1 rules the theorem out, and where alpha-hat < 1 leaves it open
    with the t_mix it would give at the lowest such temperature."""
    lines = []
    for name, g in alpha_all.groupby("model", sort=False):
        fails = g.temperature[~g["alpha-hat < 1"]]
        open_ = g.temperature[g["alpha-hat < 1"]]
        s = f"{name}: "
        if len(fails):
            s += (f"alpha-hat >= 1, so the true alpha >= 1 and the theorem does not apply, at T = "
                  f"{', '.join(f'{t:g}' for t in fails)}")
        if len(open_):
            row = g[g["alpha-hat < 1"]].iloc[0]
            s += ("; " if len(fails) else "") + (
                f"alpha-hat < 1 at T = {', '.join(f'{t:g}' for t in open_)}, where the condition is not established; "
                f"at T = {row.temperature:g} the theorem would imply t_mix <= {row['t_mix if alpha-hat were alpha']:.0f} "
                "steps if alpha-hat were the supremum")
        lines.append(s + ".")
    return " ".join(lines)


def preprint_table(fits: dict, drift_all: pd.DataFrame, profile: str) -> pd.DataFrame:
    """The preprint's T* and drift beside this run's, one row per model."""
    rows = [{"source": "preprint (arXiv 2605.16378)", "model": "BERT (14-token sentence)", "T*": "about 10x the empirical fast T",
             "drift min / median": "0.042 / 0.080 and 0.024 / 0.066", "share D > 0": "200 / 200 at both T"}]
    for name, res in fits.items():
        d = drift_all[drift_all.model == name]
        rows.append({"source": f"this run, profile '{profile}'", "model": name, "T*": f"{res.t_star:.2f} (T*-hat, a lower bound)",
                     "drift min / median": " and ".join(f"{a:.3f} / {b:.3f} (T={t:g})" for a, b, t in
                                                        zip(d.min_drift, d.median_drift, d.temperature)),
                     "share D > 0": " and ".join(f"{f:.0%}" for f in d.fraction_positive)})
    return pd.DataFrame(rows)


def preprint_sentences(fits: dict, drift_all: pd.DataFrame, *, seq_len: int, profile: str) -> str:
    """In how many (model, temperature) cases the drift is positive at every sampled state, and
    whether the models are the preprint's."""
    pos = drift_all[drift_all.fraction_positive == 1.0]
    lines = [f"In this run the drift is positive at every sampled boundary state in {len(pos)} of {len(drift_all)} "
             "(model, temperature) cases" + (" (sampled states at the one level N = k: support for slow escape, "
                                             "not a proof of it)." if len(pos) else ".")]
    if not any(m in reported.RECTANGLE_MEAN_R for m in fits):
        lines.append(f"None of the models of profile '{profile}' is BERT: the numbers measure the same quantities on other "
                     f"models, on {seq_len}-token windows (the preprint used one 14-token sentence); BERT-family values "
                     "need the `paper` profile.")
    return " ".join(lines)
