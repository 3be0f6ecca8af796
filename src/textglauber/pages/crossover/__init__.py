"""Chapter 3's page (docs/science.md, chapter 3), apart from its computation: ``phase`` holds the
exact phase diagram's sentences, views and figure; ``landscape`` the landscape's, the covering
chains' and the hot end's; ``laws`` the measured times' growth laws in
words, the coupling grid's boundary, T* beside it and their figures; ``blocks`` the sections as page
blocks in the order the page shows them (what the notebook renders). Here: the chapter's row on
the findings page (:func:`headline`) and its preprint column (:func:`preprint`). Every name of
both parts is re-exported, so ``crossover_page.X`` works for all of them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ... import crossover, reported
from .. import Headline
from ..reading import esc, manifest, nowrap, table as read_table
from .laws import (best_curve, boundary_interval_sentence, boundary_line, boundary_sentence, budget_sentence, caveat,
                   cells_view, coupling_law_paragraph, law_caveat, law_exponent, law_sentence, model_sentence,
                   plot_coupling_grid, plot_drift, plot_medians, power_sentence, range_sentence, sensitivity_sentence,
                   sensitivity_view, tstar_line, tstar_sentence)
from .landscape import (check_sentence, covering_sentence, covering_view, gamma_sentences, hot_sentence,
                        landscape_view, plot_gamma, swing_sentences)
from .phase import (beside_preprint, calibration_sentence, calibration_view, cost_sentence, design_label, GROWTH,
                    hot_and_cold, phase_headline, phase_verdict, plot, regimes, RESTRICTED, rule_sentence, spikes,
                    unresolved_sentence, verdict_sentences, verdict_view)

__all__ = ["check_sentence", "covering_sentence", "covering_view", "gamma_sentences", "hot_sentence",
           "landscape_view", "plot_gamma", "swing_sentences", "beside_preprint", "best_curve", "boundary_interval_sentence", "boundary_line",
           "boundary_sentence", "BOUNDARY_WORDS", "budget_sentence", "calibration_sentence", "calibration_view",
           "caveat", "cells_view", "cost_sentence", "coupling_law_paragraph", "design_label", "GROWTH", "headline",
           "hot_and_cold", "law_caveat", "law_exponent", "law_sentence", "law_words", "model_sentence",
           "phase_headline", "phase_verdict", "plot", "plot_coupling_grid", "plot_drift", "plot_medians",
           "power_sentence", "preprint", "range_sentence", "regimes", "RESTRICTED", "rule_sentence",
           "sensitivity_sentence", "sensitivity_view", "spikes", "tstar_line", "tstar_sentence", "unresolved_sentence",
           "verdict_sentences", "verdict_view"]


# ------------------------------------------------------------------------- the findings page's row
BOUNDARY_WORDS = {"rises": "it rises (the range at the longest length lies wholly above the one at the shortest)",
                  "falls": "it falls (the range at the longest length lies wholly below the one at the shortest)",
                  "cannot tell": "the ranges at the shortest and the longest length overlap, so whether it moves "
                                 "cannot be told"}


def headline(folder: Path, root: Path, profile: str) -> Headline | None:
    """The exact phase diagram's verdict, then the simulated times' growth laws and boundary."""
    m, fits = manifest(folder), read_table(folder, "law_fits")
    if m is None or fits is None:
        return None
    par = m["parameters"]
    exact, verdicts = read_table(folder, "phase_exact"), read_table(folder, "phase_verdicts")
    have = exact is not None and verdicts is not None
    verdict = esc(phase_verdict(verdicts, exact)) if have else "No exact phase diagram in this run."
    text = esc(phase_headline(verdicts, exact)) if have else ""
    land, land_v, cover = (read_table(folder, k) for k in ("landscape", "landscape_verdicts", "covering"))
    if land is not None and land_v is not None:
        text += " Landscape (from the scores, any length): " + esc(" ".join(gamma_sentences(land, land_v)))
    if cover is not None:
        text += " " + esc(covering_sentence(cover))
    delta = float(par["delta"])
    main = fits[np.isclose(fits.delta, delta)]
    text += (f" Growth law of the hitting times (δ = {delta:g}, budgets of {par['sweeps']:g} sweeps), by temperature: "
             + "; ".join(f"T = {r['temperature']:g}: {esc(law_words(r))}" for r in main.to_dict("records")) + ".")
    laws = read_table(folder, "coupling_law_fits")
    if laws is not None and len(laws):
        text += (" Growth law of the coupling times at the fast temperatures: "
                 + "; ".join(f"T = {r['temperature']:g}: {esc(law_words(r))}" for r in laws.to_dict("records")) + ".")
    elif laws is not None:
        text += " No temperature was fast at three lengths, so no growth law of the coupling times was tested."
    text += " " + esc(law_caveat(par["lengths"]))
    intervals = read_table(folder, "boundary_intervals")
    if intervals is not None and len(intervals):
        text += (f" The coupling grid's fast/slow boundary (median coupling time within {float(par['fast_within']):g} "
                 f"n ln n steps, budgets of {par['budget_sweeps']:g} sweeps), as bootstrap ranges from "
                 f"n = {int(intervals.n.min())} to n = {int(intervals.n.max())}: "
                 + esc(BOUNDARY_WORDS[crossover.boundary_verdict(intervals)]) + ".")
    return Headline(verdict, (text + f" Model: {nowrap(par['model']['name'])}.").lstrip())


def law_words(row: dict) -> str:
    """A law-table row as the chapter reports it: the verdict that the design check lets stand, its
    support, and the exponent's interval."""
    verdict = row["reported"]
    named = verdict not in ("cannot tell", "none of the three") and row["support"]
    p = (f"power-law exponent p = {row['p']:.2f} [95% interval {row['p low']:.2f} to {row['p high']:.2f}]"
         if np.isfinite(row["p"]) else "no exponent (too few lengths with a median)")
    support = f" ({row['support']})" if named else ""
    return f"{verdict}{support}, {p}"


def preprint() -> str:
    c = reported.CROSSOVER
    return f"Hitting times fit {esc(c['fit'])}; the fast/slow boundary lies {esc(c['boundary'])}."
