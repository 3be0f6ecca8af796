"""The exact phase diagram of two-token Glauber chains of real masked LMs (issue 51, part 1).

Each site i of an n-token text may hold one of two tokens, its pair (a_i, b_i), so a state is a
bit vector x in {0, 1}^n (site i holds pair_i[x_i]) and there are 2^n states: few enough to write
the chain's kernel down and read its relaxation time, its mixing time and its influence
coefficients off exactly, for a real model, over a grid of lengths and temperatures.

Conventions used everywhere below:

- a state is an integer s in [0, 2^n) whose bits are the sites, site 0 the most significant:
  x_i = (s >> (n - 1 - i)) & 1;
- a context of site i is the other n - 1 bits in site order, again most significant first: the
  integer left when bit i is cut out of s (:func:`context_of`);
- the conditional of site i is the softmax of the model's two logits over the pair at
  temperature T, i.e. p_i(1 | context) = 1 / (1 + exp(-(L_1 - L_0) / T)).

The conditional of site i does not read x_i, so a model is asked once per (site, context): n
2^(n-1) rows per length, and those logits serve every temperature (:func:`score_table`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch
from scipy.special import expit

from . import exact

MAX_N = 20
"""Longest two-token chain a profile may ask for (2^20 states, about 10^7 rows to score: a GPU's
work); the schema's ``PHASE_MAX_N`` mirrors it."""

TMIX_MAX_STATES = 4096
"""Largest state space whose exact t_mix a profile may ask for (a dense 4096 x 4096 kernel's
powers); the schema's ``PHASE_TMIX_MAX_STATES`` mirrors it."""

DENSE_MAX = 256
"""Largest state space whose eigenvalues are all computed densely (``numpy.linalg.eigvals``);
beyond it ARPACK finds the few of largest modulus from the sparse kernel (n + 1 entries a row)."""

GAP_FLOOR = 1e-12
"""Smallest spectral gap 1 - |lambda_2| taken as resolved.

A backward-stable eigenvalue solver returns the eigenvalues of P + E with ||E|| about
machine epsilon (2.2e-16) times ||P||_F, and ||P||_F <= sqrt(S) <= 128 for the S <= 2^14 states
used here, so the absolute error of |lambda_2| is of order 1e-14 times the eigenvalue's
condition number. A non-reversible kernel's eigenvalues are not perfectly conditioned; the floor
leaves two orders of magnitude for that. Below it, |lambda_2| cannot be told apart from 1 and the
relaxation time (beyond 1e12 steps) is reported as unresolved instead of as a rounding artefact."""


# ----------------------------------------------------------------------------------------- states

def site_bits(states: np.ndarray, n: int) -> np.ndarray:
    """The (..., n) bits of each state index, site 0 first (the most significant bit)."""
    states = np.asarray(states, np.int64)
    shifts = np.arange(n - 1, -1, -1)
    return (states[..., None] >> shifts) & 1


def context_of(states, sites, n: int) -> np.ndarray:
    """The context index of each (state, site): the state's other n - 1 bits, in site order."""
    states, sites = np.asarray(states, np.int64), np.asarray(sites, np.int64)
    low_width = n - 1 - sites
    high = states >> (low_width + 1)
    low = states & ((np.int64(1) << low_width) - 1)
    return (high << low_width) | low


def with_context(contexts, sites, bit, n: int) -> np.ndarray:
    """The state index whose site ``sites`` holds ``bit`` and whose other sites hold ``contexts``."""
    contexts, sites = np.asarray(contexts, np.int64), np.asarray(sites, np.int64)
    low_width = n - 1 - sites
    high = contexts >> low_width
    low = contexts & ((np.int64(1) << low_width) - 1)
    return (high << (low_width + 1)) | (np.asarray(bit, np.int64) << low_width) | low


# ---------------------------------------------------------------------------------------- scoring

