"""The product-chain yardstick (textglauber.phase.product) against answers computed independently:
the product chain built as a context-free two-token chain and mixed by dense matrix powers, the
lazy hypercube walk's closed form with exact Stirling numbers, brute force over every start, and
marginals summed by explicit loops over bit strings."""
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.special import logit

from textglauber import exact, phase
from textglauber.phase import product


# ----------------------------------------------------------------------------- independent helpers

def context_free_scores(mu) -> phase.Scores:
    """The product chain as a two-token chain: logit difference logit(mu_i) in every context."""
    n = len(mu)
    L = np.zeros((n, 2 ** (n - 1), 2))
    L[:, :, 1] = logit(np.asarray(mu))[:, None]
    return phase.Scores(L)


def product_law(mu) -> np.ndarray:
    """prod_i Bernoulli(mu_i) over the 2^n states by explicit loops (site 0 the leading character)."""
    n = len(mu)
    return np.array([math.prod(mu[i] if ch == "1" else 1 - mu[i] for i, ch in enumerate(format(s, f"0{n}b")))
                     for s in range(2 ** n)])


def stirling2(t: int, k: int) -> int:
    """Stirling number of the second kind by its recurrence, in exact integers."""
    row = [1] + [0] * k                     # S(0, j)
    for _ in range(t):
        row = [0] + [j * row[j] + row[j - 1] for j in range(1, k + 1)]
    return row[k]


def untouched_exact(n: int, t: int) -> list[Fraction]:
    """P(|U| = u), u = 0..n, exactly: k distinct sites picked in t picks has probability
    C(n, k) k! S(t, k) / n^t (surjections onto the k picked sites)."""
    picked = [Fraction(math.comb(n, k) * math.factorial(k) * stirling2(t, k), n ** t) for k in range(n + 1)]
    return picked[::-1]


def hypercube_tv(n: int, t: int) -> float:
    """TV of the lazy hypercube walk (every mu_i = 1/2) after t steps: P_t(y) depends only on the
    number d of sites where y differs from the start, f(d) = 2^-n sum_u P(|U| = u) 2^u
    C(n - d, u) / C(n, u), and TV = 1/2 sum_d C(n, d) |f(d) - 2^-n| (exact fractions)."""
    pu = untouched_exact(n, t)
    f = [sum(pu[u] * 2 ** u * Fraction(math.comb(n - d, u), math.comb(n, u)) for u in range(n + 1)) / 2 ** n
         for d in range(n + 1)]
    return float(sum(math.comb(n, d) * abs(f[d] - Fraction(1, 2 ** n)) for d in range(n + 1)) / 2)


def random_mu(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.03, 0.97, size=n)


# ---------------------------------------------------------------------------------- untouched law

@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_untouched_law_against_stirling_numbers(n):
    for t in [0, 1, 2, 3, 7, 20, 41]:
        np.testing.assert_allclose(product.untouched_law(n, t), [float(p) for p in untouched_exact(n, t)],
                                   rtol=1e-12, atol=1e-300)


def test_untouched_law_for_huge_t_is_a_law():
    law = product.untouched_law(20, 2 ** 40)
    assert law[0] == pytest.approx(1.0, abs=1e-15) and (law >= 0).all()


# ------------------------------------------------------------------------------------- distance

@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_distance_against_lazy_hypercube_closed_form(n):
    mu = np.full(n, 0.5)
    start = np.random.default_rng(n).integers(0, 2, n)
    for t in list(range(0, 25)) + [60]:
        assert product.product_distance(mu, start, t) == pytest.approx(hypercube_tv(n, t), abs=1e-13)


@pytest.mark.parametrize("n,seed", [(3, 0), (4, 1), (5, 2)])
def test_distance_against_matrix_powers_from_every_start(n, seed):
    mu = random_mu(n, seed)
    P = phase.kernel(context_free_scores(mu), 1.0).toarray()
    pi = product_law(mu)
    Pt = np.eye(2 ** n)
    for t in range(0, 30):
        for s in range(2 ** n):
            expected = 0.5 * np.abs(Pt[s] - pi).sum()
            assert product.product_distance(mu, phase.site_bits(s, n), t) == pytest.approx(expected, abs=1e-12)
        Pt = Pt @ P


def test_distance_with_an_unreachable_start_bit():
    """A marginal of exactly 0 or 1 (underflow at low T): the start on the impossible bit."""
    mu = np.array([1.0, 0.3, 0.0])
    d = [product.product_distance(mu, [0, 0, 1], t) for t in range(200)]
    assert d[0] == 1.0 and all(a >= b - 1e-15 for a, b in zip(d, d[1:])) and d[-1] < 1e-10


