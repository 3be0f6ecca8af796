"""Influence, oscillation, margins and drift against brute force over an enumerable chain."""
import itertools
import math

import numpy as np
import pytest
import torch

from textglauber import exact, influence, margins


def _direct_conditional_scores(lm, vocab_ids, x, i):
    ids = torch.tensor([lm.prefix_ids + list(x) + lm.suffix_ids])
    ids[0, i + len(lm.prefix_ids)] = lm.tokenizer.mask_token_id
    with torch.no_grad():
        return lm.model(input_ids=ids).logits[0, i + len(lm.prefix_ids)][vocab_ids].double()


def _brute_force(lm, vocab_ids, n, temperatures):
    """alpha_ij(T) and osc_ij by enumerating every pair x ~_j y, with direct model calls."""
    A = vocab_ids.tolist()
    S = {(x, i): _direct_conditional_scores(lm, vocab_ids, x, i)
         for x in itertools.product(A, repeat=n) for i in range(n)}
    alpha = np.zeros((len(temperatures), n, n))
    osc = np.zeros((n, n))
    for x in itertools.product(A, repeat=n):
        for j in range(n):
            for b in A:
                y = list(x); y[j] = b; y = tuple(y)
                for i in range(n):
                    if i == j:
                        continue
                    D = S[(x, i)] - S[(y, i)]
                    osc[i, j] = max(osc[i, j], float(D.max() - D.min()) / 2)
                    for k, T in enumerate(temperatures):
                        tv = 0.5 * float((torch.softmax(S[(x, i)] / T, -1) - torch.softmax(S[(y, i)] / T, -1)).abs().sum())
                        alpha[k, i, j] = max(alpha[k, i, j], tv)
    return alpha, osc


def test_exhaustive_estimates_equal_brute_force(tiny_mlm, small_scorer):
    n, temps = 3, [0.5, 1.0, 3.0]
    states = torch.as_tensor(exact.enumerate_states(small_scorer.vocab.ids.numpy(), n))
    res = influence.influence(small_scorer, states, temps, top_k=None)
    alpha, osc = _brute_force(tiny_mlm, small_scorer.vocab.ids, n, temps)
    assert res.exhaustive
    np.testing.assert_allclose(res.osc_ij, osc, atol=1e-4)
    np.testing.assert_allclose(res.alpha_ij, alpha, atol=1e-5)
    assert osc.max() > 0.1                      # the model has real cross-site influence
    # the lemma alpha_ij(T) <= tanh(osc_ij / 2T) <= osc_ij / 2T, for every pair and temperature
    for k, T in enumerate(temps):
        assert (res.alpha_ij[k] <= np.tanh(res.osc_ij / (2 * T)) + 1e-9).all()
        assert (np.tanh(res.osc_ij / (2 * T)) <= res.osc_ij / (2 * T) + 1e-12).all()
    assert res.t_star == pytest.approx(osc.sum(1).max() / 2, abs=1e-4)


def test_sampled_estimates_are_lower_bounds(small_scorer):
    n, temps = 3, [1.0]
    states = torch.as_tensor(exact.enumerate_states(small_scorer.vocab.ids.numpy(), n))
    full = influence.influence(small_scorer, states, temps, top_k=None)
    part = influence.influence(small_scorer, states[::5], temps, top_k=1, extra=0)
    # (batches of other sizes round differently in float32: 1e-6 of slack)
    assert (part.alpha_ij <= full.alpha_ij + 1e-6).all() and (part.osc_ij <= full.osc_ij + 1e-5).all()
    assert not part.exhaustive


def test_contraction_bound_holds_against_exact_mixing_time(small_scorer):
    n = 3
    states = torch.as_tensor(exact.enumerate_states(small_scorer.vocab.ids.numpy(), n))
    T = 2.0 * influence.influence(small_scorer, states, [1.0], top_k=None).t_star   # alpha < 1 guaranteed
    res = influence.influence(small_scorer, states, [T], top_k=None)
    assert res.alpha[0] < 1
    bound = res.mixing_bound(0.25)[0]
    assert bound == math.ceil(n / (1 - res.alpha[0]) * math.log(n / 0.25))
    assert exact.mixing_time(exact.glauber_kernel(small_scorer, n, T).kernel, 0.25) <= bound


def test_drift_equals_expectation_under_the_exact_kernel(small_scorer):
    n, T = 3, 0.8
    ex = exact.glauber_kernel(small_scorer, n, T)
    tok = int(small_scorer.vocab.ids[1])
    N = (ex.states == tok).sum(1)
    expected = ex.kernel @ N - N
    got = margins.drift(small_scorer, torch.as_tensor(ex.states), tok, T)
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert np.abs(expected).max() > 0.01


def test_score_gaps_and_escape_bound_on_an_all_argmax_state(tiny_mlm, small_scorer):
    n, T = 3, 0.7
    states = torch.as_tensor(exact.enumerate_states(small_scorer.vocab.ids.numpy(), n))
    gaps = margins.score_gaps(small_scorer, states)
    x = 5
    direct = [float(s[small_scorer.vocab.index_of(states[x, i:i + 1])[0]]
                    - torch.cat([s[:small_scorer.vocab.index_of(states[x, i:i + 1])[0]],
                                 s[small_scorer.vocab.index_of(states[x, i:i + 1])[0] + 1:]]).max())
              for i in range(n) for s in [_direct_conditional_scores(tiny_mlm, small_scorer.vocab.ids, states[x].tolist(), i)]]
    np.testing.assert_allclose(gaps[x], direct, atol=1e-4)
    perfect = np.where((gaps > 0).all(1))[0]
    assert len(perfect) >= 1, "the tiny chain has an all-argmax state"
    P = exact.glauber_kernel(small_scorer, n, T).kernel
    for s in perfect:
        delta = gaps[s].min()
        assert 1 - P[s, s] <= margins.escape_bound(delta, small_scorer.vocab.size, T) + 1e-12


def test_states_with_k_copies(small_scorer):
    tok = int(small_scorer.vocab.ids[0])
    other = small_scorer.vocab.ids[1:]
    passages = other[torch.randint(len(other), (5, 8), generator=torch.Generator().manual_seed(0))]
    passages[0, 3] = tok
    s = margins.states_with_k(passages, tok, 3, 50, torch.Generator().manual_seed(1))
    assert ((s == tok).sum(1) == 3).all()
    with pytest.raises(ValueError):
        margins.states_with_k(passages, tok, 9, 1, torch.Generator())


def test_an_estimate_below_one_does_not_establish_the_condition(small_scorer):
    """One context and one replacement per site put alpha-hat(4) below one while the exact
    alpha(4) is above it: the chapter's table must not call alpha-hat < 1 contraction, nor its
    t_mix figure a bound."""
    states = torch.as_tensor(exact.enumerate_states(np.sort(small_scorer.vocab.ids.numpy()), 4))
    truth = influence.influence(small_scorer, states, [4.0], top_k=None)
    res, table = influence.experiment(small_scorer, states, [4.0], n_contexts=1, top_k=1, extra=0,
                                      gen=torch.Generator().manual_seed(0))
    assert res.alpha[0] < 1 <= truth.alpha[0]
    assert not res.exhaustive and truth.exhaustive
    assert "t_mix bound" not in table.columns and "contracts" not in table.columns
    assert bool(table["alpha-hat < 1"].iloc[0]) and np.isfinite(table["t_mix if alpha-hat were alpha"].iloc[0])
