"""Exact Glauber chains on state spaces small enough to enumerate.

With an allowed vocabulary of K tokens and m free sites there are K^m states. The kernel
P(x, y) = (1/m) sum_i 1[y_{-i} = x_{-i}] pi_i^T(y_i | x_{-i}) is built by scoring every
(state, site) pair through the same :class:`~textglauber.engine.Scorer` interface the
engine uses, so an MLM, a table of scores or an explicit joint all give exact kernels.
The book's diagnostics are set beside these exact answers in :mod:`textglauber.groundtruth`.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch

from .profile.values import MAX_STATES     # states an exact chain enumerates: the schema's limit, its one home


@dataclass
class ExactChain:
    states: np.ndarray        # (S, n) token ids, row s is state s
    kernel: np.ndarray | sp.csr_matrix   # (S, S) row-stochastic
    free: list[int]           # the free sites
    vocab_ids: np.ndarray     # (K,) strictly increasing, the order of the enumeration

    def __post_init__(self):
        self.vocab_ids = np.asarray(self.vocab_ids)
        if (np.diff(self.vocab_ids) <= 0).any():
            raise ValueError("vocab_ids must be strictly increasing (the enumeration's order)")

    def index(self, states: np.ndarray) -> np.ndarray:
        """Row index of each state (…, n) in ``self.states``."""
        k = len(self.vocab_ids)
        free = np.asarray(states)[..., self.free]
        pos = np.searchsorted(self.vocab_ids, free)
        if (pos >= k).any() or (self.vocab_ids[np.minimum(pos, k - 1)] != free).any():
            raise ValueError("a state holds a token outside the allowed vocabulary")
        return (pos * (k ** np.arange(len(self.free) - 1, -1, -1))).sum(-1)


def enumerate_states(vocab_ids: np.ndarray, n: int, prefix: np.ndarray | None = None) -> np.ndarray:
    """All states with the frozen ``prefix`` and every free site in A, in lexicographic order."""
    prefix = np.zeros(0, np.int64) if prefix is None else np.asarray(prefix, np.int64)
    m = n - len(prefix)
    if m < 1:
        raise ValueError("no free site")
    if len(vocab_ids) ** m > MAX_STATES:
        raise ValueError(f"{len(vocab_ids)}^{m} states exceed the limit of {MAX_STATES}")
    free = np.array(list(itertools.product(np.sort(vocab_ids), repeat=m)), dtype=np.int64)
    return np.concatenate([np.broadcast_to(prefix, (len(free), len(prefix))), free], axis=1)


def conditionals(scorer, states: np.ndarray, sites: list[int], temperature: float,
                 batch: int = 4096) -> np.ndarray:
    """pi_i^T(. | x_{-i}) for every state and every listed site: (S, len(sites), K) in float64."""
    s, n = states.shape
    pairs_x = np.repeat(np.arange(s), len(sites))
    pairs_i = np.tile(np.asarray(sites), s)
    out = np.empty((len(pairs_x), scorer.vocab.size), np.float64)
    for lo in range(0, len(pairs_x), batch):
        xs = torch.as_tensor(states[pairs_x[lo:lo + batch]])
        ii = torch.as_tensor(pairs_i[lo:lo + batch])
        sc = scorer.scores(xs, ii).double().cpu() / temperature
        out[lo:lo + batch] = torch.softmax(sc, dim=-1).numpy()
    return out.reshape(s, len(sites), -1)


def glauber_kernel(scorer, n: int, temperature: float, prefix: np.ndarray | None = None) -> ExactChain:
    """The exact kernel on every state that carries the frozen ``prefix`` (never resampled, but
    seen by every score) and a token of A at each of the n - len(prefix) free sites."""
    vocab_ids = scorer.vocab.ids.numpy()          # sorted by AllowedVocab: the scores' column order
    states = enumerate_states(vocab_ids, n, prefix)
    p0 = 0 if prefix is None else len(prefix)
    free = list(range(p0, n))
    cond = conditionals(scorer, states, free, temperature)
    s, k, m = len(states), len(vocab_ids), len(free)
    chain = ExactChain(states=states, kernel=None, free=free, vocab_ids=vocab_ids)
    rows, cols, vals = [], [], []
    for fi, i in enumerate(free):
        for a_pos, a in enumerate(vocab_ids):
            y = states.copy()
            y[:, i] = a
            rows.append(np.arange(s))
            cols.append(chain.index(y))
            vals.append(cond[:, fi, a_pos] / m)
    P = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(s, s))
    chain.kernel = P.toarray() if s <= 4096 else P
    return chain


GTH_MAX = 2048


def _dense(P) -> np.ndarray:
    """A kernel as a dense float64 array, whether it was built sparse or dense."""
    return P.toarray() if sp.issparse(P) else np.asarray(P, dtype=np.float64)


def _gth(P: np.ndarray) -> np.ndarray:
    """Grassmann-Taksar-Heyman elimination: the stationary law without subtractions, so it stays
    accurate to machine precision even when the chain is nearly decomposable (metastable)."""
    A = np.array(P, dtype=np.float64)
    s = A.shape[0]
    for k in range(s - 1, 0, -1):
        tot = A[k, :k].sum()
        A[:k, k] /= tot
        A[:k, :k] += np.outer(A[:k, k], A[k, :k])
    pi = np.zeros(s)
    pi[0] = 1.0
    for k in range(1, s):
        pi[k] = pi[:k] @ A[:k, k]
    return pi / pi.sum()


def stationary(P) -> np.ndarray:
    """The stationary law of an irreducible row-stochastic P (dense or sparse).

    Up to GTH_MAX states by GTH elimination (exact to rounding however slow the chain);
    beyond that by a direct linear solve, whose error grows with the mixing time."""
    s = P.shape[0]
    if s <= GTH_MAX:
        return _gth(_dense(P))
    # P^T - I with its diagonal -(1 - P(x, x)) taken as the row's off-diagonal sum: P(x, x) - 1
    # would cancel to 0 in a trap held for more than 1e16 steps
    leave = leave_probabilities(P)
    b = np.zeros(s)
    b[0] = 1.0
    if sp.issparse(P):
        A = sp.lil_matrix(P.T)
        A.setdiag(-leave)
        A[0, :] = 1.0
        pi = spla.spsolve(A.tocsc(), b)
    else:
        A = np.array(P, dtype=np.float64).T.copy()
        A[np.arange(s), np.arange(s)] = -leave
        A[0, :] = 1.0
        pi = np.linalg.solve(A, b)
    pi = np.clip(pi, 0, None)
    return pi / pi.sum()


def tv(p: np.ndarray, q: np.ndarray) -> float:
    return 0.5 * float(np.abs(np.asarray(p) - np.asarray(q)).sum())


def mixing_steps(P, eps: float = 0.25, t_max: int = 10**9, pi: np.ndarray | None = None) -> int:
    """Exact t_mix(eps) = min t with d(t) = max over starts x of TV(P^t(x, .), pi) <= eps.

    d(t) is non-increasing, so repeated squaring finds k with d(2^(k-1)) > eps >= d(2^k); then
    the last t with d(t) > eps is built bit by bit from the top, keeping M = P^t for the current
    t: O(log t) matrix products instead of t of them."""
    pi = stationary(P) if pi is None else pi
    dense = _dense(P)

    def d(M):
        return 0.5 * np.abs(M - pi).sum(1).max()

    powers = [dense]                      # powers[k] = P^(2^k)
    while d(powers[-1]) > eps:
        if 2 ** len(powers) > t_max:
            raise RuntimeError(f"no mixing within {t_max} steps")
        powers.append(powers[-1] @ powers[-1])
    if len(powers) == 1:
        return 1
    # d(2^(k-1)) > eps >= d(2^k): grow t = 2^(k-1) by each lower power of two that keeps d(t) > eps
    t, M = 2 ** (len(powers) - 2), powers[-2]
    for j in range(len(powers) - 3, -1, -1):
        trial = M @ powers[j]             # P^(t + 2^j)
        if d(trial) > eps:
            t, M = t + 2 ** j, trial
    return t + 1


class TabulatedScorer:
    """Every score of another scorer on an enumerable state space, computed once and looked up.

    Chains and couplings on a tiny model then cost table look-ups instead of model calls, which
    makes thousands of replicate runs cheap in the tests and the ground-truth chapter."""

    def __init__(self, scorer, n: int, prefix: np.ndarray | None = None):
        self.vocab = scorer.vocab
        self.n = n
        vocab_ids = scorer.vocab.ids.numpy()          # sorted by AllowedVocab
        self.chain = ExactChain(states=enumerate_states(vocab_ids, n, prefix), kernel=None,
                                free=list(range(0 if prefix is None else len(prefix), n)), vocab_ids=vocab_ids)
        s, k = len(self.chain.states), len(vocab_ids)
        table = np.empty((s, n, k))
        for i in range(n):
            xs = torch.as_tensor(self.chain.states)
            table[:, i] = np.concatenate([scorer.scores(xs[b:b + 4096], torch.full((len(xs[b:b + 4096]),), i))
                                          .double().cpu().numpy() for b in range(0, len(xs), 4096)])
        self.table = torch.as_tensor(table)

    @property
    def max_length(self) -> int:
        return self.n

    def scores(self, states: torch.Tensor, sites: torch.Tensor) -> torch.Tensor:
        idx = torch.as_tensor(self.chain.index(states.cpu().numpy()))
        return self.table[idx, sites.cpu()]


GAP_FLOOR = 1e-12
"""Smallest spectral gap 1 - |lambda_2| taken as resolved.

