"""Maximal coupling and coupled chains against exact answers."""
import numpy as np
import pytest
import torch

from textglauber import coupling, engine, exact, semantics, crossover
from conftest import JointScorer


def test_maximal_coupling_has_the_right_marginals_and_disagreement():
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([0.5, 0.3, 0.2, 0.0])
    q = torch.tensor([0.1, 0.3, 0.2, 0.4])
    m = 200_000
    x, y = engine.maximal_coupling(p.expand(m, -1), q.expand(m, -1), torch.rand((m, 3), generator=g, dtype=torch.float64))
    fx = torch.bincount(x, minlength=4).double() / m
    fy = torch.bincount(y, minlength=4).double() / m
    torch.testing.assert_close(fx, p.double(), atol=4e-3, rtol=0)
    torch.testing.assert_close(fy, q.double(), atol=4e-3, rtol=0)
    tv = 0.5 * float((p - q).abs().sum())
    assert float((x != y).double().mean()) == pytest.approx(tv, abs=4e-3)
    # equal laws: the two draws are always equal
    x2, y2 = engine.maximal_coupling(p.expand(1000, -1), p.expand(1000, -1), torch.rand((1000, 3), generator=g, dtype=torch.float64))
    assert torch.equal(x2, y2)


@pytest.fixture(scope="module")
def table(small_scorer):
    return exact.TabulatedScorer(small_scorer, 3)


def _all_pairs(table, reps):
    s = torch.as_tensor(table.chain.states)
    k = len(s)
    xi, yi = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
    xi, yi = np.repeat(xi.ravel(), reps), np.repeat(yi.ravel(), reps)
    return s[xi], s[yi], xi, yi


def test_identical_starts_are_coupled_at_once(table):
    s = torch.as_tensor(table.chain.states[:5])
    run = engine.couple(table, s, s.clone(), 1.0, 10, torch.Generator().manual_seed(0))
    assert (run.tau == 0).all()


@pytest.fixture(scope="module")
def two_basins(tiny_mlm):
    """Three tokens on which the tiny MLM has two all-argmax states ("ran field river" and
    "river river river", with score margins 0.74 and 0.41): a chain with two traps at low T."""
    from textglauber import models, vocabulary

    v = vocabulary.allowed_vocabulary(tiny_mlm.tokenizer, tokens=["ran", "river", "field"])
    return exact.TabulatedScorer(models.MaskedLMScorer(tiny_mlm, v), 3)


def test_coupling_time_falls_with_temperature(two_basins):
    from textglauber import margins

    states = torch.as_tensor(two_basins.chain.states)
    perfect = states[(margins.score_gaps(two_basins, states) > 0).all(1)]
    assert len(perfect) == 2
    x, y, _, _ = _all_pairs(two_basins, 2)
    means = []
    for T in (0.02, 0.3, 1.0, 3.0):
        run = engine.couple(two_basins, x, y, T, 300, torch.Generator().manual_seed(1))
        means.append(np.mean(np.where(run.censored, 300, run.tau)))
        if T == 3.0:
            assert not run.censored.any()                       # fast: every pair couples in budget
    assert all(a >= b for a, b in zip(means, means[1:])), means
    # at T tiny, pairs started in the two different traps never meet within the budget
    stuck = engine.couple(two_basins, perfect[:1].repeat(20, 1), perfect[1:].repeat(20, 1), 0.02, 300,
                          torch.Generator().manual_seed(2))
    assert stuck.censored.all()


def test_exact_mixing_time_lies_below_the_coupling_bound(table, small_scorer):
    """d(t) <= max_{x,y} P(tau_xy > t): the exact t_mix(1/4) is at most the first t where the
    worst start pair's estimated tail drops below 1/4 (with sampling slack)."""
    T, reps = 1.0, 60
    x, y, xi, yi = _all_pairs(table, reps)
    run = engine.couple(table, x, y, T, 400, torch.Generator().manual_seed(2))
    tau = np.where(run.censored, np.inf, run.tau).reshape(-1, reps)
    t_grid = np.arange(0, 401)
    worst_tail = np.array([(tau > t).mean(1).max() for t in t_grid])
    bound = int(t_grid[np.argmax(worst_tail <= 0.25 - 0.1)])     # 0.1: sampling slack on 60 replicates
    t_mix = exact.mixing_steps(exact.glauber_kernel(small_scorer, 3, T).kernel, 0.25)
    assert t_mix <= bound


