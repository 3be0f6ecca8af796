"""Escape from perfect traps (chapter 5's Arrhenius section): escape times by superbasin exits and
single jumps against exact exit times of enumerated chains (out to 1e99 steps), an engine run at
the wrong temperature caught by the same check, the event budget and the row memo, and the
section's protocol and words. The statistics themselves: test_fits.py."""
import math

import numpy as np
import pytest
import torch

from textglauber import exact, traps
from textglauber.pages import traps as traps_page
from textglauber.traps import escape, finder
from textglauber.profile import EscapeGrowth
from textglauber.traps.fits import mean_interval
from conftest import escape_section


@pytest.fixture(scope="module")
def enumerated(small_scorer):
    """The tiny MLM on three tokens at n = 4 (81 states), tabulated, with its argmax fixed points."""
    table = exact.TabulatedScorer(small_scorer, 4)
    return table


def _chain(table, T):
    return exact.glauber_kernel(table, table.n, T)


def _deepest(chain):
    return int(exact.deepest_traps(chain.kernel, 1)[0])


# k >= 2 at T <= 0.25: 6e6 to 1e82 expected moves a chain, which only the superbasin makes a few events
CASES = [(1, 0.5), (1, 0.05), (1, 0.02), (2, 1.0), (2, 0.25), (2, 0.05), (3, 2.0), (3, 0.1), (3, 0.02)]
LEVEL = 1 - 0.05 / (2 * len(CASES))      # Bonferroni over the mean and distribution tests: no miss with probability >= 0.95


@pytest.mark.parametrize("k,T", CASES)
def test_escape_times_match_the_exact_exit_time(enumerated, k, T):
    """Mean escape time out of the Hamming ball of radius k around the deepest state, from 400
    chains (superbasin exits and single jumps), against exact.exit_time on the same basin. At
    T = 0.05 the state holds 1.5e7 steps; at T = 0.02, 1e17, and its P(x, x) is 1.0 in float64, so
    1 - P(x, x) would say it never leaves; leaving its ball of radius 3 there takes 2e99 steps."""
    chain = _chain(enumerated, T)
    x = _deepest(chain)
    if T <= 0.02:
        assert chain.kernel[x, x] == 1.0                     # the trap that a subtraction would lose
    case = escape.check_against_exact(enumerated, chain, x, k, T, chains=400, seed=7, level=LEVEL, max_jumps=200)
    assert case["censored"] == 0
    assert case["inside"], case
    assert case["exact mean"] > 1e16 or T > 0.02             # deep where the float64 diagonal is 1


@pytest.mark.slow
@pytest.mark.parametrize("k,T", [(2, 1.0), (3, 2.0)])
def test_single_jumps_alone_match_too(enumerated, k, T):
    """With the superbasin kept to the trap alone (basin_cap=1) every move outside the trap is a
    single jump: the same exact mean, at 35 to 200 times the events."""
    chain = _chain(enumerated, T)
    x = _deepest(chain)
    want = escape.exact_escape(chain, x, k)
    run = escape.escape_times(enumerated, torch.as_tensor(chain.states[x]), k, T, 400, math.inf, seed=11,
                              basin_cap=1)
    mean, lo, hi = mean_interval(run.times, LEVEL)
    assert not run.censored.any()
    assert lo <= want["mean"] <= hi, (want, mean, lo, hi)
    assert run.moves.mean() > 3 and run.basin_states == 1


def test_the_superbasin_escapes_where_single_jumps_run_out(enumerated):
    """At T = 0.5 leaving the ball of radius 2 takes 2,460 moves on average: within 100 events every
    chain of single jumps is censored, while with the superbasin none is, in a few events each."""
    chain = _chain(enumerated, 0.5)
    x = _deepest(chain)
    assert escape.exact_escape(chain, x, 2)["moves"] > 2000
    start = torch.as_tensor(chain.states[x])
    single = escape.escape_times(enumerated, start, 2, 0.5, 50, math.inf, seed=2, max_jumps=100, basin_cap=1)
    basin = escape.escape_times(enumerated, start, 2, 0.5, 50, math.inf, seed=2, max_jumps=100)
    assert single.censored.mean() > 0.9 and (single.moves[single.censored] == 100).all()
    assert not basin.censored.any() and basin.moves.max() < 20 and basin.basin_states > 1


