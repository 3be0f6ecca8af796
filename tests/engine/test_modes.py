"""The engine's memo, jump and auto modes against exact answers on enumerable chains.

Every statistical check is a test at level ALPHA = 1e-3 with a fixed seed, and each one is shown
to reject a deliberately wrong engine (a wrong holding probability, a jump that may redraw the
current token, a cache that survives a change of state) with the same test function.
"""
import math

import numpy as np
import pytest
import scipy.stats as st
import torch

from conftest import CountingScorer, JointScorer
from textglauber import coupling, engine, exact, groundtruth, models, stats, vocabulary
from textglauber.engine import ChainSpec

ALPHA = 1e-3


@pytest.fixture(autouse=True)
def one_thread():
    """These tests run many steps on tiny tensors; a second thread only adds waits on a busy host."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---------------------------------------------------------------- test statistics
def chi2_pvalue(counts, probs, min_expected=5.0) -> float:
    """Pearson's goodness of fit of counts to the law probs; cells expected below min_expected
    are pooled into one (a count in a cell of probability 0 rejects outright)."""
    counts = np.asarray(counts, float)
    e = counts.sum() * np.asarray(probs, float) / np.sum(probs)
    small = e < min_expected
    if small.any():
        counts = np.append(counts[~small], counts[small].sum())
        e = np.append(e[~small], e[small].sum())
    if (counts[e == 0] > 0).any():
        return 0.0
    counts, e = counts[e > 0], e[e > 0]
    return float(st.chi2.sf(((counts - e) ** 2 / e).sum(), len(e) - 1))


def two_sample_pvalue(a, b, bins=10) -> float:
    """Chi-square test of homogeneity of two samples of times (inf = censored, its own cell), on
    cells cut at the pooled sample's quantiles."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    pooled = np.concatenate([a, b])
    edges = np.unique(np.quantile(pooled[np.isfinite(pooled)], np.linspace(0, 1, bins + 1)[1:-1]))
    cells = lambda v: np.bincount(np.where(np.isfinite(v), np.searchsorted(edges, v, side="right"), len(edges) + 1),
                                  minlength=len(edges) + 2)
    table = np.stack([cells(a), cells(b)])
    table = table[:, table.sum(0) > 0]
    return float(st.chi2_contingency(table)[1])


def law_at_step_pvalue(scorer, ex, P, T, x, t, mode, chains=4000, seed=0) -> float:
    """Many chains from state x for t steps: their states at t against row x of the exact P^t."""
    start = torch.as_tensor(ex.states[x]).repeat(chains, 1)
    r = engine.run(scorer, start, ChainSpec(temperature=T, steps=t, record_every=t, checkpoint_every=t,
                                            mode=mode, prefix_len=ex.free[0]), seed=seed)
    counts = np.bincount(ex.index(r.states[-1]), minlength=len(ex.states))
    return chi2_pvalue(counts, np.linalg.matrix_power(P, t)[x])


def holding_pvalue(scorer, ex, P, T, x, mode, chains=3000, steps=80, seed=0) -> float:
    """Chains started in x: the step at which each first leaves x against the geometric law with
    stay probability P(x, x), cells 1..K and 'more than K' (censored chains fall there)."""
    start = torch.as_tensor(ex.states[x]).repeat(chains, 1)
    r = engine.run(scorer, start, ChainSpec(temperature=T, steps=steps, mode=mode, checkpoint_every=steps),
                   seed=seed)
    left = (r.states[1:] != r.states[0][None]).any(-1)
    first = np.where(left.any(0), left.argmax(0) + 1, steps + 1)
    stay = P[x, x]
    k_max = max(k for k in range(1, steps + 1) if chains * stay ** (k - 1) * (1 - stay) >= 5)
    counts = np.bincount(np.minimum(first, k_max + 1), minlength=k_max + 2)[1:]
    probs = np.append(stay ** np.arange(k_max) * (1 - stay), stay ** k_max)
    return chi2_pvalue(counts, probs)


def stationary_pvalue(run, ex, pi, burn, min_pi=0.01) -> float:
    """Long-run frequencies against the exact stationary law: per state with pi >= min_pi, a t-test
    of the mean over independent chains of each chain's own visit frequency, Bonferroni-combined."""
    idx = ex.index(run.states[run.steps >= burn])                      # (R, B)
    freq = np.stack([np.bincount(idx[:, b], minlength=len(pi)) / len(idx) for b in range(idx.shape[1])])
    keep = pi >= min_pi
    mean, se = freq.mean(0)[keep], freq.std(0, ddof=1)[keep] / np.sqrt(len(freq))
    tstat = np.abs(mean - pi[keep]) / np.maximum(se, 1e-12)
    return float(min(1.0, keep.sum() * 2 * st.t.sf(tstat, len(freq) - 1).min()))


def kernel(scorer, n, T, prefix=None):
    ex = exact.glauber_kernel(scorer, n, T, prefix=prefix)
    return ex, np.asarray(ex.kernel)


# ---------------------------------------------------------------- scorers
class RowCounter(CountingScorer):
    """Counts the rows a scorer is asked for (the engine's model work), with the cost of one round."""

    def __init__(self, inner):
        super().__init__(inner)
        self.round_cost_rows = engine.round_cost(inner, inner.max_length)


@pytest.fixture(scope="module")
def table(small_scorer):
    """The tiny MLM on {the, dog, ran}, n = 3: 27 states, every score from one table."""
    return exact.TabulatedScorer(small_scorer, 3)


@pytest.fixture(scope="module")
def basins(tiny_mlm):
    """The tiny MLM on {ran, river, field}, n = 3: two all-argmax states (two traps at low T)."""
    v = vocabulary.allowed_vocabulary(tiny_mlm.tokenizer, tokens=["ran", "river", "field"])
    return exact.TabulatedScorer(models.MaskedLMScorer(tiny_mlm, v), 3)


@pytest.fixture(scope="module")
def rxn_table():
    """A real packaged model restricted to {C, c, O, N} at n = 3 (64 states), as in chapter 6."""
    try:
        lm = models.load("package:rxnmapper-albert", device="cpu", dtype="float32")
    except models.ModelUnavailableError as exc:
        pytest.skip(str(exc))
    sc = models.MaskedLMScorer(lm, vocabulary.allowed_vocabulary(lm.tokenizer, tokens=["C", "c", "O", "N"]))
    return exact.TabulatedScorer(sc, 3)


def trap_joint(seed=0, depth=12.0):
    """k = 3 tokens, n = 4, random log-weights with one state raised by ``depth`` (tabulated): at
    T = 0.25 that state is a perfect trap every site of which is its argmax by a wide margin."""
    k, n = 3, 4
    log_mu = np.random.default_rng(seed).normal(size=k ** n)
    log_mu[40] += depth
    return exact.TabulatedScorer(JointScorer(np.arange(k), n, log_mu), n), 40


# ---------------------------------------------------------------- wrong engines
@pytest.fixture
def wrong(monkeypatch):
    """Deliberately wrong engines, one at a time, for showing that a check can fail."""
    leave = engine.leave_probability

    def make(kind):
        if kind == "redraws current token":               # a jump may write x_i again
            monkeypatch.setattr(engine.jump, "restricted", lambda p, pos: p.clone())
        elif kind == "wrong holding probability":          # 1 - pi_i(x_i) distorted state by state
            monkeypatch.setattr(engine.cache, "leave_probability", lambda s, pos, T: leave(s, pos, T) ** 0.5)
        elif kind == "cache survives a move":
            monkeypatch.setattr(engine.SiteCache, "enter", lambda self, units, states: None)
        elif kind == "pair holds as its first member":     # the pair's leave probability of X alone
            monkeypatch.setattr(engine.pairs, "pair_leave", lambda p, q, xp, yp: engine.without(p, xp).sum(-1))
        elif kind == "pair move not conditioned":          # the unconditioned coupling may keep (x_i, y_i)
            monkeypatch.setattr(engine.pairs, "pair_move", lambda p, q, xp, yp, u: engine.maximal_coupling(p, q, u[:, :3]))
        else:
            raise KeyError(kind)
    return make


