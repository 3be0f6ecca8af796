"""Durations as people read them, for every progress line and plan."""
from __future__ import annotations

import math


def duration(seconds: float | None) -> str:
    """'45 s', '7.5 min', '13 min', '2 h 05 min'; '?' for an unknown time. One formatter for the build's
    plan, its progress lines and the training's."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    s = max(0.0, float(seconds))
    if s < 90:
        return f"{s:.0f} s"
    if s < 600:
        return f"{s / 60:.1f}".removesuffix(".0") + " min"
    if s < 90 * 60:
        return f"{s / 60:.0f} min"
    h, m = divmod(int(round(s / 60)), 60)
    return f"{h} h {m:02d} min"