# ----------------------------------------------------------------------------------- worst start

@pytest.mark.parametrize("n,seed", [(2, 3), (3, 4), (4, 5), (6, 6)])
def test_worst_start_is_each_site_on_its_less_likely_bit(n, seed):
    """Brute force over every start and many t: none is farther than the less-likely start."""
    mu = random_mu(n, seed)
    worst = product.worst_start(mu)
    assert ((worst == 1) == (mu < 0.5)).all()
    for t in [0, 1, 2, 3, 5, 8, 13, 21, 34]:
        every = [product.product_distance(mu, phase.site_bits(s, n), t) for s in range(2 ** n)]
        assert product.product_distance(mu, worst, t) == pytest.approx(max(every), abs=1e-14)


# ----------------------------------------------------------------------------------------- t_mix

@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8])
def test_product_tmix_against_the_context_free_chain(n):
    """The product chain as a two-token chain, mixed by dense matrix powers over every start."""
    for seed in range(3):
        mu = random_mu(n, 100 * n + seed)
        P = phase.kernel(context_free_scores(mu), 1.0)
        assert product.product_tmix(mu) == exact.mixing_steps(P, 0.25)


def test_product_tmix_other_eps_and_extreme_marginals():
    mu = np.array([0.999, 0.001, 0.5, 0.2])
    P = phase.kernel(context_free_scores(mu), 1.0)
    for eps in [0.05, 0.25, 0.4]:
        assert product.product_tmix(mu, eps) == exact.mixing_steps(P, eps)


def test_product_tmix_t_max_guard():
    with pytest.raises(RuntimeError):
        product.product_tmix(np.full(6, 0.5), t_max=4)


def test_product_tmix_at_twenty_sites_is_a_coupon_collector_time():
    """n = 20 (the split tables have 2^10 rows): mixing needs most sites picked at least once, so
    t_mix lies between n / 2 and a coupon collector's 3/4 quantile, n (log n + log 4) + n."""
    mu = random_mu(20, 7)
    t = product.product_tmix(mu)
    assert 10 <= t <= 20 * (math.log(20) + math.log(4)) + 20


# ------------------------------------------------------------------------------------ marginals

def test_marginals_of_a_hand_made_law():
    # states 00, 01, 10, 11 (site 0 first)
    assert product.marginals(np.array([0.1, 0.2, 0.3, 0.4]), 2) == pytest.approx([0.7, 0.6])
    assert product.marginals(np.array([2.0, 0.0, 0.0, 2.0]), 2) == pytest.approx([0.5, 0.5])   # renormalised
    with pytest.raises(ValueError):
        product.marginals(np.ones(8), 2)


def test_marginals_against_loops_over_bit_strings():
    n = 5
    pi = np.random.default_rng(0).random(2 ** n)
    pi /= pi.sum()
    expected = [sum(pi[s] for s in range(2 ** n) if format(s, f"0{n}b")[i] == "1") for i in range(n)]
    np.testing.assert_allclose(product.marginals(pi, n), expected, rtol=1e-13)


def test_marginals_of_a_product_law_are_its_mu():
    mu = random_mu(6, 1)
    np.testing.assert_allclose(product.marginals(product_law(mu), 6), mu, rtol=1e-12)


# -------------------------------------------------------------------------------------- verdict

RANGES = [np.arange(3, 13), np.arange(4, 10)]
BOUNDED = {"constant": lambda n: np.full(len(n), 1.7), "1 + 0.1 sin n": lambda n: 1 + 0.1 * np.sin(n),
           "saturated": lambda n: 2 - np.exp(-n), "1.3 + 0.1 (-1)^n": lambda n: 1.3 + 0.1 * (-1.0) ** n}
GROWING = {"e^(0.2 n)": lambda n: np.exp(0.2 * n), "n": lambda n: n.astype(float),
           "n log n / 3": lambda n: n * np.log(n) / 3}


@pytest.mark.parametrize("ns", RANGES, ids=["3..12", "4..9"])
@pytest.mark.parametrize("truth", list(BOUNDED))
def test_verdict_names_bounded_truths(ns, truth):
    verdict, sentence = phase.ratio_verdict(ns, BOUNDED[truth](ns))
    assert verdict == "bounded", sentence
    assert f"n = {ns[0]} to {ns[-1]}" in sentence