# ---------------------------------------------------------------- memo: the plain trajectory
def set_memo_window(monkeypatch, steps: int) -> None:
    """The memo window, where both its readers look it up: the memo mode's windows and auto's policy."""
    monkeypatch.setattr(engine.memo, "MEMO_WINDOW", steps)
    monkeypatch.setattr(engine.policy, "MEMO_WINDOW", steps)


def _same_run(a, b) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f), equal_nan=True) for f in ("steps", "states", "sites", "gaps"))


@pytest.mark.parametrize("T, prefix", [(0.3, 0), (1.0, 0), (0.5, 1)])
def test_memo_gives_the_plain_trajectory_bit_for_bit(table, T, prefix):
    """Same seed, tabulated scorer: memo's states, sites and gaps equal plain's exactly, with
    fewer rows scored; a memo whose cache survives a change of state does not (next test)."""
    g = torch.Generator().manual_seed(int(10 * T) + prefix)
    init = table.vocab.ids[torch.randint(3, (64, 3), generator=g)]
    spec = dict(temperature=T, steps=200, record_every=3, record_gaps=True, prefix_len=prefix, checkpoint_every=70)
    counted = {m: RowCounter(table) for m in ("plain", "memo")}
    runs = {m: engine.run(counted[m], init, ChainSpec(**spec, mode=m), seed=4) for m in counted}
    assert _same_run(runs["plain"], runs["memo"])
    assert counted["plain"].rows == 64 * 200
    assert counted["memo"].rows < 0.8 * counted["plain"].rows


class CallCounter(RowCounter):
    """Also the largest call (the base class counts the calls)."""

    def __init__(self, inner):
        super().__init__(inner)
        self.most = 0

    def scores(self, states, sites):
        self.most = max(self.most, len(sites))
        return super().scores(states, sites)


@pytest.mark.parametrize("window", [1, 7, 256])
def test_memo_chains_on_their_own_clocks_keep_the_plain_trajectory_in_fewer_rounds(table, monkeypatch, window):
    """Within a window of MEMO_WINDOW steps each memo chain runs ahead through the steps its cache
    answers and waits for a row; windows that end inside a checkpoint chunk and a recording
    interval still give plain's states, sites and gaps bit for bit, the same generator state at
    the end (a second run continues identically), and, past one step per window, fewer scorer
    calls than steps."""
    set_memo_window(monkeypatch, window)
    init = table.vocab.ids[torch.randint(3, (32, 3), generator=torch.Generator().manual_seed(window))]
    spec = dict(temperature=0.4, steps=150, record_every=4, record_gaps=True, checkpoint_every=50)
    counted = {m: CallCounter(table) for m in ("plain", "memo")}
    runs = {m: engine.run(counted[m], init, ChainSpec(**spec, mode=m), seed=9) for m in counted}
    assert _same_run(runs["plain"], runs["memo"])
    assert counted["plain"].calls == 150 and counted["memo"].calls <= 150
    assert counted["memo"].rows < counted["plain"].rows


def test_memo_rounds_fall_with_the_window_where_chains_hold(basins, monkeypatch):
    """Near the two traps of the basins chain (T = 0.3) most steps need no row: chains that wait
    for one another only once per window make far fewer scorer calls than steps, and fewer than
    with a window of one step (a call at every step where any chain needs a row): 126 against 388
    when this test was written. Moves score their rows here (no remembered tokens), as a move to
    a token beyond the few remembered does; with its three tokens remembered, this chain needs a
    row per (state, site) and nothing else."""
    monkeypatch.setattr(engine.cache, "MOVE_TOKENS", 0)
    init = basins.vocab.ids[torch.randint(3, (16, 3), generator=torch.Generator().manual_seed(1))]
    calls = {}
    for window in (1, 256):
        set_memo_window(monkeypatch, window)
        counted = CallCounter(basins)
        engine.run(counted, init, ChainSpec(temperature=0.3, steps=400, mode="memo"), seed=3)
        calls[window] = counted.calls
    assert calls[1] <= 400 and calls[256] < 0.5 * calls[1]


def test_auto_that_stays_on_memo_makes_about_memo_s_calls(basins, monkeypatch):
    """Near the basins chain's traps (T = 0.3) auto looks for AUTO_FIRST steps and then stays on
    memo for a whole window, so it makes at most AUTO_FIRST calls more than memo over the same
    steps (a split stretch costs at most the rounds of its parts). Rounds and a memo step's own
    work are priced at nothing here, so that auto weighs rows alone and keeps memo. The bound can fail:
    auto segments of 16 steps, each ending with the chains in step, make more calls than that.
    Moves score their rows (no remembered tokens), so that there are calls to count."""
    monkeypatch.setattr(engine.cache, "MOVE_TOKENS", 0)
    init = basins.vocab.ids[torch.randint(3, (16, 3), generator=torch.Generator().manual_seed(1))]
    spec = dict(temperature=0.3, steps=400, record_every=400)

    def counted_run(mode):
        counted = CallCounter(basins)
        counted.round_cost_rows = counted.summary_cost_rows = counted.step_cost_rows = 0.0
        return engine.run(counted, init, ChainSpec(**spec, mode=mode), seed=3), counted.calls

    _, memo_calls = counted_run("memo")
    r, auto_calls = counted_run("auto")
    assert r.modes == [["memo", 400]]
    assert auto_calls <= memo_calls + engine.policy.AUTO_FIRST
    set_memo_window(monkeypatch, 16)
    r, short_calls = counted_run("auto")
    assert r.modes == [["memo", 400]] and short_calls > memo_calls + engine.policy.AUTO_FIRST


def _top_tokens(scorer, k: int):
    """(state, site) -> the ids of the k highest-scoring tokens of that row, from the scorer itself."""
    known = {}

    def top(x, i):
        if (x.tobytes(), i) not in known:
            s = scorer.scores(torch.as_tensor(x)[None].long(), torch.tensor([i]))[0]
            ids = scorer.vocab.ids[torch.topk(s, min(k, len(s))).indices] if k else torch.zeros(0)
            known[x.tobytes(), i] = set(ids.tolist())
        return known[x.tobytes(), i]
    return top


def _rows_needed(run, share: bool, carry: bool = True, top=None) -> int:
    """Rows a memo engine must score along a plain run, counted from the run alone (one step per
    round, every chain in step): a step needs the row of (state, site) when that row was never
    scored before (``share``: by any chain at any earlier step, in any state visited; otherwise by
    this chain since its last move), or when its chain moves there to a token that is not among
    ``top(state, site)`` (the tokens whose intervals the cache keeps; none if not given). Chains at
    one state and site in the same step share a row where ``share``. ``carry``: a chain that moves
    at site i from x to y knows (y, i) from then on, since x and y differ only at i and the
    conditional at i does not read x_i."""
    seen, rows = set(), 0
    mine = [set() for _ in range(run.states.shape[1])]
    for t in range(len(run.sites)):
        need, carried = set(), set()
        for b in range(run.states.shape[1]):
            x, i = run.states[t, b].tobytes(), int(run.sites[t, b])
            y = run.states[t + 1, b].tobytes()
            moves = x != y
            known = (x, i) in seen if share else (x, i) in mine[b]
            drawn = known and top is not None and int(run.states[t + 1, b, i]) in top(run.states[t, b], i)
            if (moves and not drawn) or not known:
                need.add((x, i) if share else (b, x, i))
            new = {(y, i)} if carry else set()
            mine[b] = new if moves else mine[b] | {(x, i)}
            carried |= new if moves else set()
        if share:
            seen |= need | carried
        rows += len(need)
    return rows


