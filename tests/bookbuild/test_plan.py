"""The build's plan and progress lines (textglauber.bookbuild.plan, .estimates and .progress): last
recorded times where there are some, probe-based estimates that scale with the parameters where
there are none, the artifacts' lines, and the progress formatter and watcher."""
import io
import json
import subprocess
import sys
import time

import pytest
import yaml

from textglauber import profile as P
from textglauber import durations, reach, train_mlm
from textglauber.bookbuild import estimates, plan, progress
from textglauber.bookbuild import stamps as cache
from textglauber.profile.messages import RENAMED
from textglauber.paths import repo_root

REF = (estimates.REFERENCE_PROBE_ONE_S, estimates.REFERENCE_PROBE_S)      # a machine as fast as the calibration one


def no_probe():
    raise AssertionError("the probe ran although every line had a recorded time")


def offline():
    return P.load_profile("offline")


def lines_for(spec, chapters, tmp_path, status, measure=lambda: REF, forced=None, profile="offline"):
    plan.EXPECTED.clear()
    return plan.chapter_lines(profile, spec, chapters, tmp_path / "build" / profile, tmp_path / "results", forced,
                              estimates.Probe(measure), status=status)


def variable(chapter, prm):
    """A chapter's estimate above its fixed time at the reference probe, from its two parts of work
    (encoder, bookkeeping) at its fitted rates."""
    _, b, c = estimates.seconds.constants()[chapter]
    encoder, books = estimates.work_parts(chapter, prm)
    return b * encoder + c * books


def runs(ch):
    return False, "its inputs changed: parameters"


# --------------------------------------------------------------------------- last runs
def test_a_recorded_time_in_timings_json_is_the_expected_time(tmp_path):
    (tmp_path / "results" / "offline").mkdir(parents=True)
    (tmp_path / "results" / "offline" / "timings.json").write_text(json.dumps(
        {"crossover": {"seconds": 790.0, "machine": "x86_64, 2 cores", "when": "2026-11-24 10:00"},
         "traps": {"seconds": 345.0}}))
    got = {ln.name: ln for ln in lines_for(offline(), ["crossover", "traps"], tmp_path, runs, measure=no_probe)}
    assert got["crossover"].action == "run" and got["crossover"].seconds == 790.0
    assert got["crossover"].basis == "last run: 790 s"
    assert "last run: 790 s" in got["crossover"].text()
    assert got["traps"].seconds == 345.0 and got["traps"].basis == "last run: 345 s"
    assert plan.EXPECTED[("offline", "crossover")] == (790.0, "last run: 790 s")


