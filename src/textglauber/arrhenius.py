"""Chapter 5's Arrhenius section: escape times from perfect traps of each model over temperatures
spanning many orders of magnitude, an Arrhenius fit per trap and escape distance, set beside the
exponent predicted from the model's scores before any chain runs (the quasi-potential V_k,
:mod:`textglauber.quasipotential`), the exactness check on enumerated chains, and each trap at the
preprint's temperature (the measurements themselves are :mod:`textglauber.escape`'s)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from . import escape, exact, quasipotential, reported, survival, trapsearch

FAMILY_MISS = 0.01       # the exactness check's family-wise chance of a miss by a correct engine
CHECK_CAP = 4            # the lowered cap of the exactness check's second run of each case with k >= 2
MIN_MEDIANS = 3          # a fit with fewer medians has no line test and enters no range or count


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


def _cell_row(model, j, ids, text, delta, T, hold, run, new_rows) -> dict:
    steps = float(run.times.sum())                      # steps simulated: each chain to its stop
    return {"model": model, "trap": j, "trap_ids": ids, "text": text, "margin": delta, "temperature": float(T),
            "k": run.k, "one-state holding time": float(hold), **survival.summarize(run.times, run.censored, n_boot=500),
            "moves": int(run.moves.sum()), "superbasin exits": int(run.exits.sum()), "basin states": run.basin_states,
            "rows scored": int(new_rows), "rows asked": int(run.rows), "distinct states": run.distinct_states,
            "steps simulated": steps, "rows per step": new_rows / steps if steps else math.nan}


def _fit_row(model, j, ids, delta, Ts, holds, runs, bar, token) -> dict:
    fit = survival.arrhenius(Ts, [(r.times, r.censored) for r in runs], n_boot=500)
    one_state = np.polyfit(1 / np.asarray(Ts), np.log(holds), 1)[0]
    return {"model": model, "trap": j, "trap_ids": ids, "k": runs[0].k, "margin": delta, "slope": fit.slope,
            "slope_low": fit.slope_low, "slope_high": fit.slope_high, "one-state slope": float(one_state),
            "medians": fit.temperatures, "span (decades)": fit.span_decades, "fit p": fit.chi2_p,
            "line holds": fit.holds(), "predicted_exponent": bar.value, "exponent": bar.exponent,
            "exponent case": bar.case, "wells": bar.wells, "path": bar.path_text(token),
            "search rows": bar.rows, "search states": bar.states}


def measure_model(scorer, model: str, p: dict, gen: torch.Generator, decode) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One model's cells (a row per trap, temperature and distance) and fits (a row per trap and
    distance). Each trap's temperatures put its exact one-state holding time at ``temperatures``
    log-spaced values over 10^holding_decades; every cell runs ``chains`` chains to its distance,
    the horizon or ``max_moves`` events (:func:`textglauber.escape.escape_times`). Before its chains
    run, each trap and distance gets its predicted exponent (:func:`textglauber.quasipotential.barrier`).
    Rows are shared across the cells and searches of a model (:class:`textglauber.escape.RowMemo`).
    The third table holds each trap at the preprint's temperature (:func:`at_preprint_temperature`)."""
    memo, ks = escape.RowMemo(scorer), sorted(p["distances"])
    cells, fits = [], []
    for j, x in enumerate(find_traps(memo, p["seq_len"], p["traps"], gen)):
        ids = " ".join(map(str, x.tolist()))
        rows = escape.site_scores(memo, x)
        delta = escape.margin(rows, x, scorer.vocab)
        Ts = escape.temperatures_for(rows, x, scorer.vocab, np.logspace(*p["holding_decades"], p["temperatures"]))
        holds = escape.holding_times(rows, x, scorer.vocab, Ts)
        for k in ks:
            bar = quasipotential.barrier(memo, x, k)
            runs = []
            for T, hold in zip(Ts, holds):
                before = memo.rows
                runs.append(escape.escape_times(memo, x, k, T, p["chains"], p["horizon"], _seed(gen),
                                                max_jumps=p["max_moves"]))
                cells.append(_cell_row(model, j, ids, decode(x), delta, T, hold, runs[-1], memo.rows - before))
            fits.append(_fit_row(model, j, ids, delta, Ts, holds, runs, bar, lambda t: decode(torch.tensor([t]))))
    fits = pd.DataFrame(fits)
    return pd.DataFrame(cells), fits, at_preprint_temperature(memo, model, fits, p, gen)


