"""The cost appendix's sentences and figures, from the tables :mod:`textglauber.bench.read`
reads back. Each function says one thing the page prints, so the notebook stays a list of calls."""
from __future__ import annotations

import html

import pandas as pd

from ..traps.finder import TRAP_HOLD, TRAP_TEMPERATURE
from .metastable import HIGH_NOOP_SHARE
from .read import GPU_BOUND_TARGET, bound_rows, cut_cells, grid_coverage, targets


def close_sentence(t: pd.DataFrame) -> str:
    """The targets whose per-round range straddles what is needed ('' when none)."""
    close = t[(t.q25 < t.needed) & (t.q75 >= t.needed)]
    if not len(close):
        return ""
    return "Within the host's noise (the per-round range straddles the target): " + "; ".join(
        f"{r.model}, {r.engine}, {r.target} ({r.measured:.2f} [{r.q25:.2f}, {r.q75:.2f}] against {r.needed:.1f})"
        for r in close.itertuples()) + "."


def loop_sentence(df: pd.DataFrame) -> str:
    """Why the one-chain fill-mask loop is no target: how near the compute bound it already runs
    for the BERT-base shape at n = 20 ('' without that cell)."""
    loop = df[(df.variant == "fill_mask_loop") & df.model.str.startswith("bert-base") & (df.n == 20)]
    if not len(loop):
        return ""
    lo, hi = loop.fraction_of_bound.min(), loop.fraction_of_bound.max()
    return (f"On this device the one-chain fill-mask loop itself reached {lo:.2f} to {hi:.2f} of the compute bound for "
            f"the BERT-base shape at n = 20, so an engine running at the full bound would be only {1 / hi:.1f} to "
            f"{1 / lo:.1f} times faster than it, whatever it does: the ratio over the loop measures the loop more than "
            "the engine. It is still shown in the engine's table above, but it is not a target.")


def trap_sentence(n_cells: int, older: int, shallow: int) -> str:
    """What the trap cells' starts are, and which cells could not start as deep as asked."""
    return ("Trap cells: the distinct traps the chains start from and their exact expected holding times at "
            f"T = {TRAP_TEMPERATURE} (steps). "
            + (f"{older} of {n_cells} trap cells were measured before the starts were chosen by holding time, "
               "from every argmax fixed point reached, deep or not; their depth is not recorded. " if older else "")
            + (f"In {shallow} cell(s) no fixed point reached holds {TRAP_HOLD} steps, and the chains start "
               "from the deepest one. " if shallow else ""))


def targets_sentence(m: pd.DataFrame, t: pd.DataFrame) -> str:
    """The grid's coverage, then each auto target: met or not, and where not, whether rows alone rule it out."""
    have, of, missing = grid_coverage(m)
    text = [f"The table holds {have} of the {of} cells of the full grid"
            + (f" ({', '.join(missing)} not measured), so each target below is read off the measured cells only."
               if missing else ".")]
    for r in t.to_dict("records"):
        text.append(f"auto {r['target'].replace(' (least cell)', '')}: {r['measured']:.2f} in the least of {r['cells']} "
                    f"cells ({r['least cell']}), against {r['needed']:g}: {'met' if r['met'] else 'not met'}.")
        if not r["met"] and pd.notna(r["row bound"]):
            text.append(f"That cell's row bound is {r['row bound']:.2f}, " + (
                f"below the {r['needed']:g} asked: no mode that scores as many rows as memo or jump did there "
                "could meet the target on this machine." if r["row bound"] < r["needed"] else
                f"at least the {r['needed']:g} asked: rows alone do not rule the target out there."))
    return " ".join(text)


def _span(rb: pd.DataFrame, column: str) -> str:
    lo, hi = f"{rb[column].min():.2f}", f"{rb[column].max():.2f}"
    return lo if lo == hi else f"{lo} to {hi}"


