"""From a restricted chain to the model's own chain: a rigorous lower bound on the full chain's
t_mix(1/4) from the exact powers of the chain restricted to a covering (:mod:`.covering`).

The bound. Let Y be the chain restricted to prod S_i and X the full chain on A^n, and let eps be
the largest, over the restricted states x, of the mass the model's conditionals put outside the
sets averaged over the sites: eps = max_x (1/n) sum_i pi_i(S_i^c | x_{-i}) (the covering's
``step_left_out``; at most its ``left_out``, the largest over states and sites).

Proof sketch. Start X and Y at the same restricted state x and move them together: the same site
i each step and, while they agree at z, their tokens drawn from a maximal coupling of
pi_i(. | z_{-i}) and its renormalisation over S_i. Those two laws are at total variation
distance exactly pi_i(S_i^c | z_{-i}) <= eps (the renormalised law only moves the outside mass
onto S_i), so a step taken together (a uniform site) parts them with probability
(1/n) sum_i pi_i(S_i^c | z_{-i}) <= eps; once apart, each moves by its own kernel, independently. Each chain keeps its own law, and
P(X_s = Y_s for all s <= t) >= 1 - t eps (a union bound over the steps). Hence TV(P_full^t(x, .), P_res^t(x, .)) <= t eps for every
restricted x, and by the triangle inequality, for restricted x and y,

    TV(P_full^t(x, .), P_full^t(y, .)) >= TV(P_res^t(x, .), P_res^t(y, .)) - 2 t eps.

The full chain's d(t) = max_x TV(P_full^t(x, .), pi) is at least half of its dbar(t) = max_{x,y}
TV(P_full^t(x, .), P_full^t(y, .)) (triangle inequality through pi), and dbar_full(t) is at least
the maximum over restricted pairs. So d_full(t) > 1/4, i.e. t_mix(1/4) > t, whenever

    dbar_res(t) - 2 t eps > 1/2.

dbar_res never grows with t and 2 t eps grows, so the t where this holds are 1, ..., t*, and the
bound is t_mix(1/4) >= t* + 1. It can never exceed about 1 / (4 eps): a covering that leaves out
eps can speak only for that many steps, however slow the restricted chain is. Without the
2 t eps term the "bound" would be the restricted chain's own slowness, which the full chain need
not share (the sets may cut off an escape route that carries only a little mass).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .. import exact
from .mixing import TMIX_MAX_STATES, mixing_time, relaxation

PAIR_MAX = 256
"""Largest state space on which dbar is the maximum over every pair of starts; beyond it, over the
pairs with one start among the :data:`PAIR_STARTS` states the chain holds longest (a smaller
maximum, so a weaker bound, never a wrong one)."""

PAIR_STARTS = 32


@dataclass
class Transfer:
    """The lower bound ``t_lower`` on the full chain's t_mix(1/4), or NaN with ``reason`` saying why
    nothing transfers ("holds" when it does), and the restricted chain's own t_rel and exact
    t_mix(1/4) (NaN where not resolved or too many states)."""

    t_lower: float
    reason: str
    t_rel: float
    t_mix: float


def _starts(P: np.ndarray) -> np.ndarray:
    """The starts whose distances to every other start make up dbar: all of them up to
    :data:`PAIR_MAX` states, else the :data:`PAIR_STARTS` with the largest holding probability."""
    if len(P) <= PAIR_MAX:
        return np.arange(len(P))
    return exact.deepest_traps(P, PAIR_STARTS)


def dbar(M: np.ndarray, starts: np.ndarray) -> float:
    """max over x in ``starts`` and every y of TV(M(x, .), M(y, .)) for a dense kernel power M.

    For a fixed pair the distance never grows with t (TV(mu P, nu P) <= TV(mu, nu)), so with a fixed
    list of starts this is non-increasing in t, like dbar itself."""
    best, chunk = 0.0, max(1, 2 ** 22 // M.size)
    for lo in range(0, len(starts), chunk):
        rows = M[starts[lo:lo + chunk]]
        best = max(best, 0.5 * float(np.abs(rows[:, None, :] - M[None, :, :]).sum(-1).max()))
    return best


def _largest_t(P: np.ndarray, holds, t_max: int) -> tuple[int, bool]:
    """The largest t with holds(t, P^t) given that holds(1, P): repeated squaring finds the first power
    of two where it fails, then the t below is built bit by bit from the top (O(log t) products),
    as in :func:`textglauber.exact.mixing_steps`. The flag is True when it still holds at t_max."""
    powers = [P]                                        # powers[k] = P^(2^k)
    while holds(2 ** (len(powers) - 1), powers[-1]):
        if 2 ** len(powers) > t_max:
            return 2 ** (len(powers) - 1), True
        powers.append(powers[-1] @ powers[-1])
    t, M = 2 ** (len(powers) - 2), powers[-2]
    for j in range(len(powers) - 3, -1, -1):
        trial = M @ powers[j]
        if holds(t + 2 ** j, trial):
            t, M = t + 2 ** j, trial
    return t, False


def transfer_lower_bound(P_res, eps: float, *, max_states: int = TMIX_MAX_STATES, t_max: int = 2 ** 40) -> Transfer:
    """The bound t_mix_full(1/4) >= t* + 1, t* the largest t with dbar_res(t) - 2 t eps > 1/2 (module
    docstring), from dense powers of the restricted kernel ``P_res`` whose left-out mass is ``eps``.

    NaN with the reason where nothing transfers: "too many states" (beyond ``max_states`` for dense
    powers), "the restricted chain mixes within one step" (dbar_res(1) <= 1/2, e.g. a single state)
    or "left-out mass too large" (the condition fails already at t = 1, hence at every t). When the
    condition still holds at ``t_max`` (possible only for eps < 1 / (4 t_max)), the bound reached
    there is returned with that said."""
    if not 0 <= eps <= 1:
        raise ValueError(f"eps must be a mass in [0, 1], got {eps}")
    t_rel = relaxation(P_res).t_rel
    if P_res.shape[0] > max_states:
        return Transfer(np.nan, "too many states", t_rel, np.nan)
    t_mix = mixing_time(P_res, 0.25, max_states=max_states).t_mix
    P = P_res.toarray() if sp.issparse(P_res) else np.asarray(P_res, np.float64)
    starts = _starts(P)

    def holds(t, M):
        return dbar(M, starts) - 2 * t * eps > 0.5

    if dbar(P, starts) <= 0.5:
        return Transfer(np.nan, "the restricted chain mixes within one step", t_rel, t_mix)
    if not holds(1, P):
        return Transfer(np.nan, "left-out mass too large", t_rel, t_mix)
    t, capped = _largest_t(P, holds, t_max)
    return Transfer(float(t + 1), f"holds (still at t = {t}, t_max reached)" if capped else "holds", t_rel, t_mix)
