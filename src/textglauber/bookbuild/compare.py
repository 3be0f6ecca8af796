"""Compare two results folders, e.g. ``results/smoke`` of two builds: are the tables the same?

    python -m textglauber.bookbuild.compare A B                 # exact: every value bit for bit
    python -m textglauber.bookbuild.compare A B --rtol 1e-12    # floats within a relative tolerance

Every table (``*.parquet`` and ``*.csv``, at any depth) is paired with the one at the same relative
path on the other side; a table on one side only is a difference. For each pair: the columns (names
and order), each column's dtype, the row count, the index, then the values row by row. Values are
first compared exactly (floats bit for bit, NaN equal to NaN, 0.0 not equal to -0.0); a float
column that is not exact gets its largest absolute and relative difference, and it passes where
every value is within ``atol + rtol * |b|`` (NaN and infinities where the other side has the same).
Other columns must be equal. Each ``manifest.json`` is compared without the fields meant to differ
from run to run (``created``, ``git``, ``versions``, ``timings``): parameters, seed, models and the
list of tables must be the same. Other files are not compared.

The exit status is 0 only when nothing differs beyond the tolerance (within it is reported, and
passes).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..results import VOLATILE_MANIFEST_FIELDS

TABLES = ("*.parquet", "*.csv")
IGNORED_MANIFEST_FIELDS = (*VOLATILE_MANIFEST_FIELDS, "timings")


@dataclass
class Difference:
    """One difference between the two folders. ``what``: ``only in A``, ``only in B``, ``unreadable``,
    ``columns``, ``dtype``, ``rows``, ``index``, ``values`` or ``manifest``; ``passes``: within the
    tolerance (a float column's values only)."""
    path: str
    what: str
    detail: str
    column: str | None = None
    passes: bool = False
    max_abs: float | None = None
    max_rel: float | None = None

    def text(self) -> str:
        where = f"{self.path}" + (f" [{self.column}]" if self.column is not None else "")
        return f"{'within tolerance' if self.passes else 'DIFFERS'}: {where}: {self.what}: {self.detail}"


# --------------------------------------------------------------------------- values
def _float_diff(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> dict | None:
    """None where two float arrays are equal bit for bit (any NaN equal to any NaN); else the count
    of unequal values, the largest absolute and relative differences, and whether all are within
    the tolerance."""
    a, b = (np.ascontiguousarray(x, dtype=np.float64) for x in (a, b))
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    same = (a.view(np.int64) == b.view(np.int64)) | (nan_a & nan_b)
    if same.all():
        return None
    bad = ~same
    finite = bad & np.isfinite(a) & np.isfinite(b)
    gap = np.abs(a[finite] - b[finite])
    scale = np.maximum(np.abs(a[finite]), np.abs(b[finite]))
    rel = np.divide(gap, scale, out=np.zeros_like(gap), where=scale > 0)
    within = bool(finite[bad].all() and (gap <= atol + rtol * np.abs(b[finite])).all())
    return {"count": int(bad.sum()), "first": int(np.flatnonzero(bad)[0]), "within": within,
            "max_abs": float(gap.max()) if gap.size else float("inf"),
            "max_rel": float(rel.max()) if rel.size else float("inf")}


def _same(x, y) -> bool:
    """Two cells equal, arrays and lists element by element, missing values equal to each other."""
    if isinstance(x, (np.ndarray, list, tuple)) or isinstance(y, (np.ndarray, list, tuple)):
        try:
            return len(x) == len(y) and all(_same(u, v) for u, v in zip(x, y))
        except TypeError:
            return False
    if isinstance(x, float) and isinstance(y, float):
        return _float_diff(np.array([x]), np.array([y]), 0.0, 0.0) is None
    missing_x, missing_y = x is None or x is pd.NA or x is pd.NaT, y is None or y is pd.NA or y is pd.NaT
    if missing_x or missing_y:
        return missing_x and missing_y
    return bool(x == y)


def _column(path: str, name, a: pd.Series, b: pd.Series, rtol: float, atol: float) -> Difference | None:
    """The difference between two columns of the same dtype and length, or None."""
    column = str(name)
    if isinstance(a.dtype, np.dtype) and a.dtype.kind == "f":
        d = _float_diff(a.to_numpy(), b.to_numpy(), rtol, atol)
        if d is None:
            return None
        return Difference(path, "values", f"{d['count']} of {len(a)} values differ (first at row {d['first']}); "
                          f"largest absolute difference {d['max_abs']:.3g}, relative {d['max_rel']:.3g}",
                          column, d["within"], d["max_abs"], d["max_rel"])
    unequal = [i for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())) if not _same(x, y)]
    if not unequal:
        return None
    detail = f"{len(unequal)} of {len(a)} values differ (first at row {unequal[0]}: {a.iloc[unequal[0]]!r} " \
             f"against {b.iloc[unequal[0]]!r})"
    if isinstance(a.dtype, np.dtype) and a.dtype.kind in "iu":
        gap = np.abs(a.to_numpy().astype(np.float64) - b.to_numpy().astype(np.float64)).max()
        return Difference(path, "values", detail + f"; largest absolute difference {gap:.3g}", column, max_abs=float(gap))
    return Difference(path, "values", detail, column)


