"""The book's diagnostics against exact answers (groundtruth.py): the checks on enumerable chains,
one temperature's row, and what the chapter and the findings page count from them."""
import numpy as np
import pandas as pd
import pytest
import torch

from textglauber import exact, groundtruth, models, rectangle
from textglauber.engine import couple
from textglauber.pages import ground_truth as ground_truth_page
from textglauber.profile import Holding
from textglauber.scheduler import RunSettings

from conftest import truth_settings
from test_exact import _planted


def test_margin_certificate_holds_against_the_exact_chain(small_scorer):
    table = exact.TabulatedScorer(small_scorer, 3)
    for T in (0.3, 1.0, 3.0):
        P = exact.glauber_kernel(table, 3, T).kernel
        pi = exact.stationary(P)
        m = groundtruth.margin_check(table, P, T, pi)
        assert m["margin Delta"] > 0
        assert m["exact holding time"] >= m["certified holding time"]
        if np.isfinite(m["margin t_mix bound"]):
            assert exact.mixing_steps(P) >= m["margin t_mix bound"]


def test_hitting_check_on_hamming_embedding_hits_at_the_first_move(small_scorer):
    """With rel_delta tiny, any move counts, so the hitting time is the first step at which the
    chain's state changes: checked against the recorded states."""
    table = exact.TabulatedScorer(small_scorer, 3)
    emb = np.eye(len(table.chain.states))               # every state orthogonal to every other
    P = exact.glauber_kernel(table, 3, 1.0).kernel
    pi = exact.stationary(P)
    runs = groundtruth.tabulated_chains(table, 1.0, 16, 200, torch.Generator().manual_seed(0))
    moved = (runs.states != runs.states[0][None]).any(-1)
    first = runs.steps[moved.argmax(0)]
    out = groundtruth.hitting_check(table, runs, emb, pi, rel_delta=1e-9)
    assert out["hitting censored"] == 0 and out["hitting time (median)"] == np.median(first)


def test_tabulated_chains_keep_the_tables_prefix(small_scorer):
    table = exact.TabulatedScorer(small_scorer, 4, prefix=small_scorer.vocab.ids[[1]].numpy())
    runs = groundtruth.tabulated_chains(table, 1.0, 8, 100, torch.Generator().manual_seed(0))
    assert (runs.states[:, :, 0] == int(small_scorer.vocab.ids[1])).all()
    assert len(np.unique(table.chain.index(runs.states))) > 9          # the free sites did move


def test_trap_basins_survive_a_trap_held_beyond_1e16_steps():
    """Chains of the engine on the planted table at T = 0.1 (some fall into the trap, held ~1e17
    steps, and stay; others into shallower local argmaxes of the noise): trap_basins reports it with the exact exit time of its basin (the old solve of
    I - P_BB raised LinAlgError on the basin {x})."""
    sc, x = _planted()
    table = exact.TabulatedScorer(sc, sc.n)
    T = 0.1
    P = exact.glauber_kernel(table, sc.n, T).kernel
    pi = exact.stationary(P)
    runs = groundtruth.tabulated_chains(table, T, 8, 400, torch.Generator().manual_seed(0))
    assert (table.chain.index(runs.states[-1]) == x).sum() >= 2     # two chains end in it (one fell in late)
    emb = np.random.default_rng(0).normal(size=(len(P), 8))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    found = groundtruth.trap_basins(table, runs, emb, P, pi, window=50, rel_threshold=0.1)
    held = found[found["basin states"] == 1]
    held = held[held["exact mean exit time"] > 1e16]
    assert len(held) >= 1
    assert held["exact mean exit time"].iloc[0] == pytest.approx(1 / exact.leave_probabilities(P)[x], rel=1e-12)


# ---------------------------------------------------------------- the coupling estimate and one temperature's row
@pytest.mark.parametrize("seed", range(4))
def test_coupling_estimate_is_the_order_statistic_that_leaves_eps_of_the_pairs(seed):
    """With N pairs the share still apart after t is at most eps exactly when at most floor(eps N)
    coupling times exceed t, so the estimate is the (N - floor(eps N))-th smallest time (a censored
    pair never couples), or NaN when that time is past the budget."""
    rng = np.random.default_rng(seed)
    N, eps = 40, 0.25
    tau = rng.integers(1, 300, N).astype(float)
    censored = rng.random(N) < 0.15
    tau[censored] = np.nan
    order = np.sort(np.where(censored, np.inf, tau))[N - int(np.floor(eps * N)) - 1]
    for budget in (100, 200, 400):
        got = groundtruth.coupling_estimate(tau, censored, budget, eps)
        if order <= budget:
            assert got == order
        else:
            assert np.isnan(got)


