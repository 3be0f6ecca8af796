"""The benchmark's tables read back, for the cost appendix (``book/90_cost.ipynb``) and its
headline (:func:`textglauber.pages.cost.headline`): the runs' records, the throughput tables
combined per device, the engine's table and the targets they decide, the finished metastable
tables with their speed-ups, trap depths and coverage of the full grid, and what each chapter's
work would take."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..profile import chapter_parameters, load_profile
from ..tables import number
from .metastable import METASTABLE_MODELS, METASTABLE_TEMPERATURES
from .throughput import SPEEDUP_COLUMNS, flops_per_step, with_speedups

CELL = ["model", "n", "batch"]            # a throughput cell, within one device's table
# the GPU target: (n, least batch, fraction of the bf16 bound needed, label)
GPU_BOUND_TARGET = (128, 512, 0.5, "fraction of the bf16 bound, n = 128, batch >= 512 (least cell)")


def _csv(path: Path) -> pd.DataFrame | None:
    """A benchmark table, or None where the file cannot be read as one (cut short, not CSV)."""
    try:
        return pd.read_csv(path)
    except (OSError, ValueError, UnicodeDecodeError):     # pandas' parser and empty-data errors are ValueErrors
        return None


def _record(path: Path) -> dict | None:
    try:
        found = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def unreadable(folder) -> list[str]:
    """One line for each benchmark file under ``folder`` that cannot be read: the page names it and
    reads the others (a damaged file of one run costs no other run's table)."""
    folder = Path(folder)
    bad = [p for p in sorted(folder.glob("*.csv")) if not p.name.endswith(".partial.csv") and _csv(p) is None]
    bad += [p for p in sorted(folder.glob("*.json")) if _record(p) is None]
    return [f"{p} cannot be read and is left out of this page" for p in bad]


def read_tables(folder, order: str = "mtime") -> dict[str, pd.DataFrame]:
    """Every finished benchmark table under ``folder`` (partial files of stopped runs are left
    out), combined per device and dtype. A cell (device, dtype, model, n, batch) is taken whole
    from the newest file that measured it (``order``: by modification time, or by ``name`` for
    committed files, whose times are those of the checkout), so that no ratio compares variants
    timed in different runs. Each row keeps the name of its file in ``run``. The tables are keyed
    by device, or by 'device, dtype' where one device was measured in more than one dtype."""
    files = sorted((p for p in Path(folder).glob("bench-*.csv") if not p.name.endswith(".partial.csv")),
                   key=(lambda p: p.stat().st_mtime) if order == "mtime" else (lambda p: p.name))
    if not files:
        return {}
    tables = [(p, _csv(p)) for p in files]
    tables = [(p, t) for p, t in tables if t is not None and {"device", "model", "n", "batch"} <= set(t.columns)]
    if not tables:
        return {}
    df = pd.concat([t.assign(run=p.stem, _order=k) for k, (p, t) in enumerate(tables)], ignore_index=True)
    df["dtype"] = df["dtype"].fillna("float32") if "dtype" in df else "float32"   # tables before dtype was recorded
    cell = ["device", "dtype", "model", "n", "batch"]
    df = df[df._order == df.groupby(cell)._order.transform("max")].drop(columns="_order")
    df = df.sort_values(cell + ["variant"], kind="stable")
    several = df.groupby("device").dtype.nunique()
    return {(f"{dev}, {dt}" if several[dev] > 1 else dev):
            with_speedups(g.drop(columns=[c for _, c in SPEEDUP_COLUMNS if c in g])).reset_index(drop=True)
            for (dev, dt), g in df.groupby(["device", "dtype"])}


def read_metastable(folder) -> list[tuple[Path, pd.DataFrame]]:
    """Every finished metastable table under ``folder`` (partial files of stopped runs are left
    out), by file name: (path, table) pairs."""
    found = [(p, _csv(p)) for p in sorted(Path(folder).glob("metastable-*.csv")) if not p.name.endswith(".partial.csv")]
    return [(p, t) for p, t in found if t is not None]


def created(record: Path) -> str:
    """When a benchmark run's JSON record says it was written, as 'YYYY-MM-DD HH:MM' (UTC), or ''."""
    return str((_record(record) or {}).get("created", ""))[:16].replace("T", " ")


def bench_runs(folder) -> pd.DataFrame:
    """One row per throughput run recorded under ``folder`` (its ``bench-*.json``): the run's
    name, and the machine, time and command its record gives."""
    records = [(p, _record(p)) for p in sorted(Path(folder).glob("bench-*.json"))]
    return pd.DataFrame([dict(run=p.stem, **{k: v for k, v in r.items() if k in ("machine", "created", "command")})
                         for p, r in records if r is not None])


def megabytes(x):
    return x / 2**20


def _merged(table, part, renames, spans, label, value, q25, q75):
    """``table`` with ``part``'s columns joined by cell; ``spans`` gains 'label [q25, q75]'."""
    part = part.rename(columns=renames)
    for q in (q25, q75):                      # tables written before the quartiles were recorded
        if q not in part:
            part[q] = float("nan")
    spans[f"{label} [q25, q75]"] = (value, q25, q75)
    return part if table is None else table.merge(part, on=CELL, how="left")


def engine_table(df: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """One device's table as the cost appendix shows it: per cell the engine's rate and fraction of
    the bound, its speed-ups over the fill-mask loop and the shared-site batch, the compiled engine
    where it ran, and memory in MB; with the intervals (value, q25, q75) that ``tables.show`` joins."""
    spans = {}
    eng = df[df.variant == "engine"]
    table = _merged(None, eng[CELL + [c for c in ("chain_steps_per_s", "fraction_of_bound", "fraction_q25",
                                                  "fraction_q75", "logit_bytes", "peak_memory_bytes") if c in df]],
                    {"chain_steps_per_s": "steps/s"}, spans, "fraction of bound", "fraction_of_bound", "fraction_q25",
                    "fraction_q75")
    for other, name in (("fill_mask_loop", "x fill-mask loop"), ("shared_site_full", "x shared-site full")):
        o = df[df.variant == other][CELL + [c for c in ("engine_speedup", "engine_speedup_q25", "engine_speedup_q75")
                                            if c in df]]
        table = _merged(table, o, {"engine_speedup": name, "engine_speedup_q25": name + " q25",
                                   "engine_speedup_q75": name + " q75"}, spans, name, name, name + " q25", name + " q75")
    if "engine_compiled" in set(df.variant):
        comp = df[df.variant == "engine_compiled"][CELL + [c for c in ("chain_steps_per_s", "fraction_of_bound",
                                                                       "fraction_q25", "fraction_q75") if c in df]]
        table = _merged(table, comp, {"chain_steps_per_s": "compiled steps/s", "fraction_of_bound": "compiled fraction",
                                      "fraction_q25": "compiled q25", "fraction_q75": "compiled q75"},
                        spans, "compiled fraction", "compiled fraction", "compiled q25", "compiled q75")
    for c in ("logit_bytes", "peak_memory_bytes"):
        if c in table:
            table[c] = megabytes(table[c])
    return table.rename(columns={"logit_bytes": "logit MB", "peak_memory_bytes": "peak MB"}), spans


def device_header(device: str, df: pd.DataFrame) -> str:
    """The line above a device's table: its dtype, the matrix-multiply rates its cells measured and,
    where recorded, the share of CPU time the hypervisor gave to other guests (Markdown)."""
    rate = df[df.variant == "engine"].matmul_gflops   # one row, and one rate, per cell
    dtype = str(df.dtype.iloc[0])
    head = (f"**Device: {device}**{'' if dtype in device else f' ({dtype})'}; the matrix-multiply rate measured in the cells "
            f"ranged from {rate.min():.0f} to {rate.max():.0f} GFLOP/s (median over the {len(rate)} cells {rate.median():.0f}).")
    steal = df[df.variant == "engine"].steal_fraction.dropna() if "steal_fraction" in df else pd.Series(dtype=float)
    if len(steal):
        head += (f" While the {len(steal)} cells that recorded it ran, the hypervisor gave "
                 f"{100 * steal.min():.0f}% to {100 * steal.max():.0f}% (median {100 * steal.median():.0f}%) of this "
                 "machine's CPU time to other guests (steal time); such time taken away in bursts is one reason timings drift between rounds.")
    return head


def targets(df: pd.DataFrame) -> pd.DataFrame:
    """The benchmark issue's targets beside what one device's table measured (a target whose
    cells were not measured has no row). Speedups are the engine's rate over the other variant's
    in the same cell; the compiled engine is reported next to the eager one where it was run.
    ``q25``/``q75`` are the quartiles of the per-round ratios in the cell that decided the target
    (NaN for tables written before they were recorded); ``met`` reads the median."""
    rows = []
    gpu = str(df.device.iloc[0]).startswith("cuda")
    # the bound target: (n, least batch, fraction needed, label) on this kind of device; on a GPU
    # it is a bf16 target, which a float32 table does not decide
    bn, bb, needed_bound, bound_label = (GPU_BOUND_TARGET if gpu else
                                         (20, 64, 0.8, "fraction of the bound, n = 20, batch >= 64 (least cell)"))
    if gpu and str(df.dtype.iloc[0]) != "bfloat16":
        bb = np.inf

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


def bound_rows(t: pd.DataFrame) -> pd.DataFrame:
    """The rows of a :func:`targets` table that hold the compute-bound target."""
    return t[t.target.str.startswith("fraction")] if len(t) else t


def standing_targets(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`targets` less the retired one (the ratio over the one-chain fill-mask loop)."""
    t = targets(df)
    if len(t):
        t = t[~t.target.str.contains("fill-mask loop")]
    return t


# --------------------------------------------------------------------------- the metastable grid's tables
def cut_cells(m: pd.DataFrame) -> pd.Series:
    """Which rows of a metastable table were cut (stopped at the row budget: a speed-up that is
    an upper bound); none in tables written before cuts were recorded."""
    return m["cut"].fillna(False).astype(bool) if "cut" in m else pd.Series(False, index=m.index)


def speedup_table(m: pd.DataFrame) -> pd.DataFrame:
    """Per cell of a metastable table, each mode's speed-up over plain ('≤ x' where the mode was
    cut), the cell's no-op share, auto's passes per step, and the steps plain and the other modes
    ran."""
    cell_cols = [c for c in ("model", "n", "start", "temperature") if c in m]
    speed = m.pivot_table(index=cell_cols, columns="mode", values="speedup", sort=False)
    bound = m.assign(cut=cut_cells(m)).pivot_table(index=cell_cols, columns="mode", values="cut", sort=False,
                                                   aggfunc="any").reindex_like(speed).fillna(False).astype(bool)
    speed = speed.astype(object).where(~bound, speed.map(lambda v: f"≤ {number(v, 3, '')}"))
    speed.columns = [f"{c} x plain" for c in speed.columns]
    by_mode = m.set_index(cell_cols + ["mode"])
    extra = pd.DataFrame({"no-op share": by_mode.xs("plain", level="mode")["cell_noop_share"],
                          "auto passes / step": by_mode.xs("auto", level="mode")["passes_per_step"],
                          "plain steps": by_mode.xs("plain", level="mode")["steps"],
                          "other modes' steps": by_mode.xs("memo", level="mode")["steps"]})
    return speed.join(extra).reset_index()


def trap_cells(m: pd.DataFrame) -> pd.DataFrame:
    """auto's rows of a metastable table's perfect-trap cells (one a model and length)."""
    return m[(m["mode"] == "auto") & (m["start"] == "perfect trap")]


def trap_depths(traps: pd.DataFrame) -> tuple[pd.DataFrame, int, int]:
    """The depth of the traps each trap cell started from (the columns that were recorded), how
    many cells were measured before depths were recorded, and how many found no deep trap."""
    depth = [c for c in ("trap_states", "fixed_points", "trap_hold_min", "trap_hold_median", "deep") if c in traps]
    older = int(traps["trap_hold_min"].isna().sum()) if "trap_hold_min" in traps else len(traps)
    shallow = int((~traps["deep"].fillna(True).astype(bool)).sum()) if "deep" in traps else 0
    return traps[["model", "n", *depth]].reset_index(drop=True), older, shallow


def grid_coverage(m: pd.DataFrame) -> tuple[int, int, list[str]]:
    """How many cells of the full metastable grid (every model of it at n = 20 and 64, each
    temperature and a trap) a table holds, of how many, and the (model, n) blocks short of cells."""
    full = [(mdl, n) for mdl in METASTABLE_MODELS for n in (20, 64)]
    per_block = len(METASTABLE_TEMPERATURES) + 1           # five temperatures and a trap
    held = {(mdl, n): len(g[["start", "temperature"]].drop_duplicates()) for (mdl, n), g in m.groupby(["model", "n"])}
    missing = [f"{mdl} at n = {n}" + (f" ({per_block - held[(mdl, n)]} of {per_block} cells)" if (mdl, n) in held else "")
               for mdl, n in full if held.get((mdl, n), 0) < per_block]
    have = sum(min(held.get(b, 0), per_block) for b in full)
    return have, per_block * len(full), missing


def workload(profile: str) -> pd.DataFrame:
    """Masked rows (one row = one chain-step's worth of encoder work at that length) that each
    chapter of a profile asks for, from its parameters. Upper bounds where runs can stop early
    (coupled pairs that meet leave the batch)."""
    spec = load_profile(profile)
    rows = []
    for ch in spec["chapters"]:
        p = chapter_parameters(profile, ch)
        if ch == "incompatibility":
            k = len(p["models"])
            work, n = 6 * p["n_rectangles"] * k + 2 * p.get("grid_k", 0) * p.get("n_grids", 0) * k, p["seq_len"]
        elif ch == "bounds":
            n, q = p["seq_len"], 1 + p["top_k"] + p["extra"]
            work = len(p["models"]) * (p["n_contexts"] * n * (q * (n - 1) + 1) + p["drift_states"] * n)
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
            work = len(p["models"]) * chains * p["steps"] + p["prefix_chains"] * p["steps"]
        elif ch == "traps":
            n, work = p["seq_len"], p["chains"] * p["steps"]
        else:
            continue
        rows.append({"profile": profile, "chapter": ch, "masked rows": int(work), "typical n": int(n)})
    return pd.DataFrame(rows)


def workloads(profiles: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """:func:`workload` of each profile that passes its whole schema, and one line for each that does
    not (a broken file in ``params/`` is named and left out; it breaks no other profile's page)."""
    from ..profile import ProfileError, check_profile

    frames, broken = [], []
    for profile in profiles:
        try:
            check_profile(profile)
            frames.append(workload(profile))
        except (ProfileError, ValueError, KeyError, TypeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            broken.append(f"params/{profile}.yaml is left out: it does not pass as a profile ({first})")
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["profile", "chapter", "masked rows", "typical n"])), broken


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
