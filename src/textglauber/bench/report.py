"""The cost appendix's sentences and figures, from the tables :mod:`textglauber.bench.read`
reads back. Each function says one thing the page prints, so the notebook stays a list of calls."""
from __future__ import annotations

import pandas as pd

from ..traps.finder import TRAP_HOLD, TRAP_TEMPERATURE
from .metastable import HIGH_NOOP_SHARE
from .read import cut_cells, grid_coverage


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
