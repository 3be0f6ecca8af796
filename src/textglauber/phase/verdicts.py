"""How a time grows with n over a phase table's lengths: the growth verdicts and their sentences
(docs/science.md, chapter 3)."""
from __future__ import annotations

import numpy as np


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
