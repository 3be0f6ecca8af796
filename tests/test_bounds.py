"""Influence, oscillation, margins and drift against brute force over an enumerable chain."""
import itertools
import math

import numpy as np
import pytest
import torch

from textglauber import exact, influence, margins
from textglauber.pages import bounds as bounds_page


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
    assert exact.mixing_steps(exact.glauber_kernel(small_scorer, n, T).kernel, 0.25) <= bound


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


# ------------------------------------------------------------------ the chapter's protocol and reading
import pandas as pd  # noqa: E402  (only these tests need it)

from textglauber import corpus, models  # noqa: E402
from textglauber.scheduler import RunSettings


def test_gap_summary_counts_argmax_sites_and_windows(small_scorer):
    states = torch.as_tensor(exact.enumerate_states(small_scorer.vocab.ids.numpy(), 3))
    gaps = margins.score_gaps(small_scorer, states)
    out = margins.gap_summary(small_scorer, states)
    assert out["seed windows"] == 27 and out["|A|"] == 3
    assert out["share of argmax sites"] == pytest.approx(np.mean([g > 0 for row in gaps for g in row]))
    assert out["all-argmax windows"] == sum(all(g > 0 for g in row) for row in gaps) >= 1
    assert out["mean gap"] == pytest.approx(float(np.mean(gaps)))


def test_run_models_measures_each_model_as_the_chapter_did_and_skips_a_missing_one():
    """The chapter's protocol for one model, against its steps done by hand with the same draws."""
    spec = {"name": "tiny-mlm", "corpus": "tiny", "drift_token": "."}
    design = dict(seq_len=5, n_contexts=1, top_k=2, extra=1, temperatures=[0.5, 2.0], eps=0.25, drift_k=1,
                  drift_states=4, drift_temperatures=[1.0])
    got = influence.run_models([spec, {**spec, "name": "no-such-model"}],
                               RunSettings(torch.Generator().manual_seed(3), "cpu", "float32", "skip"), **design)
    fits, alpha, drift, states, gaps, described, notes = (got.fits, got.alpha, got.drift, got.states, got.gaps,
                                                          got.described, got.notes)
    assert list(fits) == ["tiny-mlm"] and len(notes) == 1 and "no-such-model" in notes[0]
    gen = torch.Generator().manual_seed(int(torch.randint(2**31 - 1, (1,), generator=torch.Generator().manual_seed(3))))
    lm, scorer = models.open_mlm(spec, device="cpu", dtype="float32")      # the first model's unit: its own seed
    passages = corpus.windows(lm.tokenizer, "tiny", 5, 50, int(torch.randint(2**31 - 1, (1,), generator=gen)),
                              vocab=scorer.vocab)
    res, table = influence.experiment(scorer, passages, [0.5, 2.0], n_contexts=1, top_k=2, extra=1, gen=gen)
    np.testing.assert_array_equal(fits["tiny-mlm"].alpha_ij, res.alpha_ij)
    pd.testing.assert_frame_equal(alpha, table.assign(model="tiny-mlm", t_star=res.t_star))
    token = lm.tokenizer.convert_tokens_to_ids(".")
    dt, per_state, _ = margins.drift_table(scorer, passages, token, 1, 4, [1.0], gen, tokenizer=lm.tokenizer)
    pd.testing.assert_frame_equal(drift, dt.assign(model="tiny-mlm", token="."))
    pd.testing.assert_frame_equal(states, per_state.assign(model="tiny-mlm"))
    assert gaps.to_dict("records") == [{"model": "tiny-mlm", **margins.gap_summary(scorer, passages)}]
    assert described[0]["corpus"] == "tiny" and described[0]["|A|"] == scorer.vocab.size


def _fit(alpha_ij, osc_ij, temperatures):
    return influence.InfluenceResult(temperatures=np.asarray(temperatures, float), alpha_ij=np.asarray(alpha_ij, float),
                                     osc_ij=np.asarray(osc_ij, float), contexts=1, replacements=2, exhaustive=False)