def _tail_crossing(tau, censored, budget, eps):
    """The first t with at most eps of the pairs apart, by walking t up from 0."""
    for t in range(budget + 1):
        if sum(1 for a, c in zip(tau, censored) if c or a > t) / len(tau) <= eps:
            return t
    return np.nan


def test_ground_truth_rows_are_the_exact_answers_beside_the_diagnostics(small_scorer):
    """Two temperatures on the tiny MLM at n = 3: every exact column equals its exact.py function,
    the rectangles scale as 1/T, and the coupling estimate is the one of pairs drawn in the
    documented order (rectangles first, then per temperature the pairs' starts and the coupling)."""
    table = exact.TabulatedScorer(small_scorer, 3)
    temps, pairs, budget = [0.5, 2.0], 30, 300
    gt = groundtruth.ground_truth(table, temps, gen=torch.Generator().manual_seed(5),
                                  **truth_settings(pairs=pairs, budget=budget, rectangles=12, chains=64))
    assert list(gt.table.columns[:13]) == [
        "temperature", "states", "exact t_mix", "relaxation time", "complex spectrum", "TV(pi, PL law)",
        "KL(pi || PL law)", "exact alpha", "contraction bound", "coupling estimate", "censored pairs",
        "mean R at T=1", "mean R at T"]
    assert "margin Delta" in gt.table and "hitting time (median)" not in gt.table and gt.traps.empty
    gen = torch.Generator().manual_seed(5)
    states = torch.as_tensor(table.chain.states)
    rectangle.sample(table, states, 12, gen, top_k=table.vocab.size)
    for T, row in zip(temps, gt.table.to_dict("records")):
        P = exact.glauber_kernel(small_scorer, 3, T).kernel
        pi = exact.stationary(P)
        assert row["states"] == 27 and row["exact t_mix"] == exact.mixing_steps(P, 0.25)
        assert row["relaxation time"] == pytest.approx(exact.spectral_gap(P)["relaxation_time"], rel=1e-9)
        assert row["TV(pi, PL law)"] == pytest.approx(
            exact.tv(pi, exact.pseudo_likelihood_law(exact.glauber_kernel(small_scorer, 3, T), small_scorer, T)), abs=1e-9)
        assert row["mean R at T"] == pytest.approx(row["mean R at T=1"] / T)
        pick = torch.randint(27, (2, pairs), generator=gen)
        run = couple(table, states[pick[0]], states[pick[1]], T, budget, gen)
        want = _tail_crossing(run.tau, run.censored, budget, 0.25)
        assert row["coupling estimate"] == want or (np.isnan(want) and np.isnan(row["coupling estimate"]))
        assert row["censored pairs"] == run.censored.mean()


def test_ground_truth_refuses_a_table_with_a_frozen_prefix(small_scorer):
    table = exact.TabulatedScorer(small_scorer, 3, prefix=small_scorer.vocab.ids[[0]].numpy())
    with pytest.raises(ValueError, match="frozen prefix"):
        groundtruth.ground_truth(table, [1.0], gen=torch.Generator(),
                                 **truth_settings(pairs=2, budget=5, rectangles=2, chains=4))


# ---------------------------------------------------------------- what the chapter and the findings page count
def _truth():
    """Five cases, with the gaps a real table has: no exact t_mix, no coupling estimate, no
    hitting time, and an infinite contraction bound (alpha >= 1)."""
    return pd.DataFrame({
        "model": ["a", "a", "a", "b", "b"],
        "exact t_mix": [10.0, 20.0, np.nan, 40.0, 8.0],
        "coupling estimate": [12.0, 50.0, 7.0, np.nan, 4.0],
        "hitting time (median)": [5.0, 40.0, 3.0, 8.0, np.nan],
        "contraction bound": [30.0, np.inf, 9.0, 35.0, 8.0],
        "TV(pi, PL law)": [0.2, 0.0005, 0.1, 0.05, 0.3]})


