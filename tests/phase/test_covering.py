"""Coverings of the model's mass and the transfer bound (textglauber.phase.covering, .transfer),
checked against answers computed independently here: hand-made conditionals, brute-force loops,
simulated coupled chains and the exact full chain on A^n."""
import itertools
import math

import numpy as np
import pytest
import torch

from textglauber import exact, phase
from textglauber.phase import ProductSpace, cover, covering_table, restricted_kernel, transfer_lower_bound
from textglauber.vocabulary import AllowedVocab

IDS = [3, 5, 7, 9, 11]        # not 0..K-1, so ids and columns cannot be confused


class FnScorer:
    """A scorer whose logits are a Python function of (site, the other sites' token positions in A),
    counting the rows it is asked for."""

    def __init__(self, ids, n, fn):
        ids = torch.as_tensor(sorted(ids))
        self.vocab = AllowedVocab(ids=ids, tokens=tuple(str(int(i)) for i in ids), vocab_size=int(ids.max()) + 1)
        self.n, self.fn, self.rows = n, fn, 0

    @property
    def max_length(self):
        return self.n

    def scores(self, states, sites):
        self.rows += len(sites)
        pos = self.vocab.index_of(states).numpy()
        assert (pos >= 0).all()
        out = [self.fn(int(i), tuple(np.delete(p, int(i)).tolist())) for p, i in zip(pos, sites.tolist())]
        return torch.tensor(np.array(out, dtype=np.float64))


def probs(scorer, i, ctx, T):
    """The full conditional of site i in a context of positions, by hand (math, not scipy)."""
    s = [v / T for v in scorer.fn(i, tuple(ctx))]
    m = max(s)
    w = [math.exp(v - m) for v in s]
    return [v / sum(w) for v in w]


def random_scorer(n=3, k=5, scale=1.0, seed=0):
    """Context-dependent random logits around a prior that favours the first tokens (as a language
    model favours a few words), so that coverings leave some tokens out."""
    prior = np.array([2.0, 2.0, 0.0, -2.0, -3.0])[:k]
    table = prior + np.random.default_rng(seed).normal(scale=scale, size=(n, k ** (n - 1), k))
    return FnScorer(IDS[:k], n, lambda i, ctx: table[i, int(np.ravel_multi_index(ctx, (k,) * (n - 1)))])


def positions(scorer, tokens):
    return scorer.vocab.index_of(torch.as_tensor(np.asarray(tokens))).numpy()


def brute_left_out(scorer, sets, T):
    """max over the states of prod S_i and the sites of the conditional mass outside S_i."""
    worst = 0.0
    for x in itertools.product(*[positions(scorer, s).tolist() for s in sets]):
        for i in range(len(x)):
            p = probs(scorer, i, x[:i] + x[i + 1:], T)
            inside = set(positions(scorer, sets[i]).tolist())
            worst = max(worst, sum(v for a, v in enumerate(p) if a not in inside))
    return worst


def brute_kernel(scorer, sets, T):
    """The restricted kernel by a plain loop over states, sites and tokens."""
    states = list(itertools.product(*[positions(scorer, s).tolist() for s in sets]))
    at = {x: k for k, x in enumerate(states)}
    n, P = len(sets), np.zeros((len(states), len(states)))
    for x in states:
        for i in range(n):
            p = probs(scorer, i, x[:i] + x[i + 1:], T)
            inside = positions(scorer, sets[i]).tolist()
            mass = sum(p[a] for a in inside)
            for a in inside:
                P[at[x], at[x[:i] + (a,) + x[i + 1:]]] += p[a] / mass / n
    return P, states


def full_index(states_pos, k):
    """Index in exact.glauber_kernel's enumeration (lexicographic over sorted ids) of position tuples."""
    n = states_pos.shape[1]
    return (states_pos * k ** np.arange(n - 1, -1, -1)).sum(1)


# ------------------------------------------------------------------------------- state spaces

def test_product_space_round_trip():
    space = ProductSpace([[9, 3], [5], [11, 3, 7]])
    x = space.states()
    assert space.size == 6 and x.shape == (6, 3)
    assert x.tolist() == [list(t) for t in itertools.product([3, 9], [5], [3, 7, 11])]
    np.testing.assert_array_equal(space.index(x), np.arange(6))
    np.testing.assert_array_equal(space.tokens(space.index(x[::-1])), x[::-1])
    with pytest.raises(ValueError):
        space.index([[3, 7, 3]])


# ------------------------------------------------------------------------------- the covering