def at_preprint_temperature(scorer, model: str, fits: pd.DataFrame, p: dict, gen: torch.Generator) -> pd.DataFrame:
    """Each trap of ``fits`` at the preprint's temperature (:data:`textglauber.reported.TRAPS`): its
    exact one-state holding time there, and the median escape time to distance 2 from ``chains``
    chains, where they reach it within the horizon and the event budget."""
    T, out = reported.TRAPS["temperature"], []
    if not len(fits):
        return pd.DataFrame()
    for (j, ids), f in fits.groupby(["trap", "trap_ids"], sort=True):
        x = torch.tensor([int(t) for t in ids.split()])
        hold = escape.holding_times(escape.site_scores(scorer, x), x, scorer.vocab, [T])[0]
        run = escape.escape_times(scorer, x, 2, T, p["chains"], p["horizon"], _seed(gen), max_jumps=p["max_moves"])
        med = survival.summarize(run.times, run.censored, n_boot=500)
        out.append({"model": model, "trap": j, "trap_ids": ids, "margin": float(f.margin.iloc[0]), "temperature": T,
                    "one-state holding time": float(hold), "k": 2, "median": med["median"],
                    "median_low": med["median_low"], "median_high": med["median_high"], "censored": med["censored"]})
    return pd.DataFrame(out)


def growth(scorer, model: str, g: dict, p: dict, gen: torch.Generator) -> pd.DataFrame:
    """Escape against length, decided by the scores: at each of ``g["lengths"]``, the deepest of up to
    ``g["traps"]`` perfect traps found (the largest margin) and its V_k at k = ceil(n/4)
    (:func:`textglauber.quasipotential.barrier`, at most ``g["max_states"]`` states opened); at the
    ``check_lengths``, ``chains`` chains at ``temperature`` to the same distance (``p``'s horizon and
    event budget), to test the prediction's growth against measured escape times."""
    memo, out = escape.RowMemo(scorer), []
    for n in g["lengths"]:
        k = math.ceil(n / 4)
        row = {"model": model, "n": n, "k": k}
        traps = find_traps(memo, n, g["traps"], gen)
        if not traps:
            out.append({**row, "exponent case": "no trap"})
            continue
        margins = [escape.margin(escape.site_scores(memo, x), x, scorer.vocab) for x in traps]
        x = traps[int(np.argmax(margins))]
        bar = quasipotential.barrier(memo, x, k, max_states=g["max_states"])
        row.update({"trap_ids": " ".join(map(str, x.tolist())), "margin": max(margins), "traps found": len(traps),
                    "predicted_exponent": bar.value, "exponent": bar.exponent, "exponent case": bar.case,
                    "rows_scored": bar.rows, "search states": bar.states, "temperature": g["temperature"]})
        if n in g["check_lengths"]:
            run = escape.escape_times(memo, x, k, g["temperature"], g["chains"], p["horizon"], _seed(gen),
                                      max_jumps=p["max_moves"])
            med = survival.summarize(run.times, run.censored, n_boot=500)
            row.update({key: med[key] for key in ("chains", "censored", "median", "median_low", "median_high")})
        out.append(row)
    return pd.DataFrame(out)


def exactness(tables: list[tuple[str, object]], p: dict, gen: torch.Generator) -> pd.DataFrame:
    """The exactness cases (:func:`exact_cases`) of each enumerated model ``(name, TabulatedScorer)``,
    each run and compared with its exact law (mean and whole distribution,
    :func:`textglauber.escape.check_against_exact`) at one Bonferroni level: 99% for the family, so a
    correct engine fails the check on one build in a hundred at most (two tests a case). Every case with k >= 2 runs
    twice: with the superbasin's usual cap, and with the cap lowered to :data:`CHECK_CAP` states so
    that the code which stops S from growing is run too."""
    cases = [(name, tab, case, cap) for name, tab in tables for case in exact_cases(tab, p)
             for cap in ([escape.BASIN_CAP, CHECK_CAP] if case[2] >= 2 else [escape.BASIN_CAP])]
    level = 1 - FAMILY_MISS / max(1, 2 * len(cases))          # two tests a case: the mean and the distribution
    rows = []
    for name, tab, (T, x, k, chain, want), cap in cases:
        rows.append({"model": name, **escape.check_against_exact(tab, chain, x, k, T, p["exact_chains"], _seed(gen),
                                                                 level, max_jumps=p["exact_max_moves"], want=want,
                                                                 basin_cap=cap)})
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
            if len(f) and np.isfinite(f.slope.iloc[0]) and f.medians.iloc[0] >= MIN_MEDIANS:
                x = 1 / g.temperature[fin]
                ax.plot(x, (f.slope.iloc[0] * x + np.log(g["median"][fin]).mean()
                            - f.slope.iloc[0] * x.mean()) / math.log(10), "-", color=colour, lw=0.8)
        ax.set(title=model, xlabel="1 / T", ylabel="log10 median escape time (steps)")
        ax.legend(fontsize=7, ncol=2)


