"""The product chain that matches a two-token chain's single-site stationary marginals, and the
ratio of the two chains' mixing times over n.

At high temperature a two-token chain behaves like independent sites, and then "t_rel / n stays
bounded" holds almost by construction. The honest comparison is with the product chain: pick a
site uniformly and redraw its bit from its own stationary marginal mu_i, ignoring the other sites.
Its mixing time is exact and cheap (:func:`product_tmix`), and the ratio exact t_mix / product
t_mix over n says whether the interactions slow mixing down (:func:`ratio_verdict`).

The product chain after t steps, from start x:

- U, the set of sites never picked, has a law that depends on |U| only (the sites are
  exchangeable), so P(U = A) = P(|U| = |A|) / C(n, |A|); the number of distinct sites picked is a
  Markov chain k -> k + 1 with probability (n - k) / n (:func:`untouched_law`);
- the untouched sites hold their start bits and the touched ones are independent Bernoulli(mu_i).

So with m_i = mu_i(x_i), the stationary mass of site i's start bit, and v_u = P(|U| = u) / C(n, u),
a target y that agrees with x on the sites S has

    P_t(x, y) = prod_{i not in S} (1 - m_i) * sum_u v_u [z^u] prod_{i in S} (m_i + z),

and the product law gives it pi(y) = the same with z = 0. Splitting the sites into two halves turns
the sum over all 2^n targets into one product of two small tables (:func:`product_distance`).
"""
from __future__ import annotations

import numpy as np
from scipy.special import comb

RATIO_BAND = 1.5
"""Largest max / min of the ratio over n still called "bounded"."""

RATIO_GROW = 1.5
"""Smallest last / first rise of a nearly monotone ratio called "grows"."""

RATIO_SUSTAINED = 1.2
"""A nearly monotone rise of at least this (last / first) is "sustained": such a ratio is never
called "bounded", even inside the band."""

RATIO_SLACK = 0.1
""""Nearly monotone": no value falls more than this fraction below the largest value before it
(integer mixing times make the ratio jitter by about 1 / t_mix)."""


# ------------------------------------------------------------------------------------- marginals

def marginals(pi: np.ndarray, n: int) -> np.ndarray:
    """mu_i = P_pi(site i holds bit 1), for each of the n sites, from a law over the 2^n states.

    Site i is bit n - 1 - i of the state index (site 0 the most significant, as in
    :func:`textglauber.phase.site_bits`), so reshaping pi to (2^i, 2, 2^(n-1-i)) puts site i's
    bit on the middle axis: no (2^n, n) table of bits is built. The law is renormalised first, and
    a share that rounding puts a hair outside [0, 1] is clipped back."""
    pi = np.asarray(pi, np.float64)
    if pi.shape != (2 ** n,):
        raise ValueError(f"pi must have 2^n = {2 ** n} entries, got shape {pi.shape}")
    total = pi.sum()
    mu = np.array([pi.reshape(2 ** i, 2, 2 ** (n - 1 - i))[:, 1, :].sum() / total for i in range(n)])
    return np.clip(mu, 0.0, 1.0)


# ------------------------------------------------------------------------------- untouched sites

def untouched_law(n: int, t: int) -> np.ndarray:
    """P(|U| = u) for u = 0..n, with U the sites never picked in t uniform picks among n.

    The number k of distinct sites picked moves k -> k + 1 with probability (n - k) / n and stays
    otherwise; its law after t picks is the first row of that (n + 1)-state kernel to the power t,
    by repeated squaring. Every entry is non-negative, so nothing cancels, and t may be 2^40."""
    if t < 0:
        raise ValueError("t must be non-negative")
    k = np.arange(n + 1)
    K = np.diag(k / n)
    K[k[:-1], k[:-1] + 1] = (n - k[:-1]) / n
    law = np.zeros(n + 1)
    law[0] = 1.0
    power, left = K, int(t)
    while left:
        if left & 1:
            law = law @ power
        left >>= 1
        if left:
            power = power @ power
    return law[::-1].copy()                     # picked k = n - u


# ------------------------------------------------------------------------------------- distance

def _agreement_table(m: np.ndarray) -> np.ndarray:
    """For a group of g sites with start-bit masses m: one row per pattern of agreement with the
    start (2^g rows, the group's first site the most significant bit, 1 = agrees), holding the
    polynomial prod_{disagree} (1 - m_i) prod_{agree} (m_i + z) by its coefficients of z^0..z^g."""
    table = np.zeros((1, len(m) + 1))
    table[0, 0] = 1.0
    for mi in m:
        agree = table * mi
        agree[:, 1:] += table[:, :-1]
        table = np.concatenate([table * (1.0 - mi), agree])
    return table


def product_distance(mu, start_bits, t: int) -> float:
    """Exact TV distance from the product law prod_i Bernoulli(mu_i) of the product chain's law
    after t steps from ``start_bits`` (module docstring for the formula).

    The sites are split into a first and a second half; each half's agreement table
    (:func:`_agreement_table`) has 2^(n/2) rows, and P_t over all 2^n targets is
    A v B^T with v the Hankel matrix v[a, b] = P(|U| = a + b) / C(n, a + b). The stationary
    masses are the products of the two tables' constant terms."""
    mu = np.asarray(mu, np.float64)
    start = np.asarray(start_bits, np.int64)
    n = len(mu)
    if start.shape != (n,):
        raise ValueError(f"start_bits must have {n} entries")
    m = np.where(start == 1, mu, 1.0 - mu)
    v = untouched_law(n, t) / comb(n, np.arange(n + 1))
    h = n // 2
    A, B = _agreement_table(m[:h]), _agreement_table(m[h:])
    hankel = v[np.arange(h + 1)[:, None] + np.arange(n - h + 1)[None, :]]
    left, right = A @ hankel, B.T
    total = 0.0
    for lo in range(0, len(A), 1024):
        pt = left[lo:lo + 1024] @ right
        pi = np.outer(A[lo:lo + 1024, 0], B[:, 0])
        total += np.abs(pt - pi).sum()
    return 0.5 * float(total)


