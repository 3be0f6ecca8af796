"""The exact two-token phase diagram (textglauber.phase) against answers computed independently:
closed forms for independent sites, kernels and eigenvalues built by explicit loops, brute-force
matrix powers, and direct model calls on the tiny MLM."""
import itertools
import math

import numpy as np
import pytest
import torch

from conftest import CountingScorer as RowCounter
from textglauber import exact, models, phase, vocabulary


# ----------------------------------------------------------------------------- independent helpers

def bits_of(s: int, n: int) -> list[int]:
    return [int(ch) for ch in format(s, f"0{n}b")]


def index_of(bits) -> int:
    return int("".join(map(str, bits)), 2)


def brute_kernel(logits: np.ndarray, T: float) -> np.ndarray:
    """P by explicit loops over states, sites and written bits (contexts read as binary strings)."""
    n = logits.shape[0]
    S = 2 ** n
    P = np.zeros((S, S))
    for s in range(S):
        x = bits_of(s, n)
        for i in range(n):
            others = x[:i] + x[i + 1:]
            c = index_of(others) if others else 0
            w = np.exp(logits[i, c] / T - (logits[i, c] / T).max())
            p = w / w.sum()
            for b in (0, 1):
                y = list(x)
                y[i] = b
                P[s, index_of(y)] += p[b] / n
    return P


