"""Chapter 5's Arrhenius section: escape times from perfect traps of each model over temperatures
spanning many orders of magnitude, an Arrhenius fit per trap and escape distance, set beside the
trap's score margin, and the exactness check on enumerated chains (the measurements themselves are
:mod:`textglauber.escape`'s)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from . import escape, exact, survival, trapsearch

FAMILY_MISS = 0.01       # the exactness check's family-wise chance of a miss by a correct engine


def find_traps(scorer, n: int, count: int, gen: torch.Generator, batches: int = 4) -> list[torch.Tensor]:
    """Up to ``count`` distinct perfect traps (argmax fixed points) of length n, in the order coordinate
    ascent reached them from random starts drawn from ``gen`` (2 x count starts a batch). A batch
    none of whose starts converges is passed over (:class:`~textglauber.trapsearch.NoFixedPoint`);
    any other error, such as a length the model cannot take, propagates."""
    found: dict[tuple, None] = {}
    for _ in range(batches):
        starts = scorer.vocab.ids[torch.randint(scorer.vocab.size, (2 * count, n), generator=gen)]
        try:
            fixed = trapsearch.perfect_trap(scorer, starts)
        except trapsearch.NoFixedPoint:
            continue
        found.update(dict.fromkeys(tuple(r) for r in fixed.tolist()))
        if len(found) >= count:
            break
    return [torch.tensor(t) for t in list(found)[:count]]


def _seed(gen: torch.Generator) -> int:
    return int(torch.randint(2**31 - 1, (1,), generator=gen))


def _cell_row(model, j, text, delta, T, hold, run, new_rows) -> dict:
    steps = float(run.times.sum())                      # steps simulated: each chain to its stop
    return {"model": model, "trap": j, "text": text, "margin": delta, "temperature": float(T), "k": run.k,
            "one-state holding time": float(hold), **survival.summarize(run.times, run.censored, n_boot=500),
            "moves": int(run.moves.sum()), "superbasin exits": int(run.exits.sum()), "basin states": run.basin_states,
            "rows scored": int(new_rows), "rows asked": int(run.rows), "distinct states": run.distinct_states,
            "steps simulated": steps, "rows per step": new_rows / steps if steps else math.nan}


def _fit_row(model, j, delta, Ts, holds, runs) -> dict:
    fit = survival.arrhenius(Ts, [(r.times, r.censored) for r in runs], n_boot=500)
    one_state = np.polyfit(1 / np.asarray(Ts), np.log(holds), 1)[0]
    return {"model": model, "trap": j, "k": runs[0].k, "margin": delta, "slope": fit.slope,
            "slope_low": fit.slope_low, "slope_high": fit.slope_high, "one-state slope": float(one_state),
            "temperatures fitted": fit.temperatures, "span (decades)": fit.span_decades, "fit p": fit.chi2_p,
            "line holds": fit.holds()}


def measure_model(scorer, model: str, p: dict, gen: torch.Generator, decode) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One model's cells (a row per trap, temperature and distance) and fits (a row per trap and
    distance). Each trap's temperatures put its exact one-state holding time at ``temperatures``
    log-spaced values over 10^holding_decades; every cell runs ``chains`` chains to its distance,
    the horizon or ``max_moves`` events (:func:`textglauber.escape.escape_times`). Rows are shared
    across the cells of a model (:class:`textglauber.escape.RowMemo`)."""
    memo, ks = escape.RowMemo(scorer), sorted(p["distances"])
    cells, fits = [], []
    for j, x in enumerate(find_traps(memo, p["seq_len"], p["traps"], gen)):
        rows = escape.site_scores(memo, x)
        delta = escape.margin(rows, x, scorer.vocab)
        Ts = escape.temperatures_for(rows, x, scorer.vocab, np.logspace(*p["holding_decades"], p["temperatures"]))
        holds = escape.holding_times(rows, x, scorer.vocab, Ts)
        for k in ks:
            runs = []
            for T, hold in zip(Ts, holds):
                before = memo.rows
                runs.append(escape.escape_times(memo, x, k, T, p["chains"], p["horizon"], _seed(gen),
                                                max_jumps=p["max_moves"]))
                cells.append(_cell_row(model, j, decode(x), delta, T, hold, runs[-1], memo.rows - before))
            fits.append(_fit_row(model, j, delta, Ts, holds, runs))
    return pd.DataFrame(cells), pd.DataFrame(fits)


