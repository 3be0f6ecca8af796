"""Trap detection on planted trajectories, and trap classification by score margins."""
import numpy as np
import pandas as pd
import pytest
import torch

from textglauber import engine, exact, margins, traps, vocabulary
from textglauber.engine import ChainRun, ChainSpec
from textglauber.pages import traps as traps_page


def _walk(rng, steps, d=16):
    return rng.normal(size=(steps, d))


def test_a_planted_trap_is_found_with_its_exact_span():
    rng = np.random.default_rng(0)
    emb = _walk(rng, 2001)
    emb[700:1450] = emb[700]                       # constant from record 700 to 1449
    steps = np.arange(2001)
    c = traps.consecutive_drift(emb[:, None, :])[:, 0]
    found = traps.detect(steps, c, window=300, threshold=0.12)
    assert found == [(700, 1449)]


def test_recording_every_k_steps_keeps_step_units():
    rng = np.random.default_rng(1)
    emb = _walk(rng, 401)
    emb[100:250] = emb[100]
    steps = np.arange(401) * 10
    c = traps.consecutive_drift(emb[:, None, :])[:, 0]
    # the threshold is a rate per step: a drift near 1 per 10-step record is about 0.1 per step
    assert traps.detect(steps, c, window=300, threshold=0.012) == [(1000, 2490)]
    assert traps.detect(steps, c, window=300, threshold=0.12) == [(10, 4000)]


def test_step_drift_spreads_each_interval_over_its_steps():
    per = traps.step_drift(np.array([0, 2, 5, 6]), np.array([0.0, 0.4, 0.3, 0.0]))
    assert np.allclose(per, [0.2, 0.2, 0.1, 0.1, 0.1, 0.0])


