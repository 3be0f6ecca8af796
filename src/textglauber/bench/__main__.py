"""Benchmark: how close the engine runs to the machine's limit, against the older ways.

The command line of :mod:`textglauber.bench` (``python -m textglauber.bench --help``): the
throughput grid (:mod:`~textglauber.bench.throughput`) by default, the metastable grid
(:mod:`~textglauber.bench.metastable`) with ``--metastable``. Each writes a CSV table and its JSON
record under ``results/bench/`` (or ``--out``) and prints the table with its targets."""
from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import pandas as pd
import torch

from .. import provenance
from ..device import pick_device, pick_dtype
from ..models import ModelUnavailableError, check_available
from ..paths import repo_root
from ..results import write_manifest
from .measure import SEED
from .metastable import (HIGH_NOOP_SHARE, METASTABLE_MODELS, METASTABLE_TEMPERATURES, NEAR_ONE_ROUNDS,
                         NEAR_ONE_TEMPERATURE, TRAP_STEPS, metastable_grid, metastable_targets, row_bounds)
from .throughput import LOOP_CHAINS, SHAPES, run_grid


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m textglauber.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="auto", help="weights' dtype: auto (bf16 on CUDA, float32 on CPU), float32, bfloat16")
    ap.add_argument("--compile", nargs="?", const=True, default=False, metavar="MODE",
                    help="also time the engine through torch.compile (optionally a mode, e.g. max-autotune)")
    ap.add_argument("--quick", action="store_true", help="n = 20, batch 1/16/64, BERT-base shape and AntiBERTy")
    ap.add_argument("--models", nargs="*", default=None)
    ap.add_argument("--lengths", nargs="*", type=int, default=None, help="override the grid's n")
    ap.add_argument("--batches", nargs="*", type=int, default=None, help="override the grid's batch sizes")
    ap.add_argument("--steps", type=int, default=None,
                    help="Glauber steps per timed call (3; with --metastable, steps per cell: 400, --quick 200)")
    ap.add_argument("--rounds", type=int, default=3, help="least number of timed rounds per variant")
    ap.add_argument("--loop-chains", type=int, default=LOOP_CHAINS,
                    help=f"throughput grid: the one-chain fill-mask loop runs at most this many of a cell's chains "
                         f"(its rate per chain-step does not depend on how many; default {LOOP_CHAINS}, 0: not timed)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--metastable", action="store_true",
                    help="the engine modes (plain, memo, jump, auto) over temperatures instead of the throughput grid")
    ap.add_argument("--temperatures", nargs="*", type=float, default=None, help="the metastable grid's temperatures")
    ap.add_argument("--chains", type=int, default=16, help="chains per metastable cell")
    ap.add_argument("--trap-steps", type=int, default=TRAP_STEPS,
                    help="chain length of memo, jump and auto in the perfect-trap cell (plain runs --plain-steps)")
    ap.add_argument("--no-trap", action="store_true",
                    help="metastable grid: measure only the burned-in cells, not each model and length's perfect trap")
    ap.add_argument("--trap-only", action="store_true",
                    help="metastable grid: measure only each model and length's perfect-trap cell")
    ap.add_argument("--plain-steps", type=int, default=None,
                    help="steps of each timed plain call in the metastable grid (default: --steps, at most "
                         "--steps); plain's rate per step does not depend on the length, so fewer buy time")
    ap.add_argument("--near-one-rounds", type=int, default=NEAR_ONE_ROUNDS,
                    help=f"metastable grid: least rounds of a cell at T = {NEAR_ONE_TEMPERATURE:g}, where plain "
                         "runs the full --steps too (its target is a ratio near one)")
    ap.add_argument("--fresh", action="store_true",
                    help="metastable grid: start the table at --out afresh rather than keep the cells it (or its "
                         "partial file) already holds with the same key")
    return ap


CEILINGS = {"batches": 4096, "lengths": 510, "steps": 100_000, "rounds": 100, "loop_chains": 4096, "chains": 4096,
            "trap_steps": 10_000_000, "plain_steps": 100_000, "near_one_rounds": 100}
