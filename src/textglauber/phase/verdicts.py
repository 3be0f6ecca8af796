"""How a time grows with n over a phase table's lengths: the growth verdict and its sentence
(docs/science.md, chapter 3).

The rule fits two families of laws to ln(value) by least squares over the table's lengths:

- polynomial: c n^p + b with 0 <= p <= P_MAX, c >= 0 and b of either sign, the law positive at
  every length of the range. It holds a constant, n, n + 30, n^2, n^4 and (to a fraction of a per
  cent over short ranges) n ln n: laws that do not fall and grow at most like n^P_MAX;
- exponential: c n^q e^{r n} with a rate r >= R_MIN per site and a prefactor 0 <= q <= Q_MAX.

Both have three free parameters, so their root-mean-square log residuals, rms_P and rms_E, are
compared as they are. The verdicts:

- "unresolved": a value is NaN, infinite or not positive, or there are fewer than three lengths;
- "polynomial" or "exponential": that family fits (its rms is at most FIT_MAX) and the other
  family's rms is at least DECISIVE times larger (rms below TIE counting as TIE);
- "cannot tell": otherwise, when neither family fits or both fit about equally. It is an honest
  verdict: over a short range of n a polynomial and a slow exponential bend alike, and the rule
  never names a law the values do not decide.

A falling sequence fits neither family well (neither holds a falling law), so it is "cannot tell";
so are a step and a swing. The verdict speaks of the range measured, and laws outside both families
can still be named as the one they resemble there: over n = 4 to 9, n^8 reads "exponential",
and n^3 e^{0.1 n} and e^{0.2 n}/n read "polynomial" (the log-slope 0.2 - 1/n of the latter stays
below R_MIN up to n = 6: its exponential growth has barely started within the range). n^5 and n^6
read "cannot tell" over n = 3 to 12 and 4 to 9. The safety and power of the rule on the laws it
was designed for are measured by :func:`textglauber.phase.verdict_power.growth_power`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares, lsq_linear

R_MIN = 0.05
"""The slowest rate, per site, that counts as exponential. Over the lengths an exact table reaches
(n up to about 20) e^{0.05 n} rises by a factor e^{0.05 (n_max - n_min)} only, 1.6 over n = 3 to 12,
as much as n^0.33 does there; and it outgrows n^2 only beyond n = 215, so a slower rate is not the
slow mixing the chapter asks about."""

P_MAX = 4.0
"""The steepest power of the polynomial family."""

Q_MAX = 2.0
"""The steepest power prefactor of the exponential family. Bounded below P_MAX so that a steep
power (n^5 = n^4 n) cannot pass as n^q times a slow exponential; with Q_MAX = P_MAX, n^5 reads as
"exponential" over n = 3 to 12 and n = 4 to 9."""

FIT_MAX = 0.4
"""The largest rms log residual for which a family counts as fitting: the law misses the values by
about a factor e^0.4 = 1.5 on a typical length. 30% noise leaves about 0.2 to 0.25 (its 99th
percentile 0.4 to 0.5 over n = 3 to 12 and 4 to 9), while a x100 step leaves above 1 and a fall
e^{-0.3 n} 0.5 to 0.9."""

DECISIVE = 2.5
"""How many times larger the other family's rms must be before a family is named. Calibrated with
:func:`~textglauber.phase.verdict_power.growth_power` (lognormal noise of coefficient of variation
0.3, 200 draws, n = 3 to 12 and 4 to 9): at 1 the wrong family is named in 64-89% of the draws of
the exponential truths; at 1.5 still in 5% for n e^{0.1 n} over n = 4 to 9; from 2 on in at most
1.5%. 2.5 keeps a margin above that and leaves more laws outside both families undecided (2 names
e^{0.2 n}/n polynomial over n = 3 to 12 and n^6 exponential over n = 4 to 9). Above about 3.1,
n e^{0.1 n} could not be named over n = 4 to 9 even without noise: its best polynomial misses it
by only 3.1 TIE there."""

TIE = 1e-3
"""The rms below which a fit counts as exact: a table's times carry rounding and solver tolerance
far below 0.1%, and the polynomial fit is refined to about this precision, so smaller differences
are ties."""

_P_GRID = np.linspace(0.0, P_MAX, 21)
_S_GRID = np.linspace(-8.0, 10.0, 19)          # ln k, where b = m (1 - k): k > 1 makes b negative


@dataclass(frozen=True)
class Fits:
    """The two fits of ln(values): rms residuals and their laws' parameters."""
    rms_p: float
    p: float          # the polynomial's power
    b_share: float    # b / (value of the law at the shortest length): 1 - k
    rms_e: float
    q: float          # the exponential's power prefactor
    r: float          # its rate per site


def _poly_shape(lw: np.ndarray, p, s):
    """ln(law / law at the shortest length) for c n^p + b written as m (1 + k ((n/n0)^p - 1)), k = e^s."""
    return np.log1p(np.exp(s) * np.expm1(p * lw))