@pytest.mark.parametrize("chains, window", [(1, 256), (16, 1)])
def test_memo_remembers_states_it_left_and_shares_them_across_chains(basins, monkeypatch, chains, window):
    """On the basins chain at T = 0.3, chains go back and forth between a few states. The memo mode
    keeps every state's scored rows after a chain leaves it, for any chain that comes back or
    arrives: its rows equal the count read off the plain run (a row per move, and per (state,
    site) never scored before), which is well below what a memo that forgets a state on leaving
    would score; the trajectory is still plain's bit for bit. One chain on its own clock, and 16
    chains in step (a window of one step, where the order of rounds is the plain order)."""
    set_memo_window(monkeypatch, window)
    init = basins.vocab.ids[torch.randint(3, (chains, 3), generator=torch.Generator().manual_seed(5))]
    spec = dict(temperature=0.3, steps=600, record_every=1, record_gaps=True)
    plain = engine.run(basins, init, ChainSpec(**spec, mode="plain"), seed=2)
    counted = RowCounter(basins)
    memo = engine.run(counted, init, ChainSpec(**spec, mode="memo"), seed=2)
    assert _same_run(plain, memo)
    top = _top_tokens(basins, engine.cache.MOVE_TOKENS)
    assert counted.rows == _rows_needed(plain, share=True, top=top)
    assert counted.rows < 0.7 * _rows_needed(plain, share=False, top=top)


def test_memo_keeps_the_row_a_chain_moved_by_for_the_state_it_moved_to(basins, monkeypatch):
    """The count can fail: a memo that does not carry the row of a move into the new state keeps
    plain's trajectory but scores the rows counted without the carry, more than with it."""
    set_memo_window(monkeypatch, 1)
    monkeypatch.setattr(engine.cache, "MOVE_TOKENS", 0)       # every move scores its row, and carries it
    monkeypatch.setattr(engine.memo, "carry", lambda *a: None)
    init = basins.vocab.ids[torch.randint(3, (16, 3), generator=torch.Generator().manual_seed(5))]
    spec = dict(temperature=0.3, steps=600, record_every=1, record_gaps=True)
    plain = engine.run(basins, init, ChainSpec(**spec, mode="plain"), seed=2)
    counted = RowCounter(basins)
    assert _same_run(plain, engine.run(counted, init, ChainSpec(**spec, mode="memo"), seed=2))
    assert counted.rows == _rows_needed(plain, share=True, carry=False) > _rows_needed(plain, share=True)


@pytest.mark.parametrize("tokens", [1, 2])
def test_memo_moves_to_a_remembered_token_without_its_row(basins, monkeypatch, tokens):
    """A memo chain keeps, with each row, the intervals of its ``MOVE_TOKENS`` most likely tokens:
    a step at a known site whose uniform falls in one of them moves there with no model call. With
    one or two of the three tokens remembered, 16 chains at T = 0.3 keep plain's trajectory and
    gaps bit for bit and score the rows counted off the plain run, where a move needs its row
    unless its new token is among the row's top ones (ranked by the scorer itself); remembering
    fewer (none: every move scores its row) gives a larger count, so the count can fail."""
    set_memo_window(monkeypatch, 1)
    monkeypatch.setattr(engine.cache, "MOVE_TOKENS", tokens)
    init = basins.vocab.ids[torch.randint(3, (16, 3), generator=torch.Generator().manual_seed(5))]
    spec = dict(temperature=0.3, steps=600, record_every=1, record_gaps=True)
    plain = engine.run(basins, init, ChainSpec(**spec, mode="plain"), seed=2)
    counted = RowCounter(basins)
    assert _same_run(plain, engine.run(counted, init, ChainSpec(**spec, mode="memo"), seed=2))
    assert counted.rows == _rows_needed(plain, share=True, top=_top_tokens(basins, tokens))
    assert counted.rows < _rows_needed(plain, share=True, top=_top_tokens(basins, tokens - 1))


def test_leave_probability_has_full_relative_precision_for_every_token_of_a_row():
    """1 - pi(a | .) for several tokens a of each row from one softmax, against an independent
    log-space form exp(logsumexp over the other tokens - logsumexp over all), to 1e-12 relative,
    including a trap row where the argmax holds all but about 1e-13 and rows where no token
    holds half; a token not in A (-1) gives the row's total."""
    g = torch.Generator().manual_seed(0)
    s = torch.randn((6, 50), generator=g, dtype=torch.float64) * 3
    s[0, 7] = s[0].max() + 8.0                          # at T = 0.25: the others hold under 1e-12
    T = 0.25
    pos = torch.stack([torch.arange(6) % 50, torch.full((6,), 7), s.argmax(-1), torch.randint(50, (6,), generator=g)], 1)
    got = engine.leave_probability(s, pos, T)
    z = s / T
    for r in range(6):
        for j in range(pos.shape[1]):
            others = torch.cat([z[r, :pos[r, j]], z[r, pos[r, j] + 1:]])
            want = math.exp(float(torch.logsumexp(others, 0) - torch.logsumexp(z[r], 0)))
            assert abs(float(got[r, j]) - want) <= 1e-12 * want, (r, j)
    assert float(got[0, 1]) < 1e-10
    assert torch.equal(engine.leave_probability(s, pos[:, 2], T), got[:, 2])
    assert engine.leave_probability(s[:0], pos[:0], T).shape == (0, 4)
    assert torch.allclose(engine.leave_probability(s, torch.full((6,), -1), T), torch.ones(6, dtype=torch.float64))


def slope_trap(n=9, k=3, d=1.0):
    """A joint law on k^n states falling by d per site away from the all-zero state: at T = 0.25 a
    chain stays there, and where it has stepped away it stays a while in a state it has not seen
    (a step back is likely only at the one site it changed), visiting its other sites."""
    states = exact.enumerate_states(np.arange(k), n)
    return JointScorer(np.arange(k), n, -d * (np.asarray(states) != 0).sum(1))


@pytest.mark.parametrize("tokens, case", [(0, "table"), (2, "table"), (4, "slope")])
def test_memo_cache_writes_for_each_site_what_a_fresh_row_gives(small_scorer, monkeypatch, tokens, case):
    """Over a memo stretch in which chains move (rows scored, some ahead of need, carried into
    the new state, and moves drawn from the cache), every write to the cache holds exactly the
    fields a fresh scorer call on that state and site gives: keep-interval, leave probability
    (kept where a run can jump) and the remembered tokens' fields. A move drawn from the cache
    that kept the old token's leave probability for the new state fails this, and so does a carry
    at the wrong token."""
    monkeypatch.setattr(engine.cache, "MOVE_TOKENS", tokens)
    if case == "table":
        table, T, n = exact.TabulatedScorer(small_scorer, 5), 0.7, 5      # 243 states
    else:
        table, T, n = slope_trap(), 0.25, 9
    spec = ChainSpec(temperature=T, steps=300, mode="auto")
    writes, store = [], engine.SiteCache.store

    def kept(self, units, sites, values):
        store(self, units, sites, values)
        slots = self.slot[units]
        writes.extend((self.key_of[a], b, self.slot_values[a, b].clone()) for a, b in zip(slots.tolist(), sites.tolist()))
    monkeypatch.setattr(engine.SiteCache, "store", kept)
    states = table.vocab.ids[torch.randint(3, (8, n), generator=torch.Generator().manual_seed(2))]
    cache = engine.chain_cache(states)
    _, _, moves, _, _ = engine.memo.memo_window(table, states, spec, torch.Generator().manual_seed(4), cache, 0, 300)
    assert len(moves["time"]) > 100 and len(writes) > 40
    for key, i, got in writes:
        x = torch.as_tensor(np.frombuffer(key, dtype=np.int64).copy())
        s = table.scores(x[None], torch.tensor([i]))
        fresh = engine.cache.chain_summaries(s, engine.sampling.cdf_of(s, spec.temperature),
                                             table.vocab.index_of(x[i:i + 1]), spec)
        assert all(got[cache.col[f]].item() == v.double().item() for f, v in fresh.items()), (key, i)


