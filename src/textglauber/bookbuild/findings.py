"""The front page's findings: what one build of the book found, chapter by chapter, beside the
preprint's reported figures, read from the build's results folder.

    f = findings.collect("results", "offline")
    findings.preamble(f)      # profile, models, commits, dates (Markdown)
    findings.show(f)          # the table: one row per chapter, linked to its page
    findings.chapter_times("results")   # wall time of every chapter's last execution, all profiles

Every sentence is computed from the results that exist; a chapter that has not run says so.
Model names are given as the chapters give them, and the preamble says whether any model is one
of the preprint's, so no number of another model is read as a BERT number.
"""
from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from .. import profile as P
from .. import results
from .. import reported
from ..paths import repo_root
from ..provenance import git_commit
from ..pages import basins as basins_page
from ..tables import interval, number
from .stamps import changed_results, read_stamp, read_timings

PREPRINT = "preprint (arXiv 2605.16378)"
PREPRINT_MODELS = set(reported.RECTANGLE_MEAN_R) | {"facebook/bart-large-mnli"}


@dataclass
class Findings:
    profile: str
    description: str
    models: list[str]
    shared: list[str]                 # models that are also the preprint's
    commits: dict[str, list[str]]     # commit -> chapters whose results it produced
    dirty: list[str]                  # chapters run from a tree with uncommitted changes
    ran: tuple[str, str] | None       # first and last time a chapter's results were written (UTC)
    built: str
    build_commit: str | None
    rows: list[dict] = field(default_factory=list)   # chapter, page, title, this run, preprint (HTML cells)


def _e(text) -> str:
    return html.escape(str(text))


def _name(name) -> str:
    """A model name that never breaks across lines."""
    return f'<span style="white-space:nowrap">{_e(name)}</span>'


_not_run: dict[Path, str] = {}      # chapter folders :func:`collect` found no finished run in -> why


def _manifest(folder: Path) -> dict | None:
    """A chapter's manifest, or None where it has none or its last run did not finish."""
    if Path(folder).resolve() in _not_run:
        return None
    return results.read_manifest(folder)


def _table(folder: Path, name: str) -> pd.DataFrame | None:
    """One of a chapter's tables, or None where its manifest does not list it: a table that the
    chapter's last finished run did not write is no result of it, whatever the folder holds. A
    listed table whose bytes are not the ones that run wrote raises
    :class:`textglauber.results.NotThisRun`, which the chapter's row shows in one line."""
    m = _manifest(folder)
    if m is None or name not in (m.get("tables") or []):
        return None
    return results.vouched_table(folder, name)


def unfinished(folder: Path, stamp: Path | None) -> str | None:
    """Why ``folder`` does not hold the results of a chapter's finished run, or None where it does.
    With the build's ``stamp`` (``stamps`` given to :func:`collect`), there must be one, and every
    result file it recorded must be there with the digest it recorded; without stamps, a folder
    holding files needs a manifest (it is written last). A chapter that writes no folder of its own
    (the cost appendix reads ``results/bench``) needs only its stamp."""
    folder = Path(folder)
    has_files = folder.is_dir() and any(p.is_file() for p in folder.rglob("*"))
    if stamp is None:
        return None if not has_files or (folder / "manifest.json").is_file() else "Not run in this build."
    record = read_stamp(stamp)
    if record is None:
        return "Not run in this build."
    why = changed_results(record, folder)
    return None if why is None else f"Not read: {folder} is not what its stamp recorded ({why}); run the chapter again."


def title(notebook: str) -> str:
    """A chapter's title: the first heading of its notebook."""
    import nbformat

    nb = nbformat.read(repo_root() / notebook, as_version=4)
    for c in nb.cells:
        if c.cell_type == "markdown":
            for line in c.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return Path(notebook).stem


# --------------------------------------------------------------------------- one headline per chapter
def incompatibility(folder: Path, root: Path, profile: str) -> str:
    s = _table(folder, "summary")
    if s is None:
        return ""
    parts = [f"{_name(r.model)} {interval(r['mean R'], r['95% CI low'], r['95% CI high'])}"
             for _, r in s[s.kind == "mlm"].iterrows()]
    text = "Mean R (95% interval) per masked LM: " + "; ".join(parts) + "." if parts else "No masked LM ran."
    ctrl = s[s.kind == "causal"]
    if len(ctrl):
        c = ctrl.iloc[0]
        text += f" Joint control {_name(c.model)}: mean R {number(c['mean R'])}, largest {number(c['max R'])}."
    return text