# --------------------------------------------------------------------------- tables
def _read(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


def _shape(rel: str, a: pd.DataFrame, b: pd.DataFrame) -> list[Difference]:
    """Differences of columns, dtypes and row count (the values are compared only where none)."""
    out = []
    cols_a, cols_b = [str(c) for c in a.columns], [str(c) for c in b.columns]
    if cols_a != cols_b:
        only_a = [c for c in cols_a if c not in cols_b]
        only_b = [c for c in cols_b if c not in cols_a]
        detail = "; ".join(s for s in (f"only in A: {only_a}" if only_a else "",
                                       f"only in B: {only_b}" if only_b else "") if s) or "same names, another order"
        out.append(Difference(rel, "columns", detail))
    for c in [c for c in a.columns if c in b.columns]:
        if a[c].dtype != b[c].dtype:
            out.append(Difference(rel, "dtype", f"{a[c].dtype} against {b[c].dtype}", str(c)))
    if len(a) != len(b):
        out.append(Difference(rel, "rows", f"{len(a)} against {len(b)}"))
    return out


def compare_tables(rel: str, path_a: Path, path_b: Path, rtol: float = 0.0, atol: float = 0.0) -> list[Difference]:
    """The differences between one table on each side (none where the files are the same bytes)."""
    if path_a.read_bytes() == path_b.read_bytes():
        return []
    try:
        a, b = _read(path_a), _read(path_b)
    except Exception as exc:                         # a table one side cannot read is a difference
        return [Difference(rel, "unreadable", f"{type(exc).__name__}: {exc}")]
    out = _shape(rel, a, b)
    if len(a) != len(b):
        return out
    if not a.index.equals(b.index):
        out.append(Difference(rel, "index", "the row labels differ"))
    typed = {d.column for d in out if d.what == "dtype"}
    for c in [c for c in a.columns if c in b.columns and str(c) not in typed]:
        d = _column(rel, c, a[c].reset_index(drop=True), b[c].reset_index(drop=True), rtol, atol)
        if d is not None:
            out.append(d)
    return out


# --------------------------------------------------------------------------- manifests
def _changed_keys(a, b, prefix: str = "") -> list[str]:
    """The keys (dotted, into nested mappings) whose values differ."""
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return [prefix or "(the whole value)"] if a != b else []
    keys = sorted(set(a) | set(b), key=str)
    return [k for key in keys for k in _changed_keys(a.get(key), b.get(key), f"{prefix}{key}" if not prefix
                                                      else f"{prefix}.{key}")]


def compare_manifests(rel: str, path_a: Path, path_b: Path) -> list[Difference]:
    """What differs between two manifests beyond the fields meant to differ."""
    try:
        a, b = (json.loads(p.read_text()) for p in (path_a, path_b))
    except (OSError, ValueError) as exc:
        return [Difference(rel, "unreadable", f"{type(exc).__name__}: {exc}")]
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return [] if a == b else [Difference(rel, "manifest", "not a JSON object on both sides, and not the same")]
    a, b = ({k: v for k, v in m.items() if k not in IGNORED_MANIFEST_FIELDS} for m in (a, b))
    return [Difference(rel, "manifest", f"{key}: {_at(a, key)!r} against {_at(b, key)!r}")
            for key in _changed_keys(a, b)]


def _at(record: dict, dotted: str):
    for part in dotted.split("."):
        record = record.get(part) if isinstance(record, dict) else None
    return record


# --------------------------------------------------------------------------- folders
def _files(folder: Path, patterns) -> dict[str, Path]:
    return {p.relative_to(folder).as_posix(): p for pattern in patterns for p in folder.rglob(pattern) if p.is_file()}


def compare(a: str | Path, b: str | Path, rtol: float = 0.0, atol: float = 0.0) -> list[Difference]:
    """Every difference between two results folders (see the module docstring), tables and
    manifests in the order of their paths. Those with ``passes`` are within the tolerance."""
    a, b = Path(a), Path(b)
    for folder in (a, b):
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder} is no folder")
    out = []
    for patterns, pair in ((TABLES, lambda r, x, y: compare_tables(r, x, y, rtol, atol)),
                           (("manifest.json",), compare_manifests)):
        files_a, files_b = _files(a, patterns), _files(b, patterns)
        for rel in sorted(set(files_a) | set(files_b)):
            if rel not in files_b:
                out.append(Difference(rel, "only in A", str(a)))
            elif rel not in files_a:
                out.append(Difference(rel, "only in B", str(b)))
            else:
                out += pair(rel, files_a[rel], files_b[rel])
    return sorted(out, key=lambda d: d.path)


def failures(differences: list[Difference]) -> list[Difference]:
    """The differences beyond the tolerance."""
    return [d for d in differences if not d.passes]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m textglauber.bookbuild.compare", description=__doc__.split("\n")[0])
    ap.add_argument("a", help="a results folder (A)")
    ap.add_argument("b", help="the results folder to compare it with (B)")
    ap.add_argument("--rtol", type=float, default=0.0, help="relative tolerance for float values (default 0: exact)")
    ap.add_argument("--atol", type=float, default=0.0, help="absolute tolerance for float values (default 0: exact)")
    args = ap.parse_args(argv)
    try:
        found = compare(args.a, args.b, args.rtol, args.atol)
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 2
    for d in found:
        print(d.text())
    tables = len(set(_files(Path(args.a), TABLES)) | set(_files(Path(args.b), TABLES)))
    bad = failures(found)
    print(f"{tables} tables compared: " + (f"{len({d.path for d in bad})} files differ" if bad else
                                           "equal" + (" within the tolerance" if found else "")))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