@pytest.mark.slow
def test_memo_scores_ahead_the_sites_a_chain_will_need_in_fewer_calls(monkeypatch):
    """On the slope trap (T = 0.25, 16 chains from its bottom, 2000 steps) chains that step away
    reach states they have not seen and need a row at most of the sites they visit there. A round
    that also scores each such chain's next unknown sites (up to MEMO_AHEAD) keeps plain's
    trajectory and gaps bit for bit, never holds more rows than there are chains, and makes far
    fewer calls than rounds that score only what is needed now (150 against 223 when written);
    the rows scored ahead that a chain does not reach are the price (934 against 779)."""
    sc = slope_trap()
    init = torch.zeros((16, 9), dtype=torch.long)
    spec = dict(temperature=0.25, steps=2000, record_every=1, record_gaps=True)
    plain = engine.run(sc, init, ChainSpec(**spec, mode="plain"), seed=3)
    counted = {}
    for ahead in (0, engine.memo.MEMO_AHEAD):
        monkeypatch.setattr(engine.memo, "MEMO_AHEAD", ahead)
        counted[ahead] = CallCounter(sc)
        assert _same_run(plain, engine.run(counted[ahead], init, ChainSpec(**spec, mode="memo"), seed=3))
    now, ahead = counted[0], counted[engine.memo.MEMO_AHEAD]
    assert ahead.most <= 16
    assert ahead.calls < 0.8 * now.calls and ahead.rows > now.rows


def _jump_rows_needed(run, carry: bool = True) -> int:
    """Rows one chain's jump run must score, counted from its records alone (one segment): each
    state it reaches has its sites not known yet scored (all sites known from then on), and a move
    scores the row of its site again unless that row was among those just scored in that state.
    ``carry``: the row a move is drawn from is also known as the new state's row at that site."""
    n = run.states.shape[-1]
    known, rows = set(), 0

    def visit(x):
        nonlocal rows
        unknown = {i for i in range(n) if (x.tobytes(), i) not in known}
        rows += len(unknown)
        known.update((x.tobytes(), i) for i in range(n))
        return unknown

    unknown = visit(run.states[0, 0])
    for t in np.flatnonzero(run.sites[:, 0] >= 0):
        i, y = int(run.sites[t, 0]), run.states[t + 1, 0]
        rows += i not in unknown
        if carry:
            known.add((y.tobytes(), i))
        unknown = visit(y)
    return rows


@pytest.mark.parametrize("T", [1.0, 2.0])
def test_jump_keeps_the_row_a_chain_moved_by_for_the_state_it_moved_to(small_scorer, T):
    """One chain by jumps on the tiny MLM's 243 states at n = 5: the rows it scores are those
    counted from its moves (a state's unknown sites once, a move's row again unless just scored),
    with the row of each move known in the new state; the count without that carry is larger, so
    the check can fail."""
    table = exact.TabulatedScorer(small_scorer, 5)
    init = table.vocab.ids[torch.tensor([[0, 1, 2, 0, 1]])]
    counted = RowCounter(table)
    r = engine.run(counted, init, ChainSpec(temperature=T, steps=1000, record_every=1, checkpoint_every=1000,
                                            mode="jump"), seed=7)
    assert (r.sites >= 0).sum() > 100
    assert counted.rows == _jump_rows_needed(r) < _jump_rows_needed(r, carry=False) - 10


def test_memo_that_forgets_visited_states_scores_the_rows_counted_without_memory(basins, monkeypatch):
    """The count can fail: a memo that gives a chain an empty slot at every move (the cache of one
    state, as before states were kept) keeps plain's trajectory but scores the rows counted
    without memory, not those counted with it."""
    set_memo_window(monkeypatch, 1)
    monkeypatch.setattr(engine.SiteCache, "enter", lambda self, units, states: self.clear(units))
    init = basins.vocab.ids[torch.randint(3, (1, 3), generator=torch.Generator().manual_seed(5))]
    spec = dict(temperature=0.3, steps=600, record_every=1, record_gaps=True)
    plain = engine.run(basins, init, ChainSpec(**spec, mode="plain"), seed=2)
    counted = RowCounter(basins)
    assert _same_run(plain, engine.run(counted, init, ChainSpec(**spec, mode="memo"), seed=2))
    top = _top_tokens(basins, engine.cache.MOVE_TOKENS)
    assert counted.rows == _rows_needed(plain, share=False, top=top) > _rows_needed(plain, share=True, top=top)


def test_memo_with_a_stale_cache_leaves_the_plain_trajectory(table, wrong):
    init = table.vocab.ids[torch.randint(3, (64, 3), generator=torch.Generator().manual_seed(0))]
    spec = dict(temperature=0.5, steps=200, record_gaps=True)
    plain = engine.run(table, init, ChainSpec(**spec, mode="plain"), seed=4)
    wrong("cache survives a move")
    assert not _same_run(plain, engine.run(table, init, ChainSpec(**spec, mode="memo"), seed=4))


def test_coupled_memo_gives_the_plain_coalescence_times_bit_for_bit(table):
    s = torch.as_tensor(table.chain.states)
    xi, yi = np.meshgrid(np.arange(27), np.arange(27), indexing="ij")
    x, y = s[xi.ravel()].repeat(2, 1), s[yi.ravel()].repeat(2, 1)
    for T in (0.3, 1.0):
        counted = {m: RowCounter(table) for m in ("plain", "memo")}
        r = {m: engine.couple(counted[m], x, y, T, 300, torch.Generator().manual_seed(5), mode=m) for m in counted}
        assert np.array_equal(r["plain"].tau, r["memo"].tau, equal_nan=True)
        assert counted["memo"].rows < counted["plain"].rows
        # the run reports the rows it scored, and the plain engine's cost follows from the times alone
        assert [r[m].rows for m in counted] == [counted[m].rows for m in counted]
        assert coupling.plain_rows(r["plain"].tau, r["plain"].censored, 300) == counted["plain"].rows
        # ... also for a shorter budget, from the longer run's times
        short = engine.couple(RowCounter(table), x, y, T, 20, torch.Generator().manual_seed(5), mode="plain")
        assert coupling.plain_rows(r["plain"].tau, r["plain"].censored, 20) == short.rows
        assert np.array_equal(short.censored, ~(r["plain"].tau <= 20))


# ---------------------------------------------------------------- the law at a fixed step
@pytest.mark.parametrize("mode", ["memo", "jump", "auto"])
def test_law_at_a_fixed_step_is_row_x_of_the_exact_power(table, mode):
    ex, P = kernel(table, 3, 0.5)
    for x, t in ((5, 6), (26, 20)):
        assert law_at_step_pvalue(table, ex, P, 0.5, x, t, mode) > ALPHA, (x, t)


@pytest.mark.parametrize("kind", ["redraws current token", "wrong holding probability"])
def test_law_at_a_fixed_step_rejects_a_wrong_jump(table, wrong, kind):
    ex, P = kernel(table, 3, 0.5)
    wrong(kind)
    assert law_at_step_pvalue(table, ex, P, 0.5, 5, 6, "jump") < ALPHA


def test_law_at_a_fixed_step_rejects_a_stale_memo(table, wrong):
    ex, P = kernel(table, 3, 0.5)
    wrong("cache survives a move")
    assert law_at_step_pvalue(table, ex, P, 0.5, 5, 6, "memo") < ALPHA