def test_a_wrong_engine_is_caught(enumerated):
    """The same check fails for chains whose holding times come from the wrong temperature (run at
    1.3 T and compared with the exact time at T), at each distance."""
    for k, T in [(1, 0.5), (2, 1.5)]:
        chain = _chain(enumerated, T)
        x = _deepest(chain)
        want = escape.exact_escape(chain, x, k)["mean"]
        run = escape.escape_times(enumerated, torch.as_tensor(chain.states[x]), k, 1.3 * T, 400, math.inf, seed=7)
        mean, lo, hi = mean_interval(run.times, LEVEL)
        assert not run.censored.any() and not lo <= want <= hi, (k, want, mean, lo, hi)
        test = escape.distribution_test(run.times, *escape.exact_exit_law(chain, x, k))
        assert test["chi2 p"] < 1 - LEVEL, (k, test)


def test_k1_is_the_one_state_holding_time(small_scorer):
    """holding_times (n rows of a state) equals finder.holding_steps (the exact conditionals),
    and the first escape (k = 1) of many chains has that mean; temperatures_for inverts it."""
    x = finder.coordinate_ascent(small_scorer, small_scorer.vocab.ids[torch.tensor([[0, 1, 2, 0, 1]])])[0]
    rows = escape.site_scores(small_scorer, x)
    Ts = [0.3, 0.6, 1.0]
    h = escape.holding_times(rows, x, small_scorer.vocab, Ts)
    want = np.concatenate([finder.holding_steps(small_scorer, x[None], T) for T in Ts])
    assert np.allclose(h, want, rtol=1e-9)
    back = escape.temperatures_for(rows, x, small_scorer.vocab, h)
    assert np.allclose(back, Ts, rtol=1e-6)
    run = escape.escape_times(small_scorer, x, 1, 0.6, 3000, math.inf, seed=3)
    t, c = run.times, run.censored
    assert not c.any()
    assert abs(t.mean() / h[1] - 1) < 4 / math.sqrt(3000)


def test_temperatures_reach_below_the_first_bracket_for_a_tiny_margin(small_scorer):
    """A state whose rows are scaled down 1000-fold (a margin 1000 times smaller) needs temperatures
    below 1e-3 for a holding time of 1e9 steps: they are found, and the holding time there is the
    target; a target no temperature reaches raises."""
    x = finder.coordinate_ascent(small_scorer, small_scorer.vocab.ids[torch.tensor([[0, 1, 2, 0, 1]])])[0]
    rows = escape.site_scores(small_scorer, x) / 1000
    Ts = escape.temperatures_for(rows, x, small_scorer.vocab, [1e3, 1e9])
    assert Ts[1] < 1e-3
    assert np.allclose(escape.holding_times(rows, x, small_scorer.vocab, Ts), [1e3, 1e9], rtol=1e-6)
    with pytest.raises(ValueError, match="out of reach"):
        escape.temperatures_for(rows, x, small_scorer.vocab, [0.5])


def test_margin_is_the_smallest_score_gap(small_scorer):
    from textglauber import margins

    x = finder.coordinate_ascent(small_scorer, small_scorer.vocab.ids[torch.tensor([[2, 1, 0, 0]])])[0]
    rows = escape.site_scores(small_scorer, x)
    assert escape.margin(rows, x, small_scorer.vocab) == pytest.approx(margins.score_gaps(small_scorer, x[None]).min(),
                                                                       rel=1e-5)


