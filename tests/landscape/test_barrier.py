"""The barrier verdict on synthetic Gamma(n) with a known answer, named and not named."""
import numpy as np
import pandas as pd
import pytest

from textglauber.landscape.growth import barrier_verdict

NS = np.arange(3, 21)


@pytest.mark.parametrize("truth", [lambda n: 0.3 * n, lambda n: 0.05 * n ** 2, lambda n: np.log(n) ** 2 + 0.1 * n])
def test_growth_is_named(truth):
    assert barrier_verdict(NS, truth(NS))[0] == "grows"


@pytest.mark.parametrize("truth", [lambda n: 1.2 + 0 * n, lambda n: np.minimum(n, 8) * 0.4])
def test_levelling_off_is_bounded(truth):
    assert barrier_verdict(NS, truth(NS))[0] == "bounded"


def test_a_slow_rise_is_neither_named_growth_nor_bounded():
    assert barrier_verdict(NS, 2.0 - 1.0 / NS)[0] == "cannot tell"


def test_parity_is_named_as_a_pattern():
    g = np.where(NS % 2 == 1, 0.35, 0.2 * NS)
    v, words = barrier_verdict(NS, g)
    assert v == "grows at even n only" and "parity" in words
    g = np.where(NS % 2 == 1, 0.4, np.nan)              # even n: one well, no barrier
    assert barrier_verdict(NS, g)[0] == "bounded"         # odd flat, even zero: nothing grows


def test_noise_around_a_constant_is_never_growth():
    rng = np.random.default_rng(0)
    for _ in range(200):
        g = 1.5 * np.exp(0.2 * rng.standard_normal(len(NS)))
        assert barrier_verdict(NS, g)[0] != "grows"


def test_an_early_spike_then_lower_values_is_not_growth():
    g = np.array([0, 0, 0, 0, 2.41, 0, 0, 0.76, 0.51])   # one length's second well, then shallow ones
    assert barrier_verdict(np.arange(3, 12), g)[0] == "bounded"


def test_a_single_spike_is_not_growth():
    g = np.full(len(NS), 1.2)
    g[5] = 4.5
    assert barrier_verdict(NS, g)[0] == "bounded"
    g = np.full(len(NS), 1.2)
    g[-1] = 4.5                                           # a spike at the last length: a new height
    assert barrier_verdict(NS, g)[0] == "cannot tell"


def test_a_barrier_that_turns_down_at_the_last_length_is_not_named_growth():
    """The English MLM's first passage (offline, 2026-12-01): no barrier to n = 6, then 0.10, 0.86, 1.69
    and 1.45 at n = 7, 8, 14 and 20. It rose, but fell at the last length: it may be levelling off,
    so the rule cannot tell; the same lengths still rising at n = 20 are growth."""
    ns = [3, 4, 5, 6, 7, 8, 14, 20]
    g = [np.nan] * 4 + [0.101, 0.859, 1.69, 1.45]
    assert barrier_verdict(ns, g)[0] == "cannot tell"
    assert barrier_verdict(ns, g[:-1] + [1.90])[0] == "grows"


def test_too_few_lengths_cannot_tell():
    assert barrier_verdict([3, 4], [1.0, 2.0])[0] == "cannot tell"


def test_no_second_well_anywhere_is_said_in_words():
    v, words = barrier_verdict(NS, np.full(len(NS), np.nan))
    assert v == "bounded" and "no length" in words and "second well" in words


LISTED = np.array([3, 4, 5, 6, 7, 8, 9, 10, 14, 20])


def bracketed(truth, width):
    """Gamma known exactly to n = 10, and at 14 and 20 only within a bracket around the truth."""
    g = truth(LISTED).astype(float)
    lo, hi = g.copy(), g.copy()
    lo[-2:], hi[-2:] = g[-2:] * (1 - width), g[-2:] * (1 + width)
    return np.where(LISTED > 10, np.inf, g), lo, hi


def test_a_narrow_bracket_decides_and_a_wide_one_does_not():
    """Growth seen only through the searched lengths' brackets is named when every value in the
    brackets grows, and not when the brackets reach back to the earlier heights."""
    g, lo, hi = bracketed(lambda n: 0.3 * n, 0.1)
    assert barrier_verdict(LISTED, g, lo, hi)[0] == "grows"
    g, lo, hi = bracketed(lambda n: 0.3 * n, 0.9)
    assert barrier_verdict(LISTED, g, lo, hi)[0] == "cannot tell"
    g, lo, hi = bracketed(lambda n: 1.2 + 0 * n, 0.0)
    assert barrier_verdict(LISTED, g, lo, hi)[0] == "bounded"
    g, lo, hi = bracketed(lambda n: 1.2 + 0 * n, 0.3)             # could be higher than anything listed
    v, words = barrier_verdict(LISTED, g, lo, hi)
    assert v == "cannot tell" and "brackets" in words


def test_an_unsettled_length_without_a_bracket_decides_nothing():
    g = np.where(LISTED > 10, np.inf, 0.3 * LISTED)
    assert barrier_verdict(LISTED, g)[0] == "cannot tell"
    nan = np.full(len(LISTED), np.nan)
    assert barrier_verdict(LISTED, g, nan, nan)[0] == "cannot tell"


def test_an_unfinished_search_with_one_well_is_not_read_as_no_barrier():
    """The table's verdicts: a searched length where one well was found but the search ran out is not
    settled, so a flat listed range followed by it is not called bounded; finished, it is."""
    from textglauber.landscape import tables as land
    rows = [{"model": "m", "design": "global", "n": n, "gamma": g, "gamma low": g, "gamma high": g,
             "complete": n <= 9, "finished": True, "wells": 2} for n, g in zip(range(3, 10), [1.2] * 7)]
    rows.append({"model": "m", "design": "global", "n": 20, "gamma": np.nan, "gamma low": np.nan,
                 "gamma high": np.nan, "complete": False, "finished": False, "wells": 1})
    t = pd.DataFrame(rows)
    assert land.verdicts(t).barrier.iloc[0] == "cannot tell"
    t.loc[t.n == 20, "finished"] = True
    assert land.verdicts(t).barrier.iloc[0] == "bounded"