def _alpha_all():
    """Model a: alpha-hat 1.5 at T = 0.5 and 0.4 at T = 2; model b: above one at both."""
    return pd.DataFrame({"temperature": [0.5, 2.0, 0.5, 2.0], "alpha (lower bound)": [1.5, 0.4, 3.0, 1.2],
                         "alpha-hat < 1": [False, True, False, False],
                         "t_mix if alpha-hat were alpha": [np.inf, 123.4, np.inf, np.inf],
                         "model": ["a", "a", "b", "b"], "t_star": [2.5, 2.5, 7.0, 7.0]})


def test_alpha_summary_and_sentences_read_the_lowest_temperature_below_one():
    summary = influence.alpha_summary(_alpha_all(), "smoke")
    assert list(summary.columns) == ["model", "profile", "T* (lower bound)", "lowest T with alpha-hat under 1",
                                     "t_mix there if alpha-hat were alpha"]
    assert summary.iloc[0].tolist() == ["a", "smoke", 2.5, 2.0, 123.4]
    assert summary.iloc[1, :3].tolist() == ["b", "smoke", 7.0] and summary.iloc[1, 3:].isna().all()
    text = bounds_page.alpha_sentences(_alpha_all())
    assert text == ("a: alpha-hat >= 1, so the true alpha >= 1 and the theorem does not apply, at T = 0.5; alpha-hat < 1 "
                    "at T = 2, where the condition is not established; at T = 2 the theorem would imply t_mix <= 123 steps "
                    "if alpha-hat were the supremum. b: alpha-hat >= 1, so the true alpha >= 1 and the theorem does not "
                    "apply, at T = 0.5, 2.")


def test_alpha_plot_draws_each_model_and_its_t_star():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    bounds_page.plot_alpha(ax, _alpha_all())
    data = [line for line in ax.lines if line.get_label() in ("a", "b")]
    assert [list(line.get_ydata()) for line in data] == [[1.5, 0.4], [3.0, 1.2]]
    assert sorted(line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == ":") == [2.5, 7.0]
    plt.close(fig)


def test_matrices_table_holds_every_off_diagonal_entry():
    rng = np.random.default_rng(0)
    alpha_ij, osc_ij = rng.random((2, 3, 3)), rng.random((3, 3))
    table = influence.matrices_table({"m": _fit(alpha_ij, osc_ij, [0.5, 2.0])})
    assert len(table) == 2 * 3 * 2 and not (table.i == table.j).any()
    for row in table.itertuples():
        k = [0.5, 2.0].index(row.temperature)
        assert row.alpha_ij == alpha_ij[k, row.i, row.j] and row.osc_ij == osc_ij[row.i, row.j]


def test_bounds_preprint_table_and_sentences():
    fit = _fit(np.zeros((1, 2, 2)), [[0, 1.0], [0.5, 0]], [1.0])           # T* = max row sum / 2 = 0.5
    drift = pd.DataFrame({"model": "m", "temperature": [0.5, 1.0], "min_drift": [0.01, -0.02],
                          "median_drift": [0.05, 0.01], "fraction_positive": [1.0, 0.75]})
    table = bounds_page.preprint_table({"m": fit}, drift, "smoke")
    assert table.iloc[1].tolist() == ["this run, profile 'smoke'", "m", "0.50 (T*-hat, a lower bound)",
                                      "0.010 / 0.050 (T=0.5) and -0.020 / 0.010 (T=1)", "100% and 75%"]
    text = bounds_page.preprint_sentences({"m": fit}, drift, seq_len=12, profile="smoke")
    assert text.startswith("In this run the drift is positive at every sampled boundary state in 1 of 2 (model, "
                           "temperature) cases (sampled states at the one level N = k")
    assert "None of the models of profile 'smoke' is BERT" in text and "on 12-token windows" in text
    bert = bounds_page.preprint_sentences({"bert-base-uncased": fit}, drift.iloc[1:], seq_len=12, profile="paper")
    assert bert == "In this run the drift is positive at every sampled boundary state in 0 of 1 (model, temperature) cases."
