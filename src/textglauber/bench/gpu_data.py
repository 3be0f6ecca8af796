"""GPU measurements kept as data: ``data/gpu/<run>/`` holds the benchmark tables of one GPU session
and ``record.json`` (machine, versions, commit, commands, date, what was not measured, and each table's
rows, columns and digest, against which the committed files are checked). No CPU
machine can redo them, so they are committed rather than rebuilt; the cost appendix reads them
beside this build's own benchmark (:mod:`textglauber.bench.read`)."""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..paths import gpu_data_root
from ..provenance import file_digest
from .read import read_tables

RECORD = "record.json"
RECORD_KEYS = ("date", "machine", "versions", "commit", "commands", "not_measured", "files")


@dataclass
class GpuRun:
    """One committed GPU session: its folder name, record and tables (keyed as :func:`read_tables` keys them)."""
    name: str
    record: dict
    tables: dict[str, pd.DataFrame]


def gpu_runs(root: Path | None = None) -> tuple[list[GpuRun], list[str]]:
    """The committed GPU sessions under ``root`` (by folder name, oldest first), and one line for
    each folder that is left out: no readable record, a record without one of
    :data:`RECORD_KEYS`, a table that is not as its record lists it (:func:`file_problems`), or no
    table measured on a GPU."""
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
        bad = file_problems(folder, record["files"])
        if bad:
            problems.append(f"{folder.name}: {'; '.join(bad)}, so its tables are left out")
            continue
        tables = {k: t for k, t in read_tables(folder, order="name").items() if str(t.device.iloc[0]).startswith("cuda")}
        if not tables:
            problems.append(f"{folder.name}: no benchmark table measured on a GPU")
            continue
        runs.append(GpuRun(folder.name, record, tables))
    return runs, problems



def table_entry(path: Path) -> dict:
    """What a record says of one committed table: data rows, columns and the digest of its bytes."""
    rows, columns, _ = _shape(path)
    return {"rows": rows, "columns": columns, "sha256": file_digest(path)}


def _shape(path: Path) -> tuple[int, int, int]:
    """(data rows, header columns, complete rows: as many fields as the header; a field may be empty,
    as a measurement the benchmark did not take is)."""
    with open(path, newline="") as fh:
        lines = list(csv.reader(fh))
    if not lines:
        return 0, 0, 0
    width = len(lines[0])
    return len(lines) - 1, width, sum(len(r) == width for r in lines[1:])


def file_problems(folder: Path, files) -> list[str]:
    """One phrase for each table of ``folder`` that is not as the record's ``files`` lists it (name ->
    :func:`table_entry`): missing, not listed, or with other bytes, named with its rows and columns
    against the record's (a file cut mid-row shows fewer complete rows)."""
    if not isinstance(files, dict):
        return [f"{RECORD}'s files is not a mapping of table name to rows, columns and sha256"]
    out = [f"{p.name} is not listed in {RECORD}" for p in sorted(folder.glob("*.csv")) if p.name not in files]
    for name, want in sorted(files.items()):
        path = folder / name
        if not path.is_file():
            out.append(f"{name} is missing")
        elif not isinstance(want, dict) or file_digest(path) != want.get("sha256"):
            rows, columns, complete = _shape(path)
            want = want if isinstance(want, dict) else {}
            out.append(f"{name} is not the file its record lists ({complete} complete rows of {rows}, "
                       f"{columns} columns; the record: {want.get('rows')} rows, {want.get('columns')} columns)")
    return out
