"""Which growth law in n do censored hitting or coupling times follow? (SPEC section 4, version 2)

Per cell (one length n at one temperature): the Kaplan-Meier median of the right-censored
times and its bootstrap replicates (chains resampled within the cell). Across lengths:

- three proportional laws tau = a f(n), f in {n, n log n, n^2}, fitted to the cell medians by
  weighted least squares (weights from the bootstrap variances). The laws have one parameter
  each, so twice the log-likelihood ratio of the best law over the runner-up is the difference
  of their chi^2 (``delta_chi2``); it says how strongly the medians prefer the best law;
- the nested test of a log factor on top of a linear law, a n log n + c n against c n, and the
  same with a free offset b (a n log n + c n + b against a n + b), which on a short range of n
  has little power because an offset absorbs most of the curvature;
- the exponent p of a power law C n^p with a bootstrap percentile interval. When that interval lies
  wholly below 1 or above 2 and the best law fits badly, the verdict is "none of the three".

Chi^2 values are divided by an overdispersion factor max(1, chi^2_best / (K - 1)) before they
are compared, so a best law that fits worse than the bootstrap noise allows weakens every
conclusion instead of sharpening it. Support: ``delta_chi2`` < 2 "cannot tell", 2-6 "moderate",
>= 6 "strong" (likelihood ratio above e^3, about 20).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

LAWS = {"n": lambda n: n, "n log n": lambda n: n * np.log(n), "n^2": lambda n: n ** 2}
MODERATE, STRONG = 2.0, 6.0


def km_median(times, observed) -> float:
    """Kaplan-Meier median of right-censored times (``observed`` False = censored at that time).

    The smallest time at which the survival curve drops to 1/2 or below; where it sits exactly at
    1/2 on a flat stretch, the midpoint of that stretch (the usual convention, which makes it the
    sample median when nothing is censored). NaN when the curve never gets to 1/2."""
    t = np.asarray(times, float)
    e = np.asarray(observed, bool)
    s = 1.0
    event_times = np.unique(t[e])
    for k, u in enumerate(event_times):
        at_risk = np.sum(t >= u)
        s *= 1.0 - np.sum((t == u) & e) / at_risk
        if s < 0.5 - 1e-12:
            return float(u)
        if abs(s - 0.5) <= 1e-12:
            later = event_times[k + 1:]
            return float((u + later[0]) / 2) if len(later) else float("nan")
    return float("nan")


def _medians(t: np.ndarray, axis=-1) -> np.ndarray:
    """Medians with censored entries at +inf: the Kaplan-Meier median when every censoring time
    lies at or beyond every event (one budget per cell); inf where half or more are censored."""
    return np.median(t, axis=axis)


def cell_medians(n, tau, censored, budget, n_boot: int = 1000, seed: int = 0):
    """Per length: trials, censored share, KM median (NaN if >= half censored), bootstrap 95%
    interval and standard error (replicates capped at ``budget``: a censored replicate is known
    only to lie beyond it). Returns (table, replicates (n_boot, K)) with one column per length."""
    import pandas as pd

    n, tau, censored = np.asarray(n), np.asarray(tau, float), np.asarray(censored, bool)
    budget = np.broadcast_to(np.asarray(budget, float), n.shape)
    rng = np.random.default_rng(seed)
    rows, reps = [], []
    for m in np.unique(n):
        sel = n == m
        t = np.where(censored[sel], np.inf, tau[sel])
        b = float(budget[sel].max())
        med = float(_medians(t))
        boot = np.minimum(_medians(t[rng.integers(0, len(t), (n_boot, len(t)))]), b)
        lo, hi = np.quantile(boot, [0.025, 0.975])
        rows.append({"n": int(m), "trials": int(sel.sum()), "censored": float(censored[sel].mean()),
                     "median": med if np.isfinite(med) else np.nan, "ci_low": lo, "ci_high": hi,
                     "se": float(boot.std()), "budget": b})
        reps.append(boot)
    return pd.DataFrame(rows), np.stack(reps, 1)


def _wls(X: np.ndarray, y: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, float]:
    w = 1.0 / np.sqrt(var)
    coef, *_ = np.linalg.lstsq(X * w[:, None], y * w, rcond=None)
    return coef, float(np.sum(((X @ coef - y) * w) ** 2))


@dataclass
class LawComparison:
    cells: object                # per-length table (pandas), from cell_medians
    usable: int                  # lengths with a median within the budget
    laws: list = field(default_factory=list)   # per law: a, chi2 (scaled), delta vs best
    best: str | None = None
    runner_up: str | None = None
    delta_chi2: float = float("nan")
    support: str = "cannot tell"
    overdispersion: float = float("nan")
    gof_p: float = float("nan")   # chi^2 goodness of fit of the best law (before scaling)
    log_factor: dict = field(default_factory=dict)          # a n log n + c n vs c n
    log_factor_offset: dict = field(default_factory=dict)   # ... + b vs a n + b
    p: float = float("nan")
    p_low: float = float("nan")
    p_high: float = float("nan")
    reason: str = ""

    def outside(self) -> str | None:
        """'slower' or 'faster' when the exponent's whole interval lies below 1 or above 2 and the best
        law misses the medians by more than their errors allow (goodness of fit p < 0.01): the medians
        then grow unlike every one of the three laws, whichever of them fits least badly. (Either sign
        alone is not enough: precise medians of an n law carry a small bias from whole-step times
        that can push the exponent's interval just below 1 while the n law still fits.)"""
        if not self.gof_p < 0.01:
            return None
        if self.p_high < 1:
            return "slower"
        if self.p_low > 2:
            return "faster"
        return None

    def verdict(self) -> str:
        """The law the medians support, 'none of the three' when the exponent's interval excludes
        [1, 2] (growth slower than n or faster than n^2), or 'cannot tell'."""
        if self.outside():             # needs a goodness of fit, so a best law
            return "none of the three"
        return self.best if self.support != "cannot tell" else "cannot tell"

    def sentence(self) -> str:
        """One sentence for the page (no final full stop), computed from the fields."""
        if self.best is None:
            return f"cannot tell: {self.reason}"
        p = f"power-law exponent p = {self.p:.2f} (95% interval {self.p_low:.2f} to {self.p_high:.2f})"
        outside = self.outside()
        if outside:
            return (f"none of the three laws: the {p} lies {'below 1' if outside == 'slower' else 'above 2'}, "
                    f"so the medians grow {'more slowly than n' if outside == 'slower' else 'faster than n^2'}; "
                    f"of the three, a {self.best} law misses them least (Δχ² = {self.delta_chi2:.1f} over a "
                    f"{self.runner_up})")
        if self.support == "cannot tell":
            return (f"cannot tell a {self.best} from a {self.runner_up} (Δχ² = {self.delta_chi2:.1f} < {MODERATE:g}); "
                    f"{p}; {self.reason}")
        s = (f"a {self.best} law, {self.support} support (Δχ² = {self.delta_chi2:.1f} over a {self.runner_up}, "
             f"likelihood ratio {np.exp(min(self.delta_chi2, 600) / 2):.3g}); {p}")
        if self.p_high < 1 or self.p_low > 2:
            s += (f"; the exponent's interval lies {'below 1' if self.p_high < 1 else 'above 2'}, although the law "
                  f"fits the medians within their errors")
        if self.gof_p < 0.01:
            s += (f"; but even the best law misses the medians by more than their bootstrap errors allow (goodness of "
                  f"fit p = {self.gof_p:.1g}): it is only the nearest of the three, and p describes the growth better")
        return s


def compare_laws(n, tau, censored, budget, n_boot: int = 1000, seed: int = 0) -> LawComparison:
    """Compare n, n log n and n^2 growth of the per-length KM medians (see the module docstring)."""
    from scipy import stats

    cells, reps = cell_medians(n, tau, censored, budget, n_boot, seed)
    ok = cells["median"].notna().to_numpy()
    res = LawComparison(cells=cells, usable=int(ok.sum()))
    k = res.usable
    lost = len(cells) - k
    if k < 3 or cells.n[ok].max() < 2 * cells.n[ok].min():
        res.reason = (f"only {k} of {len(cells)} lengths have a median within the budget"
                      + (f" ({lost} have half or more chains censored)" if lost else "")
                      + ("" if k < 3 else ", spanning less than a factor of 2 in n"))
        return res
    m = cells["median"].to_numpy()[ok]
    nn = cells.n.to_numpy()[ok].astype(float)
    var = cells.se.to_numpy()[ok] ** 2 + 1.0 / 12      # floor: times are whole steps
    chi2 = {}
    for law, f in LAWS.items():
        coef, c2 = _wls(f(nn)[:, None], m, var)
        chi2[law] = c2
        res.laws.append({"law": f"a {law}", "a": float(coef[0]), "chi2": c2})
    best = min(chi2, key=chi2.get)
    res.overdispersion = phi = max(1.0, chi2[best] / (k - 1))
    res.gof_p = float(stats.chi2.sf(chi2[best], k - 1))
    order = sorted(chi2, key=chi2.get)
    res.best, res.runner_up = order[0], order[1]
    res.delta_chi2 = (chi2[order[1]] - chi2[order[0]]) / phi
    for row in res.laws:
        row["delta_chi2"] = (row["chi2"] - chi2[best]) / phi
    res.support = "strong" if res.delta_chi2 >= STRONG else "moderate" if res.delta_chi2 >= MODERATE else "cannot tell"

    def nested(with_offset: bool) -> dict:
        one = [np.ones_like(nn)] if with_offset else []
        X0 = np.stack([nn] + one, 1)
        X1 = np.stack([nn * np.log(nn), nn] + one, 1)
        if k <= X1.shape[1]:
            return {"delta_chi2": np.nan, "p_value": np.nan, "a": np.nan}
        _, c0 = _wls(X0, m, var)
        coef, c1 = _wls(X1, m, var)
        phi1 = max(1.0, c1 / (k - X1.shape[1]))
        d = max(c0 - c1, 0.0) / phi1
        return {"delta_chi2": d, "p_value": float(stats.chi2.sf(d, 1)), "a": float(coef[0])}

    res.log_factor = nested(False)
    res.log_factor_offset = nested(True)
    X = np.stack([np.log(nn), np.ones_like(nn)], 1)
    lvar = var / m ** 2
    (res.p, _), _ = _wls(X, np.log(m), lvar)
    w = 1.0 / np.sqrt(lvar)                              # the same weighted fit, every replicate at once
    boot_p = (np.log(np.maximum(reps[:, ok], 0.5)) * w) @ np.linalg.pinv(X * w[:, None])[0]
    res.p_low, res.p_high = (float(q) for q in np.quantile(boot_p, [0.025, 0.975]))
    why = []
    if res.support == "cannot tell":
        covers = [name for name, lo, hi in (("1 (n)", 1.0, 1.0), ("2 (n^2)", 2.0, 2.0)) if res.p_low <= lo <= res.p_high]
        if covers:
            why.append(f"the interval of p covers {' and '.join(covers)}")
        if lost:
            why.append(f"{lost} of {len(cells)} lengths lost to censoring")
        if k < 5:
            why.append(f"only {k} lengths with a median")
        if phi > 1.5:
            why.append(f"no law fits within the bootstrap noise (overdispersion {phi:.1f})")
        if not why:
            why.append(f"the medians' bootstrap errors (median relative error "
                       f"{np.median(np.sqrt(var) / m):.0%}) are too large for these lengths")
    res.reason = "; ".join(why)
    return res


def simulate(law: str, lengths, trials: int, budget: float, cv: float = 0.5, censor_top: float = 0.2,
             rng: np.random.Generator | None = None):
    """Synthetic hitting times: tau = a f(n) times log-normal noise of coefficient of variation ``cv``,
    rounded up to whole steps and censored at ``budget``; a is chosen so that a share ``censor_top``
    of the chains at the longest length is censored. Returns (n, tau with NaN where censored, censored)."""
    from scipy import stats

    rng = rng or np.random.default_rng(0)
    lengths = np.asarray(lengths, float)
    sigma = np.sqrt(np.log1p(cv ** 2))
    f = LAWS[law](lengths)
    a = budget / f.max() / np.exp(sigma * stats.norm.ppf(1 - censor_top))
    n = np.repeat(lengths, trials)
    t = np.ceil(a * LAWS[law](n) * np.exp(sigma * rng.standard_normal(len(n))))
    cens = t > budget
    return n.astype(int), np.where(cens, np.nan, t), cens


def power_check(lengths, trials: int, budget: float, replicates: int = 50, cv: float = 0.5, seed: int = 0,
                n_boot: int = 400) -> list[dict]:
    """How often ``compare_laws`` names each true law, names another, or cannot tell, at this design."""
    rng = np.random.default_rng(seed)
    out = []
    for law in LAWS:
        verdicts = [compare_laws(*simulate(law, lengths, trials, budget, cv, rng=rng), budget, n_boot=n_boot,
                                 seed=int(rng.integers(2**31))) for _ in range(replicates)]
        out.append({"true law": law, "replicates": replicates,
                    "right": sum(v.verdict() == law for v in verdicts),
                    "right, strong": sum(v.verdict() == law and v.support == "strong" for v in verdicts),
                    "cannot tell": sum(v.verdict() == "cannot tell" for v in verdicts),
                    "none of the three": sum(v.verdict() == "none of the three" for v in verdicts),
                    "wrong": sum(v.verdict() not in (law, "cannot tell") for v in verdicts),
                    "wrong, strong": sum(v.verdict() in LAWS and v.verdict() != law and v.support == "strong"
                                         for v in verdicts)})
    return out