@dataclass
class Scores:
    """The model's logits for the two tokens of every site in every context.

    ``logits[i, c, b]`` is s_i(pair_i[b] | context c) in the model's own frame (special tokens
    around the content); ``rows_scored`` counts the masked rows the model was asked for (0 for a
    synthetic table)."""

    logits: np.ndarray                # (n, 2^(n-1), 2) float64
    pairs: np.ndarray | None = None   # (n, 2) token ids, or None for a synthetic table
    rows_scored: int = 0

    def __post_init__(self):
        self.logits = np.asarray(self.logits, np.float64)
        n = self.logits.shape[0]
        if self.logits.shape != (n, 2 ** (n - 1), 2):
            raise ValueError(f"logits must have shape (n, 2^(n-1), 2), got {self.logits.shape}")

    @property
    def n(self) -> int:
        return self.logits.shape[0]

    def p_one(self, temperature: float) -> np.ndarray:
        """p_i(1 | c) for every site and context, (n, 2^(n-1)), from the logit difference (stable)."""
        return expit((self.logits[..., 1] - self.logits[..., 0]) / temperature)


def _check_pairs(scorer, pairs: np.ndarray) -> np.ndarray:
    """The pairs' columns in the scorer's allowed vocabulary, after checking the pairs make sense."""
    if pairs.ndim != 2 or pairs.shape[1] != 2 or len(pairs) < 1:
        raise ValueError(f"pairs must be an (n, 2) array of token ids, got shape {pairs.shape}")
    if (pairs[:, 0] == pairs[:, 1]).any():
        raise ValueError("a site's two tokens must differ")
    if len(pairs) > getattr(scorer, "max_length", len(pairs)):
        raise ValueError(f"n = {len(pairs)} exceeds the model's content length {scorer.max_length}")
    cols = scorer.vocab.index_of(torch.as_tensor(pairs)).numpy()
    if (cols < 0).any():
        raise ValueError(f"tokens {sorted(set(pairs[cols < 0].tolist()))} are not in the scorer's allowed vocabulary")
    return cols


def score_table(scorer, pairs, batch: int = 2048) -> Scores:
    """Every logit the two-token chain on ``pairs`` can ask for, each (site, context) scored once.

    Row r = i * 2^(n-1) + c is site i masked in the state whose other sites hold context c (the
    site's own token is irrelevant: it is masked). Rows go to ``scorer.scores`` ``batch`` at a
    time; the two logits of the site's pair are kept from the row of allowed-vocabulary logits."""
    pairs = np.asarray(pairs, np.int64)
    cols = _check_pairs(scorer, pairs)
    n = len(pairs)
    rows = n * 2 ** (n - 1)
    sites = np.repeat(np.arange(n), 2 ** (n - 1))
    contexts = np.tile(np.arange(2 ** (n - 1)), n)
    out = np.empty((rows, 2))
    for lo in range(0, rows, batch):
        i, c = sites[lo:lo + batch], contexts[lo:lo + batch]
        bits = site_bits(with_context(c, i, 0, n), n)
        tokens = pairs[np.arange(n), bits]                        # (B, n) token ids
        sc = scorer.scores(torch.as_tensor(tokens), torch.as_tensor(i)).double().cpu().numpy()
        out[lo:lo + batch] = np.take_along_axis(sc, cols[i], axis=1)
    return Scores(out.reshape(n, 2 ** (n - 1), 2), pairs, rows)


# ----------------------------------------------------------------------------------------- kernel

def kernel(scores: Scores, temperature: float) -> sp.csr_matrix:
    """The exact kernel P (2^n x 2^n, row-stochastic, float64) at temperature T.

    From state x: pick site i with probability 1/n and write bit b with probability p_i(b | x_{-i}).
    Writing the other bit moves the chain; writing the same bit back holds it, so P(x, x) is the sum
    of the n write-back terms (never 1 minus the moves: that would lose a deep trap's digits). Both
    probabilities come from the logit difference through the logistic function, each computed
    directly, so a probability of 1e-30 keeps its digits."""
    n, states = scores.n, np.arange(2 ** scores.n)
    d = (scores.logits[..., 1] - scores.logits[..., 0]) / temperature
    hold = np.zeros(len(states))
    rows, cols, vals = [states], [states], []
    for i in range(n):
        di = d[i, context_of(states, i, n)]
        bit = (states >> (n - 1 - i)) & 1
        signed = np.where(bit == 1, di, -di)                      # favours the current bit when > 0
        hold += expit(signed) / n
        rows.append(states)
        cols.append(states ^ (1 << (n - 1 - i)))
        vals.append(expit(-signed) / n)
    vals.insert(0, hold)
    shape = (len(states), len(states))
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=shape)


