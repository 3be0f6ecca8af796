"""The cost appendix's row on the findings page: what this build's benchmarks measured against
the engine's targets (:mod:`textglauber.bench.read`, :mod:`textglauber.bench.metastable`)."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from ..tables import number
from . import Headline
from .reading import esc, nowrap


def headline(folder: Path, root: Path, profile: str) -> Headline:
    from ..bench import metastable, read

    benches = read.read_tables(root / "bench")
    metas = read.read_metastable(root / "bench")
    gpu = _gpu_words()
    if not benches and not metas:
        return Headline("No benchmark has been run for this build.", gpu)
    out = []
    for device, df in benches.items():
        t = read.targets(df)
        when = ", ".join(sorted({read.created(p) for p in (root / "bench").glob(f"bench-{df.device.iloc[0]}*.json")}
                                - {""}))
        text = f"{esc(device)}" + (f" (measured {when} UTC)" if when else "") + ": "
        bound = read.bound_rows(t)
        shared = t[t.target.str.contains("shared-site")] if len(t) else t
        if len(bound):
            r = bound.iloc[0]
            text += (f"the engine reached {r.measured:.2f} of the compute bound ({esc(r.target)}; "
                     f"target {r.needed:g}: {'met' if r.met else 'not met'})")
        else:
            text += "no cell of the BERT-base shape at the bound target's size was measured"
        if len(shared):
            worst = shared.loc[shared.measured.idxmin()]
            at_n = re.search(r"n = \d+", worst.target)
            text += (f"; ahead of the shared-site batch at every batch size: {'yes' if shared.met.all() else 'no'} "
                     f"(least ratio {worst.measured:.2f}, {nowrap(worst.model)}{f' at {at_n.group(0)}' if at_n else ''})")
        out.append(text + ".")
    for path, m in metas:
        t = metastable.metastable_targets(m)
        if len(t):
            out.append(f"Memoizing engine ({esc(path.stem)}): {int(t.met.sum())} of {len(t)} targets met ("
                       + "; ".join(f"{esc(r.target)}: {r.measured:.2f} against {r.needed:g}" for r in t.itertuples()) + ").")
        b = metastable.row_bounds(m)
        if len(b):
            lo = b.iloc[0]
            reached = (f"; auto reached {'at most ' if lo['auto cut'] else ''}{lo['auto x plain']:.2f} there"
                       if pd.notna(lo["auto x plain"]) else "")
            out.append(f"Where the no-op share is {metastable.HIGH_NOOP_SHARE:g} or more ({len(b)} cell{'s' * (len(b) != 1)}), "
                       f"auto has no target, only a ceiling, plain's rows over memo's: from {number(b['row bound'].min())} "
                       f"({nowrap(lo.model)}, n = {lo.n:g}, T = {lo.temperature:g}{reached}) to "
                       f"{number(b['row bound'].max())}.")
    return Headline(out[0], " ".join([*out[1:], gpu]).strip())


def _gpu_words() -> str:
    """The committed GPU measurements in one sentence per session ('' where there are none)."""
    from ..bench import gpu_data, read

    words = []
    for run in gpu_data.gpu_runs()[0]:
        best = []
        for df in run.tables.values():
            decided = read.bound_rows(read.targets(df))
            if len(decided):
                r = decided.iloc[0]
                best.append(f"{r.measured:.2f} of the bf16 bound in the target's least cell (target {r.needed:g}: "
                            f"{'met' if r.met else 'not met'})")
        if not best:
            n, least = read.GPU_BOUND_TARGET[:2]
            best.append(f"no cell at the GPU target's size (n = {n}, batch {least} or more) was measured")
        words.append(f"GPU ({esc(run.name)}, committed data): "
                     + "; ".join(best) + ".")
    return " ".join(words)



def preprint() -> str:
    return ("Not reported. The book's targets: 0.8 of the compute bound per pass on a CPU, ahead of the "
            "shared-site batch at every batch size, half the bf16 bound on a GPU; for the memoizing engine, auto at "
            "least 20x plain on a perfect trap and 0.95x at T = 2. Where most steps change nothing, auto is held "
            "to no target: on a CPU it cannot beat plain by much more than plain's rows over the distinct "
            "(state, site) rows the chains visit, which is what memo scores.")
