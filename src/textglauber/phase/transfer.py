"""From a restricted chain to the model's own chain: a rigorous lower bound on the full chain's
t_mix(1/4) from the exact powers of the chain restricted to a covering (:mod:`.covering`).

The leak. Let Y be the chain restricted to prod S_i and X the full chain on A^n. At a restricted
state z, let e(z) = (1/n) sum_i pi_i(S_i^c | z_{-i}), the model's mass outside the sets averaged
over the sites (the covering's ``state_left_out``; its largest value is ``step_left_out``).

Proof sketch. Start X and Y at the same restricted state x and move them together: the same site
i each step and, while they agree at z, their tokens drawn from a maximal coupling of
pi_i(. | z_{-i}) and its renormalisation over S_i. Those two laws are at total variation
distance exactly pi_i(S_i^c | z_{-i}) (the renormalised law only moves the outside mass onto S_i),
so a step taken together at z parts them with probability e(z); once apart, each moves by its own
kernel, independently. Each chain keeps its own law. The pair parts at step s + 1 with
probability E[e(Y_s); not parted before s] <= E_x[e(Y_s)] = (P_res^s e)(x), so

    P(X_s != Y_s for some s <= t) <= E_t(x) = sum_{s < t} (P_res^s e)(x),

the leak met along the restricted chain's own path (at most t max e, the uniform bound). Hence
TV(P_full^t(x, .), P_res^t(x, .)) <= E_t(x) for every restricted x, and by the triangle
inequality, for restricted x and y,

    TV(P_full^t(x, .), P_full^t(y, .)) >= TV(P_res^t(x, .), P_res^t(y, .)) - E_t(x) - E_t(y).

The full chain's d(t) = max_x TV(P_full^t(x, .), pi) is at least half of its dbar(t) = max_{x,y}
TV(P_full^t(x, .), P_full^t(y, .)) (triangle inequality through pi), and dbar_full(t) is at least
the maximum over restricted pairs of the right-hand side. So d_full(t) > 1/4, i.e.
t_mix(1/4) > t, whenever

    max over restricted x, y of TV(P_res^t(x, .), P_res^t(y, .)) - E_t(x) - E_t(y) > 1/2.

For each pair the left side never grows with t (TV(mu P, nu P) <= TV(mu, nu), and E_t grows), so
the t where this holds are 1, ..., t*, and the bound is t_mix(1/4) >= t* + 1. With one number for
every state (e = eps) it is the uniform bound dbar_res(t) - 2 t eps > 1/2, which can never exceed
about 1 / (4 eps). The leak along the path can be far smaller where the chain sits in a well whose
states leave out little, so the bound can pass 1 / (4 max e); it can never pass the time the chain
takes to meet a leak of about 1/4 from both starts together. Without the leak term the "bound"
would be the restricted chain's own slowness, which the full chain need not share (the sets may
cut off an escape route that carries only a little mass). The sets need not be closed: the leak is
measured at every state of their product, whatever it is.
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


def dbar(M: np.ndarray, starts: np.ndarray, leaked: np.ndarray | None = None) -> float:
    """max over x in ``starts`` and every y of TV(M(x, .), M(y, .)) - leaked(x) - leaked(y) for a
    dense kernel power M (``leaked`` zero when None).

    For a fixed pair the distance never grows with t (TV(mu P, nu P) <= TV(mu, nu)) and the leak
    E_t never falls, so with a fixed list of starts this is non-increasing in t, like dbar itself."""
    best, chunk = -np.inf, max(1, 2 ** 22 // M.size)
    for lo in range(0, len(starts), chunk):
        some = starts[lo:lo + chunk]
        d = 0.5 * np.abs(M[some][:, None, :] - M[None, :, :]).sum(-1)
        if leaked is not None:
            d = d - leaked[some][:, None] - leaked[None, :]
        best = max(best, float(d.max()))
    return best


def _largest_t(P: np.ndarray, e: np.ndarray, holds, t_max: int) -> tuple[int, bool]:
    """The largest t with holds(t, P^t, E_t) given that holds(1, P, e), E_t = sum_{s<t} P^s e:
    repeated squaring finds the first power of two where it fails, then the t below is built bit by
    bit from the top (O(log t) products), as in :func:`textglauber.exact.mixing_steps`. Powers
    compose as (P^a, E_a)(P^b, E_b) = (P^(a+b), E_a + P^a E_b). The flag is True when it still holds
    at t_max."""
    def join(a, b):
        return a[0] @ b[0], a[1] + a[0] @ b[1]

    powers = [(P, e)]                                   # powers[k] = (P^(2^k), E_(2^k))
    while holds(2 ** (len(powers) - 1), *powers[-1]):
        if 2 ** len(powers) > t_max:
            return 2 ** (len(powers) - 1), True
        powers.append(join(powers[-1], powers[-1]))
    t, M = 2 ** (len(powers) - 2), powers[-2]
    for j in range(len(powers) - 3, -1, -1):
        trial = join(M, powers[j])
        if holds(t + 2 ** j, *trial):
            t, M = t + 2 ** j, trial
    return t, False


def transfer_lower_bound(P_res, leak, *, max_states: int = TMIX_MAX_STATES, t_max: int = 2 ** 40) -> Transfer:
    """The bound t_mix_full(1/4) >= t* + 1 (module docstring) from dense powers of the restricted
    kernel ``P_res``: t* the largest t with max over pairs of TV_res(t) - E_t(x) - E_t(y) > 1/2.

    ``leak`` is the chance e(z) that a coupled step at z parts the chains, one value per state of
    ``P_res`` (the path-weighted bound), or one number for every state (the uniform bound
    dbar_res(t) - 2 t eps > 1/2).

    NaN with the reason where nothing transfers: "too many states" (beyond ``max_states`` for dense
    powers), "the restricted chain mixes within one step" (dbar_res(1) <= 1/2, e.g. a single state)
    or "left-out mass too large" (the condition fails already at t = 1, hence at every t). When the
    condition still holds at ``t_max``, the bound reached there is returned with that said."""
    n = P_res.shape[0]
    e = np.full(n, float(leak)) if np.ndim(leak) == 0 else np.asarray(leak, np.float64)
    if e.shape != (n,) or not np.all((e >= 0) & (e <= 1)):
        raise ValueError(f"leak must be one mass in [0, 1] or one per state ({n}); got {np.asarray(leak).shape} "
                         f"with range [{e.min() if e.size else np.nan}, {e.max() if e.size else np.nan}]")
    t_rel = relaxation(P_res).t_rel
    if n > max_states:
        return Transfer(np.nan, "too many states", t_rel, np.nan)
    t_mix = mixing_time(P_res, 0.25, max_states=max_states).t_mix
    P = P_res.toarray() if sp.issparse(P_res) else np.asarray(P_res, np.float64)
    starts = _starts(P)

    def holds(t, M, E):
        return dbar(M, starts, E) > 0.5

    if dbar(P, starts) <= 0.5:
        return Transfer(np.nan, "the restricted chain mixes within one step", t_rel, t_mix)
    if not holds(1, P, e):
        return Transfer(np.nan, "left-out mass too large", t_rel, t_mix)
    t, capped = _largest_t(P, e, holds, t_max)
    return Transfer(float(t + 1), f"holds (still at t = {t}, t_max reached)" if capped else "holds", t_rel, t_mix)