def test_a_state_the_chains_keep_returning_to_joins_the_superbasin(small_scorer):
    """With S grown to 10 members, a state come to twice waits alone (a quarter of S is 2); a state
    that the chains keep coming back to joins S by its fourth arrival, not never (the stand-in
    models' exactness cases at T = 0.05 once ran out of events that way: 100 exits and 100 jumps a
    chain, between S and one state outside it)."""
    cell = escape._Cell(small_scorer, (5, 6, 7, 8), 4, 1.0, 1e9, 256, 2)
    for x in [(5, 6, 7, j) for j in range(9, 18)]:
        cell.arrive(x)
        cell.arrive(x)
    assert len(cell.members) == 10 and not cell.pending
    lone = (5, 6, 9, 9)
    for arrivals in range(1, 5):
        cell.arrive(lone)
        assert (lone in cell.index) == (arrivals == 4), arrivals
        assert cell.pending == ([lone] if arrivals in (2, 3) else [])


def test_the_event_budget_censors_and_the_row_memo_changes_no_draw(small_scorer):
    """A chain stopped by the event budget is censored at the step of its last event, with no more
    events than the budget; a RowMemo gives the same times and asks the model for fewer rows across
    temperatures; the same seed gives the same times."""
    x = finder.coordinate_ascent(small_scorer, small_scorer.vocab.ids[torch.tensor([[0, 1, 2, 0, 1, 2]])])[0]
    memo = escape.RowMemo(small_scorer)
    runs = [escape.escape_times(memo, x, 3, T, 20, 1e9, seed=1, max_jumps=3) for T in (0.4, 0.6)]
    plain = escape.escape_times(small_scorer, x, 3, 0.6, 20, 1e9, seed=1, max_jumps=3)
    again = escape.escape_times(small_scorer, x, 3, 0.6, 20, 1e9, seed=1, max_jumps=3)
    assert np.array_equal(runs[1].times, plain.times) and np.array_equal(runs[1].censored, plain.censored)
    assert np.array_equal(again.times, plain.times)
    assert memo.rows < sum(r.calls * len(x) for r in runs)
    for r in runs:
        assert (r.moves <= 3).all() and (r.moves[r.censored & (r.times < 1e9)] == 3).all()
        assert (r.exits <= r.moves).all()


def test_bad_escape_distance():
    with pytest.raises(ValueError, match="k = 0"):
        escape.escape_times(None, torch.tensor([1, 2, 3]), 0, 1.0, 2, 10, 0)


def test_the_section_protocol_sets_each_traps_holding_times_and_counts_its_cost(full_scorer):
    """measure_model on the tiny MLM: each trap's temperatures put its exact holding time (checked
    by finder.holding_steps, whose rows come from other batches: float32 scores differ in the last digits,
    and 1/T amplifies that to about 1e-3 in the holding time) at the log-spaced targets; every cell reports its rows and moves."""
    p = escape_section(seq_len=6, traps=2, candidates=2, chains=6, distances=[1, 2], holding_decades=[2.0, 4.0],
                       temperatures=3, horizon=1e8, max_moves=30)
    cells, fits, pre = traps.measure_model(full_scorer, "tiny", p, torch.Generator().manual_seed(0), str)
    assert len(fits) == 2 * cells.trap.nunique() and len(cells) == 3 * len(fits) and len(pre) == cells.trap.nunique()
    k1 = fits[fits.k == 1]
    assert np.allclose(k1.predicted_exponent, k1.margin, atol=1e-6) and (fits.medians <= 3).all()
    assert (fits.trap_ids.str.split().str.len() == 6).all()
    assert (fits.path.str.count(":") >= fits.k).all() and (k1.path.str.count(":") == 1).all()
    assert (pre.temperature == 1.0).all() and (pre.k == 2).all()
    for (j, T), g in cells.groupby(["trap", "temperature"]):
        x = torch.tensor(eval(g.text.iloc[0].replace("tensor", "")))
        assert finder.holding_steps(full_scorer, x[None], T)[0] == pytest.approx(g["one-state holding time"].iloc[0],
                                                                                   rel=5e-3)
    assert sorted(np.round(np.log10(cells[cells.trap == 0]["one-state holding time"].unique()), 6)) == [2, 3, 4]
    # the barrier searches that choose the traps run first and score the rows the cells then share
    assert (cells.moves > 0).all() and cells["rows scored"].sum() + fits["search rows"].sum() > 0
    assert (fits.nontrivial == [traps.nontrivial(e, m) for e, m in zip(fits.exponent, fits.margin)]).all()
    assert not fits[fits.k == 1].nontrivial.any()


