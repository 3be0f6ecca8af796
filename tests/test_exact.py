"""The exact machinery on chains whose answers are known in closed form."""
import math

import numpy as np
import pytest
import torch

from textglauber import exact, groundtruth

from conftest import ContextTable, joint_chain, JointScorer


def _product(k, n, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.ones(k))
    states = exact.enumerate_states(np.arange(k), n)
    log_mu = np.log(q)[states].sum(1)
    return JointScorer(np.arange(k), n, log_mu), np.exp(log_mu)


def test_product_chain_separation_is_the_coupon_collector_tail():
    """Each site refreshes from its own law, so all sites touched is a strong stationary time
    and s(t) = P(coupon collector > t) = sum_j (-1)^{j+1} C(n, j) (1 - j/n)^t."""
    k, n = 3, 4
    sc, mu = _product(k, n)
    P = exact.glauber_kernel(sc, n, 1.0).kernel
    np.testing.assert_allclose(exact.stationary(P), mu, atol=1e-12)
    dense = P.toarray() if hasattr(P, "toarray") else np.asarray(P)
    for t in (1, 3, 6, 10, 20):
        tail = sum((-1) ** (j + 1) * math.comb(n, j) * (1 - j / n) ** t for j in range(1, n + 1))
        separation = float((1 - np.linalg.matrix_power(dense, t) / mu[None, :]).max())     # max_xy 1 - P^t(x,y)/pi(y)
        assert separation == pytest.approx(tail, abs=1e-9)


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
        assert exact.mixing_steps(P, 0.25) == t


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


def _tmix_by_definition(P, eps, t_max=5_000):
    """t_mix for each of the levels ``eps`` straight from the definition: P^t by one-step
    products, worst start, first t with max_x TV(P^t(x, .), pi) <= eps."""
    levels = np.atleast_1d(eps)
    pi = exact.stationary(P)
    D, out = np.eye(len(pi)), {}
    for t in range(1, t_max + 1):
        D = D @ P
        d = 0.5 * np.abs(D - pi).sum(1).max()
        out.update({e: t for e in levels if e not in out and d <= e})
        if len(out) == len(levels):
            return [out[e] for e in levels] if np.ndim(eps) else out[float(eps)]
    raise AssertionError("no mixing within t_max")


@pytest.mark.parametrize("k,n", [(3, 4), (2, 5), (3, 5)])
def test_mixing_time_equals_the_definition_on_random_chains(k, n):
    """Random joints (compatible, reversible) and random scorers (incompatible), n = 4 and 5,
    several temperatures and eps: the fast search must give the first t of the definition (the
    old bisection was wrong in 66 of these 108 cases)."""
    levels = [0.25, 1 / (4 * np.e), 0.05]
    for seed in range(2):
        for sc in (JointScorer(np.arange(k), n, np.random.default_rng(seed).normal(size=k ** n)),
                   ContextTable(k, n, seed)):
            for T in (0.5, 1.0, 2.0):
                P = exact.glauber_kernel(sc, n, T).kernel
                assert [exact.mixing_steps(P, e) for e in levels] == _tmix_by_definition(P, levels), \
                    (type(sc).__name__, seed, T)


def test_mixing_time_of_the_tiny_mlm_at_n4(small_scorer):
    """The case that exposed the stale base of the bisection: true 14, the old search said 16."""
    P = exact.glauber_kernel(small_scorer, 4, 2.0).kernel
    assert _tmix_by_definition(P, 0.25) == 14
    assert exact.mixing_steps(P, 0.25) == 14
    for T in (0.5, 1.0):
        P = exact.glauber_kernel(small_scorer, 4, T).kernel
        levels = [0.25, 1 / (4 * np.e)]
        assert [exact.mixing_steps(P, e) for e in levels] == _tmix_by_definition(P, levels)


def test_mixing_time_of_rxnmapper_albert_at_n4():
    """A real packaged model restricted to {C, c, O, N}, n = 4, T = 1: true 50 at eps = 1/4 and
    81 at eps = 1/(4e) (the old search said 64 and 96)."""
    from textglauber import models, vocabulary

    try:
        lm = models.load("package:rxnmapper-albert", device="cpu", dtype="float32")
    except models.ModelUnavailableError as exc:
        pytest.skip(str(exc))
    sc = models.MaskedLMScorer(lm, vocabulary.allowed_vocabulary(lm.tokenizer, tokens=["C", "c", "O", "N"]))
    P = exact.glauber_kernel(sc, 4, 1.0).kernel
    assert _tmix_by_definition(P, [0.25, 1 / (4 * np.e)]) == [50, 81]
    assert exact.mixing_steps(P, 0.25) == 50 and exact.mixing_steps(P, 1 / (4 * np.e)) == 81