A backward-stable eigenvalue solver returns the eigenvalues of P + E with ||E|| about
machine epsilon (2.2e-16) times ||P||_F, and ||P||_F <= sqrt(S) <= 128 for the S <= 2^14 states
used here, so the absolute error of |lambda_2| is of order 1e-14 times the eigenvalue's
condition number. A non-reversible kernel's eigenvalues are not perfectly conditioned; the floor
leaves two orders of magnitude for that. Below it, |lambda_2| cannot be told apart from 1 and the
relaxation time (beyond 1e12 steps) is reported as unresolved (NaN) instead of as a rounding artefact.
The one floor of every relaxation time in the package (:func:`relaxation_time`)."""


def relaxation_time(lambda2_abs: float) -> float:
    """t_rel = 1 / (1 - |lambda_2|), or NaN (not resolved) where the gap is below :data:`GAP_FLOOR`."""
    gap = 1.0 - float(lambda2_abs)
    return 1.0 / gap if gap >= GAP_FLOOR else np.nan


def spectral_gap(P) -> dict:
    """Absolute spectral gap 1 - max_{lambda != 1} |lambda| and relaxation time 1 / gap.

    Glauber chains of incompatible conditionals are not reversible, so eigenvalues may be
    complex; the absolute gap still bounds the geometric rate of convergence.

    The gap is 1 - |lambda_2| from float64 eigenvalues, whose absolute error is about 1e-16 times
    the size of P, so a relaxation time beyond about 1e14 steps (two traps each held that long)
    is not resolved; :func:`exit_time` and :func:`leave_probabilities` time a single deep trap
    to full relative precision instead."""
    dense = _dense(P)
    ev = np.linalg.eigvals(dense)
    ev = ev[np.argsort(-np.abs(ev))]
    second = float(np.abs(ev[1])) if len(ev) > 1 else 0.0
    gap = 1.0 - second
    return {"gap": gap, "relaxation_time": relaxation_time(second), "eigenvalues": ev,
            "complex": bool(np.abs(ev.imag).max() > 1e-9)}


def conductance(P, members: np.ndarray, pi: np.ndarray | None = None) -> float:
    """Phi(B) = Q(B, B^c) / pi(B) with Q(x, y) = pi(x) P(x, y), for the states flagged in ``members``."""
    pi = stationary(P) if pi is None else pi
    dense = _dense(P)
    B = np.asarray(members, bool)
    return float((pi[B, None] * dense[np.ix_(B, ~B)]).sum() / pi[B].sum())


def pseudo_likelihood_law(chain: ExactChain, scorer, temperature: float) -> np.ndarray:
    """nu(x) proportional to prod_i pi_i^T(x_i | x_{-i}) over the free sites: what the single-site
    conditionals 'say' the law is if one multiplies them as if they were compatible."""
    cond = conditionals(scorer, chain.states, chain.free, temperature)
    pos = np.searchsorted(chain.vocab_ids, chain.states[:, chain.free])            # (S, m)
    logp = np.log(np.take_along_axis(cond, pos[:, :, None], axis=2)[:, :, 0]).sum(1)
    nu = np.exp(logp - logp.max())
    return nu / nu.sum()


def compatibility_gap(pi: np.ndarray, nu: np.ndarray) -> dict:
    """TV(pi, nu) and KL(pi || nu)."""
    pi, nu = np.asarray(pi, float), np.asarray(nu, float)
    m = pi > 0
    return {"tv": tv(pi, nu), "kl": float((pi[m] * np.log(pi[m] / nu[m])).sum())}


def _rows(P, which: np.ndarray) -> np.ndarray:
    """Rows ``which`` of a kernel as a dense float64 array (a sparse kernel is not densified whole)."""
    return P[which].toarray() if sp.issparse(P) else np.asarray(P, dtype=np.float64)[which]


def ball_split(P, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The kernel seen from a set B (flagged in ``members``), with no subtraction: P(x, y) for x != y
    in B (zero diagonal, dense, in B's order) and the exit mass of each state of B, the sum over y
    outside B of P(x, y)."""
    members = np.asarray(members, bool)
    B = np.flatnonzero(members)
    rows = _rows(P, B)
    W = rows[:, B].copy()
    W[np.arange(len(B)), np.arange(len(B))] = 0.0
    return W, rows[:, ~members].sum(1)