def test_headline_counts_by_hand():
    """Fits with fewer than three medians enter no range or count (the 2-median fit of trap 1 at
    k = 2 has a slope, and it is left out); k = 1 is set against the margin, which is V_1 there, and
    k > 1 against the predicted exponent (the wells' value where the case says several wells)."""
    import pandas as pd

    cells = pd.DataFrame({"model": ["a"] * 4, "trap": [0, 0, 1, 1], "median": [10.0, 1e7, np.inf, 100.0]})
    fits = pd.DataFrame({"model": "a", "k": [1, 2, 1, 2, 3], "slope": [2.0, np.nan, 3.0, 8.0, 5.0], "margin": [2.0, 2.0, 2.5, 2.0, 2.0],
                         "slope_low": [1.9, np.nan, 2.8, 7.0, 4.5], "slope_high": [2.1, np.nan, 3.2, 9.0, 5.5],
                         "medians": [5, 1, 5, 2, 4], "exponent": [2.0, 3.0, 2.5, 8.0, 5.2],
                         "predicted_exponent": [2.0, 3.0, 2.5, 8.0, 4.0],
                         "exponent case": ["one well", "one well", "one well", "one well", "several wells"],
                         "fit p": [0.5, np.nan, 0.001, np.nan, 0.2], "line holds": [True, False, False, False, True],
                         "one-state slope": [2.1, 2.1, 2.5, 2.5, 2.5],
                         "cold slope": [2.0, np.nan, 2.9, np.nan, 5.0], "cold slope_low": [1.8, np.nan, 2.4, np.nan, 4.0],
                         "cold slope_high": [2.2, np.nan, 3.4, np.nan, 6.0]})
    h = traps.escape_counts(cells, fits)
    assert (h["finite"], h["lowest"], h["highest"], h["tested"], h["holds"], h["too_few"]) == (3, 10.0, 1e7, 3, 2, 2)
    assert h["k1_ratio"] == [1.0, 1.2] and h["deeper_ratio"] == [pytest.approx(5 / 5.2), pytest.approx(5 / 5.2)]
    assert h["k1_against"] == {"fits": 2, "slope above": 1, "inside": 1, "slope below": 0, "cold inside": 1}
    assert h["deeper_against"] == {"fits": 1, "slope above": 0, "inside": 1, "slope below": 0, "cold inside": 0}
    assert h["several_wells"] == 1 and h["unfinished"] == 0
    words = traps_page.summary(h)
    assert "6.0 orders of magnitude" in words and "in 2 of the other 3" in words and "2 have fewer than 3 medians" in words
    assert "the margin lies inside the slope's 95% interval in 1 of 2 fits, below it in 1, above it in 0" in words
    assert "checks the sampler" in words and "saddle" not in words and "energy" not in words
    assert "3 coldest medians alone holds it in 1 of 1, so the miss comes from the hotter temperatures" in words
    still = traps_page.summary(traps.escape_counts(cells, fits.assign(**{"cold slope_low": 2.6})))
    assert "holds it in 0 of 1, and in 1 the miss remains at the coldest temperatures" in still
    assert h["one_state_ratio"] == [1.0, pytest.approx(1.05)] and "up to 5% above its limit" in words
    close = traps_page.summary(traps.escape_counts(cells, fits.assign(**{"one-state slope": fits.margin * 1.003})))
    assert "already close to its limit" in close and "not yet asymptotic" not in close
    table = traps_page.fit_table(fits.assign(trap=0, path=""))
    assert list(table["slope (95% interval)"])[1] == "too few (1 medians)" and np.isnan(table["slope / predicted"][3])
    assert list(table["3 coldest (95% interval)"]) == ["2.00 [1.80, 2.20]", "", "2.90 [2.40, 3.40]", "", "5.00 [4.00, 6.00]"]