def worst_start(mu) -> np.ndarray:
    """The start farthest from the product law at every t: each site on its less likely bit.

    From start x, the law after t steps is delta_{x_i} (x) a + pi_i (x) b on (site i, the others),
    with a, b sub-probability laws of the other sites that do not involve site i's start or mu_i.
    With m = pi_i(x_i) and r the other sites' product law, 2 TV = ||a + m (b - r)||_1 +
    (1 - m) ||b - r||_1, a function of m whose slope is at most ||b - r||_1 - ||b - r||_1 = 0: TV
    does not decrease as m falls. So putting each site, one at a time, on the bit with the smaller
    marginal never lowers TV, and this start attains max over all 2^n starts (tested by brute force)."""
    return (np.asarray(mu, np.float64) < 0.5).astype(np.int64)


def product_tmix(mu, eps: float = 0.25, t_max: int = 2 ** 40) -> int:
    """Exact t_mix(eps) of the product chain with marginals ``mu``: the least t >= 1 with
    product_distance(mu, worst_start(mu), t) <= eps.

    d(t) is non-increasing, so doubling finds a t that mixes and bisection the first one. Every
    site picked means exact stationarity, so t_mix is below a coupon collector's quantile (about
    n (log n + log(1 / eps))) whatever mu is; ``t_max`` only guards against misuse."""
    mu = np.asarray(mu, np.float64)
    if not ((mu >= 0) & (mu <= 1)).all():
        raise ValueError("every marginal must be a probability in [0, 1]")
    start = worst_start(mu)

    def mixed(t: int) -> bool:
        return product_distance(mu, start, t) <= eps

    if mixed(1):
        return 1
    lo, hi = 1, 2                                  # d(lo) > eps throughout
    while not mixed(hi):
        if hi >= t_max:
            raise RuntimeError(f"the product chain does not mix within {t_max} steps")
        lo, hi = hi, min(2 * hi, t_max)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if mixed(mid) else (mid, hi)
    return hi


# -------------------------------------------------------------------------------------- verdict

def _nearly_monotone(r: np.ndarray, slack: float) -> bool:
    """No value falls more than ``slack`` (a fraction) below the largest value before it."""
    peaks = np.maximum.accumulate(r)
    return bool((r[1:] * (1.0 + slack) >= peaks[:-1]).all())


def ratio_verdict(ns, ratios, *, band: float = RATIO_BAND, grow: float = RATIO_GROW,
                  sustained: float = RATIO_SUSTAINED, slack: float = RATIO_SLACK) -> tuple[str, str]:
    """How exact t_mix / product t_mix behaves over n for one (model, design, T): (verdict, sentence).

    Rules, in order, on the ratios sorted by n:
    - "unresolved": fewer than 3 lengths, or a ratio that is NaN, infinite or not positive;
    - "grows": nearly monotone (:data:`RATIO_SLACK`) and last / first >= ``grow``;
    - "bounded": max / min <= ``band`` and no sustained rise (a nearly monotone rise with
      last / first >= ``sustained``);
    - "cannot tell": anything else (a wide swing, or a rise too small or too short to call).

    The values are exact, but a range of n is finite: a slow rise (1 + 0.01 n over n = 3..12)
    stays inside the band and is called "bounded", and wider factors call more growth bounded."""
    ns, r = np.asarray(ns, float), np.asarray(ratios, float)
    order = np.argsort(ns)
    ns, r = ns[order], r[order]
    if len(ns) < 3 or not (np.isfinite(r) & (r > 0)).all():
        what = "fewer than 3 lengths" if len(ns) < 3 else "a NaN, infinite or non-positive ratio"
        return "unresolved", f"t_mix / product t_mix has {what}, so its trend over n is unknown"
    span = f"n = {ns[0]:g} to {ns[-1]:g}"
    spread, rise = r.max() / r.min(), r[-1] / r[0]
    steady = _nearly_monotone(r, slack)
    if steady and rise >= grow:
        return "grows", (f"t_mix / product t_mix rises {rise:.2g}x over {span} ({r[0]:.3g} to {r[-1]:.3g}, "
                         f"nearly monotone): mixing falls further behind independent sites as n grows")
    if spread <= band and not (steady and rise >= sustained):
        return "bounded", (f"t_mix / product t_mix stays between {r.min():.3g} and {r.max():.3g} "
                           f"({spread:.2g}x) over {span}: no slowdown against independent sites that grows with n")
    why = (f"steadily, but by less than the {grow:g}x needed to call growth" if steady and rise > 1
           else "without a steady rise")
    return "cannot tell", (f"t_mix / product t_mix moves between {r.min():.3g} and {r.max():.3g} ({spread:.2g}x) "
                           f"over {span}, {why}")
