"""Escape against length, decided by Arrhenius slopes (docs/science.md, chapter 5: escape against
length).

A single temperature cannot say how escape grows with n: the prefactor of the escape time changes
with n too (the 1/n chance of picking a site alone adds ln 2 to the log from n = 8 to n = 16), and
a different trap at each length changes the exponent for reasons of its own. So at each length this
module fits the slope of log(median escape time) against 1/T over several temperatures, which the
prefactor does not move, and sets it beside the exponent predicted for the same trap
(:func:`textglauber.traps.quasipotential.barrier`, the W-graph value where the ball holds another
well). The traps form one family (:func:`nested_traps`): the deepest trap the finder reaches at the
shortest length, and at each longer length the fixed point that coordinate ascent reaches from the
shorter trap repeated to the new length, with the number of the shorter trap's sites its prefix
keeps. Where the allowed vocabulary is small enough to enumerate the chain, the exact mean escape
time at the same temperatures gives an exact slope beside the fitted one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .. import exact
from ..profile import EscapeLength
from ..seeding import child_seed
from . import escape, quasipotential
from .escape_section import nontrivial
from .finder import NoFixedPoint, coordinate_ascent, find_traps
from .fits import arrhenius

EXACT_STATES = 4096     # |A|^n up to which the chain is enumerated for the exact slope


@dataclass
class LengthTrap:
    """One member of the family: its length, state, how it was chosen and how much of the shorter
    trap its prefix keeps."""

    n: int
    state: torch.Tensor
    chosen: str          # "deepest found" (the shortest length), "grown" (ascent from the shorter trap)
                         # or "deepest found again" (the ascent cycled: the finder at this length)
    kept: int            # sites of the shorter trap that this one's prefix keeps (n at the shortest length)


def _deepest(memo, n: int, count: int, gen: torch.Generator) -> torch.Tensor | None:
    found = find_traps(memo, n, count, gen)
    if not found:
        return None
    margins = [escape.margin(escape.site_scores(memo, x), x, memo.vocab) for x in found]
    return found[int(np.argmax(margins))]


def nested_traps(memo, lengths, count: int, gen: torch.Generator) -> list[LengthTrap]:
    """The family of traps over ``lengths`` (increasing; module docstring). Stops at the first length
    where no trap is found."""
    out: list[LengthTrap] = []
    for n in lengths:
        if not out:
            x, chosen = _deepest(memo, n, count, gen), "deepest found"
        else:
            prev = out[-1].state
            start = torch.as_tensor(np.resize(prev.numpy(), n))[None]
            try:
                x, chosen = coordinate_ascent(memo, start)[0], "grown"
            except NoFixedPoint:
                x, chosen = _deepest(memo, n, count, gen), "deepest found again"
        if x is None:
            break
        kept = n if not out else int((x[:len(out[-1].state)] == out[-1].state).sum())
        out.append(LengthTrap(n, x, chosen, kept))
    return out


def exact_slope(scorer, state: torch.Tensor, k: int, temperatures) -> float:
    """The least-squares slope of the log of the exact mean escape time (out of the Hamming ball of
    radius k) against 1/T, on the enumerated chain; NaN where |A|^n exceeds :data:`EXACT_STATES`."""
    n = len(state)
    if scorer.vocab.size ** n > EXACT_STATES:
        return math.nan
    logs = []
    for T in temperatures:
        chain = exact.glauber_kernel(scorer, n, float(T))
        at = int(np.flatnonzero((chain.states == state.numpy()).all(1))[0])
        logs.append(math.log(escape.exact_escape(chain, at, k)["mean"]))
    return float(np.polyfit(1 / np.asarray(temperatures, float), logs, 1)[0])


def _temperatures(exponent: float, rows, x, vocab, g: EscapeLength) -> np.ndarray:
    """``g.temperatures`` temperatures at which exp(exponent / T) takes log-spaced values over
    10^holding_decades: the escape section's holding-time rule would put a trap whose exponent is
    many times its margin out of any horizon. The rule fixes where on the 1/T axis the medians lie,
    not their slope. Where the exponent is unknown, the one-state holding time's rule instead."""
    decades = np.linspace(*g.holding_decades, g.temperatures)
    if math.isfinite(exponent) and exponent > 0:
        return exponent / (decades * math.log(10))
    return escape.temperatures_for(rows, x, vocab, 10.0 ** decades)


def length_row(memo, model: str, trap: LengthTrap, g: EscapeLength, gen: torch.Generator, *, horizon: float,
               max_moves: int) -> dict:
    """One length of the family: the exponent at k = ceil(n/4), the Arrhenius slope over ``g``'s
    temperatures (:func:`_temperatures`; chains stopped at ``horizon`` or ``max_moves`` events) and,
    where the chain is enumerable, the exact slope."""
    x, n = trap.state, trap.n
    k = math.ceil(n / 4)
    rows = escape.site_scores(memo, x)
    delta = escape.margin(rows, x, memo.vocab)
    before = memo.rows
    bar = quasipotential.barrier(memo, x, k, max_states=g.max_states)
    Ts = _temperatures(bar.exponent, rows, x, memo.vocab, g)
    runs = [escape.escape_times(memo, x, k, T, g.chains, horizon, child_seed(gen), max_jumps=max_moves) for T in Ts]
    fit = arrhenius(Ts, [(r.times, r.censored) for r in runs], n_boot=500)
    inside = bool(fit.slope_low <= bar.exponent <= fit.slope_high)
    return {"model": model, "n": n, "trap": " ".join(map(str, x.tolist())), "k": k, "margin": delta,
            "exponent": bar.exponent, "exponent case": bar.case, "nontrivial": nontrivial(bar.exponent, delta),
            "slope": fit.slope, "slope_low": fit.slope_low, "slope_high": fit.slope_high, "temperatures": fit.temperatures,
            "fit p": fit.chi2_p, "exponent inside": inside, "exact slope": exact_slope(memo, x, k, Ts),
            "chosen": trap.chosen, "kept": trap.kept, "T low": float(Ts.min()), "T high": float(Ts.max()),
            "events": int(sum(r.moves.sum() for r in runs)), "rows scored": int(memo.rows - before)}


def escape_length(scorer, model: str, g: EscapeLength, gen: torch.Generator, *, horizon: float,
                  max_moves: int) -> pd.DataFrame:
    """The ``escape_length`` table of one model: a row per length of its family (:func:`nested_traps`,
    from ``g.traps`` traps found at the shortest length), each from :func:`length_row` with the escape
    section's ``horizon`` and event budget ``max_moves``."""
    memo = escape.RowMemo(scorer)
    family = nested_traps(memo, sorted(g.lengths), g.traps, gen)
    return pd.DataFrame([length_row(memo, model, t, g, gen, horizon=horizon, max_moves=max_moves) for t in family])