# ------------------------------------------------------------------------------------- relaxation

@dataclass
class Relaxation:
    """t_rel = 1 / (1 - |lambda_2|), with |lambda_2| the second-largest eigenvalue modulus.

    ``resolved`` is False (and t_rel NaN) where the gap is below :data:`GAP_FLOOR` or the sparse
    eigen solver did not converge (then ``lambda2_abs`` is NaN too)."""

    t_rel: float
    lambda2_abs: float
    resolved: bool


def _eigen_moduli(P, dense_max: int) -> np.ndarray | None:
    """Eigenvalue moduli, largest first: all of them (dense) up to ``dense_max`` states, else the six
    largest from ARPACK (None when it does not converge)."""
    s = P.shape[0]
    if s <= dense_max:
        ev = np.linalg.eigvals(P.toarray() if sp.issparse(P) else np.asarray(P, np.float64))
    else:
        v0 = np.random.default_rng(0).random(s)          # not constant: that is the eigenvector of 1
        try:
            ev = spla.eigs(sp.csr_matrix(P), k=6, which="LM", v0=v0, ncv=min(s - 1, 40),
                           tol=0.0, maxiter=200 * s, return_eigenvectors=False)
        except spla.ArpackNoConvergence:
            return None
    return np.sort(np.abs(ev))[::-1]


def relaxation(P, dense_max: int = DENSE_MAX) -> Relaxation:
    """The relaxation time of a (possibly non-reversible) kernel from its eigenvalues.

    The chain is not reversible in general, so eigenvalues may be complex: |lambda_2| is the
    second-largest modulus. Dense ``numpy.linalg.eigvals`` up to ``dense_max`` states; beyond,
    ARPACK's six eigenvalues of largest modulus."""
    mod = _eigen_moduli(P, dense_max)
    if mod is None:
        return Relaxation(np.nan, np.nan, False)
    lam2 = float(mod[1]) if len(mod) > 1 else 0.0
    gap = 1.0 - lam2
    if not gap >= GAP_FLOOR:
        return Relaxation(np.nan, lam2, False)
    return Relaxation(1.0 / gap, lam2, True)


def stationary_sparse(P) -> np.ndarray:
    """The stationary law from one sparse solve: pi Q = 0 for the generator Q = P - I, its diagonal
    written as minus each row's off-diagonal sum (so a trap held for 1e16 steps keeps its exit
    rate), with pi fixed to 1 at the state the chain holds longest and the other states solved
    for (no dense row; a minimum-degree ordering of Q + Q^T keeps the fill-in small). Fast here
    (about a second at 4096 states), but its error grows with the
    mixing time: used only to name the heaviest state, never for t_mix or a bound."""
    P = sp.csr_matrix(P)
    off = (P - sp.diags(P.diagonal())).tocsr()
    leave = np.asarray(off.sum(1)).ravel()
    Qt = (off.T - sp.diags(leave)).tocsr()
    ref = int(np.argmin(leave))
    keep = np.flatnonzero(np.arange(P.shape[0]) != ref)
    x = spla.spsolve(Qt[keep][:, keep].tocsc(), -Qt[keep][:, [ref]].toarray().ravel(), permc_spec="MMD_AT_PLUS_A")
    pi = np.empty(P.shape[0])
    pi[ref], pi[keep] = 1.0, np.clip(x, 0, None)
    return pi / pi.sum()


# ---------------------------------------------------------------------------------- mixing times

@dataclass
class MixingTime:
    """Exact t_mix(eps) from the worst start, or NaN with the reason in ``status``:
    "exact", "too many states" (beyond ``max_states``) or "beyond t_max"."""

    t_mix: float
    status: str