@pytest.mark.parametrize("ns", RANGES, ids=["3..12", "4..9"])
@pytest.mark.parametrize("truth", list(GROWING))
def test_verdict_names_growing_truths(ns, truth):
    verdict, sentence = phase.ratio_verdict(ns, GROWING[truth](ns))
    assert verdict == "grows", sentence


@pytest.mark.parametrize("ns", RANGES, ids=["3..12", "4..9"])
def test_verdict_never_swaps_the_two(ns):
    """Bounded truths, wide swings included, are never "grows"; growing ones never "bounded",
    with integer rounding of both mixing times on top."""
    swings = [1 + 0.5 * np.sin(ns), 3 + (-1.0) ** ns, 2 - 2 / ns]
    for r in [f(ns) for f in BOUNDED.values()] + swings:
        assert phase.ratio_verdict(ns, r)[0] != "grows"
        assert phase.ratio_verdict(ns, np.round(50 * r) / 50)[0] != "grows"
    for r in [f(ns) for f in GROWING.values()]:
        assert phase.ratio_verdict(ns, r)[0] != "bounded"
        assert phase.ratio_verdict(ns, np.round(50 * r) / 50)[0] != "bounded"
    assert phase.ratio_verdict(ns, 1 + 0.5 * np.sin(ns))[0] == "cannot tell"


def test_verdict_order_does_not_matter():
    ns = np.arange(3, 13)
    perm = np.random.default_rng(0).permutation(len(ns))
    assert phase.ratio_verdict(ns[perm], np.exp(0.2 * ns)[perm]) == phase.ratio_verdict(ns, np.exp(0.2 * ns))


def test_verdict_unresolved():
    assert phase.ratio_verdict([3, 4], [1.0, 1.0])[0] == "unresolved"
    assert phase.ratio_verdict([3, 4, 5], [1.0, np.nan, 1.0])[0] == "unresolved"
    assert phase.ratio_verdict([3, 4, 5], [1.0, np.inf, 1.0])[0] == "unresolved"
    assert phase.ratio_verdict([3, 4, 5], [1.0, 0.0, 1.0])[0] == "unresolved"


def test_verdict_can_fail():
    """The rule's limits, shown: loosened factors call a growing truth bounded, and even with the
    defaults a slow linear rise (1 + 0.01 n, unbounded) stays inside the band over n = 3..12."""
    ns = np.arange(4, 10)
    assert phase.ratio_verdict(ns, ns.astype(float))[0] == "grows"
    assert phase.ratio_verdict(ns, ns.astype(float), band=3.0, grow=3.0, sustained=3.0)[0] == "bounded"
    ns = np.arange(3, 13)
    assert phase.ratio_verdict(ns, 1 + 0.01 * ns)[0] == "bounded"
    assert phase.ratio_verdict(ns, 1 + 0.03 * ns)[0] == "cannot tell"     # a steady rise below 1.5x


# ----------------------------------------------------------------------------------- phase table

def test_phase_point_has_the_product_column():
    cols = phase.COLUMNS
    assert cols[cols.index("t_mix") + 1] == "t_mix_product"
    rng = np.random.default_rng(4)
    scores = phase.Scores(rng.normal(scale=1.5, size=(4, 8, 2)))
    for T in [0.7, 3.0]:
        cell = phase.phase_point(scores, T)
        pi = exact.stationary(phase.kernel(scores, T).toarray())
        mu = [sum(pi[s] for s in range(16) if format(s, "04b")[i] == "1") for i in range(4)]
        assert cell["t_mix_product"] == product.product_tmix(np.array(mu))


def test_phase_point_product_column_without_exact_pi():
    """Past tmix_max_states t_mix is NaN but the product column still comes from the sparse pi."""
    scores = phase.Scores(np.random.default_rng(5).normal(size=(5, 16, 2)))
    cell = phase.phase_point(scores, 1.0, tmix_max_states=16)
    assert np.isnan(cell["t_mix"])
    pi = phase.stationary_sparse(phase.kernel(scores, 1.0))
    assert cell["t_mix_product"] == product.product_tmix(product.marginals(pi, 5))


def test_independent_sites_have_ratio_one():
    """For a context-free model the exact chain is the product chain: both t_mix agree."""
    mu = random_mu(5, 9)
    cell = phase.phase_point(context_free_scores(mu), 1.0)
    assert cell["t_mix"] == cell["t_mix_product"]


def test_product_tmix_rejects_marginals_that_are_not_probabilities():
    for bad in [[0.5, np.nan], [1.2, 0.3], [-0.1, 0.5]]:
        with pytest.raises(ValueError):
            product.product_tmix(np.array(bad))