def incompatibility_preprint() -> str:
    mlm = "; ".join(f"{_name(m)} {v:.3f}" for m, v in reported.RECTANGLE_MEAN_R.items() if m != "gpt2")
    return (f"Mean R over {reported.RECTANGLE_PROTOCOL['rectangles_per_model']} MS MARCO rectangles: {mlm}. "
            f"Joint control {_name('gpt2')}: {reported.RECTANGLE_MEAN_R['gpt2']:.3f}.")


def _coupling_boundary(root: Path, profile: str) -> tuple[str | None, list, float]:
    """The crossover chapter's model, the fast threshold per coupling length, and its criterion."""
    from .. import crossover

    cross = root / profile / "crossover"
    m, summary = _manifest(cross), _table(cross, "summary")
    if m is None or summary is None or "fast" not in summary:
        return None, [], float("nan")
    cells = summary[summary.kind == "coupling"]
    return m["parameters"]["model"]["name"], crossover.fast_threshold(cells), float(m["parameters"]["fast_within"])


def bounds(folder: Path, root: Path, profile: str) -> str:
    from .. import crossover

    alpha = _table(folder, "alpha")
    if alpha is None:
        return ""
    t_star = alpha.groupby("model", sort=False).t_star.first()
    text = ("Estimated T* (a lower bound on T*): "
            + "; ".join(f"{_name(m)} {number(t)}" for m, t in t_star.items()) + ".")
    model, boundary, kappa = _coupling_boundary(root, profile)
    if model is None:
        text += " The crossover chapter has not run, so there is no empirical fast temperature to set it against."
    elif model not in t_star:
        text += f" The crossover chapter ran {_name(model)}, which this chapter did not estimate."
    else:
        seq_len = int((_manifest(folder) or {}).get("parameters", {}).get("seq_len", 0))
        cmp = crossover.tstar_comparison(float(t_star[model]), seq_len, boundary)
        text += " " + _e(crossover.tstar_sentence(cmp, model, kappa)) + "."
    return text


def crossover(folder: Path, root: Path, profile: str) -> str:
    from .. import crossover as cx

    m, fits = _manifest(folder), _table(folder, "law_fits")
    if m is None or fits is None:
        return ""
    par = m["parameters"]
    delta = float(par["delta"])
    main = fits[np.isclose(fits.delta, delta)]
    text = _phase(folder, par)
    text += (f" Growth law of the hitting times (δ = {delta:g}, budgets of {par['sweeps']:g} sweeps), by temperature: "
            + "; ".join(f"T = {r['temperature']:g}: {_e(_law(r))}" for r in main.to_dict("records")) + ".")
    laws = _table(folder, "coupling_law_fits")
    if laws is not None and len(laws):
        text += (" Growth law of the coupling times at the fast temperatures: "
                 + "; ".join(f"T = {r['temperature']:g}: {_e(_law(r))}" for r in laws.to_dict("records")) + ".")
    elif laws is not None:
        text += " No temperature was fast at three lengths, so no growth law of the coupling times was tested."
    text += " " + _e(cx.law_caveat(par["lengths"]))
    intervals = _table(folder, "boundary_intervals")
    if intervals is not None and len(intervals):
        text += (f" The coupling grid's fast/slow boundary (median coupling time within {float(par['fast_within']):g} "
                 f"n ln n steps, budgets of {par['budget_sweeps']:g} sweeps), as bootstrap ranges from "
                 f"n = {int(intervals.n.min())} to n = {int(intervals.n.max())}: "
                 + _e({"rises": "it rises (the range at the longest length lies wholly above the one at the shortest)",
                       "falls": "it falls (the range at the longest length lies wholly below the one at the shortest)",
                       "cannot tell": "the ranges at the shortest and the longest length overlap, so whether it moves "
                                      "cannot be told"}[cx.boundary_verdict(intervals)]) + ".")
    return (text + f" Model: {_name(par['model']['name'])}.").lstrip()