def mixing_time(P, eps: float = 0.25, *, max_states: int = TMIX_MAX_STATES, t_max: int = 2 ** 50,
                pi: np.ndarray | None = None) -> MixingTime:
    """Exact t_mix(eps) = min t with max_x TV(P^t(x, .), pi) <= eps, by repeated squaring of the
    dense kernel (:func:`textglauber.exact.mixing_time`): O(log t) products of S x S matrices, so
    only up to ``max_states`` states, and NaN rather than an error past ``t_max`` steps."""
    if P.shape[0] > max_states:
        return MixingTime(np.nan, "too many states")
    pi = exact.stationary(P) if pi is None else pi
    try:
        return MixingTime(float(exact.mixing_time(P, eps, t_max=t_max, pi=pi)), "exact")
    except RuntimeError:
        return MixingTime(np.nan, "beyond t_max")


def tmix_lower_from_trel(t_rel: float, eps: float = 0.25) -> float:
    """t_mix(eps) >= (t_rel - 1) log(1 / (2 eps)), valid without reversibility.

    For an eigenvalue lambda != 1 with right eigenvector f, pi f = 0 (pi P f = pi f = lambda pi f),
    so |lambda|^t |f(x)| = |sum_y (P^t(x, y) - pi(y)) f(y)| <= 2 d(t) max|f|; at the x where |f| is
    largest, |lambda|^t <= 2 d(t). Hence t_mix(eps) >= log(1/(2 eps)) / log(1/|lambda_2|), and
    log(1/|lambda|) <= 1/|lambda| - 1 = 1/(t_rel - 1) gives the bound. NaN for an unresolved t_rel."""
    if not eps < 0.5:
        raise ValueError("the bound needs eps < 1/2")
    return float(max(t_rel - 1.0, 0.0) * np.log(1.0 / (2.0 * eps))) if np.isfinite(t_rel) else np.nan


@dataclass
class TrapBound:
    """The best rigorous lower bound on t_mix(eps) from a set B that the chain rarely leaves.

    ``center`` and ``radius``: B is the Hamming ball of that radius around that state (-1 when no
    candidate set qualified, and then ``t_lower`` is 0); ``pi_B`` its stationary mass and ``e_max``
    the largest one-step exit probability max_{x in B} P(x, B^c)."""

    t_lower: float
    center: int
    radius: int
    pi_B: float
    e_max: float


def hamming_ball(center: int, radius: int, n: int) -> np.ndarray:
    """State indices within Hamming distance ``radius`` of ``center``."""
    masks = np.arange(2 ** n)
    return np.flatnonzero(site_bits(masks, n).sum(1) <= radius) ^ int(center)


def exit_masses(P, members: np.ndarray) -> np.ndarray:
    """P(x, B^c) for every x in B (given as indices), summed over the entries outside B: no
    subtraction from 1, so a state held for 1e20 steps keeps its exit probability's digits."""
    P = sp.csr_matrix(P)
    inside = np.zeros(P.shape[0], bool)
    inside[members] = True
    return np.asarray(P[members][:, ~inside].sum(1)).ravel()


def _candidate_sets(P, deepest: int, radii) -> list[tuple[int, int, np.ndarray]]:
    """(center, radius, members) for the Hamming balls of the given radii around the ``deepest``
    states with the largest holding probability."""
    n = int(round(np.log2(P.shape[0])))
    centers = exact.deepest_traps(P, min(deepest, P.shape[0]))
    return [(int(c), int(r), hamming_ball(int(c), min(r, n), n)) for c in centers for r in radii]


def _with_pi(sets, exits, pi: np.ndarray, eps: float) -> TrapBound:
    """Best (1 - pi(B) - eps) / e_max(B) over the sets with pi(B) <= 1/2 and e_max(B) > 0."""
    best = TrapBound(0.0, -1, -1, np.nan, np.nan)
    for (center, r, members), e in zip(sets, exits):
        pi_b = float(pi[members].sum())
        if pi_b <= 0.5 and e > 0 and (1.0 - pi_b - eps) / e > best.t_lower:
            best = TrapBound((1.0 - pi_b - eps) / e, center, r, pi_b, e)
    return best


