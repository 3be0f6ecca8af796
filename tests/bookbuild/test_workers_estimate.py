"""The plan's estimate on N workers (textglauber.bookbuild.estimates.workers and plan.worker_lines):
the schedule's makespan against the test's own event simulation, the units' work against the
chapter's own count, and the plan's lines on a local:N setting."""
import io
import itertools

import numpy as np
import pytest

from textglauber import profile as P
from textglauber import scheduler
from textglauber.bookbuild import estimates, plan
from textglauber.bookbuild.estimates import work, workers

REF = (estimates.REFERENCE_PROBE_ONE_S, estimates.REFERENCE_PROBE_S)


def simulated(seconds, n):
    """The end of the last unit when n workers take units in order, each as soon as it is idle: a
    clock that advances to the next worker to finish (the test's own loop, no heap)."""
    busy_until, clock = [0.0] * n, 0.0
    for s in seconds:
        clock = min(busy_until)
        k = busy_until.index(clock)
        busy_until[k] = clock + s
    return max(busy_until)


def test_makespan_against_an_event_simulation_and_its_limits():
    rng = np.random.default_rng(0)
    for _ in range(200):
        seconds = list(rng.exponential(size=rng.integers(1, 12)))
        for n in (1, 2, 3, 8):
            got = workers.makespan(seconds, n)
            assert got == pytest.approx(simulated(seconds, n))
            assert max(seconds) - 1e-12 <= got <= sum(seconds) + 1e-12
            assert got >= sum(seconds) / n - 1e-12
        assert workers.makespan(seconds, 1) == pytest.approx(sum(seconds))
        assert workers.makespan(seconds, len(seconds)) == pytest.approx(max(seconds))
    # in order, not sorted: a long unit last waits for the first worker free
    assert workers.makespan([1, 1, 3], 2) == 4 and workers.makespan([3, 1, 1], 2) == 3
    with pytest.raises(ValueError, match="workers = 0"):
        workers.makespan([1.0], 0)


