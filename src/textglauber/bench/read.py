"""The benchmark's tables read back, for the cost appendix (``book/90_cost.ipynb``) and its
headline (:func:`textglauber.findings.cost`): the throughput tables combined per device and the
targets they decide, the finished metastable tables, and what each chapter's work would take."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..params import chapter_parameters, load_profile
from .throughput import SPEEDUP_COLUMNS, flops_per_step, with_speedups


def read_tables(folder) -> dict[str, pd.DataFrame]:
    """Every finished benchmark table under ``folder`` (partial files of stopped runs are left
    out), combined per device. A cell (device, model, n, batch) is taken whole from the newest
    file that measured it, so that no ratio compares variants timed in different runs. Each row
    keeps the name of its file in ``run``."""
    files = sorted((p for p in Path(folder).glob("bench-*.csv") if not p.name.endswith(".partial.csv")),
                   key=lambda p: p.stat().st_mtime)
    if not files:
        return {}
    df = pd.concat([pd.read_csv(p).assign(run=p.stem, _order=k) for k, p in enumerate(files)], ignore_index=True)
    cell = ["device", "model", "n", "batch"]
    df = df[df._order == df.groupby(cell)._order.transform("max")].drop(columns="_order")
    df = df.sort_values(cell + ["variant"], kind="stable")
    return {dev: with_speedups(g.drop(columns=[c for _, c in SPEEDUP_COLUMNS if c in g])).reset_index(drop=True)
            for dev, g in df.groupby("device")}


def read_metastable(folder) -> list[tuple[Path, pd.DataFrame]]:
    """Every finished metastable table under ``folder`` (partial files of stopped runs are left
    out), by file name: (path, table) pairs."""
    return [(p, pd.read_csv(p)) for p in sorted(Path(folder).glob("metastable-*.csv"))
            if not p.name.endswith(".partial.csv")]


def targets(df: pd.DataFrame) -> pd.DataFrame:
    """The benchmark issue's targets beside what one device's table measured (a target whose
    cells were not measured has no row). Speedups are the engine's rate over the other variant's
    in the same cell; the compiled engine is reported next to the eager one where it was run.
    ``q25``/``q75`` are the quartiles of the per-round ratios in the cell that decided the target
    (NaN for tables written before they were recorded); ``met`` reads the median."""
    rows = []
    gpu = str(df.device.iloc[0]).startswith("cuda")
    # the bound target: (n, least batch, fraction needed, label) on this kind of device
    bn, bb, needed_bound, bound_label = ((128, 512, 0.5, "fraction of the bf16 bound, n = 128, batch >= 512 (least cell)")
                                         if gpu else (20, 64, 0.8, "fraction of the bound, n = 20, batch >= 64 (least cell)"))

    def spread(row, col):                   # the picked cell's per-round quartiles (NaN for older tables)
        return {"q25": row.get(col + "_q25", np.nan), "q75": row.get(col + "_q75", np.nan)}

    for model, m in df.groupby("model"):
        for eng, col in SPEEDUP_COLUMNS:
            if eng not in set(m.variant):
                continue
            e = m[m.variant == eng].set_index(["n", "batch"]).chain_steps_per_s
            cells = m[(m.variant == eng) & (m.n == bn) & (m.batch >= bb)]
            if model.startswith("bert-base") and len(cells):
                least = cells.loc[cells.fraction_of_bound.idxmin()]
                rows.append({"target": bound_label, "model": model, "engine": eng, "measured": least.fraction_of_bound,
                             **spread(least, "fraction"), "needed": needed_bound, "cells": len(cells)})
            if gpu:
                continue
            for n, g in m.groupby("n"):
                for other, label, pick, needed in (("fill_mask_loop", f"x the fill-mask loop, n = {n} (best batch)", np.argmax, 4.0),
                                                   ("shared_site_full", f"x shared-site full logits, n = {n} (every batch)",
                                                    np.argmin, 1.0)):
                    o = g[g.variant == other].set_index("batch")
                    both = [b for b in o.index if (n, b) in e.index]
                    if both:
                        ratios = [e[(n, b)] / o.chain_steps_per_s[b] for b in both]
                        k = int(pick(ratios))
                        rows.append({"target": label, "model": model, "engine": eng, "measured": float(ratios[k]),
                                     **spread(o.loc[both[k]], col), "needed": needed, "cells": len(ratios)})
    out = pd.DataFrame(rows)
    if len(out):
        out["met"] = out.measured >= out.needed
    return out


def workload(profile: str) -> pd.DataFrame:
    """Masked rows (one row = one chain-step's worth of encoder work at that length) that each
    chapter of a profile asks for, from its parameters. Upper bounds where runs can stop early
    (coupled pairs that meet leave the batch)."""
    spec = load_profile(profile)
    rows = []
    for ch in spec["chapters"]:
        p = chapter_parameters(profile, ch)
        if ch == "incompatibility":
            k = len(p["mlms"])
            work, n = 6 * p["n_rectangles"] * k + 2 * p.get("grid_k", 0) * p.get("n_grids", 0) * k, p["seq_len"]
        elif ch == "bounds":
            n, q = p["seq_len"], 1 + p["top_k"] + p["extra"]
            work = len(p["mlms"]) * (p["n_contexts"] * n * (q * (n - 1) + 1) + p["drift_states"] * n)
        elif ch == "crossover":
            L = p["lengths"]
            n = int(np.mean(L))
            CL = p.get("coupling_lengths") or L                 # budgets in sweeps: sweeps x n steps per length
            work = (p["trials"] * p["sweeps"] * sum(L) * len(p["drift_temperatures"])
                    + 2 * p["pairs"] * p["budget_sweeps"] * sum(CL) * len(p["coupling_temperatures"]))
        elif ch == "basins":
            n = p["seq_len"]
            chains = len(p.get("seed_topics", range(5))) * p["seeds_per_topic"] * p["chains_per_seed"]
            chains += p.get("null_chains", 0)                   # the null model's chains, per model
            work = len(p["mlms"]) * chains * p["steps"] + p["prefix_chains"] * p["steps"]
        elif ch == "traps":
            n, work = p["seq_len"], p["chains"] * p["steps"]
        else:
            continue
        rows.append({"profile": profile, "chapter": ch, "masked rows": int(work), "typical n": int(n)})
    return pd.DataFrame(rows)


def projected_hours(work: pd.DataFrame, df: pd.DataFrame, variant: str = "engine") -> pd.Series:
    """Hours each row of :func:`workload` would take on the BERT-base shape: the engine's
    measured rate at the measured length nearest the chapter's typical n (at its fastest batch
    size there), rescaled by the FLOPs ratio of the two lengths."""
    from transformers import BertConfig

    e = df[(df.variant == variant) & df.model.str.startswith("bert-base")]
    if not len(e):
        return pd.Series(np.nan, index=work.index)
    cfg = BertConfig()
    best = e.groupby("n").chain_steps_per_s.max()          # the fastest batch at each measured n
    hours = []
    for rows_, n in zip(work["masked rows"], work["typical n"]):
        n0 = min(best.index, key=lambda v: abs(v - n))
        rate = best[n0] * flops_per_step(cfg, n0 + 2, cfg.vocab_size) / flops_per_step(cfg, n + 2, cfg.vocab_size)
        hours.append(rows_ / rate / 3600)
    return pd.Series(hours, index=work.index)