def _direct_row(lm, tokens, x, temperature):
    """Row x of the Glauber kernel from plain model calls: mask site i, take the model's logits for
    the named tokens, softmax at T. Returns {next state (tuple): probability}."""
    tok_ids = lm.tokenizer.convert_tokens_to_ids(list(tokens))
    row = {}
    for i in range(len(x)):
        masked = list(x)
        masked[i] = lm.tokenizer.mask_token_id
        ids = torch.tensor([lm.prefix_ids + masked + lm.suffix_ids])
        with torch.no_grad():
            logits = lm.model(input_ids=ids).logits[0, len(lm.prefix_ids) + i, tok_ids].double()
        p = torch.softmax(logits / temperature, -1).numpy()
        for a, pa in zip(tok_ids, p):
            y = list(x)
            y[i] = a
            row[tuple(y)] = row.get(tuple(y), 0.0) + pa / len(x)
    return row


def test_allowed_vocabulary_given_out_of_order_gives_the_same_chain(tiny_mlm, small_scorer):
    """A reversed id list is sorted on construction with its tokens kept aligned, so the exact
    kernel, its stationary law and the engine's draws are those of the sorted vocabulary, and the
    kernel matches plain model calls on the named tokens."""
    from textglauber import engine, models, vocabulary

    v = small_scorer.vocab
    rev = vocabulary.AllowedVocab(ids=v.ids.flip(0), tokens=v.tokens[::-1], vocab_size=v.vocab_size)
    assert torch.equal(rev.ids, v.ids) and rev.tokens == v.tokens
    assert list(rev.tokens) == tiny_mlm.tokenizer.convert_ids_to_tokens(rev.ids.tolist())
    assert rev.index_of(torch.tensor(v.ids.tolist()[::-1])).tolist() == [2, 1, 0]
    sc = models.MaskedLMScorer(tiny_mlm, rev)
    T = 0.7
    a, b = exact.glauber_kernel(small_scorer, 3, T), exact.glauber_kernel(sc, 3, T)
    np.testing.assert_allclose(b.kernel, a.kernel, atol=1e-12)
    np.testing.assert_allclose(exact.stationary(b.kernel), exact.stationary(a.kernel), atol=1e-12)
    x = b.states[5]
    for y, p in _direct_row(tiny_mlm, ["ran", "dog", "the"], x.tolist(), T).items():
        assert b.kernel[5, b.index(np.array(y))] == pytest.approx(p, abs=1e-5)
    # the engine: 4000 chains one step from x land on the kernel's row x
    run = engine.run(sc, torch.as_tensor(x).repeat(4000, 1), engine.ChainSpec(temperature=T, steps=1), seed=0)
    freq = np.bincount(b.index(run.states[-1]), minlength=len(b.states)) / 4000
    assert exact.tv(freq, b.kernel[5]) < 0.03


def test_allowed_vocabulary_refuses_repeated_or_out_of_range_ids():
    from textglauber.vocabulary import AllowedVocab

    with pytest.raises(ValueError, match="twice"):
        AllowedVocab(ids=torch.tensor([3, 1, 3]), tokens=("a", "b", "c"), vocab_size=5)
    with pytest.raises(ValueError, match="lie in"):
        AllowedVocab(ids=torch.tensor([1, 7]), tokens=("a", "b"), vocab_size=5)
    with pytest.raises(ValueError, match="tokens"):
        AllowedVocab(ids=torch.tensor([1, 2]), tokens=("a",), vocab_size=5)


def test_exact_chain_refuses_tokens_outside_the_vocabulary():
    ch = exact.ExactChain(states=exact.enumerate_states(np.array([2, 5]), 2), kernel=None, free=[0, 1],
                          vocab_ids=np.array([2, 5]))
    assert ch.index(np.array([[5, 2], [5, 5]])).tolist() == [2, 3]
    with pytest.raises(ValueError, match="outside"):
        ch.index(np.array([[5, 3]]))
    with pytest.raises(ValueError, match="increasing"):
        exact.ExactChain(states=ch.states, kernel=None, free=[0, 1], vocab_ids=np.array([5, 2]))


def _kernel_by_hand(scorer, states, free, temperature):
    """The Glauber kernel over the listed states (a frozen prefix on the other sites), free site by
    free site, state by state, token by token: P(x, x^{i<-a}) += pi_i^T(a | x_{-i}) / |free|."""
    where = {tuple(s): r for r, s in enumerate(states.tolist())}
    ids = scorer.vocab.ids.tolist()
    P = np.zeros((len(states), len(states)))
    for i in free:
        probs = torch.softmax(scorer.scores(torch.as_tensor(states), torch.full((len(states),), i)).double()
                              / temperature, -1).numpy()
        for r, (x, p) in enumerate(zip(states.tolist(), probs)):
            for a, pa in zip(ids, p):
                y = list(x)
                y[i] = a
                P[r, where[tuple(y)]] += pa / len(free)        # KeyError if a prefix site moved
    return P


