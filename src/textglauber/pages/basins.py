"""Chapter 4's sentences on the null that can fail both ways (:mod:`textglauber.basinnull`)."""
from __future__ import annotations

import pandas as pd

from ..basinnull import Special, special
from ..topics import format_p


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