@pytest.mark.parametrize("mode", ["memo", "jump"])
def test_law_at_a_fixed_step_on_a_restricted_real_model(rxn_table, mode):
    """rxnmapper's ALBERT on {C, c, O, N}, n = 3, T = 0.7, with the first token frozen."""
    prefix = rxn_table.vocab.ids[:1].numpy()
    ex, P = kernel(rxn_table, 3, 0.7)
    assert law_at_step_pvalue(rxn_table, ex, P, 0.7, 7, 10, mode) > ALPHA
    ex, P = kernel(rxn_table, 3, 0.7, prefix=prefix)
    assert law_at_step_pvalue(rxn_table, ex, P, 0.7, 3, 10, mode) > ALPHA


# ---------------------------------------------------------------- holding times
@pytest.mark.parametrize("mode", ["memo", "jump", "auto"])
def test_holding_time_in_a_state_is_geometric_with_the_exact_stay_probability(table, mode):
    ex, P = kernel(table, 3, 0.5)
    x = int(np.argmin(np.abs(np.diag(P) - 0.8)))                 # a sticky state: mean holding ~5 steps
    assert 0.7 < P[x, x] < 0.9
    assert holding_pvalue(table, ex, P, 0.5, x, mode) > ALPHA


@pytest.mark.parametrize("kind", ["redraws current token", "wrong holding probability"])
def test_holding_time_check_rejects_a_wrong_jump(table, wrong, kind):
    ex, P = kernel(table, 3, 0.5)
    x = int(np.argmin(np.abs(np.diag(P) - 0.8)))
    wrong(kind)
    assert holding_pvalue(table, ex, P, 0.5, x, "jump") < ALPHA


def geometric_pvalue(first, stay, cells=10) -> float:
    """First-move steps (inf: censored) against the geometric law P(H > k) = stay^k, on cells cut
    at its deciles."""
    edges = np.unique(np.ceil(np.log1p(-np.linspace(0, 1, cells + 1)[1:-1]) / np.log(stay)))
    tail = np.append(1.0, stay ** edges)                         # P(H > 0), P(H > e_1), ...
    probs = np.append(tail[:-1] - tail[1:], tail[-1])
    counts = np.bincount(np.searchsorted(edges, first, side="left"), minlength=len(edges) + 1)
    return chi2_pvalue(counts, probs)


def test_holding_time_in_a_deep_trap(basins):
    """The tiny MLM on {ran, river, field} at T = 0.1: its deepest trap holds for ~4,700 steps on
    average. 300 jump chains from it over ten mean holding times (a few hundred model-free rounds):
    the first move's step against the exact geometric law."""
    deep = basins
    ex, P = kernel(deep, 3, 0.1)
    x = int(np.argmax(np.diag(P)))
    stay = P[x, x]
    assert 1 / (1 - stay) > 4000
    steps = int(10 / (1 - stay))
    start = torch.as_tensor(ex.states[x]).repeat(300, 1)
    counted = RowCounter(deep)
    r = engine.run(counted, start, ChainSpec(temperature=0.1, steps=steps, record_every=steps, mode="jump",
                                             checkpoint_every=steps), seed=2)
    moved = r.sites >= 0
    first = np.where(moved.any(0), moved.argmax(0) + 1, np.inf)
    assert geometric_pvalue(first, stay) > ALPHA
    assert geometric_pvalue(first, stay ** 1.5) < ALPHA            # a holding law a third shorter is told apart
    assert counted.rows < 300 * steps / 100                       # plain would score 300 rows a step


# ---------------------------------------------------------------- first changes: holds of millions of steps
def test_first_changes_are_the_first_moves_of_a_jump_run(table):
    """Same seed: first_changes gives each chain's first step of change in run(mode='jump'), read
    from ``sites`` (step t is entry t - 1, the first one >= 0), the same site changed, the same
    censored chains, and m rows for the shared start plus a row per move of the chains after the first."""
    ex, P = kernel(table, 3, 0.5)
    x = int(np.argmin(np.abs(np.diag(P) - 0.8)))                 # mean hold ~5 steps: some pass 12
    start = torch.as_tensor(ex.states[x]).repeat(300, 1)
    spec = ChainSpec(temperature=0.5, steps=12, record_every=12, checkpoint_every=12, mode="jump")
    r = engine.run(table, start, spec, seed=7)
    moved = r.sites >= 0
    first = np.where(moved.any(0), moved.argmax(0) + 1, 0)
    counted = RowCounter(table)
    fc = engine.first_changes(counted, start, spec, seed=7)
    assert 0 < fc.censored.sum() < 300
    assert np.array_equal(fc.steps, first) and np.array_equal(fc.censored, ~moved.any(0))
    changed = fc.states != ex.states[x]
    assert (changed.sum(1) == np.where(fc.censored, 0, 1)).all()
    left = ~fc.censored
    assert np.array_equal(changed[left].argmax(1), r.sites[first[left] - 1, np.flatnonzero(left)])
    # the 300 chains share their start: its 3 sites are scored once (for chain 0, which draws its
    # move from those rows), and every other chain that moves scores the row of its move
    assert fc.rows == counted.rows == 3 + left.sum() - left[0]


@pytest.fixture(scope="module")
def smoke_traps(tiny_mlm):
    """The smoke profile's second restricted chain of chapter 6: the tiny MLM on {ran, river, field}, n = 4."""
    v = vocabulary.allowed_vocabulary(tiny_mlm.tokenizer, tokens=["ran", "river", "field"])
    return exact.TabulatedScorer(models.MaskedLMScorer(tiny_mlm, v), 4)


def _deep_holds(table, T, chains=2000, budget_means=8, seed=11):
    """First changes of chains started in the deepest trap at T, over budget_means exact mean holds."""
    P = exact.glauber_kernel(table, 4, T).kernel
    x = int(exact.deepest_traps(P, 1)[0])
    q = exact.leave_probabilities(P)[x]
    steps = int(budget_means / q)
    counted = RowCounter(table)
    fc = engine.first_changes(counted, torch.as_tensor(table.chain.states[x]).repeat(chains, 1),
                              ChainSpec(temperature=T, steps=steps), seed=seed)
    return fc, q, steps, counted.rows


def _mean_z(fc, steps, q) -> float:
    """The censored-geometric mean estimate against 1/q, in standard errors of the geometric law."""
    mean, _, _ = stats.geometric_mean_ci(np.where(fc.censored, steps, fc.steps), fc.censored)
    return abs(mean - 1 / q) / np.sqrt((1 - q) / q**2 / len(fc.steps))


def test_holding_times_in_the_deepest_trap_follow_the_exact_geometric_law(smoke_traps):
    """The tiny MLM on {ran, river, field}, n = 4, T = 0.05: the deepest trap (exact mean hold about
    1.9 million steps, 1 / (1 - P(x, x)) from exact.py) starts 2,000 jump chains with a budget of
    eight mean holds. Their first-change steps against the geometric law with that leave
    probability (chi-square on its deciles), and their mean within 3.3 geometric standard errors;
    billions of chain-steps for 4 rows a chain."""
    fc, q, steps, rows = _deep_holds(smoke_traps, 0.05)
    assert 1 / q > 1e6
    assert geometric_pvalue(np.where(fc.censored, np.inf, fc.steps), 1 - q) > ALPHA
    assert _mean_z(fc, steps, q) < st.norm.isf(ALPHA / 2)
    left = ~fc.censored
    assert rows == 4 + left.sum() - left[0]                      # the trap's 4 rows once, a row per later move
    assert np.where(fc.censored, steps, fc.steps).sum() > 1e9


