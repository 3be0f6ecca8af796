"""The plan against measured builds (textglauber.bookbuild.estimates.records): the fit recovers
known constants, the 1.5x check can fail, a finished build's timings and stamps make a record, and
every committed record's chapters land within 1.5x of the plan (the held-out ones are the finding;
the fit ones check the code)."""
import json

import pytest

from textglauber import profile as P
from textglauber.bookbuild import estimates, plan
from textglauber.bookbuild import stamps as cache
from textglauber.bookbuild.estimates import records
from textglauber.bookbuild.execute import record_timing

WITHIN = 1.5


def ratio_off(run, constants):
    got = records.predicted(run, constants)
    return max(got / run.seconds, run.seconds / got)


def synthetic(a, b, c, role="fit", scales=(0.2, 1.0, 5.0), probes=((0.3, 0.2), (0.6, 0.5))):
    """Runs of the offline bounds parameters with their contexts and drift states scaled, and of the
    cost appendix (no work), timed exactly by the model with constants (a, b, c)."""
    base = P.chapter_parameters("offline", "bounds")
    out = []
    for k, s in enumerate(scales):
        for one, many in probes:
            prm = {**base, "n_contexts": max(1, round(base["n_contexts"] * s)),
                   "drift_states": max(1, round(base["drift_states"] * s))}
            for chapter, p in (("bounds", prm), ("cost", {})):
                run = records.Run(f"synthetic-{k}", role, "offline", chapter, 1.0, p, one, many)
                x, y, z = run.terms()
                out.append(records.Run(run.record, role, "offline", chapter, a * x + b * y + c * z, p, one, many))
    return out


def test_the_fit_recovers_the_constants_that_made_the_times():
    runs = synthetic(9.0, 0.004, 0.0007)
    got = records.fit(runs)
    assert got["cost"] == pytest.approx((9.0, 0.0, 0.0))
    assert got["bounds"] == pytest.approx((9.0, 0.004, 0.0007), rel=1e-6)
    # held-out runs do not move the fit
    more = runs + [records.Run("x", "held_out", "offline", "bounds", 1e6, runs[0].parameters, 0.3, 0.2)]
    assert records.fit(more) == got


def test_the_check_fails_where_the_times_do_not_follow_the_model():
    # a chapter whose time grows as the square of its work: a fit on the small and middle runs
    # misses the largest by far more than 1.5x
    runs = synthetic(5.0, 0.004, 0.0, scales=(0.2, 1.0))
    big = [r for r in synthetic(5.0, 0.004, 0.0, role="held_out", scales=(8.0,)) if r.chapter == "bounds"]
    ref = next(r for r in runs if r.chapter == "bounds").terms()[1]
    squared = [records.Run(r.record, r.role, r.profile, r.chapter, r.seconds * r.terms()[1] / ref,
                           r.parameters, r.one, r.many) for r in big]
    constants = records.fit(runs)
    assert all(ratio_off(r, constants) <= 1.0 + 1e-6 for r in runs)
    assert all(ratio_off(r, constants) > WITHIN for r in squared)


def test_a_record_without_a_role_or_a_probe_is_refused(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"profile": "smoke", "role": "maybe", "chapters": {}}))
    with pytest.raises(ValueError, match="role = 'maybe'"):
        records.read(f)
    f.write_text(json.dumps({"profile": "smoke", "role": "fit", "chapters": {"bounds": {"seconds": 3, "parameters": {}}}}))
    with pytest.raises(ValueError, match="'bounds' needs seconds and a probe"):
        records.read(f)


def test_a_finished_build_makes_a_record_from_its_timings_and_stamps(tmp_path):
    staged, results = tmp_path / "_build" / "smoke", tmp_path / "results"
    (results / "smoke").mkdir(parents=True)
    prm = P.chapter_parameters("smoke", "bounds", results)
    cache.write_stamp(cache.stamp_path(staged, "bounds"), {"parameters": prm}, tmp_path / "none.ipynb",
                      tmp_path / "none", 14.0)
    cache.write_stamp(cache.stamp_path(staged, "traps"), {"parameters": {}}, tmp_path / "none.ipynb",
                      tmp_path / "none", 40.0)
    record_timing(results / "smoke", "bounds", 14.04, (0.51, 0.33))
    record_timing(results / "smoke", "traps", 40.0)                    # its plan read a last run: no probe
    rec = records.collect("smoke", staged, results, "held_out", "a test")
    assert list(rec["chapters"]) == ["bounds"]
    got = rec["chapters"]["bounds"]
    assert got["seconds"] == 14.0 and got["probe"] == [0.51, 0.33] and "results_root" not in got["parameters"]
    f = tmp_path / "rec.json"
    f.write_text(json.dumps(rec))
    [run] = records.read(f)
    assert (run.chapter, run.role, run.seconds, run.one, run.many) == ("bounds", "held_out", 14.0, 0.51, 0.33)


def test_the_build_records_the_plans_probe_beside_each_chapters_time(tmp_path):
    plan.PROBED.clear()
    out = []
    plan.announce("smoke", P.load_profile("smoke"), ["bounds"], tmp_path / "b", tmp_path / "r", artifacts=[],
                  out=type("W", (), {"write": lambda self, s: out.append(s), "flush": lambda self: None})(),
                  measure=lambda: (0.5, 0.25))
    assert plan.PROBED["smoke"] == (0.5, 0.25)


