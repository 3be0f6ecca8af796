"""The growth verdict's power and safety on laws with a known answer
(:func:`textglauber.phase.verdicts.growth_verdict`).

Each truth below is run without noise and with multiplicative lognormal noise: every value is
multiplied by exp(s z - s^2 / 2) with z standard normal and s^2 = ln(1 + noise^2), a factor of mean 1
and coefficient of variation ``noise`` that never makes a time negative. A verdict *names* the
truth when it gives the truth's family and is *wrong* when it gives the other family; "cannot
tell" and "unresolved" are neither.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd

from .verdicts import DECISIVE, decide, fit_laws

VERDICTS = ("polynomial", "exponential", "cannot tell", "unresolved")


def _constant(n, rng):
    """A slow constant time, 10^6, made irregular by 10% with a pattern drawn once per replicate."""
    return 1e6 * (1.0 + 0.1 * rng.uniform(-1.0, 1.0, len(n)))


TRUTHS = {
    "n": (lambda n, rng: n, "polynomial"),
    "n ln n": (lambda n, rng: n * np.log(n), "polynomial"),
    "n + 30": (lambda n, rng: n + 30.0, "polynomial"),
    "n^2": (lambda n, rng: n ** 2.0, "polynomial"),
    "e^{0.2n}": (lambda n, rng: np.exp(0.2 * n), "exponential"),
    "n e^{0.1n}": (lambda n, rng: n * np.exp(0.1 * n), "exponential"),
    "constant (10% irregular)": (_constant, "polynomial"),
}
"""Each truth: (values at lengths n, given a generator for its irregular part; its family)."""

_RANDOM = {"constant (10% irregular)"}        # drawn anew each replicate even without noise


def lognormal(values: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
    """``values`` times independent lognormal factors of mean 1 and coefficient of variation ``noise``."""
    s = np.sqrt(np.log1p(noise ** 2))
    return values * np.exp(s * rng.standard_normal(values.shape) - s ** 2 / 2)


@lru_cache(maxsize=8)
def _draws(ns: tuple, replicates: int, seed: int, noise: float) -> tuple:
    """The fits of every replicate of every truth, noise-free and noisy: ((truth, noise, fits), ...)."""
    rng = np.random.default_rng(seed)
    n = np.asarray(ns, float)
    out = []
    for name, (law, _) in TRUTHS.items():
        for level in dict.fromkeys((0.0, noise)):          # noise = 0 gives the noise-free rows once
            reps = replicates if (level > 0 or name in _RANDOM) else 1
            fits = []
            for _ in range(reps):
                values = law(n, rng)
                fits.append(fit_laws(n, lognormal(values, level, rng) if level > 0 else values))
            out.append((name, level, tuple(fits)))
    return tuple(out)


def growth_power(ns, replicates: int = 200, seed: int = 0, noise: float = 0.3, *,
                 decisive: float = DECISIVE) -> pd.DataFrame:
    """Per truth of :data:`TRUTHS`, noise-free (one replicate, or ``replicates`` for the irregular
    constant) and with lognormal noise of coefficient of variation ``noise``: the share of each
    verdict over the replicates at lengths ``ns``, the share naming the truth's family ("named") and
    the share naming the other family ("wrong"). ``decisive`` is the rule's threshold, to be changed
    only to show what it buys. Seeded by ``seed``: every call with the same arguments agrees."""
    rows = []
    for name, level, fits in _draws(tuple(float(n) for n in sorted(ns)), int(replicates), int(seed), float(noise)):
        got = np.array([decide(f, decisive) for f in fits])
        family = TRUTHS[name][1]
        other = "exponential" if family == "polynomial" else "polynomial"
        rows.append({"truth": name, "family": family, "noise": level, "replicates": len(fits),
                     **{v: float((got == v).mean()) for v in VERDICTS},
                     "named": float((got == family).mean()), "wrong": float((got == other).mean())})
    return pd.DataFrame(rows)