def fit_table(fits: pd.DataFrame) -> pd.DataFrame:
    """The per-trap table of the page: margin, the predicted exponent (V_k, and the wells' value where
    the ball holds another well), the fitted slope with its interval, or "too few" below
    :data:`MIN_MEDIANS` medians, and the cheapest path out."""
    t = fits.copy()
    ok = t.medians >= MIN_MEDIANS
    t["slope (95% interval)"] = [f"{s:.2f} [{lo:.2f}, {hi:.2f}]" if good else f"too few ({m} medians)"
                                 for s, lo, hi, m, good in zip(t.slope, t.slope_low, t.slope_high, t.medians, ok)]
    t["slope / predicted"] = (t.slope / t.exponent).where(ok)
    t["V_k"] = t.predicted_exponent
    return t[["model", "trap", "k", "margin", "V_k", "exponent case", "exponent", "slope (95% interval)",
              "slope / predicted", "one-state slope", "medians", "fit p", "line holds", "path"]]


def _fitted(fits: pd.DataFrame) -> pd.DataFrame:
    return fits[(fits.medians >= MIN_MEDIANS) & np.isfinite(fits.slope)]


def _ratio_range(f: pd.DataFrame) -> list[float]:
    return _range(f.slope / f.exponent)


def _range(r: pd.Series) -> list[float]:
    r = r.replace([np.inf, -np.inf], np.nan).dropna()
    return [float(r.min()), float(r.max())] if len(r) else []


def headline(cells: pd.DataFrame, fits: pd.DataFrame) -> dict:
    """The counts the page's summary and the findings line both state. Only fits with at least
    :data:`MIN_MEDIANS` medians enter a range or a count; the others are counted as too few."""
    fin = cells[np.isfinite(cells["median"])]
    f = _fitted(fits)
    return {"models": list(dict.fromkeys(cells.model)), "traps": int(cells.groupby("model").trap.nunique().sum()),
            "cells": len(cells), "finite": len(fin),
            "lowest": float(fin["median"].min()) if len(fin) else math.nan,
            "highest": float(fin["median"].max()) if len(fin) else math.nan,
            "fits": len(fits), "too_few": int(len(fits) - len(f)),
            "tested": int(f["fit p"].notna().sum()), "holds": int(f["line holds"].sum()),
            "k1_ratio": _ratio_range(f[f.k == 1]), "deeper_ratio": _ratio_range(f[f.k > 1]),
            "one_state_ratio": _range(fits[fits.k == 1]["one-state slope"] / fits[fits.k == 1].margin),
            "k1_against": _against(f[f.k == 1]), "deeper_against": _against(f[f.k > 1]),
            "several_wells": int((f[f.k > 1]["exponent case"] == "several wells").sum()),
            "unfinished": int((~fits["exponent case"].isin(["one well", "several wells"])).sum())}


def _against(f: pd.DataFrame) -> dict:
    """How many fitted slopes have the predicted exponent below, inside or above their 95% interval."""
    f = f[np.isfinite(f.exponent)]
    return {"fits": len(f), "slope above": int((f.slope_low > f.exponent).sum()),
            "inside": int(((f.slope_low <= f.exponent) & (f.exponent <= f.slope_high)).sum()),
            "slope below": int((f.slope_high < f.exponent).sum())}