def _phase(folder: Path, par: dict) -> str:
    """The exact phase diagram's verdict (chapter 3's opening section), or nothing where the run has none."""
    from .. import phasepage

    table, verdicts = _table(folder, "phase_exact"), _table(folder, "phase_verdicts")
    if table is None or verdicts is None:
        return ""
    return _e(phasepage.headline(verdicts, table, float(par["phase"]["linear_factor"])))


def _law(row: dict) -> str:
    """A law-table row as the chapter reports it: the verdict that the design check lets stand, its
    support, and the exponent's interval."""
    verdict = row["reported"]
    named = verdict not in ("cannot tell", "none of the three") and row["support"]
    p = (f"power-law exponent p = {row['p']:.2f} [95% interval {row['p low']:.2f} to {row['p high']:.2f}]"
         if np.isfinite(row["p"]) else "no exponent (too few lengths with a median)")
    support = f" ({row['support']})" if named else ""
    return f"{verdict}{support}, {p}"


def crossover_preprint() -> str:
    c = reported.CROSSOVER
    return f"Hitting times fit {_e(c['fit'])}; the fast/slow boundary lies {_e(c['boundary'])}."


def basins(folder: Path, root: Path, profile: str) -> str:
    m, summ, rec = _manifest(folder), _table(folder, "summary"), _table(folder, "recurrence")
    if m is None or summ is None or rec is None:
        return ""
    p = m["parameters"]
    label, labels, steps = p["basin_label"], p["labels"], int(p["steps"])
    first = rec.model.iloc[0]
    r0 = rec[rec.model == first]
    if "kind" in r0:                                  # null chains ran beside the topic-seeded ones
        r0 = r0[r0.kind == "topic"]
    text = (f"{_name(first)}: mean {_e(label)} score over the {len(summ)} seed topics "
            f"{summ[f'{label} at 0'].mean():.3f} at step 0 and {summ[f'{label} at end'].mean():.3f} at step {steps:,}; "
            f"{int(r0.crossed_up.sum())} of {len(r0)} chains crossed the {_e(label)} baseline (1/{len(labels)}) upward")
    null = _table(folder, "recurrence_null")
    c = None if null is None else null[(null.model == first) & (null.statistic == "crossing share")].reset_index(drop=True)
    if c is None or not len(c):
        return text + "; no null model ran." + _special(folder, first, label, p)
    c = c.loc[c.against.str.count(" \\+ ").idxmax()]         # the pooled null: every kind of null seed
    kinds = c.against.split(" + ")
    share = (f"{int(c['count topic'])} of {int(c['n topic'])} topic-seeded chains against {int(c['count null'])} of "
             f"{int(c['n null'])} chains from seeds with no topic ({_e(' and '.join(kinds))})")
    if not np.isfinite(c.p):
        return text + f". Among chains starting at or below the baseline, {share}: not comparable." + _special(folder, first, label, p)
    word = "exceeds" if c.exceeds else "does not exceed"
    return (text + f". Among chains starting at or below the baseline, {share} crossed (one-sided Fisher "
            f"p = {c.p:.2g}): the recurrence {word} the null model's." + _special(folder, first, label, p))


def _special(folder: Path, model: str, label: str, p: dict) -> str:
    """Whether the basin label leads every other label (the null that can fail both ways)."""
    contrast = _table(folder, "basin_contrast")
    if contrast is None or not (contrast.model == model).any():
        return ""
    return " Among the labels, " + _e(basins_page.special_clause(contrast, model, label, alpha=float(p["null_alpha"]))) + "."


def basins_preprint() -> str:
    start = np.mean([a for a, _ in reported.BASINS_POLITICS.values()])
    end = np.mean([b for _, b in reported.BASINS_POLITICS.values()])
    up, n = reported.BASINS_CROSSING
    return (f"{_name('bert-base-uncased')}: mean politics score over the {len(reported.BASINS_POLITICS)} seed topics "
            f"{start:.3f} at step 0 and {end:.3f} at step 10,000; {up} of {n} chains crossed the politics baseline; "
            "no null model is given for this count.")


