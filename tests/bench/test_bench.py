"""The benchmark command runs end to end and its table says what the issue asks for (no timing
assertions: speed lives in the benchmark's own output, not in tests)."""
import numpy as np
import pandas as pd
import pytest
import torch

from textglauber.traps import finder
from textglauber.bench import measure, metastable, read
from textglauber.bench.__main__ import main

pytestmark = pytest.mark.slow          # minutes together: `pytest -m "not slow"` leaves them out


def test_benchmark_writes_every_variant_and_logit_memory_scales_with_the_allowed_vocabulary(tmp_path, tiny_mlm):
    out = tmp_path / "bench-cpu.csv"
    assert main(["--models", "tiny-mlm", "--lengths", "6", "--batches", "1", "4", "--steps", "1",
                       "--rounds", "1", "--out", str(out)]) == 0
    df = pd.read_csv(out)
    assert not (tmp_path / "bench-cpu.partial.csv").exists()
    four = df[df.batch == 4].set_index("variant")
    assert {"engine", "fill_mask_loop", "shared_site_full", "coupled_pairs"} <= set(four.index)
    V, L = tiny_mlm.model.config.vocab_size, 6 + 2
    A = four.loc["engine", "logit_bytes"] // (4 * 4)
    assert A < V                                                       # the allowed vocabulary, not all of it
    assert four.loc["shared_site_full", "logit_bytes"] == 4 * L * V * 4  # B x n x V float32
    speed = four.loc["engine", "chain_steps_per_s"] / four.loc["shared_site_full", "chain_steps_per_s"]
    assert four.loc["shared_site_full", "engine_speedup"] == speed
    for lo, hi in (("engine_speedup_q25", "engine_speedup_q75"), ("fraction_q25", "fraction_q75")):
        assert 0 < four.loc["shared_site_full", lo] <= four.loc["shared_site_full", hi]
    assert four.loc["engine", ["engine_speedup_q25", "fraction_q25"]].isna().tolist() == [True, False]
    assert (df.chain_steps_per_s > 0).all() and (df.compute_bound_steps_per_s > 0).all()
    assert (df.rounds >= 1).all() and df.steal_fraction.between(0, 1).all()


def test_benchmark_compiled_variant_and_peak_memory_column(tmp_path):
    out = tmp_path / "b.csv"
    assert main(["--models", "tiny-mlm", "--lengths", "5", "--batches", "2", "--steps", "1", "--rounds", "1",
                       "--compile", "--out", str(out)]) == 0
    df = pd.read_csv(out).set_index("variant")
    assert df.loc["engine_compiled", "chain_steps_per_s"] > 0
    assert df.loc["shared_site_full", "compiled_speedup"] > 0
    assert (df.peak_memory_bytes >= 0).all()


def test_the_one_chain_loop_runs_only_its_capped_chains_and_the_table_says_how_many(tmp_path, tiny_mlm):
    """The loop does one full pass per chain-step over the first ``loop_chains`` chains only (a
    count of the model's calls, not a clock); the table's ``chains_timed`` says so, and its rate
    is per chain-step of those chains. With 0 the loop is not timed at all."""
    from textglauber.bench import throughput

    model = throughput.GridModel.load("tiny-mlm", torch.device("cpu"), torch.float32, False)
    calls = []
    model.lm.model.register_forward_hook(lambda mod, inp, out: calls.append(inp[0].shape if inp else None))
    x = model.ids[torch.randint(len(model.ids), (5, 6), generator=torch.Generator().manual_seed(0))]
    for cap, passes in ((2, 3 * 2), (64, 3 * 5)):
        cell = throughput.Cell(model, x, 3, torch.Generator().manual_seed(1), torch.device("cpu"), loop_chains=cap)
        calls.clear()
        cell.fill_mask_loop()
        assert len(calls) == passes
        assert cell.variants()["fill_mask_loop"][1] == passes      # chain-steps the rate is taken over
    off = throughput.Cell(model, x, 3, torch.Generator().manual_seed(1), torch.device("cpu"), loop_chains=0)
    assert "fill_mask_loop" not in off.variants() and "shared_site_full" in off.variants()
    out = tmp_path / "bench-cpu.csv"
    assert main(["--models", "tiny-mlm", "--lengths", "6", "--batches", "4", "--steps", "1", "--rounds", "1",
                 "--loop-chains", "3", "--out", str(out)]) == 0
    timed = pd.read_csv(out).set_index("variant").chains_timed
    assert timed["fill_mask_loop"] == 3 and timed["engine"] == 4 and timed["rectangles"] == 1


def test_random_shapes_have_the_published_bert_parameter_counts():
    """Closed forms: Devlin et al.'s BERT-base and BERT-large encoders have 109,482,240 and
    335,141,888 parameters (with the pooler); the masked-LM head adds its transform (h^2 + h and
    a layer norm's 2h) and the decoder's bias (30,522; its weight is tied to the embeddings) and
    drops the pooler (h^2 + h). Built on the meta device: no memory, no weights."""
    from transformers import BertForMaskedLM

    from textglauber.bench.throughput import SHAPES, shape_config

    encoders = {"bert-base": 109_482_240, "bert-large": 335_141_888}
    assert set(SHAPES) == set(encoders)
    for name, count in encoders.items():
        h = SHAPES[name][0]
        with torch.device("meta"):
            model = BertForMaskedLM(shape_config(name))
        assert sum(p.numel() for p in model.parameters()) == count + 2 * h + 30_522


