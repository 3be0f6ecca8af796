"""Chapter 5's escape section (docs/science.md, chapter 5: escape exponents): escape times from
perfect traps of each model over temperatures spanning many orders of magnitude, an Arrhenius fit
per trap and escape distance (:func:`textglauber.traps.fits.arrhenius`), set beside the exponent
predicted from the model's scores before any chain runs (the quasi-potential V_k,
:mod:`textglauber.traps.quasipotential`), the exactness check on enumerated chains, each trap at the
preprint's temperature, and escape against length (:func:`escape_growth`). The traps come from the
one finder, :func:`textglauber.traps.finder.find_traps`; the measurements themselves are
:mod:`textglauber.traps.escape`'s; the section's words, tables and plot are
:mod:`textglauber.pages.traps`'s, from the counts :func:`escape_counts` takes."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from .. import exact, reported
from ..profile import Escape, EscapeGrowth
from ..seeding import child_seed
from . import escape, quasipotential
from .finder import find_traps
from .fits import arrhenius, coldest, summarize

FAMILY_MISS = 0.01       # the exactness check's family-wise chance of a miss by a correct engine
CHECK_CAP = 4            # the lowered cap of the exactness check's second run of each case with k >= 2
MIN_MEDIANS = 3          # a fit with fewer medians has no line test and enters no range or count
NONTRIVIAL_TOL = 1e-6    # exponent and margin closer than this (relative, float32 scores) are the same number


def nontrivial(exponent: float, margin: float) -> bool:
    """Whether an escape exponent says more than the trap's margin: it differs from the margin by
    more than float tolerance. Where it equals the margin the first move carries the whole cost of
    the way out (V_1 is the margin), and a fit agreeing with it repeats the k = 1 check."""
    return bool(math.isfinite(exponent) and abs(exponent - margin) > NONTRIVIAL_TOL * max(1.0, abs(margin)))



def _cell_row(model, j, ids, text, delta, T, hold, run, new_rows) -> dict:
    steps = float(run.times.sum())                      # steps simulated: each chain to its stop
    return {"model": model, "trap": j, "trap_ids": ids, "text": text, "margin": delta, "temperature": float(T),
            "k": run.k, "one-state holding time": float(hold), **summarize(run.times, run.censored, n_boot=500),
            "moves": int(run.moves.sum()), "superbasin exits": int(run.exits.sum()), "basin states": run.basin_states,
            "rows scored": int(new_rows), "rows asked": int(run.rows), "distinct states": run.distinct_states,
            "steps simulated": steps, "rows per step": new_rows / steps if steps else math.nan}


def _fit_row(model, j, ids, delta, Ts, holds, runs, bar, token) -> dict:
    samples = [(r.times, r.censored) for r in runs]
    fit = arrhenius(Ts, samples, n_boot=500)
    cold = coldest(Ts, samples, m=MIN_MEDIANS, n_boot=500)
    one_state = np.polyfit(1 / np.asarray(Ts), np.log(holds), 1)[0]
    return {"model": model, "trap": j, "trap_ids": ids, "k": runs[0].k, "margin": delta, "slope": fit.slope,
            "slope_low": fit.slope_low, "slope_high": fit.slope_high, "cold slope": cold.slope,
            "cold slope_low": cold.slope_low, "cold slope_high": cold.slope_high, "one-state slope": float(one_state),
            "medians": fit.temperatures, "span (decades)": fit.span_decades, "fit p": fit.chi2_p,
            "line holds": fit.holds(), "predicted_exponent": bar.value, "exponent": bar.exponent,
            "nontrivial": nontrivial(bar.exponent, delta),
            "exponent case": bar.case, "wells": bar.wells, "path": bar.path_text(token),
            "search rows": bar.rows, "search states": bar.states}


def measure_model(scorer, model: str, p: Escape, gen: torch.Generator, decode) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One model's cells (a row per trap, temperature and distance) and fits (a row per trap and
    distance). The traps are chosen by :func:`choose_traps`. Each trap's temperatures put its exact
    one-state holding time at ``temperatures`` log-spaced values over 10^holding_decades; every cell
    runs ``chains`` chains to its distance, the horizon or ``max_moves`` events
    (:func:`textglauber.traps.escape.escape_times`).
    Rows are shared across the cells and searches of a model (:class:`textglauber.traps.escape.RowMemo`).
    The third table holds each trap at the preprint's temperature (:func:`at_preprint_temperature`)."""
    memo, ks = escape.RowMemo(scorer), sorted(p.distances)
    cells, fits = [], []
    for j, (x, bars) in enumerate(choose_traps(memo, p, gen)):
        ids = " ".join(map(str, x.tolist()))
        rows = escape.site_scores(memo, x)
        delta = escape.margin(rows, x, scorer.vocab)
        Ts = escape.temperatures_for(rows, x, scorer.vocab, np.logspace(*p.holding_decades, p.temperatures))
        holds = escape.holding_times(rows, x, scorer.vocab, Ts)
        for k in ks:
            runs = []
            for T, hold in zip(Ts, holds):
                before = memo.rows
                runs.append(escape.escape_times(memo, x, k, T, p.chains, p.horizon, child_seed(gen), max_jumps=p.max_moves))
                cells.append(_cell_row(model, j, ids, decode(x), delta, T, hold, runs[-1], memo.rows - before))
            fits.append(_fit_row(model, j, ids, delta, Ts, holds, runs, bars[k], lambda t: decode(torch.tensor([t]))))
    fits = pd.DataFrame(fits)
    return pd.DataFrame(cells), fits, at_preprint_temperature(memo, model, fits, p, gen)


