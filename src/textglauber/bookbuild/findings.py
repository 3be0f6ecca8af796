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

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from .. import profile as P
from .. import results
from .. import reported
from ..pages import Headline
from ..pages import basins as basins_page
from ..pages import bounds as bounds_page
from ..pages import cost as cost_page
from ..pages import crossover as crossover_page
from ..pages import ground_truth as ground_truth_page
from ..pages import incompatibility as incompatibility_page
from ..pages import traps as traps_page
from ..pages.reading import NOT_RUN, esc, manifest
from ..paths import repo_root
from ..provenance import git_commit
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
HEADLINES = {"incompatibility": incompatibility_page, "bounds": bounds_page, "crossover": crossover_page,
             "basins": basins_page, "traps": traps_page, "ground_truth": ground_truth_page, "cost": cost_page}
"""Each chapter's page module: its ``headline(folder, root, profile)`` and ``preprint()``."""


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
    NOT_RUN.update(not_run)
    try:
        return _collect(root, profile, spec)
    finally:
        for folder in not_run:
            NOT_RUN.pop(folder, None)


def _collect(root: Path, profile: str, spec: dict) -> Findings:
    chapters = sorted(spec["chapters"].items(), key=lambda kv: kv[1]["notebook"])
    models, commits, dirty, times, rows = [], {}, [], [], []
    for name, ch in chapters:
        folder = root / profile / name
        m = manifest(folder)
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
        page = HEADLINES.get(name)
        rows.append({"chapter": name, "page": Path(ch["notebook"]).with_suffix(".html").name, "title": title(ch["notebook"]),
                     "this run": _row(page, folder, root, profile), "preprint": (page.preprint() if page else "") or "-"})
    ran = None
    if times:
        ts = sorted(datetime.fromisoformat(t).astimezone(timezone.utc) for t in times)
        ran = tuple(t.strftime("%Y-%m-%d %H:%M") for t in (ts[0], ts[-1]))
    head = git_commit()
    return Findings(profile=profile, description=" ".join(str(spec.get("description", "")).split()), models=models,
                    shared=[m for m in models if m in PREPRINT_MODELS], commits=commits, dirty=dirty, ran=ran,
                    built=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"),
                    build_commit=(head.get("commit") or "")[:7] or None, rows=rows)


def _row(page, folder: Path, root: Path, profile: str) -> str:
    """A chapter's cell on the page: its verdict, with the details a click away; or one line saying
    why its results are not read."""
    if folder.resolve() in NOT_RUN:
        return NOT_RUN[folder.resolve()]
    try:
        found = page.headline(folder, root, profile) if page else None
    except results.NotThisRun as exc:
        return str(exc)
    except KeyError as exc:                # tables written by a version of the code that wrote other columns
        return (f"Not read: this code reads {exc} from {folder.name}'s tables, which do not hold it (they were "
                "written by another version of the code); run the chapter again.")
    return cell(found) if found else "Not run in this build."


def cell(found: Headline) -> str:
    """A headline as a findings cell (HTML): the verdict, then its details folded under it."""
    if not found.details:
        return found.verdict
    return f"{found.verdict}<details><summary>details</summary>{found.details}</details>"


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
    return pd.DataFrame([{"chapter": f'<a href="{esc(r["page"])}">{esc(r["title"])}</a>',
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
