"""GPU measurements committed as data (``data/gpu/``) are read back whole, kept apart by dtype, and
never read as deciding a target their cells cannot decide."""
import csv
import json
import shutil

import pandas as pd
import pytest

from textglauber.bench import gpu_data, read, report
from textglauber.pages import cost
from textglauber.paths import gpu_data_root

BERT = "bert-base shape (random weights)"
SESSION = "h200-2026-11-28"


def _engine_rows_in_files(folder, dtype):
    """The engine rows of a session's files, read with the csv module (not through the reader)."""
    out = {}
    for path in sorted(folder.glob("bench-*.csv")):
        for row in csv.DictReader(path.open()):
            if row["variant"] == "engine" and row["dtype"] == dtype:
                out[(int(row["n"]), int(row["batch"]))] = float(row["fraction_of_bound"])
    return out


def test_the_committed_session_is_read_whole_with_bf16_and_float32_kept_apart():
    """Both dtypes measured the same (model, n, batch) cells; keyed by device alone, one dtype's
    cells would replace the other's. Every engine row of the files comes back in its own table."""
    runs, problems = gpu_data.gpu_runs()
    assert problems == []
    run = {r.name: r for r in runs}[SESSION]
    assert set(run.tables) == {"cuda, bfloat16", "cuda, float32"}
    folder = gpu_data_root() / SESSION
    for key, df in run.tables.items():
        dtype = key.split(", ")[1]
        eng = df[df.variant == "engine"]
        assert set(eng.dtype) == {dtype}
        assert {(n, b): f for n, b, f in zip(eng.n, eng.batch, eng.fraction_of_bound)} == _engine_rows_in_files(folder, dtype)
    record = report.record_table(run)
    assert run.record["commit"][:7] in record[SESSION].str.cat()
    commands = [v for k, v in zip(record[""], record[SESSION]) if k.startswith("command")]
    assert len(commands) == 2 and all(c.startswith("<code>") for c in commands) and "$n" in commands[0]


def test_the_committed_session_does_not_decide_the_gpu_target_and_says_what_it_measured():
    run = {r.name: r for r in gpu_data.gpu_runs()[0]}[SESSION]
    bf16, fp32 = run.tables["cuda, bfloat16"], run.tables["cuda, float32"]
    assert not len(read.standing_targets(bf16)) and not len(read.standing_targets(fp32))
    eng = bf16[(bf16.variant == "engine") & (bf16.n == 128)].set_index("batch").fraction_of_bound
    words = report.gpu_target_sentence(bf16)
    assert "not decided" in words and f"{eng[64]:.3f} at batch 64, the largest measured" in words
    assert "read off a bf16 table only" in report.gpu_target_sentence(fp32)
    assert "no cell at the GPU target's size" in cost._gpu_words()
    assert "No session measured the chapters' wall times" in report.projection_sentence([run])
    assert "no GPU projection" in report.projection_sentence([])


@pytest.mark.parametrize("fraction, met", [(0.62, True), (0.41, False)])
def test_a_bf16_table_with_the_targets_cells_decides_it_either_way(tmp_path, fraction, met):
    """Power and safety: where batch 512 or more was measured at n = 128, the target is read off the
    least such cell, met above 0.5 and missed below it; a float32 table with the same cells decides
    nothing (its bound is the float32 one)."""
    rows = [dict(device="cuda", dtype=dt, model=BERT, n=128, batch=b, variant="engine", chain_steps_per_s=1e4,
                 fraction_of_bound=f) for dt in ("bfloat16", "float32") for b, f in ((64, 0.3), (512, 0.9), (1024, fraction))]
    pd.DataFrame(rows).to_csv(tmp_path / "bench-gpu.csv", index=False)
    tables = read.read_tables(tmp_path)
    t = read.standing_targets(tables["cuda, bfloat16"])
    assert len(t) == 1 and t.measured.iloc[0] == fraction and bool(t.met.iloc[0]) is met and t.cells.iloc[0] == 2
    assert report.gpu_target_sentence(tables["cuda, bfloat16"]) == ""
    assert not len(read.standing_targets(tables["cuda, float32"]))


def test_a_session_folder_that_cannot_be_read_is_named_and_the_others_kept(tmp_path):
    good = tmp_path / "a-good"
    shutil.copytree(gpu_data_root() / SESSION, good)
    shutil.copytree(good, tmp_path / "b-no-record")
    (tmp_path / "b-no-record" / gpu_data.RECORD).unlink()
    shutil.copytree(good, tmp_path / "c-short-record")
    rec = json.loads((good / gpu_data.RECORD).read_text())
    del rec["commit"]
    (tmp_path / "c-short-record" / gpu_data.RECORD).write_text(json.dumps(rec))
    (tmp_path / "d-cpu-only").mkdir()
    (tmp_path / "d-cpu-only" / gpu_data.RECORD).write_text((good / gpu_data.RECORD).read_text())
    pd.DataFrame([dict(device="cpu", dtype="float32", model=BERT, n=20, batch=1, variant="engine",
                       chain_steps_per_s=1.0, fraction_of_bound=0.1)]).to_csv(tmp_path / "d-cpu-only" / "bench-x.csv")
    runs, problems = gpu_data.gpu_runs(tmp_path)
    assert [r.name for r in runs] == ["a-good"]
    assert [p.split(":")[0] for p in problems] == ["b-no-record", "c-short-record", "d-cpu-only"]
    assert "lacks commit" in problems[1]


def test_a_committed_table_cut_mid_row_is_named_with_its_rows_and_the_session_left_out(tmp_path):
    """A file cut mid-row still parses (pandas fills the cut row with NaN), so only the record's
    digest and row count tell it apart: the session is named, the file and its complete rows given."""
    folder = tmp_path / SESSION
    shutil.copytree(gpu_data_root() / SESSION, folder)
    victim = folder / "bench-h200-n128-bfloat16.csv"
    text = victim.read_text()
    victim.write_text(text[: text.rindex("\n", 0, len(text) - 1) - 40])      # the last row gone, the one before cut
    runs, problems = gpu_data.gpu_runs(tmp_path)
    assert runs == [] and len(problems) == 1
    line = problems[0]
    assert line.startswith(f"{SESSION}: bench-h200-n128-bfloat16.csv is not the file its record lists")
    assert "(7 complete rows of 8, 21 columns; the record: 9 rows, 21 columns)" in line
    assert "\n" not in line


def test_a_table_not_listed_or_missing_is_named(tmp_path):
    folder = tmp_path / SESSION
    shutil.copytree(gpu_data_root() / SESSION, folder)
    shutil.copy(folder / "bench-h200-n20-float32.csv", folder / "bench-extra.csv")
    (folder / "bench-h200-n64-float32.csv").unlink()
    problems = gpu_data.gpu_runs(tmp_path)[1]
    assert "bench-extra.csv is not listed in record.json" in problems[0]
    assert "bench-h200-n64-float32.csv is missing" in problems[0]


def test_the_committed_record_lists_exactly_its_tables():
    folder = gpu_data_root() / SESSION
    record = json.loads((folder / gpu_data.RECORD).read_text())
    assert sorted(record["files"]) == sorted(p.name for p in folder.glob("*.csv"))
    assert all(record["files"][p.name] == gpu_data.table_entry(p) for p in folder.glob("*.csv"))