def model_escape(spec, p: Escape, seed: int, device: str, dtype: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One model's part of the section (:func:`measure_model`), from its own seed: a unit of work that
    runs the same in this process or on a worker (:mod:`textglauber.scheduler`)."""
    from .. import models

    lm, scorer = models.open_mlm(spec, device=device, dtype=dtype)
    return measure_model(scorer, lm.name, p, torch.Generator().manual_seed(int(seed)),
                         lambda x: lm.tokenizer.decode(x.tolist()))


def run_escape(p: Escape, *, device: str, dtype: str, gen: torch.Generator,
               scheduler: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The section's cells, fits and preprint-temperature rows over the models of ``p.models``, one
    unit of work per model (:func:`model_escape`) on ``scheduler`` (:mod:`textglauber.scheduler`; None:
    its setting from the environment, serial by default). Every model's seed is drawn from ``gen``
    before any unit runs, so the scheduler changes no row."""
    from ..scheduler import run_all

    seeds = [child_seed(gen) for _ in p.models]
    units = [(f"traps, escape section, model {spec.name}", model_escape, (spec, p, seed, device, dtype))
             for spec, seed in zip(p.models, seeds)]
    parts = run_all(units, scheduler)
    return tuple(pd.concat([part[j] for part in parts], ignore_index=True) for j in range(3))


def choose_traps(memo, p: Escape, gen: torch.Generator) -> list[tuple[torch.Tensor, dict]]:
    """The section's traps with their barriers (k -> :class:`~textglauber.traps.quasipotential.Barrier`):
    the finder's first max(``candidates``, ``traps``) traps, each with its
    exponent at every distance, the traps with a non-trivial exponent (:func:`nontrivial`) at some
    k > 1 first, in the finder's order, then the others; the first ``traps`` of that order. The rule
    reads no escape time, so it cannot favour an agreement."""
    found = find_traps(memo, p.seq_len, max(p.traps, p.candidates), gen)
    scored = []
    for x in found:
        bars = {k: quasipotential.barrier(memo, x, k) for k in sorted(p.distances)}
        delta = escape.margin(escape.site_scores(memo, x), x, memo.vocab)
        scored.append((not any(nontrivial(b.exponent, delta) for k, b in bars.items() if k > 1), x, bars))
    scored.sort(key=lambda t: t[0])                 # stable: the finder's order within each group
    return [(x, bars) for _, x, bars in scored[:p.traps]]


def at_preprint_temperature(scorer, model: str, fits: pd.DataFrame, p: Escape, gen: torch.Generator) -> pd.DataFrame:
    """Each trap of ``fits`` at the preprint's temperature (:data:`textglauber.reported.TRAPS`): its
    exact one-state holding time there, and the median escape time to distance 2 from ``chains``
    chains, where they reach it within the horizon and the event budget."""
    T, out = reported.TRAPS["temperature"], []
    if not len(fits):
        return pd.DataFrame()
    for (j, ids), f in fits.groupby(["trap", "trap_ids"], sort=True):
        x = torch.tensor([int(t) for t in ids.split()])
        hold = escape.holding_times(escape.site_scores(scorer, x), x, scorer.vocab, [T])[0]
        run = escape.escape_times(scorer, x, 2, T, p.chains, p.horizon, child_seed(gen), max_jumps=p.max_moves)
        med = summarize(run.times, run.censored, n_boot=500)
        out.append({"model": model, "trap": j, "trap_ids": ids, "margin": float(f.margin.iloc[0]), "temperature": T,
                    "one-state holding time": float(hold), "k": 2, "median": med["median"],
                    "median_low": med["median_low"], "median_high": med["median_high"], "censored": med["censored"]})
    return pd.DataFrame(out)


def escape_growth(scorer, model: str, g: EscapeGrowth, gen: torch.Generator, *, horizon: float,
                  max_moves: int) -> pd.DataFrame:
    """Escape against length, decided by the scores: at each of ``g.lengths``, the deepest of up to
    ``g.traps`` perfect traps the finder reaches (the largest margin) and its V_k at k = ceil(n/4)
    (:func:`textglauber.traps.quasipotential.barrier`, at most ``g.max_states`` states opened); at the
    ``g.check_lengths``, ``g.chains`` chains at ``g.temperature`` to the same distance (the escape
    section's ``horizon`` and event budget ``max_moves``), to test the prediction's growth against
    measured escape times."""
    memo, out = escape.RowMemo(scorer), []
    for n in g.lengths:
        k = math.ceil(n / 4)
        row = {"model": model, "n": n, "k": k}
        traps = find_traps(memo, n, g.traps, gen)
        if not traps:
            out.append({**row, "exponent case": "no trap"})
            continue
        margins = [escape.margin(escape.site_scores(memo, x), x, scorer.vocab) for x in traps]
        x = traps[int(np.argmax(margins))]
        bar = quasipotential.barrier(memo, x, k, max_states=g.max_states)
        row.update({"trap_ids": " ".join(map(str, x.tolist())), "margin": max(margins), "traps found": len(traps),
                    "predicted_exponent": bar.value, "exponent": bar.exponent, "exponent case": bar.case,
                    "rows_scored": bar.rows, "search states": bar.states, "temperature": g.temperature})
        if n in g.check_lengths:
            run = escape.escape_times(memo, x, k, g.temperature, g.chains, horizon, child_seed(gen), max_jumps=max_moves)
            med = summarize(run.times, run.censored, n_boot=500)
            row.update({key: med[key] for key in ("chains", "censored", "median", "median_low", "median_high")})
        out.append(row)
    return pd.DataFrame(out)


def exactness(tables: list[tuple[str, object]], p: Escape, gen: torch.Generator) -> pd.DataFrame:
    """The exactness cases (:func:`exact_cases`) of each enumerated model ``(name, TabulatedScorer)``,
    each run and compared with its exact law (mean and whole distribution,
    :func:`textglauber.traps.escape.check_against_exact`) at one Bonferroni level: 99% for the family, so a
    correct engine fails the check on one build in a hundred at most (two tests a case). Every case with k >= 2 runs
    twice: with the superbasin's usual cap, and with the cap lowered to :data:`CHECK_CAP` states so
    that the code which stops S from growing is run too."""
    cases = [(name, tab, case, cap) for name, tab in tables for case in exact_cases(tab, p)
             for cap in ([escape.BASIN_CAP, CHECK_CAP] if case[2] >= 2 else [escape.BASIN_CAP])]
    level = 1 - FAMILY_MISS / max(1, 2 * len(cases))          # two tests a case: the mean and the distribution
    rows = []
    for name, tab, (T, x, k, chain, want), cap in cases:
        rows.append({"model": name, **escape.check_against_exact(tab, chain, x, k, T, p.exact_chains, child_seed(gen),
                                                                 level, max_jumps=p.exact_max_moves, want=want,
                                                                 basin_cap=cap)})
    return pd.DataFrame(rows)


def exact_cases(table_scorer, p: Escape):
    """(T, deepest state, k, chain, exact escape) for each exact temperature and distance up to n. The
    exact expected number of moves may be astronomical: the superbasin makes each case a few events."""
    for T in p.exact_temperatures:
        chain = exact.glauber_kernel(table_scorer, table_scorer.n, T)
        x = int(exact.deepest_traps(chain.kernel, 1)[0])
        for k in p.exact_distances:
            if k <= table_scorer.n:
                yield T, x, k, chain, escape.exact_escape(chain, x, k)


# ----------------------------------------------------------------------------- the counts the page states
def _fitted(fits: pd.DataFrame) -> pd.DataFrame:
    return fits[(fits.medians >= MIN_MEDIANS) & np.isfinite(fits.slope)]


def _ratio_range(f: pd.DataFrame) -> list[float]:
    return _range(f.slope / f.exponent)


def _range(r: pd.Series) -> list[float]:
    r = r.replace([np.inf, -np.inf], np.nan).dropna()
    return [float(r.min()), float(r.max())] if len(r) else []


def nontrivial_column(fits: pd.DataFrame) -> pd.Series:
    """The fits' ``nontrivial`` column, computed from exponent and margin where a table predates it."""
    if "nontrivial" in fits:
        return fits["nontrivial"].astype(bool)
    return pd.Series([nontrivial(e, m) for e, m in zip(fits.exponent, fits.margin)], index=fits.index, dtype=bool)


def escape_counts(cells: pd.DataFrame, fits: pd.DataFrame) -> dict:
    """The counts the page's summary (:func:`textglauber.pages.traps.summary`) and the findings line
    both state. Only fits with at least :data:`MIN_MEDIANS` medians enter a range or a count; the
    others are counted as too few. Fits with k > 1 are counted apart by whether their exponent is
    non-trivial (:func:`nontrivial`): only those test more than the margin."""
    fin = cells[np.isfinite(cells["median"])]
    f = _fitted(fits).assign(nontrivial=lambda d: nontrivial_column(d))
    deep = f[f.k > 1]
    new, same = deep[deep.nontrivial], deep[~deep.nontrivial]
    models = list(dict.fromkeys(cells.model))
    return {"models": models, "traps": int(cells.groupby("model").trap.nunique().sum()),
            "cells": len(cells), "finite": len(fin),
            "lowest": float(fin["median"].min()) if len(fin) else math.nan,
            "highest": float(fin["median"].max()) if len(fin) else math.nan,
            "fits": len(fits), "too_few": int(len(fits) - len(f)),
            "tested": int(f["fit p"].notna().sum()), "holds": int(f["line holds"].sum()),
            "k1_ratio": _ratio_range(f[f.k == 1]), "deeper_ratio": _ratio_range(new),
            "one_state_ratio": _range(fits[fits.k == 1]["one-state slope"] / fits[fits.k == 1].margin),
            "k1_against": _against(f[f.k == 1]), "deeper_against": _against(new),
            "trivial": len(same), "trivial_against": _against(same),
            "nontrivial_by_model": {m: int((new.model == m).sum()) for m in models},
            "several_wells": int((new["exponent case"] == "several wells").sum()),
            "unfinished": int((~fits["exponent case"].isin(["one well", "several wells"])).sum())}


def _against(f: pd.DataFrame) -> dict:
    """How many fitted slopes have the predicted exponent below, inside or above their 95% interval;
    of those that miss it, how many hold it in the interval of the fit to the coldest medians alone
    (``cold inside``)."""
    f = f[np.isfinite(f.exponent)]
    inside = (f.slope_low <= f.exponent) & (f.exponent <= f.slope_high)
    out = f[~inside]
    cold = (out["cold slope_low"] <= out.exponent) & (out.exponent <= out["cold slope_high"])
    return {"fits": len(f), "slope above": int((f.slope_low > f.exponent).sum()), "inside": int(inside.sum()),
            "slope below": int((f.slope_high < f.exponent).sum()), "cold inside": int(cold.sum())}
