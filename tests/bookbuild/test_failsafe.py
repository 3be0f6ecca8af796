"""A failed run never costs the last good result, and nothing unreadable keeps the build stuck (issue 50).

1. A chapter's run writes its tables into a staging folder; its manifest, written last, commits
   them. A run that fails (an exception, a full disk, a kill between the commit's renames) leaves
   the folder's last tables and manifest byte for byte as they were.
2. A checkpoint or a stamp that cannot be read is named in one line and moved aside; the chains or
   the chapter start afresh.
3. Readers (the findings page, the crossover chapter's T*) read only tables whose bytes are the
   ones their run wrote (the manifest's digests, the build's stamp).
4. Errors name their file: a full disk in one line, a failed chapter in one line.
5. A profile file that does not load is named by the cost appendix and breaks nothing else.
6. Work that explodes (10^7 chains) is refused before compute, with its estimate.
"""
import errno
import json
import os
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from textglauber import engine, lockfile, results
from textglauber import profile as P
from textglauber.profile import loader as profile_loader
from textglauber.bench import read as bench_read
from textglauber.bookbuild import execute as build_execute
from textglauber.bookbuild import findings, plan
from textglauber.bookbuild import stamps as C
from textglauber.engine import ChainSpec
from textglauber.provenance import tree_digests

pytestmark = pytest.mark.slow          # minutes together: `pytest -m "not slow"` leaves them out

PROFILE = "smoke"


def _good_run(root: Path, chapter: str = "traps", value: int = 1) -> Path:
    """A finished run of ``chapter`` with tables a and b, and a resumable folder of chains."""
    out, _ = results.start_chapter(root, PROFILE, chapter, seed=0)
    (out / "chains").mkdir(exist_ok=True)
    (out / "chains" / "checkpoint.pt").write_bytes(b"resume from here")
    written = results.write_tables(out, {"a": pd.DataFrame({"x": [value]}), "b": pd.DataFrame({"y": [value]})})
    results.write_manifest(out, parameters={"v": value}, models=[], seed=0, tables=written)
    return out


def _leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in (root / PROFILE).iterdir() if p.name.startswith("."))


# --------------------------------------------------------------------------- 1
def test_a_run_writes_into_staging_and_commits_only_with_its_manifest(tmp_path):
    folder = _good_run(tmp_path, value=1)
    assert sorted(p.name for p in folder.iterdir()) == ["a.parquet", "b.parquet", "chains", "manifest.json"]
    out, _ = results.start_chapter(tmp_path, PROFILE, "traps", seed=0)
    assert out == folder
    results.write_tables(out, {"a": pd.DataFrame({"x": [2]})})
    assert pd.read_parquet(folder / "a.parquet").x.tolist() == [1]          # not yet: the run is open
    results.write_manifest(out, parameters={"v": 2}, models=[], seed=0, tables=["a"])
    assert sorted(p.name for p in folder.iterdir()) == ["a.parquet", "chains", "manifest.json"]   # b was not written
    assert pd.read_parquet(folder / "a.parquet").x.tolist() == [2]
    assert (folder / "chains" / "checkpoint.pt").read_bytes() == b"resume from here"
    assert _leftovers(tmp_path) == []
    manifest = results.read_manifest(folder)
    assert set(manifest["digests"]) == {"a"} and len(manifest["digests"]["a"]) == 64


def test_a_failed_run_leaves_the_last_good_tables_byte_for_byte(tmp_path):
    folder = _good_run(tmp_path)
    before = tree_digests(folder)
    out, _ = results.start_chapter(tmp_path, PROFILE, "traps", seed=0)
    results.write_tables(out, {"a": pd.DataFrame({"x": [99]})})
    # ... and the chapter raises here: no manifest, no commit
    assert tree_digests(folder) == before
    assert len(_leftovers(tmp_path)) == 1                     # this process's staging folder
    results.chapter_dir(tmp_path, PROFILE, "traps")           # the next run starts from a clean slate
    assert tree_digests(folder) == before