@pytest.mark.parametrize("k,T,cap", [(2, 0.25, 256), (3, 0.1, 256), (3, 1.0, 4), (3, 0.1, 4)])
def test_the_whole_distribution_matches_the_exact_law(enumerated, k, T, cap):
    """The chi-square test of 400 chains' escape times against the exact law (bins at its deciles)
    passes, with the usual cap and with the superbasin capped at 4 states, which it fills; the
    simulated median is within 20% of the exact one (400 chains: about 7% standard error)."""
    chain = _chain(enumerated, T)
    x = _deepest(chain)
    case = escape.check_against_exact(enumerated, chain, x, k, T, chains=400, seed=5, level=LEVEL, max_jumps=2000,
                                      basin_cap=cap)
    assert case["distribution passes"] and case["inside"], case
    assert case["chi2 dof"] >= 5
    assert case["median"] == pytest.approx(case["exact median"], rel=0.2)
    assert case["cap reached"] == (cap == 4)


def test_exit_cdf_and_quantile_against_matrix_powers(enumerated):
    """The doubling tables' CDF and quantiles against P(exit by t) from plain powers of the restricted
    matrix, at T = 1 (escape within tens of steps)."""
    from textglauber.engine import superbasin

    chain = _chain(enumerated, 1.0)
    x = _deepest(chain)
    law, at = escape.exact_exit_law(chain, x, 2)
    members = escape.within_escape_distance(chain.states, x, 2)
    Q = np.asarray(chain.kernel)[np.ix_(members, members)]
    row = np.eye(len(Q))[at]
    for t in range(1, 60):
        row = row @ Q
        assert superbasin.exit_cdf(law, at, t) == pytest.approx(1 - row.sum(), abs=1e-12)
    for q in (0.1, 0.5, 0.9):
        t = superbasin.exit_quantile(law, at, q)
        assert superbasin.exit_cdf(law, at, t) >= q > superbasin.exit_cdf(law, at, t - 1)


def test_growth_runs_per_length_and_says_what_it_found(full_scorer):
    """growth on the tiny MLM: one row per length with k = ceil(n/4), V_k at least the trap's margin
    (a path out starts with a move that costs at least the margin), rows counted, chains only at the
    check lengths; the words name a lower bound as one and compute the growth from the table."""
    import pandas as pd

    g = EscapeGrowth(models=[{"name": "tiny-mlm"}], lengths=[6, 9], traps=2, max_states=60, check_lengths=[6],
                     temperature=0.5, chains=6)
    gr = traps.escape_growth(full_scorer, "tiny", g, torch.Generator().manual_seed(1), horizon=1e12, max_moves=50)
    assert list(gr.n) == [6, 9] and list(gr.k) == [2, 3]
    assert (gr.predicted_exponent >= gr.margin - 1e-9).all() and (gr.rows_scored >= 0).all()
    assert np.isfinite(gr["median"].iloc[0]) or gr.censored.iloc[0] > 0.5
    assert np.isnan(gr["median"].iloc[1])
    hand = pd.DataFrame({"model": ["m"] * 3, "n": [8, 16, 32], "k": [2, 4, 8], "predicted_exponent": [1.0, 2.0, 3.5],
                         "exponent": [1.0, 2.0, np.nan], "exponent case": ["one well", "one well", "unfinished"],
                         "rows_scored": [10, 200, 9000], "temperature": [0.5] * 3,
                         "median": [100.0, 1000.0, np.nan]})
    words = traps_page.growth_sentence(hand)
    assert "n = 32: at least 3.5" in words and "scored 10 to 9000 rows" in words
    assert "from 1 to 2, a factor of 2.00 against 2.0 in n" in words
    # issue 63: medians at one temperature decide nothing about length; the words no longer compare them
    assert "a change of" not in words and "median" not in words