def independent_scorer():
    p = [[0.5, 0.3, 0.15, 0.04, 0.01], [0.01, 0.04, 0.15, 0.3, 0.5], [0.06, 0.91, 0.01, 0.01, 0.01]]
    return FnScorer(IDS, 3, lambda i, ctx: np.log(p[i]))


@pytest.mark.parametrize("eps, expected, left", [
    (0.1, [[3, 5, 7, 11], [7, 9, 11], [3, 5]], 0.05),
    (0.035, [[3, 5, 7, 9, 11], [5, 7, 9, 11], [3, 5]], 0.03)])
def test_independent_sites_by_hand(eps, expected, left):
    """Sites that ignore their context: S_i is the seed plus the top set of the site's one law."""
    sc = independent_scorer()
    c = cover(sc, [11, 11, 3], 1.0, eps, max_states=1000)
    assert c.complete and c.reason == "closed" and c.rounds == 2
    assert [s.tolist() for s in c.sets] == expected
    assert c.left_out == pytest.approx(left, rel=1e-12)
    sizes = [len(s) for s in expected]
    assert c.states == math.prod(sizes)
    assert c.rows_scored == sc.rows == sum(math.prod(sizes) // r for r in sizes) == len(c.rows)


def chained_scorer():
    """Two sites: site 0 favours t1 after t0 and t3 after t2; site 1 favours t0 after t0 and t2
    otherwise, so t2 enters site 1 only after t1 entered site 0, and t3 only after that."""
    fav = {0: lambda o: 3 if o == 2 else 1, 1: lambda o: 0 if o == 0 else 2}
    return FnScorer(IDS, 2, lambda i, ctx: np.where(np.arange(5) == fav[i](ctx[0]), 10.0, 0.0))


def test_closure_takes_rounds():
    sc = chained_scorer()
    c = cover(sc, [3, 3], 1.0, 0.01, max_states=100)
    assert c.complete and c.rounds == 4
    assert [s.tolist() for s in c.sets] == [[3, 5, 9], [3, 7]]
    assert c.rows_scored == sc.rows == 5                      # contexts of site 0: 2, of site 1: 3
    assert c.left_out == pytest.approx(3 / (math.exp(10) + 4), rel=1e-12)
    assert c.left_out == pytest.approx(brute_left_out(sc, c.sets, 1.0), rel=1e-12)


def test_stops_at_max_states():
    sc = chained_scorer()
    c = cover(sc, [3, 3], 1.0, 0.01, max_states=4)
    assert not c.complete and c.reason.startswith("the sets outgrow max_states = 4")
    assert [s.tolist() for s in c.sets] == [[3, 5], [3, 7]]   # the last sets enumerated
    assert c.left_out == pytest.approx(brute_left_out(sc, c.sets, 1.0), rel=1e-12)
    assert c.left_out > 0.5                                   # context t2 wants t3 at site 0


def test_left_out_brute_force_and_kernel():
    sc = random_scorer(seed=1)
    for T, eps in [(1.0, 0.2), (0.5, 0.05)]:
        c = cover(sc, [3, 5, 11], T, eps, max_states=200)
        assert c.complete and c.left_out <= eps
        assert c.left_out == pytest.approx(brute_left_out(sc, c.sets, T), rel=1e-10)
        assert c.step_left_out <= c.left_out + 1e-15
        assert c.rows_scored == len(c.rows) == sum(c.states // len(s) for s in c.sets)
        calls = sc.rows
        P = restricted_kernel(c, T)
        assert sc.rows == calls                               # no model call for the kernel
        Q, states = brute_kernel(sc, c.sets, T)
        np.testing.assert_allclose(P.toarray(), Q, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(np.asarray(P.sum(1)).ravel(), 1.0, rtol=1e-13)


def test_bad_seed():
    with pytest.raises(ValueError):
        cover(independent_scorer(), [4, 3, 3], 1.0, 0.1, max_states=10)


# ------------------------------------------------------------------------------- the coupling

def full_and_restricted(sc, c, T):
    """Full conditionals at every state of A^n and their renormalisations over the sets."""
    k, n = sc.vocab.size, sc.n
    grid = np.array(list(itertools.product(range(k), repeat=n)))
    p = np.array([[probs(sc, i, tuple(np.delete(x, i)), T) for i in range(n)] for x in grid])   # (S, n, k)
    inside = np.zeros((n, k), bool)
    for i, s in enumerate(c.sets):
        inside[i, positions(sc, s)] = True
    q = np.where(inside, p, 0.0)
    return grid, p, q / q.sum(-1, keepdims=True)


def draw(rng, w):
    """One category per row of nonnegative weights."""
    cum = np.cumsum(w, 1)
    return (cum > rng.random(len(w))[:, None] * cum[:, -1:]).argmax(1)


def test_coupling_simulated():
    """Coupled full and restricted chains (the test's own maximal-coupling sampler): the chance that
    they have parted by step t is at most t * left_out, and each marginal is its chain's."""
    sc, T, steps, R = random_scorer(seed=1), 1.0, 8, 40_000
    c = cover(sc, [3, 5, 7], T, 0.15, max_states=125)
    assert c.complete and 0.01 < c.left_out <= 0.15
    grid, p, q = full_and_restricted(sc, c, T)
    k, n = sc.vocab.size, sc.n
    rng = np.random.default_rng(0)
    x = np.tile(positions(sc, [3, 5, 7]), (R, 1))
    y = x.copy()
    parted = np.zeros(R, bool)
    Pres, Pfull = restricted_kernel(c, T).toarray(), exact.glauber_kernel(sc, n, T).kernel
    space = c.space
    start = np.zeros(len(Pres))
    start[space.index([[3, 5, 7]])] = 1.0
    mu_res, mu_full = start.copy(), np.zeros(k ** n)
    mu_full[full_index(positions(sc, [[3, 5, 7]]), k)] = 1.0
    # while together, the pair moves as the full chain does within prod S_i: the chance of being
    # still together is the mass of the full kernel restricted to the restricted states
    embed = full_index(positions(sc, space.states()), k)
    together_law, K = start.copy(), Pfull[np.ix_(embed, embed)]
    for t in range(1, steps + 1):
        i = rng.integers(n, size=R)
        rows = np.arange(R)
        px, qy = p[full_index(x, k), i], q[full_index(y, k), i]
        together = ~parted
        m = np.minimum(px, qy)
        common = together & (rng.random(R) < m.sum(1))
        a, b = draw(rng, px), draw(rng, qy)                            # apart: independent moves
        a[common] = b[common] = draw(rng, m[common])
        split = together & ~common                                     # the residuals' supports are disjoint
        a[split] = draw(rng, np.clip(px[split] - qy[split], 0, None))
        b[split] = draw(rng, np.clip(qy[split] - px[split], 0, None))
        x[rows, i], y[rows, i] = a, b
        parted |= (x != y).any(1)
        rate = parted.mean()
        assert rate <= t * c.step_left_out + 4 * math.sqrt(t * c.step_left_out / R)
        mu_res, mu_full, together_law = mu_res @ Pres, mu_full @ Pfull, together_law @ K
        exact_rate = 1 - together_law.sum()
        assert exact_rate <= t * c.step_left_out + 1e-12 and abs(rate - exact_rate) < 4 * math.sqrt(exact_rate / R) + 1e-3
    # the marginals at the last step are the two chains' laws (Monte-Carlo error ~ 0.01)
    emp_y = np.bincount(space.index(np.asarray(sc.vocab.ids)[y]), minlength=len(mu_res)) / R
    emp_x = np.bincount(full_index(x, k), minlength=len(mu_full)) / R
    assert exact.tv(emp_y, mu_res) < 0.03 and exact.tv(emp_x, mu_full) < 0.05
    assert rate > 0.05                                                 # the chains do part


def test_coupling_exact():
    """Against the exact full chain on A^n: |P_full^t(x, B) - P_res^t(x, B)| <= t * left_out for every
    set B (the TV distance), from every restricted start; at t = 1 the distance is exactly the
    site-average of the left-out masses."""
    sc, T = random_scorer(seed=0), 1.0
    c = cover(sc, [3, 5, 7], T, 0.05, max_states=125)
    assert c.complete and c.left_out > 0
    k, n = sc.vocab.size, sc.n
    Pfull = exact.glauber_kernel(sc, n, T).kernel
    Pres = restricted_kernel(c, T).toarray()
    space = c.space
    embed = full_index(positions(sc, space.states()), k)               # restricted index -> full index
    Ft, Rt = np.eye(k ** n)[embed], np.eye(len(Pres))
    _, p, _ = full_and_restricted(sc, c, T)
    out = np.array([[1 - p[embed[s], i, positions(sc, c.sets[i])].sum() for i in range(n)] for s in range(len(Pres))])
    for t in range(1, 31):
        Ft, Rt = Ft @ Pfull, Rt @ Pres
        lifted = np.zeros_like(Ft)
        lifted[:, embed] = Rt
        dist = 0.5 * np.abs(Ft - lifted).sum(1)
        assert dist.max() <= t * c.step_left_out + 1e-12
        if t == 1:
            np.testing.assert_allclose(dist, out.mean(1), atol=1e-12)
    assert dist.max() > c.left_out                                     # the bound is not vacuous here


# ------------------------------------------------------------------------------- the transfer bound

def ferro_scorer(J=4.0, h=3.0):
    """Three sites, two strong tokens t0, t1 that want to agree and two weak ones t2, t3: two wells."""
    def fn(i, ctx):
        return np.array([J * ctx.count(0), J * ctx.count(1), -h, -h])
    return FnScorer(IDS[:4], 3, fn)


def test_transfer_bound_two_wells():
    sc, T = ferro_scorer(), 1.0
    c = cover(sc, [3, 5, 3], T, 0.01, max_states=100)                  # a tie at sites 0, 2: both wells
    assert c.complete and [s.tolist() for s in c.sets] == [[3, 5]] * 3
    full = exact.glauber_kernel(sc, 3, T).kernel
    t_full = exact.mixing_steps(full, 0.25)
    tr = transfer_lower_bound(restricted_kernel(c, T), c.step_left_out, max_states=100)
    assert tr.reason == "holds"
    assert 10 < tr.t_lower <= t_full
    assert tr.t_lower <= 1 / (4 * c.step_left_out) + 1 and tr.t_lower <= tr.t_mix
    assert tr.t_rel > 1


def escape_scorer(delta=1e-6, eta=1e-2):
    """Two sites and three tokens: t0, t1 want to agree (disagreeing costs delta), and t2, written
    with mass eta, lets the other site choose freely: an escape route the sets {t0, t1} cut off."""
    table = {0: [0.0, math.log(delta), math.log(eta)], 1: [math.log(delta), 0.0, math.log(eta)],
             2: [0.0, 0.0, math.log(eta)]}
    return FnScorer(IDS[:3], 2, lambda i, ctx: np.array(table[ctx[0]]))


def test_without_the_left_out_term_the_bound_fails():
    sc, T = escape_scorer(), 1.0
    c = cover(sc, [3, 5], T, 0.05, max_states=100)
    assert c.complete and [s.tolist() for s in c.sets] == [[3, 5], [3, 5]]
    assert c.left_out == pytest.approx(1e-2 / (1 + 1e-6 + 1e-2), rel=1e-9)
    t_full = exact.mixing_steps(exact.glauber_kernel(sc, 2, T).kernel, 0.25)
    P = restricted_kernel(c, T)
    honest = transfer_lower_bound(P, c.left_out, max_states=100)
    naive = transfer_lower_bound(P, 0.0, max_states=100)
    assert 2 < honest.t_lower <= t_full
    assert naive.t_lower > 100 * t_full               # the restricted chain's slowness, not the model's
    assert naive.t_mix > 100 * t_full


def test_transfer_refusals():
    sc = ferro_scorer()
    P = restricted_kernel(cover(sc, [3, 5, 3], 1.0, 0.01, max_states=100), 1.0)
    assert transfer_lower_bound(P, 0.3, max_states=100).reason == "left-out mass too large"
    big = transfer_lower_bound(P, 0.01, max_states=4)
    assert big.reason == "too many states" and np.isnan(big.t_lower) and np.isnan(big.t_mix)
    one = restricted_kernel(cover(independent_scorer(), [3, 11, 5], 1.0, 0.95, max_states=10), 1.0)
    assert one.shape == (1, 1)
    assert transfer_lower_bound(one, 0.0).reason == "the restricted chain mixes within one step"


# ------------------------------------------------------------------------------- the tiny model

def test_covering_table_tiny(full_scorer):
    tok = full_scorer.lm.tokenizer
    words = ["the", "dog", "ran", "home"]
    seeds = {3: tok.convert_tokens_to_ids(words[:3]), 4: tok.convert_tokens_to_ids(words)}
    eps = 0.2
    table = covering_table(full_scorer, "tiny-mlm", seeds, [0.25, 1.0], eps=eps, max_states=6000, tmix_max_states=300)
    assert list(table.columns) == phase.COVERING_COLUMNS and len(table) == 4
    done = table[table.complete]
    assert (done.left_out <= eps).all() and len(done) >= 1
    stopped = table[~table.complete]
    assert len(stopped) >= 1                                            # the table says where cells stop
    for row in stopped.itertuples():                                    # bounded on its last sets, or told why not
        held = np.isfinite(row.t_mix_full_lower)
        assert row.transfer.startswith("holds (open sets: the sets outgrow max_states") == held
        assert held or row.transfer in ("too many states", "left-out mass too large",
                                        "the restricted chain mixes within one step")
    for row in table.itertuples():
        sizes = [int(s) for s in row.tokens_per_site.split()]
        assert len(sizes) == row.n == len(row.sets.split()) and math.prod(sizes) == row.states
        assert row.rows_scored == sum(row.states // s for s in sizes)     # each (site, context) row once
        assert [len(s.split("/")) for s in row.sets.split()] == sizes
    # sets grow with T: the greedy closure at a higher T contains the one at a lower T
    lo, hi = (cover(full_scorer, seeds[3], T, eps, max_states=6000) for T in (0.1, 0.25))
    assert lo.complete and hi.complete
    assert all(np.isin(a, b).all() for a, b in zip(lo.sets, hi.sets)) and hi.states > lo.states
    assert table.loc[(table.n == 3) & (table.temperature == 0.25), "states"].item() == hi.states


# ------------------------------------------------------------------------------- the leak along the path

def leaky_ferro_scorer(J=4.0, h=3.0):
    """Three sites; t0 and t1 want to agree, and t2, t3 are weak where the other two sites agree
    but as strong as t0, t1 where they disagree: the wells of {t0, t1}^3 leave out almost nothing,
    the states between them half of a site's mass."""
    def fn(i, ctx):
        w = -h if ctx[0] == ctx[1] else J
        return np.array([J * ctx.count(0), J * ctx.count(1), w, w])
    return FnScorer(IDS[:4], 3, fn)


def brute_state_leak(scorer, sets, T):
    """At every state of prod S_i (brute_kernel's order), the mass outside the sets averaged over sites."""
    inside = [set(positions(scorer, s).tolist()) for s in sets]
    states = itertools.product(*[sorted(v) for v in inside])
    return np.array([np.mean([sum(v for a, v in enumerate(probs(scorer, i, x[:i] + x[i + 1:], T)) if a not in inside[i])
                              for i in range(len(x))]) for x in states])


def test_leak_along_the_path_against_the_exact_full_chain():
    """TV(P_full^t(x), P_res^t(x)) <= E_t(x) = sum_{s<t} (P_res^s e)(x) at every restricted start, with
    equality at t = 1; the start's own leak times t is not enough (this chain breaks it), and the
    leak met in a well stays far below t max e."""
    sc, T, sets = leaky_ferro_scorer(), 1.0, [[3, 5]] * 3
    P, states = brute_kernel(sc, sets, T)
    e = brute_state_leak(sc, sets, T)
    full = exact.glauber_kernel(sc, 3, T).kernel
    embed = full_index(np.array(states), 4)
    Ft, Rt, E, Pe = np.eye(64)[embed], np.eye(len(P)), np.zeros(len(P)), e.copy()
    start_only = False
    for t in range(1, 41):
        Ft, Rt, E, Pe = Ft @ full, Rt @ P, E + Pe, P @ Pe
        lifted = np.zeros_like(Ft)
        lifted[:, embed] = Rt
        dist = 0.5 * np.abs(Ft - lifted).sum(1)
        assert (dist <= E + 1e-12).all()
        if t == 1:
            np.testing.assert_allclose(dist, e, atol=1e-12)
        start_only |= bool((dist > t * e + 1e-9).any())
    assert start_only
    wells = [states.index((0, 0, 0)), states.index((1, 1, 1))]
    assert e.max() > 0.3 and E[wells].max() < 0.05 * 40 * e.max()


def test_the_path_weighted_bound_passes_the_uniform_ceiling():
    """Where the states between the wells leak a third of a step's mass, the uniform bound says
    nothing; weighing the leak along the path gives a bound far above 1/(4 max e) and still below
    the exact full chain's t_mix(1/4). With one number per state the two bounds are the same."""
    sc, T, sets = leaky_ferro_scorer(), 1.0, [[3, 5]] * 3
    P, _ = brute_kernel(sc, sets, T)
    e = brute_state_leak(sc, sets, T)
    t_full = exact.mixing_steps(exact.glauber_kernel(sc, 3, T).kernel, 0.25)
    uniform = transfer_lower_bound(P, float(e.max()), max_states=100)
    path = transfer_lower_bound(P, e, max_states=100)
    assert uniform.reason == "left-out mass too large" and np.isnan(uniform.t_lower)
    assert path.reason == "holds" and 100 / (4 * e.max()) < path.t_lower <= t_full
    flat = ferro_scorer()
    Pf = restricted_kernel(cover(flat, [3, 5, 3], 1.0, 0.01, max_states=100), 1.0)
    a, b = transfer_lower_bound(Pf, 2e-3, max_states=100), transfer_lower_bound(Pf, np.full(8, 2e-3), max_states=100)
    assert a.t_lower == b.t_lower and a.reason == b.reason == "holds"
    with pytest.raises(ValueError, match="leak must be"):
        transfer_lower_bound(Pf, np.full(7, 2e-3))