def test_a_staging_folder_left_by_another_process_is_no_result_and_goes(tmp_path):
    folder = _good_run(tmp_path)
    stale = tmp_path / PROFILE / ".traps.run-999999"
    stale.mkdir()
    (stale / "a.parquet").write_bytes(b"")                    # the 0-byte table of a run that hit a full disk
    before = tree_digests(folder)
    results.chapter_dir(tmp_path, PROFILE, "traps")
    assert not stale.exists() and tree_digests(folder) == before


def test_a_commit_killed_between_its_renames_is_mended_to_the_last_good_run(tmp_path):
    folder = _good_run(tmp_path, value=1)
    before = tree_digests(folder)
    old = tmp_path / PROFILE / ".traps.old-12345"
    os.replace(folder, old)                                   # the first rename happened, the second did not
    results.chapter_dir(tmp_path, PROFILE, "traps")
    assert tree_digests(folder) == before and not old.exists()
    # killed after the second rename, before the chains moved over: they come back too
    new = _good_run(tmp_path, value=2)
    chains = new / "chains"
    old.mkdir()
    os.replace(chains, old / "chains")
    results.chapter_dir(tmp_path, PROFILE, "traps")
    assert (new / "chains" / "checkpoint.pt").read_bytes() == b"resume from here" and not old.exists()


def _disk_full_after(nbytes: int):
    """A parquet writer that writes ``nbytes`` and then finds the disk full, as ENOSPC does."""
    def to_parquet(self, path, *args, **kwargs):
        Path(path).write_bytes(b"\0" * nbytes)
        raise OSError(errno.ENOSPC, "No space left on device")
    return to_parquet


def test_a_full_disk_is_one_line_naming_the_file_and_leaves_the_last_results(tmp_path, monkeypatch):
    folder = _good_run(tmp_path)
    before = tree_digests(folder)
    out, _ = results.start_chapter(tmp_path, PROFILE, "traps", seed=0)
    monkeypatch.setattr(pd.DataFrame, "to_parquet", _disk_full_after(0))
    with pytest.raises(results.ResultsWriteError) as exc:
        results.write_tables(out, {"a": pd.DataFrame({"x": [5]})})
    line = str(exc.value)
    assert "\n" not in line and "a.parquet" in line and "No space left on device" in line and "free space" in line
    assert tree_digests(folder) == before                             # no 0-byte traps table in the folder
    staging = results.staging_dir(folder)
    assert not (staging / "a.parquet").exists()                       # nor a part of one in staging


def test_a_chapter_that_fails_in_the_build_is_one_line_naming_the_error_and_the_notebook(tmp_path):
    from papermill.exceptions import PapermillExecutionError

    def fails():
        raise PapermillExecutionError(3, 4, "source", "ProfileError", "book/05_traps.ipynb: escpe: not a parameter", [])

    with pytest.raises(SystemExit) as exc:
        build_execute.failed_in_one_line(PROFILE, "traps", tmp_path, fails)
    line = str(exc.value)
    assert "\n" not in line and "ProfileError" in line and "escpe" in line and "last complete results" in line
    assert "traps.partial.ipynb" in line

    def disk_full():
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "stamps" / "traps.partial.ipynb"))

    with pytest.raises(SystemExit) as exc:
        build_execute.failed_in_one_line(PROFILE, "traps", tmp_path, disk_full)
    assert "\n" not in str(exc.value) and "traps.partial.ipynb: No space left on device" in str(exc.value)


# --------------------------------------------------------------------------- 2
def test_a_checkpoint_that_cannot_be_read_is_named_set_aside_and_the_chains_start_afresh(small_scorer, tmp_path,
                                                                                           capsys):
    init = torch.zeros(3, 4, dtype=torch.long) + small_scorer.vocab.ids[0]
    spec = ChainSpec(temperature=1.0, steps=40, record_every=2, checkpoint_every=10)
    fresh = engine.run(small_scorer, init, spec, seed=3)
    out = tmp_path / "chains"
    engine.run(small_scorer, init, spec, seed=3, out_dir=out)
    ckpt = out / "checkpoint.pt"
    ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])        # truncated
    capsys.readouterr()
    again = engine.run(small_scorer, init, spec, seed=3, out_dir=out)
    said = capsys.readouterr().out
    assert f"{ckpt}: cannot be read" in said and "start afresh" in said and said.count("\n") == 1
    assert (tmp_path / "chains.old-unreadable").is_dir()
    assert (again.states == fresh.states).all() and (again.steps == fresh.steps).all()
    # a damaged chunk is as unreadable as a damaged checkpoint
    chunk = sorted(out.glob("chunk-*.npz"))[1]
    chunk.write_bytes(chunk.read_bytes()[:-40])
    assert engine.store.read_checkpoint(out)[1].startswith(f"its chunk {chunk.name}")
    capsys.readouterr()
    third = engine.run(small_scorer, init, spec, seed=3, out_dir=out)
    assert "cannot be read" in capsys.readouterr().out and (third.states == fresh.states).all()


