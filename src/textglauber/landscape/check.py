"""Gamma against the exact relaxation time (docs/science.md, chapter 3: the landscape).

On an enumerated chain, t_rel behaves as C exp(Gamma / T) as T falls, so T ln t_rel = Gamma + T ln C
tends to Gamma. The temperatures are chosen from Gamma itself, T = Gamma / L for target values L of
ln t_rel, so that every cell lands where float64 still resolves the spectral gap (ln t_rel up to
about 27); the coldest cells that resolve are the ones that test the limit. The line through the
two coldest resolved points, extended to T = 0, removes the first-order prefactor term T ln C.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..phase.mixing import relaxation
from ..phase.states import Scores, kernel

TARGETS = (6.0, 10.0, 14.0, 18.0, 22.0, 26.0)
"""Values of ln t_rel the check's temperatures aim at (T = Gamma / L)."""

CHECK_COLUMNS = ["temperature", "t_rel", "resolved", "T ln t_rel", "gamma"]


def cold_check(scores: Scores, gamma: float, targets=TARGETS) -> pd.DataFrame:
    """T, t_rel and T ln t_rel of the two-token chain at T = gamma / L for each target L (empty
    where gamma is NaN, inf or zero: no barrier to check)."""
    rows = []
    if math.isfinite(gamma) and gamma > 0:
        for L in targets:
            T = gamma / L
            rel = relaxation(kernel(scores, T))
            rows.append({"temperature": T, "t_rel": rel.t_rel, "resolved": rel.resolved,
                         "T ln t_rel": T * math.log(rel.t_rel) if rel.resolved else math.nan, "gamma": gamma})
    return pd.DataFrame(rows, columns=CHECK_COLUMNS)


def limit(check: pd.DataFrame) -> tuple[float, float, float]:
    """(coldest resolved T, T ln t_rel there, the line through the two coldest resolved points at
    T = 0); NaNs where fewer than one (two) cells resolved."""
    ok = check[check.resolved.astype(bool)].sort_values("temperature")
    if ok.empty:
        return math.nan, math.nan, math.nan
    t0, y0 = float(ok.temperature.iloc[0]), float(ok["T ln t_rel"].iloc[0])
    if len(ok) < 2:
        return t0, y0, math.nan
    t1, y1 = float(ok.temperature.iloc[1]), float(ok["T ln t_rel"].iloc[1])
    return t0, y0, y0 - t0 * (y1 - y0) / (t1 - t0)


def agreement(value: float, gamma: float) -> float:
    """|value - gamma| / gamma (NaN where either is not a finite positive number)."""
    ok = math.isfinite(value) and math.isfinite(gamma) and gamma > 0
    return abs(value - gamma) / gamma if ok else math.nan


def resolved_count(check: pd.DataFrame) -> int:
    return int(np.asarray(check.resolved, bool).sum()) if len(check) else 0