def exactness(tables: list[tuple[str, object]], p: dict, gen: torch.Generator) -> pd.DataFrame:
    """The exactness cases (:func:`exact_cases`) of each enumerated model ``(name, TabulatedScorer)``,
    each run and compared with its exact mean at one Bonferroni level: 99% for the family, so a
    correct engine fails the check on one build in a hundred at most."""
    cases = [(name, tab, case) for name, tab in tables for case in exact_cases(tab, p)]
    level = 1 - FAMILY_MISS / max(1, len(cases))
    rows = []
    for name, tab, (T, x, k, chain, want) in cases:
        rows.append({"model": name, **escape.check_against_exact(tab, chain, x, k, T, p["exact_chains"], _seed(gen),
                                                                 level, max_jumps=p["exact_max_moves"], want=want)})
    return pd.DataFrame(rows)


def exact_cases(table_scorer, p: dict):
    """(T, deepest state, k, chain, exact escape) for each exact temperature and distance up to n. The
    exact expected number of moves may be astronomical: the superbasin makes each case a few events."""
    for T in p["exact_temperatures"]:
        chain = exact.glauber_kernel(table_scorer, table_scorer.n, T)
        x = int(exact.deepest_traps(chain.kernel, 1)[0])
        for k in p["exact_distances"]:
            if k <= table_scorer.n:
                yield T, x, k, chain, escape.exact_escape(chain, x, k)


# ----------------------------------------------------------------------------- the page
def plot(axes, cells: pd.DataFrame, fits: pd.DataFrame) -> None:
    """Per model, log10 of the median escape time against 1/T: a colour per trap, a marker per
    distance k, the fitted line where there is one; a median the chains never reached is drawn as
    an open triangle at the chains' mean stopping step, a rough mark of where the censoring fell."""
    markers = dict(zip(sorted(cells.k.unique()), "os^Dv"))
    for ax, (model, c) in zip(axes, cells.groupby("model", sort=False)):
        for (j, k), g in c.groupby(["trap", "k"]):
            colour = f"C{j % 10}"
            fin = np.isfinite(g["median"])
            ax.plot(1 / g.temperature[fin], np.log10(g["median"][fin]), markers[k], color=colour,
                    label=f"trap {j}, k = {k}")
            ax.plot(1 / g.temperature[~fin], np.log10(g["steps simulated"][~fin] / g.chains[~fin]), "^",
                    mfc="none", color=colour)
            f = fits[(fits.model == model) & (fits.trap == j) & (fits.k == k)]
            if len(f) and np.isfinite(f.slope.iloc[0]):
                x = 1 / g.temperature[fin]
                ax.plot(x, (f.slope.iloc[0] * x + np.log(g["median"][fin]).mean()
                            - f.slope.iloc[0] * x.mean()) / math.log(10), "-", color=colour, lw=0.8)
        ax.set(title=model, xlabel="1 / T", ylabel="log10 median escape time (steps)")
        ax.legend(fontsize=7, ncol=2)


def fit_table(fits: pd.DataFrame) -> pd.DataFrame:
    """The per-trap table of the page: margin, fitted slope with its interval, the one-state slope."""
    t = fits.copy()
    t["slope (95% interval)"] = [f"{s:.2f} [{lo:.2f}, {hi:.2f}]" if np.isfinite(s) else "too few medians"
                                 for s, lo, hi in zip(t.slope, t.slope_low, t.slope_high)]
    t["slope / margin"] = t.slope / t.margin
    return t[["model", "trap", "k", "margin", "slope (95% interval)", "slope / margin", "one-state slope",
              "temperatures fitted", "span (decades)", "fit p", "line holds"]]


def _ratio_range(f: pd.DataFrame) -> list[float]:
    r = (f.slope / f.margin).replace([np.inf, -np.inf], np.nan).dropna()
    return [float(r.min()), float(r.max())] if len(r) else []


def headline(cells: pd.DataFrame, fits: pd.DataFrame) -> dict:
    """The counts the page's summary and the findings line both state."""
    fin = cells[np.isfinite(cells["median"])]
    f = fits[np.isfinite(fits.slope)]
    deeper = fits[fits.k > 1]
    return {"models": list(dict.fromkeys(cells.model)), "traps": int(cells.groupby("model").trap.nunique().sum()),
            "cells": len(cells), "finite": len(fin),
            "lowest": float(fin["median"].min()) if len(fin) else math.nan,
            "highest": float(fin["median"].max()) if len(fin) else math.nan,
            "tested": int(f["fit p"].notna().sum()), "holds": int(f["line holds"].sum()),
            "k1_ratio": _ratio_range(f[f.k == 1]), "deeper_ratio": _ratio_range(f[f.k > 1]),
            "deeper_unfitted": int((~np.isfinite(deeper.slope)).sum()), "deeper": len(deeper),
            "k1_against": _against(f[f.k == 1]), "deeper_against": _against(f[f.k > 1])}