def exit_time(P, members: np.ndarray) -> np.ndarray:
    """Exact expected steps to leave the set B flagged in ``members``, from each of its states
    (inf from a state that may never leave: the float64 kernel holds no way out of B from it).

    The times solve (I - P_BB) t = 1. Forming I - P_BB subtracts P(x, x) from 1, which loses every
    digit of a trap held for more than 1e16 steps (P(x, x) rounds to 1 and the matrix is singular).
    Here the matrix is never formed: its off-diagonal entries are -P(x, y) (x != y in B) and its
    row sums are the exit masses e(x) = sum over y outside B of P(x, y), both read off the kernel
    without a subtraction. Gaussian elimination in that representation (Alfa, Xue and Ye, Math.
    Comp. 2002; the linear-system twin of the GTH elimination in :func:`stationary`) updates the
    off-diagonal entries, the row sums and the right-hand side by adding nonnegative numbers, takes
    each pivot as its row's exit mass plus its remaining off-diagonal mass, and back-substitutes
    by adding nonnegative numbers again: no step subtracts, so every time keeps its relative
    precision however deep the basin."""
    members = np.asarray(members, bool)
    B = np.flatnonzero(members)
    W, e = ball_split(P, members)                             # P(x, y) for x != y in B; exit masses
    out = np.full(len(B), np.inf)
    # the states that leave B surely: those with a path in B to a state with exit mass, and none to
    # a state without one (a closed class of B holds the chain forever)
    adj = sp.csr_matrix(W > 0)
    leaks = e > 0
    while True:
        more = leaks | (adj @ leaks > 0)
        if (more == leaks).all():
            break
        leaks = more
    stuck = ~leaks
    while True:
        more = stuck | (adj @ stuck > 0)
        if (more == stuck).all():
            break
        stuck = more
    F = np.flatnonzero(~stuck)
    if len(F):
        out[F] = _exit_solve(W[np.ix_(F, F)], e[F])
    return out


