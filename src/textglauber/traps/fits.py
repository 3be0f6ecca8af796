"""The fits of escape times (docs/science.md, chapter 5: the escape section): Kaplan-Meier medians and
restricted means of right-censored times with bootstrap intervals, the Student-t interval of an
uncensored mean, and the Arrhenius fit log tau = Delta_eff / T + c over temperatures.

Plain functions over arrays; the times come from :func:`textglauber.traps.escape.escape_times`.
The Arrhenius *fit* is :func:`arrhenius` here; the escape *section* that runs the cells and fits
is :mod:`textglauber.traps.escape_section`."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


# ----------------------------------------------------------------------------- Kaplan-Meier
def _km(times, observed):
    """Kaplan-Meier curves of each row of (R, m) times: (sorted times, events, survival after each),
    events before censorings at a tie (a unit censored at u is at risk at u)."""
    t, e = np.atleast_2d(np.asarray(times, float)), np.atleast_2d(np.asarray(observed, bool))
    order = np.lexsort((~e, t), axis=-1)
    t, e = np.take_along_axis(t, order, -1), np.take_along_axis(e, order, -1)
    m = t.shape[-1]
    return t, e, np.cumprod(1.0 - e / (m - np.arange(m)), -1)


def km_restricted_mean(times, observed):
    """The area under the Kaplan-Meier survival curve up to the largest time (per row of a 2-D
    array): the mean escape time when nothing is censored, a lower bound of it when the largest
    time is censored."""
    t, _, S = _km(times, observed)
    prev_t = np.concatenate([np.zeros((len(t), 1)), t[:, :-1]], 1)
    prev_S = np.concatenate([np.ones((len(t), 1)), S[:, :-1]], 1)
    area = (prev_S * (t - prev_t)).sum(-1)
    return float(area[0]) if np.ndim(times) == 1 else area


def km_medians(times, observed) -> np.ndarray:
    """Kaplan-Meier medians of each row (the first time the
    curve falls below 1/2, or the midpoint of the stretch where it sits at 1/2), inf where it never
    falls that low."""
    t, e, S = _km(times, observed)
    below = S < 0.5 - 1e-12
    at = (np.abs(S - 0.5) <= 1e-12) & e
    m = t.shape[-1]
    lt = np.where(below.any(-1), below.argmax(-1), m)
    eq = np.where(at.any(-1), at.argmax(-1), m)
    rows = np.arange(len(t))
    t_lt = np.where(lt < m, t[rows, np.minimum(lt, m - 1)], np.inf)
    t_eq = t[rows, np.minimum(eq, m - 1)]
    return np.where(eq < lt, np.where(lt < m, (t_eq + t_lt) / 2, np.inf), t_lt)


def summarize(times, censored, n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> dict:
    """Kaplan-Meier median and restricted mean of one cell's escape times with percentile bootstrap
    intervals (chains resampled; a replicate whose curve stays above 1/2 gives an infinite median)
    and the censored share. The mean is a lower bound where a time is censored."""
    t, e = np.asarray(times, float), ~np.asarray(censored, bool)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(t), (n_boot, len(t)))
    meds, means = km_medians(t[draws], e[draws]), km_restricted_mean(t[draws], e[draws])
    q = [(1 - level) / 2, 1 - (1 - level) / 2]
    med_q, mean_q = (np.quantile(x, q, method="inverted_cdf") for x in (meds, means))   # no inf - inf between
    return {"chains": len(t), "censored": float((~e).mean()), "median": _median(t, e),
            "median_low": float(med_q[0]), "median_high": float(med_q[1]), "mean": km_restricted_mean(t, e),
            "mean_low": float(mean_q[0]), "mean_high": float(mean_q[1]), "mean_is_lower_bound": bool((~e).any())}


def _median(t, e) -> float:
    return float(km_medians(t, e)[0])


# ----------------------------------------------------------------------------- the Arrhenius fit
@dataclass
class Arrhenius:
    """log tau = slope / T + intercept over the temperatures whose median escape time is finite."""

    slope: float
    slope_low: float
    slope_high: float
    intercept: float
    temperatures: int         # temperatures used in the fit
    chi2_p: float             # goodness of fit of the line against the medians' bootstrap errors
    span_decades: float       # log10 of the largest over the smallest median used

    def holds(self, alpha: float = 0.01) -> bool:
        """Whether a straight line in 1/T is consistent with the medians (goodness of fit p >= alpha)."""
        return self.temperatures >= 3 and self.chi2_p >= alpha


def _line(x, y):
    return np.linalg.lstsq(np.stack([x, np.ones_like(x)], 1), y, rcond=None)[0]


def arrhenius(temperatures, cells: list[tuple[np.ndarray, np.ndarray]], n_boot: int = 1000, seed: int = 0) -> Arrhenius:
    """Fit log(median escape time) against 1/T by least squares over the temperatures with a finite
    median; the slope's 95% interval from refits to bootstrap replicates (each temperature's chains
    resampled, each replicate fitted over the temperatures where all its medians are finite)."""
    T = np.asarray(temperatures, float)
    cells = [(np.asarray(t, float), ~np.asarray(c, bool)) for t, c in cells]       # (times, observed)
    meds = np.array([_median(t, e) for t, e in cells])
    use = np.isfinite(meds)
    if use.sum() < 2:
        return Arrhenius(math.nan, math.nan, math.nan, math.nan, int(use.sum()), math.nan, math.nan)
    x, y = 1 / T[use], np.log(meds[use])
    slope, icpt = _line(x, y)
    rng = np.random.default_rng(seed)
    boot = np.empty((n_boot, int(use.sum())))
    for j, (t, e) in enumerate(c for c, u in zip(cells, use) if u):
        d = rng.integers(0, len(t), (n_boot, len(t)))
        boot[:, j] = km_medians(t[d], e[d])
    fin = np.isfinite(boot).all(1)
    slopes = np.array([_line(x, np.log(b))[0] for b in boot[fin]])
    se = np.log(boot[fin]).std(0) if fin.sum() > 1 else np.full(len(x), math.nan)
    p = _chi2_p(y - (slope * x + icpt), se, len(x) - 2)
    lo, hi = (np.quantile(slopes, [0.025, 0.975]) if len(slopes) else (math.nan, math.nan))
    return Arrhenius(float(slope), float(lo), float(hi), float(icpt), int(use.sum()), p,
                     float(np.log10(meds[use].max() / meds[use].min())))


def coldest(temperatures, cells: list[tuple[np.ndarray, np.ndarray]], m: int = 3, n_boot: int = 1000,
            seed: int = 0) -> Arrhenius:
    """:func:`arrhenius` over the ``m`` coldest temperatures whose median escape time is finite (all
    of them where there are fewer). Where the slope over every temperature misses a predicted
    low-temperature exponent, this says whether the coldest medians alone still miss it (a
    disagreement where the law applies) or hold it (the hotter medians are off the asymptotic line).
    Its interval is wider, so holding the prediction there shows no disagreement, not agreement."""
    T = np.asarray(temperatures, float)
    meds = np.array([_median(np.asarray(t, float), ~np.asarray(c, bool)) for t, c in cells])
    keep = [i for i in np.argsort(T) if np.isfinite(meds[i])][:m]
    return arrhenius(T[keep], [cells[i] for i in keep], n_boot=n_boot, seed=seed)


def _chi2_p(resid, se, dof) -> float:
    from scipy.stats import chi2

    if dof < 1 or not np.all(se > 0):
        return math.nan
    return float(chi2.sf(float(((resid / se) ** 2).sum()), dof))


def mean_interval(times, level: float) -> tuple[float, float, float]:
    """(mean, low, high): the Student-t interval of the mean of uncensored escape times at ``level``.
    With hundreds of chains the mean is close to normal even at a Bonferroni level, and the interval
    costs no resampling (a percentile bootstrap at level 0.9997 would need tens of thousands of draws
    to read its tails)."""
    from scipy.stats import t as student

    t = np.asarray(times, float)
    half = student.ppf(1 - (1 - level) / 2, len(t) - 1) * t.std(ddof=1) / math.sqrt(len(t))
    return float(t.mean()), float(t.mean() - half), float(t.mean() + half)