def test_holding_time_check_tells_apart_a_wrong_exact_value(smoke_traps, small_scorer):
    """The same holds against two wrong exact values, both rejected by both checks: the same
    trap's law at T = 0.0505 (one percent off: a mean hold about 13% shorter), and the deepest
    trap of the smoke profile's other restricted chain ({the, dog, ran}, n = 4) at T = 0.05."""
    fc, q, steps, _ = _deep_holds(smoke_traps, 0.05)
    held = np.where(fc.censored, np.inf, fc.steps)
    wrong = {}
    for name, scorer, T in (("T off by 1%", smoke_traps, 0.0505), ("other chain", small_scorer, 0.05)):
        P = exact.glauber_kernel(scorer, 4, T).kernel
        wrong[name] = exact.leave_probabilities(P)[exact.deepest_traps(P, 1)[0]]
    assert 1.1 < wrong["T off by 1%"] / q < 1.2
    for name, q_wrong in wrong.items():
        assert geometric_pvalue(held, 1 - q_wrong) < ALPHA, name
        assert _mean_z(fc, steps, q_wrong) > st.norm.isf(ALPHA / 2), name


def test_geometric_mean_interval_covers_at_its_level_with_and_without_censoring():
    """stats.geometric_mean_ci on numpy's geometric draws of known q: over 2,000 samples of 200 its
    95% interval covers 1/q in a share within 0.95 +- 0.015 (4 binomial standard errors), both
    uncensored (q = 0.2) and with a budget of one mean hold (q = 1e-5, about 37% censored); nothing
    left gives an infinite estimate with a finite lower end."""
    rng = np.random.default_rng(0)
    for q, budget in ((0.2, 10**9), (1e-5, 10**5)):
        cover = 0
        for _ in range(2000):
            h = rng.geometric(q, 200)
            _, lo, hi = stats.geometric_mean_ci(np.minimum(h, budget), h > budget)
            cover += lo <= 1 / q <= hi
        assert abs(cover / 2000 - 0.95) < 0.015, (q, cover)
    mean, lo, hi = stats.geometric_mean_ci(np.full(50, 1000), np.ones(50, bool))
    assert mean == hi == np.inf and 1000 < lo < np.inf


def test_holding_check_sorts_the_deepest_traps_and_counts_what_it_spent(smoke_traps):
    """groundtruth.holding_check on the smoke chain at T = 0.1: the traps come deepest first with the
    exact mean hold 1 / (1 - P(x, x)) of exact.exit_time, every exact mean inside its 99.9%
    interval, the censored count and the chain-steps consistent with the budget, the trap's m rows
    once and a row per move."""
    T, chains, budget = 0.1, 300, 5000
    P = exact.glauber_kernel(smoke_traps, 4, T).kernel
    df = groundtruth.holding_check(smoke_traps, T, traps=3, chains=chains, steps=budget,
                                   gen=torch.Generator().manual_seed(0), level=0.999)
    stay = np.diag(P)
    assert list(df["state index"]) == list(np.argsort(-stay, kind="stable")[:3])
    for x, m in zip(df["state index"], df["exact mean holding time"]):
        members = np.zeros(len(P), bool)
        members[x] = True
        assert m == pytest.approx(exact.exit_time(P, members)[0], rel=1e-9)
    assert df["exact inside CI"].all()
    assert (df["jumps"] + df["censored"] == chains).all()
    # each trap's 4 rows once for its chains, and a row per move (the first chain's comes from those 4)
    assert ((df["rows scored"] - 4 - df["jumps"]).isin([-1, 0])).all()
    assert (df["steps simulated"] >= df["jumps"] + df["censored"] * budget).all()
    assert (df["steps simulated"] <= chains * budget).all()
    assert df["censored"].iloc[0] > 0 and df["censored"].iloc[1:].eq(0).all()   # mean ~2,750 against 5,000


def script_policy(monkeypatch, after: dict) -> None:
    """Make auto's policy follow a script: after a segment in mode m, ``after[m]`` = (the next
    mode, its length). Its own rule keeps memo on the small tables here, whose states the cache
    soon answers in full (memo then needs no round at all); a script makes the switches that the
    law and resume checks need."""
    def scripted(self, mode, steps, *rest):
        if self.history and self.history[-1][0] == mode:
            self.history[-1][1] += steps
        else:
            self.history.append([mode, steps])
        self.current, self.length = after[mode]

    monkeypatch.setattr(engine.Policy, "observe", scripted)


# ---------------------------------------------------------------- long-run frequencies
def _long_run(scorer, T, mode, chains=40, steps=800, seed=3):
    init = scorer.vocab.ids[torch.randint(scorer.vocab.size, (chains, 3), generator=torch.Generator().manual_seed(1))]
    return engine.run(scorer, init, ChainSpec(temperature=T, steps=steps, record_every=2, mode=mode), seed=seed)


@pytest.mark.parametrize("mode", ["memo", "jump", "auto"])
def test_long_run_frequencies_match_the_exact_stationary_law(basins, mode, monkeypatch):
    """Two traps at T = 0.5 (stay probabilities 0.93 and 0.89, exact t_mix 11): 40 chains of 800
    steps. In auto, the policy is scripted to switch at every segment (memo, then jump, plain,
    memo, ... of 16 to 64 steps), and the law is checked across the switches."""
    if mode == "auto":
        after = {"memo": ("jump", 64), "jump": ("plain", 16), "plain": ("memo", 48)}

        script_policy(monkeypatch, after)
    ex, P = kernel(basins, 3, 0.5)
    r = _long_run(basins, 0.5, mode)
    assert stationary_pvalue(r, ex, exact.stationary(P), burn=100, min_pi=0.004) > ALPHA
    if mode == "auto":
        assert [m for m, _ in r.modes[:4]] == ["memo", "jump", "plain", "memo"] and len(r.modes) > 12, r.modes


def test_long_run_frequencies_of_a_restricted_real_model(rxn_table):
    ex, P = kernel(rxn_table, 3, 2.0)
    r = _long_run(rxn_table, 2.0, "jump")
    assert stationary_pvalue(r, ex, exact.stationary(P), burn=100, min_pi=0.004) > ALPHA


@pytest.mark.parametrize("kind", ["redraws current token", "wrong holding probability"])
def test_long_run_frequencies_reject_a_wrong_jump(basins, wrong, kind):
    ex, P = kernel(basins, 3, 0.5)
    wrong(kind)
    r = _long_run(basins, 0.5, "jump")
    assert stationary_pvalue(r, ex, exact.stationary(P), burn=100, min_pi=0.004) < ALPHA


# ---------------------------------------------------------------- coupled pairs
def pair_survival(table, T, x, y, t_max):
    """P(tau > t), t = 0..t_max, for the pair chain (shared uniform site, maximal coupling) from
    the states x, y (enumeration indices), by its exact sub-stochastic kernel on unequal pairs."""
    ex = table.chain
    S, m = len(ex.states), len(ex.free)
    cond = exact.conditionals(table, ex.states, ex.free, T)                   # (S, m, K)
    k = cond.shape[-1]
    Q = np.zeros((S * S, S * S))
    for i_pos, i in enumerate(ex.free):
        nxt = np.empty((S, k), int)
        for a in range(k):
            y_ = ex.states.copy()
            y_[:, i] = ex.vocab_ids[a]
            nxt[:, a] = ex.index(y_)
        for xs in range(S):
            p = cond[xs, i_pos]
            for ys in range(S):
                if xs == ys:
                    continue
                q = cond[ys, i_pos]
                d = np.clip(p - q, 0, None).sum()
                J = np.diag(np.minimum(p, q)) + (np.outer(np.clip(p - q, 0, None), np.clip(q - p, 0, None)) / d
                                                 if d > 0 else 0)
                for a in range(k):
                    for b in range(k):
                        xn, yn = nxt[xs, a], nxt[ys, b]
                        if xn != yn:
                            Q[xs * S + ys, xn * S + yn] += J[a, b] / m
    v = np.zeros(S * S)
    v[x * S + y] = 1.0
    surv = [1.0]
    for _ in range(t_max):
        v = v @ Q
        surv.append(v.sum())
    return np.array(surv)