def row_bound_sentence(rb: pd.DataFrame) -> str:
    """Where the no-op share is high: memo's rows per step, the ceiling they set, and auto beside it."""
    share = f"{HIGH_NOOP_SHARE:g}"
    over = rb[rb["auto x plain"] > rb["row bound"]]
    return (f"In the {len(rb)} burned-in cell(s) whose no-op share is {share} or more, memo scored "
            f"{_span(rb, 'memo rows per step')} rows per chain-step, a ceiling of {_span(rb, 'row bound')} times plain "
            f"for any mode that scores those rows; auto reached {_span(rb, 'auto x plain')}"
            + (f" (above its cell's ceiling in {len(over)} cell(s), by up to "
               f"{(over['auto x plain'] / over['row bound']).max():.2f} times it: the ceiling counts rows, and a ratio "
               "a little above it is the host's noise)." if len(over) else "."))


def plot_speedups(ax, m: pd.DataFrame) -> None:
    """Each mode's rate over plain's against the share of steps that changed nothing (cut runs marked)."""
    import seaborn as sns

    cut = cut_cells(m)
    shown = m.assign(mode=m["mode"].where(~cut, m["mode"] + " (cut: upper bound)"))
    sns.scatterplot(data=shown[shown["mode"] != "plain"], x="cell_noop_share", y="speedup", hue="mode", style="model",
                    ax=ax)
    ax.set_yscale("log")
    ax.axhline(1, color="grey", lw=0.8)
    ax.set_xlabel("share of the chain's steps that changed nothing")
    ax.set_ylabel("rate / plain's rate")
    ax.legend(fontsize="small", ncol=2)


def gpu_target_sentence(df: pd.DataFrame) -> str:
    """For one GPU table: whether its cells decide the GPU target (0.5 of the bf16 bound for the
    BERT-base shape at n = 128, batch 512 or more) and, where they do not, what was measured
    nearest to it ('' where the targets table decides it)."""
    n, least, needed, _ = GPU_BOUND_TARGET
    target = f"{needed:g} of the bf16 bound for the BERT-base shape at n = {n}, batch {least} or more"
    if str(df.dtype.iloc[0]) != "bfloat16":
        return f"This table is {df.dtype.iloc[0]}: the GPU target ({target}) is read off a bf16 table only."
    if len(bound_rows(targets(df))):                  # its cells decide it: the targets table says how
        return ""
    eng = df[(df.variant == "engine") & df.model.str.startswith("bert-base") & (df.n == n)].sort_values("batch")
    if not len(eng):
        return f"No cell of the BERT-base shape at n = {n} was measured, so the GPU target ({target}) is not decided."
    lo, hi = eng.iloc[0], eng.iloc[-1]
    span = (f"from {lo.fraction_of_bound:.3f} of the bound at batch {lo.batch} to {hi.fraction_of_bound:.3f} at batch "
            f"{hi.batch}, the largest measured" if len(eng) > 1 else
            f"{hi.fraction_of_bound:.3f} of the bound at batch {hi.batch}, the only batch measured")
    return (f"The GPU target ({target}) is not decided by these cells: at n = {n} the engine reached {span}. "
            f"A fraction at a batch below {least} neither meets nor misses the target.")


def plot_gpu_fractions(ax, df: pd.DataFrame, label: str) -> None:
    """The engine's fraction of the bound (of its own dtype) against the batch, one line per n."""
    eng = df[df.variant == "engine"]
    for n, g in eng.groupby("n"):
        g = g.sort_values("batch")
        ax.plot(g.batch, g.fraction_of_bound, marker="o", label=f"n = {n}")
    ax.set_xscale("log", base=2)
    batches = sorted(eng.batch.unique())
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.minorticks_off()
    ax.set_xlabel("batch (chains)")
    ax.set_ylabel("fraction of the bound")
    ax.set_title(label)
    ax.legend(fontsize="small")


