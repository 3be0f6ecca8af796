"""Does the barrier grow with n? The verdict on Gamma(n) (docs/science.md, chapter 3: the landscape).

Gamma(n) is read from the model's scores, not measured, so it carries no noise; what it carries
are events: a second well that appears at one length and not the next, or only at odd lengths.
The rule therefore compares heights, not fits:

- "grows": every Gamma of the last third of the lengths exceeds the largest Gamma of the first
  third by a factor of at least :data:`GROW`, and none of the middle third (a length with one well
  counts as Gamma = 0), with two lengths at least in that third, and the last length at least as
  high as every length before it: the barrier keeps rising, not one spike, and has not turned down
  by the last length computed;
- "bounded": the last third sets no new height: its largest Gamma is at most the largest before it
  (times :data:`LEVEL`, a float margin), over the lengths computed. Bounded over a range is not
  bounded for every n;
- "cannot tell": anything else.

When the odd and the even lengths, judged apart, get different decided verdicts, the growth is a
pattern of parity, and the verdict says which parity grows.
"""
from __future__ import annotations

import numpy as np

GROW = 1.5
"""How much the last third must exceed the first third's height to count as growth."""

LEVEL = 1.0 + 1e-6
"""The float margin of "no new height"."""

MIN_LENGTHS = 3


def _heights(ns, gammas, low=None, high=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lengths in order and Gamma's lower and upper ends at each: Gamma itself where it is known, the
    search's bracket where it is not (no bracket: from 0 to inf), and 0 where there is one well (NaN)."""
    ns, g = np.asarray(ns, float), np.asarray(gammas, float)
    lo = g.copy() if low is None else np.where(np.isfinite(g), g, np.asarray(low, float))
    hi = g.copy() if high is None else np.where(np.isfinite(g), g, np.asarray(high, float))
    unknown = np.isinf(g)
    lo = np.where(unknown & ~np.isfinite(lo), 0.0, lo)
    hi = np.where(unknown & ~np.isfinite(hi), np.inf, hi)
    order = np.argsort(ns)
    one = np.isnan(g[order])
    return ns[order], np.where(one, 0.0, lo[order]), np.where(one, 0.0, hi[order])


def _judge(lo: np.ndarray, hi: np.ndarray) -> str:
    """The rule of the module docstring on Gamma known only within [lo, hi] at each length: "grows" must
    hold for every Gamma in the brackets (lower ends last, upper ends before), and so must "bounded"."""
    if len(lo) < MIN_LENGTHS:
        return "cannot tell"
    third = max(len(lo) // 3, 1)
    rising = len(lo[-third:]) >= 2 and lo[-third:].min() > 0        # one last value is a spike, not a trend
    if (rising and lo[-third:].min() >= GROW * hi[:third].max()
            and lo[-third:].min() >= hi[third:-third].max(initial=0.0) and lo[-1] * LEVEL >= hi[:-1].max()):
        return "grows"
    if hi[-third:].max() <= LEVEL * lo[:-third].max():
        return "bounded"
    return "cannot tell"


def _value(lo: float, hi: float) -> str:
    if lo == hi:
        return f"{lo:.3g}"
    return f"{lo:.3g} to {hi:.3g}" if np.isfinite(hi) else "not settled"


def barrier_verdict(ns, gammas, low=None, high=None) -> tuple[str, str]:
    """(verdict, its words) for Gamma over the lengths ``ns`` (NaN: one well, no barrier; inf: not
    settled by the search, known only within ``low`` and ``high`` where those are given)."""
    ns, lo, hi = _heights(ns, gammas, low, high)
    span = f"n = {ns[0]:g} to {ns[-1]:g}" if len(ns) else "no length"
    whole = _judge(lo, hi)
    odd, even = (_judge(lo[ns % 2 == k], hi[ns % 2 == k]) for k in (1, 0))
    if {odd, even} == {"grows", "bounded"}:
        which = "odd" if odd == "grows" else "even"
        return (f"grows at {which} n only", f"the barrier grows over the {which} lengths of {span} and not over the "
                f"others: a pattern of parity, not growth in n")
    if whole == "grows":
        return "grows", f"the barrier grows over {span}, from {_value(lo[0], hi[0])} to {_value(lo[-1], hi[-1])}"
    if whole == "bounded" and not hi.any():
        return "bounded", f"no length of {span} has a second well, so there is no barrier to grow"
    if whole == "bounded":
        return "bounded", f"the barrier reaches no new height in the last third of {span} (largest {hi.max():.3g})"
    values = ", ".join(_value(a, b) for a, b in zip(lo, hi))
    if (lo != hi).any():
        return "cannot tell", (f"the barrier over {span} ({values}, searched lengths as brackets) neither clearly grows "
                               f"nor levels off for every value in its brackets")
    return "cannot tell", f"the barrier over {span} ({values}) neither clearly grows nor levels off"