def traps(folder: Path, root: Path, profile: str) -> str:
    m = _manifest(folder)
    if m is None:
        return ""
    p = m["parameters"]
    run = (f"{_name(p['model']['name'])} at T = {float(p['temperature']):g}, {int(p['chains'])} chains x "
           f"{int(p['steps']):,} steps")
    cat = _table(folder, "traps")
    if cat is None or not len(cat):
        return f"{run}: no trap." + _escape(folder)
    from ..traps import vacuous

    perfect = int((cat.type == "perfect").sum())
    text = (f"{run}: {len(cat)} traps, {perfect} perfect ({perfect / len(cat):.0%}), mean duration "
            f"{cat.duration.mean():,.0f} steps ({cat.duration.min():,} to {cat.duration.max():,})")
    cut = [f"{int(cat[c].sum())} {what}" for c, what in (("censored", "still trapped when the chain ended"),
                                                         ("present at step 0", "trapped from step 0"))
           if c in cat and cat[c].any()]
    if cut:
        text += f"; {' and '.join(cut)}, so those durations are lower bounds"
    vac, of = vacuous(cat) if "predicted escape time (steps)" in cat else (0, 0)
    if of:
        text += (f". The margin bound is vacuous (an escape time below one step) for {vac} of the {of} perfect "
                 "traps; approximate traps have no margin, so no bound")
    return text + "." + _escape(folder) + _growth(folder)


def _growth(folder: Path) -> str:
    """Escape against length (:func:`textglauber.arrhenius.growth_sentence`, as the chapter prints it)."""
    gr = _table(folder, "escape_growth")
    if gr is None or not len(gr):
        return ""
    from ..arrhenius import growth_sentence

    return " " + _e(growth_sentence(gr))


def _escape(folder: Path) -> str:
    """The escape section's words (:func:`textglauber.arrhenius.summary`, as the chapter prints them)."""
    cells, fits = _table(folder, "escape_cells"), _table(folder, "escape_fits")
    if cells is None or fits is None or not len(cells):
        return ""
    from ..arrhenius import headline, summary

    h = headline(cells, fits)
    return f" Escape from perfect traps by exact superbasin exits and jumps ({_e(', '.join(h['models']))}): " + _e(summary(h))


def traps_preprint() -> str:
    t = reported.TRAPS
    lo, hi = t["duration_range"]
    return (f"{_name('bert-base-uncased')}, {t['chains']} chains x {t['steps']:,} steps: {t['traps']} traps, {t['perfect']} "
            f"perfect ({t['perfect'] / t['traps']:.0%}), mean duration {t['mean_duration']:,} steps ({lo:,} to {hi:,}). "
            f"The margin bound is vacuous (an escape time below one step) for all {t['perfect']} perfect traps.")


def ground_truth(folder: Path, root: Path, profile: str) -> str:
    from ..groundtruth import headline

    t = _table(folder, "ground_truth")
    if t is None:
        return ""
    hl = headline(t, _table(folder, "holding_times"))
    parts = hl.clauses()
    models = ", ".join(_name(m) for m in t.model.unique())
    text = (f"Over {hl.cases} model-temperature cases ({models}, restricted to a few tokens and short lengths): "
            + "; ".join(parts) + ".")
    if hl.holding_traps:
        text += (f" Holding times in the deepest traps, simulated by jumps over {hl.holding_steps:,} "
                 f"chain-steps: the exact mean 1/(1 - P(x,x)) lies inside the simulated interval in "
                 f"{hl.holding_inside} of {hl.holding_traps} traps")
        text += ("." if hl.holding_left == hl.holding_traps else
                 f" ({hl.holding_traps - hl.holding_left} of them with no chain leaving within the budget, so a lower "
                 "bound only).")
    return text


def ground_truth_preprint() -> str:
    return "No exact values: coupling and hitting times are used as the measure of mixing on BERT."