def _without_pi(sets, exits, eps: float) -> TrapBound:
    """Best (1/2 - eps) / max(e_max(B1), e_max(B2)) over disjoint pairs of sets: one of two disjoint
    sets has pi <= 1/2, and that one gives at least this bound, so pi need not be known."""
    best = TrapBound(0.0, -1, -1, np.nan, np.nan)
    for a in range(len(sets)):
        for b in range(a + 1, len(sets)):
            e = max(exits[a], exits[b])
            if e > 0 and (0.5 - eps) / e > best.t_lower and not np.intersect1d(sets[a][2], sets[b][2]).size:
                best = TrapBound((0.5 - eps) / e, sets[a][0], sets[a][1], np.nan, e)
    return best


def mixing_lower_bound(P, pi: np.ndarray | None = None, eps: float = 0.25, deepest: int = 8,
                       radii=(0, 1, 2)) -> TrapBound:
    """A lower bound on t_mix(eps) that holds without reversibility, for use where the gap is not
    resolved.

    For a set B, a chain started in B leaves it by time t with probability at most t e_max(B)
    (a union bound over the steps), so P^t(x, B) >= 1 - t e_max and TV(P^t(x, .), pi) >=
    1 - pi(B) - t e_max; hence t_mix(eps) >= (1 - pi(B) - eps) / e_max(B), which is at least
    1 / (4 e_max) for eps = 1/4 when pi(B) <= 1/2. Candidate sets: the ``deepest`` states with the
    largest holding probability (their exit probability read off the off-diagonal entries, see
    :func:`textglauber.exact.leave_probabilities`) and the Hamming balls of the given radii around
    them; sets with pi(B) > 1/2 are skipped (the bound only needs pi(B) < 1 - eps, but a heavy set
    would rest on the accuracy of pi). Without ``pi`` (a state space too large to solve for it),
    pairs of disjoint candidate sets are used instead: one of them has pi <= 1/2, so
    (1/2 - eps) / max(e_max(B1), e_max(B2)) is a bound. A set whose exit probability underflows
    to 0 is skipped: the float kernel no longer carries its (positive) exit probability."""
    P = sp.csr_matrix(P)
    sets = _candidate_sets(P, deepest, radii)
    exits = [float(exit_masses(P, members).max()) for _, _, members in sets]
    return _with_pi(sets, exits, pi, eps) if pi is not None else _without_pi(sets, exits, eps)


# ---------------------------------------------------------------------------------------- alpha

def dobrushin_alpha(scores: Scores, temperature: float) -> tuple[float, np.ndarray]:
    """Exact influence coefficients alpha_ij = max over contexts differing only at site j of
    |p_i(1 | x) - p_i(1 | y)| (the TV distance of two conditionals on two tokens), and Dobrushin's
    alpha = max_i sum_{j != i} alpha_ij (docs/science.md, chapter 2).

    Site i's p_i(1 | .) over its 2^(n-1) contexts is reshaped to one axis per other site, so the
    differences across site j are one ``numpy.diff`` along that axis."""
    n, p1 = scores.n, scores.p_one(temperature)
    A = np.zeros((n, n))
    for i in range(n):
        table = p1[i].reshape((2,) * (n - 1))
        others = [j for j in range(n) if j != i]
        for axis, j in enumerate(others):
            A[i, j] = np.abs(np.diff(table, axis=axis)).max()
    return float(A.sum(1).max()), A


# --------------------------------------------------------------------------------------- growth