def _pair_taus(table, x, y, T, mode, reps, budget, seed):
    s = torch.as_tensor(table.chain.states)
    r = engine.couple(table, s[[x]].repeat(reps, 1), s[[y]].repeat(reps, 1), T, budget,
                      torch.Generator().manual_seed(seed), mode=mode)
    return np.where(r.censored, np.inf, r.tau)


def coalescence_pvalue(table, x, y, T, tau, budget) -> float:
    """Coalescence times against the exact law from the pair kernel (cells t = 1..budget and censored)."""
    surv = pair_survival(table, T, x, y, budget)
    probs = np.append(surv[:-1] - surv[1:], surv[-1])
    counts = np.bincount(np.where(np.isfinite(tau), tau, budget + 1).astype(int), minlength=budget + 2)[1:]
    return chi2_pvalue(counts, probs)


PAIR = dict(x=11, y=26, T=0.5, budget=300)      # the two traps of ``basins``


def test_coupled_jumps_match_plain_coupled_runs_and_the_exact_coalescence_law(basins):
    """Pairs started in the two traps: jump-mode coalescence times against plain runs (two-sample
    chi-square at ALPHA) and, with plain's and auto's, against the exact law of the pair chain."""
    x, y, T, budget = PAIR.values()
    plain = _pair_taus(basins, x, y, T, "plain", 2000, budget, seed=1)
    jump = _pair_taus(basins, x, y, T, "jump", 2000, budget, seed=2)
    assert np.isfinite(plain).mean() > 0.99
    assert two_sample_pvalue(plain, jump) > ALPHA
    for tau in (plain, jump, _pair_taus(basins, x, y, T, "auto", 2000, budget, seed=3)):
        assert coalescence_pvalue(basins, x, y, T, tau, budget) > ALPHA


@pytest.mark.parametrize("kind", ["pair holds as its first member", "pair move not conditioned"])
def test_coupled_jump_checks_reject_a_wrong_pair_chain(basins, wrong, kind):
    x, y, T, budget = PAIR.values()
    plain = _pair_taus(basins, x, y, T, "plain", 2000, budget, seed=1)
    wrong(kind)
    jump = _pair_taus(basins, x, y, T, "jump", 2000, budget, seed=2)
    assert two_sample_pvalue(plain, jump) < ALPHA
    assert coalescence_pvalue(basins, x, y, T, jump, budget) < ALPHA


def test_coalesced_pairs_leave_the_batch_in_jump_mode(table):
    """Identical starts cost nothing; once every pair has met, no more rows are scored."""
    s = torch.as_tensor(table.chain.states)
    counted = RowCounter(table)
    r = engine.couple(counted, s[:5], s[:5].clone(), 1.0, 50, torch.Generator().manual_seed(0), mode="jump")
    assert (r.tau == 0).all() and counted.rows == 0
    r = engine.couple(counted, s[[26]].repeat(50, 1), s[[0]].repeat(50, 1), 3.0, 10_000,
                      torch.Generator().manual_seed(0), mode="jump")
    assert not r.censored.any()
    # each round scores at most 2 rows per site of each live pair: far below the budget's worth
    assert counted.rows < 2 * 3 * 50 * (np.max(r.tau) + 1)


# ---------------------------------------------------------------- resume, records, refusals
class _Killed(Exception):
    pass


def _killed_and_resumed(scorer, init, spec, seed, tmp_path, kill_at, damage=None):
    def kill(step):
        if step == kill_at:
            raise _Killed
    with pytest.raises(_Killed):
        engine.run(scorer, init, spec, seed=seed, out_dir=tmp_path, on_checkpoint=kill)
    if damage is not None:
        saved = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
        damage(saved)
        torch.save(saved, tmp_path / "checkpoint.pt")
    return engine.run(scorer, init, spec, seed=seed, out_dir=tmp_path)


def _equal_runs(a, b) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("steps", "states", "sites"))


def test_resume_after_kill_in_jump_mode_equals_the_uninterrupted_run(full_scorer, tmp_path):
    init = full_scorer.vocab.ids[torch.randint(full_scorer.vocab.size, (4, 9), generator=torch.Generator().manual_seed(0))]
    spec = ChainSpec(temperature=0.3, steps=120, record_every=3, checkpoint_every=20, mode="jump")
    whole = engine.run(full_scorer, init, spec, seed=7)
    assert (whole.sites == -1).any() and (whole.sites >= 0).any()
    assert _equal_runs(whole, _killed_and_resumed(full_scorer, init, spec, 7, tmp_path, kill_at=60))


@pytest.mark.slow
def test_resume_after_kill_in_auto_mode_equals_the_uninterrupted_run_and_needs_the_saved_policy(tmp_path, monkeypatch):
    """12 chains in a trap and 4 elsewhere; auto's policy is scripted to switch between jump and
    the stepping modes (jump segments of up to 1000 steps, cut at each checkpoint), with a jump
    segment running up to the checkpoint where the run is killed: the resumed run equals the
    whole run, and a checkpoint stripped of the engine's state (cache and policy) gives another
    run (its fresh policy steps where the whole run jumped)."""
    script_policy(monkeypatch, {"memo": ("jump", 1000), "jump": ("plain", 16), "plain": ("memo", 48)})
    sc, trap = trap_joint(depth=4.0)
    init = torch.as_tensor(sc.chain.states[[trap] * 12 + list(range(4))])
    spec = ChainSpec(temperature=0.4, steps=2000, record_every=7, checkpoint_every=250, mode="auto")
    whole = engine.run(sc, init, spec, seed=5)
    assert "jump" in {m for m, _ in whole.modes} and len(whole.modes) > 2
    assert _equal_runs(whole, _killed_and_resumed(sc, init, spec, 5, tmp_path / "a", kill_at=1000))
    assert whole.modes == engine.run(sc, init, spec, seed=5, out_dir=tmp_path / "a").modes

    def strip(saved):
        del saved["cache"], saved["policy"]
    assert not _equal_runs(whole, _killed_and_resumed(sc, init, spec, 5, tmp_path / "b", kill_at=1000, damage=strip))


def test_jump_records_hold_the_state_between_moves(table):
    """Recorded every step: a chain's state changes exactly at the steps whose site is >= 0, at
    that site only, and the record at the grid is the state then."""
    init = table.vocab.ids[torch.randint(3, (32, 3), generator=torch.Generator().manual_seed(2))]
    r = engine.run(table, init, ChainSpec(temperature=0.5, steps=300, mode="jump", checkpoint_every=70), seed=1)
    change = r.states[1:] != r.states[:-1]                    # (S, B, n)
    assert np.array_equal(change.any(-1), r.sites >= 0)
    t, b = np.nonzero(r.sites >= 0)
    assert change[t, b, r.sites[t, b]].all() and (change.sum(-1) <= 1).all()
    coarse = engine.run(table, init, ChainSpec(temperature=0.5, steps=300, record_every=7, mode="jump",
                                               checkpoint_every=70), seed=1)
    assert np.array_equal(coarse.states, r.states[coarse.steps])
    assert np.array_equal(coarse.sites, r.sites)


def test_jump_refuses_gaps_and_unknown_modes_before_any_compute(counting):
    init = counting.vocab.ids[torch.zeros((2, 3), dtype=torch.long)]
    with pytest.raises(ValueError, match="record_gaps"):
        engine.run(counting, init, ChainSpec(temperature=1.0, steps=5, record_gaps=True, mode="jump"), seed=0)
    with pytest.raises(ValueError, match="mode"):
        engine.run(counting, init, ChainSpec(temperature=1.0, steps=5, mode="fast"), seed=0)
    with pytest.raises(ValueError, match="mode"):
        engine.couple(counting, init, init, 1.0, 5, torch.Generator(), mode="fast")
    assert counting.calls == 0
    # auto with gaps never jumps: every step has its site and gap
    r = engine.run(counting, init, ChainSpec(temperature=0.05, steps=300, record_gaps=True), seed=0)
    assert (r.sites >= 0).all() and np.isfinite(r.gaps).all() and r.modes[0][0] != "jump"