def test_the_stamp_wins_and_changed_parameters_rescale_its_time(tmp_path):
    spec = offline()
    staged = tmp_path / "build" / "offline"
    prm = P.chapter_parameters("offline", "traps", tmp_path / "results", spec=spec)
    prm.pop("results_root")
    stamp = cache.stamp_path(staged, "traps")
    cache.write_stamp(stamp, {"parameters": prm}, tmp_path / "none.ipynb", tmp_path / "none", 300.0)
    (tmp_path / "results" / "offline").mkdir(parents=True)
    (tmp_path / "results" / "offline" / "timings.json").write_text(json.dumps({"traps": {"seconds": 999.0}}))
    [same] = lines_for(spec, ["traps"], tmp_path, runs, measure=no_probe)
    assert same.seconds == 300.0 and same.basis == "last run: 300 s"
    # the stamp's run had half the chains of the profile's now, here and in its escape section: the
    # time above the overhead doubles
    half = {**prm, "chains": prm["chains"] // 2, "escape": {**prm["escape"], "chains": prm["escape"]["chains"] // 2}}
    half["escape"]["exact_chains"] = prm["escape"]["exact_chains"] // 2
    cache.write_stamp(stamp, {"parameters": half}, tmp_path / "none.ipynb", tmp_path / "none", 300.0)
    ratio = estimates.chapter_work("traps", prm) / estimates.chapter_work("traps", half)
    # the enumerated kernels of the exactness check, the quasi-potential searches and the growth
    # section's trap finding do not halve: the ratio is that of the work with and without them
    fixed = estimates.chapter_work("traps", {**prm, "chains": 0, "escape": {**prm["escape"], "chains": 0, "exact_chains": 0}})
    whole = estimates.chapter_work("traps", prm)
    assert ratio == pytest.approx(whole / (fixed + (whole - fixed) / 2), rel=0.02) and 1.0 < ratio < 2.0
    [scaled] = lines_for(spec, ["traps"], tmp_path, runs, measure=no_probe)
    fixed = estimates.seconds.overhead("traps")
    assert scaled.seconds == pytest.approx(fixed + (300.0 - fixed) * ratio, rel=1e-6)
    assert scaled.basis.startswith(f"last run: 300 s, scaled by {ratio:.1f}x")


# --------------------------------------------------------------------------- estimates
def test_without_a_record_the_line_is_an_estimate_that_scales_with_the_parameters(tmp_path):
    spec = offline()
    [line] = lines_for(spec, ["crossover"], tmp_path, runs)
    assert line.basis == f"estimated from a {estimates.REFERENCE_PROBE_S:.2f} s probe"
    assert line.text().split("]")[0].count("estimated from a 0.16 s probe: ~") == 1
    assert line.seconds > 60
    # doubling the chain-steps (trials) and the pairs doubles their part of the estimate: above the
    # fixed time, the estimate is the encoder work and the bookkeeping at their fitted rates
    ch = spec["chapters"]["crossover"]["parameters"]
    whole = variable("crossover", ch)
    fixed = variable("crossover", {**ch, "trials": 0, "pairs": 0})   # the exact phase section
    ch["trials"], ch["pairs"] = 2 * ch["trials"], 2 * ch["pairs"]
    [twice] = lines_for(spec, ["crossover"], tmp_path, runs)
    O = estimates.seconds.overhead("crossover")         # the exact phase section scales with neither
    assert (twice.seconds - O) / (line.seconds - O) == pytest.approx((2 * whole - fixed) / whole, rel=0.02)
    assert 0 < fixed < whole
    traps = offline()
    [t1] = lines_for(traps, ["traps"], tmp_path, runs)
    traps["chapters"]["traps"]["parameters"]["steps"] *= 2
    [t2] = lines_for(traps, ["traps"], tmp_path, runs)
    main = variable("traps", {**traps["chapters"]["traps"]["parameters"], "steps": 0})
    twice_steps = variable("traps", traps["chapters"]["traps"]["parameters"])
    O = estimates.seconds.overhead("traps")
    assert (t2.seconds - O) / (t1.seconds - O) == pytest.approx(twice_steps / (twice_steps - (twice_steps - main) / 2), rel=0.02)
    assert 1.0 < t2.seconds / t1.seconds < 2.0                 # the escape section (chains, searches) does not double
    traps["chapters"]["traps"]["parameters"]["escape"]["chains"] *= 2
    traps["chapters"]["traps"]["parameters"]["escape"]["exact_chains"] *= 2
    [t3] = lines_for(traps, ["traps"], tmp_path, runs)
    assert t2.seconds < t3.seconds < 2.0 * t1.seconds          # searches and trap finding do not double


def test_the_estimate_follows_the_probe_and_the_fitted_constants(tmp_path):
    spec = offline()
    chapters = list(estimates.CALIBRATION_SECONDS)
    at_ref = {ln.name: ln.seconds for ln in lines_for(spec, chapters, tmp_path, runs)}
    slower = {ln.name: ln.seconds for ln in lines_for(spec, chapters, tmp_path, runs,
                                                      measure=lambda: (2 * REF[0], 2 * REF[1]))}
    for ch in chapters:                   # the work takes twice as long; the fixed time does not scale
        a = estimates.seconds.constants()[ch][0]
        assert slower[ch] - a == pytest.approx(2 * (at_ref[ch] - a))
    # at the reference probe a chapter's estimate is its fitted fixed time plus its work at the
    # fitted seconds per unit (the constants' fit to measured builds: test_plan_records.py)
    for ch in chapters:
        a, b, c = estimates.seconds.constants()[ch]
        encoder, books = estimates.work_parts(ch, P.chapter_parameters("offline", ch, spec=spec))
        assert at_ref[ch] == pytest.approx(a + b * encoder + c * books)


def test_the_calibration_parameters_are_those_of_the_calibration_commit():
    try:
        text = subprocess.run(["git", "show", f"{estimates.CALIBRATION_COMMIT}:params/offline.yaml"], cwd=repo_root(),
                              capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"git does not have {estimates.CALIBRATION_COMMIT} here")
    old = yaml.safe_load(text)
    for ch, mine in estimates.CALIBRATION_PARAMETERS.items():
        theirs = {**old.get("defaults", {}), **old["chapters"][ch]["parameters"]}
        theirs = {RENAMED.get(k, k): v for k, v in theirs.items()}      # the keys as they are spelt now
        assert estimates.chapter_work(ch, theirs) == pytest.approx(estimates.reference_work(ch)), ch
        for key, value in mine.items():
            if key in ("models", "model", "control"):
                names = [m["name"] for m in (theirs[key] if isinstance(theirs[key], list) else [theirs[key]])]
                assert names == [m["name"] for m in (value if isinstance(value, list) else [value])], (ch, key)
            else:
                assert theirs[key] == value, (ch, key)


def test_skips_and_chapters_that_may_run_after_their_upstream(tmp_path):
    spec = offline()

    def status(ch):
        return (False, "its inputs changed: notebook") if ch == "bounds" else (True, "inputs unchanged (key abc)")

    got = {ln.name: ln for ln in lines_for(spec, ["bounds", "crossover", "traps"], tmp_path, status)}
    assert got["traps"].action == "skip" and got["traps"].why == "inputs unchanged (key abc)"
    assert got["bounds"].action == "run"
    assert got["crossover"].action == "maybe" and "bounds" in got["crossover"].why
    forced = lines_for(spec, ["traps"], tmp_path, status, forced="--force")
    assert forced[0].action == "run" and forced[0].why == "--force"
    text = plan.format_plan("offline", list(got.values()), estimates.Probe(lambda: REF))
    assert "up to" in text and "if the chapters marked 'maybe' run" in text


def test_the_build_decision_is_the_stamp_status(tmp_path):
    """Without a status function the plan asks stamps.action, as run_chapters does: a fresh
    build folder runs every chapter for the reason the build prints."""
    spec = P.load_profile("smoke")
    lines = plan.chapter_lines("smoke", spec, ["bounds"], tmp_path / "b" / "smoke", tmp_path / "r", None,
                               estimates.Probe(lambda: REF))
    assert lines[0].action == "run" and lines[0].why.startswith("no finished run recorded")


def test_a_page_edit_is_planned_as_a_re_render_with_no_science(tmp_path):
    """A chapter whose page modules alone changed is a re-render: no estimate of its science, and it
    does not make its readers 'maybe' (its tables are checked, not rewritten)."""
    spec = offline()

    def status(ch):
        return ("render", "its page modules changed: pages (bounds.py)") if ch == "bounds" else ("skip", "unchanged")

    got = {line.name: line for line in lines_for(spec, ["bounds", "crossover"], tmp_path, status, measure=no_probe)}
    assert got["bounds"].action == "render" and got["bounds"].seconds == 0.0
    assert got["crossover"].action == "skip"
    assert plan.computing(list(got.values()), ["bounds", "crossover"]) == []      # no model to resolve


def test_the_chapters_checked_before_compute_are_those_that_may_compute(tmp_path):
    """The pre-flight resolves the models of the chapters that run or may run, and of every chapter
    where the plan could not be computed; not those re-rendered or skipped."""
    spec = offline()
    status = {"bounds": ("render", "pages (bounds.py)"), "crossover": (False, "its inputs changed: notebook"),
              "traps": ("skip", "unchanged"), "ground_truth": (True, "unchanged")}
    got = lines_for(spec, list(status), tmp_path, status.get, measure=no_probe)
    assert {ln.name: ln.action for ln in got} == {"bounds": "render", "crossover": "run", "traps": "skip",
                                                  "ground_truth": "skip"}
    assert plan.computing(got, list(status)) == ["crossover"]
    assert plan.computing([], ["bounds", "traps"]) == ["bounds", "traps"]
    # a re-render that reads a chapter which runs may run in full after it: 'maybe', and checked up front
    status = {"bounds": (False, "its inputs changed: notebook"), "crossover": ("render", "pages (phase.py)")}
    got = {ln.name: ln for ln in lines_for(spec, list(status), tmp_path, status.get, measure=no_probe)}
    assert got["crossover"].action == "maybe" and got["crossover"].why == "re-rendered unless the results of bounds change"
    assert plan.computing(list(got.values()), list(status)) == ["bounds", "crossover"]


def test_announce_never_stops_a_build(tmp_path):
    out = io.StringIO()
    assert plan.announce("offline", {"chapters": {"nope": {}}}, ["nope"], tmp_path, tmp_path, artifacts=[],
                         out=out, measure=lambda: REF) == []
    assert "could not be computed" in out.getvalue()
    failing = estimates.Probe(lambda: 1 / 0)
    assert failing() is None and "ZeroDivisionError" in failing.error


# --------------------------------------------------------------------------- artifacts
def test_artifact_lines_for_training_and_benchmark(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTGLAUBER_MODELS", str(tmp_path / "models"))
    [fresh] = plan.artifact_lines(["english"], tmp_path / "results", estimates.Probe(lambda: REF))
    assert fresh.action == "build" and fresh.why == "not trained here yet"
    assert fresh.seconds == pytest.approx(estimates.TRAINING_SECONDS["english"], rel=0.02)  # the preset calibrated on
    # an interrupted training whose minilm start finished: only the rest is left
    (tmp_path / "models" / "english.partial" / "minilm").mkdir(parents=True)
    (tmp_path / "models" / "english.partial" / "minilm" / "run.json").write_text("{}")
    [resume] = plan.artifact_lines(["english"], tmp_path / "results", estimates.Probe(lambda: REF))
    assert resume.action == "resume" and resume.seconds < 0.3 * fresh.seconds
    (tmp_path / "models" / "english.partial" / "scratch").mkdir()
    (tmp_path / "models" / "english.partial" / "scratch" / "progress.json").write_text(json.dumps({"step": 180}))
    [half] = plan.artifact_lines(["english"], tmp_path / "results", estimates.Probe(lambda: REF))
    assert half.seconds < resume.seconds
    [tiny] = plan.artifact_lines(["tiny"], tmp_path / "results", estimates.Probe(lambda: REF))
    assert tiny.seconds < 60

    from textglauber.bench import cache as bench_cache

    monkeypatch.setattr(bench_cache, "key", lambda name: {"arguments": bench_cache.PRESETS[name], "code": "same"})
    [todo] = plan.artifact_lines(["bench"], tmp_path / "results", estimates.Probe(lambda: REF))
    assert todo.action == "build" and todo.seconds == pytest.approx(estimates.BENCH_SECONDS["bench"])
    csv, stamp = bench_cache.paths("bench", tmp_path / "results")
    csv.parent.mkdir(parents=True)
    csv.write_text("x\n")
    stamp.write_text(json.dumps({"key": cache.digest(bench_cache.key("bench"))}))
    [done] = plan.artifact_lines(["bench"], tmp_path / "results", estimates.Probe(no_probe))
    assert done.action == "reuse" and done.seconds == 0.0 and "-" in done.text()


def test_the_default_benchmark_times_one_step_a_call():
    from textglauber.bench import cache as bench_cache

    args = bench_cache.PRESETS["bench"]
    assert args[args.index("--steps") + 1] == "1"
    assert estimates.BENCH_SECONDS["bench"] <= 180          # a few minutes on the calibration machine


# --------------------------------------------------------------------------- progress
def test_progress_line_format():
    assert progress.progress_line("crossover", 9, 21, 240, 540, "last run 13 min") == \
        "crossover: cell 9/21, 4 min elapsed, about 9 min left (last run 13 min)"
    assert progress.progress_line("traps", 3, 13, 30, 20, None) == "traps: cell 3/13, 30 s elapsed, less than a minute left"
    assert progress.progress_line("x", 1, 2, 3700, None, None) == "x: cell 1/2, 62 min elapsed, no estimate of the time left"
    assert "past the estimate" in progress.progress_line("x", 1, 2, 700, -100, "estimated ~10 min")
    assert [plan.duration(s) for s in (5, 150, 2700, 7500)] == ["5 s", "2.5 min", "45 min", "2 h 05 min"]
    assert [durations.duration(s) for s in (5, 150, 2700, 7500)] == ["5 s", "2.5 min", "45 min", "2 h 05 min"]


def test_the_chapters_do_not_reach_the_plan():
    """train_mlm, which chapters import, must not import the plan (nor, through it, the build's
    modules): the chapters' keys would change with every edit to them."""
    assert (reach.PACKAGE_DIR / "bookbuild" / "plan.py").is_file()        # the folder the check looks for
    for nb in ("book/01_incompatibility.ipynb", "book/03_crossover.ipynb", "book/05_traps.ipynb"):
        reached = reach.code_files(repo_root() / nb)
        assert "train_mlm" in {p.parent.name for p in reached}             # the package's modules
        assert not [p for p in reached if p.relative_to(reach.PACKAGE_DIR).parts[0] == "bookbuild"], nb


def test_time_left_from_the_last_runs_cells():
    last = [1.0, 100.0, 200.0, 100.0]
    nan = float("nan")
    # cells 1-2 done at the last run's pace, cell 3 running for 50 s: 150 s of it and 100 s after
    assert progress.time_left(160.0, 3, [1.0, 100.0, nan, nan], 50.0, last) == pytest.approx(250.0)
    # twice as slow so far: the rest is expected twice as slow too
    assert progress.time_left(260.0, 3, [2.0, 200.0, nan, nan], 50.0, last) == pytest.approx(2 * 300 - 50)
    # no last run (or another notebook): the estimate less the time elapsed
    assert progress.time_left(100.0, 2, [1.0, nan], 10.0, None, expected_s=400.0) == 300.0
    assert progress.time_left(100.0, 2, [1.0, nan], 10.0, [1.0, 2.0, 3.0], expected_s=None) is None


def papermill_notebook(statuses, started=None):
    cells = []
    for st in statuses:
        meta = {"status": st}
        if st == "completed":
            meta["duration"] = 2.0
        if st == "running":
            meta["start_time"] = started
        cells.append({"cell_type": "code", "metadata": {"papermill": meta}, "source": "", "outputs": []})
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_cell_states_reads_papermills_metadata():
    from datetime import datetime, timedelta, timezone

    started = (datetime.now(timezone.utc) - timedelta(seconds=30)).isoformat()
    current, cells, durations, running = progress.cell_states(papermill_notebook(
        ["completed", "completed", "running", "pending"], started))
    assert (current, cells) == (3, 4) and durations[:2] == [2.0, 2.0] and 29 <= running <= 40


def test_watch_prints_progress_lines_while_a_chapter_runs(tmp_path):
    staged = tmp_path / "build" / "smoke"
    last = cache.executed_notebook(staged, "bounds")
    last.parent.mkdir(parents=True)
    nb = papermill_notebook(["completed"] * 4)
    for c, d in zip(nb["cells"], (1.0, 10.0, 60.0, 1.0)):
        c["metadata"]["papermill"]["duration"] = d
    last.write_text(json.dumps(nb))
    partial = cache.partial_notebook(staged, "bounds")
    partial.write_text(json.dumps(papermill_notebook(["completed", "running", "pending", "pending"],
                                                     time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()))))
    plan.EXPECTED[("smoke", "bounds")] = (72.0, "last run: 72 s")
    out = io.StringIO()
    with progress.watch("smoke", "bounds", partial, staged, tmp_path / "results", out=out, first=0.05, every=0.05):
        time.sleep(0.4)
    lines = out.getvalue().splitlines()
    assert lines and lines[0].startswith("[smoke] bounds: cell 2/4, ")
    # the running cell's 10 s (less the second or so it has run), then 60 s and 1 s at the last run's pace
    left = int(lines[0].split("about ")[1].split(" s left")[0])
    assert 65 <= left <= 71 and lines[0].endswith(" s left (last run 72 s)")


def test_training_progress_lines():
    rep = train_mlm.StepReport("minilm", 850, 100, first=0.0, every=60.0, out=io.StringIO())
    line = rep.line(400, rep.t0 + 300.0)
    assert line == "[train] minilm: step 400/850, 5 min elapsed, about 7.5 min left for this start"
    rep(101)
    rep(102)                                  # within a minute of the first line: nothing more
    assert len(rep.out.getvalue().splitlines()) == 1


# --------------------------------------------------------------------------- the probe itself
def test_probe_leaves_the_process_as_it_was():
    import torch

    state, threads = torch.get_rng_state(), torch.get_num_threads()
    one, many = estimates.probe(budget_s=0.05)
    assert one > 0 and many > 0
    assert torch.equal(torch.get_rng_state(), state) and torch.get_num_threads() == threads


def test_artifacts_measured_or_trained_before_under_other_keys_show_their_last_time(tmp_path, monkeypatch):
    from dataclasses import asdict

    from textglauber.bench import cache as bench_cache

    monkeypatch.setattr(bench_cache, "key", lambda name: {"code": "now"})
    csv, stamp = bench_cache.paths("bench", tmp_path / "results")
    csv.parent.mkdir(parents=True)
    csv.write_text("x\n")
    stamp.write_text(json.dumps({"key": "older code", "seconds": 140.0}))
    [bench] = plan.artifact_lines(["bench"], tmp_path / "results", estimates.Probe(no_probe))
    assert (bench.action, bench.seconds, bench.basis) == ("build", 140.0, "last run: 140 s")

    monkeypatch.setenv("TEXTGLAUBER_MODELS", str(tmp_path / "models"))
    (tmp_path / "models" / "english").mkdir(parents=True)
    settings = {**asdict(train_mlm.PRESETS["english"]), "steps": {"minilm": 425, "scratch": 180}}
    (tmp_path / "models" / "english" / "manifest.json").write_text(json.dumps({"seconds": 900.0, "settings": settings}))
    [english] = plan.artifact_lines(["english"], tmp_path / "results", estimates.Probe(no_probe))
    assert english.why == "trained under other settings"
    assert english.basis == "last run: 900 s, scaled by 2x the work" and english.seconds == pytest.approx(1800.0)


def test_deciding_what_to_build_imports_no_torch(tmp_path):
    """A rebuild after a prose or page edit decides, for every chapter of the offline profile, to skip
    or re-render and what its artifacts need, without importing torch in the build process (the
    framework's import was most of the build's own floor): the keys, their models and corpora, the
    plan's lines and whether a trained model is current are all read from files. Run in a fresh
    interpreter, since this one has torch already."""
    code = f"""
import sys
from pathlib import Path
from textglauber import profile as P, train_mlm
from textglauber.bookbuild import plan, stamps
from textglauber.bookbuild.estimates import Probe
spec = P.load_profile("offline")
root = Path({str(tmp_path)!r})
for ch in spec["chapters"]:
    stamps.chapter_inputs(spec, "offline", ch, root)
lines = plan.artifact_lines(plan.artifacts_of(spec, list(spec["chapters"])), root, Probe(lambda: (1.0, 1.0)))
lines += [plan.Line("chapter", ch, "skip", "unchanged", 0.0, "") for ch in spec["chapters"]]
assert plan.too_long("offline", spec, lines, 24.0) is None
train_mlm.is_current(root / "nothing", "english")
print(len(lines), "torch" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    n, imported = out.stdout.split()
    assert int(n) >= 1 and imported == "False", out.stdout
