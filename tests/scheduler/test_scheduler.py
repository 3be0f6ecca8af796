"""Where units of work run (issue 64): the setting, refused in one line before any compute when it
is malformed or its scheduler cannot be reached; units run in worker processes on ``local:2``; a
unit that fails is named; a worker killed mid-unit costs nothing; and the phase section's tables
are identical, bit for bit, serially and on two workers."""
import os
import socket

import numpy as np
import pandas as pd
import pytest
import torch

from textglauber import scheduler
from textglauber.scheduler import RunSettings

from conftest import escape_section, truth_settings

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("value", ["local:0", "local:x", "locale:2", "tcp://nohost", "dask", "local:65"])
def test_a_malformed_setting_is_one_line_naming_it(value):
    with pytest.raises(ValueError) as exc:
        scheduler.setting(value)
    assert str(exc.value).startswith(f"scheduler = {value!r}: must be 'serial', 'local:N'") and "\n" not in str(exc.value)


def test_the_default_is_serial_and_the_environment_sets_it(monkeypatch):
    monkeypatch.delenv(scheduler.ENV, raising=False)
    assert scheduler.setting() == "serial"
    monkeypatch.setenv(scheduler.ENV, "local:3")
    assert scheduler.setting() == "local:3" and scheduler.setting("serial") == "serial"


def test_an_unreachable_scheduler_is_refused_before_any_unit_runs():
    with socket.socket() as s:                     # a port nothing listens on: bound, then closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ran = []
    with pytest.raises(ValueError) as exc:
        scheduler.run_all([("u", ran.append, (1,))], f"tcp://127.0.0.1:{port}")
    assert f"scheduler = 'tcp://127.0.0.1:{port}': cannot be reached" in str(exc.value) and ran == []


def test_the_build_refuses_an_unreachable_scheduler_in_one_line(capsys):
    from textglauber.bookbuild import cli

    with pytest.raises(SystemExit) as exc:
        cli.main(["--profile", "smoke", "--scheduler", "tcp://127.0.0.1:1"])
    assert "scheduler = 'tcp://127.0.0.1:1': cannot be reached" in str(exc.value)


def test_a_failing_unit_is_named_serially_and_on_workers():
    for where in ("serial", "local:2"):
        with pytest.raises(scheduler.UnitFailed) as exc:
            scheduler.run_all([("traps, escape, model m, cell (1, 2, 0.5)", int, ("not a number",))], where)
        assert str(exc.value).startswith("traps, escape, model m, cell (1, 2, 0.5): ValueError: invalid literal")


def _threads() -> tuple[int, int]:
    from threadpoolctl import threadpool_info

    return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"), torch.get_num_threads()


def test_a_unit_runs_blas_on_one_thread_serially_as_on_a_worker():
    """Dask's nanny starts workers with BLAS at one thread; a serial unit runs it at one thread too
    (on this machine's two cores BLAS otherwise takes two), leaves torch's threads as they are, and
    the process gets its BLAS threads back."""
    blas, torch_threads = _threads()
    assert scheduler.run_all([("threads", _threads, ())], "serial") == [(1, torch_threads)]
    assert _threads() == (blas, torch_threads)


def test_units_run_in_two_worker_processes_and_come_back_in_order():
    got = scheduler.run_all([(f"drill {k}", scheduler.drill, (k,)) for k in range(12)], "local:2")
    assert [v for v, _ in got] == [k * k for k in range(12)]
    pids = {pid for _, pid in got}
    assert len(pids) == 2 and os.getpid() not in pids


def test_a_worker_killed_mid_unit_has_its_unit_run_again_elsewhere(tmp_path):
    marker = tmp_path / "died"
    units = [(f"drill {k}", scheduler.drill, (k, str(marker) if k == 3 else None)) for k in range(6)]
    got = scheduler.run_all(units, "local:2")
    assert marker.exists()                          # a worker did die running unit 3
    assert [v for v, _ in got] == [k * k for k in range(6)]


