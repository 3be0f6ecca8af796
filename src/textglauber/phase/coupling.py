"""Coupled pairs on the exact two-token chain, with no model calls: their meeting times and the
"worst" pair of starts to couple from (docs/science.md, chapter 3)."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .. import exact
from .states import Scores, context_of


# -------------------------------------------------------------------------------------- coupling

def coupling_times_exact(scores: Scores, temperature: float, starts, budget: int,
                         rng: np.random.Generator) -> np.ndarray:
    """First meeting times of coupled pairs of the exact two-token chain (docs/science.md, chapter 3), no model calls.

    ``starts`` is an (m, 2) array of state indices. Each step both chains of a pair take the same
    uniformly drawn site, and their new bits come from one uniform u: bit = 1 exactly when
    u < p_i(1 | own context). On two points this quantile coupling is the maximal coupling of
    docs/science.md, chapter 3 (the bits differ with probability |p - q|, the TV distance; its joint law is the
    residual construction's). Pairs that met stay met (same site, same conditional, same u).
    Returns the meeting times as floats, 0 for pairs that start equal and inf for pairs still apart
    after ``budget`` steps."""
    n, p1 = scores.n, scores.p_one(temperature)
    starts = np.asarray(starts, np.int64)
    tau = np.where(starts[:, 0] == starts[:, 1], 0.0, np.inf)
    idx = np.flatnonzero(starts[:, 0] != starts[:, 1])
    x, y = starts[idx, 0], starts[idx, 1]
    for t in range(1, int(budget) + 1):
        if not len(idx):
            break
        i = rng.integers(n, size=len(idx))
        u = rng.random(len(idx))
        shift = n - 1 - i
        bx = (u < p1[i, context_of(x, i, n)]).astype(np.int64)
        by = (u < p1[i, context_of(y, i, n)]).astype(np.int64)
        x = (x & ~(np.int64(1) << shift)) | (bx << shift)
        y = (y & ~(np.int64(1) << shift)) | (by << shift)
        met = x == y
        tau[idx[met]] = t
        idx, x, y = idx[~met], x[~met], y[~met]
    return tau


def worst_pair(P, t: int | None = None, deepest: int = 8) -> tuple[int, int]:
    """The pair of starts to couple from as the "worst" pair.

    Candidates: all-zeros, all-ones and the ``deepest`` states with the largest holding
    probability. Each candidate's row of P^t is computed (t defaults to one sweep, n steps) and the
    pair whose rows are furthest apart in total variation is returned: the pair that realises
    max_{x,y} TV(P^t(x, .), P^t(y, .)) among the candidates, the quantity the coupling inequality
    bounds. Ties (to 1e-12) go to the earlier candidates, so all-zeros / all-ones wins unless another
    pair is strictly further apart. A heuristic: the true worst pair may lie outside the
    candidates, so a coupling bound from it is a diagnostic, not a certificate."""
    P = sp.csr_matrix(P)
    s = P.shape[0]
    n = int(round(np.log2(s)))
    cand = list(dict.fromkeys([0, s - 1, *map(int, exact.deepest_traps(P, min(deepest, s)))]))
    rows = np.zeros((len(cand), s))
    rows[np.arange(len(cand)), cand] = 1.0
    for _ in range(n if t is None else int(t)):
        rows = np.asarray((P.T @ rows.T).T)
    tv = np.triu(0.5 * np.abs(rows[:, None, :] - rows[None, :, :]).sum(-1), 1)
    a, b = np.argwhere(tv >= tv.max() - 1e-12)[0]          # ties (to rounding): the earlier pair
    return cand[int(a)], cand[int(b)]
