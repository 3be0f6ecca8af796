"""A chapter's seconds on this machine: its work at the calibration's seconds per unit, scaled by
the probe, or a last run's time carried over to other parameters."""
from __future__ import annotations

import math

from .calibration import CALIBRATION_PARAMETERS, CALIBRATION_SECONDS, FIXED_S, OVERHEAD_S
from .probing import Probe
from .work import chapter_work


def reference_work(chapter: str) -> float | None:
    """:func:`chapter_work` at the calibration's parameters (the same formula as for a profile, so
    a change to the formula keeps the calibration in step)."""
    prm = CALIBRATION_PARAMETERS.get(chapter)
    return None if prm is None else chapter_work(chapter, prm)


def seconds_per_unit(chapter: str) -> float | None:
    """Seconds per unit of :func:`chapter_work` on the calibration machine."""
    work = reference_work(chapter)
    if chapter not in CALIBRATION_SECONDS or not work:
        return None
    return max(CALIBRATION_SECONDS[chapter] - OVERHEAD_S, 1.0) / work


def estimate(chapter: str, prm: dict, probe_: "Probe") -> float | None:
    """Seconds a chapter with these parameters would take at the probe's reading (None: no basis):
    its overhead at the one-thread reading, its work at the reading on torch's threads."""
    if chapter in FIXED_S:
        return probe_.scale(FIXED_S[chapter], 0.0)
    spu = seconds_per_unit(chapter)
    try:
        work = chapter_work(chapter, prm)
    except (KeyError, TypeError, ValueError):
        return None
    if spu is None or work is None:
        return None
    return probe_.scale(OVERHEAD_S, spu * work)


def rescaled(seconds: float, chapter: str, old: dict | None, new: dict) -> tuple[float, float | None]:
    """A last run's time carried over to other parameters: the part above ``OVERHEAD_S`` scales
    with the work. Returns (seconds, the work ratio or None where it is one or unknown)."""
    if not old:
        return seconds, None
    try:
        a, b = chapter_work(chapter, old), chapter_work(chapter, new)
    except (KeyError, TypeError, ValueError):
        return seconds, None
    if not a or not b or math.isclose(a, b, rel_tol=1e-9):
        return seconds, None
    return OVERHEAD_S + max(seconds - OVERHEAD_S, 0.0) * b / a, b / a