def _exit_solve(W: np.ndarray, e: np.ndarray, block: int = 64) -> np.ndarray:
    """t with (diag(e + W 1) - W) t = 1 for a nonnegative W (its diagonal is not read) and every
    state leaving surely, by subtraction-free elimination (:func:`exit_time`).

    Pivot k eliminates column k below it: row i gains f_i = W(i, k) / d_k times row k, so its
    off-diagonal masses, row sum and right-hand side grow by f_i times pivot row k's, and each
    pivot is d_k = (row sum) + (its remaining off-diagonal mass). That is done ``block`` pivots at
    a time: within a panel row by row, then the rows below take the whole panel at once through
    G = W_21 U_11^{-1} (a triangular solve that only adds) and nonnegative products."""
    W, s = np.array(W, dtype=np.float64), np.array(e, dtype=np.float64)
    m = len(s)
    b, d = np.ones(m), np.empty(m)
    for k0 in range(0, m, block):
        k1 = min(k0 + block, m)
        for k in range(k0, k1):                               # the panel's own rows
            d[k] = s[k] + W[k, k + 1:].sum()
            f = W[k + 1:k1, k] / d[k]
            W[k + 1:k1, k + 1:] += np.outer(f, W[k, k + 1:])
            s[k + 1:k1] += f * s[k]
            b[k + 1:k1] += f * b[k]
        if k1 == m:
            break
        G = np.empty((m - k1, k1 - k0))
        for j in range(k0, k1):                               # G U_11 = W_21, U_11's off-diagonal -W
            G[:, j - k0] = (W[k1:, j] + G[:, :j - k0] @ W[k0:j, j]) / d[j]
        W[k1:, k1:] += G @ W[k0:k1, k1:]
        s[k1:] += G @ s[k0:k1]
        b[k1:] += G @ b[k0:k1]
    t = np.empty(m)
    for k in range(m - 1, -1, -1):
        t[k] = (b[k] + W[k, k + 1:] @ t[k + 1:]) / d[k]
    return t


def leave_probabilities(P) -> np.ndarray:
    """1 - P(x, x) for every state, summed over the row's other entries: no cancellation where
    P(x, x) rounds to 1 (a trap held for more than 1e16 steps keeps its digits)."""
    if sp.issparse(P):
        off = sp.csr_matrix(P, copy=True)
        off.setdiag(0)
        return np.asarray(off.sum(1)).ravel()
    dense = np.asarray(P, dtype=np.float64)
    out = np.empty(len(dense))
    for lo in range(0, len(dense), 512):                    # row blocks: no second (S, S) array
        block = dense[lo:lo + 512].copy()
        block[np.arange(len(block)), lo + np.arange(len(block))] = 0.0
        out[lo:lo + 512] = block.sum(1)
    return out


def deepest_traps(P, k: int) -> np.ndarray:
    """The k states with the longest exact expected holding time 1 / (1 - P(x, x)), deepest first."""
    return np.argsort(leave_probabilities(P), kind="stable")[:k]

