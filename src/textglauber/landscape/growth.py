"""Does the barrier grow with n? The verdict on Gamma(n) (docs/science.md, chapter 3: the landscape).

Gamma(n) is read from the model's scores, not measured, so it carries no noise; what it carries
are events: a second well that appears at one length and not the next, or only at odd lengths.
The rule therefore compares heights, not fits:

- "grows": every Gamma of the last third of the lengths exceeds the largest Gamma of the first
  third by a factor of at least :data:`GROW`, and none of the middle third (a length with one well
  counts as Gamma = 0), with two lengths at least in that third: the barrier keeps rising, not one
  spike;
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


def _heights(ns, gammas) -> tuple[np.ndarray, np.ndarray]:
    ns, g = np.asarray(ns, float), np.asarray(gammas, float)
    order = np.argsort(ns)
    return ns[order], np.where(np.isnan(g[order]), 0.0, g[order])


def _judge(g: np.ndarray) -> str:
    if len(g) < MIN_LENGTHS or not np.isfinite(g).all():
        return "cannot tell"
    third = max(len(g) // 3, 1)
    first, middle, last = g[:third], g[third:-third], g[-third:]
    rising = len(last) >= 2 and last.min() > 0                    # one last value is a spike, not a trend
    if rising and last.min() >= GROW * first.max() and last.min() >= middle.max(initial=0.0):
        return "grows"
    if last.max() <= LEVEL * g[:-third].max():
        return "bounded"
    return "cannot tell"


def barrier_verdict(ns, gammas) -> tuple[str, str]:
    """(verdict, its words) for Gamma over the lengths ``ns`` (NaN: one well, no barrier)."""
    ns, g = _heights(ns, gammas)
    span = f"n = {ns[0]:g} to {ns[-1]:g}" if len(ns) else "no length"
    whole = _judge(g)
    odd, even = _judge(g[ns % 2 == 1]), _judge(g[ns % 2 == 0])
    if {odd, even} == {"grows", "bounded"}:
        which = "odd" if odd == "grows" else "even"
        return (f"grows at {which} n only", f"the barrier grows over the {which} lengths of {span} and not over the "
                f"others: a pattern of parity, not growth in n")
    if whole == "grows":
        return "grows", f"the barrier grows over {span}, from {g[0]:.3g} to {g[-1]:.3g}"
    if whole == "bounded" and not g.any():
        return "bounded", f"no length of {span} has a second well, so there is no barrier to grow"
    if whole == "bounded":
        return "bounded", f"the barrier reaches no new height in the last third of {span} (largest {g.max():.3g})"
    return "cannot tell", f"the barrier over {span} ({', '.join(f'{v:.3g}' for v in g)}) neither clearly grows nor levels off"