@pytest.mark.parametrize("text", ['{"format": 1, "key": "k", "inputs": {}, "outputs": null}', "not json {",
                                  '["a", "list"]', '{"format": 1, "key": "k", "inputs": {}, "outputs": {"results": 3}}'])
def test_a_stamp_that_cannot_be_read_is_named_set_aside_and_the_chapter_runs(tmp_path, capsys, text):
    stamp = tmp_path / "stamps" / "traps.json"
    stamp.parent.mkdir()
    stamp.write_text(text)
    complete, why = C.status(stamp, {}, tmp_path / "nb.ipynb", tmp_path / "results")
    assert not complete and "no finished run recorded" in why
    said = capsys.readouterr().out
    assert said.count("\n") == 1 and str(stamp) in said and "moved aside" in said
    assert not stamp.exists() and (tmp_path / "stamps" / "traps.json.unreadable").exists()
    assert C.status(stamp, {}, tmp_path / "nb.ipynb", tmp_path / "results")[0] is False   # and again: no error
    stamp.write_text(text)
    assert findings.unfinished(tmp_path / "results", stamp) == "Not run in this build."


def test_a_wall_time_record_that_cannot_be_read_costs_no_page_and_no_build(tmp_path, capsys):
    """A chapter's wall time is recorded after it ran and before its stamp: a damaged
    ``timings.json`` must neither stop that (the chapter would run again forever) nor break the
    findings page, which reads every profile's."""
    other = tmp_path / "offline" / "timings.json"
    other.parent.mkdir()
    other.write_text('{"traps": {"seconds": ')                       # cut short
    (tmp_path / PROFILE).mkdir()
    (tmp_path / PROFILE / "timings.json").write_text('["not", "a", "record"]')
    build_execute.record_timing(tmp_path / PROFILE, "traps", 12.3)
    assert "moved aside" in capsys.readouterr().out
    times = findings.chapter_times(tmp_path)
    assert times[["profile", "chapter"]].values.tolist() == [[PROFILE, "traps"]]


# --------------------------------------------------------------------------- 3
def _stamped(tmp_path: Path) -> tuple[Path, Path]:
    root, stamps = tmp_path / "results", tmp_path / "stamps"
    folder = _good_run(root, chapter="ground_truth")
    C.write_stamp(stamps / "ground_truth.json", {}, tmp_path / "none.ipynb", folder, 1.0)
    return root, folder


def test_a_table_from_another_run_copied_in_is_refused_in_one_line(tmp_path):
    root, folder = _stamped(tmp_path)
    assert findings.unfinished(folder, tmp_path / "stamps" / "ground_truth.json") is None
    pd.testing.assert_frame_equal(results.vouched_table(folder, "a"), pd.DataFrame({"x": [1]}))
    pd.DataFrame({"x": [1, 2, 3]}).to_parquet(folder / "a.parquet")    # valid parquet, another run's
    why = findings.unfinished(folder, tmp_path / "stamps" / "ground_truth.json")
    assert why.startswith("Not read:") and "a.parquet" in why and "\n" not in why
    row = {r["chapter"]: r["this run"] for r in findings.collect(root, PROFILE, tmp_path / "stamps").rows}
    assert row["ground_truth"] == why
    with pytest.raises(results.NotThisRun, match="digest differs from its manifest"):   # without the build's stamps
        results.vouched_table(folder, "a")


