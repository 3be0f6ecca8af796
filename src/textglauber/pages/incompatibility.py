"""Chapter 1's headline on the findings page: the rectangle test's mean R per masked LM, beside
the joint control's. (The chapter's own sentences still live in :mod:`textglauber.rectangle`.)"""
from __future__ import annotations

from pathlib import Path

from .. import reported
from ..tables import interval, number
from . import Headline
from .reading import nowrap, table


def headline(folder: Path, root: Path, profile: str) -> Headline | None:
    s = table(folder, "summary")
    if s is None:
        return None
    mlm, ctrl = s[s.kind == "mlm"], s[s.kind == "causal"]
    parts = [f"{nowrap(r.model)} {interval(r['mean R'], r['95% CI low'], r['95% CI high'])}" for _, r in mlm.iterrows()]
    details = "Mean R (95% interval) per masked LM: " + "; ".join(parts) + "." if parts else "No masked LM ran."
    if len(ctrl):
        c = ctrl.iloc[0]
        details += f" Joint control {nowrap(c.model)}: mean R {number(c['mean R'])}, largest {number(c['max R'])}."
    if not len(mlm):
        return Headline("No masked LM ran.", details)
    lo, hi = mlm.loc[mlm["mean R"].idxmin()], mlm.loc[mlm["mean R"].idxmax()]
    verdict = (f"Mean R {number(lo['mean R'])} ({nowrap(lo.model)}) to {number(hi['mean R'])} ({nowrap(hi.model)}) "
               f"over {len(mlm)} masked LM{'s' * (len(mlm) != 1)}")
    if len(ctrl):
        above = int((mlm["95% CI low"] > ctrl.iloc[0]["max R"]).sum())
        verdict += (f"; {above} of {len(mlm)} lie wholly above the joint control's largest R "
                    f"({number(ctrl.iloc[0]['max R'])})")
    return Headline(verdict + ".", details)


def preprint() -> str:
    mlm = "; ".join(f"{nowrap(m)} {v:.3f}" for m, v in reported.RECTANGLE_MEAN_R.items() if m != "gpt2")
    return (f"Mean R over {reported.RECTANGLE_PROTOCOL['rectangles_per_model']} MS MARCO rectangles: {mlm}. "
            f"Joint control {nowrap('gpt2')}: {reported.RECTANGLE_MEAN_R['gpt2']:.3f}.")