def brute_stationary(P: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eig(P.T)
    pi = np.real(v[:, np.argmin(np.abs(w - 1))])
    return pi / pi.sum()


def brute_tmix(P: np.ndarray, eps: float = 0.25, t_stop: int = 100_000) -> int:
    pi = brute_stationary(P)
    M = np.eye(len(P))
    for t in range(1, t_stop):
        M = M @ P
        if 0.5 * np.abs(M - pi).sum(1).max() <= eps:
            return t
    raise AssertionError("no mixing")


def random_scores(n: int, seed: int, scale: float = 2.0) -> phase.Scores:
    rng = np.random.default_rng(seed)
    return phase.Scores(rng.normal(scale=scale, size=(n, 2 ** (n - 1), 2)))


def product_scores(thetas) -> phase.Scores:
    """Independent sites: site i's logits (0, theta_i) whatever the context."""
    n = len(thetas)
    L = np.zeros((n, 2 ** (n - 1), 2))
    L[:, :, 1] = np.asarray(thetas)[:, None]
    return phase.Scores(L)


def product_Pt(thetas, t: int) -> np.ndarray:
    """Closed form of P^t for independent sites: U, the set of sites never picked in t steps, has
    P(U = A) = sum_{R >= A} (-1)^{|R| - |A|} ((n - |R|)/n)^t; given U the untouched sites keep
    their start bit and the others are independent draws from pi_i."""
    n = len(thetas)
    p1 = 1 / (1 + np.exp(-np.asarray(thetas)))
    subsets = [frozenset(c) for k in range(n + 1) for c in itertools.combinations(range(n), k)]
    pU = {A: sum((-1) ** (len(R) - len(A)) * ((n - len(R)) / n) ** t for R in subsets if A <= R) for A in subsets}
    S = 2 ** n
    out = np.zeros((S, S))
    for sx in range(S):
        x = bits_of(sx, n)
        for sy in range(S):
            y = bits_of(sy, n)
            for A, pa in pU.items():
                term = pa
                for i in range(n):
                    term *= (x[i] == y[i]) if i in A else (p1[i] if y[i] else 1 - p1[i])
                out[sx, sy] += term
    return out


# ------------------------------------------------------------------------------- product chain

@pytest.mark.parametrize("n", [3, 4, 6])
def test_product_chain_relaxation_time_is_n(n):
    """Independent sites resampled exactly: eigenvalues 1 - k/n, so |lambda_2| = 1 - 1/n, t_rel = n."""
    thetas = np.random.default_rng(n).normal(size=n)
    rel = phase.relaxation(phase.kernel(product_scores(thetas), 1.0))
    assert rel.resolved
    assert rel.t_rel == pytest.approx(n, abs=1e-9)
    assert rel.lambda2_abs == pytest.approx(1 - 1 / n, abs=1e-12)


def test_product_chain_sparse_eigen_path_agrees():
    """Past dense_max the ARPACK path gives the same relaxation time."""
    n = 8
    thetas = np.random.default_rng(8).normal(size=n)
    rel = phase.relaxation(phase.kernel(product_scores(thetas), 1.0), dense_max=16)
    assert rel.resolved and rel.t_rel == pytest.approx(n, abs=1e-8)
    P = phase.kernel(random_scores(8, 3), 1.0)
    assert phase.relaxation(P, dense_max=16).t_rel == pytest.approx(phase.relaxation(P).t_rel, rel=1e-9)


@pytest.mark.parametrize("n", [3, 4])
def test_product_chain_mixing_time_against_closed_form(n):
    thetas = np.random.default_rng(10 + n).normal(size=n)
    P = phase.kernel(product_scores(thetas), 1.0)
    p1 = 1 / (1 + np.exp(-thetas))
    pi = np.array([np.prod([p1[i] if b else 1 - p1[i] for i, b in enumerate(bits_of(s, n))]) for s in range(2 ** n)])
    dists, t_closed = [], None
    for t in range(1, 200):
        Pt = product_Pt(thetas, t)
        np.testing.assert_allclose(Pt, np.linalg.matrix_power(P.toarray(), t), atol=1e-12)
        dists.append(0.5 * np.abs(Pt - pi).sum(1).max())
        if dists[-1] <= 0.25:
            t_closed = t
            break
    assert dists[0] > 0.25
    got = phase.mixing_time(P)
    assert got.status == "exact" and got.t_mix == t_closed


# ----------------------------------------------------------------------- non-reversible chains

@pytest.mark.parametrize("n,seed", [(4, 0), (5, 1)])
def test_random_chain_against_brute_force(n, seed):
    scores = random_scores(n, seed)
    T = 0.8
    P = phase.kernel(scores, T)
    B = brute_kernel(scores.logits, T)
    np.testing.assert_allclose(P.toarray(), B, atol=1e-15, rtol=1e-13)
    assert np.allclose(P.toarray().sum(1), 1.0)

    ev = np.linalg.eigvals(B)
    mod = np.sort(np.abs(ev))[::-1]
    rel = phase.relaxation(P)
    assert rel.resolved and rel.t_rel == pytest.approx(1 / (1 - mod[1]), rel=1e-9)
    assert np.abs(ev.imag).max() > 1e-6                      # complex eigenvalues: not reversible

    pi = brute_stationary(B)
    flow = pi[:, None] * B
    assert np.abs(flow - flow.T).max() > 1e-4                  # detailed balance fails
    assert phase.mixing_time(P).t_mix == brute_tmix(B)


def test_kernel_keeps_a_deep_trap_exit_probability_and_reports_unresolved():
    """Two traps (all-zeros with margin 80, all-ones with 90): the exit probability of all-zeros is
    about e^-80 / n, far below float64 resolution of 1 - P(x, x); the kernel keeps it in the
    off-diagonal entries, the gap is unresolved, t_mix exceeds t_max and the trap bound takes over."""
    n = 4
    C = 2 ** (n - 1)
    L = np.zeros((n, C, 2))
    L[:, 0, 1] = -80.0                                          # context all zeros: write 0
    L[:, C - 1, 1] = 90.0                                       # context all ones: write 1
    P = phase.kernel(phase.Scores(L), 1.0)
    leave = exact.leave_probabilities(P)
    assert leave[0] == pytest.approx(math.exp(-80) / (1 + math.exp(-80)), rel=1e-12)
    assert P[0, 0] == 1.0                                       # the subtraction would give 0
    rel = phase.relaxation(P)
    assert not rel.resolved and math.isnan(rel.t_rel)
    mix = phase.mixing_time(P, t_max=2 ** 40)
    assert mix.status == "beyond t_max" and math.isnan(mix.t_mix)
    pi = exact.stationary(P)
    bound = phase.mixing_lower_bound(P, pi)
    assert bound.center == 0 and bound.pi_B < 1e-3
    assert bound.t_lower == pytest.approx((0.75 - bound.pi_B) / leave[0], rel=1e-9)
    assert phase.mixing_lower_bound(P).t_lower >= 0.25 / leave[0] * (1 - 1e-9)   # the pi-free rule
    assert phase.mixing_time(P, max_states=8).status == "too many states"


# ---------------------------------------------------------------------------------- lower bounds

@pytest.mark.parametrize("n,seed,T", [(3, 0, 0.3), (3, 1, 1.0), (4, 2, 0.3), (4, 3, 1.0), (5, 4, 0.25),
                                      (5, 5, 0.6)])
def test_lower_bounds_never_exceed_exact_tmix(n, seed, T):
    scores = random_scores(n, seed, scale=3.0)
    P = phase.kernel(scores, T)
    pi = exact.stationary(P)
    t_mix = phase.mixing_time(P, pi=pi).t_mix
    assert phase.mixing_lower_bound(P, pi).t_lower <= t_mix
    assert phase.mixing_lower_bound(P).t_lower <= t_mix
    assert phase.tmix_lower_from_trel(phase.relaxation(P).t_rel) <= t_mix
    for eps in (0.1, 0.4):
        assert phase.mixing_lower_bound(P, pi, eps=eps).t_lower <= phase.mixing_time(P, eps, pi=pi).t_mix


@pytest.mark.parametrize("n", [4, 5])
def test_lower_bound_is_tight_on_a_planted_trap(n):
    """All-zeros holds the chain with margin 12; any other context pushes every site to 1, so once out
    the chain does not come back: t_mix is the trap's exit time, and the bound from B = {all-zeros}
    is within a factor 2.5 of it."""
    C = 2 ** (n - 1)
    L = np.zeros((n, C, 2))
    L[:, :, 1] = 4.0
    L[:, 0, 1] = -12.0
    P = phase.kernel(phase.Scores(L), 1.0)
    pi = exact.stationary(P)
    t_mix = phase.mixing_time(P, pi=pi).t_mix
    bound = phase.mixing_lower_bound(P, pi)
    assert bound.center == 0 and bound.radius == 0
    assert t_mix / 2.5 <= bound.t_lower <= t_mix


# ---------------------------------------------------------------------------------------- alpha

def test_alpha_on_synthetic_tables():
    assert phase.dobrushin_alpha(product_scores([0.3, -1.0, 2.0]), 1.0)[0] == 0.0
    n, T = 4, 0.7
    scores = random_scores(n, 9)
    alpha, A = phase.dobrushin_alpha(scores, T)
    P = brute_kernel(scores.logits, T)
    p1 = np.zeros((n, 2 ** n))
    # p_i(1 | x) read off the brute kernel as n P(z, z with bit i := 1), z = x with bit i := 0
    for s in range(2 ** n):
        for i in range(n):
            z = bits_of(s, n)
            z[i] = 0
            y = list(z)
            y[i] = 1
            p1[i, s] = n * P[index_of(z), index_of(y)]
    want = np.zeros((n, n))
    for s in range(2 ** n):
        for j in range(n):
            for i in range(n):
                if i != j:
                    want[i, j] = max(want[i, j], abs(p1[i, s] - p1[i, s ^ (1 << (n - 1 - j))]))
    np.testing.assert_allclose(A, want, atol=1e-12)
    assert alpha == pytest.approx(want.sum(1).max())


@pytest.fixture(scope="module")
def pair_scorer(tiny_mlm):
    return models.MaskedLMScorer(tiny_mlm, vocabulary.allowed_vocabulary(tiny_mlm.tokenizer, tokens=["the", "dog"]))


def test_score_table_and_alpha_on_the_tiny_mlm(pair_scorer, tiny_mlm):
    vocab = tiny_mlm.tokenizer.get_vocab()
    the, dog = vocab["the"], vocab["dog"]
    n = 4
    pairs = phase.global_pairs(the, dog, n)
    counter = RowCounter(pair_scorer)
    table = phase.score_table(counter, pairs, batch=5)
    assert table.rows_scored == counter.rows == n * 2 ** (n - 1)

    # direct calls, one per masked site, on all 2^n full states (the site's own token left in place)
    cols = pair_scorer.vocab.index_of(torch.tensor([the, dog]))
    full = torch.tensor([[[the, dog][b] for b in bits_of(s, n)] for s in range(2 ** n)])
    direct = {}
    for i in range(n):
        sc = pair_scorer.scores(full, torch.full((2 ** n,), i))[:, cols].double().numpy()
        direct.update({(s, i): sc[s] for s in range(2 ** n)})
    for s, i in [(0, 0), (5, 2), (15, 3), (9, 1)]:
        x = bits_of(s, n)
        c = index_of(x[:i] + x[i + 1:])
        np.testing.assert_allclose(table.logits[i, c], direct[s, i], atol=1e-5)

    for T in (0.5, 2.0):
        p1 = {k: 1 / (1 + np.exp(-(v[1] - v[0]) / T)) for k, v in direct.items()}
        want = np.zeros((n, n))
        for s, j in itertools.product(range(2 ** n), range(n)):
            y = s ^ (1 << (n - 1 - j))
            for i in range(n):
                if i != j:
                    want[i, j] = max(want[i, j], abs(p1[s, i] - p1[y, i]))
        alpha, A = phase.dobrushin_alpha(table, T)
        np.testing.assert_allclose(A, want, atol=1e-5)
        assert alpha == pytest.approx(want.sum(1).max(), abs=1e-5)
        assert alpha > 0


def test_score_table_rejects_tokens_outside_the_vocabulary(pair_scorer, tiny_mlm):
    ran = tiny_mlm.tokenizer.get_vocab()["ran"]
    with pytest.raises(ValueError, match="not in the scorer's allowed vocabulary"):
        phase.score_table(pair_scorer, phase.global_pairs(ran, tiny_mlm.tokenizer.get_vocab()["dog"], 3))
    with pytest.raises(ValueError, match="differ"):
        phase.global_pairs(ran, ran, 3)


# -------------------------------------------------------------------------------------- designs

def test_passage_pairs_and_phase_table_on_the_tiny_mlm(full_scorer, tiny_mlm):
    tok = tiny_mlm.tokenizer
    content = vocabulary.encode(tok, "the dog ran to the park")[:4]
    pairs = phase.passage_pairs(full_scorer, content)
    assert (pairs[:, 0] == np.asarray(content)).all() and (pairs[:, 0] != pairs[:, 1]).all()
    for i in range(len(content)):                              # the top alternative, by a direct call
        sc = full_scorer.scores(torch.tensor([content]), torch.tensor([i]))[0]
        order = torch.argsort(sc, descending=True)
        top = [int(full_scorer.vocab.ids[k]) for k in order[:2]]
        assert pairs[i, 1] == (top[1] if top[0] == content[i] else top[0])

    by_n = {n: phase.passage_pairs(full_scorer, content[:n]) for n in (2, 3)}
    scorer = phase.design_scorer(tiny_mlm, by_n.values())
    df = phase.phase_table(scorer, "tiny-mlm", "passage", by_n, [0.5, 1.0])
    assert list(df.columns) == phase.COLUMNS and len(df) == 4
    assert (df.rows_scored == df.n * 2 ** (df.n - 1)).all() and (df.states == 2 ** df.n).all()
    assert df.tokens.iloc[-1] == " ".join(f"{tok.convert_ids_to_tokens(int(a))}/{tok.convert_ids_to_tokens(int(b))}"
                                          for a, b in by_n[3])
    assert df.resolved.all() and (df.t_mix >= df.t_mix_lower).all() and (df.t_mix_lower > 0).all()

    vocab = tok.get_vocab()
    g = phase.phase_table(scorer := phase.design_scorer(tiny_mlm, [phase.global_pairs(vocab["the"], vocab["dog"], 1)]),
                          "tiny-mlm", "global", {3: phase.global_pairs(vocab["the"], vocab["dog"], 3)}, [1.0],
                          tmix_max_states=4)
    assert g.tokens.iloc[0] == "the|dog" and math.isnan(g.t_mix.iloc[0]) and g.t_mix_lower.iloc[0] > 0
    assert scorer.vocab.size == 2


# ------------------------------------------------------------------------------------- coupling

def coupon_mean(n: int, k: int) -> float:
    """Expected steps for n-site random picks to touch k given sites: n H_k."""
    return n * sum(1 / j for j in range(1, k + 1))


@pytest.mark.parametrize("thetas", [[0.0] * 5, [0.4, -1.3, 2.0, 0.1, -0.5]])
def test_coupling_on_independent_sites_is_coupon_collecting(thetas):
    """Independent sites: a picked site agrees forever after (same conditional, maximal coupling),
    so the meeting time from pairs differing on k sites is the time to touch those k sites."""
    n, m = len(thetas), 4000
    scores = product_scores(thetas)
    rng = np.random.default_rng(0)
    for x, y, k in [(0, 2 ** n - 1, n), (0b00011, 0b01010, 2)]:
        tau = phase.coupling_times_exact(scores, 1.0, np.tile([x, y], (m, 1)), 10 ** 4, rng)
        assert np.isfinite(tau).all()
        var = n ** 2 * sum(1 / j ** 2 for j in range(1, k + 1)) - coupon_mean(n, k)
        assert abs(tau.mean() - coupon_mean(n, k)) < 4 * math.sqrt(var / m)
    tau = phase.coupling_times_exact(scores, 1.0, np.array([[3, 3], [0, 1]]), 0, rng)
    assert tau[0] == 0 and tau[1] == np.inf
    assert phase.worst_pair(phase.kernel(scores, 1.0)) == (0, 2 ** n - 1)


def test_coupling_bounds_the_exact_distance_on_a_random_chain():
    """The coupling inequality, pair by pair and for the worst case: P(T > t) >= TV(P^t(x,.), P^t(y,.))
    for every pair, so t_mix(1/4) <= min{t : max over pairs P(T > t) <= 1/4}."""
    n, T, reps = 4, 0.7, 600
    scores = random_scores(n, 21)
    P = phase.kernel(scores, T)
    dense = P.toarray()
    t_mix = phase.mixing_time(P).t_mix
    pairs = np.array(list(itertools.combinations(range(2 ** n), 2)))
    starts = np.repeat(pairs, reps, axis=0)
    tau = phase.coupling_times_exact(scores, T, starts, 50 * int(t_mix), np.random.default_rng(1)).reshape(-1, reps)
    assert np.isfinite(tau).all()
    M = np.eye(2 ** n)
    for t in range(1, 3 * int(t_mix)):
        M = M @ dense
        tv = np.clip(0.5 * np.abs(M[pairs[:, 0]] - M[pairs[:, 1]]).sum(1), 0.0, 1.0)
        surv = (tau > t).mean(1)
        assert (surv >= tv - 5 * np.sqrt(tv * (1 - tv) / reps) - 1e-3).all()
    worst = [t for t in range(1, 10 ** 4) if (tau > t).mean(1).max() <= 0.25][0]
    assert t_mix <= worst
    a, b = phase.worst_pair(P)
    k = np.flatnonzero((pairs[:, 0] == min(a, b)) & (pairs[:, 1] == max(a, b)))[0]
    assert np.quantile(tau[k], 0.75) >= t_mix


# --------------------------------------------------------------------------------------- growth

def test_growth_verdicts():
    """The verdict and its sentence on laws with a known family: each named, its numbers in the
    sentence read from the fit, and no law named where the values do not decide one (the rule's
    power and safety under noise are in test_growth_verdict.py)."""
    ns = np.arange(3, 13)
    v, words = phase.growth_verdict(ns, 7.0 * ns)
    assert v == "polynomial" and "n^1.0" in words and "n = 3 to 12" in words
    v, words = phase.growth_verdict(ns, 2.0 * np.exp(0.8 * ns))
    assert v == "exponential" and "e^{0.80 n}" in words and "0.80 per site" in words
    v, words = phase.growth_verdict(ns, 2.0 * np.exp(0.35 * ns))
    assert v == "exponential" and "e^{0.35 n}" in words        # the rate read from the fit, not fixed
    spiky = 5.0 * ns * np.where(ns % 2 == 0, 1.0, 40.0)
    v, words = phase.growth_verdict(ns, spiky)
    assert v == "cannot tell" and "neither fits" in words
    v, words = phase.growth_verdict(ns, np.where(ns == 9, np.nan, ns * 1.0))
    assert v == "unresolved" and "n = 9" in words
    n2 = np.arange(3, 15)
    v, words = phase.growth_verdict(n2, n2 ** 2.0)
    assert v == "polynomial" and "n^2.0" in words
    assert phase.growth_verdict(ns, ns * np.log(ns))[0] == "polynomial"      # n ln n lies between n and n^2


# ------------------------------------------------------------------ product chains with any site kernel

def product_glauber(site_kernels) -> np.ndarray:
    """Random-site Glauber on independent sites: P = (1/n) sum_i I x ... x K_i x ... x I (site 0 the
    most significant bit, as in textglauber.phase)."""
    n = len(site_kernels)
    P = np.zeros((2 ** n, 2 ** n))
    for i, K in enumerate(site_kernels):
        term = np.ones((1, 1))
        for j in range(n):
            term = np.kron(term, K if j == i else np.eye(2))
        P += term / n
    return P


@pytest.mark.parametrize("lams", [[0.3, 0.3, 0.3], [0.5, -0.2, 0.1, 0.0], [-0.9, -0.9, -0.9]])
def test_product_chain_with_site_eigenvalue_lambda_has_gap_one_minus_lambda_over_n(lams):
    """A two-state kernel [[1 - a, a], [b, 1 - b]] has second eigenvalue 1 - a - b = lambda; the
    product chain's eigenvalues are 1 - sum_{i in S} (1 - lambda_i) / n over subsets S, so its gap is
    (1 - max lambda_i) / n when that term has the largest modulus. With lambda = -0.9 at n = 3 the
    subset of all sites gives -0.9, larger in modulus than 1 - 1.9/3: the modulus, not the real part,
    decides, and t_rel is 10, not 3 / 1.9."""
    n = len(lams)
    kernels = []
    for k, lam in enumerate(lams):
        a = (1 - lam) * (0.3 + 0.1 * k)
        kernels.append(np.array([[1 - a, a], [1 - lam - a, lam + a]]))
    P = product_glauber(kernels)
    want = max(abs(1 - sum(1 - lams[i] for i in S) / n)
               for r in range(1, n + 1) for S in itertools.combinations(range(n), r))
    rel = phase.relaxation(P)
    assert rel.lambda2_abs == pytest.approx(want, abs=1e-12) and rel.t_rel == pytest.approx(1 / (1 - want), rel=1e-10)
    if max(map(abs, lams)) == max(lams):
        assert rel.t_rel == pytest.approx(n / (1 - max(lams)), rel=1e-10)
    tmix = phase.mixing_time(P).t_mix
    assert tmix == brute_tmix(P)
    assert phase.tmix_lower_from_trel(rel.t_rel) <= tmix


# ------------------------------------------------------------------------------ the profile's section

def test_the_phase_section_on_the_tiny_mlm_agrees_with_itself_and_with_direct_kernels(tiny_mlm):
    """phasegrid.run end to end on a small section: one row per (design, n, T) with the column set of
    the issue, rows scored n 2^(n-1) (+ n for the passage's alternatives), the calibration's exact
    t_mix equal to the table's, and the global design's t_rel equal to the eigenvalues of a kernel
    built by explicit loops from direct scorer calls."""
    from textglauber import phasegrid

    p = {"models": [{"name": "tiny-mlm", "pair": ["the", "dog"], "corpus": "tiny", "max_n": 5}], "min_n": 3,
         "temperatures": [0.5, 2.0], "tmix_max_states": 32, "calibration_n": 4,
         "calibration_pairs": 50, "passages": 2, "passage_max_n": 4,
         "landscape": {"lengths": [7], "passages": 1, "starts": 2, "max_states": 20, "settle_states": 20},
         "covering": {"lengths": [3], "temperatures": [0.05], "eps": 0.05, "max_states": 400}}
    run = phasegrid.run(p, device="cpu", dtype="float32", on_missing_model="fail", gen=torch.Generator().manual_seed(0))
    t = run.table
    assert len(t) == (3 + 2 + 2) * 2 and set(t.design) == {"global", "passage 1", "passage 2"}
    for col in ("model", "design", "tokens", "n", "temperature", "states", "t_rel", "t_mix", "alpha", "rows_scored"):
        assert col in t
    # a passage's alternatives are found once, in the longest frame any part asks for (n = 7, the landscape's)
    extra = np.where(t.design == "global", 0, 7)
    assert (t.rows_scored == t.n * 2 ** (t.n - 1) + extra).all()
    for design in ("passage 1", "passage 2"):                       # nested: length 3 is length 4's first sites
        short, long = (t[(t.design == design) & (t.n == n)].tokens.iloc[0] for n in (3, 4))
        assert long.split()[:3] == short.split()
    land = run.landscape
    assert set(zip(land.design, land.n)) == {("global", n) for n in (3, 4, 5, 7)} | {("passage 1", n) for n in (3, 4, 7)} | {
        ("passage 2", n) for n in (3, 4)}
    assert land[land.n < 7].complete.all() and not land[land.n == 7].complete.any() and (land.wells >= 1).all()
    assert list(run.covering.columns[:3]) == ["model", "n", "temperature"] and len(run.covering) == 1
    cal = run.calibration
    for r in cal.itertuples():
        row = t[(t.design == r.design) & (t.n == r.n) & np.isclose(t.temperature, r.temperature)].iloc[0]
        assert r.t_mix == row.t_mix
    g = t[(t.design == "global") & (t.n == 4) & np.isclose(t.temperature, 0.5)].iloc[0]
    vocab = tiny_mlm.tokenizer.get_vocab()
    scorer = models.MaskedLMScorer(tiny_mlm, vocabulary.allowed_vocabulary(tiny_mlm.tokenizer, tokens=["the", "dog"]))
    cols = scorer.vocab.index_of(torch.tensor([vocab["the"], vocab["dog"]]))
    n = 4
    L = np.zeros((n, 2 ** (n - 1), 2))
    for s in range(2 ** n):
        x = bits_of(s, n)
        ids = torch.tensor([[[vocab["the"], vocab["dog"]][b] for b in x]])
        for i in range(n):
            L[i, index_of(x[:i] + x[i + 1:])] = scorer.scores(ids, torch.tensor([i]))[0, cols].double().numpy()
    B = brute_kernel(L, 0.5)
    mod = np.sort(np.abs(np.linalg.eigvals(B)))[::-1]
    assert g.t_rel == pytest.approx(1 / (1 - mod[1]), rel=1e-4)
    assert g.t_mix == brute_tmix(B)
    assert g.tokens == "the|dog" and len(run.cost) == 1 and run.notes == []


def test_a_missing_phase_model_is_a_note_or_an_error_as_the_profile_says():
    from textglauber import phasegrid

    base = {"min_n": 3, "temperatures": [1.0, 2.0], "tmix_max_states": 16,
            "calibration_n": 3, "calibration_pairs": 20, "passages": 1, "passage_max_n": 3,
            "landscape": {"lengths": [], "passages": 0, "starts": 0, "max_states": 1, "settle_states": 0},
            "covering": {"lengths": [], "temperatures": [1.0], "eps": 0.1, "max_states": 10}}
    good = {"name": "tiny-mlm", "pair": ["the", "dog"], "corpus": "tiny", "max_n": 4}
    gone = {"name": "local/no-such-model", "pair": ["a", "b"], "corpus": "tiny", "max_n": 4}
    one = phasegrid.run({**base, "models": [gone, good]}, device="cpu", dtype="float32", on_missing_model="skip",
                        gen=torch.Generator().manual_seed(3))
    assert len(one.notes) == 1 and "local/no-such-model" in one.notes[0]
    assert set(one.table.model) == {"tiny-mlm"}
    with pytest.raises(Exception, match="no-such-model"):
        phasegrid.run({**base, "models": [gone, good]}, device="cpu", dtype="float32", on_missing_model="fail",
                      gen=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("n,T", [(5, 1.0), (6, 0.3), (8, 0.15)])
def test_the_sparse_stationary_law_agrees_with_gth(n, T):
    """The sparse solve that names the heaviest state beyond tmix_max_states, against GTH elimination
    (exact to rounding), on chains from fast to metastable."""
    P = phase.kernel(random_scores(n, 40 + n, scale=3.0), T)
    pi = exact.stationary(P)
    got = phase.stationary_sparse(P)
    assert got.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(got, pi, rtol=1e-7, atol=1e-14)
    assert int(np.argmax(got)) == int(np.argmax(pi))


def test_phase_point_beyond_tmix_max_states_names_the_heaviest_state_and_gives_no_tmix():
    scores = random_scores(6, 77, scale=3.0)
    full = phase.phase_point(scores, 0.4, tmix_max_states=64)
    cut = phase.phase_point(scores, 0.4, tmix_max_states=32)
    assert np.isfinite(full["t_mix"]) and math.isnan(cut["t_mix"])
    assert cut["top_state"] == full["top_state"] and cut["top_mass"] == pytest.approx(full["top_mass"], rel=1e-8)
    assert cut["t_mix_lower"] <= full["t_mix"] and full["t_mix_lower"] <= full["t_mix"]
    assert cut["t_rel"] == pytest.approx(full["t_rel"], rel=1e-12) and cut["alpha"] == full["alpha"]
