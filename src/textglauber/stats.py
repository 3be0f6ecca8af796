"""Bootstrap intervals, with their own seeded generator, and the interval of a censored geometric mean."""
from __future__ import annotations

import math

import numpy as np


def bootstrap_ci(values, stat=np.mean, n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat`` over ``values`` (NaNs dropped)."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if len(v) == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(v), size=(n_boot, len(v)))
    boots = np.array([stat(v[d]) for d in draws])
    lo, hi = np.quantile(boots, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def cluster_bootstrap_ci(values, clusters, n_boot: int = 2000, level: float = 0.95,
                         seed: int = 0) -> tuple[float, float]:
    """Percentile interval of the mean of ``values`` when they come in correlated groups.

    Whole clusters (e.g. all rectangles cut from one base passage) are drawn with replacement,
    and each draw's statistic is the mean over every value of the drawn clusters, so the
    interval carries the between-cluster variance that resampling single values ignores.
    NaNs are dropped. With one value per cluster this is :func:`bootstrap_ci` of the mean.
    """
    v = np.asarray(values, dtype=float)
    c = np.asarray(clusters)
    if len(v) != len(c):
        raise ValueError("values and clusters must have the same length")
    keep = ~np.isnan(v)
    v, c = v[keep], c[keep]
    if len(v) == 0:
        return (float("nan"), float("nan"))
    _, label = np.unique(c, return_inverse=True)
    sums = np.bincount(label, weights=v)
    counts = np.bincount(label).astype(float)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(sums), size=(n_boot, len(sums)))
    boots = sums[draws].sum(1) / counts[draws].sum(1)
    lo, hi = np.quantile(boots, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def geometric_mean_ci(held, censored, level: float = 0.95) -> tuple[float, float, float]:
    """The mean 1/q of a geometric holding law (P(H > k) = (1 - q)^k), estimated from holds seen
    under censoring, with an interval.

    ``held``: the steps each unit was seen in its state (its holding time where it left, the budget
    where ``censored``). With d exits in E = sum(held) steps the likelihood is q^d (1 - q)^(E - d),
    so the estimate is E / d (inf when nothing left) and the interval inverts the Clopper-Pearson
    bounds on q for d successes in E trials (its upper end is inf when nothing left)."""
    from scipy.stats import beta

    held = np.asarray(held, dtype=float)
    censored = np.asarray(censored, dtype=bool)
    if held.shape != censored.shape or len(held) == 0 or (held < 1).any():
        raise ValueError("one hold of at least one step per unit, and one censoring flag per hold")
    a = 1.0 - level
    d, e = int((~censored).sum()), float(held.sum())
    q_lo = float(beta.ppf(a / 2, d, e - d + 1)) if d > 0 else 0.0
    q_hi = float(beta.ppf(1 - a / 2, d + 1, e - d)) if d < e else 1.0
    return (e / d if d else math.inf), 1.0 / q_hi, (1.0 / q_lo if q_lo > 0 else math.inf)