def projection_sentence(gpu_runs) -> str:
    """What the GPU columns of the projection are, and are not (``gpu_runs``: :func:`gpu_data.gpu_runs`'s)."""
    if not gpu_runs:
        return ("No GPU session is recorded in `data/gpu/`, so there is no GPU projection: this page shows only "
                "numbers that were measured.")
    best = []
    for run in gpu_runs:
        for key, df in run.tables.items():
            eng = df[(df.variant == "engine") & (df.dtype == "bfloat16") & df.model.str.startswith("bert-base")]
            if len(eng):
                best.append(f"{run.name} ({key}): batches {eng.batch.min()} to {eng.batch.max()} at n = "
                            + ", ".join(str(n) for n in sorted(eng.n.unique())))
    timed = [run.name for run in gpu_runs if "chapter_seconds" in run.record]
    return ("Each GPU column divides the same rows by the engine's bf16 rate that session measured on the BERT-base "
            "shape at the nearest length and its fastest batch (" + ("; ".join(best) or "no bf16 cell") + "). "
            "It counts the encoder's work only, at batches no larger than those measured, and none of the "
            "chapters' other work. "
            + ("The chapters' wall times on a GPU were measured in " + ", ".join(timed) + "." if timed else
               "No session measured the chapters' wall times on a GPU, so these hours are not the paper profile's "
               "GPU time and do not decide whether it fits in one GPU-hour."))


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def workers_sentence(table: pd.DataFrame, profile: str) -> str:
    """What the N-worker projection of ``profile`` says (``table``: :func:`textglauber.bookbuild.
    estimates.workers.projection`'s), and what bounds it."""
    if table.empty:
        return f"No chapter of the {profile} profile has a fitted time, so there is no projection on workers."
    cols = [c for c in table.columns if c.startswith("hours on ")]
    total = {c: table[c].sum() for c in ["hours serially", *cols]}
    split = table[table.units > 0]
    parts = ", ".join(f"{c.removeprefix('hours ')} {total[c]:.3g} h" for c in cols)
    return (f"At the calibration machine's speed, the {profile} profile's chapters would take {total['hours serially']:.3g} h "
            f"one after another on 2 cores, and {parts}, each worker one thread on a core of its own. Only "
            + (_and([f"{r.chapter} ({r.units} unit{'s' if r.units != 1 else ''})" for r in split.itertuples()]) if len(split) else "no chapter")
            + " hand work out today (a unit is a model, a length, a length and temperature, or a block of chains), so no chapter gains "
            "from more workers than it has units, "
            "and the rest of each chapter runs in its notebook's process whatever the count. The rates are the ones "
            "fitted to measured builds on CPUs; the paper profile's real models are priced by their shape, and no "
            "GPU enters these hours.")


def record_table(run) -> pd.DataFrame:
    """A committed GPU session's record (``run``: a :class:`~textglauber.bench.gpu_data.GpuRun`) as
    two columns of HTML, commands in ``<code>`` (where MathJax leaves a shell's ``$`` alone); show
    it with ``markup=[run.name]``."""
    r, esc = run.record, html.escape
    versions = ", ".join(f"{k} {v}" for k, v in r["versions"].items())
    rows = [("date", f"{r['date']}" + (f", {r['measured_utc']} UTC" if "measured_utc" in r else "")),
            ("machine", r["machine"]), ("versions", versions), ("code", f"commit {str(r['commit'])[:7]}")]
    if "tf32" in r:
        rows.append(("TF32 in float32", "on" if r["tf32"] else "off"))
    if "device_seconds_spent" in r:
        rows.append(("device time spent", f"{r['device_seconds_spent']} s"))
    rows = [(k, esc(str(v))) for k, v in rows]
    rows += [(f"command {k + 1}", f"<code>{esc(c)}</code>") for k, c in enumerate(r["commands"])]
    rows += [(f"not measured {k + 1}", esc(c)) for k, c in enumerate(r["not_measured"])]
    return pd.DataFrame(rows, columns=["", run.name])
