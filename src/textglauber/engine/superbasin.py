"""The superbasin move: the exact first exit of a discrete-time chain from a set S of states, in one
draw, by repeated doubling of the chain restricted to S.

Kinetic Monte Carlo pays for every move; a chain that flickers among a few states of low energy
(a trap and its nearest neighbours) makes millions of moves before it gets anywhere. Restricted to
S, the chain is the substochastic matrix Q = P[S, S]; r = 1 - Q 1 is the chance of leaving S in one
step, and f_t = (I - Q^t) 1 the chance of having left S by step t. Given a uniform V, the exit step
is the least t with f_t(s) >= V, found bit by bit from tables of Q^(2^j) and f_(2^j); the state the
chain left from has weight Q^(t-1)(s, y) r(y). This is exact in law for any S (the strong Markov
property): what S holds decides only the cost.

Precision: no table is formed by a subtraction that could lose a rare exit. In a deep trap
1 - Q(x, x) is far below the float64 spacing of 1, and beside a neighbour that flickers back to
the trap with chance 0.3 an exit of chance 1e-17 is below the rounding of 0.3; a table of G = I - Q
(or of Q with its diagonal) would lose either. The tables hold Q^t as its off-diagonal part O_t,
the exit chances f_t and the diagonal D_t = 1 - (O_t 1 + f_t); each level adds and multiplies
nonnegative numbers only (O_2t = D O + O D + O O off the diagonal, f_2t = f + D f + O f), and D's
rounding is absolute, at most the float64 spacing of 1 against a row whose mass is 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MAX_LEVELS = 1020        # tables up to 2^1020 steps (float64 holds the steps up to about 2^1024)

@dataclass
class ExitLaw:
    """Doubling tables of one S: Q^(2^j) = diag(``D[j]``) + ``O[j]``, ``f[j]`` = P(exit by step 2^j)."""

    D: list[np.ndarray]
    O: list[np.ndarray]
    f: list[np.ndarray]
    r: np.ndarray            # (m,) chance of leaving S in one step

    @property
    def max_steps(self) -> int:
        """Steps the tables span: an exit later than this is reported as inf, unless every member has
        left by then with probability 1.0 in float64 (``f[-1]`` all 1), when none is later."""
        return 2 ** len(self.f) - 1


def exit_law(inside: np.ndarray, r: np.ndarray, horizon: float) -> ExitLaw:
    """Tables for exits up to ``horizon`` steps. ``inside``: (m, m) the one-step chances between
    distinct members (diagonal 0); ``r``: (m,) the one-step chance of leaving S, computed by the
    caller without subtraction (a sum over the moves that leave)."""
    inside, r = np.asarray(inside, dtype=np.float64), np.asarray(r, dtype=np.float64)
    if inside.shape != (len(r), len(r)):
        raise ValueError(f"superbasin: inside {inside.shape} and r {r.shape} do not match")
    O = inside.copy()
    np.fill_diagonal(O, 0.0)
    Ds, Os, fs = [_diagonal(O, r)], [O], [r.copy()]
    levels = max(1, math.ceil(math.log2(min(horizon, 2.0 ** MAX_LEVELS) + 1)))
    for _ in range(min(levels, MAX_LEVELS) - 1):
        D, O, f = Ds[-1], Os[-1], fs[-1]
        if f.min() >= 1.0:                   # every member has surely left: longer tables change nothing
            break
        O2 = D[:, None] * O + O * D[None, :] + O @ O
        np.fill_diagonal(O2, 0.0)
        f2 = np.minimum(f + D * f + O @ f, 1.0)
        Ds.append(_diagonal(O2, f2))
        Os.append(O2)
        fs.append(f2)
    return ExitLaw(Ds, Os, fs, r)


def _diagonal(O: np.ndarray, f: np.ndarray) -> np.ndarray:
    return np.clip(1.0 - (O.sum(1) + f), 0.0, 1.0)


def _last_before(law: ExitLaw, start: int, v: float) -> tuple[np.ndarray, int]:
    """The largest t with P(exit by t) < v, found bit by bit from the tables, and row ``start`` of Q^t
    (the chain's law at step t, inside S)."""
    row = np.zeros(len(law.r))
    row[start] = 1.0
    F, t = 0.0, 0                            # P(exit by t), t
    for j in range(len(law.f) - 1, -1, -1):
        F_next = F + row @ law.f[j]
        if F_next < v:
            row = row * law.D[j] + row @ law.O[j]
            F, t = F_next, t + (1 << j)
    return row, t


def sample_exit(law: ExitLaw, start: int, v: float, w: float) -> tuple[float, int]:
    """(exit step, index of the member left from) for a chain standing in member ``start``, from two
    uniforms: ``v`` sets the step (the least t with P(exit by t) >= v; inf beyond the tables), ``w``
    the member among those with weight Q^(t-1)(start, y) r(y)."""
    m = len(law.r)
    row, t = _last_before(law, start, v)
    if t >= law.max_steps and law.f[-1].min() < 1.0:
        return math.inf, -1
    weight = row * law.r
    cdf = np.cumsum(weight)
    if cdf[-1] <= 0:                         # an exit drawn where no member can leave: rounding at the tables' end
        return math.inf, -1
    return float(t + 1), int(min(np.searchsorted(cdf, w * cdf[-1], side="right"), m - 1))


def exit_cdf(law: ExitLaw, start: int, t: float) -> float:
    """P(exit by step t) for a chain standing in member ``start`` (t within the tables), from the same
    doubling tables: t's binary digits, highest first."""
    if t < 1:
        return 0.0
    t = min(int(t), law.max_steps)
    row = np.zeros(len(law.r))
    row[start] = 1.0
    F = 0.0
    for j in range(len(law.f) - 1, -1, -1):
        if t >> j & 1:
            F += row @ law.f[j]
            row = row * law.D[j] + row @ law.O[j]
    return float(min(F, 1.0))


def exit_quantile(law: ExitLaw, start: int, q: float) -> float:
    """The least step t with P(exit by t) >= q (inf beyond the tables), as :func:`sample_exit` finds it."""
    _, t = _last_before(law, start, q)
    return math.inf if t >= law.max_steps and law.f[-1].min() < 1.0 else float(t + 1)
