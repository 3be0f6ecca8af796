"""A chapter's seconds on this machine: its work at the fitted seconds per unit, scaled by the
probe, or a last run's time carried over to other parameters."""
from __future__ import annotations

import functools
import math

from .calibration import CALIBRATION_PARAMETERS, FIXED_S, OVERHEAD_S
from .probing import Probe
from .work import chapter_work, work_parts


def reference_work(chapter: str) -> float | None:
    """:func:`chapter_work` at the calibration's parameters (the same formula as for a profile, so
    a change to the formula keeps the calibration in step)."""
    prm = CALIBRATION_PARAMETERS.get(chapter)
    return None if prm is None else chapter_work(chapter, prm)


@functools.lru_cache(maxsize=1)
def constants() -> dict[str, tuple[float, float, float]]:
    """{chapter: (fixed seconds, seconds per unit of encoder work, per unit of bookkeeping)} at the
    reference probe, fitted to the measured builds (:mod:`.records`)."""
    from . import records

    return records.fit(records.load())


def overhead(chapter: str) -> float:
    """A chapter's fixed seconds at the reference probe (its fit, else ``OVERHEAD_S``)."""
    got = constants().get(chapter)
    return OVERHEAD_S if got is None else got[0]


def estimate(chapter: str, prm: dict, probe_: "Probe") -> float | None:
    """Seconds a chapter with these parameters would take at the probe's reading (None: no basis):
    its fixed time as fitted, its bookkeeping at the one-thread reading, its encoder work at the
    reading on torch's threads (:mod:`.records`). A chapter no fit covers, with a fixed time
    (``FIXED_S``), takes those seconds as they are: a fixed time is not scaled by the probe, as in
    the fit (:mod:`.records`)."""
    got = constants().get(chapter)
    if got is None:
        return FIXED_S.get(chapter)
    try:
        encoder, books = work_parts(chapter, prm) or (0.0, 0.0)
    except (KeyError, TypeError, ValueError):
        return None
    a, b, c = got
    return a + probe_.scale(c * books, b * encoder)


def rescaled(seconds: float, chapter: str, old: dict | None, new: dict) -> tuple[float, float | None]:
    """A last run's time carried over to other parameters: the part above the chapter's fixed time
    scales with the work. Returns (seconds, the work ratio or None where it is one or unknown)."""
    if not old:
        return seconds, None
    try:
        a, b = chapter_work(chapter, old), chapter_work(chapter, new)
    except (KeyError, TypeError, ValueError):
        return seconds, None
    if not a or not b or math.isclose(a, b, rel_tol=1e-9):
        return seconds, None
    fixed = overhead(chapter)
    return fixed + max(seconds - fixed, 0.0) * b / a, b / a