def test_frozen_prefix_kernel_is_the_chain_over_the_free_sites(small_scorer):
    """Tiny MLM, n = 4, prefix of one or two tokens: only states carrying the prefix, rows sum to
    one, and the kernel equals the hand-built kernel over the free sites (the prefix conditions
    every score but is never resampled)."""
    for prefix in ([int(small_scorer.vocab.ids[1])], small_scorer.vocab.ids[[2, 0]].tolist()):
        ch = exact.glauber_kernel(small_scorer, 4, 0.8, prefix=np.array(prefix))
        assert len(ch.states) == 3 ** (4 - len(prefix)) and ch.free == list(range(len(prefix), 4))
        assert (ch.states[:, :len(prefix)] == prefix).all()
        np.testing.assert_allclose(ch.kernel.sum(1), 1.0, atol=1e-12)
        np.testing.assert_allclose(ch.kernel, _kernel_by_hand(small_scorer, ch.states, ch.free, 0.8), atol=1e-6)


def test_frozen_prefix_of_a_joint_samples_its_conditional_law():
    """For an explicit joint mu, the chain with a frozen prefix is the Glauber chain of
    mu(. | prefix): its stationary law is mu restricted to the prefix, renormalised."""
    k, n, prefix = 3, 4, np.array([2, 0])
    log_mu = np.random.default_rng(7).normal(scale=2.0, size=k ** n)
    sc = JointScorer(np.arange(k), n, log_mu)
    ch = exact.glauber_kernel(sc, n, 1.0, prefix=prefix)
    cond = np.exp(log_mu[sc.chain.index(ch.states)])
    np.testing.assert_allclose(exact.stationary(ch.kernel), cond / cond.sum(), atol=1e-12)
    np.testing.assert_allclose(ch.kernel, _kernel_by_hand(sc, ch.states, ch.free, 1.0), atol=1e-12)


# ---------------------------------------------------------------- deep traps (issue 41, item 5.1)

def _planted(k=3, n=3, lift=4.0, seed=0):
    """A joint on {0..k-1}^n with one state (1, ..., 1) lifted by ``lift`` in log mass: every site
    of it is the argmax with a margin of about ``lift``, so at T = 0.1 it is held ~1e17 steps and
    at T = 0.05 ~1e35, and P(x, x) is exactly 1.0 in float64 at both."""
    log_mu = np.random.default_rng(seed).normal(scale=0.3, size=k ** n)
    sc = JointScorer(np.arange(k), n, log_mu)
    x = int(sc.chain.index(np.ones((1, n), np.int64))[0])
    log_mu[x] += lift
    return JointScorer(np.arange(k), n, log_mu), x


def _kernel_mp(sc, T, dps=90):
    """The Glauber kernel of a JointScorer in mpmath at ``dps`` digits, from its log mass directly:
    P(x, x^{i<-a}) += exp(log mu(x^{i<-a}) / T) / sum_b exp(log mu(x^{i<-b}) / T) / n."""
    import mpmath as mp

    mp.mp.dps = dps
    states, k, n = sc.chain.states, len(sc.chain.vocab_ids), sc.n
    P = mp.zeros(len(states), len(states))
    for r, x in enumerate(states):
        for i in range(n):
            ys = np.repeat(x[None], k, 0)
            ys[:, i] = sc.chain.vocab_ids
            cols = sc.chain.index(ys)
            w = [mp.exp(mp.mpf(float(sc.log_mu[c])) / mp.mpf(T)) for c in cols]
            tot = mp.fsum(w)
            for c, wc in zip(cols, w):
                P[r, int(c)] += wc / tot / n
    return P


def _exit_mp(P, B):
    """(I - P_BB)^{-1} 1 in mpmath: the reference exit times from the basin B (indices)."""
    import mpmath as mp

    A = mp.matrix(len(B), len(B))
    for a, x in enumerate(B):
        for b, y in enumerate(B):
            A[a, b] = (1 if a == b else 0) - P[int(x), int(y)]
    return [float(v) for v in mp.lu_solve(A, mp.matrix([1] * len(B)))]


