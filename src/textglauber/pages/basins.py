"""Chapter 4's page text: the sentences on the null that can fail both ways
(:mod:`textglauber.basinnull`) and the chapter's row on the findings page (:func:`headline`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import reported
from ..basinnull import Special, special
from ..topics import format_p
from . import Headline
from .reading import esc, manifest, nowrap, table


def special_clause(contrast: pd.DataFrame, model: str, basin_label: str, *, alpha: float) -> str:
    """One clause: is the basin label special among the labels, for ``model``?"""
    v = special(contrast, model, alpha=alpha)
    return {True: f"{basin_label} beats every other label ({v.others}) in late share above the baseline",
            False: f"{basin_label} is not special: it beats {v.beaten} of the {v.others} other labels in late share "
                   f"above the baseline and ranks {v.rank} of {v.others + 1}",
            None: f"too few seeds ({v.clusters} clusters) to tell whether {basin_label} is special among the labels"
            }[v.verdict]


def special_paragraph(contrast: pd.DataFrame, model: str, basin_label: str, *, alpha: float) -> str:
    """The label contrast of one model, as the page says it."""
    v: Special = special(contrast, model, alpha=alpha)
    C = contrast[contrast.model == model]
    top = C.sort_values("difference").iloc[0]
    text = (f"For {model}, over {v.clusters} clusters of chains (topic-seeded and null; the chains of one seed are one "
            f"cluster), the {basin_label} score is above the baseline in {C.basin.iloc[0]:.0%} of second-half records. "
            f"It ranks {v.rank} of {v.others + 1} labels by that share. ")
    if v.verdict is None:
        return text + (f"With {v.clusters} clusters the sign-flip test cannot give a p-value below "
                       f"{alpha:g} / {v.others} (Holm's first step over {v.others} labels), so the test **cannot tell** "
                       f"whether {basin_label} is special; more seeds are needed.")
    text += (f"Against each of the {v.others} other labels (sign-flip test over clusters, Holm-adjusted at level "
             f"{alpha:g}) it is ahead of {v.beaten}. ")
    if v.verdict:
        return text + (f"**{basin_label} is special among the labels**: the chains spend more of their late records "
                       f"above the baseline on it than on any other label. The scorer's own leaning towards a label "
                       "would show the same way, so this speaks of the model and the scorer together.")
    return text + (f"**{basin_label} is not special among the labels**: it is not ahead of "
                   f"{', '.join(v.not_beaten[:4])}{' and others' if len(v.not_beaten) > 4 else ''}. Its smallest "
                   f"difference in late share, against {top.label}, is {top.difference:+.2f} "
                   f"(95% interval {top.low:+.2f} to {top.high:+.2f}, adjusted {format_p(top['p holm'])}).")


def matched_paragraph(matched: pd.DataFrame, model: str, basin_label: str, *, alpha: float) -> str:
    """Topic-seeded against null chains matched on the start score, as the page says it."""
    M = matched[matched.model == model].set_index("outcome")
    if not len(M):
        return (f"For {model}, no topic-seeded or no null chain started at or below the baseline, so no pair could "
                "be matched on its start.")
    c, l = M.loc["crossed"], M.loc["late"]
    reuse = " (too few null chains: some serve more than one pair)" if c.replacement else ""
    return (f"Matched on the {basin_label} score they start from, {int(c.pairs)} seeds of {model} are each paired with "
            f"one null chain{reuse}; the start scores differ by {c['mean start gap']:.3f} on average and "
            f"{c['largest start gap']:.3f} at most. The topic-seeded chains cross the baseline in {c.topic:.0%} of "
            f"cases against {c.null:.0%} for their partners ({format_p(c.p)}), and are above it in {l.topic:.0%} of "
            f"second-half records against {l.null:.0%} ({format_p(l.p)}). "
            + ("**At the same start, the seed's topic makes a difference** to where the chains go."
               if c.exceeds or l.exceeds else
               "**At the same start, the seed's topic makes no detectable difference**: this speaks to whether the "
               "seed matters, not to whether a basin exists, which is the label contrast's question."))


# ------------------------------------------------------------------------- the findings page's row
def headline(folder: Path, root: Path, profile: str) -> Headline | None:
    """The first model's topic-seeded chains: how many crossed the basin label's baseline, against
    the null chains' share, and whether the label is special among the labels."""
    m, summ, rec = manifest(folder), table(folder, "summary"), table(folder, "recurrence")
    if m is None or summ is None or rec is None:
        return None
    p = m["parameters"]
    label, labels, steps = p["basin_label"], p["labels"], int(p["steps"])
    first = rec.model.iloc[0]
    r0 = rec[rec.model == first]
    if "kind" in r0:                                  # null chains ran beside the topic-seeded ones
        r0 = r0[r0.kind == "topic"]
    crossed = (f"{int(r0.crossed_up.sum())} of {len(r0)} chains crossed the {esc(label)} baseline (1/{len(labels)}) "
               "upward")
    text = (f"{nowrap(first)}: mean {esc(label)} score over the {len(summ)} seed topics "
            f"{summ[f'{label} at 0'].mean():.3f} at step 0 and {summ[f'{label} at end'].mean():.3f} at step {steps:,}; "
            + crossed)
    verdict = f"{nowrap(first)}: {crossed}"
    null = table(folder, "recurrence_null")
    c = None if null is None else null[(null.model == first) & (null.statistic == "crossing share")].reset_index(drop=True)
    special_text = special_sentence(folder, first, label, p)
    if c is None or not len(c):
        return Headline(verdict + "; no null model ran.", text + "; no null model ran." + special_text)
    c = c.loc[c.against.str.count(" \\+ ").idxmax()]         # the pooled null: every kind of null seed
    kinds = c.against.split(" + ")
    share = (f"{int(c['count topic'])} of {int(c['n topic'])} topic-seeded chains against {int(c['count null'])} of "
             f"{int(c['n null'])} chains from seeds with no topic ({esc(' and '.join(kinds))})")
    if not np.isfinite(c.p):
        return Headline(verdict + "; not comparable with the null.",
                        text + f". Among chains starting at or below the baseline, {share}: not comparable." + special_text)
    word = "exceeds" if c.exceeds else "does not exceed"
    return Headline(f"{verdict}; the recurrence {word} the null model's (Fisher p = {c.p:.2g}).",
                    text + f". Among chains starting at or below the baseline, {share} crossed (one-sided Fisher "
                    f"p = {c.p:.2g}): the recurrence {word} the null model's." + special_text)


def special_sentence(folder: Path, model: str, label: str, p: dict) -> str:
    """Whether the basin label leads every other label (the null that can fail both ways)."""
    contrast = table(folder, "basin_contrast")
    if contrast is None or not (contrast.model == model).any():
        return ""
    return " Among the labels, " + esc(special_clause(contrast, model, label, alpha=float(p["null_alpha"]))) + "."


def preprint() -> str:
    start = np.mean([a for a, _ in reported.BASINS_POLITICS.values()])
    end = np.mean([b for _, b in reported.BASINS_POLITICS.values()])
    up, n = reported.BASINS_CROSSING
    return (f"{nowrap('bert-base-uncased')}: mean politics score over the {len(reported.BASINS_POLITICS)} seed topics "
            f"{start:.3f} at step 0 and {end:.3f} at step 10,000; {up} of {n} chains crossed the politics baseline; "
            "no null model is given for this count.")