def cost(folder: Path, root: Path, profile: str) -> str:
    from ..bench import metastable, read

    benches = read.read_tables(root / "bench")
    metas = read.read_metastable(root / "bench")
    if not benches and not metas:
        return "No benchmark has been run for this build."
    out = []
    for device, df in benches.items():
        t = read.targets(df)
        when = ", ".join(sorted({read.created(p) for p in (root / "bench").glob(f"bench-{device}*.json")} - {""}))
        text = f"{_e(device)}" + (f" (measured {when} UTC)" if when else "") + ": "
        bound = t[t.target.str.startswith("fraction")] if len(t) else t
        shared = t[t.target.str.contains("shared-site")] if len(t) else t
        if len(bound):
            r = bound.iloc[0]
            text += (f"the engine reached {r.measured:.2f} of the compute bound ({_e(r.target)}; "
                     f"target {r.needed:g}: {'met' if r.met else 'not met'})")
        else:
            text += "no cell of the BERT-base shape at the bound target's size was measured"
        if len(shared):
            worst = shared.loc[shared.measured.idxmin()]
            at_n = re.search(r"n = \d+", worst.target)
            text += (f"; ahead of the shared-site batch at every batch size: {'yes' if shared.met.all() else 'no'} "
                     f"(least ratio {worst.measured:.2f}, {_name(worst.model)}{f' at {at_n.group(0)}' if at_n else ''})")
        out.append(text + ".")
    for path, m in metas:
        t = metastable.metastable_targets(m)
        if len(t):
            out.append(f"Memoizing engine ({_e(path.stem)}): {int(t.met.sum())} of {len(t)} targets met ("
                       + "; ".join(f"{_e(r.target)}: {r.measured:.2f} against {r.needed:g}" for r in t.itertuples()) + ").")
        b = metastable.row_bounds(m)
        if len(b):
            lo = b.iloc[0]
            reached = (f"; auto reached {'at most ' if lo['auto cut'] else ''}{lo['auto x plain']:.2f} there"
                       if pd.notna(lo["auto x plain"]) else "")
            out.append(f"Where the no-op share is {metastable.HIGH_NOOP_SHARE:g} or more ({len(b)} cell{'s' * (len(b) != 1)}), "
                       f"auto has no target, only a ceiling, plain's rows over memo's: from {number(b['row bound'].min())} "
                       f"({_name(lo.model)}, n = {lo.n:g}, T = {lo.temperature:g}{reached}) to "
                       f"{number(b['row bound'].max())}.")
    return " ".join(out)


def cost_preprint() -> str:
    return ("Not reported. The book's targets: 0.8 of the compute bound per pass on a CPU, ahead of the "
            "shared-site batch at every batch size, half the bf16 bound on a GPU; for the memoizing engine, auto at "
            "least 20x plain on a perfect trap and 0.95x at T = 2. Where most steps change nothing, auto is held "
            "to no target: on a CPU it cannot beat plain by much more than plain's rows over the distinct "
            "(state, site) rows the chains visit, which is what memo scores.")


HEADLINES = {"incompatibility": (incompatibility, incompatibility_preprint),
             "bounds": (bounds, lambda: _e(reported.BOUNDS["t_star_vs_empirical"]) + " (one 14-token sentence)."),
             "crossover": (crossover, crossover_preprint),
             "basins": (basins, basins_preprint),
             "traps": (traps, traps_preprint),
             "ground_truth": (ground_truth, ground_truth_preprint),
             "cost": (cost, cost_preprint)}


# --------------------------------------------------------------------------- the whole page
def collect(results_root: str | Path, profile: str, stamps: str | Path | None = None) -> Findings:
    """The findings of ``profile`` from ``results_root`` (``results/`` of the build). ``stamps``:
    the build's stamps folder (``<build>/<profile>/_build/stamps``, which the build passes); a
    chapter without a stamp there, or whose manifest is not the one its stamp recorded, is shown as
    not run, and no other chapter's line reads its results. Without it, a chapter folder that holds
    files but no manifest (a run that did not finish) is shown as not run."""
    spec = P.load_profile(profile)
    root = Path(results_root)
    not_run = {}
    for name in spec["chapters"]:
        why = unfinished(root / profile / name, None if stamps is None else Path(stamps) / f"{name}.json")
        if why:
            not_run[(root / profile / name).resolve()] = why
    _not_run.update(not_run)
    try:
        return _collect(root, profile, spec)
    finally:
        for folder in not_run:
            _not_run.pop(folder, None)