def test_peak_memory_reads_what_one_call_allocates():
    """Closed form: a call that holds a 64 MiB buffer adds 64 MiB, one that allocates nothing
    adds (almost) nothing, even right after a large buffer was freed."""
    import torch

    mem = measure.PeakMemory(torch.device("cpu"))
    size = 64 << 20
    big = mem.measure(lambda: torch.ones(size // 4).sum())
    assert 0.95 * size <= big <= 1.15 * size
    assert mem.measure(lambda: None) < 4 << 20


def test_peak_memory_reading_leaves_freed_blocks_for_reuse():
    """After a reading, an 8 MiB block that is freed is reused by the next malloc of that size
    rather than mapped afresh (a fresh mapping faults in all of its 2,048 pages): the allocator
    setting that makes the reading exact must not slow the timed calls that follow it."""
    import ctypes
    import resource

    import torch

    mem = measure.PeakMemory(torch.device("cpu"))
    assert mem.measure(lambda: torch.ones(1 << 22).sum()) > 0
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p

    def faults_of_a_new_block(size=8 << 20):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        p = libc.malloc(size)
        ctypes.memset(p, 1, size)
        libc.free(ctypes.c_void_p(p))
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    faults_of_a_new_block()
    assert faults_of_a_new_block() < 256


def test_benchmark_refuses_bad_input_before_compute(tmp_path):
    import pytest

    with pytest.raises(SystemExit, match="at least 1"):
        main(["--models", "tiny-mlm", "--batches", "0", "--out", str(tmp_path / "x.csv")])
    with pytest.raises(SystemExit, match="--lengths 600: at most 510"):
        main(["--models", "tiny-mlm", "--lengths", "600", "--out", str(tmp_path / "x.csv")])
    with pytest.raises(SystemExit, match="--dtype int3: unknown dtype"):
        main(["--models", "tiny-mlm", "--dtype", "int3", "--out", str(tmp_path / "x.csv")])
    with pytest.raises(SystemExit, match="at least 1"):
        main(["--metastable", "--models", "tiny-mlm", "--near-one-rounds", "0", "--out", str(tmp_path / "x.csv")])
    with pytest.raises(SystemExit, match="temperatures must be positive"):
        main(["--metastable", "--models", "tiny-mlm", "--temperatures", "0.5", "0", "--out", str(tmp_path / "x.csv")])
    with pytest.raises(SystemExit, match="--loop-chains -1"):
        main(["--models", "tiny-mlm", "--loop-chains", "-1", "--out", str(tmp_path / "x.csv")])
    assert not (tmp_path / "x.csv").exists()


def test_paired_quartiles_closed_form():
    """Ratios taken round by round: a drift that slows both variants alike leaves the ratio exact."""
    assert measure.paired_quartiles([2, 4, 8, 16], [1, 2, 4, 8]) == (2.0, 2.0)
    assert measure.paired_quartiles([1, 2, 3, 4, 5], [1, 1, 1, 1, 1]) == (2.0, 4.0)
    # a variant timed in one round is paired with the other's first round only
    assert measure.paired_quartiles([6], [2, 1, 1]) == (3.0, 3.0)
    # the median of the paired ratios lies between their quartiles; the ratio of medians need not
    num, den = [1, 2, 30], [10, 1, 3]                   # ratios 0.1, 2, 10; medians 2 over 3
    assert measure.paired_median(num, den) == 2.0 and measure.paired_median([6], [2, 1, 1]) == 3.0
    q25, q75 = measure.paired_quartiles(num, den)
    assert q25 <= measure.paired_median(num, den) <= q75 and not q25 <= np.median(num) / np.median(den) <= q75


def test_time_interleaved_times_a_function_once_when_asked():
    """``once`` is asked after the first round: the functions it names are called in that round
    only, the others in every round (call counts, no clock involved)."""
    calls = {"a": 0, "b": 0, "c": 0}
    fns = {k: (lambda k=k: calls.__setitem__(k, calls[k] + 1)) for k in calls}
    out, _ = measure.time_interleaved(fns, min_rounds=4, max_rounds=4, warmup=lambda: None,
                                     once=lambda k: k == "b")
    assert calls == {"a": 4, "b": 1, "c": 4}
    assert [len(out[k]) for k in "abc"] == [4, 1, 4]


def test_steal_fraction_from_two_proc_stat_readings():
    """Closed form on hand-written /proc/stat lines: of 100 ticks between the readings, 25 were
    stolen; the per-CPU lines are not counted twice; no time passed gives NaN."""
    before = measure.cpu_times("cpu  100 0 50 800 0 0 0 50 0 0\ncpu0 50 0 25 400 0 0 0 25 0 0\n")
    after = measure.cpu_times("cpu  150 0 60 815 0 0 0 75 0 0\ncpu0 75 0 30 407 0 0 0 37 0 0\n")
    assert before.tolist() == [100, 0, 50, 800, 0, 0, 0, 50]
    assert measure.steal_fraction(before, after) == 0.25
    assert measure.steal_fraction(before, before) != measure.steal_fraction(before, before)      # NaN
    assert measure.cpu_times("intr 5\n") is None


def _cell(model, n, batch, variant, rate, fraction=0.5, device="cpu", **extra):
    return {"device": device, "model": model, "n": n, "batch": batch, "variant": variant, "chain_steps_per_s": rate,
            "fraction_of_bound": fraction, **extra}


def test_targets_and_newest_run_wins(tmp_path):
    """Targets computed from a hand-made table: the loop ratio takes the best batch, the
    shared-site ratio the worst, the bound the least cell at batch >= 64; a later file that
    measured the same cell replaces the earlier one's whole cell, variants it did not time
    included (no ratio mixes two runs)."""
    import os

    m = "bert-base shape (random weights)"
    old = pd.DataFrame([_cell(m, 20, 16, "engine", 30.0, 0.9), _cell(m, 20, 64, "engine", 40.0, 0.95),
                        _cell(m, 20, 256, "engine", 36.0, 0.85), _cell(m, 20, 16, "fill_mask_loop", 10.0),
                        _cell(m, 20, 64, "fill_mask_loop", 8.0), _cell(m, 20, 16, "shared_site_full", 25.0),
                        _cell(m, 20, 64, "shared_site_full", 50.0)])
    old.to_csv(tmp_path / "bench-cpu.csv", index=False)
    new = pd.DataFrame([_cell(m, 20, 64, "engine", 40.0, 0.95), _cell(m, 20, 64, "shared_site_full", 20.0)])
    new.to_csv(tmp_path / "bench-cpu-rerun.csv", index=False)
    os.utime(tmp_path / "bench-cpu-rerun.csv", (2e9, 2e9))
    pd.DataFrame([_cell(m, 20, 64, "engine", 1.0)]).to_csv(tmp_path / "bench-cpu.partial.csv", index=False)
    df = read.read_tables(tmp_path)["cpu"]
    assert len(df) == 6 and df[df.variant == "shared_site_full"].chain_steps_per_s.tolist() == [25.0, 20.0]
    assert (df.run == "bench-cpu-rerun").sum() == 2 and "fill_mask_loop" not in set(df[df.batch == 64].variant)
    t = read.targets(df).set_index("target")
    assert t.loc["fraction of the bound, n = 20, batch >= 64 (least cell)", "measured"] == 0.85
    assert t.loc["x the fill-mask loop, n = 20 (best batch)", "measured"] == 3.0       # 30 / 10: batch 64 has no loop now
    assert t.loc["x shared-site full logits, n = 20 (every batch)", "measured"] == 1.2  # min(30/25, 40/20)
    assert t.met.tolist() == [True, False, True]
    assert t[["q25", "q75"]].isna().all().all()                    # tables without per-round spread


def test_targets_label_each_engine_and_carry_the_deciding_cells_spread(tmp_path):
    """With the compiled engine beside the eager one, each engine gets the same three targets,
    and each target carries the per-round quartiles of the cell that decided it."""
    m = "bert-base shape (random weights)"
    sp = lambda lo, hi: {"engine_speedup_q25": lo, "engine_speedup_q75": hi,
                         "compiled_speedup_q25": lo + 1, "compiled_speedup_q75": hi + 1}
    pd.DataFrame([_cell(m, 20, 64, "engine", 40.0, 0.9, fraction_q25=0.8, fraction_q75=0.95),
                  _cell(m, 20, 256, "engine", 36.0, 0.85, fraction_q25=0.7, fraction_q75=0.9),
                  _cell(m, 20, 64, "engine_compiled", 44.0, 1.0, fraction_q25=0.9, fraction_q75=1.1),
                  _cell(m, 20, 256, "engine_compiled", 44.0, 1.05),
                  _cell(m, 20, 64, "fill_mask_loop", 10.0, **sp(3.0, 5.0)),
                  _cell(m, 20, 64, "shared_site_full", 20.0, **sp(1.5, 2.5)),
                  _cell(m, 20, 256, "shared_site_full", 30.0, **sp(1.1, 1.3))]).to_csv(tmp_path / "bench-cpu.csv", index=False)
    t = read.targets(read.read_tables(tmp_path)["cpu"]).set_index(["engine", "target"])
    bound = "fraction of the bound, n = 20, batch >= 64 (least cell)"
    loop, shared = "x the fill-mask loop, n = 20 (best batch)", "x shared-site full logits, n = 20 (every batch)"
    assert sorted(t.index) == sorted((e, x) for e in ("engine", "engine_compiled") for x in (bound, loop, shared))
    assert t.loc[("engine", bound), ["measured", "q25", "q75"]].tolist() == [0.85, 0.7, 0.9]
    assert t.loc[("engine_compiled", bound), ["measured", "q25", "q75"]].tolist() == [1.0, 0.9, 1.1]
    assert t.loc[("engine", shared), ["measured", "q25", "q75"]].tolist() == [36 / 30, 1.1, 1.3]   # batch 256 decides
    assert t.loc[("engine_compiled", loop), ["measured", "q25", "q75"]].tolist() == [4.4, 4.0, 6.0]


def test_projection_divides_work_by_the_fastest_measured_rate():
    m = "bert-base shape (random weights)"
    df = pd.DataFrame([_cell(m, 20, 16, "engine", 30.0), _cell(m, 20, 64, "engine", 40.0),
                       _cell(m, 64, 64, "engine", 10.0)])
    work = pd.DataFrame({"masked rows": [40 * 3600, 10 * 3600 * 2], "typical n": [20, 64]})
    assert read.projected_hours(work, df).tolist() == [1.0, 2.0]


def test_metastable_grid_writes_every_mode_per_cell(tmp_path):
    """The engine modes on the same chains: four rows per cell, plain scores one row a chain-step,
    memo never more (the same trajectory), a perfect-trap cell at T = 0.25; targets are read off."""
    out = tmp_path / "metastable-cpu.csv"
    assert main(["--metastable", "--models", "tiny-mlm", "--lengths", "5", "--temperatures", "0.25", "2",
                       "--chains", "4", "--steps", "30", "--trap-steps", "300", "--rounds", "1", "--out", str(out)]) == 0
    df = pd.read_csv(out)
    assert not (tmp_path / "metastable-cpu.partial.csv").exists()
    cells = df.groupby(["start", "temperature"])
    assert len(cells) == 3 and all(sorted(g["mode"]) == sorted(metastable.METASTABLE_MODES) for _, g in cells)
    assert set(df[df.start == "perfect trap"].temperature) == {finder.TRAP_TEMPERATURE}
    by = df.set_index(["start", "temperature", "mode"])
    assert (df[df["mode"] == "plain"].passes_per_step == 1).all() and (df[df["mode"] == "plain"].speedup == 1).all()
    assert (df[df["mode"] == "memo"].passes_per_step <= 1).all()
    for (start, T), g in cells:        # memo is plain's trajectory: the same no-op share (equal lengths)
        if start != "perfect trap":
            assert by.loc[(start, T, "memo"), "noop_share"] == by.loc[(start, T, "plain"), "noop_share"]
    assert df.noop_share[~df.cut].between(0, 1).all() and df.noop_share[df.cut].isna().all()
    assert (df.chain_steps_per_s > 0).all()
    assert df[df["mode"] == "auto"].auto_segments.str.startswith("memo:").all()
    # a trap cell times the other modes over --trap-steps, plain over --steps (its rate is per step)
    trap = df[df.start == "perfect trap"].set_index("mode")
    assert trap.steps.to_dict() == {"plain": 30, "memo": 300, "jump": 300, "auto": 300}
    assert (df[df.start != "perfect trap"].steps == 30).all()
    # in a trap, jump scores the n = 5 sites of each chain's state once and then holds: far under
    # one row per step over 300 steps (plain: exactly one)
    assert trap.loc["jump", "passes_per_step"] < 0.2
    assert set(metastable.metastable_targets(df).target) >= {"x plain at T = 2 (least cell)",
                                                        "x plain on a perfect trap at T = 0.25 (least cell)"}


def _modes_rows():
    rows = [{"mode": "auto", "start": "burned in", "temperature": 0.25, "cell_noop_share": 0.95, "speedup": 3.0},
            {"mode": "auto", "start": "burned in", "temperature": 0.5, "cell_noop_share": 0.91, "speedup": 1.5},
            {"mode": "auto", "start": "burned in", "temperature": 1.0, "cell_noop_share": 0.6, "speedup": 0.5},
            {"mode": "auto", "start": "burned in", "temperature": 2.0, "cell_noop_share": 0.1, "speedup": 0.97},
            {"mode": "jump", "start": "burned in", "temperature": 2.0, "cell_noop_share": 0.1, "speedup": 0.3},
            {"mode": "auto", "start": "perfect trap", "temperature": 0.25, "cell_noop_share": 1.0, "speedup": 25.0}]
    rows = [{"model": "m", "n": 20, "passes_per_step": 0.25, **r} for r in rows]
    rows.append({**rows[1], "mode": "memo", "passes_per_step": 0.4, "speedup": 2.2})      # the 0.5 cell's fewest rows
    return rows


def test_metastable_targets_take_the_least_cell_of_each_kind():
    """Two targets: 20x on a perfect trap and 0.95x at T = 2. The third, 2x wherever the no-op
    share is 0.9 or more, is retired (its cells here, at T = 0.25 and 0.5, decide nothing): the
    rows memo must score there bound the ratio below 2 on a CPU in some cells and not in others
    at the same share, so :func:`metastable.row_bounds` reports the bound there instead."""
    rows = _modes_rows()
    t = metastable.metastable_targets(pd.DataFrame(rows)).set_index("target")
    assert not t.index.str.contains("no-op share").any()
    assert t.measured.tolist() == [25.0, 0.97] and t.cells.tolist() == [1, 1]
    assert t.met.tolist() == [True, True]
    assert t["least cell"].tolist() == ["m, n 20, temperature 0.25", "m, n 20, temperature 2"]
    # the fewest rows of memo or jump in the deciding cell: jump's 0.25 at T = 2, none in the trap
    # cell (it has auto alone here)
    assert pd.isna(t["row bound"].tolist()[0]) and t["row bound"].tolist()[1] == 1 / 0.25

    # an upper bound cannot show a target met: a cut auto row at T = 2 reads "not met" even
    # above 0.95, while an uncut table (or one from before the column, NaN) reads the median
    cut = pd.DataFrame(rows).assign(cut=lambda d: (d["mode"] == "auto") & (d.temperature == 2.0))
    assert metastable.metastable_targets(cut).met.tolist() == [True, False]
    older = pd.DataFrame(rows).assign(cut=np.nan)
    assert metastable.metastable_targets(older).met.tolist() == [True, True]


def test_row_bounds_set_auto_beside_plains_rows_over_memos_where_the_no_op_share_is_high():
    """Where the retired 2x target applied (no-op share 0.9 or more, burned in) what holds is a
    ceiling: plain's one row per chain-step over the rows memo scored. Here only the T = 0.5 cell
    has memo's rows (0.4 a step: a bound of 2.5, and auto 1.5x under it); the T = 0.25 cell has no
    memo row and the trap and low-share cells are not asked about."""
    rows = _modes_rows()
    b = metastable.row_bounds(pd.DataFrame(rows))
    assert b[["temperature", "no-op share", "memo rows per step", "row bound", "auto x plain"]].values.tolist() == \
        [[0.5, 0.91, 0.4, 2.5, 1.5]]
    assert b["auto cut"].tolist() == [False]
    rows.append({**rows[0], "mode": "memo", "passes_per_step": 0.8})                 # T = 0.25: 0.8 rows a step
    b = metastable.row_bounds(pd.DataFrame(rows).assign(cut=lambda d: (d["mode"] == "auto") & (d.temperature == 0.25)))
    assert b.temperature.tolist() == [0.25, 0.5] and b["row bound"].tolist() == [1.25, 2.5]   # lowest bound first
    assert b["auto cut"].tolist() == [True, False]
    assert metastable.row_bounds(pd.DataFrame(rows).drop(columns="passes_per_step")).empty


def _grid(out, *extra):
    return main(["--metastable", "--models", "tiny-mlm", "--lengths", "5", "--temperatures", "0.25", "2",
                       "--chains", "4", "--steps", "30", "--trap-steps", "300", "--rounds", "1", "--out", str(out),
                       *extra])


def test_metastable_plain_timed_over_fewer_steps_and_noop_share_from_memo(tmp_path):
    """--plain-steps shortens plain's timed call only: the other modes keep their lengths, and the
    cell's no-op share is memo's over the full length (plain's chain: same sites and uniforms)."""
    out = tmp_path / "metastable-cpu.csv"
    assert _grid(out, "--plain-steps", "10") == 0
    df = pd.read_csv(out)
    cool = df.temperature != metastable.NEAR_ONE_TEMPERATURE
    assert (df[(df["mode"] == "plain") & cool].steps == 10).all()
    assert (df[(df["mode"] == "plain") & ~cool].steps == 30).all()      # near one: plain's full length
    assert (df[(df["mode"] == "memo") & (df.start != "perfect trap")].steps == 30).all()
    assert (df[(df["mode"] == "memo") & (df.start == "perfect trap")].steps == 300).all()


def test_metastable_no_trap_keeps_the_trap_cells_it_did_not_measure(tmp_path):
    """--no-trap measures the burned-in cells alone; a trap cell already in the table stays."""
    out = tmp_path / "metastable-cpu.csv"
    assert _grid(out, "--no-trap", "--temperatures", "2") == 0
    df = pd.read_csv(out)
    assert set(df.start) == {"burned in 100 steps"} and set(df.temperature) == {2.0}
    assert _grid(out, "--temperatures", "2") == 0          # adds the trap cell, re-uses T = 2
    assert _grid(out, "--no-trap", "--temperatures", "0.25") == 0
    df = pd.read_csv(out)
    assert set(df.start) == {"burned in 100 steps", "perfect trap"}
    assert set(df[df.start != "perfect trap"].temperature) == {0.25, 2.0}
    memo = df[df["mode"] == "memo"].set_index(["start", "temperature"]).noop_share
    for (start, T), g in df.groupby(["start", "temperature"]):
        assert (g.cell_noop_share == memo[(start, T)]).all()
    with pytest.raises(SystemExit, match="more than --steps"):
        _grid(tmp_path / "bad.csv", "--plain-steps", "31")


def test_metastable_trap_only_measures_the_trap_cells_alone(tmp_path):
    """--trap-only adds the trap cell to a table of burned-in cells and measures nothing else; with
    --no-trap or temperatures it is refused before any compute."""
    out = tmp_path / "metastable-cpu.csv"
    assert _grid(out, "--no-trap", "--temperatures", "2") == 0
    before = pd.read_csv(out)
    assert main(["--metastable", "--models", "tiny-mlm", "--lengths", "5", "--chains", "4", "--steps", "30",
                       "--trap-steps", "300", "--rounds", "1", "--out", str(out), "--trap-only"]) == 0
    df = pd.read_csv(out)
    assert set(df.start) == {"burned in 100 steps", "perfect trap"} and set(df.temperature) == {0.25, 2.0}
    kept = df[df.start != "perfect trap"].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept[before.columns], before, check_dtype=False)
    trap = df[df.start == "perfect trap"]
    assert (trap.trap_states >= 1).all() and (trap.trap_hold_min <= trap.trap_hold_median).all()
    for extra in (["--no-trap"], ["--temperatures", "0.25"]):
        with pytest.raises(SystemExit, match="trap-only"):
            main(["--metastable", "--models", "tiny-mlm", "--out", str(tmp_path / "bad.csv"), "--trap-only", *extra])
    assert not (tmp_path / "bad.csv").exists()


def test_metastable_grid_resumes_from_its_partial_table(tmp_path, monkeypatch):
    """A grid stopped after its first cell keeps that cell (same timings, not measured again) and
    measures the rest on the same chains as an uninterrupted grid: the counts of scored rows and
    the no-op shares, which do not depend on the clock, equal those of a grid run in one go."""
    whole = tmp_path / "whole" / "metastable-cpu.csv"
    assert _grid(whole) == 0
    ref = pd.read_csv(whole)

    out = tmp_path / "cut" / "metastable-cpu.csv"
    real = metastable._modes_cell
    calls = []

    def stop_after_first(*a, **k):
        if calls:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(metastable, "_modes_cell", stop_after_first)
    with pytest.raises(KeyboardInterrupt):
        _grid(out)
    first = pd.read_csv(out.with_suffix(".partial.csv"))
    assert len(first) == len(metastable.METASTABLE_MODES) and not out.exists()

    measured = []
    monkeypatch.setattr(metastable, "_modes_cell", lambda *a, **k: measured.append(a[3]) or real(*a, **k))
    assert _grid(out) == 0
    df = pd.read_csv(out)
    assert len(measured) == 2                                  # the two cells the stopped run had not reached
    assert not out.with_suffix(".partial.csv").exists()
    kept = df[df.cell_key == first.cell_key[0]].reset_index(drop=True)
    assert kept.chain_steps_per_s.tolist() == first.chain_steps_per_s.tolist()
    cols = ["start", "temperature", "mode", "cell_key", "passes_per_step", "noop_share", "cell_noop_share"]
    key = ["start", "temperature", "mode"]
    pd.testing.assert_frame_equal(df[cols].sort_values(key).reset_index(drop=True),
                                  ref[cols].sort_values(key).reset_index(drop=True))

    # a finished table is kept too; a changed parameter makes a new cell, measured again, whose rows
    # replace the older ones at the same coordinates (the T = 0.25 cell stays as it was)
    measured.clear()
    assert _grid(out) == 0 and measured == []
    assert _grid(out, "--steps", "20", "--temperatures", "2") == 0 and len(measured) == 2
    again = pd.read_csv(out)
    assert len(again) == len(df) and again.commit.notna().all()
    assert sorted(again[again["mode"] == "memo"].steps) == [20, 30, 300]
    measured.clear()
    assert _grid(out, "--fresh") == 0 and len(measured) == 3


def test_metastable_losing_mode_is_timed_once_and_a_cell_does_not_depend_on_the_rest_of_the_grid(tmp_path):
    """At T = 2 jump scores the 5 sites of nearly every new state, far above LOSING_ROWS rows per
    step: one round; every mode that scores fewer keeps all three. And a grid asked for T = 2
    alone measures the same chains in that cell (same rows, same no-op shares) as the grid that
    also holds T = 0.25: each cell's starts and seed follow from its own coordinates."""
    whole = tmp_path / "whole.csv"
    assert _grid(whole, "--rounds", "3") == 0
    df = pd.read_csv(whole)
    assert ((df.passes_per_step > metastable.LOSING_ROWS) == (df.rounds == 1)).all()
    assert ((df.passes_per_step > metastable.LOSING_ROWS) == df.cut).all()
    near_one = (df.temperature == metastable.NEAR_ONE_TEMPERATURE) & (df.start != "perfect trap")
    kept = df.passes_per_step <= metastable.LOSING_ROWS
    assert (df.rounds[kept & ~near_one] == 3).all()
    assert (df.rounds[kept & near_one] == metastable.NEAR_ONE_ROUNDS).all() and (kept & near_one).any()
    assert df.noop_share[df.cut].isna().all() and df.noop_share[~df.cut].notna().all()
    hot = df[(df.temperature == 2) & (df.start != "perfect trap")].set_index("mode")
    assert hot.loc["jump", "passes_per_step"] > metastable.LOSING_ROWS and hot.loc["jump", "rounds"] == 1
    assert hot.loc["jump", "speedup_q25"] == hot.loc["jump", "speedup_q75"]

    part = tmp_path / "part.csv"
    assert main(["--metastable", "--models", "tiny-mlm", "--lengths", "5", "--temperatures", "2",
                       "--chains", "4", "--steps", "30", "--trap-steps", "300", "--rounds", "3",
                       "--out", str(part)]) == 0
    alone = pd.read_csv(part)
    cols = ["start", "temperature", "mode", "passes_per_step", "noop_share", "cell_noop_share", "auto_segments"]
    key = ["start", "temperature", "mode"]
    pd.testing.assert_frame_equal(alone[cols].sort_values(key).reset_index(drop=True),
                                  df[df.temperature == 2][cols].sort_values(key).reset_index(drop=True)
                                  .pipe(lambda d: pd.concat([d, df[df.start == "perfect trap"][cols]]))
                                  .sort_values(key).reset_index(drop=True))


def test_metastable_partial_table_replaces_older_rows_at_the_same_coordinates(tmp_path, monkeypatch):
    """A finished table from older code (other keys) and a partial table from the current code at
    the same cells: the partial's rows are kept, each cell once, and nothing is measured again."""
    out = tmp_path / "metastable-cpu.csv"
    assert _grid(out) == 0
    current = pd.read_csv(out)
    current.to_csv(out.with_suffix(".partial.csv"), index=False)
    current.assign(cell_key="older code", chain_steps_per_s=-1.0).to_csv(out, index=False)
    measured = []
    real = metastable._modes_cell
    monkeypatch.setattr(metastable, "_modes_cell", lambda *a, **k: measured.append(a[3]) or real(*a, **k))
    assert _grid(out) == 0 and measured == []
    df = pd.read_csv(out)
    assert len(df) == len(current) and (df.chain_steps_per_s > 0).all()
    assert set(df.cell_key) == set(current.cell_key)


def test_row_budget_raises_before_scoring_the_call_that_would_pass_it(small_scorer):
    """The budget is checked before the inner scorer runs: the call that would take the count
    past it scores nothing, and the calls before it are counted in full."""
    from conftest import CountingScorer

    inner = CountingScorer(small_scorer)
    counted = metastable.RowCount(inner, budget=7)
    x = small_scorer.vocab.ids[torch.zeros(4, 3, dtype=torch.long)]
    counted.scores(x, torch.zeros(4, dtype=torch.long))
    counted.scores(x[:3], torch.ones(3, dtype=torch.long))           # 7 rows: exactly the budget
    assert (counted.rows, inner.calls, counted.spent) == (7, 2, False)
    with pytest.raises(metastable.RowBudgetSpent):
        counted.scores(x[:1], torch.zeros(1, dtype=torch.long))
    assert (counted.rows, inner.calls, counted.spent, counted.wanted) == (7, 2, True, 8)


@pytest.mark.parametrize("T", [0.25, 2.0])
def test_a_mode_is_cut_exactly_when_its_full_run_needs_more_than_the_row_budget(tiny_mlm, T):
    """Against the full, unbudgeted run of each mode from the same starts and seed: a mode is cut
    if and only if that run scores more than LOSING_ROWS rows per chain-step; an uncut mode
    reports that run's rows and no-op share exactly, and a cut one a lower bound on its rows."""
    from textglauber import models, vocabulary
    from textglauber.engine import ChainSpec, run

    scorer = models.MaskedLMScorer(tiny_mlm, vocabulary.allowed_vocabulary(tiny_mlm.tokenizer))
    chains, n, steps, seed = 4, 6, 40, 3
    x0 = scorer.vocab.ids[torch.randint(scorer.vocab.size, (chains, n), generator=torch.Generator().manual_seed(1))]
    rows = {r["mode"]: r for r in metastable._modes_cell(scorer, x0, T, steps, seed, {}, rounds=2)}
    assert rows["plain"]["cut"] is False and rows["plain"]["passes_per_step"] == 1.0
    for mode in ("memo", "jump", "auto"):
        full = metastable.RowCount(scorer)
        r = run(full, x0, ChainSpec(temperature=T, steps=steps, record_every=1, checkpoint_every=steps, mode=mode),
                seed=seed)
        need = full.rows / (chains * steps)
        got = rows[mode]
        assert got["cut"] == (need > metastable.LOSING_ROWS)
        if got["cut"]:
            assert metastable.LOSING_ROWS < got["passes_per_step"] <= need and got["rounds"] == 1
            assert np.isnan(got["noop_share"])
        else:
            moved = (r.states[1:] != r.states[:-1]).any(-1)
            assert got["passes_per_step"] == need and got["noop_share"] == 1 - float(moved.mean())
            assert got["rounds"] == 2
    assert rows["memo"]["cut"] is False                # at most one row per chain-step: both branches are run
    assert rows["jump"]["cut"] or T != 2.0             # the fast side's new states cost jump their n rows


# ---------------------------------------------------------------- the cost appendix's tables (read.py)
def test_run_records_give_their_time_and_one_row_each(tmp_path):
    import json

    (tmp_path / "bench-cpu.json").write_text(json.dumps({"created": "2026-01-02T03:04:05+00:00", "machine": "x",
                                                         "command": "python -m textglauber.bench", "seed": 0}))
    (tmp_path / "bench-cuda.json").write_text(json.dumps({"machine": "y"}))
    (tmp_path / "metastable-cpu.json").write_text(json.dumps({"created": "2026-05-06T07:08:09+00:00"}))
    assert read.created(tmp_path / "bench-cpu.json") == "2026-01-02 03:04"
    assert read.created(tmp_path / "bench-cuda.json") == ""
    runs = read.bench_runs(tmp_path)
    assert runs.run.tolist() == ["bench-cpu", "bench-cuda"] and "seed" not in runs
    assert runs.to_dict("records")[0] == {"run": "bench-cpu", "created": "2026-01-02T03:04:05+00:00", "machine": "x",
                                          "command": "python -m textglauber.bench"}
    assert read.bench_runs(tmp_path / "none").empty


def test_engine_table_joins_each_speedup_to_its_cell_with_its_spread():
    """Two cells: the engine's rate and fraction, the loop and shared-site speed-ups read from those
    variants' rows of the same cell (NaN where a variant or its quartiles are missing), memory in MB."""
    m = "bert-base shape (random weights)"
    df = pd.DataFrame([_cell(m, 20, 1, "engine", 30.0, 0.4, logit_bytes=2**21, matmul_gflops=100.0, steal_fraction=0.1),
                       _cell(m, 20, 64, "engine", 60.0, 0.8, logit_bytes=2**22, matmul_gflops=120.0, steal_fraction=0.3),
                       _cell(m, 20, 1, "fill_mask_loop", 10.0, engine_speedup=3.0, engine_speedup_q25=2.5,
                             engine_speedup_q75=3.5),
                       _cell(m, 20, 64, "shared_site_full", 40.0, engine_speedup=1.5)]).assign(dtype="float32")
    table, spans = read.engine_table(df)
    assert table[["batch", "steps/s", "fraction_of_bound", "logit MB"]].values.tolist() == [[1, 30.0, 0.4, 2.0],
                                                                                           [64, 60.0, 0.8, 4.0]]
    assert table["x fill-mask loop"].tolist()[0] == 3.0 and np.isnan(table["x fill-mask loop"].tolist()[1])
    assert table[["x fill-mask loop q25", "x fill-mask loop q75"]].values.tolist()[0] == [2.5, 3.5]
    assert np.isnan(table["x shared-site full"].tolist()[0]) and table["x shared-site full"].tolist()[1] == 1.5
    assert table["x shared-site full q25"].isna().all() and "compiled fraction" not in table
    assert spans == {"fraction of bound [q25, q75]": ("fraction_of_bound", "fraction_q25", "fraction_q75"),
                     "x fill-mask loop [q25, q75]": ("x fill-mask loop", "x fill-mask loop q25", "x fill-mask loop q75"),
                     "x shared-site full [q25, q75]": ("x shared-site full", "x shared-site full q25",
                                                       "x shared-site full q75")}
    head = read.device_header("cpu", df)
    assert head.startswith("**Device: cpu** (float32); the matrix-multiply rate measured in the cells ranged from 100 "
                           "to 120 GFLOP/s (median over the 2 cells 110).")
    assert "gave 10% to 30% (median 20%)" in head
    assert "steal" not in read.device_header("cpu", df.drop(columns="steal_fraction"))
    assert read.megabytes(3 * 2**20) == 3.0


def test_standing_targets_leave_out_the_retired_loop_target():
    m = "bert-base shape (random weights)"
    df = pd.DataFrame([_cell(m, 20, 64, "engine", 40.0, 0.9), _cell(m, 20, 64, "fill_mask_loop", 10.0),
                       _cell(m, 20, 64, "shared_site_full", 20.0)])
    every = read.targets(df)
    assert every.target.str.contains("fill-mask loop").sum() == 1
    assert read.standing_targets(df).target.tolist() == [t for t in every.target if "fill-mask loop" not in t]


def _grid_rows(cut_jump=False):
    """Two cells of one model (burned in at T = 0.25, a trap), each with the four modes."""
    rows = []
    for start, T, noop in (("burned in", 0.25, 0.9), ("perfect trap", 0.25, 1.0)):
        for mode, speed, pps, steps in (("plain", 1.0, 1.0, 30), ("memo", 2.0, 0.5, 300), ("jump", 4.0, 0.1, 300),
                                        ("auto", 3.0, 0.2, 300)):
            rows.append({"model": "m", "n": 20, "start": start, "temperature": T, "mode": mode, "speedup": speed,
                         "passes_per_step": pps, "steps": steps, "cell_noop_share": noop,
                         "cut": cut_jump and mode == "jump" and start == "burned in"})
    return pd.DataFrame(rows)


def test_speedup_table_marks_a_cut_mode_as_an_upper_bound():
    t = read.speedup_table(_grid_rows(cut_jump=True))
    assert t.columns.tolist() == ["model", "n", "start", "temperature", "plain x plain", "memo x plain", "jump x plain",
                                  "auto x plain", "no-op share", "auto passes / step", "plain steps", "other modes' steps"]
    assert t["jump x plain"].tolist() == ["≤ 4.00", 4.0] and t["memo x plain"].tolist() == [2.0, 2.0]
    assert t[["no-op share", "auto passes / step", "plain steps", "other modes' steps"]].values.tolist() == \
        [[0.9, 0.2, 30, 300], [1.0, 0.2, 30, 300]]
    assert read.cut_cells(_grid_rows(True)).sum() == 1
    assert not read.cut_cells(_grid_rows().drop(columns="cut")).any()
    assert not read.cut_cells(_grid_rows().assign(cut=np.nan)).any()


def test_trap_depths_count_the_cells_without_a_recorded_or_deep_trap():
    m = _grid_rows()
    traps = read.trap_cells(m)
    assert len(traps) == 1 and traps["mode"].tolist() == ["auto"]
    table, older, shallow = read.trap_depths(traps)
    assert table.columns.tolist() == ["model", "n"] and (older, shallow) == (1, 0)
    two = pd.concat([traps, traps.assign(n=64)]).assign(trap_hold_min=[500.0, np.nan], deep=[True, False])
    table, older, shallow = read.trap_depths(two)
    assert table.columns.tolist() == ["model", "n", "trap_hold_min", "deep"] and (older, shallow) == (1, 1)


def test_grid_coverage_counts_the_cells_of_the_full_grid_a_table_holds():
    per_block = len(metastable.METASTABLE_TEMPERATURES) + 1
    full = 2 * len(metastable.METASTABLE_MODELS) * per_block
    mdl = metastable.METASTABLE_MODELS[0]
    m = _grid_rows().assign(model=mdl)
    have, of, missing = read.grid_coverage(m)
    assert (have, of) == (2, full) and len(missing) == 2 * len(metastable.METASTABLE_MODELS)
    assert missing[0] == f"{mdl} at n = 20 ({per_block - 2} of {per_block} cells)" and missing[1] == f"{mdl} at n = 64"
    every = pd.DataFrame([{"model": mo, "n": n, "start": "burned in", "temperature": T}
                          for mo in metastable.METASTABLE_MODELS for n in (20, 64)
                          for T in (*metastable.METASTABLE_TEMPERATURES, "trap")])
    assert read.grid_coverage(every) == (full, full, [])