"""The most each count of the benchmark may ask for (a list: each of its values). None of its runs
needs more than a tenth of these (a GPU's batches to 1024, the preprint's 10^4-step chains, at most 7
rounds); past them a run is minutes to days of one cell, or memory the allocator cannot give."""


def over_ceiling(a) -> str | None:
    """One line naming the first count of ``a`` past its :data:`CEILINGS`, or None."""
    for key, most in CEILINGS.items():
        value = getattr(a, key, None)
        for v in value if isinstance(value, list) else [value]:
            if v is not None and v > most:
                return f"--{key.replace('_', '-')} {v}: at most {most} (textglauber.bench.__main__.CEILINGS)"
    return None


def main(argv=None) -> int:
    a = _parser().parse_args(argv)
    line = over_ceiling(a)
    if line:
        raise SystemExit(line)
    try:
        dev = pick_device(a.device)                   # a device this machine lacks, an unknown dtype: one line,
        pick_dtype(a.dtype, dev)                      # decided once here, before any compute
    except (ValueError, RuntimeError) as exc:
        raise SystemExit(f"--device {a.device} --dtype {a.dtype}: {exc}") from None
    if a.metastable:
        return _main_metastable(a, argv, dev)
    return _main_throughput(a, argv, dev)


def _write_table(df: pd.DataFrame, out: Path, a, argv, models_wanted, dev) -> None:
    """The finished table, its JSON record (arguments, command, machine), and no partial file."""
    df.to_csv(out, index=False)
    out.with_suffix(".partial.csv").unlink(missing_ok=True)
    write_manifest(out.parent, name=out.with_suffix(".json").name, parameters=vars(a),
                   models=[{"name": m} for m in models_wanted], seed=SEED, tables=[out.name],
                   extra={"command": " ".join(["python -m textglauber.bench", *(sys.argv[1:] if argv is None else argv)]),
                          "machine": provenance.machine_line(dev, torch.get_num_threads())})


def _main_throughput(a, argv, dev: torch.device) -> int:
    a.steps = 3 if a.steps is None else a.steps
    models_wanted = a.models or (["bert-base", "package:antiberty"] if a.quick
                                 else ["bert-base", "package:antiberty", "package:rxnfp-bert"])
    lengths = a.lengths or ([20] if a.quick else [20, 64, 128])
    gpu_batches = [1, 16, 64, 256, 512, 1024]
    batches = a.batches or ([1, 16, 64] if a.quick else gpu_batches if dev.type == "cuda" else [1, 16, 64, 256])
    if min(lengths) < 1 or min(batches) < 1 or a.steps < 1 or a.rounds < 1:
        raise SystemExit("lengths, batches, steps and rounds must all be at least 1")
    if a.loop_chains < 0:
        raise SystemExit(f"--loop-chains {a.loop_chains}: must be 0 (the loop is not timed) or more")
    if max(lengths) > 510:
        raise SystemExit(f"n = {max(lengths)} is longer than the grid's models accept (510 content tokens)")
    check_available([m for m in models_wanted if m not in SHAPES])
    torch.set_num_threads(torch.get_num_threads())
    out = Path(a.out) if a.out else repo_root() / "results" / "bench" / f"bench-{dev.type}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    df = run_grid(models_wanted, lengths, batches, a.device, steps=a.steps, min_rounds=a.rounds,
                  on_cell=functools.partial(_throughput_progress, out.with_suffix(".partial.csv")), dtype=a.dtype,
                  compile=a.compile, loop_chains=a.loop_chains)
    _write_table(df, out, a, argv, models_wanted, dev)
    cols = ["model", "n", "batch", "variant", "chain_steps_per_s", "fraction_of_bound", "engine_speedup",
            "compiled_speedup", "logit_bytes", "peak_memory_bytes"]
    with pd.option_context("display.width", 220, "display.max_columns", 20):
        print(df[[c for c in cols if c in df]].round(3).to_string(index=False))
    print(f"\nwritten to {out}")
    return 0