PHASE = {"models": [{"name": "tiny-mlm", "pair": ["the", "dog"], "corpus": "tiny", "max_n": 5},
                    {"name": "tiny-mlm", "pair": ["a", "cat"], "corpus": "tiny", "max_n": 4}], "min_n": 3,
         "temperatures": [0.5, 2.0], "tmix_max_states": 32, "calibration_n": 4,
         "calibration_pairs": 50, "passages": 2, "passage_max_n": 4,
         "landscape": {"lengths": [7], "passages": 1, "starts": 2, "max_states": 20, "settle_states": 20},
         "covering": {"lengths": [3], "temperatures": [0.05], "eps": 0.05, "max_states": 400}}


def _phase(where):
    from textglauber import phasegrid

    return phasegrid.run(PHASE, device="cpu", dtype="float32", on_missing_model="fail",
                         gen=torch.Generator().manual_seed(0), scheduler=where)


def _at_two_threads(run):
    """``run()`` with torch at two threads, where units on workers run at one: the serial side of every
    comparison below, so that each also checks that a product rounds the same at both thread counts
    (``textglauber.MKL_CBWR``: without it, the escape section's test below fails, and a phase
    section's Gamma once read 2.412634 at two threads against 2.412633 at one)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        return run()
    finally:
        torch.set_num_threads(threads)


def _serial_phase():
    """The serial phase section, torch at two threads."""
    return _at_two_threads(lambda: _phase("serial"))


def _same_phase(a, b):
    for name in ("table", "calibration", "landscape", "landscape_check", "covering"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True, obj=name)
    pd.testing.assert_frame_equal(a.cost.drop(columns="seconds"), b.cost.drop(columns="seconds"), check_exact=True)


def test_the_phase_section_is_identical_serially_and_on_one_and_two_workers(monkeypatch):
    """Two models (two units), every table of the section compared bit for bit (only the cost
    table's wall time differs by nature). Units on workers run torch on one thread and the serial run
    at two, which once moved the last digit of a Gamma (2.412633 against 2.412634)."""
    serial = _serial_phase()
    assert len(serial.table) and {"the|dog", "a|cat"} <= set(serial.table.tokens)
    for where in ("local:1", "local:2"):
        _same_phase(serial, _phase(where))


@pytest.fixture
def cluster_from_the_command_line(tmp_path):
    """A Dask scheduler and two workers started as separate commands, as on a cluster; its address."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    addr = f"tcp://127.0.0.1:{port}"
    bin_ = Path(sys.executable).parent
    log = open(tmp_path / "cluster.log", "w")
    procs = [subprocess.Popen([str(bin_ / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], stdout=log, stderr=log)]
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        procs += [subprocess.Popen([str(bin_ / "dask"), "worker", addr, "--nthreads", "1", "--no-dashboard"],
                                   stdout=log, stderr=log) for _ in range(2)]
        from distributed import Client

        with Client(addr, timeout="30s") as c:
            c.wait_for_workers(2, timeout=120)
        yield addr
    finally:
        for p in procs[::-1]:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
        log.close()


def test_a_scheduler_and_workers_started_from_the_command_line_give_the_same_tables(cluster_from_the_command_line):
    addr = cluster_from_the_command_line
    got = scheduler.run_all([(f"drill {k}", scheduler.drill, (k,)) for k in range(12)], addr)
    assert [v for v, _ in got] == [k * k for k in range(12)]
    assert len({pid for _, pid in got}) == 2 and os.getpid() not in {pid for _, pid in got}
    _same_phase(_serial_phase(), _phase(addr))
    pd.testing.assert_frame_equal(_at_two_threads(lambda: _coupling("serial")), _coupling(addr), check_exact=True)


ESCAPE = {"models": [{"name": "tiny-mlm"}, {"name": "tiny-mlm", "whole_words": True}], "seq_len": 6, "traps": 2,
          "candidates": 3, "chains": 10, "distances": [1, 2], "holding_decades": [3.0, 6.0], "temperatures": 3,
          "horizon": 1.0e+30, "max_moves": 100}


def _escape(where):
    from textglauber import traps

    return traps.run_escape(escape_section(**ESCAPE), device="cpu", dtype="float32", gen=torch.Generator().manual_seed(0),
                            scheduler=where)


def test_the_escape_section_is_identical_serially_and_on_two_workers():
    """Chapter 5's escape section, one unit per model (the tiny MLM over its whole vocabulary and over
    whole words): its cells, fits and preprint-temperature rows bit for bit, serially (torch at two
    threads) and on two workers."""
    serial = _at_two_threads(lambda: _escape("serial"))
    assert len(serial[0]) and len(serial[1]) and len(serial[2])
    for a, b, name in zip(serial, _escape("local:2"), ("cells", "fits", "preprint")):
        pd.testing.assert_frame_equal(a, b, check_exact=True, obj=name)


def _trap_chains(where, out_dir):
    """Chapter 5's chains on the tiny MLM: 18 chains, so two blocks (16 and 2), checkpointed."""
    from textglauber import corpus, engine, models, traps

    lm, scorer = models.kept_mlm({"name": "tiny-mlm"}, device="cpu", dtype="float32")
    init = corpus.windows(lm.tokenizer, "tiny", 8, 18, 0, vocab=scorer.vocab)
    spec = engine.ChainSpec(temperature=0.5, steps=200, record_every=5, checkpoint_every=100)
    return traps.run_chains({"name": "tiny-mlm"}, init, spec, seed=4, out_dir=out_dir, device="cpu", dtype="float32",
                            scheduler=where)


def test_the_trap_chains_are_identical_serially_and_on_two_workers(tmp_path):
    """Chapter 5's chains, one unit per block of chains, each block checkpointed in its own folder: every
    recorded state and site bit for bit, serially (torch at two threads) and on two workers; the
    chains moved."""
    a = _at_two_threads(lambda: _trap_chains("serial", tmp_path / "serial"))
    assert a.states.shape[1] == 18 and (a.states[-1] != a.states[0]).any()
    b = _trap_chains("local:2", tmp_path / "local")
    np.testing.assert_array_equal(a.states, b.states)
    np.testing.assert_array_equal(a.sites, b.sites)
    assert sorted(p.name for p in (tmp_path / "local").iterdir()) == ["block-0", "block-1"]


MODEL = {"name": "tiny-mlm", "corpus": "tiny"}


def _passages(gen):
    """The chapter's passages_for on the tiny MLM's corpus, each call seeded from ``gen``."""
    from textglauber import corpus, models

    lm, scorer = models.kept_mlm(MODEL, device="cpu", dtype="float32")
    return lambda n, count: corpus.windows(lm.tokenizer, "tiny", n, count,
                                           int(torch.randint(2**31 - 1, (1,), generator=gen)), vocab=scorer.vocab)


def _coupling(where):
    """Chapter 3's coupling grid on the tiny MLM, one unit per length."""
    from textglauber import coupling

    gen = torch.Generator().manual_seed(0)
    passages_for = _passages(gen)
    return coupling.grid_experiment(MODEL, passages_for, [4, 6, 8], [0.5, 2.0], pairs=3, budget={4: 80, 6: 120, 8: 160},
                                    gen=gen, device="cpu", dtype="float32", scheduler=where)


def test_the_coupling_grid_is_identical_serially_and_on_two_workers():
    """One unit per length, its starts and seed drawn before any unit runs: the pairs' coupling times
    and rows scored bit for bit, serially (torch at two threads) and on two workers; the grid
    is not all censored, so the times are compared, not only NaNs."""
    serial = _at_two_threads(lambda: _coupling("serial"))
    assert sorted(serial.n.unique()) == [4, 6, 8] and len(serial) == 3 * 2 * 3 and (~serial.censored).any()
    pd.testing.assert_frame_equal(serial, _coupling("local:2"), check_exact=True)


def _drift(where):
    """Chapter 3's drift chains on the tiny MLM, its own encoder as the embedder, one unit per (n, T)."""
    from textglauber import semantics

    gen = torch.Generator().manual_seed(0)
    passages_for = _passages(gen)
    return semantics.drift_experiment(MODEL, "self", passages_for, [4, 6], [1.0, 2.0], trials=3, steps={4: 40, 6: 60},
                                      record_every=5, deltas=[0.05, 0.2], gen=gen, block=20, device="cpu",
                                      dtype="float32", scheduler=where)


def test_the_drift_chains_are_identical_serially_and_on_two_workers():
    """One unit per (n, T), every block's seed drawn before any unit runs: hitting times and drift
    curves bit for bit, serially (torch at two threads) and on two workers; some chains hit."""
    chains, curves = _at_two_threads(lambda: _drift("serial"))
    assert len(chains) == 2 * 2 * 2 * 3 and (~chains.censored).any() and (curves.mean_drift > 0).any()
    chains2, curves2 = _drift("local:2")
    pd.testing.assert_frame_equal(chains, chains2, check_exact=True)
    pd.testing.assert_frame_equal(curves, curves2, check_exact=True)


def _settings(where):
    """A chapter's run settings on ``where``, its generator seeded with 0."""
    return RunSettings(torch.Generator().manual_seed(0), "cpu", "float32", "fail", where)


RECT_SPECS = [{"name": "tiny-mlm", "corpus": "tiny"}, {"name": "tiny-mlm:seed=1,layers=3", "corpus": "tiny"},
              {"name": "tiny-causal", "kind": "causal", "corpus": "tiny", "candidates": 8, "noise": 0.05}]


def _rectangles(where):
    from textglauber import rectangle

    got = rectangle.run_models(RECT_SPECS, _settings(where), n=8, count=12, top_k=20, temperature=1.0, grid_k=3,
                               n_grids=2)
    return got.rects, got.grids, got.described, got.notes


def test_the_rectangle_test_is_identical_serially_and_on_two_workers():
    """Chapter 1's rectangles, one unit per model (two masked LMs, then the causal control reading the
    first one's texts): rectangles, grids and descriptions bit for bit, serially (torch at two
    threads) and on two workers."""
    rects, grids, described, notes = _at_two_threads(lambda: _rectangles("serial"))
    assert notes == [] and len(described) == 3 and described[2]["texts_of"] == "tiny-mlm"
    assert set(rects.model) >= {"tiny-mlm", "tiny-mlm:seed=1,layers=3", "tiny-causal"} and len(grids) == 4
    rects2, grids2, described2, _ = _rectangles("local:2")
    pd.testing.assert_frame_equal(rects, rects2, check_exact=True)
    pd.testing.assert_frame_equal(grids, grids2, check_exact=True)
    assert [{k: v for k, v in d.items() if k != "device"} for d in described] == \
        [{k: v for k, v in d.items() if k != "device"} for d in described2]


def _text_score(texts):
    """A deterministic stand-in topic scorer over two labels (the units never call it)."""
    a = np.array([(sum(map(ord, t)) % 97) / 97 for t in texts])
    return np.stack([a, 1 - a], 1)


def _basins(where):
    from textglauber import topics

    got = topics.run_models([{"name": "tiny-mlm"}, {"name": "tiny-mlm:seed=1,layers=3"}], _settings(where),
                            score=_text_score, labels=["politics", "health"], seed_topics=["health", "sport"],
                            seeds_per_topic=1, chains_per_seed=2, seq_len=8, steps=60, score_every=20, temperature=1.0,
                            null_seeds=["shuffled", "random"], null_chains=2)
    return got.scores, got.described, got.notes, got.first


def test_the_basin_chains_are_identical_serially_and_on_two_workers():
    """Chapter 4's chains, one unit per model (topic-seeded and null chains), their texts scored where
    the chapter runs: every recorded text and score bit for bit, serially (torch at two threads)
    and on two workers; the chains moved."""
    scores, described, notes, first = _at_two_threads(lambda: _basins("serial"))
    assert notes == [] and first.name == "tiny-mlm" and len(described) == 2
    assert set(scores.kind) == {"topic", "shuffled", "random"}
    moved = scores.groupby(["model", "chain"]).text.nunique()
    assert (moved > 1).any()
    scores2, described2, _, _ = _basins("local:2")
    pd.testing.assert_frame_equal(scores, scores2, check_exact=True)


def _bounds(where):
    from textglauber import influence

    specs = [{"name": "tiny-mlm", "corpus": "tiny", "drift_token": "."},
             {"name": "tiny-mlm:seed=1,layers=3", "corpus": "tiny", "drift_token": "."}]
    got = influence.run_models(specs, _settings(where), seq_len=6, n_contexts=2, top_k=3, extra=1,
                               temperatures=[0.5, 2.0], eps=0.25, drift_k=2, drift_states=6, drift_temperatures=[1.0])
    return got.fits, got.alpha, got.drift, got.states, got.gaps, got.described, got.notes


def test_the_bounds_chapter_is_identical_serially_and_on_two_workers():
    """Chapter 2's influence estimates, drift and score gaps, one unit per model: every table and every
    alpha_ij bit for bit, serially (torch at two threads) and on two workers; the two models differ."""
    fits, alpha, drift, states, gaps, described, notes = _at_two_threads(lambda: _bounds("serial"))
    assert notes == [] and list(fits) == ["tiny-mlm", "tiny-mlm:seed=1,layers=3"] and len(described) == 2
    assert not np.array_equal(fits["tiny-mlm"].alpha_ij, fits["tiny-mlm:seed=1,layers=3"].alpha_ij)
    fits2, alpha2, drift2, states2, gaps2, described2, _ = _bounds("local:2")
    for a, b in ((alpha, alpha2), (drift, drift2), (states, states2), (gaps, gaps2)):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    for name in fits:
        np.testing.assert_array_equal(fits[name].alpha_ij, fits2[name].alpha_ij)
        np.testing.assert_array_equal(fits[name].osc_ij, fits2[name].osc_ij)


def _ground_truth(where):
    from textglauber import groundtruth

    specs = [{"name": "tiny-mlm", "tokens": ["the", "dog", "ran"], "n": 3},
             {"name": "tiny-mlm", "tokens": ["ran", "river", "field"], "n": 3}]
    return groundtruth.run_models(specs, _settings(where), temperatures=[0.5, 2.0],
                                  **truth_settings(pairs=6, budget=60, rectangles=6, chains=4, trap_window=5))


def test_the_ground_truth_chains_are_identical_serially_and_on_two_workers():
    """Chapter 6's restricted chains, one unit per model entry: the truth rows, trap basins and the
    tabulated scores the holding checks read, bit for bit, serially (torch at two threads) and
    on two workers."""
    a = _at_two_threads(lambda: _ground_truth("serial"))
    assert a.notes == [] and len(a.truth) == 4 and set(a.truth.tokens) == {"the dog ran", "ran river field"}
    b = _ground_truth("local:2")
    pd.testing.assert_frame_equal(a.truth, b.truth, check_exact=True)
    pd.testing.assert_frame_equal(a.basins, b.basins, check_exact=True)
    assert [label for label, _ in a.tables] == [label for label, _ in b.tables]
    for (_, x), (_, y) in zip(a.tables, b.tables):
        torch.testing.assert_close(x.table, y.table, rtol=0, atol=0)
