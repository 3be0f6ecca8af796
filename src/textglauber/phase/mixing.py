"""Relaxation and mixing times of an exact kernel and the rigorous lower bounds on t_mix where
they cannot be computed (docs/science.md, chapter 3): eigenvalues, the stationary law, exact t_mix by
repeated squaring, and the trap bound from sets the chain rarely leaves."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .. import exact
from ..profile.values import PHASE_TMIX_MAX_STATES as TMIX_MAX_STATES   # its one home: the schema's limit
from .states import site_bits

DENSE_MAX = 256
"""Largest state space whose eigenvalues are all computed densely (``numpy.linalg.eigvals``);
beyond it ARPACK finds the few of largest modulus from the sparse kernel (n + 1 entries a row)."""

# ------------------------------------------------------------------------------------- relaxation

@dataclass
class Relaxation:
    """t_rel = 1 / (1 - |lambda_2|), with |lambda_2| the second-largest eigenvalue modulus.

    ``resolved`` is False (and t_rel NaN) where the gap is below :data:`textglauber.exact.GAP_FLOOR` or the sparse
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
    t_rel = exact.relaxation_time(lam2)
    return Relaxation(t_rel, lam2, bool(np.isfinite(t_rel)))


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
    dense kernel (:func:`textglauber.exact.mixing_steps`): O(log t) products of S x S matrices, so
    only up to ``max_states`` states, and NaN rather than an error past ``t_max`` steps."""
    if P.shape[0] > max_states:
        return MixingTime(np.nan, "too many states")
    pi = exact.stationary(P) if pi is None else pi
    try:
        return MixingTime(float(exact.mixing_steps(P, eps, t_max=t_max, pi=pi)), "exact")
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
