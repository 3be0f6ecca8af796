"""The crossover's boundary criterion and T* comparison (textglauber.crossover), on synthetic
coupling times with a known law."""
import math

import numpy as np
import pandas as pd
import pytest

from textglauber import crossover
from textglauber.pages import crossover as crossover_page

LENGTHS = [6, 10, 16, 28, 48]
TEMPS = [0.25, 0.5, 1.0, 1.5, 2.0, 3.0]


def _pairs(tau_of, pairs=31, sweeps=None, fixed=None, seed=0):
    """Per-pair table with coupling times tau_of(T, n) times log-normal noise (cv about 0.3),
    censored at the budget: ``sweeps`` * n steps, or ``fixed`` steps at every length (the old design)."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in LENGTHS:
        b = fixed if fixed is not None else crossover.budgets([n], sweeps)[n]
        for T in TEMPS:
            t = np.ceil(tau_of(T, n) * np.exp(0.3 * rng.standard_normal(pairs)))
            cens = t > b
            rows += [{"n": n, "temperature": T, "pair": k, "tau": np.nan if c else v, "censored": bool(c), "budget": b}
                     for k, (v, c) in enumerate(zip(t, cens))]
    return pd.DataFrame(rows)


def _old_boundary(pair_times, budget):
    """The chapter's criterion before budgets in sweeps: a cell is fast when its median is within
    one fixed step budget."""
    cells = crossover.coupling_cells(pair_times, kappa=1e9)           # kappa huge: fast = coupled at all
    return crossover.fast_threshold(cells)


def c_of(T):
    """A fast phase whose constant falls with temperature: c(T) n ln n steps."""
    return 12.0 / T


def test_n_log_n_coupling_times_give_a_boundary_that_does_not_move_under_the_new_criterion():
    kappa = 9.8     # between c(1.5) = 8 and c(1) = 12, about 20% from each
    times = _pairs(lambda T, n: c_of(T) * n * math.log(n), sweeps=200)
    boundary = crossover.fast_threshold(crossover.coupling_cells(times, kappa))
    # the fast temperatures are {T : c(T) <= kappa} = {T >= 4/3} at every n
    assert [t for _, t in boundary] == [1.5] * len(LENGTHS)


def test_the_same_times_under_one_step_budget_move_the_boundary_by_construction():
    """The old design: one step budget for every n and 'fast' = coupled within it. The same
    n ln n times make the boundary rise with n, although nothing but n changed."""
    times = _pairs(lambda T, n: c_of(T) * n * math.log(n), fixed=1200)
    boundary = _old_boundary(times, 1200)
    assert boundary[0][1] < boundary[-1][1]


def test_a_boundary_that_really_moves_is_seen_under_the_new_criterion():
    """The criterion can fail: where the model's coupling times grow faster than n ln n at low
    temperature (exp(n / 8T) on top), the boundary rises under the new criterion too."""
    kappa = 9.0
    times = _pairs(lambda T, n: c_of(T) * n * math.log(n) * math.exp(n / (8 * T)) / math.exp(6 / (8 * T)), sweeps=2000)
    boundary = crossover.fast_threshold(crossover.coupling_cells(times, kappa))
    assert boundary[-1][1] > boundary[0][1]


def test_sweeps_alone_still_carry_the_log_factor():
    """Why the criterion is scaled by n ln n and not by n alone: a threshold of B sweeps on the
    same n ln n times moves with n (c(T) ln n <= B changes with n)."""
    times = _pairs(lambda T, n: c_of(T) * n * math.log(n), sweeps=200)
    cells = crossover.coupling_cells(times, kappa=9.0)
    B = 9.0 * math.log(16)                       # agrees with kappa n ln n at n = 16 only
    sweeps_cells = cells.assign(fast=cells["median"] <= B * cells.n)
    boundary = crossover.fast_threshold(sweeps_cells)
    assert boundary[0][1] < boundary[-1][1]


def test_check_design_refuses_a_budget_that_cannot_decide_the_criterion():
    crossover.check_design([6, 48], budget_sweeps=9 * math.log(48) + 0.01, kappa=9)
    with pytest.raises(ValueError, match="budget_sweeps"):
        crossover.check_design([6, 48], budget_sweeps=30, kappa=9)


def test_budgets_count_sweeps():
    assert crossover.budgets([6, 10, 48], 25) == {6: 150, 10: 250, 48: 1200}
    assert crossover.budgets([7], 2.5) == {7: 18}


def test_tstar_is_compared_at_the_same_length_or_says_which():
    boundary = [(6, 0.5), (14, 1.0), (24, 2.0)]
    same = crossover.tstar_comparison(8.0, 14, boundary)
    assert same["same_n"] and same["fast"] == 1.0 and same["ratio"] == 8.0
    assert "at the same length, n = 14" in crossover_page.tstar_sentence(same, "m", 9)
    other = crossover.tstar_comparison(8.0, 20, boundary)
    assert not other["same_n"] and other["n"] == 24 and other["ratio"] == 4.0
    assert "nearest" in crossover_page.tstar_sentence(other, "m", 9)
    none = crossover.tstar_comparison(8.0, 14, [(14, float("inf"))])
    assert "no temperature of the grid is fast" in crossover_page.tstar_sentence(none, "m", 9)


def test_fast_temperatures_need_three_fast_lengths():
    cells = pd.DataFrame({"temperature": [1.0] * 3 + [2.0] * 3, "n": [6, 10, 16] * 2,
                          "fast": [True, True, False, True, True, True]})
    assert crossover.fast_temperatures(cells) == [2.0]


# ------------------------------------------------------------------ the chapter's page
def test_boundary_line_is_the_boundary_sentence_capitalized():
    boundary = [(6, 1.0), (10, 2.0), (16, float("inf"))]
    line = crossover_page.boundary_line(boundary, 8)
    assert line == "L" + crossover_page.boundary_sentence(boundary, 8)[1:]
    assert line.startswith("Lowest temperature from which") and "n = 16: no temperature of the grid" in line
    assert "rises" not in line and "falls" not in line     # a trend is read from the ranges only (issue 51)


def test_cells_view_names_the_columns_for_the_page():
    cells = crossover.coupling_cells(_pairs(lambda T, n: c_of(T) * n * math.log(n), sweeps=60), kappa=8)
    view = crossover_page.cells_view(cells, 8)
    assert {"median coupling time", "95% CI low", "95% CI high", "share censored", "8 n ln n"} <= set(view.columns)
    assert view["8 n ln n"].tolist() == cells["limit"].tolist()
    assert view["median coupling time"].equals(cells["median"])


def test_model_sentence_says_whether_the_thresholds_describe_bert():
    other = crossover_page.model_sentence("tiny-mlm", "tiny-mlm", "self", profile="smoke", trials=16, pairs=12)
    assert other == ("Model: tiny-mlm with embedder self, profile 'smoke', 16 chains per (T, n) for the hitting times and "
                     "12 pairs per cell for coupling, against the preprint's 100 trials on BERT; the thresholds here "
                     "describe tiny-mlm, not BERT.")
    bert = crossover_page.model_sentence("bert-base-uncased", "bert-base-uncased", "sentence:x", profile="paper", trials=100,
                                    pairs=30)
    assert bert.endswith("against the preprint's 100 trials on BERT.")


def test_drift_plot_reads_the_temperature_nearest_one_and_the_last_record_within_fixed_t():
    import matplotlib.pyplot as plt

    rows = [{"n": n, "temperature": T, "step": s, "mean_drift": s / (n * T), "median_drift": s / n, "q25": 0.0, "q75": s}
            for n in (4, 8) for T in (0.5, 1.25, 3.0) for s in (0, 10, 20, 30)]
    fig, axes = plt.subplots(1, 2)
    crossover_page.plot_drift(axes, pd.DataFrame(rows), [0.5, 1.25, 3.0], fixed_t=25, delta=0.3)
    assert axes[0].get_title() == "T = 1.25"                          # |1.25 - 1| < |0.5 - 1|
    assert [line.get_label() for line in axes[0].lines[:2]] == ["n = 4", "n = 8"]
    assert list(axes[0].lines[1].get_xdata()) == [0, 10 / 8, 20 / 8, 30 / 8]
    assert axes[1].get_ylabel() == "drift at t = 20 (median, quartiles)"
    assert [c.get_label() for c in axes[1].containers] == ["T = 0.5", "T = 1.25", "T = 3"]
    assert list(axes[1].containers[0].lines[0].get_ydata()) == [20 / 4, 20 / 8]
    plt.close(fig)
