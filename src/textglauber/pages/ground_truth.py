"""Chapter 6's row on the findings page: the simulated estimates against the exact mixing times of
enumerable chains (:func:`textglauber.groundtruth.headline` counts; this module words them)."""
from __future__ import annotations

from pathlib import Path

from . import Headline
from .reading import nowrap, table


def headline(folder: Path, root: Path, profile: str) -> Headline | None:
    from ..groundtruth import headline as counts

    t = table(folder, "ground_truth")
    if t is None:
        return None
    hl = counts(t, table(folder, "holding_times"))
    parts = hl.clauses()
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


def preprint() -> str:
    return "No exact values: coupling and hitting times are used as the measure of mixing on BERT."