def test_the_crossover_chapter_reads_no_foreign_alpha_table(tmp_path):
    from textglauber.pages import crossover as crossover_page

    out, _ = results.start_chapter(tmp_path, PROFILE, "bounds", seed=0)
    alpha = pd.DataFrame({"model": ["m"], "t_star": [2.0]})
    results.write_tables(out, {"alpha": alpha})
    results.write_manifest(out, parameters={"seq_len": 10}, models=[], seed=0, tables=["alpha"])
    ok = crossover_page.tstar_line(out, "m", [(10, 1.5)], 8.0)
    assert "not read" not in ok
    alpha.assign(t_star=50.0).to_parquet(out / "alpha.parquet")
    assert "not read: its bytes are not those" in crossover_page.tstar_line(out, "m", [(10, 1.5)], 8.0)


# --------------------------------------------------------------------------- 5
def test_the_cost_appendix_names_a_broken_profile_file_and_reads_the_others(tmp_path, monkeypatch):
    real = P.profile_path
    (tmp_path / "broken.yaml").write_text("chapters: [unclosed\n")
    monkeypatch.setattr(profile_loader, "profile_path", lambda p: tmp_path / "broken.yaml" if p == "broken" else real(p))
    work, broken = bench_read.workloads(["smoke", "broken"])
    assert set(work.profile) == {"smoke"} and len(work)
    assert len(broken) == 1 and broken[0].startswith("params/broken.yaml is left out") and "\n" not in broken[0]


# --------------------------------------------------------------------------- 6
class _Probe:
    many, one, error = 0.16, 0.26, None

    def __call__(self):
        return self.many

    def scale(self, overhead, compute):
        return overhead + compute

    def basis(self):
        return "estimated"


def test_ten_million_escape_chains_are_refused_with_their_estimate(monkeypatch, tmp_path):
    spec = P.load_profile(PROFILE)
    sane = plan.chapter_lines(PROFILE, spec, ["traps"], tmp_path, tmp_path, "forced", _Probe())
    assert plan.too_long(PROFILE, spec, sane, plan.MAX_HOURS) is None
    spec["chapters"]["traps"]["parameters"]["escape"] = {**spec["chapters"]["traps"]["parameters"]["escape"],
                                                         "chains": 10_000_000}
    lines = plan.chapter_lines(PROFILE, spec, ["traps"], tmp_path, tmp_path, "forced", _Probe())
    assert lines[0].seconds > 1000 * sane[0].seconds                 # the estimate follows the nested count
    said = plan.too_long(PROFILE, spec, lines, plan.MAX_HOURS)
    assert "chapter traps is expected to take" in said and "--max-hours" in said and "\n" not in said
    assert plan.too_long(PROFILE, spec, lines, lines[0].seconds / 3600 + 1) is None


# --------------------------------------------------------------------------- papermill outside the build
ROOT = Path(__file__).resolve().parents[2]


def _papermill(notebook: str, out: Path, **parameters):
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    try:
        pm.execute_notebook(str(ROOT / notebook), str(out), parameters=parameters, cwd=str(ROOT / "book"),
                            kernel_name="python3", progress_bar=False, log_output=False)
    except PapermillExecutionError as exc:
        return exc
    return None


def test_a_misspelt_parameter_stops_a_papermill_run_in_its_first_cell(tmp_path):
    """Papermill only warns about a name the parameters cell lacks and injects it anyway; the
    chapter's check refuses it in one line, with the name it was probably meant to be."""
    exc = _papermill("book/90_cost.ipynb", tmp_path / "out.ipynb", results_root=str(tmp_path), escpe={"chains": 3})
    assert exc is not None and exc.ename == "ProfileError"
    assert "\n" not in exc.evalue and "escpe" in exc.evalue and "not a parameter of book/90_cost.ipynb" in exc.evalue


