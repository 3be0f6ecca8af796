"""Gamma against the exact relaxation time (docs/science.md, chapter 3: the landscape).

On an enumerated chain, t_rel behaves as C exp(Gamma / T) as T falls, so T ln t_rel = Gamma + T ln C
tends to Gamma. The temperatures are chosen from Gamma itself, T = Gamma / L for target values L of
ln t_rel, so that every cell lands where float64 still resolves the spectral gap (ln t_rel up to
about 27); the coldest cells that resolve are the ones that test the limit. The line through the
two coldest resolved points, extended to T = 0, removes the first-order prefactor term T ln C.

Colder than float64 resolves the gap, the same chain is read through the mean time to reach its
ground well from the worst start, max_x E_x[tau_ground], which grows as exp(Gamma / T) too. It is
solved by subtraction-free elimination (:func:`textglauber.exact.exit_time`), exact to rounding at
any temperature, so it reaches T = Gamma / 100, where T ln C is a tenth of what it is at Gamma / 10.
Chains of more than :data:`CHECK_MAX_STATES` states are not checked.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..exact import exit_time
from ..phase.mixing import relaxation
from ..phase.states import Scores, kernel

TARGETS = (6.0, 10.0, 14.0, 18.0, 22.0, 26.0)
"""Values of ln t_rel the check's temperatures aim at (T = Gamma / L)."""

HIT_TARGETS = (50.0, 100.0)
"""Values of Gamma / T where the mean hitting time of the ground well is solved (past t_rel's reach)."""

CHECK_MAX_STATES = 1024
"""Largest chain that is checked (n <= 10). Its eigenvalues are computed densely (about 2 s at 1,024
states on 2 cores) and its hitting times by a dense elimination (about 1 s). Past it, a cold chain's
sparse eigen solve (ARPACK at gaps near 1e-11) ran for minutes per temperature, so longer chains are
left unchecked and the page counts them."""

CHECK_COLUMNS = ["measure", "temperature", "t_rel", "resolved", "T ln t_rel", "T ln hit", "gamma"]


def worst_hit(P, ground: np.ndarray) -> float:
    """max over states outside the ground well of the exact mean steps to reach it."""
    outside = np.ones(P.shape[0], bool)
    outside[np.asarray(ground, int)] = False
    return float(exit_time(P, outside).max())


def cold_check(scores: Scores, gamma: float, targets=TARGETS, ground=None) -> pd.DataFrame:
    """T, t_rel and T ln t_rel of the two-token chain at T = gamma / L for each target L, and, given
    the ground well's states, T ln max_x E_x[tau_ground] at T = gamma / L for L in :data:`HIT_TARGETS`
    (those rows hold no t_rel). Empty where gamma is NaN, inf or zero (no barrier to check) and on
    chains of more than :data:`CHECK_MAX_STATES` states."""
    rows = []
    if not (math.isfinite(gamma) and gamma > 0) or 2 ** scores.n > CHECK_MAX_STATES:
        return pd.DataFrame(rows, columns=CHECK_COLUMNS)
    for L in targets:
        T = gamma / L
        rel = relaxation(kernel(scores, T), dense_max=CHECK_MAX_STATES)
        rows.append({"measure": "t_rel", "temperature": T, "t_rel": rel.t_rel, "resolved": rel.resolved,
                     "T ln t_rel": T * math.log(rel.t_rel) if rel.resolved else math.nan, "T ln hit": math.nan,
                     "gamma": gamma})
    if ground is not None:
        for L in HIT_TARGETS:
            T = gamma / L
            hit = worst_hit(kernel(scores, T), ground)
            rows.append({"measure": "hit", "temperature": T, "t_rel": math.nan, "resolved": False, "T ln t_rel": math.nan,
                         "T ln hit": T * math.log(hit) if math.isfinite(hit) and hit > 1 else math.nan,
                         "gamma": gamma})
    return pd.DataFrame(rows, columns=CHECK_COLUMNS)


def hit_limit(check: pd.DataFrame) -> tuple[float, float]:
    """(coldest T with a hitting time, T ln max E[tau_ground] there); NaNs where none was solved."""
    ok = check[np.isfinite(check["T ln hit"].astype(float))].sort_values("temperature") if len(check) else check
    if ok.empty:
        return math.nan, math.nan
    return float(ok.temperature.iloc[0]), float(ok["T ln hit"].iloc[0])


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