def _holding():
    return pd.DataFrame({"exact inside CI": [True, False, True], "jumps": [3, 0, 5],
                         "steps simulated": [100, 400, 50], "rows scored": [7, 4, 9]})


def test_comparison_counts_the_cases_where_both_sides_are_known():
    """Counted row by row here: coupling within a factor 2 in rows 0 and 4 of 0, 1, 4; hitting
    below t_mix in rows 0 and 3 of 0, 1, 3 (ratios 2, 0.5, 5); the bound in rows 0, 3, 4, holding
    in 0 and 4 (ratios 3, 0.875, 1)."""
    hl = groundtruth.compare(_truth())
    assert (hl.cases, hl.coupling_cases, hl.coupling_near) == (5, 3, 2)
    assert (hl.hitting_cases, hl.hitting_below, hl.hitting_max_ratio) == (3, 2, 5.0)
    assert (hl.bound_cases, hl.bound_holds) == (3, 2)
    assert hl.bound_mean_ratio == pytest.approx((3 + 35 / 40 + 1) / 3)
    assert hl.holding_traps == 0
    hl = groundtruth.compare(_truth(), _holding())
    assert (hl.holding_traps, hl.holding_inside, hl.holding_left, hl.holding_steps) == (3, 2, 2, 550)
    none = groundtruth.compare(_truth().assign(**{"exact t_mix": np.nan}))
    assert none.coupling_cases == none.hitting_cases == none.bound_cases == 0 and np.isnan(none.hitting_max_ratio)


def test_the_chapters_summary_and_the_findings_line_say_the_same_counts():
    t = _truth()
    text = ground_truth_page.summary(t, "smoke")
    assert "contraction bound holds in 2 of 3 cases where the exact alpha is below one, on average 1.6 times" in text
    assert "within a factor 2 of the exact mixing time in 2 of 3 cases" in text
    assert "below the exact mixing time in 2 of 3 cases (by a factor of up to 5)" in text
    assert "ranges from 0.001 to 0.300 over the models and temperatures; 4 of 5 cases exceed 0.001." in text
    ok = ground_truth_page.summary(t.assign(**{"contraction bound": [30.0, np.inf, 9.0, 45.0, 8.0]}), "smoke")
    assert "holds in 3 of 3 cases" in ok
    # the findings page says the same clauses, word for word
    for clause in ground_truth_page.clauses(groundtruth.compare(t)):
        assert clause[1:] in text


def test_basin_summary_and_sentence_count_each_model_and_temperature():
    basins = pd.DataFrame({"model": ["a", "a", "a", "b"], "temperature": [0.5, 0.5, 1.0, 0.5],
                           "chain": [0, 1, 0, 2], "duration": [60, 200, 80, 500], "censored": [False, False, True, False],
                           "basin states": [1, 3, 2, 1], "conductance": [0.1, 0.2, 0.3, 0.4],
                           "exact mean exit time": [100.0, 100.0, 50.0, 4000.0]})
    s = groundtruth.basin_summary(basins)
    assert s[["model", "temperature", "traps"]].values.tolist() == [["a", 0.5, 2], ["a", 1.0, 1], ["b", 0.5, 1]]
    assert s.median_duration.tolist() == [130.0, 80.0, 500.0] and s.censored.tolist() == [0.0, 1.0, 0.0]
    text = ground_truth_page.basin_sentence(basins, 50)
    # closed traps: ratios 0.6, 2, 0.125 -> median 0.6, one in three longer, none under a tenth
    assert text.startswith("4 traps on the exact chains (1 still open when the run ended)")
    assert "has median 0.60" in text and "33% of them lasted longer" in text and "0 of 3 ended before" in text


def test_holding_times_run_the_deepest_traps_of_each_model_in_order(small_scorer):
    """Two restricted chains, two temperatures, the two deepest traps each: eight labelled rows,
    drawn from the generator in the order model, temperature (one holding_check after another)."""
    tabs = [({"model": "m", "tokens": "the dog ran", "n": 3}, exact.TabulatedScorer(small_scorer, 3)),
            ({"model": "m", "tokens": "the dog ran", "n": 2}, exact.TabulatedScorer(small_scorer, 2))]
    holding = Holding(temperatures=[0.2, 0.4], deepest=2, chains=20, steps=300)
    got = groundtruth.holding_checks(tabs, holding, torch.Generator().manual_seed(3), 0.9)
    assert len(got) == 8 and got.n.tolist() == [3] * 4 + [2] * 4
    gen = torch.Generator().manual_seed(3)
    for i, (label, tab) in enumerate(tabs):
        for j, T in enumerate(holding.temperatures):
            want = groundtruth.holding_check(tab, T, traps=2, chains=20, steps=300, gen=gen, level=0.9)
            part = got.iloc[4 * i + 2 * j: 4 * i + 2 * j + 2].reset_index(drop=True)
            pd.testing.assert_frame_equal(part.drop(columns=["model", "tokens", "n"]), want)


