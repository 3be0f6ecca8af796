"""The Ising experiments of Li et al. (ICML 2024) against closed forms and exact enumeration."""
import itertools

import numpy as np
import pytest
import torch

from textglauber import exact, ising


def _random_model(n, seed, scale=0.6):
    rng = np.random.default_rng(seed)
    J = np.triu(rng.normal(0, scale, (n, n)), 1)
    return ising.IsingModel(J + J.T, rng.normal(0, 0.3, n))


def test_law_matches_the_energy_by_hand():
    m = _random_model(3, 0)
    x = np.array(list(itertools.product([-1, 1], repeat=3)))
    w = np.exp([sum(m.J[i, j] * s[i] * s[j] for i in range(3) for j in range(i + 1, 3)) + m.h @ s for s in x])
    np.testing.assert_allclose(m.law(), w / w.sum(), rtol=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_k_site_gibbs_leaves_the_ising_law_invariant(k):
    m = _random_model(5, 1)
    P = ising.gibbs_kernel(m, k)
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(m.law() @ P, m.law(), atol=1e-13)


def test_gibbs_over_all_sites_samples_the_law_in_one_step():
    m = _random_model(4, 2)
    P = ising.gibbs_kernel(m, 4)
    np.testing.assert_allclose(P, np.broadcast_to(m.law(), P.shape), atol=1e-13)


def test_parallel_sampler_is_gibbs_for_one_site_and_for_independent_spins():
    m = _random_model(4, 3)
    np.testing.assert_allclose(ising.parallel_kernel(m, 1), ising.gibbs_kernel(m, 1), atol=1e-13)
    free = ising.IsingModel(np.zeros((4, 4)), m.h)               # product law: marginals are the joint
    np.testing.assert_allclose(ising.parallel_kernel(free, 3), ising.gibbs_kernel(free, 3), atol=1e-13)
    # with couplings the parallel sampler does not preserve the law
    assert exact.tv(m.law() @ ising.parallel_kernel(m, 3), m.law()) > 1e-3


def test_hitting_time_of_one_spin_is_geometric():
    """One free spin resampled every step: the time to reach +1 from -1 is geometric with
    success probability p(+1) = e^h / (e^h + e^-h)."""
    h = 0.7
    m = ising.IsingModel(np.zeros((1, 1)), [h])
    up = np.exp(h) / (np.exp(h) + np.exp(-h))
    assert ising.hitting_time(ising.gibbs_kernel(m, 1), 1)[0] == pytest.approx(1 / up, rel=1e-12)


def test_separation_grows_with_the_clique():
    """At k = N, k-site Gibbs reaches the mode in O(1) steps; the parallel sampler needs more
    and more as the clique grows (the product of marginals rarely aligns the clique)."""
    ratios = []
    for c in (2, 4, 6):
        m = ising.clique_plus_independent(c, 1, 1.5, 0.05)
        df = ising.separation_experiment(m, [m.n]).set_index("sampler")["steps to mode"]
        ratios.append(df["independent parallel"] / df["k-site Gibbs"])
    assert ratios[0] < ratios[1] < ratios[2] and ratios[2] > 5


def test_k_pseudo_likelihood_at_k_equal_n_is_the_likelihood():
    m = _random_model(4, 4)
    X = ising.sample(m, 50, torch.Generator().manual_seed(0))
    obs, alts, w = ising.k_pseudo_loglik_terms(X, 4)
    theta = torch.as_tensor(m.theta)
    loglik = np.log(m.law()[ising._index(X)]).mean()
    assert float(ising.k_pseudo_loglik(theta, obs, alts, w)) == pytest.approx(loglik, rel=1e-12)


def test_asymptotic_variance_at_k_equal_n_is_the_inverse_fisher_and_bounds_the_others():
    m = _random_model(4, 5, scale=0.9)
    phi = ising._features(ising.all_states(4))
    p = m.law()
    mean = p @ phi
    fisher = np.einsum("s,sp,sq->pq", p, phi - mean, phi - mean)
    V = {k: ising.asymptotic_variance(m, k) for k in range(1, 5)}
    np.testing.assert_allclose(V[4], np.linalg.inv(fisher), rtol=1e-8)
    for k in range(1, 4):                                     # Cramer-Rao: V_k - V_N is positive semidefinite
        assert np.linalg.eigvalsh(V[k] - V[4]).min() > -1e-9


def test_k_pseudo_likelihood_estimate_is_consistent():
    """On a large sample the estimate lands within a few asymptotic standard errors of the truth."""
    m = _random_model(4, 6)
    X = ising.sample(m, 20_000, torch.Generator().manual_seed(1))
    for k in (1, 2):
        est = ising.fit(X, k)
        se = np.sqrt(np.diag(ising.asymptotic_variance(m, k)) / len(X))
        assert np.abs(est - m.theta).max() < 5 * se.max()


def test_bad_models_and_block_sizes_are_refused():
    with pytest.raises(ValueError, match="symmetric"):
        ising.IsingModel(np.array([[0, 1], [0, 0]]), [0, 0])
    with pytest.raises(ValueError, match="block size"):
        ising.gibbs_kernel(_random_model(3, 0), 4)


def test_k_pseudo_likelihood_matches_block_conditionals_of_the_exact_law():
    """For k < N, the objective (computed on distinct states with weights) equals the mean over the
    sample and every k-subset of log pi(x_S | x_-S) from the enumerated law, sample by sample."""
    import itertools

    m = _random_model(5, 7)
    X = ising.sample(m, 300, torch.Generator().manual_seed(2))
    law = m.law()
    for k in (1, 2, 3):
        terms = []
        for S in itertools.combinations(range(5), k):
            block = ising._fill_block(X, S)                       # (m, 2^k, N): x with x_S replaced
            terms.append(np.log(law[ising._index(X)]) - np.log(law[ising._index(block)].sum(-1)))
        obs, alts, w = ising.k_pseudo_loglik_terms(X, k)
        assert len(w) < len(X)                                    # the sample was compressed
        got = float(ising.k_pseudo_loglik(torch.as_tensor(m.theta), obs, alts, w))
        assert got == pytest.approx(np.mean(terms), rel=1e-10)