def _against(f: pd.DataFrame) -> dict:
    """How many fitted slopes have the margin below, inside or above their 95% interval."""
    return {"fits": len(f), "slope above": int((f.slope_low > f.margin).sum()),
            "inside": int(((f.slope_low <= f.margin) & (f.margin <= f.slope_high)).sum()),
            "slope below": int((f.slope_high < f.margin).sum())}


def summary(h: dict) -> str:
    """The section's findings in words, from :func:`headline` (true on any profile); the findings
    page prints the same words."""
    if not h["finite"]:
        return "No cell's chains reached their median escape within the horizon and move budget."
    parts = [f"Median escape times from {h['traps']} perfect traps run from {h['lowest']:.3g} to {h['highest']:.3g} "
             f"steps ({math.log10(h['highest'] / h['lowest']):.1f} orders of magnitude) over the {h['finite']} of "
             f"{h['cells']} cells whose chains reached their median"]
    parts.append(f"a straight line in 1/T (the Arrhenius law) is consistent with the medians (goodness of fit "
                 f"p >= 0.01) in {h['holds']} of the {h['tested']} fits with three temperatures or more")
    if h["k1_ratio"]:
        lo, hi = h["k1_ratio"]
        parts.append(f"for leaving the trap itself (k = 1) the fitted slope is {lo:.2f} to {hi:.2f} times the margin"
                     + _against_words(h["k1_against"]))
    if h["deeper_ratio"]:
        lo, hi = h["deeper_ratio"]
        a = h["deeper_against"]
        parts.append(f"for leaving its Hamming ball (k > 1), {lo:.2f} to {hi:.2f} times" + _against_words(a)
                     + (": where the slope is above the margin, leaving the ball costs more than the trap's weakest "
                        "site, as when the way out needs a second change against the model's preference (a saddle); "
                        "where the margin lies inside, the first change carries the whole barrier and what follows "
                        "needs no second one" if a["slope above"] and a["inside"] else ""))
    if h["deeper_unfitted"]:
        parts.append(f"{h['deeper_unfitted']} of {h['deeper']} fits at k > 1 have fewer than two medians reached "
                     "within the horizon and the event budget, so the escape times there are lower bounds only")
    return "; ".join(parts) + "."


def _against_words(a: dict) -> str:
    if not a["fits"]:
        return ""
    return (f" (the margin lies inside the slope's 95% interval in {a['inside']} of {a['fits']} fits, below it in "
            f"{a['slope above']}, above it in {a['slope below']})")


def exact_sentence(ex: pd.DataFrame) -> str:
    """The exactness check in words: how many cases fall inside their interval, at which level."""
    if not len(ex):
        return "No exactness case ran: the profile names no enumerated model, temperature and distance."
    deep = int((ex["one-state holding time"] > 2 ** 53).sum())
    text = (f"{int(ex.inside.sum())} of {len(ex)} cases have the exact mean inside the interval of the simulated mean "
            f"(each at level {ex.level.iloc[0]:.5f}, so {1 - (1 - ex.level.iloc[0]) * len(ex):.0%} for all {len(ex)} together), over exact means from "
            f"{ex['exact mean'].min():.3g} to {ex['exact mean'].max():.3g} steps")
    if deep:
        text += (f"; in {deep} of them the trap's own holding time exceeds 2^53 steps, where 1 - P(x, x) computed "
                 "by subtraction loses every digit")
    return text + "."


def cost_sentence(cells: pd.DataFrame, seconds: float) -> str:
    """What the section's cells cost, counted (rows, moves, states), and its wall time (information)."""
    steps, rows = cells["steps simulated"].sum(), cells["rows scored"].sum()
    return (f"The cells simulated {steps:.3g} chain steps in {int(cells.moves.sum()):,} events, of which "
            f"{int(cells['superbasin exits'].sum()):,} superbasin exits; the models scored {int(rows):,} rows for them "
            f"({rows / steps:.2g} rows per simulated step; at most {int(cells['distinct states'].max()):,} distinct "
            f"states and {int(cells['basin states'].max()):,} superbasin states in one cell). "
            f"The section took {seconds / 60:.1f} min ({seconds:.0f} s) on this machine (information only: nothing "
            "depends on it).")


def preprint_sentence(cells: pd.DataFrame) -> str:
    """How this run's escape times compare with the preprint's chain length (10,000 steps)."""
    fin = cells[np.isfinite(cells["median"])]
    if not len(fin):
        return "No escape median was reached here, so none can be set beside the preprint's 10,000-step chains."
    longer = int((fin["median"] > 10_000).sum())
    return (f"Of the {len(fin)} escape medians reached here, {longer} exceed the preprint's chain length of 10,000 "
            f"steps (the longest is {fin['median'].max():.3g} steps): escapes that a 10,000-step chain could not "
            "have timed.")