def fit_polynomial(ns: np.ndarray, logs: np.ndarray) -> tuple[float, float, float]:
    """The polynomial family fitted to ln(values): (rms, p, k). A grid over (p, ln k) with the
    level in closed form, then a bounded least-squares refinement from the best grid point
    (stopped at relative changes of 1e-6, which moves the rms by far less than TIE)."""
    lw = np.log(ns / ns[0])
    shapes = _poly_shape(lw[None, None, :], _P_GRID[:, None, None], _S_GRID[None, :, None])
    resid = logs - shapes
    resid = resid - resid.mean(-1, keepdims=True)
    i, j = np.unravel_index(np.argmin((resid ** 2).sum(-1)), resid.shape[:2])
    grid_rms = float(np.sqrt((resid[i, j] ** 2).mean()))

    def f(th):
        return logs - th[0] - _poly_shape(lw, th[1], th[2])

    def jac(th):
        k, e = np.exp(th[2]), np.expm1(th[1] * lw)
        d = 1 + k * e
        return -np.column_stack([np.ones_like(lw), k * (e + 1) * lw / d, k * e / d])

    x0 = [float(np.mean(logs - shapes[i, j])), _P_GRID[i], _S_GRID[j]]
    out = least_squares(f, x0, jac=jac, bounds=([-np.inf, 0.0, -20.0], [np.inf, P_MAX, 20.0]), ftol=1e-6, xtol=1e-6)
    rms = float(np.sqrt((out.fun ** 2).mean()))
    if rms <= grid_rms:
        return rms, float(out.x[1]), float(np.exp(out.x[2]))
    return grid_rms, float(_P_GRID[i]), float(np.exp(_S_GRID[j]))


def fit_exponential(ns: np.ndarray, logs: np.ndarray) -> tuple[float, float, float]:
    """The exponential family fitted to ln(values), linear in (ln c, q, r): (rms, q, r)."""
    A = np.column_stack([np.ones_like(ns), np.log(ns), ns])
    sol = lsq_linear(A, logs, bounds=([-np.inf, 0.0, R_MIN], [np.inf, Q_MAX, np.inf]), method="bvls")
    return float(np.sqrt(((logs - A @ sol.x) ** 2).mean())), float(sol.x[1]), float(sol.x[2])


def fit_laws(ns, values) -> Fits:
    """Both families fitted to positive values at lengths ns (sorted, at least three)."""
    ns, logs = np.asarray(ns, float), np.log(np.asarray(values, float))
    rms_p, p, k = fit_polynomial(ns, logs)
    rms_e, q, r = fit_exponential(ns, logs)
    return Fits(rms_p, p, 1.0 - k, rms_e, q, r)


def decide(fits: Fits, decisive: float = DECISIVE) -> str:
    """The verdict from the two fits: a family is named only when it fits and the other family's
    rms is at least ``decisive`` times its own (rms below TIE read as TIE)."""
    best, other, name = ((fits.rms_p, fits.rms_e, "polynomial") if fits.rms_p <= fits.rms_e
                         else (fits.rms_e, fits.rms_p, "exponential"))
    if best > FIT_MAX or other < decisive * max(best, TIE):
        return "cannot tell"
    return name


def _laws(f: Fits) -> tuple[str, str]:
    """The two fitted laws in words: the polynomial's power (and the sign of its constant), the
    exponential's prefactor and rate."""
    if f.p < 0.05:
        poly = "a constant"
    else:
        poly = f"n^{f.p:.1f}" + ("" if abs(f.b_share) < 0.05 else f" {'+' if f.b_share > 0 else '-'} a constant")
    expo = ("" if f.q < 0.05 else f"n^{f.q:.1f} ") + f"e^{{{f.r:.2f} n}}"
    return poly, expo


def _sentence(verdict: str, f: Fits, what: str, span: str) -> str:
    poly, expo = _laws(f)
    if verdict == "exponential":
        return (f"{what} grows exponentially over {span}, like {expo}, a rate of {f.r:.2f} per site: its rms log "
                f"residual is {f.rms_e:.3f}, against {f.rms_p:.3f} for the best polynomial ({poly})")
    if verdict == "polynomial":
        return (f"{what} grows at most polynomially over {span}, like {poly}: its rms log residual is {f.rms_p:.3f}, "
                f"against {f.rms_e:.3f} for the best exponential of rate at least {R_MIN:g} per site ({expo})")
    why = (f"neither fits (both above {FIT_MAX:g})" if min(f.rms_p, f.rms_e) > FIT_MAX
           else f"neither fits {DECISIVE:g} times better than the other")
    return (f"Whether {what} grows polynomially or exponentially over {span} cannot be told: the best polynomial "
            f"({poly}) leaves an rms log residual of {f.rms_p:.3f} and the best exponential ({expo}) {f.rms_e:.3f}, "
            f"so {why}")


def growth_verdict(ns, values, *, what: str = "t_rel") -> tuple[str, str]:
    """How a time grows with n over a table's lengths: (verdict, one sentence from the numbers).
    The verdict is "polynomial", "exponential", "cannot tell" or "unresolved" (see the module)."""
    ns, values = np.asarray(ns, float), np.asarray(values, float)
    order = np.argsort(ns)
    ns, values = ns[order], values[order]
    span = f"n = {ns[0]:g} to {ns[-1]:g}" if len(ns) else "no length"
    good = np.isfinite(values) & (values > 0)
    if not good.all():
        bad = ", ".join(f"{n:g}" for n in ns[~good])
        return "unresolved", f"{what} is not resolved at n = {bad}, so its growth over {span} is unknown"
    if len(ns) < 3:
        return "unresolved", (f"{what} is known at {len(ns)} length{'' if len(ns) == 1 else 's'} only ({span}), "
                             "too few to tell a growth law")
    fits = fit_laws(ns, values)
    verdict = decide(fits)
    return verdict, _sentence(verdict, fits, what, span)