def summary(h: dict) -> str:
    """The section's findings in words, from :func:`headline` (true on any profile); the findings
    page prints the same words."""
    if not h["finite"]:
        return "No cell's chains reached their median escape within the horizon and move budget."
    parts = [f"Median escape times from {h['traps']} perfect traps run from {h['lowest']:.3g} to {h['highest']:.3g} "
             f"steps ({math.log10(h['highest'] / h['lowest']):.1f} orders of magnitude) over the {h['finite']} of "
             f"{h['cells']} cells whose chains reached their median"]
    parts.append(f"of the {h['fits']} fits, {h['too_few']} have fewer than {MIN_MEDIANS} medians and enter no count "
                 f"below; a straight line in 1/T (the Arrhenius law) is consistent with the medians (goodness of fit "
                 f"p >= 0.01) in {h['holds']} of the other {h['tested']}")
    if h["k1_ratio"]:
        lo, hi = h["k1_ratio"]
        parts.append(f"for leaving the trap itself (k = 1) the slope is {lo:.2f} to {hi:.2f} times the margin"
                     + _against_words(h["k1_against"], "the margin")
                     + ", which checks the sampler and says nothing new about the model: that escape time is "
                       "geometric with the one-state holding time h(T) as its mean, the temperatures were set by "
                       "inverting that same h(T), and the slope of log h against 1/T tends to the smallest score "
                       "gap, the margin")
    if h["one_state_ratio"]:
        lo, hi = h["one_state_ratio"]
        parts.append(f"over the same temperatures the exact one-state holding time's own slope is {lo:.3f} to "
                     f"{hi:.3f} times the margin (it tends to 1 as T falls), "
                     + ("so these temperatures are not yet asymptotic: at k = 1 finite temperature alone puts the "
                        f"slope up to {100 * (hi - 1):.0f}% above its limit" if hi > 1.005 else
                        "so at these temperatures the slope is already close to its limit"))
    if h["deeper_ratio"]:
        lo, hi = h["deeper_ratio"]
        parts.append(f"for leaving the Hamming ball (k > 1) the prediction is the least total cost of a path out, "
                     f"V_k, computed from the model's scores before any chain ran ({h['several_wells']} of these fits "
                     f"have a second well on the way, where the prediction is the wells' W-graph value instead); the "
                     f"slope is {lo:.2f} to {hi:.2f} times the prediction"
                     + _against_words(h["deeper_against"], "the prediction"))
    if h["unfinished"]:
        parts.append(f"in {h['unfinished']} fits no prediction is compared: the path search ran out of its budget "
                     "(V_k there is only a lower bound) or met more wells than the W-graph formula is run on")
    return "; ".join(parts) + "."


def _against_words(a: dict, what: str) -> str:
    if not a["fits"]:
        return ""
    return (f" ({what} lies inside the slope's 95% interval in {a['inside']} of {a['fits']} fits, below it in "
            f"{a['slope above']}, above it in {a['slope below']})")


def exact_sentence(ex: pd.DataFrame) -> str:
    """The exactness check in words: how many cases pass (mean and distribution), at which level,
    and how many ran with the superbasin filled to its cap."""
    if not len(ex):
        return "No exactness case ran: the profile names no enumerated model, temperature and distance."
    deep = int((ex["one-state holding time"] > 2 ** 53).sum())
    capped = ex[ex["basin cap"] < ex["basin cap"].max()]
    text = (f"{int(ex.inside.sum())} of {len(ex)} cases pass: the exact mean lies inside the interval of the "
            f"simulated mean in {int(ex['mean inside'].sum())}, and the chi-square test of the whole distribution "
            f"against the exact law (bins at its deciles) passes in {int(ex['distribution passes'].sum())} (each at "
            f"level {ex.level.iloc[0]:.5f}, so {1 - (1 - ex.level.iloc[0]) * 2 * len(ex):.0%} for all {2 * len(ex)} tests "
            "together), "
            f"over exact means from {ex['exact mean'].min():.3g} to {ex['exact mean'].max():.3g} steps and exact "
            f"medians from {ex['exact median'].min():.3g} to {ex['exact median'].max():.3g}")
    if len(capped):
        text += (f"; {len(capped)} cases ran again with the superbasin capped at {int(capped['basin cap'].iloc[0])} "
                 f"states, which it reached in {int(capped['cap reached'].sum())} of them")
    if deep:
        text += (f"; in {deep} of them the trap's own holding time exceeds 2^53 steps, where 1 - P(x, x) computed "
                 "by subtraction loses every digit")
    return text + "."


