"""The survival statistics of escape times: Kaplan-Meier medians and means against hand counts and
a plain Kaplan-Meier loop, the t interval's coverage on skewed data, and the Arrhenius fit on synthetic data
with a known slope and on data it was not made for."""
import math

import numpy as np
import pytest

from textglauber.traps import fits


def test_the_mean_interval_covers_as_often_as_it_says_and_can_fail():
    """Exponential escape times (skewed: data the normal interval was not made for), 400 chains, at
    the Bonferroni level of 36 cases at 99% (0.99972): over 3,000 data sets the t interval misses
    the true mean at most 5 times (a miss rate of 0.028% expects 0.8; this project's run: 1), and a
    mean 35% off (13.5 or 6.5 against 10) lies outside it in more than 95% of them."""
    rng = np.random.default_rng(0)
    level = 1 - 0.01 / 36
    intervals = [fits.mean_interval(d, level)[1:] for d in rng.exponential(10.0, (3000, 400))]
    assert sum(not lo <= 10.0 <= hi for lo, hi in intervals) <= 5
    for wrong in (13.5, 6.5):
        assert sum(not lo <= wrong <= hi for lo, hi in intervals) > 0.95 * 3000


def test_km_restricted_mean():
    t = np.array([3.0, 1.0, 7.0, 5.0])
    assert fits.km_restricted_mean(t, np.ones(4, bool)) == pytest.approx(4.0)
    # censored at 7: a lower bound of the mean, the area under the curve up to 7
    assert fits.km_restricted_mean(t, np.array([1, 1, 0, 1], bool)) == pytest.approx(4.0)
    assert fits.km_restricted_mean([2.0, 2.0], [False, False]) == pytest.approx(2.0)


def _synthetic(log_tau, temperatures, chains=60, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.exponential(math.exp(log_tau(T)), chains), np.zeros(chains, bool)) for T in temperatures]


def test_arrhenius_recovers_a_known_slope_over_many_decades():
    """Exponential escape times with mean exp(4 / T + 1) at 6 temperatures (medians from about 10^3
    to 10^10): the slope's interval holds 4, and the line is not rejected."""
    Ts = 4 / np.linspace(6, 22, 6)
    fit = fits.arrhenius(Ts, _synthetic(lambda T: 4 / T + 1, Ts), n_boot=500)
    assert fit.slope_low <= 4 <= fit.slope_high and fit.slope_high - fit.slope_low < 0.5
    assert fit.span_decades > 6 and fit.holds()


def test_arrhenius_rejects_a_curved_law():
    """Data it was not made for: log tau = (1/T)^2 / 3 curves in 1/T; the goodness of fit fails."""
    Ts = 1 / np.linspace(1.5, 7, 6)
    fit = fits.arrhenius(Ts, _synthetic(lambda T: (1 / T) ** 2 / 3, Ts), n_boot=500)
    assert not fit.holds()


def test_the_coldest_fit_tells_a_curved_hot_end_from_a_wrong_exponent():
    """Power: log tau = 4 / T - log(1 + 10^4 e^(-0.8 / T)) bends away from the line 4 / T at the hot
    end only (by 4.4 in log tau at 1/T = 6, by 0.0002 at 22). Over 20 data sets the fit over every
    temperature misses 4 in all, and the fit over the three coldest holds it in at least 17 (a 95%
    interval expects 19; this project's run: 18). Safety: a clean line of the wrong slope, 4.4 / T,
    is missed by both fits in all 20."""
    Ts = 1 / np.linspace(6, 22, 6)
    held = 0
    for seed in range(20):
        curved = _synthetic(lambda T: 4 / T - math.log1p(1e4 * math.exp(-0.8 / T)), Ts, seed=seed)
        full, cold = fits.arrhenius(Ts, curved, n_boot=300), fits.coldest(Ts, curved, m=3, n_boot=300)
        assert not full.slope_low <= 4 <= full.slope_high and cold.temperatures == 3
        held += cold.slope_low <= 4 <= cold.slope_high
        wrong = _synthetic(lambda T: 4.4 / T + 1, Ts, seed=seed)
        for fit in (fits.arrhenius(Ts, wrong, n_boot=300), fits.coldest(Ts, wrong, m=3, n_boot=300)):
            assert fit.slope_low > 4
    assert held >= 17


def test_the_coldest_fit_skips_censored_temperatures():
    """The coldest temperature's chains never reached their median: the three coldest with a
    finite median are the next three."""
    Ts = 1 / np.linspace(6, 22, 6)
    cells = _synthetic(lambda T: 4 / T, Ts)
    cells[5] = (np.full(60, 1e3), np.ones(60, bool))
    cold = fits.coldest(Ts, cells, m=3, n_boot=200)
    assert cold.temperatures == 3
    assert cold.slope == pytest.approx(fits.arrhenius(Ts[2:5], cells[2:5], n_boot=200).slope)


def test_censored_medians_are_left_out_of_the_fit():
    Ts = [0.5, 0.4, 0.3]
    cells = _synthetic(lambda T: 2 / T, Ts)
    cells[2] = (np.full(60, 1e3), np.ones(60, bool))
    fit = fits.arrhenius(Ts, cells, n_boot=200)
    assert fit.temperatures == 2


def km_median_loop(times, observed) -> float:
    """A plain loop over the event times, the reference for the vectorized medians: the Kaplan-Meier median of right-censored times (``observed`` False = censored at that time).

    The smallest time at which the survival curve drops to 1/2 or below; where it sits exactly at
    1/2 on a flat stretch, the midpoint of that stretch (the usual convention, which makes it the
    sample median when nothing is censored). NaN when the curve never gets to 1/2."""
    t = np.asarray(times, float)
    e = np.asarray(observed, bool)
    s = 1.0
    event_times = np.unique(t[e])
    for k, u in enumerate(event_times):
        at_risk = np.sum(t >= u)
        s *= 1.0 - np.sum((t == u) & e) / at_risk
        if s < 0.5 - 1e-12:
            return float(u)
        if abs(s - 0.5) <= 1e-12:
            later = event_times[k + 1:]
            return float((u + later[0]) / 2) if len(later) else float("nan")
    return float("nan")



def test_km_medians_agree_with_a_plain_loop():
    """The vectorized medians against the plain loop above, on censored data with ties."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        m = int(rng.integers(1, 12))
        t = rng.integers(1, 6, m).astype(float)
        e = rng.random(m) < 0.7
        want = km_median_loop(t, e)
        got = fits.km_medians(t[None], e[None])[0]
        assert (math.isnan(want) and got == math.inf) or got == want, (t, e, want, got)


def test_the_slope_interval_covers_the_true_slope_about_as_often_as_it_says():
    """Coverage of the 95% slope interval over 100 synthetic data sets of 30 exponential escape
    times at 5 temperatures (medians over about 6 decades): 94 of 100 in this project's run; at least
    88 is what a 95% interval gives but for a one-in-a-hundred chance."""
    Ts, slope = 1 / np.linspace(37, 142, 5), 0.1318
    done = [fits.arrhenius(Ts, _synthetic(lambda T: slope / T + 0.5, Ts, chains=30, seed=r), n_boot=300, seed=r)
            for r in range(100)]
    assert sum(f.slope_low <= slope <= f.slope_high for f in done) >= 88