def _one_move_per_interval(rng, steps, every, quiet):
    """A per-step trajectory that moves exactly once in every ``every``-step interval outside the
    quiet stretches (so a record every ``every`` steps sees every move) and never inside them."""
    emb = np.empty((steps + 1, 16))
    emb[0] = rng.normal(size=16)
    move_at = {int(k * every + rng.integers(1, every + 1)) for k in range(steps // every)}
    for u in range(1, steps + 1):
        still = any(a < u <= b for a, b in quiet) or u not in move_at
        emb[u] = emb[u - 1] if still else rng.normal(size=16)
    return emb


def test_the_same_trajectory_recorded_every_step_and_every_5_steps_gives_the_same_traps():
    # at most one move between records: the drift between records is the summed per-step drift,
    # exactly, so only the edges' 5-step resolution separates the two answers
    rng = np.random.default_rng(4)
    emb = _one_move_per_interval(rng, 3000, 5, quiet=[(600, 1400), (2000, 2500)])
    fine = traps.detect(np.arange(3001), traps.consecutive_drift(emb[:, None])[:, 0], window=200, threshold=0.05)
    coarse = traps.detect(np.arange(0, 3001, 5), traps.consecutive_drift(emb[::5, None])[:, 0], window=200,
                          threshold=0.05)
    assert len(fine) == len(coarse) == 2
    for (a, b), (a5, b5) in zip(fine, coarse):
        assert abs(a - a5) < 5 and abs(b - b5) < 5
    assert abs(fine[0][0] - 600) <= 5 and abs(fine[0][1] - 1400) <= 5


class _BasinScorer:
    """Uniform conditionals over {0, 1, 2} everywhere except around a two-state basin: the states
    that are 0 at every site but ``j``, where they hold 0 or 1. Inside it every site's conditional
    puts score ``delta`` on the basin's tokens, so the chain flips site j back and forth (a slow
    drift) and leaves rarely; outside it moves at nearly every step."""

    def __init__(self, n: int, j: int, delta: float):
        self.vocab = vocabulary.AllowedVocab(ids=torch.arange(3), tokens=("a", "b", "c"), vocab_size=3)
        self.n, self.j, self.delta, self.max_length = n, j, delta, n

    def scores(self, states, sites):
        b = len(states)
        free = torch.zeros_like(states, dtype=torch.bool)
        free[torch.arange(b), sites] = True
        free[:, self.j] = True
        basin_context = ((states == 0) | free).all(1) & ((sites == self.j) | (states[:, self.j] <= 1))
        s = torch.zeros(b, 3, dtype=torch.float64)
        s[basin_context, 0] = self.delta
        s[basin_context & (sites == self.j), 1] = self.delta
        return s


def _trapped(found, last):
    m = np.zeros(last + 1, bool)
    for a, b in found:
        m[a:b + 1] = True
    return m


@pytest.mark.slow
def test_one_chain_recorded_every_step_and_every_5_steps_finds_the_same_traps():
    """The engine run twice from the same seed, recorded at two spacings: the same steps are
    trapped up to the coarse record's resolution and the estimate where several moves fall
    between records. A threshold applied per record (the old statistic) is 5 times stricter on
    the coarse record and misses most of the basin visits."""
    scorer, n, steps = _BasinScorer(6, 2, 6.0), 6, 2000
    init = torch.randint(3, (6, n), generator=torch.Generator().manual_seed(0))
    runs = {r: engine.run(scorer, init, ChainSpec(temperature=1.0, steps=steps, record_every=r,
                                                  checkpoint_every=steps), seed=3) for r in (1, 5)}
    assert (runs[1].states[::5] == runs[5].states).all()                # the same chain
    hamming = lambda st: np.eye(3)[st].reshape(*st.shape[:-1], -1)      # 1 - cos = changed sites / n
    found = {r: [traps.detect(run.steps, traps.consecutive_drift(hamming(run.states))[:, b], 100, 0.03)
                 for b in range(len(init))] for r, run in runs.items()}
    fine = [_trapped(spans, steps) for spans in found[1]]
    coarse = [_trapped(spans, steps) for spans in found[5]]
    share = [f.mean() for f in fine]
    assert min(share) > 0.1 and max(share) < 0.9         # both regimes occur in every chain
    agree = [(f == c).mean() for f, c in zip(fine, coarse)]
    assert min(agree) > 0.95, (agree, share)
    for spans in found[1] + found[5]:
        assert all(e1 < s2 for (_, e1), (s2, _) in zip(spans, spans[1:]))       # disjoint, in order


def test_an_empty_catalogue_keeps_its_columns(small_scorer):
    ids = small_scorer.vocab.ids.numpy()
    rng = np.random.default_rng(5)
    states = ids[rng.integers(0, 3, size=(50, 2, 3))]
    run = ChainRun(steps=np.arange(50), states=states, gaps=None, sites=None,
                   spec=ChainSpec(temperature=1.0, steps=49), seed=0)
    emb = rng.normal(size=(50, 2, 8))                   # drift near 1 at every step: no trap
    cat = traps.catalogue(run, emb, small_scorer, window=10, threshold=0.12)
    assert len(cat) == 0 and list(cat.columns) == traps.COLUMNS
    assert cat[cat.chain == 0].empty and cat.chain.value_counts().empty


def test_no_flat_segment_no_trap():
    rng = np.random.default_rng(2)
    emb = _walk(rng, 3000)
    c = traps.consecutive_drift(emb[:, None, :])[:, 0]
    assert c[1:].min() > 0.12
    assert traps.detect(np.arange(3000), c, window=300, threshold=0.12) == []


def test_catalogue_classifies_an_all_argmax_state_as_perfect(small_scorer):
    states = torch.as_tensor(exact.enumerate_states(small_scorer.vocab.ids.numpy(), 3))
    gaps = margins.score_gaps(small_scorer, states)
    perfect = states[(gaps > 0).all(1)][0].numpy()
    other = states[(gaps <= 0).any(1)][0].numpy()
    rng = np.random.default_rng(3)
    # chain 0 sits in the perfect state, chain 1 in a non-argmax state, between random moves
    seq = rng.integers(0, 3, size=(900, 2, 3))
    for r in range(1, 900):                        # moves always change the state
        for b in range(2):
            while (seq[r, b] == seq[r - 1, b]).all():
                seq[r, b] = rng.integers(0, 3, size=3)
    ids = small_scorer.vocab.ids.numpy()[seq]
    ids[200:700, 0] = perfect
    ids[300:800, 1] = other
    run = ChainRun(steps=np.arange(900), states=ids, gaps=None, sites=None,
                   spec=ChainSpec(temperature=0.5, steps=899), seed=0)
    vocab_ids = np.sort(small_scorer.vocab.ids.numpy())
    index = exact.ExactChain(states=exact.enumerate_states(vocab_ids, 3), kernel=None, free=[0, 1, 2],
                             vocab_ids=vocab_ids).index(ids)
    emb = np.eye(27)[index]                        # one-hot state embedding: drift 1 for any move
    cat = traps.catalogue(run, emb, small_scorer, window=100, threshold=0.12).set_index("chain")
    assert cat.loc[0, "type"] == "perfect" and cat.loc[0, "state"] == perfect.tolist()
    assert cat.loc[1, "type"] == "approximate" and cat.loc[1, "state"] == other.tolist()
    assert (cat.loc[0, "start"], cat.loc[0, "end"]) == (200, 699)
    expected = 1 / margins.escape_bound(float(gaps[(gaps > 0).all(1)][0].min()), 3, 0.5)
    assert np.isclose(cat.loc[0, "predicted escape time (steps)"], expected)


def test_a_stay_shorter_than_the_window_is_not_a_trap():
    rng = np.random.default_rng(6)
    emb = _walk(rng, 1001)
    emb[400:460] = emb[400]                        # 59 quiet steps, quiet windows around them
    c = traps.consecutive_drift(emb[:, None, :])[:, 0]
    assert traps.detect(np.arange(1001), c, window=100, threshold=0.5) == []
    assert traps.detect(np.arange(1001), c, window=50, threshold=0.5) == [(400, 459)]


def test_the_catalogue_flags_traps_cut_by_the_run_at_either_end(small_scorer):
    """A stay that began before the first record, or outlasts the last, is cut by the run: its
    duration is a lower bound. Chain 0 is trapped from step 0, chain 1 until the last record."""
    states = exact.enumerate_states(small_scorer.vocab.ids.numpy(), 3)
    rng = np.random.default_rng(7)
    index = rng.integers(0, 27, size=(600, 2))
    for r in range(1, 600):                        # moves always change the state
        for b in range(2):
            while index[r, b] == index[r - 1, b]:
                index[r, b] = rng.integers(0, 27)
    index[:250, 0] = 4
    index[350:, 1] = 9
    run = ChainRun(steps=np.arange(600), states=states[index], gaps=None, sites=None,
                   spec=ChainSpec(temperature=0.5, steps=599), seed=0)
    cat = traps.catalogue(run, np.eye(27)[index], small_scorer, window=100, threshold=0.12).set_index("chain")
    assert (cat.loc[0, "start"], cat.loc[0, "end"]) == (0, 249) and (cat.loc[1, "start"], cat.loc[1, "end"]) == (350, 599)
    assert cat["present at step 0"].tolist() == [True, False]
    assert cat["censored"].tolist() == [False, True]


def test_only_perfect_traps_count_where_the_margin_bound_is_vacuous():
    """An approximate trap has no margin, so no bound to be vacuous: catalogues written before its
    predicted escape time was left empty hold 0 there, which read as 'below one step'."""
    old = pd.DataFrame({"type": ["perfect", "perfect", "approximate", "approximate"],
                        "predicted escape time (steps)": [0.02, 40.0, 0.0, 0.0]})
    assert traps.vacuous(old) == (1, 2)
    assert traps.vacuous(old.assign(**{"predicted escape time (steps)": [0.02, 40.0, np.nan, np.nan]})) == (1, 2)
    assert traps.vacuous(old[old.type == "approximate"]) == (0, 0)
    assert traps.vacuous(old.iloc[:0]) == (0, 0)


def test_an_approximate_trap_has_no_bound(small_scorer):
    """No margin, no predicted escape time: NaN, not 0 (which would read as a vacuous bound)."""
    states = exact.enumerate_states(small_scorer.vocab.ids.numpy(), 3)
    gaps = margins.score_gaps(small_scorer, torch.as_tensor(states))
    other = int(np.flatnonzero((gaps <= 0).any(1))[0])
    rng = np.random.default_rng(8)
    index = rng.integers(0, 27, size=(500, 1))
    for r in range(1, 500):
        while index[r, 0] == index[r - 1, 0]:
            index[r, 0] = rng.integers(0, 27)
    index[100:400, 0] = other
    run = ChainRun(steps=np.arange(500), states=states[index], gaps=None, sites=None,
                   spec=ChainSpec(temperature=0.5, steps=499), seed=0)
    cat = traps.catalogue(run, np.eye(27)[index], small_scorer, window=100, threshold=0.12)
    assert cat.type.tolist() == ["approximate"]
    assert cat[["escape bound per step", "predicted escape time (steps)"]].isna().all(axis=None)


# ------------------------------------------------------------------ the chapter's reading of the catalogue
def _run(states, every=1):
    return ChainRun(steps=np.arange(len(states)) * every, states=np.asarray(states), gaps=None, sites=None,
                    spec=ChainSpec(temperature=1.0, steps=(len(states) - 1) * every), seed=0)


def test_recording_notes_count_the_intervals_that_held_two_moves():
    # two chains, four intervals each: chain 0 changes 2, 0, 1, 3 positions; chain 1 changes 0, 0, 2, 1
    states = np.array([[[1, 1, 1], [1, 1, 1]], [[2, 2, 1], [1, 1, 1]], [[2, 2, 1], [1, 1, 1]],
                       [[2, 2, 3], [4, 4, 1]], [[5, 5, 5], [4, 4, 2]]])
    notes = traps_page.recording_notes(_run(states, every=5), record_every=5, threshold=0.001, window=100)
    assert notes[0] == ("Recorded every 5 steps; a window is quiet when its mean drift per step is below 0.001 over 100 "
                        "steps. The preprint's threshold of 0.12 comes without the number of steps its drift spans; "
                        "0.001 per step is 0.12 per 120 steps.")
    assert len(notes) == 2 and notes[1].startswith("Between consecutive records, 38% of the intervals")   # 3 of 8
    assert notes[1].endswith("trap edges are known to 5 steps.")
    single = traps_page.recording_notes(_run(states), record_every=1, threshold=0.01, window=10)
    assert len(single) == 1 and single[0].startswith("Recorded every 1 step;")


def test_chains_to_show_put_the_most_trapped_first():
    cat = pd.DataFrame({"chain": [5, 5, 5, 2, 2, 7]})
    assert traps_page.chains_to_show(cat, 8) == [5, 2, 0, 1]
    assert traps_page.chains_to_show(pd.DataFrame({"chain": [1]}), 8) == [1, 0, 2, 3]
    assert traps_page.chains_to_show(cat.iloc[:0], 3) == [0, 1, 2]
    assert traps_page.chains_to_show(pd.DataFrame({"chain": [2, 0]}), 3) == [2, 0, 1]


def test_cut_by_run_and_the_sentence_on_traps_cut_short():
    cat = pd.DataFrame({"censored": [True, True, False, False, False], "present at step 0": [True, False, True, False, False]})
    plot = cat.assign(**{"cut by the run": cat.apply(traps_page.cut_by_run, axis=1)})
    assert plot["cut by the run"].tolist() == ["from step 0 to the end", "still trapped at the end", "present at step 0",
                                               "inside the run", "inside the run"]
    assert set(plot["cut by the run"]) <= set(traps_page.CUT_MARKERS)
    assert traps_page.cut_sentence(plot) == ("3 of 5 traps were cut short by the run (2 still trapped at the end, 2 present at "
                                        "step 0): their durations are lower bounds.")


def test_trap_plots_mark_each_trap_and_each_kind_of_cut():
    import matplotlib.pyplot as plt

    steps = np.arange(0, 50, 5)
    pc = np.random.default_rng(0).normal(size=(10, 3, 2))
    cat = pd.DataFrame({"chain": [1, 1], "start": [10, 30], "end": [20, 45]})
    fig, axes = plt.subplots(1, 2)
    traps_page.plot_paths(axes, pc, steps, cat, [1, 2])
    heavy = [line for line in axes[0].lines if line.get_linewidth() == 2.5]
    assert [list(line.get_xdata()) for line in heavy] == [list(pc[2:5, 1, 0]), list(pc[6:10, 1, 0])]
    assert axes[1].get_title() == "chain 2" and not [line for line in axes[1].lines if line.get_linewidth() == 2.5]
    plt.close(fig)
    plot = pd.DataFrame({"type": ["perfect", "approximate"], "predicted escape time (steps)": [0.5, np.nan],
                         "duration": [100, 300], "mean gap": [2.0, -0.5], "cut by the run": ["inside the run",
                                                                                            "present at step 0"]})
    fig, axes = plt.subplots(1, 2)
    handles = traps_page.plot_durations(axes, plot)
    assert [h.get_label() for h in handles] == ["perfect", "approximate", "inside the run", "present at step 0"]
    assert [h.get_marker() for h in handles[2:]] == ["o", "s"]
    assert axes[0].get_xscale() == "log" and axes[1].get_yscale() == "log"
    plt.close(fig)
    fig, axes = plt.subplots(1, 2)
    traps_page.plot_durations(axes, plot.iloc[1:])
    assert [t.get_text() for t in axes[0].texts] == ["no perfect trap"]
    plt.close(fig)


def test_trajectories_hold_every_recorded_state_once():
    rng = np.random.default_rng(1)
    states = rng.integers(0, 50, size=(4, 3, 5))
    table = traps.trajectories(_run(states, every=10))
    assert len(table) == 12 and list(table.columns) == ["chain", "step", "state"]
    for row in table.itertuples():
        assert row.state == states[row.step // 10, row.chain].tolist()
    assert table.chain.tolist() == [0] * 4 + [1] * 4 + [2] * 4
