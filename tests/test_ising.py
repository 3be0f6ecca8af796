"""The Ising experiments of Li et al. (ICML 2024) against closed forms and exact enumeration."""
import itertools

import numpy as np
import pandas as pd
import pytest
import torch

from textglauber import exact, ising, stats


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


# ---------------------------------------------------------------- the chapter's tables and sentences
def test_clique_sweep_is_the_separation_experiment_at_k_equal_n_per_clique():
    got = ising.clique_sweep([2, 3], free=1, coupling=1.0, field=0.05)
    assert got[["clique", "spins", "k"]].values.tolist() == [[2, 3, 3], [2, 3, 3], [3, 4, 4], [3, 4, 4]]
    for c in (2, 3):
        m = ising.clique_plus_independent(c, 1, 1.0, 0.05)
        want = ising.separation_experiment(m, [m.n])
        part = got[got.clique == c].drop(columns=["clique", "spins"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(part, want)


def _by_clique(parallel, gibbs=(2.0, 2.5, 3.0)):
    cliques = [2, 4, 6][:len(parallel)]
    return pd.DataFrame({"clique": [c for c in cliques for _ in range(2)],
                         "sampler": ["k-site Gibbs", "independent parallel"] * len(cliques),
                         "steps to mode": [v for pair in zip(gibbs, parallel) for v in pair]})


def test_clique_ratios_and_the_separation_sentence():
    wide, ratio = ising.clique_ratios(_by_clique([4.0, 10.0, 30.0]))
    assert wide.index.tolist() == [2, 4, 6] and ratio.tolist() == [2.0, 4.0, 10.0]
    by_k = pd.DataFrame({"k": [1, 8, 8], "sampler": ["independent parallel", "k-site Gibbs", "independent parallel"],
                         "TV(stationary, Ising law)": [0.0, 0.0, 0.4567]})
    text = ising.separation_sentence(by_k, _by_clique([4.0, 10.0, 30.0]), 8)
    assert "reaches the mode in 2.0 to 3.0 expected steps" in text
    assert "needs 4 steps for a clique of 2 and 30 for a clique of 6" in text
    assert "goes 2 -> 4 -> 10 over clique sizes 2, 4, 6 (growing with the clique)" in text
    assert "stationary law is 0.46 in total variation" in text
    assert "NOT growing monotonically" in ising.separation_sentence(by_k, _by_clique([4.0, 3.0, 30.0]), 8)


def test_exact_variances_are_the_traces_relative_to_the_likelihood():
    m = ising.random_model(3, 1.0, 0.3, seed=2)
    got = ising.exact_variances(m, [1, 2, 3])
    traces = [np.trace(ising.asymptotic_variance(m, k)) for k in (1, 2, 3)]
    np.testing.assert_allclose(got["exact asymptotic variance (trace)"], traces, rtol=1e-12)
    np.testing.assert_allclose(got["relative to the likelihood"], np.array(traces) / traces[-1], rtol=1e-12)


def _fits(gap, replicates=12, seed=0):
    """Scaled squared errors per replicate for k = 1, 2, 3: k = 1 above k = 3 by ``gap`` plus noise."""
    rng = np.random.default_rng(seed)
    rows = [{"replicate": r, "k": k, "sample size": 100, "rmse": 0.1,
             "scaled squared error": 5.0 + (gap if k == 1 else 0.0) + rng.normal(0, 0.5)}
            for r in range(replicates) for k in (1, 2, 3)]
    return pd.DataFrame(rows)


def test_scaled_error_table_and_intervals():
    m = ising.random_model(3, 1.0, 0.3, seed=2)
    raw = _fits(0.0).drop(columns="scaled squared error")
    scaled = ising.with_scaled_error(raw, m)
    assert "scaled squared error" not in raw
    np.testing.assert_allclose(scaled["scaled squared error"], 100 * 0.1**2 * 6)      # 3 couplings and 3 fields
    fits = _fits(1.0)
    exact_var = pd.DataFrame({"k": [1, 2, 3], "exact asymptotic variance (trace)": [3.0, 2.0, 1.0],
                              "relative to the likelihood": [3.0, 2.0, 1.0]})
    table = ising.fitting_table(fits, exact_var, seed=4)
    for k, row in zip((1, 2, 3), table.to_dict("records")):
        v = fits[fits.k == k]["scaled squared error"].to_numpy()
        assert row["Monte Carlo m * MSE (sum)"] == pytest.approx(v.mean(), rel=1e-12)
        assert (row["95% CI low"], row["95% CI high"]) == stats.bootstrap_ci(v, seed=4)
        assert row["95% CI low"] < v.mean() < row["95% CI high"]


def test_fitting_sentence_tells_a_resolved_gain_from_noise():
    exact_var = pd.DataFrame({"k": [1, 2, 3], "exact asymptotic variance (trace)": [3.0, 2.0, 1.0],
                              "relative to the likelihood": [3.0, 2.0, 1.0]})
    clear = ising.fitting_sentence(_fits(3.0), exact_var, 100, 12, seed=0)
    assert "falls monotonically in k, consistent with" in clear and "has 3.000 times" in clear
    assert "shows the same ordering" in clear
    noise = ising.fitting_sentence(_fits(0.0, seed=1), exact_var.iloc[::-1].assign(k=[1, 2, 3]), 100, 12, seed=0)
    assert "does NOT fall monotonically" in noise and "includes zero" in noise