def test_a_papermill_run_beside_a_build_of_its_profile_is_refused_before_it_writes(tmp_path):
    import subprocess
    import sys

    lock = tmp_path / PROFILE / lockfile.LOCK_NAME
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        lock.parent.mkdir(parents=True)
        lock.write_text(json.dumps({"pid": holder.pid, "host": None, "start": lockfile.process_start(holder.pid)}))
        exc = _papermill("book/06_ground_truth.ipynb", tmp_path / "out.ipynb", results_root=str(tmp_path))
    finally:
        holder.kill()
        holder.wait()
    assert exc is not None and exc.ename == "Busy" and f"pid {holder.pid}" in exc.evalue and "\n" not in exc.evalue
    assert sorted(p.name for p in (tmp_path / PROFILE).iterdir()) == [lockfile.LOCK_NAME]   # nothing written


def test_a_papermill_run_that_fails_late_leaves_the_builds_tables_and_stamp(tmp_path, monkeypatch):
    """The issue's case: a build of the traps chapter, then a papermill run of it by hand whose
    exactness check names a token the model lacks, so it fails after all its chains ran. The
    tables, the manifest and the stamp of the build's run are all as they were, and the findings
    page still reads them."""
    from test_stale_results import _no_artifact_builds, _smoke_variant

    from textglauber.bookbuild import cli

    res, bld = tmp_path / "results", tmp_path / "build"
    _no_artifact_builds(monkeypatch)
    _smoke_variant(monkeypatch, tmp_path / "params", steps=600, checkpoint_every=200)
    assert cli.main(["--profile", PROFILE, "--chapter", "traps", "--no-book", "--results", str(res),
                     "--build-dir", str(bld)]) == 0
    folder, stamp = res.resolve() / PROFILE / "traps", C.stamp_path(bld / PROFILE, "traps")
    before, stamp_before = tree_digests(folder), stamp.read_bytes()
    prm = P.chapter_parameters(PROFILE, "traps", res)
    prm["escape"]["exact_models"] = [{**prm["escape"]["exact_models"][0], "tokens": ["the", "dog", "zzzzz"]}]
    exc = _papermill("book/05_traps.ipynb", tmp_path / "by-hand.ipynb", **prm)
    assert exc is not None and "zzzzz" in exc.evalue
    after = tree_digests(folder)
    assert {k: v for k, v in after.items() if not k.startswith("chains")} == \
        {k: v for k, v in before.items() if not k.startswith("chains")}
    assert stamp.read_bytes() == stamp_before
    assert C.status(stamp, json.loads(stamp_before)["inputs"], C.executed_notebook(bld / PROFILE, "traps"), folder)[0]
    row = {r["chapter"]: r["this run"] for r in findings.collect(res, PROFILE, C.stamps_dir(bld / PROFILE)).rows}
    assert "traps" in row["traps"] and not row["traps"].startswith(("Not run", "Not read"))


def test_a_kernel_killed_mid_chapter_is_one_line_naming_the_chapter_and_that_the_tables_were_kept(tmp_path):
    """A real kernel, killed by its own cell (as the OOM killer would): papermill's DeadKernelError
    used to end the build in some 50 lines that named no chapter."""
    import nbformat
    import papermill

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")])
    src = tmp_path / "dies.ipynb"
    nbformat.write(nb, src)
    with pytest.raises(SystemExit) as exc:
        build_execute.failed_in_one_line(PROFILE, "traps", tmp_path, lambda: papermill.execute_notebook(
            str(src), str(tmp_path / "out.ipynb"), kernel_name="python3", progress_bar=False))
    line = str(exc.value)
    assert "\n" not in line and f"[{PROFILE}] chapter 'traps' failed: its kernel died" in line
    assert "last complete results and stamp are kept" in line


def test_a_full_disk_while_writing_a_stamp_names_the_stamp(tmp_path, monkeypatch):
    """json.dump's write fails with ENOSPC and no file name; the stamp's path is named."""
    from textglauber import provenance

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(provenance.json, "dump", full)
    stamp = tmp_path / "stamps" / "traps.json"
    with pytest.raises(SystemExit) as exc:
        build_execute.failed_in_one_line(PROFILE, "traps", tmp_path, provenance.write_json_atomic, stamp, {"a": 1})
    line = str(exc.value)
    assert "\n" not in line and f"{stamp}: No space left on device" in line and "free space" in line
    assert not list(stamp.parent.glob("*.tmp"))