def _collect(root: Path, profile: str, spec: dict) -> Findings:
    chapters = sorted(spec["chapters"].items(), key=lambda kv: kv[1]["notebook"])
    models, commits, dirty, times, rows = [], {}, [], [], []
    for name, ch in chapters:
        folder = root / profile / name
        m = _manifest(folder)
        if m is not None:
            for d in m.get("models", []):
                label = d.get("name") or d.get("embedder")
                if label and label not in models:
                    models.append(label)
            commit = (m.get("git") or {}).get("commit")
            commits.setdefault((commit or "unknown")[:7], []).append(name)
            if (m.get("git") or {}).get("dirty"):
                dirty.append(name)
            if m.get("created"):
                times.append(m["created"])
        this, theirs = HEADLINES.get(name, (lambda *a: "", lambda: ""))
        rows.append({"chapter": name, "page": Path(ch["notebook"]).with_suffix(".html").name, "title": title(ch["notebook"]),
                     "this run": _row(this, folder, root, profile), "preprint": theirs() or "-"})
    ran = None
    if times:
        ts = sorted(datetime.fromisoformat(t).astimezone(timezone.utc) for t in times)
        ran = tuple(t.strftime("%Y-%m-%d %H:%M") for t in (ts[0], ts[-1]))
    head = git_commit()
    return Findings(profile=profile, description=" ".join(str(spec.get("description", "")).split()), models=models,
                    shared=[m for m in models if m in PREPRINT_MODELS], commits=commits, dirty=dirty, ran=ran,
                    built=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"),
                    build_commit=(head.get("commit") or "")[:7] or None, rows=rows)


def _row(headline, folder: Path, root: Path, profile: str) -> str:
    """A chapter's words on the page: its headline, or one line saying why its results are not read."""
    if folder.resolve() in _not_run:
        return _not_run[folder.resolve()]
    try:
        return headline(folder, root, profile) or "Not run in this build."
    except results.NotThisRun as exc:
        return str(exc)


def preamble(f: Findings) -> str:
    """What produced this build, as Markdown."""
    lines = [f"**Profile:** `{f.profile}`" + (f". {f.description}" if f.description else "")]
    lines.append("**Models:** " + (", ".join(f"`{m}`" for m in f.models) if f.models else "none ran yet") + ".")
    if f.shared:
        lines.append("Models shared with the preprint: " + ", ".join(f"`{m}`" for m in f.shared)
                     + "; their numbers compare directly, the others' only in kind.")
    elif f.models:
        lines.append("None of these models is one of the preprint's: the left column measures the preprint's "
                     "quantities on these models and says nothing about the values BERT would give (the `paper` "
                     "profile runs the preprint's models).")
    if f.commits:
        if len(f.commits) == 1:
            (c, _), = f.commits.items()
            lines.append(f"**Commit:** `{c}`" + (" with uncommitted changes" if f.dirty else "") + ".")
        else:
            lines.append("**Commits:** the chapters' results come from " + "; ".join(
                f"`{c}` ({', '.join(chs)})" for c, chs in f.commits.items())
                + (f"; run from a tree with uncommitted changes: {', '.join(f.dirty)}." if f.dirty else "."))
    if f.ran:
        lines.append(f"**Date:** chapters run between {f.ran[0]} and {f.ran[1]} UTC; this page built {f.built} UTC"
                     + (f" at commit `{f.build_commit}`." if f.build_commit else "."))
    return "\n\n".join(lines)


def frame(f: Findings) -> pd.DataFrame:
    """The findings table with HTML cells (links and names that do not wrap)."""
    return pd.DataFrame([{"chapter": f'<a href="{_e(r["page"])}">{_e(r["title"])}</a>',
                          f"this run (profile {f.profile})": r["this run"], PREPRINT: r["preprint"]} for r in f.rows])


def show(f: Findings):
    """The findings table as the page shows it."""
    from .. import tables

    df = frame(f)
    return tables.show(df, markup=set(df.columns), names=())


def chapter_times(results_root: str | Path) -> pd.DataFrame:
    """Wall time of each chapter's last execution, for every profile run into ``results_root``
    (``<profile>/timings.json``, written by the build after each chapter).

    It is shown here, on the page that is computed on every build, and not in the cost appendix:
    a chapter that read the timings would have to run again whenever any other chapter ran.
    """
    rows = []
    for path in sorted(Path(results_root).glob("*/timings.json")):
        for chapter, v in sorted(read_timings(path).items()):
            rows.append({"profile": path.parent.name, "chapter": chapter, "minutes": v["seconds"] / 60,
                         "machine": v.get("machine", ""), "when (UTC)": v.get("when", "")})
    return pd.DataFrame(rows, columns=["profile", "chapter", "minutes", "machine", "when (UTC)"])