def test_hitting_times_respect_censoring():
    steps = np.array([0, 10, 20, 30])
    d = np.array([[0, 0, 0], [0.1, 0.5, 0.0], [0.4, 0.6, 0.1], [0.2, 0.7, 0.2]])
    tau, cens = semantics.hitting_times(steps, d, 0.3)
    assert np.isnan(tau[2]) and cens.tolist() == [False, False, True]
    assert tau[:2].tolist() == [20.0, 10.0]


def _alternating(a, b):
    """passages_for giving a, b, a, b, ...: grid_experiment pairs even with odd rows."""
    return lambda n, count: torch.tensor([a, b] * (count // 2))


def test_grid_experiment_with_uniform_conditionals_is_a_coupon_collector():
    """Uniform conditionals: the maximal coupling writes the same token into both chains, so a pair
    that differs at every site couples when every site has been drawn once: E tau = n H_n at any T."""
    n, k, pairs = 4, 2, 300
    sc = JointScorer(np.arange(k), n, np.zeros(k ** n))
    df = coupling.grid_experiment(sc, _alternating([0] * n, [1] * n), [n], [0.5, 2.0], pairs=pairs, budget=200,
                                  gen=torch.Generator().manual_seed(0))
    assert len(df) == 2 * pairs and set(df.temperature) == {0.5, 2.0} and not df.censored.any()
    h = sum(1 / j for j in range(1, n + 1))
    var = n ** 2 * sum(1 / j ** 2 for j in range(1, n + 1)) - n * h
    for _, g in df.groupby("temperature"):
        assert g.tau.mean() == pytest.approx(n * h, abs=4 * np.sqrt(var / pairs))
        assert g.tau.min() >= n


def test_grid_experiment_censors_pairs_that_cannot_move():
    """A joint law on two far-apart states: from either, every single-site change has no mass, so
    the chains never move, never meet and every pair is censored with tau = NaN."""
    n, k = 4, 2
    sc = JointScorer(np.arange(k), n, np.zeros(k ** n))
    log_mu = np.full(k ** n, -1e4)
    log_mu[sc.chain.index(np.array([[0] * n, [1] * n]))] = 0.0
    sc.log_mu = log_mu
    df = coupling.grid_experiment(sc, _alternating([0] * n, [1] * n), [n], [1.0, 3.0], pairs=5, budget=50,
                                  gen=torch.Generator().manual_seed(0))
    assert len(df) == 10 and df.censored.all() and df.tau.isna().all()


def _old_trend(cells):
    """The chapter's comparison before this fix: lengths where no pair coupled were dropped."""
    ts = [g[g["median"].notna()].temperature.min() for _, g in cells.groupby("n")]
    ts = [t for t in ts if not np.isnan(t)]
    return "rises" if ts[-1] > ts[0] else ("stays the same" if ts[-1] == ts[0] else "falls")


def test_fast_threshold_reads_a_censored_longest_length_as_beyond_the_budget():
    import pandas as pd

    temps = [0.5, 1.0, 2.0]
    med = {4: [np.nan, 30, 10], 8: [np.nan, np.nan, 40], 16: [np.nan, np.nan, np.nan]}
    cells = pd.DataFrame([{"n": n, "temperature": T, "median": m} for n, ms in med.items() for T, m in zip(temps, ms)])
    boundary = crossover.fast_threshold(cells)
    assert boundary == [(4, 1.0), (8, 2.0), (16, float("inf"))]
    assert _old_trend(cells) == "rises"
    assert _old_trend(cells[cells.n != 8]) == "stays the same"       # the old reading of the same trend
    assert crossover.fast_threshold(cells[cells.n != 8]) == [(4, 1.0), (16, float("inf"))]     # beyond the grid
    # a cell that couples below a censored one does not count: the threshold is where coupling holds upwards
    gap = pd.DataFrame({"n": 4, "temperature": temps, "median": [5.0, np.nan, 3.0]})
    assert crossover.fast_threshold(gap) == [(4, 2.0)]
    both = pd.DataFrame({"n": [4, 8], "temperature": [1.0, 1.0], "median": [np.nan, np.nan]})
    assert crossover.fast_threshold(both) == [(4, float("inf")), (8, float("inf"))]      # no fast temperature anywhere


def test_couple_never_touches_a_frozen_prefix(table):
    """prefix_len = n - 1 leaves one free site; both chains then see the same context there, so the
    maximal coupling joins every pair at its first step (tau = 1 exactly, which fails if a prefix
    site is ever drawn). Pairs that differ inside the prefix can never join, while the same pairs
    with nothing frozen do."""
    s = torch.as_tensor(table.chain.states)
    g = torch.Generator().manual_seed(3)
    xi, yi = np.nonzero(((s[:, None, :2] == s[None, :, :2]).all(-1) & (s[:, None, 2] != s[None, :, 2])).numpy())
    run = engine.couple(table, s[xi], s[yi], 1.0, 50, g, prefix_len=2)
    assert len(xi) == 54 and (run.tau == 1).all()
    xi, yi = np.nonzero((s[:, None, 0] != s[None, :, 0]).numpy())
    frozen = engine.couple(table, s[xi], s[yi], 1.0, 200, g, prefix_len=1)
    assert frozen.censored.all()
    free = engine.couple(table, s[xi], s[yi], 1.0, 200, g)
    assert (~free.censored).mean() > 0.9


def test_budget_comparison_reads_both_budgets_from_one_run():
    """Six pairs at n = 4 (budget 25 sweeps = 100 steps) and two at n = 8 (200 steps), against a
    reference of 2.5 sweeps (10 and 20 steps): the shares and plain costs worked out by hand."""
    import pandas as pd

    df = pd.DataFrame({"n": [4] * 6 + [8] * 2, "tau": [3, 12, 50, np.nan, 10, 0, 99, np.nan],
                       "censored": [False, False, False, True, False, False, False, True],
                       "budget": [100] * 6 + [200] * 2, "run_rows": [500] * 6 + [300] * 2})
    t = coupling.budget_comparison(df, 2.5).set_index("n")
    # n = 4: beyond 10 steps are 12, 50 and the censored pair: 3 of 6; beyond 100 only the censored one
    assert t.loc[4, "censored at reference"] == pytest.approx(3 / 6) and t.loc[4, "censored at budget"] == pytest.approx(1 / 6)
    assert t.loc[4, "plain rows at reference"] == 2 * (3 + 10 + 10 + 10 + 10 + 0)
    assert t.loc[4, "plain rows at budget"] == 2 * (3 + 12 + 50 + 100 + 10 + 0)
    # n = 8: the reference is 20 steps, so both pairs are beyond it; the run's budget is 200 steps
    assert t.loc[8, "censored at reference"] == 1.0 and t.loc[8, "plain rows at budget"] == 2 * (99 + 200)
    assert t.loc[8, "plain rows at reference"] == 2 * (20 + 20)
    assert t.loc["all", "engine rows at budget"] == 800 and t.loc["all", "pairs"] == 8
    assert t.loc["all", "censored at reference"] == pytest.approx(5 / 8)
    assert t.loc["all", "plain rows at reference"] == t.loc[4, "plain rows at reference"] + t.loc[8, "plain rows at reference"]
    assert t.loc[4, "engine / plain at reference"] == pytest.approx(500 / 86)
    with pytest.raises(ValueError, match="reference_sweeps"):
        coupling.budget_comparison(df, 30)