def test_holding_sentence_counts_and_names_the_deepest_trap():
    h = _holding().assign(model="m", tokens="a b", temperature=[0.1, 0.1, 0.2], chains=10, censored=[2, 10, 0],
                          **{"exact mean holding time": [50.0, 9e6, 10.0],
                             "simulated mean holding time": [55.0, np.inf, 10.0]})
    text = ground_truth_page.holding_sentence(h, Holding(deepest=1, temperatures=[0.1, 0.2], chains=10, steps=1000), 0.95)
    assert "inside the 95% interval of the simulated one in 2 of 3." in text
    assert "the largest relative error of the simulated mean is 10.0% (m on {a, b} at T = 0.1, exact mean 50 steps" in text
    assert "The deepest trap holds for 9e+06 steps on average (exact; m on {a, b} at T = 0.1), more than the budget" in text
    assert "In 1 case(s) no chain left" in text
    assert "simulated 550 chain-steps with 8 jumps and 20 scored rows, 27.5 steps per row" in text


def test_preprint_table_gives_each_ratio_range_from_the_cases_it_has():
    t = _truth().assign(**{"margin Delta": [1.0, np.nan, 2.0, 1.0, 1.0],
                           "exact holding time": [10.0, 1.0, 30.0, 4.0, 5.0],
                           "certified holding time": [5.0, 1.0, 10.0, 4.0, 0.0]})
    by_clique = pd.DataFrame({"clique": [2, 2, 4, 4], "sampler": ["k-site Gibbs", "independent parallel"] * 2,
                              "steps to mode": [2.0, 3.0, 2.0, 30.0]})
    df = ground_truth_page.preprint_table(t, _holding(), by_clique, "smoke", 0.95)
    col = "this run (smoke; a, b)"
    assert list(df.columns) == ["diagnostic", ground_truth_page.PREPRINT, col]
    assert df[col].tolist() == [
        "exact t_mix / estimate: 0.4 - 2",                  # 10/12, 20/50, 8/4
        "exact t_mix / median hitting time: 0.5 - 5",
        "exact / certified holding time: 1 - 3",             # row 4's 5/0 is infinite and left out
        "exact mean inside the simulated 95% interval in 2 of 3; 27.5 chain-steps per scored row by jumps",
        "steps ratio 15 at clique 4"]


def test_run_models_skips_what_cannot_be_had_and_labels_what_ran():
    runs = groundtruth.run_models(
        [{"name": "package:no-such-model", "tokens": ["a", "b"], "n": 2},
         {"name": "tiny-mlm", "tokens": ["the", "dog", "ran"], "n": 2}],
        RunSettings(torch.Generator().manual_seed(0), "cpu", "auto", "skip"), temperatures=[1.0, 3.0],
        **truth_settings(pairs=4, budget=40, rectangles=4, chains=4))
    notes = runs.notes
    assert len(notes) == 1 and notes[0].startswith("package:no-such-model skipped:")
    assert runs.truth[["model", "tokens", "n", "temperature", "states"]].values.tolist() == [
        ["tiny-mlm", "the dog ran", 2, 1.0, 9], ["tiny-mlm", "the dog ran", 2, 3.0, 9]]
    assert "hitting time (median)" in runs.truth and len(runs.described) == 1
    assert [label["n"] for label, _ in runs.tables] == [2] and len(runs.tables[0][1].chain.states) == 9
    from textglauber.scheduler import UnitFailed

    with pytest.raises(UnitFailed, match="model package:no-such-model, tokens a b, n = 2: ModelUnavailableError"):
        groundtruth.run_models([{"name": "package:no-such-model", "tokens": ["a", "b"], "n": 2}],
                               RunSettings(torch.Generator(), "cpu", "auto", "fail"), temperatures=[1.0],
                               **truth_settings(pairs=4, budget=40, rectangles=4, chains=4))
