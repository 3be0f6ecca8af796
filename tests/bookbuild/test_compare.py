"""The results comparer (textglauber.bookbuild.compare) on two small synthetic results folders: equal
folders pass, and each kind of change fails exactly where it is, or passes within a tolerance."""
import json
import shutil

import numpy as np
import pandas as pd
import pytest

from textglauber.bookbuild import compare as C


def _manifest(**changes) -> dict:
    m = {"created": "2026-01-01T00:00:00+00:00", "git": {"commit": "abc", "dirty": False},
         "parameters": {"steps": 100, "temperature": 0.5}, "models": [{"name": "tiny-bert"}], "seed": 7,
         "tables": ["summary"], "versions": {"python": "3.11"}, "notes": []}
    return {**m, **changes}


@pytest.fixture
def folders(tmp_path):
    """A: two chapters' tables (one in a subfolder, one csv) and a manifest; B: a copy of A."""
    a = tmp_path / "a"
    (a / "traps" / "chains").mkdir(parents=True)
    (a / "bench").mkdir()
    pd.DataFrame({"model": ["x", "y", "z"], "n": np.array([6, 10, 16], dtype=np.int64),
                  "value": [0.1, 0.2, np.nan], "share": np.array([0.5, 0.25, 0.125], dtype=np.float32)}
                 ).to_parquet(a / "traps" / "summary.parquet", index=False)
    pd.DataFrame({"step": [1, 2], "energy": [-1.5, -2.25]}).to_parquet(a / "traps" / "chains" / "trace.parquet", index=False)
    pd.DataFrame({"batch": [1, 64], "seconds": [0.01, 0.3]}).to_csv(a / "bench" / "bench-cpu.csv", index=False)
    (a / "traps" / "manifest.json").write_text(json.dumps(_manifest()))
    b = tmp_path / "b"
    shutil.copytree(a, b)
    return a, b


def _rewrite(path, change):
    df = pd.read_parquet(path)
    df = change(df)
    path.unlink()
    df.to_parquet(path, index=False)


def _one(differences):
    assert len(differences) == 1, [d.text() for d in differences]
    return differences[0]


def test_equal_folders_pass(folders, capsys):
    a, b = folders
    assert C.compare(a, b) == []
    assert C.main([str(a), str(b)]) == 0
    assert "3 tables compared: equal" in capsys.readouterr().out


def test_equal_tables_written_again_pass(folders):
    """Other bytes, same table (a parquet file written anew): compared by value, equal."""
    a, b = folders
    _rewrite(b / "traps" / "summary.parquet", lambda df: df.copy())
    assert C.compare(a, b) == []


def test_one_ulp_fails_exactly_and_passes_a_tolerance(folders, capsys):
    a, b = folders

    def nudge(df):
        df.loc[1, "value"] = np.nextafter(df.loc[1, "value"], 1.0)
        return df

    _rewrite(b / "traps" / "summary.parquet", nudge)
    d = _one(C.compare(a, b))
    assert (d.path, d.what, d.column, d.passes) == ("traps/summary.parquet", "values", "value", False)
    assert "1 of 3 values differ (first at row 1)" in d.detail
    assert d.max_abs == pytest.approx(np.spacing(0.2)) and 0 < d.max_rel < 1e-15
    assert C.main([str(a), str(b)]) == 1
    d = _one(C.compare(a, b, rtol=1e-12))
    assert d.passes and C.failures([d]) == []
    assert C.main([str(a), str(b), "--rtol", "1e-12"]) == 0
    assert "equal within the tolerance" in capsys.readouterr().out.splitlines()[-1]


def test_a_change_of_1e_3_fails_the_tolerance(folders):
    a, b = folders

    def shift(df):
        df.loc[0, "value"] += 1e-3
        return df

    _rewrite(b / "traps" / "summary.parquet", shift)
    d = _one(C.compare(a, b, rtol=1e-12, atol=1e-12))
    assert (d.what, d.column, d.passes) == ("values", "value", False)
    assert d.max_abs == pytest.approx(1e-3)


def test_a_reordered_row_fails(folders):
    a, b = folders
    _rewrite(b / "traps" / "chains" / "trace.parquet", lambda df: df.iloc[::-1].reset_index(drop=True))
    found = C.compare(a, b, rtol=1e-12)
    assert {(d.path, d.what, d.column) for d in found} == {("traps/chains/trace.parquet", "values", "step"),
                                                          ("traps/chains/trace.parquet", "values", "energy")}
    assert C.failures(found) == found


def test_a_missing_table_fails(folders):
    a, b = folders
    (b / "bench" / "bench-cpu.csv").unlink()
    d = _one(C.compare(a, b))
    assert (d.path, d.what, d.passes) == ("bench/bench-cpu.csv", "only in A", False)
    d = _one(C.compare(b, a))
    assert (d.path, d.what) == ("bench/bench-cpu.csv", "only in B")


def test_an_extra_column_fails(folders):
    a, b = folders
    _rewrite(b / "traps" / "summary.parquet", lambda df: df.assign(extra=1))
    d = _one(C.compare(a, b))
    assert (d.path, d.what, d.passes) == ("traps/summary.parquet", "columns", False)
    assert d.detail == "only in B: ['extra']"


def test_a_changed_dtype_fails(folders):
    a, b = folders
    _rewrite(b / "traps" / "summary.parquet", lambda df: df.astype({"share": np.float64}))
    d = _one(C.compare(a, b, rtol=1e-3))
    assert (d.path, d.what, d.column, d.passes) == ("traps/summary.parquet", "dtype", "share", False)
    assert d.detail == "float32 against float64"


def test_a_changed_csv_value_and_row_count(folders):
    a, b = folders
    pd.DataFrame({"batch": [1, 65], "seconds": [0.01, 0.3]}).to_csv(b / "bench" / "bench-cpu.csv", index=False)
    d = _one(C.compare(a, b))
    assert (d.what, d.column) == ("values", "batch") and "largest absolute difference 1" in d.detail
    pd.DataFrame({"batch": [1], "seconds": [0.01]}).to_csv(b / "bench" / "bench-cpu.csv", index=False)
    assert _one(C.compare(a, b)).what == "rows"


def test_manifests_differ_in_what_they_record_and_not_in_when(folders):
    a, b = folders
    path = b / "traps" / "manifest.json"
    path.write_text(json.dumps(_manifest(created="2027-05-05T10:00:00+00:00", git={"commit": "def"},
                                         versions={"python": "3.12"}, timings={"x": 1})))
    assert C.compare(a, b) == []
    path.write_text(json.dumps(_manifest(seed=8, parameters={"steps": 200, "temperature": 0.5})))
    found = C.compare(a, b)
    assert [(d.what, d.detail) for d in found] == [("manifest", "parameters.steps: 100 against 200"),
                                                   ("manifest", "seed: 7 against 8")]
    path.write_text(json.dumps(_manifest(tables=["summary", "traps"], models=[{"name": "tiny-other"}])))
    assert {d.detail.split(":")[0] for d in C.compare(a, b)} == {"models", "tables"}