@pytest.mark.parametrize("T", [0.1, 0.05])
def test_deep_trap_holding_and_exit_times_keep_their_digits(T):
    """A planted argmax trap where P(x, x) == 1.0 in float64: margin_check's exact holding time
    and exit_time from {x} and from x with its 2n neighbours agree with a 90-digit mpmath solve of
    (I - P_BB) t = 1 to 1e-12 (the old 1 / max(1 - P(x, x), 1e-300) said 1e300, and the old
    solve of I - P_BB raised LinAlgError on {x}), and the leave probabilities keep 1 / hold."""
    sc, x = _planted()
    n = sc.n
    table = exact.TabulatedScorer(sc, n)
    P = exact.glauber_kernel(table, n, T).kernel
    assert P[x, x] == 1.0                                      # the cancellation the fix must avoid
    Pm = _kernel_mp(sc, T)
    hold = _exit_mp(Pm, [x])[0]
    assert hold > 1e16
    m = groundtruth.margin_check(table, P, T)
    assert m["exact holding time"] == pytest.approx(hold, rel=1e-12)
    assert m["exact holding time"] >= m["certified holding time"]
    single = np.arange(len(P)) == x
    assert exact.exit_time(P, single)[0] == pytest.approx(hold, rel=1e-12)
    assert 1 / exact.leave_probabilities(P)[x] == pytest.approx(hold, rel=1e-12)
    basin = single.copy()
    for i in range(n):
        for a in (0, 2):
            y = np.ones(n, np.int64)
            y[i] = a
            basin[table.chain.index(y[None])[0]] = True
    B = np.flatnonzero(basin)
    np.testing.assert_allclose(exact.exit_time(P, basin), _exit_mp(Pm, B), rtol=1e-12)


def test_exit_time_is_accurate_on_a_random_basin_of_a_random_chain():
    """Incompatible random conditionals at T = 0.1, a basin of 40 of the 81 states: the
    subtraction-free elimination matches the mpmath solve to 1e-11 (so nothing was lost where
    the old plain solve was fine either)."""
    sc = ContextTable(3, 4, seed=3, spread=1.0)
    P = exact.glauber_kernel(sc, 4, 0.1).kernel
    members = np.random.default_rng(1).random(len(P)) < 0.5
    B = np.flatnonzero(members)
    import mpmath as mp

    mp.mp.dps = 60
    A = mp.matrix(len(B), len(B))
    for a, x in enumerate(B):
        for b, y in enumerate(B):
            A[a, b] = (1 if a == b else 0) - mp.mpf(float(P[x, y]))
    want = [float(v) for v in mp.lu_solve(A, mp.matrix([1] * len(B)))]
    np.testing.assert_allclose(exact.exit_time(P, members), want, rtol=1e-11)


def test_exit_time_is_infinite_from_states_that_cannot_leave():
    """A closed class inside B holds the chain forever: inf from it and from every state that can
    reach it, finite (and exact) elsewhere; no LinAlgError."""
    P = np.array([[0.5, 0.5, 0.0, 0.0],
                  [0.0, 1.0, 0.0, 0.0],                # absorbing inside B
                  [0.0, 0.0, 0.75, 0.25],
                  [0.0, 0.0, 0.0, 1.0]])
    t = exact.exit_time(P, np.array([True, True, True, False]))
    assert np.isinf(t[0]) and np.isinf(t[1]) and t[2] == pytest.approx(4.0, rel=1e-15)


@pytest.mark.parametrize("sparse", [False, True])
def test_stationary_linear_solve_keeps_a_trap_whose_diagonal_rounds_to_one(monkeypatch, sparse):
    """The solve used beyond GTH_MAX states: two traps leaving with 1e-17 and 3e-17, so both
    diagonals are exactly 1.0 in float64 and pi = (3/4, 1/4). P^T - I had a zero diagonal there
    and gave pi = (0, 1)."""
    import scipy.sparse as sp

    monkeypatch.setattr(exact, "GTH_MAX", 0)
    P = np.array([[1 - 1e-17, 1e-17], [3e-17, 1 - 3e-17]])
    assert P[0, 0] == P[1, 1] == 1.0
    np.testing.assert_allclose(exact.stationary(sp.csr_matrix(P) if sparse else P), [0.75, 0.25], rtol=1e-12)


@pytest.mark.parametrize("flip", [1e-3, 1e-9, 4e-13, 1e-15])
def test_both_relaxation_times_have_one_floor(flip):
    """A two-state chain that leaves each state with probability ``flip`` has |lambda_2| = 1 - 2 flip
    and t_rel = 1 / (2 flip) in closed form. The ground-truth chapter's spectral gap and the phase
    section's relaxation agree with it where the gap clears the one floor, and both call it not
    resolved (NaN) below it; neither reports inf or a rounding artefact."""
    from textglauber import phase

    P = np.array([[1 - flip, flip], [flip, 1 - flip]])
    closed = 1 / (2 * flip)
    a, b = exact.spectral_gap(P)["relaxation_time"], phase.relaxation(P)
    if 2 * flip >= exact.GAP_FLOOR:
        assert a == pytest.approx(closed, rel=1e-3) and b.t_rel == pytest.approx(closed, rel=1e-3) and b.resolved
    else:
        assert np.isnan(a) and np.isnan(b.t_rel) and not b.resolved
