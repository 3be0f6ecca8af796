"""Bootstrap intervals, with their own seeded generator."""
from __future__ import annotations

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