def growth_sentence(gr: pd.DataFrame) -> str:
    """Escape against length in words: per model, V_k at k = ceil(n/4) over the lengths (lower bounds
    named), the rows the searches scored, and the measured medians against the prediction's growth."""
    if not len(gr):
        return "No model ran the growth section."
    parts = []
    for model, g in gr.groupby("model", sort=False):
        done = g[g["exponent case"].isin(["one well", "several wells"])]   # exponents known
        text = f"{model}: " + ", ".join(
            f"n = {r.n}: {'at least ' if r['exponent case'] == 'unfinished' else ''}{r.predicted_exponent:.3g}"
            for _, r in g.iterrows() if r["exponent case"] != "no trap")
        text += (f" (V_k at k = n/4 rounded up; the searches scored {int(g.rows_scored.min())} to "
                 f"{int(g.rows_scored.max())} rows)") if "rows_scored" in g and g.rows_scored.notna().any() else ""
        if len(done) >= 2:
            a, b = done.iloc[0], done.iloc[-1]
            text += (f"; from n = {a.n} to {b.n} the exponent goes from {a.exponent:.3g} to {b.exponent:.3g}, "
                     f"a factor of {b.exponent / a.exponent:.2f} against {b.n / a.n:.1f} in n")
        checked = g[np.isfinite(g.get("median", pd.Series(dtype=float)))] if "median" in g else g.iloc[:0]
        if len(checked) >= 2:
            a, b = checked.iloc[0], checked.iloc[-1]
            T = a.temperature
            text += (f"; at T = {T:g} the median escape time goes from {a['median']:.3g} steps (n = {a.n}) to "
                     f"{b['median']:.3g} (n = {b.n}): a change of {math.log(b['median'] / a['median']):.2f} in its "
                     f"log, where the exponents predict {(b.exponent - a.exponent) / T:.2f} up to prefactors")
        parts.append(text)
    return "V_k against length. " + "; ".join(parts) + "."


def cost_sentence(cells: pd.DataFrame, seconds: float) -> str:
    """What the section's cells cost, counted (rows, moves, states), and its wall time (information)."""
    steps, rows = cells["steps simulated"].sum(), cells["rows scored"].sum()
    return (f"The cells simulated {steps:.3g} chain steps in {int(cells.moves.sum()):,} events, of which "
            f"{int(cells['superbasin exits'].sum()):,} superbasin exits; the models scored {int(rows):,} rows for them "
            f"({rows / steps:.2g} rows per simulated step; at most {int(cells['distinct states'].max()):,} distinct "
            f"states and {int(cells['basin states'].max()):,} superbasin states in one cell). "
            f"The section took {seconds / 60:.1f} min ({seconds:.0f} s) on this machine (information only: nothing "
            "depends on it).")


def preprint_sentence(cells: pd.DataFrame, preprint: pd.DataFrame) -> str:
    """The escape times set beside the preprint's 10,000-step chains, without the design's help: the
    temperatures above were chosen per trap to put the one-state holding time at 10^3 steps and
    more, so medians beyond 10,000 steps follow from that choice. What compares is each trap at the
    preprint's temperature (:func:`at_preprint_temperature`)."""
    T, steps = reported.TRAPS["temperature"], reported.TRAPS["steps"]
    fin = cells[np.isfinite(cells["median"])]
    text = (f"The temperatures above were set per trap to put its one-state holding time at 10^3 steps and more "
            f"(down to T = {cells.temperature.min():.3g}), so that {int((fin['median'] > steps).sum())} of the "
            f"{len(fin)} medians exceed the preprint's {steps:,}-step chains follows from the design, not from the "
            "model. ") if len(cells) else ""
    if not len(preprint):
        return text + f"No trap was run at the preprint's temperature T = {T:g}."
    reached = preprint[np.isfinite(preprint["median"])]
    longer = int((preprint["one-state holding time"] > steps).sum())
    text += (f"At the preprint's temperature, T = {T:g}, the {len(preprint)} traps hold their own state for "
             f"{preprint['one-state holding time'].min():.3g} to {preprint['one-state holding time'].max():.3g} "
             f"steps ({longer} beyond {steps:,})")
    if len(reached):
        text += (f", and the median escape to distance 2 is {reached['median'].min():.3g} to "
                 f"{reached['median'].max():.3g} steps in the {len(reached)} traps whose chains reached it")
    if len(reached) < len(preprint):
        text += f"; in {len(preprint) - len(reached)} the chains did not reach it within the horizon and event budget"
    return text + "."
