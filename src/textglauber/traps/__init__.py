"""Chapter 5, traps (docs/science.md, chapter 5): one module per concept.

- ``chains``          the chapter's chains, in blocks that run as units of work on the scheduler, set
                      side by side as one run (:func:`run_chains`)
- ``detection``       traps *detected* in recorded chains (:func:`catalogue`): metastable windows of the drift, each
                      classified by the score margins of its representative state (perfect or
                      approximate) and the margin bound's predicted escape time
- ``finder``          traps *searched for* from the scores before any chain runs: the one finder,
                      :func:`find_traps` (random starts taken to argmax fixed points by its
                      primitive, :func:`coordinate_ascent`), and :func:`deep_traps`, its caller that
                      keeps the traps holding the chain long enough (the benchmark's trap cells)
- ``escape``          the escape engine: times to Hamming distance k from a perfect trap by exact
                      superbasin exits and jumps, exact one-state holding times and margins, the
                      exact law on enumerated chains
- ``quasipotential``  V_k, the least cost of a path out of the ball, and the W-graph exponent
- ``fits``            survival statistics of escape times (Kaplan-Meier medians and means) and the
                      Arrhenius fit of log median against 1/T
- ``escape_section``  the chapter's escape section: its traps (chosen so that non-trivial exponents
                      exist), cells, fits, exactness cases, each trap at the preprint's temperature,
                      V_k against length, and the counts its words state
- ``length``          escape against length by Arrhenius slopes over one nested family of traps

The section's sentences, tables and plots, and the catalogue's, are
:mod:`textglauber.pages.traps`'s. The names below are the package's public API; the function
``catalogue`` is ``traps.catalogue``, and its module is ``traps.detection`` (no module shares the
name of a function the package exports).
"""
from __future__ import annotations

from .chains import run_chains
from .detection import COLUMNS, catalogue, consecutive_drift, detect, step_drift, trajectories, vacuous
from .escape import BASIN_CAP, EscapeRun, RowMemo, escape_times
from .escape_section import (MIN_MEDIANS, at_preprint_temperature, choose_traps, escape_counts, escape_growth,
                             exact_cases, exactness, measure_model, model_escape, nontrivial, run_escape)
from .finder import (TRAP_HOLD, TRAP_START_BATCHES, TRAP_TEMPERATURE, NoFixedPoint, coordinate_ascent, deep_traps,
                     find_traps, holding_steps)
from .fits import Arrhenius, arrhenius, km_medians, summarize
from .length import LengthTrap, escape_length, nested_traps
from .quasipotential import barrier

__all__ = ["BASIN_CAP", "COLUMNS", "MIN_MEDIANS", "TRAP_HOLD", "TRAP_START_BATCHES", "TRAP_TEMPERATURE", "Arrhenius",
           "EscapeRun", "LengthTrap", "NoFixedPoint", "RowMemo", "arrhenius", "at_preprint_temperature", "barrier", "catalogue", "choose_traps",
           "consecutive_drift", "coordinate_ascent", "deep_traps", "detect", "escape_counts", "escape_growth",
           "escape_length", "escape_times", "exact_cases", "exactness", "find_traps", "holding_steps", "km_medians", "measure_model",
           "model_escape", "nested_traps", "nontrivial", "run_chains", "run_escape", "step_drift", "summarize", "trajectories", "vacuous"]