def test_the_units_are_the_sections_they_stand_for():
    """The crossover's units, a batch of its drift cells (length, temperature), one of its coupling
    lengths and one of its phase models, add up to the chapter's whole work, each batch to its
    section's, the traps' units to the escape models' part, the bounds' to the whole chapter and the
    ground truth's to all but its holding checks; a chapter with no units hands out none."""
    spec = P.load_profile("offline")
    cross = P.chapter_parameters("offline", "crossover", spec=spec)
    drift, pairs, phase = work.unit_batches("crossover", cross)
    assert len(drift) == len(cross["lengths"]) * len(cross["drift_temperatures"])
    assert len(pairs) == len(cross["coupling_lengths"]) and len(phase) == len(cross["phase"]["models"])
    whole = work.work_parts("crossover", cross)
    no_phase = work.work_parts("crossover", {**cross, "phase": {}})
    no_pairs = work.work_parts("crossover", {**cross, "phase": {}, "pairs": 0})
    nothing = work.work_parts("crossover", {**cross, "phase": {}, "pairs": 0, "trials": 0})
    for j in (0, 1):
        assert sum(u[j] for u in phase) == pytest.approx(whole[j] - no_phase[j], rel=1e-9)
        assert sum(u[j] for u in pairs) == pytest.approx(no_phase[j] - no_pairs[j], rel=1e-9)
        assert sum(u[j] for u in drift) == pytest.approx(no_pairs[j] - nothing[j], rel=1e-9)
        assert nothing[j] == 0
    assert work.unit_parts("crossover", cross) == drift + pairs + phase
    traps = P.chapter_parameters("offline", "traps", spec=spec)
    blocks, tu = work.unit_batches("traps", traps)
    e = traps["escape"]
    assert len(tu) == len(e["models"]) and len(blocks) == -(-traps["chains"] // scheduler.CHAIN_BLOCK) == 1
    rest = work.work_parts("traps", {**traps, "escape": {**e, "models": []}})
    for j in (0, 1):
        assert sum(u[j] for u in tu) == pytest.approx(work.work_parts("traps", traps)[j] - rest[j], rel=1e-9)
    # the blocks are the chains' encoder work: what the chapter loses with its chains, less their embedding
    no_chains = work.work_parts("traps", {**traps, "chains": 0, "escape": {**e, "models": []}})
    unembedded = work.work_parts("traps", {**traps, "model": {**traps["model"], "embedder": "self"},
                                           "escape": {**e, "models": []}})
    assert sum(u[0] for u in blocks) < rest[0] - no_chains[0]
    assert sum(u[0] for u in blocks) == pytest.approx(unembedded[0] - no_chains[0], rel=1e-9)
    basins = P.chapter_parameters("offline", "basins", spec=spec)
    bu = work.unit_parts("basins", basins)
    assert len(bu) == len(basins["models"])
    whole = work.work_parts("basins", basins)
    chains_only = work.work_parts("basins", {**basins, "prefix_chains": 0, "score_every": 10 ** 12})   # scoring ~0
    assert sum(u[0] for u in bu) == pytest.approx(chains_only[0], rel=1e-6) and whole[0] > sum(u[0] for u in bu)
    bounds = P.chapter_parameters("offline", "bounds", spec=spec)
    units = work.unit_parts("bounds", bounds)
    assert len(units) == len(bounds["models"]) and sum(u[0] for u in units) == pytest.approx(
        work.work_parts("bounds", bounds)[0], rel=1e-9)
    truth = P.chapter_parameters("offline", "ground_truth", spec=spec)
    units = work.unit_parts("ground_truth", truth)
    no_holding = work.work_parts("ground_truth", {**truth, "holding": {}})
    assert len(units) == len(truth["models"])
    for j in (0, 1):
        assert sum(u[j] for u in units) == pytest.approx(no_holding[j], rel=1e-9)
    assert work.unit_parts("cost", {}) == []


def test_more_workers_never_slow_the_estimate_and_its_floor_is_the_longest_unit():
    spec = P.load_profile("offline")
    cross = P.chapter_parameters("offline", "crossover", spec=spec)
    probe = estimates.Probe(lambda: REF)
    serial = estimates.estimate("crossover", cross, probe)
    got = {n: workers.on_workers("crossover", cross, serial, probe, n) for n in (1, 2, 3, 8)}
    for a, b in itertools.pairwise((1, 2, 3, 8)):
        assert got[b].seconds <= got[a].seconds + 1e-9
    # one worker runs every unit on one thread: slower than serially on torch's threads, by the
    # probe's ratio on the units' encoder work at most
    assert serial < got[1].seconds < serial * REF[0] / REF[1] + workers.START_S + 1
    # with a worker per unit each batch ends with its longest unit, and each batch starts its own
    # cluster; the rest is what stays in the notebook
    batches = work.unit_batches("crossover", cross)
    _, b, c = estimates.seconds.constants()["crossover"]
    in_units = sum(probe.scale(c * bk, b * enc) for batch in batches for enc, bk in batch)
    one = [[probe.scale(c * bk + b * enc, 0.0) + workers.TASK_OVERHEAD_S for enc, bk in batch] for batch in batches]
    assert len(batches) == 3
    ends = sum(workers.makespan(batch, 8) for batch in one)
    assert got[8].seconds == pytest.approx(serial - in_units + ends + 3 * workers.START_S, rel=1e-6)
    assert got[8].largest == pytest.approx(max(map(max, one)), rel=1e-6)
    # two workers on one core run at half a thread each
    shared = workers.on_workers("crossover", cross, serial, probe, 2, cores=1)
    assert shared.largest == pytest.approx(2 * got[2].largest, rel=1e-3)
    # eight on two cores run min(8, units) / 2 to a core: the drift cells at 1/4 of a thread, the four
    # coupling lengths at 1/2, the three phase models at 2/3
    crowded = workers.on_workers("crossover", cross, serial, probe, 8, cores=2)
    share = [max(min(8, len(batch)) / 2, 1.0) for batch in batches]
    assert crowded.largest == pytest.approx(max(max((t - workers.TASK_OVERHEAD_S) * k + workers.TASK_OVERHEAD_S
                                                    for t in batch) for batch, k in zip(one, share)), rel=1e-6)
    # a last run twice the estimate doubles everything but the starts
    twice = workers.on_workers("crossover", cross, 2 * serial, probe, 2)
    assert twice.seconds - 3 * workers.START_S == pytest.approx(2 * (got[2].seconds - 3 * workers.START_S))
    assert workers.on_workers("cost", {}, 100.0, probe, 2) is None


def test_the_plan_prints_the_estimate_on_local_workers(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTGLAUBER_SCHEDULER", "local:2")
    spec = P.load_profile("offline")
    out = io.StringIO()
    lines = plan.announce("offline", spec, ["crossover", "traps", "basins"], tmp_path / "b", tmp_path / "r",
                          forced="--force", artifacts=[], out=out, measure=lambda: REF)
    text = out.getvalue()
    assert "on local:2 (2 workers on" in text and "crossover: ~" in text and "traps: ~" in text
    assert "basins: ~" in text and "; 1 unit, the longest" in text and "less than serially" in text
    serial = {ln.name: ln.seconds for ln in lines}
    probe = estimates.Probe(lambda: REF)
    cross = workers.on_workers("crossover", P.chapter_parameters("offline", "crossover", spec=spec),
                               serial["crossover"], probe, 2, plan.machine()["cores"])
    units = len(work.unit_parts("crossover", P.chapter_parameters("offline", "crossover", spec=spec)))
    assert f"crossover: ~{plan.duration(cross.seconds)} (serially ~{plan.duration(serial['crossover'])}; {units} units" in text
    monkeypatch.setenv("TEXTGLAUBER_SCHEDULER", "serial")
    out = io.StringIO()
    plan.announce("offline", spec, ["crossover"], tmp_path / "b", tmp_path / "r", forced="--force", artifacts=[],
                  out=out, measure=lambda: REF)
    assert "workers" not in out.getvalue()


def test_the_projection_prices_only_what_is_handed_out():
    from textglauber.bench import report

    t = workers.projection("offline", [2, 64])
    assert list(t.columns) == ["chapter", "units", "hours serially", "hours on 2 workers", "hours on 64 workers"]
    none = t[t.units == 0]
    assert len(none) and (none["hours on 64 workers"] == none["hours serially"]).all()
    some = t[t.units > 0].set_index("chapter")
    assert set(some.index) == {"crossover", "incompatibility", "traps", "basins", "bounds", "ground_truth"}
    assert (some["hours on 64 workers"] <= some["hours on 2 workers"] + 1e-12).all()
    many = some[some.units > 1]             # one unit on one thread gains nothing over torch's two threads
    assert len(many) >= 3 and (many["hours on 2 workers"] < many["hours serially"]).all()
    text = report.workers_sentence(t, "offline")
    assert (f"incompatibility ({some.units['incompatibility']} units), bounds ({some.units['bounds']} units), "
            f"crossover ({some.units['crossover']} units), traps (4 units), basins (1 unit) and ground_truth "
            f"({some.units['ground_truth']} units)") in text and f"{t['hours serially'].sum():.3g} h" in text
    assert "no chapter hand" in report.workers_sentence(t.assign(units=0), "offline")
    assert "no projection" in report.workers_sentence(t.iloc[:0], "offline")