def _throughput_progress(partial: Path, df: pd.DataFrame) -> None:
    """After each cell: the table so far into the partial file (a long grid keeps what it measured
    if it is stopped), and a line saying which cell is done."""
    df.to_csv(partial, index=False)
    last = df[df.variant == "engine"].iloc[-1]
    print(f"[bench] {last.model} n={last.n} batch={last.batch} done", flush=True)


def _available_metastable_models() -> list[str]:
    """The default list: the metastable models this machine has."""
    models_wanted = []
    for m in METASTABLE_MODELS:
        try:
            check_available([m])
            models_wanted.append(m)
        except ModelUnavailableError as exc:
            print(f"[bench] skipped: {exc}", flush=True)
    return models_wanted


def _metastable_settings(a) -> tuple[list, list, int, int]:
    """(lengths, temperatures, steps, plain steps) of a metastable run; bad ones refused before any compute."""
    lengths = a.lengths or ([20] if a.quick else [20, 64])
    if a.trap_only and (a.no_trap or a.temperatures):
        raise SystemExit("--trap-only measures the trap cells alone: it takes neither --no-trap nor --temperatures")
    temperatures = [] if a.trap_only else a.temperatures or ([0.25, 1.0, 2.0] if a.quick else list(METASTABLE_TEMPERATURES))
    steps = a.steps or (200 if a.quick else 400)
    plain_steps = a.plain_steps or steps
    if (min(lengths) < 1 or steps < 1 or a.trap_steps < 1 or a.chains < 1 or a.rounds < 1 or plain_steps < 1
            or a.near_one_rounds < 1):
        raise SystemExit("lengths, steps, plain steps, trap steps, chains and rounds must be at least 1")
    if any(T <= 0 for T in temperatures):
        raise SystemExit(f"temperatures must be positive, not {temperatures}")
    if plain_steps > steps:
        raise SystemExit(f"--plain-steps {plain_steps} is more than --steps {steps}")
    return lengths, temperatures, steps, plain_steps


def _measured_before(out: Path, fresh: bool) -> pd.DataFrame | None:
    """The rows a metastable table and its partial file already hold (the partial file holds the
    newer copy of a cell, same key or not); None with ``fresh`` or where there are none."""
    earlier = [] if fresh else [pd.read_csv(f) for f in (out, out.with_suffix(".partial.csv")) if f.exists()]
    done = pd.concat(earlier, ignore_index=True) if earlier else None
    if done is not None:
        coords = [c for c in ("model", "n", "start", "temperature", "mode") if c in done]
        done = done.drop_duplicates(coords, keep="last")
    return done


def _main_metastable(a, argv, dev: torch.device) -> int:
    models_wanted = a.models or _available_metastable_models()
    lengths, temperatures, steps, plain_steps = _metastable_settings(a)
    check_available(models_wanted)
    out = Path(a.out) if a.out else repo_root() / "results" / "bench" / f"metastable-{dev.type}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial.csv")
    df = metastable_grid(models_wanted, lengths, temperatures, chains=a.chains, steps=steps, device=a.device,
                         dtype=a.dtype, rounds=a.rounds, trap=not a.no_trap, trap_steps=a.trap_steps,
                         plain_steps=plain_steps, done=_measured_before(out, a.fresh),
                         near_one_rounds=a.near_one_rounds, on_cell=functools.partial(_write_partial, partial))
    _write_table(df, out, a, argv, list(dict.fromkeys([*df.model, *models_wanted])), dev)
    cols = ["model", "n", "start", "temperature", "mode", "chain_steps_per_s", "speedup", "passes_per_step",
            "cell_noop_share"]
    with pd.option_context("display.width", 220, "display.max_columns", 20):
        print(df[cols].round(3).to_string(index=False))
        print()
        print(metastable_targets(df).round(3).to_string(index=False))
        bounds = row_bounds(df)
        if len(bounds):
            print(f"\nwhere the no-op share is at least {HIGH_NOOP_SHARE:g} (a ceiling, not a target):")
            print(bounds.round(3).to_string(index=False))
    print(f"\nwritten to {out}")
    return 0


def _write_partial(partial: Path, df: pd.DataFrame) -> None:
    df.to_csv(partial, index=False)


if __name__ == "__main__":
    raise SystemExit(main())
