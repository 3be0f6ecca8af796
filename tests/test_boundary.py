"""The fast/slow boundary as a range (issue 51, part 2): every cell's call is resampled, the boundary
at each length is an interval, and 'rises' is said only where the interval at the longest length lies
wholly above the one at the shortest. Synthetic coupling times with a known boundary: the rule must
name a clear rise (power) and must not name one that is not there (safety)."""
import math

import numpy as np
import pandas as pd
import pytest

from textglauber import crossover
from textglauber.pages import crossover as crossover_page

KAPPA = 8.0
TEMPS = [0.5, 1.0, 1.5, 2.0, 3.0, 4.0]
LENGTHS = [6, 12, 24, 48]


def synthetic(fast_from: dict, pairs: int, rng, budget_sweeps: float = 60.0) -> pd.DataFrame:
    """Coupling times at each (T, n): a fast cell's median is 2 n ln n steps, a slow one's 40 n ln n
    (both log-normal, cv about 0.5); fast where T >= fast_from[n]; censored at budget_sweeps * n."""
    rows = []
    for n in LENGTHS:
        budget = budget_sweeps * n
        for T in TEMPS:
            c = 2.0 if T >= fast_from[n] else 40.0
            tau = c * n * math.log(n) * rng.lognormal(0.0, 0.47, size=pairs)
            cen = tau > budget
            rows += [{"temperature": T, "n": n, "tau": min(t, budget), "censored": bool(k), "budget": budget}
                     for t, k in zip(tau, cen)]
    return pd.DataFrame(rows)


def test_a_clear_rise_is_named_and_a_flat_boundary_is_not():
    rng = np.random.default_rng(0)
    rises = {6: 1.0, 12: 1.5, 24: 2.0, 48: 3.0}
    flat = {n: 1.5 for n in LENGTHS}
    said_rise = [crossover.boundary_verdict(crossover.boundary_intervals(synthetic(rises, 40, rng), KAPPA, 300, k))
                 for k in range(20)]
    said_flat = [crossover.boundary_verdict(crossover.boundary_intervals(synthetic(flat, 40, rng), KAPPA, 300, k))
                 for k in range(20)]
    assert said_rise.count("rises") >= 19                 # power: the truth is named when it is clear
    assert said_flat.count("rises") + said_flat.count("falls") <= 1   # safety: no trend where there is none


def smooth(edge: dict, pairs: int, rng, budget_sweeps: float = 60.0) -> pd.DataFrame:
    """Coupling times whose median at (T, n) is KAPPA n ln n exp(-2 (T - edge[n])): cells near the
    edge sit close to the criterion, so their calls are noisy, as the issue's 8-pair cells were."""
    rows = []
    for n in LENGTHS:
        budget = budget_sweeps * n
        for T in TEMPS:
            tau = KAPPA * math.exp(-2 * (T - edge[n])) * n * math.log(n) * rng.lognormal(0.0, 0.47, size=pairs)
            rows += [{"temperature": T, "n": n, "tau": min(t, budget), "censored": bool(t > budget), "budget": budget}
                     for t in tau]
    return pd.DataFrame(rows)


@pytest.mark.slow
def test_a_shift_read_off_point_thresholds_of_noisy_cells_is_not_called_a_rise():
    """The issue's case: with the same edge at every length, the point thresholds of 8-pair cells
    near the criterion still differ from one length to another, and read as a rise in some data
    sets; the intervals overlap, and the verdict says it cannot tell."""
    rng = np.random.default_rng(1)
    edge = {n: 2.0 for n in LENGTHS}              # the T = 2 cells sit on the criterion: coin flips
    point_rises, verdicts = 0, []
    for k in range(20):
        data = smooth(edge, 8, rng)
        b = crossover.fast_threshold(crossover.coupling_cells(data, KAPPA))
        point_rises += b[-1][1] > b[0][1]
        verdicts.append(crossover.boundary_verdict(crossover.boundary_intervals(data, KAPPA, 300, k)))
    assert point_rises >= 3                                     # the old reading would have said 'rises'
    assert verdicts.count("rises") + verdicts.count("falls") <= 1


def test_the_intervals_hold_the_point_threshold_and_beyond_the_grid_reads_as_inf():
    rng = np.random.default_rng(2)
    none_fast = {6: 1.0, 12: 2.0, 24: 3.0, 48: 99.0}
    iv = crossover.boundary_intervals(synthetic(none_fast, 30, rng), KAPPA, 300, 0)
    for r in iv.itertuples():
        assert r.low <= r.threshold <= r.high
    last = iv[iv.n == 48].iloc[0]
    assert np.isinf(last.threshold) and np.isinf(last.low)
    text = crossover_page.boundary_interval_sentence(iv, KAPPA)
    assert "n = 48: beyond the grid" in text and "The boundary rises" in text


@pytest.mark.parametrize("pairs", [8, 40])
def test_the_bootstrap_threshold_matches_the_cells_rule_on_the_data_as_drawn(pairs):
    rng = np.random.default_rng(3)
    data = synthetic({6: 1.0, 12: 1.5, 24: 2.0, 48: 3.0}, pairs, rng)
    iv = crossover.boundary_intervals(data, KAPPA, 50, 0)
    point = dict(crossover.fast_threshold(crossover.coupling_cells(data, KAPPA)))
    assert dict(zip(iv.n, iv.threshold)) == point
