"""GPU measurements kept as data: ``data/gpu/<run>/`` holds the benchmark tables of one GPU session
and ``record.json`` (machine, versions, commit, commands, date, and what was not measured). No CPU
machine can redo them, so they are committed rather than rebuilt; the cost appendix reads them
beside this build's own benchmark (:mod:`textglauber.bench.read`)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..paths import gpu_data_root
from .read import read_tables

RECORD = "record.json"
RECORD_KEYS = ("date", "machine", "versions", "commit", "commands", "not_measured")


@dataclass
class GpuRun:
    """One committed GPU session: its folder name, record and tables (keyed as :func:`read_tables` keys them)."""
    name: str
    record: dict
    tables: dict[str, pd.DataFrame]


def gpu_runs(root: Path | None = None) -> tuple[list[GpuRun], list[str]]:
    """The committed GPU sessions under ``root`` (by folder name, oldest first), and one line for
    each folder that is left out: no readable record, a record without one of
    :data:`RECORD_KEYS`, or no table measured on a GPU."""
    root = gpu_data_root() if root is None else Path(root)
    runs, problems = [], []
    for folder in sorted(p for p in root.glob("*") if p.is_dir()) if root.is_dir() else []:
        try:
            record = json.loads((folder / RECORD).read_text())
        except (OSError, ValueError):
            problems.append(f"{folder.name}: no readable {RECORD}, so its tables are left out")
            continue
        missing = [k for k in RECORD_KEYS if not isinstance(record, dict) or k not in record]
        if missing:
            problems.append(f"{folder.name}: {RECORD} lacks {', '.join(missing)}, so its tables are left out")
            continue
        tables = {k: t for k, t in read_tables(folder, order="name").items() if str(t.device.iloc[0]).startswith("cuda")}
        if not tables:
            problems.append(f"{folder.name}: no benchmark table measured on a GPU")
            continue
        runs.append(GpuRun(folder.name, record, tables))
    return runs, problems