def test_a_legacy_checkpoint_resumes_in_plain_mode(full_scorer, tmp_path):
    """A run begun before the engine had modes (its fingerprint has no mode) finishes as plain."""
    init = full_scorer.vocab.ids[torch.randint(full_scorer.vocab.size, (3, 6), generator=torch.Generator().manual_seed(1))]
    spec = ChainSpec(temperature=1.0, steps=40, checkpoint_every=10, record_gaps=True)
    plain = engine.run(full_scorer, init, ChainSpec(**{**spec.__dict__, "mode": "plain"}), seed=3)

    def legacy(saved):
        saved["fingerprint"] = engine.store.fingerprint(full_scorer, init, spec, 3, "", legacy=True)
        del saved["cache"], saved["policy"]
    resumed = _killed_and_resumed(full_scorer, init, ChainSpec(**{**spec.__dict__, "mode": "plain"}), 3, tmp_path,
                                  kill_at=20, damage=legacy)
    again = engine.run(full_scorer, init, spec, seed=3, out_dir=tmp_path)         # the default (auto) spec
    assert _equal_runs(plain, resumed) and _equal_runs(plain, again) and again.spec.mode == "plain"


# ---------------------------------------------------------------- auto
def test_auto_scores_far_fewer_rows_in_a_perfect_trap_and_no_more_at_high_temperature():
    """Rows scored stand in for time (speed targets live in the benchmark): chains in a perfect
    trap at T = 0.25 cost auto under 1/20 of plain's rows; at T = 2 auto never jumps and scores
    at most plain's rows."""
    sc, trap = trap_joint()
    start = torch.as_tensor(sc.chain.states[[trap]]).repeat(16, 1)
    rows = {}
    for m in ("plain", "auto"):
        c = RowCounter(sc)
        r = engine.run(c, start, ChainSpec(temperature=0.25, steps=2000, record_every=100, mode=m), seed=0)
        rows[m] = c.rows
    assert (r.states == start.numpy()).all()
    assert rows["auto"] * 20 < rows["plain"] and r.modes[-1][0] == "jump"
    hot = exact.TabulatedScorer(JointScorer(np.arange(3), 4, np.random.default_rng(1).normal(size=81)), 4)
    init = torch.as_tensor(hot.chain.states[np.random.default_rng(2).integers(0, 81, 16)])
    for m in ("plain", "auto"):
        c = RowCounter(hot)
        r = engine.run(c, init, ChainSpec(temperature=2.0, steps=500, mode=m), seed=0)
        rows[m] = c.rows
    assert rows["auto"] <= rows["plain"] and "jump" not in {m for m, _ in r.modes}


def test_auto_counts_the_rows_a_jump_must_score_before_its_first_move():
    """A memo segment of 4 steps saw no move and scored 57 rows over 16 chains (57/64 a
    chain-step) in 4 calls, with a round worth 0.02 rows: memo's estimate is 57/64 + (0.02/16)(4/4).
    Jump must first score each chain's unscored free sites, u of m = 20, over the 16 steps of the
    segment it would run, u/16 (plus 0.02/16 log2(W/16 + 1)/W for its segments), and is chosen
    only under HYSTERESIS of memo's estimate: for u <= 12 (threshold 12.84). A rule blind to the
    fill jumps at any u. Were that segment the run's first (the look), its rows would be the
    warm-up of an empty cache, and memo is priced at its cold estimate for the moves seen, none:
    nothing, so it stays at every u (taking the look's rows at face value jumps for u <= 14)."""
    memo = 57 / 64 + 0.02 / 16 * (4 / 4)
    segments = 0.02 / 16 * math.log2(engine.policy.MEMO_WINDOW / engine.policy.AUTO_SEGMENT + 1) / engine.policy.MEMO_WINDOW
    later = engine.policy.AUTO_SEGMENT * (engine.policy.HYSTERESIS * memo - segments)
    assert 12 < later < 13
    cases = {"look": ((0, "memo"), (14, "memo"), (16, "memo")),
             "later": ((0, "jump"), (12, "jump"), (13, "memo"), (16, "memo"))}
    for when, expected in cases.items():
        for u, want in expected:
            before = [] if when == "look" else [["plain", 16]]
            p = engine.Policy(mode="auto", m=20, round_cost=0.02, history=[list(h) for h in before])
            p.observe("memo", 4, torch.zeros(16, dtype=torch.long), 57, None, torch.full((16,), u), 4)
            assert p.current == want, (when, u)
            assert p.history == before + [["memo", 4]]


def test_auto_runs_plain_where_memo_would_score_nearly_every_row():
    """The trained English MLM at n = 20, T = 1 (16 chains): memo scored 0.974 rows a chain-step in
    one call a step, and its work per row beyond the pass (c = 0.11 rows) and a call's fixed cost
    (K = 3.15 rows) make it dearer than plain: memo 0.974 (1.11) + 3.15/16 = 1.278 against plain
    1 + 3.15/16 = 1.197. After the look auto runs plain; past it, within HYSTERESIS, it keeps memo.
    At 0.236 rows a chain-step in 0.279 calls a step (rxnfp BERT at T = 0.5), memo stays. A rule
    that prices a memo row as a plain one (c = 0) keeps memo at 0.974 rows too. The chains' moves
    are those of the rows (q with m q / (1 + (m - 1) q) = rho, m = 20), so jump is dearer still."""
    k, steps = 16, 240

    def choose(rho, calls_per_step, c=0.11, history=()):
        p = engine.Policy(mode="auto", m=20, round_cost=3.15, row_extra=c, history=[list(h) for h in history])
        q = rho / (20 - 19 * rho)                 # the move rate at which memo scores rho rows a step
        moves = torch.full((k,), round(q * steps), dtype=torch.long)
        p.observe("memo", steps, moves, round(rho * k * steps), None, torch.zeros(k), round(calls_per_step * steps))
        return p.current

    memo = 0.974 * 1.11 + 3.15 / 16
    assert 1.197 < memo and 1.197 > engine.policy.HYSTERESIS * memo
    assert choose(0.974, 1.0) == "plain"
    assert choose(0.974, 1.0, history=[["memo", 4]]) == "memo"
    assert choose(0.236, 0.279) == "memo"
    assert choose(0.974, 1.0, c=0.0) == "memo"


def test_row_flops_count_every_weight_but_the_embedding_tables(tiny_mlm):
    """Two FLOPs per weight and position, the special tokens included, for every weight outside
    the word, position and token-type tables (read off the model's config; the output layer tied
    to the word table is not counted twice); the fixed cost of a call and memo's work per row are
    the device's times over that. Counting the tables too gives another number."""
    cfg, n = tiny_mlm.model.config, 7
    total = sum(p.numel() for p in tiny_mlm.model.parameters())
    tables = cfg.hidden_size * (cfg.vocab_size + cfg.max_position_embeddings + cfg.type_vocab_size)
    positions = n + len(tiny_mlm.prefix_ids) + len(tiny_mlm.suffix_ids)
    assert positions == n + 2                                  # [CLS] ... [SEP]
    assert engine.row_flops(tiny_mlm, n) == 2.0 * (total - tables) * positions != 2.0 * total * positions
    scorer = models.MaskedLMScorer(tiny_mlm, vocabulary.allowed_vocabulary(tiny_mlm.tokenizer))
    cpu = engine.cost.DEVICE_COSTS["cpu"]
    row_seconds = 2.0 * (total - tables) * positions / cpu["flops"]
    assert engine.round_cost(scorer, n) == pytest.approx(cpu["round"] / row_seconds)
    assert engine.summary_cost(scorer, n) == pytest.approx(cpu["row_extra"] / row_seconds)
    assert engine.step_cost(scorer, n) == pytest.approx(cpu["step"] / row_seconds)