def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Least squares y = a + b x: (b, R^2, residual sum of squares)."""
    b, a = np.polyfit(x, y, 1)
    sse = float(((y - a - b * x) ** 2).sum())
    sst = float(((y - y.mean()) ** 2).sum())
    return float(b), (1.0 - sse / sst) if sst > 0 else 1.0, sse


def growth_verdict(ns, values, factor: float = 3.0, what: str = "t_rel") -> tuple[str, str]:
    """How a time grows with n over a table's lengths: (verdict, one sentence from the numbers).

    Rules, in order:
    - "unresolved": a value is NaN, infinite or not positive (or fewer than two lengths);
    - "linear": value / n stays within ``factor`` (max / min) over the range (so n log n over a
      short range counts as linear too: the factor is the tolerance);
    - "non-monotone": the values go down somewhere and up somewhere; "decreasing": only down;
    - "exponential": every consecutive ratio exceeds 1, the fit log(value) = a + b n has b > 0 and
      R^2 >= 0.9 (explains most of the variance), and fits at least as well as a power law
      log(value) = a + k log n; the rate b is per site;
    - "polynomial": increasing but not exponential by that rule (the power-law exponent k reported).
    """
    ns, values = np.asarray(ns, float), np.asarray(values, float)
    order = np.argsort(ns)
    ns, values = ns[order], values[order]
    span = f"n = {ns[0]:g} to {ns[-1]:g}"
    if len(ns) < 2 or not (np.isfinite(values) & (values > 0)).all():
        bad = ", ".join(f"{n:g}" for n in ns[~(np.isfinite(values) & (values > 0))]) or "all"
        return "unresolved", f"{what} is not resolved at n = {bad}, so its growth over {span} is unknown"
    per = values / ns
    spread = per.max() / per.min()
    if spread <= factor:
        return "linear", f"{what}/n stays within {spread:.2g}x over {span} (linear in n)"
    ratios = values[1:] / values[:-1]
    if (ratios < 1).any():
        kind = "non-monotone" if (ratios > 1).any() else "decreasing"
        how = "not monotone in n" if kind == "non-monotone" else "decreasing in n"
        return kind, f"{what}/n swings between {per.min():.2g} and {per.max():.2g} over {span}, {how}"
    b, r2e, sse_e = _fit(ns, np.log(values))
    k, r2p, sse_p = _fit(np.log(ns), np.log(values))
    if (ratios > 1).all() and b > 0 and r2e >= 0.9 and sse_e <= sse_p:
        return "exponential", f"{what} grows about e^{{{b:.2f} n}} over {span} (log-linear fit R^2 = {r2e:.3f})"
    return "polynomial", (f"{what} grows about n^{k:.1f} over {span} ({what}/n rises {spread:.2g}x; "
                          f"log-log fit R^2 = {r2p:.3f})")


# ---------------------------------------------------------------------------------------- designs

def global_pairs(token_a_id: int, token_b_id: int, n: int) -> np.ndarray:
    """The "global" design: every one of the n sites may hold token a or token b."""
    if token_a_id == token_b_id:
        raise ValueError("the two tokens must differ")
    return np.tile(np.array([token_a_id, token_b_id], np.int64), (n, 1))


def passage_pairs(scorer, content_ids) -> np.ndarray:
    """The "passage" design on a real passage's content ids (the first n tokens, as given): site i
    may hold its own token or the model's top alternative there.

    The alternative is the highest-logit token of the scorer's allowed vocabulary other than the
    site's own token, with site i masked in the passage itself (one masked row per site, in the
    frame of exactly these ids). The scorer should therefore allow the model's whole usable
    vocabulary (e.g. ``vocabulary.allowed_vocabulary(tokenizer)``), the passage's own tokens
    included; an own token outside it is an error. Own and alternative differ by construction."""
    ids = torch.as_tensor(np.asarray(content_ids, np.int64))
    n = len(ids)
    own = scorer.vocab.index_of(ids)
    if (own < 0).any():
        raise ValueError(f"passage tokens {ids[own < 0].tolist()} are not in the scorer's allowed vocabulary")
    sc = scorer.scores(ids.expand(n, n).clone(), torch.arange(n)).double().cpu()
    sc[torch.arange(n), own] = -np.inf
    alt = scorer.vocab.ids[sc.argmax(1)]
    return np.stack([ids.numpy(), alt.numpy()], axis=1)


def design_scorer(lm, pairs_list):
    """A scorer for ``lm`` whose allowed vocabulary is the union of the tokens of all given pairs
    (logits do not depend on the allowed vocabulary; a small one keeps the head cheap)."""
    from . import models, vocabulary

    ids = sorted({int(t) for pairs in pairs_list for t in np.asarray(pairs).ravel()})
    tokens = lm.tokenizer.convert_ids_to_tokens(ids)
    return models.MaskedLMScorer(lm, vocabulary.allowed_vocabulary(lm.tokenizer, tokens=tokens))


def design_tokens(scorer, design: str, pairs: np.ndarray) -> str:
    """The allowed tokens as text: "a|b" for the global design, "a/b c/d ..." per site for a passage
    (tokens from the scorer's tokenizer when it has one, else the ids)."""
    tok = getattr(getattr(getattr(scorer, "lm", None), "tokenizer", None), "convert_ids_to_tokens", None)
    name = (lambda i: str(tok(int(i)))) if tok is not None else (lambda i: str(int(i)))
    if design == "global":
        if not (pairs == pairs[0]).all():
            raise ValueError("a global design has one pair for every site")
        return f"{name(pairs[0, 0])}|{name(pairs[0, 1])}"
    if design == "passage":
        return " ".join(f"{name(a)}/{name(b)}" for a, b in pairs)
    raise ValueError(f"design must be 'global' or 'passage', got {design!r}")


# ------------------------------------------------------------------------------------------ table

COLUMNS = ["model", "design", "tokens", "n", "temperature", "states", "t_rel", "lambda2", "resolved",
           "t_mix", "t_mix_lower", "alpha", "top_state", "top_mass", "rows_scored"]


def phase_point(scores: Scores, temperature: float, *, eps: float = 0.25,
                tmix_max_states: int = TMIX_MAX_STATES, t_max: int = 2 ** 50) -> dict:
    """The exact quantities of one (n, T) cell from a score table: relaxation, mixing time (where
    the state space allows), the best rigorous lower bound on t_mix, Dobrushin's alpha, and the
    state of largest stationary mass (``top_state``, an index; its mass ``top_mass``).

    The stationary law is exact (GTH elimination) up to ``tmix_max_states`` states (and
    ``exact.GTH_MAX``) and only then feeds t_mix and the trap bound; beyond, it comes from a sparse
    solve (:func:`stationary_sparse`) and is used for ``top_state`` alone (the pi-free bound of
    :func:`mixing_lower_bound` is used instead)."""
    P = kernel(scores, temperature)
    rel = relaxation(P)
    exact_pi = exact.stationary(P) if P.shape[0] <= min(tmix_max_states, exact.GTH_MAX) else None
    pi = exact_pi if exact_pi is not None else stationary_sparse(P)
    mix = mixing_time(P, eps, max_states=tmix_max_states, t_max=t_max, pi=exact_pi)
    lower = np.nanmax([mixing_lower_bound(P, exact_pi, eps).t_lower, tmix_lower_from_trel(rel.t_rel, eps)])
    top = int(np.argmax(pi))
    return {"states": P.shape[0], "t_rel": rel.t_rel, "lambda2": rel.lambda2_abs, "resolved": rel.resolved,
            "t_mix": mix.t_mix, "t_mix_lower": float(lower), "alpha": dobrushin_alpha(scores, temperature)[0],
            "top_state": top, "top_mass": float(pi[top])}


def state_text(scorer, pairs: np.ndarray, state: int) -> str:
    """A state of the chain on ``pairs`` as its tokens, space-separated."""
    tok = getattr(getattr(getattr(scorer, "lm", None), "tokenizer", None), "convert_ids_to_tokens", None)
    ids = pairs[np.arange(len(pairs)), site_bits(state, len(pairs))]
    return " ".join(str(tok(int(i))) if tok is not None else str(int(i)) for i in ids)


def phase_table(scorer, model_name: str, design: str, pairs_by_n: dict, temperatures, *,
                eps: float = 0.25, tmix_max_states: int = TMIX_MAX_STATES, t_max: int = 2 ** 50):
    """One row per (n, temperature) with the columns of :data:`COLUMNS`; each n is scored once
    (:func:`score_table`) and that table serves every temperature."""
    import pandas as pd

    rows = []
    for n in sorted(pairs_by_n):
        pairs = np.asarray(pairs_by_n[n], np.int64)
        if len(pairs) != n:
            raise ValueError(f"pairs_by_n[{n}] has {len(pairs)} sites")
        text = design_tokens(scorer, design, pairs)
        scores = score_table(scorer, pairs)
        for T in temperatures:
            cell = phase_point(scores, float(T), eps=eps, tmix_max_states=tmix_max_states, t_max=t_max)
            cell["top_state"] = state_text(scorer, pairs, cell["top_state"])
            rows.append({"model": model_name, "design": design, "tokens": text, "n": n,
                         "temperature": float(T), **cell, "rows_scored": scores.rows_scored})
    return pd.DataFrame(rows, columns=COLUMNS)


# -------------------------------------------------------------------------------------- coupling

def coupling_times_exact(scores: Scores, temperature: float, starts, budget: int,
                         rng: np.random.Generator) -> np.ndarray:
    """First meeting times of coupled pairs of the exact two-token chain (docs/science.md, chapter 3), no model calls.

    ``starts`` is an (m, 2) array of state indices. Each step both chains of a pair take the same
    uniformly drawn site, and their new bits come from one uniform u: bit = 1 exactly when
    u < p_i(1 | own context). On two points this quantile coupling is the maximal coupling of
    docs/science.md, chapter 3 (the bits differ with probability |p - q|, the TV distance; its joint law is the
    residual construction's). Pairs that met stay met (same site, same conditional, same u).
    Returns the meeting times as floats, 0 for pairs that start equal and inf for pairs still apart
    after ``budget`` steps."""
    n, p1 = scores.n, scores.p_one(temperature)
    starts = np.asarray(starts, np.int64)
    tau = np.where(starts[:, 0] == starts[:, 1], 0.0, np.inf)
    idx = np.flatnonzero(starts[:, 0] != starts[:, 1])
    x, y = starts[idx, 0], starts[idx, 1]
    for t in range(1, int(budget) + 1):
        if not len(idx):
            break
        i = rng.integers(n, size=len(idx))
        u = rng.random(len(idx))
        shift = n - 1 - i
        bx = (u < p1[i, context_of(x, i, n)]).astype(np.int64)
        by = (u < p1[i, context_of(y, i, n)]).astype(np.int64)
        x = (x & ~(np.int64(1) << shift)) | (bx << shift)
        y = (y & ~(np.int64(1) << shift)) | (by << shift)
        met = x == y
        tau[idx[met]] = t
        idx, x, y = idx[~met], x[~met], y[~met]
    return tau


def worst_pair(P, t: int | None = None, deepest: int = 8) -> tuple[int, int]:
    """The pair of starts to couple from as the "worst" pair.

    Candidates: all-zeros, all-ones and the ``deepest`` states with the largest holding
    probability. Each candidate's row of P^t is computed (t defaults to one sweep, n steps) and the
    pair whose rows are furthest apart in total variation is returned: the pair that realises
    max_{x,y} TV(P^t(x, .), P^t(y, .)) among the candidates, the quantity the coupling inequality
    bounds. Ties (to 1e-12) go to the earlier candidates, so all-zeros / all-ones wins unless another
    pair is strictly further apart. A heuristic: the true worst pair may lie outside the
    candidates, so a coupling bound from it is a diagnostic, not a certificate."""
    P = sp.csr_matrix(P)
    s = P.shape[0]
    n = int(round(np.log2(s)))
    cand = list(dict.fromkeys([0, s - 1, *map(int, exact.deepest_traps(P, min(deepest, s)))]))
    rows = np.zeros((len(cand), s))
    rows[np.arange(len(cand)), cand] = 1.0
    for _ in range(n if t is None else int(t)):
        rows = np.asarray((P.T @ rows.T).T)
    tv = np.triu(0.5 * np.abs(rows[:, None, :] - rows[None, :, :]).sum(-1), 1)
    a, b = np.argwhere(tv >= tv.max() - 1e-12)[0]          # ties (to rounding): the earlier pair
    return cand[int(a)], cand[int(b)]
