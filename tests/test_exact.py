"""The exact machinery on chains whose answers are known in closed form."""
import math

import numpy as np
import pytest
import torch

from textglauber import exact

from conftest import joint_chain


def _product(k, n, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.ones(k))
    states = exact.enumerate_states(np.arange(k), n)
    log_mu = np.log(q)[states].sum(1)
    return exact.JointScorer(np.arange(k), n, log_mu), np.exp(log_mu)


def test_product_chain_separation_is_the_coupon_collector_tail():
    """Each site refreshes from its own law, so all sites touched is a strong stationary time
    and s(t) = P(coupon collector > t) = sum_j (-1)^{j+1} C(n, j) (1 - j/n)^t."""
    k, n = 3, 4
    sc, mu = _product(k, n)
    P = exact.glauber_kernel(sc, n, 1.0).kernel
    np.testing.assert_allclose(exact.stationary(P), mu, atol=1e-12)
    for t in (1, 3, 6, 10, 20):
        tail = sum((-1) ** (j + 1) * math.comb(n, j) * (1 - j / n) ** t for j in range(1, n + 1))
        assert exact.separation_distance(P, t) == pytest.approx(tail, abs=1e-9)


def test_product_chain_spectral_gap_is_one_over_n():
    n = 4
    sc, _ = _product(3, n, seed=1)
    spec = exact.spectral_gap(exact.glauber_kernel(sc, n, 1.0).kernel)
    assert spec["gap"] == pytest.approx(1 / n, abs=1e-9)
    assert spec["relaxation_time"] == pytest.approx(n)
    assert not spec["complex"]


def test_pseudo_likelihood_law_of_a_product_is_the_product():
    n = 3
    sc, mu = _product(4, n, seed=2)
    ch = exact.glauber_kernel(sc, n, 1.0)
    gap = exact.compatibility_gap(exact.stationary(ch.kernel), exact.pseudo_likelihood_law(ch, sc, 1.0))
    assert gap["tv"] < 1e-10 and abs(gap["kl"]) < 1e-10


def test_compatible_joint_is_stationary_and_reversible_but_not_its_pl_law():
    sc, mu, ch = joint_chain(3, 3, seed=4)
    pi = exact.stationary(ch.kernel)
    np.testing.assert_allclose(pi, mu, atol=1e-10)
    flow = pi[:, None] * ch.kernel
    np.testing.assert_allclose(flow, flow.T, atol=1e-12)                     # detailed balance
    assert exact.compatibility_gap(pi, exact.pseudo_likelihood_law(ch, sc, 1.0))["tv"] > 1e-3


def test_tiny_mlm_chain_is_not_reversible(small_scorer):
    ch = exact.glauber_kernel(small_scorer, 3, 1.0)
    pi = exact.stationary(ch.kernel)
    flow = pi[:, None] * ch.kernel
    both = flow + flow.T
    rel = np.abs(flow - flow.T)[both > 1e-9] / both[both > 1e-9]
    assert rel.max() > 0.05                              # incompatible conditionals: no detailed balance


def test_conductance_of_a_single_state_is_its_escape_probability(small_scorer):
    ch = exact.glauber_kernel(small_scorer, 3, 0.7)
    B = np.zeros(len(ch.states), bool)
    B[5] = True
    assert exact.conductance(ch.kernel, B) == pytest.approx(1 - ch.kernel[5, 5])


def test_mixing_time_by_doubling_equals_step_by_step(small_scorer):
    for T in (0.3, 1.0):
        P = exact.glauber_kernel(small_scorer, 3, T).kernel
        pi = exact.stationary(P)
        D, t = np.eye(len(pi)), 0
        while True:
            t += 1
            D = D @ P
            if 0.5 * np.abs(D - pi).sum(1).max() <= 0.25:
                break
        assert exact.mixing_time(P, 0.25) == t


def test_stationary_law_is_exact_for_a_nearly_decomposable_chain():
    """Two states that swap with probability eps: pi = (1/2, 1/2) for any eps, however small."""
    for eps in (1e-3, 1e-9, 1e-14):
        P = np.array([[1 - eps, eps], [eps, 1 - eps]])
        np.testing.assert_allclose(exact.stationary(P), [0.5, 0.5], rtol=1e-12)
    rng = np.random.default_rng(0)
    P = rng.random((50, 50)) * np.where(rng.random((50, 50)) < 0.2, 1.0, 1e-9)
    P /= P.sum(1, keepdims=True)
    pi = exact.stationary(P)
    np.testing.assert_allclose(pi @ P, pi, atol=1e-15)


def test_exit_time_of_a_single_state_is_its_geometric_holding_time(small_scorer):
    ch = exact.glauber_kernel(small_scorer, 3, 0.7)
    P = ch.kernel
    for x in (0, 5, 13):
        members = np.zeros(len(P), bool)
        members[x] = True
        assert exact.exit_time(P, members)[0] == pytest.approx(1 / (1 - P[x, x]), rel=1e-12)


def test_margin_certificate_holds_against_the_exact_chain(small_scorer):
    table = exact.TabulatedScorer(small_scorer, 3)
    for T in (0.3, 1.0, 3.0):
        P = exact.glauber_kernel(table, 3, T).kernel
        pi = exact.stationary(P)
        m = exact.margin_check(table, P, T, pi)
        assert m["margin Delta"] > 0
        assert m["exact holding time"] >= m["certified holding time"]
        if np.isfinite(m["margin t_mix bound"]):
            assert exact.mixing_time(P) >= m["margin t_mix bound"]


def test_hitting_check_on_hamming_embedding_hits_at_the_first_move(small_scorer):
    """With rel_delta tiny, any move counts, so the hitting time is the first step at which the
    chain's state changes: checked against the recorded states."""
    table = exact.TabulatedScorer(small_scorer, 3)
    emb = np.eye(len(table.chain.states))               # every state orthogonal to every other
    P = exact.glauber_kernel(table, 3, 1.0).kernel
    pi = exact.stationary(P)
    runs = exact.tabulated_chains(table, 1.0, 16, 200, torch.Generator().manual_seed(0))
    moved = (runs.states != runs.states[0][None]).any(-1)
    first = runs.steps[moved.argmax(0)]
    out = exact.hitting_check(table, runs, emb, pi, rel_delta=1e-9)
    assert out["hitting censored"] == 0 and out["hitting time (median)"] == np.median(first)
