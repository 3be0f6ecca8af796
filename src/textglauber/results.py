"""Results are build products: ``results/<profile>/<chapter>/`` holds parquet tables and a
``manifest.json`` that says how they were made (commit, parameters, models, seed, versions)."""
from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from .provenance import git_commit, versions

RESUMABLE = ("chains",)        # folders a chapter resumes from (engine.run's chunks and checkpoint)


def resumable(name: str) -> bool:
    """Whether an entry of a chapter's results folder is kept from one run to the next: a resumable
    folder, or the one earlier run of it that :func:`textglauber.engine.run` moved aside."""
    return any(name == r or name.startswith(f"{r}.old-") for r in RESUMABLE)


def chapter_dir(results_root: str | Path, profile: str, chapter: str) -> Path:
    """The chapter's results folder, emptied of everything an earlier run wrote except what it
    resumes from (:data:`RESUMABLE`). Every chapter calls this first, so its folder holds exactly
    what its last run wrote: a table that this run does not write (traps found at one temperature
    and none at another) is gone, inside the build or in a papermill run outside it. Until the
    run writes its manifest (last), the folder has none, and nothing takes it for finished."""
    d = Path(results_root) / profile / chapter
    d.mkdir(parents=True, exist_ok=True)
    for entry in sorted(d.iterdir(), key=lambda e: (e.name != "manifest.json", e.name)):   # the manifest first
        if resumable(entry.name):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return d


def write_manifest(folder: str | Path, *, parameters: dict, models: list[dict], seed: int,
                   tables: list[str], notes: list[str] | None = None, name: str = "manifest.json",
                   extra: dict | None = None) -> Path:
    """The JSON record beside a run's tables: time, commit, parameters, models, seed, tables,
    versions, notes, and any ``extra`` fields (the benchmark adds its command and machine)."""
    folder = Path(folder)
    manifest = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "git": git_commit(), "parameters": parameters, "models": models, "seed": seed,
                "tables": tables, "versions": versions(), "notes": notes or [], **(extra or {})}
    path = folder / name
    tmp = folder / f".{name}.tmp"            # whole or not at all: the manifest is what says a run finished
    tmp.write_text(json.dumps(manifest, indent=2, default=str))
    os.replace(tmp, path)
    return path


def listed_tables(folder: str | Path) -> list[str] | None:
    """The tables a chapter's manifest lists (its run wrote them), or None without a readable
    manifest. A table in the folder that the manifest does not list is no result of that run."""
    try:
        tables = json.loads((Path(folder) / "manifest.json").read_text()).get("tables")
    except (OSError, ValueError, AttributeError):
        return None
    return [str(t) for t in tables] if isinstance(tables, list) else []


def write_table(df: pd.DataFrame, folder: str | Path, name: str) -> Path:
    path = Path(folder) / f"{name}.parquet"
    df.to_parquet(path, index=False)
    return path


def write_tables(folder: str | Path, frames: dict) -> list[str]:
    """Each table of ``frames`` (name -> DataFrame, in order) that is not None, written with
    :func:`write_table`; returns the names written, for the manifest."""
    written = []
    for name, df in frames.items():
        if df is not None:
            write_table(df, folder, name)
            written.append(name)
    return written


def start_chapter(results_root: str | Path, profile: str, chapter: str, seed: int):
    """What every chapter does first: quiet warnings, the book's figure style, the chapter's
    emptied results folder (:func:`chapter_dir`) and the run's one seeded generator.
    Returns ``(out, gen)``."""
    import warnings

    import torch

    from . import figures

    warnings.filterwarnings("ignore")
    figures.setup()                                # text no smaller than the page's small text
    out = chapter_dir(results_root, profile, chapter)
    return out, torch.Generator().manual_seed(int(seed))