COMMITTED = records.load()
# held-out chapters the plan misses by more than 1.5x today, with the measured ratio (plan / measured):
# a strict xfail, so a plan that comes within 1.5x of them fails here until it is taken off this list
_STANDIN = ("the plan is {:.2f}x the measured time: the stand-ins' encoders are 2-3 layers of width 64-96, so their "
            "rows sit at the plan's floors, and what takes the rest of the time on them is not yet in the work count "
            "(measured on 2026-12-01, before the chapters moved onto the scheduler)")
MISSES: dict[tuple[str, str], str] = {
    ("standin-2026-12-01", ch): _STANDIN.format(r) for ch, r in
    (("basins", 0.56), ("bounds", 0.10), ("cost", 0.62), ("ground_truth", 0.38), ("incompatibility", 0.52),
     ("traps", 0.12))}
_OFFLINE_OLD = ("the plan is {:.2f}x the measured time of 2026-12-01, before the chapters moved onto the scheduler "
                "(2026-12-02: one unit per model, the traps chains in blocks of 16), so not the code the plan prices; "
                "its probe also read the machine 1.6-2.7x slower than the fit's build (incompatibility's many-thread "
                "reading, 0.173 s, saw a second thread worth only 1.2x)")
MISSES.update({("offline-2026-12-01", ch): _OFFLINE_OLD.format(r) for ch, r in
               (("ground_truth", 1.54), ("incompatibility", 1.69), ("traps", 3.42))})


def test_a_stand_in_not_built_is_priced_by_its_recipe_not_its_hub_model(tmp_path):
    """The stand-in profile's records name stand-in folders; where they are not built (a fresh clone),
    the plan prices the small random model its recipe will build, not the hub model nor the MiniLM
    fallback; a built one is priced by its own config.json."""
    from textglauber import standins
    from textglauber.bookbuild.estimates import costs

    for name, vocab in (("roberta-base", standins.BPE_VOCAB), ("bert-large-uncased", 30522)):
        r = standins.STANDINS[name]
        assert costs._shape(f"_build/standins/{name}") == (r.layers, r.hidden, 4 * r.hidden, vocab, 2)
    assert costs._shape("roberta-base") == costs.SHAPES["roberta-base"]
    assert costs._shape("_build/elsewhere/roberta-base") == costs.MINILM_SHAPE
    d = tmp_path / "standins" / "roberta-base"                    # a built one: its own config wins
    assert costs._shape(str(d)) == (2, 64, 256, standins.BPE_VOCAB, 2)
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"num_hidden_layers": 3, "hidden_size": 80, "intermediate_size": 320,
                                               "vocab_size": 4100}))
    assert costs._shape(str(d)) == (3, 80, 320, 4100, 2)


def _case(run):
    why = MISSES.get((run.record, run.chapter))
    marks = [pytest.mark.xfail(reason=why, strict=True)] if why else []
    return pytest.param(run, marks=marks, id=f"{run.record}-{run.chapter}")


@pytest.mark.parametrize("run", [_case(r) for r in COMMITTED])
def test_the_plan_lands_within_1_5x_of_each_measured_first_build(run):
    """Each recorded chapter: the plan's seconds for its parameters at its build's probe reading,
    against its measured time. For a fit record this checks the code; a held-out one is evidence."""
    got = estimates.estimate(run.chapter, run.parameters, estimates.Probe(lambda: (run.one, run.many)))
    assert got is not None
    assert max(got / run.seconds, run.seconds / got) <= WITHIN, (run.record, run.chapter, got, run.seconds)


def test_every_miss_listed_is_a_held_out_record():
    held = {(r.record, r.chapter) for r in COMMITTED if r.role == "held_out"}
    assert set(MISSES) <= held


def test_every_profile_chapter_that_has_work_has_constants():
    constants = estimates.seconds.constants()
    for name in ("smoke", "offline"):
        for ch in P.load_profile(name)["chapters"]:
            assert ch in constants or ch in estimates.FIXED_S, (name, ch)


def test_a_chapter_without_a_fit_takes_its_fixed_seconds_whatever_the_probe(monkeypatch):
    """With no fitted constants, the cost appendix is FIXED_S seconds on a machine read as the
    calibration one and on one read three times slower (a fixed time is not scaled by the probe,
    as in the fit); a chapter with neither a fit nor a fixed time has no estimate."""
    from textglauber.bookbuild.estimates import seconds

    monkeypatch.setattr(seconds, "constants", lambda: {})
    ref = (estimates.REFERENCE_PROBE_ONE_S, estimates.REFERENCE_PROBE_S)
    slow = tuple(3 * x for x in ref)
    got = [seconds.estimate("cost", {}, estimates.Probe(lambda r=r: r)) for r in (ref, slow)]
    assert got == [estimates.FIXED_S["cost"]] * 2
    assert seconds.estimate("traps", {}, estimates.Probe(lambda: ref)) is None
