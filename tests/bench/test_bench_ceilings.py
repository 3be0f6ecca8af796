"""The benchmark's counts have ceilings (issue 65, item 2): a count past its ceiling is one line
before anything loads, where ``--batches 100000000`` used to run until the allocator stopped it."""
import pytest

from textglauber.bench import __main__ as bench_cli


@pytest.mark.parametrize("argv, says", [
    (["--batches", "1", "100000000"], "--batches 100000000: at most 4096"),
    (["--steps", "10000000"], "--steps 10000000: at most 100000"),
    (["--rounds", "1000000"], "--rounds 1000000: at most 100"),
    (["--metastable", "--trap-steps", "100000000000"], "--trap-steps 100000000000: at most 10000000"),
    (["--metastable", "--chains", "5000"], "--chains 5000: at most 4096"),
    (["--lengths", "4000"], "--lengths 4000: at most 510"),
])
def test_a_count_past_its_ceiling_is_refused_before_anything_runs(argv, says, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the run started")
    monkeypatch.setattr(bench_cli, "pick_device", refuse)
    with pytest.raises(SystemExit) as exc:
        bench_cli.main(argv)
    assert str(exc.value).startswith(says) and "\n" not in str(exc.value)


def test_every_integer_option_has_a_ceiling():
    """A new count cannot slip past: each option parsed as an integer is in CEILINGS."""
    ints = {a.dest for a in bench_cli._parser()._actions if a.type is int}
    assert ints <= set(bench_cli.CEILINGS), sorted(ints - set(bench_cli.CEILINGS))


def test_the_defaults_and_the_prepared_gpu_session_stay_within_the_ceilings():
    """The bench's defaults and the largest call data/gpu/session.sh makes (batch 1024 at n = 128,
    8 steps, 3 rounds, 16 loop chains) pass."""
    for argv in ([], ["--metastable"], ["--steps", "8", "--rounds", "3", "--loop-chains", "16", "--lengths", "128",
                                         "--batches", "512", "1024"]):
        assert bench_cli.over_ceiling(bench_cli._parser().parse_args(argv)) is None, argv
