"""Benchmark: how close the engine runs to the machine's limit, against the older ways.

    python -m textglauber.bench                      # CPU, the default grid
    python -m textglauber.bench --quick              # a small grid (minutes)
    python -m textglauber.bench --device cuda        # the GPU path (bf16 weights, float32 scores)
    python -m textglauber.bench --compile            # adds the engine through torch.compile

Variants, on the same inputs:

- ``engine``: this library's step: B chains, each with its own site, one encoder pass whose
  last layer runs its query and feed-forward block on the B masked rows only (BERT-style
  encoders), the LM head on B rows and |A| columns, and one draw per chain;
- ``fill_mask_loop``: one chain per forward pass with full logits (a fill-mask style loop),
  then a draw from the softmax over the whole vocabulary;
- ``shared_site_full``: one forward pass for the batch, every chain masked at the same site,
  full B x n x V logits materialised (as earlier public Gibbs code does), then a draw per chain;
- ``coupled_pairs``: one coupled step for B/2 pairs (2 rows each);
- ``rectangles``: rectangles scored per second (4 masked rows each);
- ``engine_compiled`` (with ``--compile``): the engine's pass through ``torch.compile``.

Throughput is chain-steps (or rectangles) per second, the median over interleaved rounds. The
compute bound is the measured matrix-multiply rate divided by the model's FLOPs per chain-step.
Logit memory is read off the logit tensors each variant creates; peak memory is what one call
adds to the process (see :class:`PeakMemory`). BERT-base shape uses random
weights (throughput does not depend on them); AntiBERTy and rxnfp BERT are the real packaged
models. Writes a CSV and prints the table with ratios.

    python -m textglauber.bench --metastable         # the engine modes in the slow regime

The metastable grid (:func:`metastable_grid`) runs the same chains, from the same states and seed,
through the engine's modes ``plain``, ``memo``, ``jump`` and ``auto`` (see :mod:`textglauber.chain`)
and reports chain-steps per second, passes (scored rows) per chain-step and the no-op share
(steps that leave the state as it was) at each temperature, from states burned in at that
temperature and from perfect traps at T = 0.25: states whose every site is its argmax and that
the chain stays in (:func:`deep_traps`, at least :data:`TRAP_HOLD` steps expected). Its targets
are ratios to plain in one run (:func:`metastable_targets`).
"""
from __future__ import annotations

import argparse
import functools
import itertools
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from . import provenance


MATMUL_SIZE = 2048          # square fp32 multiply that reaches this CPU's rate
GPU_MATMUL_SIZE = 8192      # a GPU needs a larger one to reach its bf16 rate
SEED = 0                    # the generator that draws every cell's states and sites
OLDER = ("fill_mask_loop", "shared_site_full")          # the older ways the engine is compared with
SPEEDUP_COLUMNS = (("engine", "engine_speedup"), ("engine_compiled", "compiled_speedup"))


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def flops_per_step(cfg, n_tokens: int, head_cols: int) -> float:
    """Forward FLOPs of one chain-step of a model with config ``cfg``: encoder over all tokens
    plus the head on one row."""
    h, layers = cfg.hidden_size, cfg.num_hidden_layers
    inter = getattr(cfg, "intermediate_size", 4 * h)
    per_token = layers * (2 * 4 * h * h + 2 * 2 * h * inter + 2 * 2 * n_tokens * h)
    head = 2 * h * h + 2 * h * head_cols
    return per_token * n_tokens + head


def bert_base_random(device, dtype):
    from transformers import BertConfig, BertForMaskedLM

    from .models import LoadedModel, tiny

    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig()).to(device=device, dtype=dtype).eval()     # bert-base shape, 30522 vocab
    tok_dir = tiny.cache_root() / "bench-tok"
    tok_dir.mkdir(parents=True, exist_ok=True)
    tok = tiny._tokenizer(tok_dir)          # supplies the special ids; content ids are drawn at random
    return LoadedModel(name="bert-base shape (random weights)", kind="mlm", model=model, tokenizer=tok, device=device,
                       dtype=dtype, source="random", revision=None, max_positions=512, prefix_ids=[2], suffix_ids=[3])


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3          # glibc mallopt parameters
MEASURE_MMAP_THRESHOLD = 1 << 17          # 128 KiB while a peak is read: large blocks go straight to the system
TIMING_MMAP_THRESHOLD = 32 << 20          # glibc's adaptive ceiling on 64-bit, for the timed calls


class PeakMemory:
    """Peak memory one call adds above what the process held before it.

    CPU: the kernel's high-water mark of resident memory (VmHWM), reset before the call through
    /proc/self/clear_refs, minus the resident size before it. For the reading, glibc is told to
    hand large blocks to the system at once (a fixed 128 KiB mmap threshold) and freed heap is
    trimmed, so memory a previous variant freed is not counted as free room for this one. After
    it, the threshold goes to 32 MiB, glibc's own ceiling for its adaptive threshold: a fixed
    128 KiB threshold would make every activation a fresh, page-faulted mapping and slow the
    timed calls (by 40% for rxnfp BERT at batch 256), which an ordinary run never pays. CUDA:
    the allocator's peak above its allocation before the call. NaN where neither is available."""

    def __init__(self, device: torch.device):
        self.device = device
        self._libc = None
        if device.type == "cpu":
            try:
                import ctypes

                self._libc = ctypes.CDLL("libc.so.6")
                Path("/proc/self/clear_refs").write_text("5")
            except (OSError, AttributeError):
                self._libc = None

    @staticmethod
    def _status(key: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
        raise KeyError(key)

    def measure(self, fn) -> float:
        import gc

        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            fn()
            return float(torch.cuda.max_memory_allocated() - base)
        if self._libc is None:
            fn()
            return float("nan")
        self._libc.mallopt(M_MMAP_THRESHOLD, MEASURE_MMAP_THRESHOLD)
        try:
            self._libc.malloc_trim(0)
            Path("/proc/self/clear_refs").write_text("5")
            base = self._status("VmRSS")
            fn()
            return float(max(self._status("VmHWM") - base, 0))
        finally:                   # as glibc's adaptive rule would leave them: trim at twice the mmap threshold
            self._libc.mallopt(M_MMAP_THRESHOLD, TIMING_MMAP_THRESHOLD)
            self._libc.mallopt(M_TRIM_THRESHOLD, 2 * TIMING_MMAP_THRESHOLD)


def cpu_times(stat_text: str | None = None) -> np.ndarray | None:
    """The host's CPU time counters (user, nice, system, idle, iowait, irq, softirq, steal),
    summed over all CPUs, from ``/proc/stat`` (or from ``stat_text``); None where there is none."""
    try:
        text = Path("/proc/stat").read_text() if stat_text is None else stat_text
    except OSError:
        return None
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "cpu" and len(f) >= 9:
            return np.asarray([int(v) for v in f[1:9]], dtype=float)
    return None


def steal_fraction(before: np.ndarray | None, after: np.ndarray | None) -> float:
    """Share of the CPU time between two :func:`cpu_times` readings that the hypervisor gave to
    other guests (steal). On a shared virtual machine it says how much of a cell's timings
    ran on a machine that was partly somebody else's; NaN where it cannot be read."""
    if before is None or after is None:
        return float("nan")
    d = after - before
    total = d.sum()
    return float(d[7] / total) if total > 0 else float("nan")


def paired_quartiles(num, den) -> tuple[float, float]:
    """25th and 75th percentiles of the per-round ratios ``num[r] / den[r]``. Two variants timed in
    the same round saw the same machine, so the spread of their ratio across rounds says how far
    the ratio of medians can be trusted on a host whose speed drifts. Where one variant was timed
    in fewer rounds, the rounds both have are paired."""
    r = _paired_ratios(num, den)
    return float(np.percentile(r, 25)), float(np.percentile(r, 75))


def paired_median(num, den) -> float:
    """Median of the per-round ratios ``num[r] / den[r]`` over the rounds both have (see
    :func:`paired_quartiles`)."""
    return float(np.median(_paired_ratios(num, den)))


def _paired_ratios(num, den) -> np.ndarray:
    k = min(len(num), len(den))
    return np.asarray(num[:k], dtype=float) / np.asarray(den[:k], dtype=float)


def _time_interleaved(fns: dict, min_rounds: int = 3, max_rounds: int = 40, target_s: float = 20.0,
                      memory: PeakMemory | None = None, warmup=None, once=None) -> tuple[dict, dict]:
    """Seconds per call of each function in every round, timed in interleaved rounds (every variant once
    per round, after one warm-up call each, which also absorbs any compilation), so that drifts
    of the machine's speed hit all variants alike. The first timed round sets how many follow:
    cheap cells get more rounds (up to ``max_rounds``, about ``target_s`` seconds in all), since
    a burst of load on a shared host can swamp a short call (on the 2-core VM the benchmark was
    run on, other guests stole up to two fifths of the CPU time in 5 s samples; 15 rounds left
    the median of a 0.1 s call a few percent uncertain). With ``memory``, each function's
    peak memory is read in one more untimed call after its warm-up. ``warmup``: one call that
    replaces the warm-up calls (for calls that take minutes and compile nothing). ``once(name)``,
    asked after the first round: true for a function that is not timed again (its list holds one
    time)."""
    peaks = {}
    if warmup is not None:
        warmup()
    for k, fn in fns.items():
        if warmup is None:
            fn()
        if memory is not None:
            peaks[k] = memory.measure(fn)
    out = {k: [] for k in fns}
    rounds, r = min_rounds, 0
    timed = fns                         # every function in the first round; ``once`` may drop some after it
    while r < rounds:
        for k, fn in timed.items():
            t = time.perf_counter()
            fn()
            out[k].append(time.perf_counter() - t)
        if r == 0:
            first = sum(v[0] for v in out.values())
            rounds = int(min(max_rounds, max(min_rounds, np.ceil(target_s / max(first, 1e-9)))))
            if once is not None:
                timed = {k: fn for k, fn in fns.items() if not once(k)}
        r += 1
    return out, peaks


def run_grid(models_wanted, lengths, batches, device: str = "cpu", steps: int = 3, min_rounds: int = 3,
             on_cell=None, dtype: str = "auto", compile: bool | str = False) -> pd.DataFrame:
    """Every (model, n, batch) cell of the grid; ``on_cell(table so far)`` is called after each,
    so that a long run can write what it has measured as it goes. ``compile`` adds the variant
    ``engine_compiled`` (the same step through ``torch.compile``; its compilation is in the
    warm-up call, outside the timings)."""
    from . import models as M
    from .engine import ChainSpec, couple, step
    from .device import pick_device, pick_dtype
    from .vocabulary import AllowedVocab

    dev = pick_device(device)
    dt = pick_dtype(dtype, dev)
    memory = PeakMemory(dev)
    size = GPU_MATMUL_SIZE if dev.type == "cuda" else MATMUL_SIZE
    mm_a = torch.randn(size, size, device=dev, dtype=dt)

    def matmul():
        mm_a @ mm_a
        _sync(dev)

    rows = []
    for name in models_wanted:
        lm = bert_base_random(dev, dt) if name == "bert-base" else M.load(name, device=str(dev), dtype=str(dt).split(".")[-1])
        V = int(lm.model.config.vocab_size)
        special = set(lm.tokenizer.all_special_ids) | set(range(5))
        ids = torch.tensor([i for i in range(V) if i not in special])
        vocab = AllowedVocab(ids=ids, tokens=tuple(str(i) for i in ids.tolist()), vocab_size=V)
        scorer = M.MaskedLMScorer(lm, vocab)
        compiled = M.MaskedLMScorer(lm, vocab, compile=compile) if compile else None
        attn = getattr(lm.model.config, "_attn_implementation", None)
        gen = torch.Generator().manual_seed(SEED)
        for n in lengths:
            fl = flops_per_step(lm.model.config, n + 2, vocab.size)
            for B in batches:
                x = ids[torch.randint(len(ids), (B, n), generator=gen)]
                spec = ChainSpec(temperature=1.0, steps=steps)

                def engine(scorer=scorer):
                    s = x.clone()
                    for _ in range(steps):
                        step(scorer, s, spec, gen)
                    _sync(dev)

                def fill_mask_loop():
                    s = x.clone()
                    with torch.no_grad():
                        for _ in range(steps):
                            for b in range(B):
                                site = int(torch.randint(n, (1,), generator=gen))
                                inp = scorer.frame(s[b:b + 1])
                                inp[0, 1 + site] = lm.tokenizer.mask_token_id
                                logits = lm.model(input_ids=inp).logits[0, 1 + site]
                                p = torch.softmax(logits.float(), -1)
                                s[b, site] = torch.multinomial(p.cpu(), 1, generator=gen)[0]
                    _sync(dev)

                def shared_site_full():
                    s = x.clone()
                    with torch.no_grad():
                        for _ in range(steps):
                            site = int(torch.randint(n, (1,), generator=gen))
                            inp = scorer.frame(s)
                            inp[:, 1 + site] = lm.tokenizer.mask_token_id
                            logits = lm.model(input_ids=inp).logits[:, 1 + site]
                            p = torch.softmax(logits.float(), -1)
                            s[:, site] = torch.multinomial(p.cpu(), 1, generator=gen)[:, 0]
                    _sync(dev)

                variants = {"engine": (engine, B * steps, B * vocab.size * 4),
                            "fill_mask_loop": (fill_mask_loop, B * steps, (n + 2) * V * 4),
                            "shared_site_full": (shared_site_full, B * steps, B * (n + 2) * V * 4)}
                if compiled is not None:
                    variants["engine_compiled"] = (lambda: engine(compiled), B * steps, B * vocab.size * 4)
                if B >= 2:
                    half = B // 2
                    variants["coupled_pairs"] = (
                        lambda: couple(scorer, x[:half], x[half:2 * half], 1.0, steps, gen, mode="plain"),
                        2 * half * steps,
                        2 * half * vocab.size * 4)
                if B > 64 and dev.type == "cpu":
                    variants.pop("fill_mask_loop")      # hours on a CPU; the ratio at B <= 64 already says it
                from .rectangle import Rectangles, score_mlm

                R = max(1, B // 4)
                rects = Rectangles(seq_id=np.zeros(R, int), base=x[:R], i=torch.zeros(R, dtype=torch.long),
                                   j=torch.ones(R, dtype=torch.long), a_prime=x[:R, 1].clone(), b_prime=x[:R, 0].clone())
                # the matrix-multiply rate is timed in the same rounds, so the bound follows the
                # machine's speed at the moment the variants ran (a shared host drifts)
                ticks = cpu_times()
                rounds, peaks = _time_interleaved({**{v: f for v, (f, _, _) in variants.items()},
                                                  "rectangles": lambda: score_mlm(scorer, rects), "matmul": matmul},
                                                 min_rounds=min_rounds, memory=memory)
                stolen = steal_fraction(ticks, cpu_times())
                timed = {k: statistics.median(v) for k, v in rounds.items()}
                rate = 2 * size**3 / timed["matmul"]
                bound = rate / fl
                # per round: a variant's fraction of that round's bound, and each engine's speed-up
                # over each older way (their time over the engine's), as quartiles across rounds
                mm_work = np.asarray(rounds["matmul"]) * fl / (2 * size**3)      # seconds per chain-step at the bound
                works = {v: work for v, (_, work, _) in variants.items()} | {"rectangles": 4 * R}  # in chain-steps
                spread = {v: dict(zip(("fraction_q25", "fraction_q75"), paired_quartiles(mm_work * work, rounds[v])))
                          for v, work in works.items()}
                for (eng, col), v in itertools.product(SPEEDUP_COLUMNS, OLDER):
                    if eng in variants and v in variants:
                        spread[v].update(zip((col + "_q25", col + "_q75"), paired_quartiles(rounds[v], rounds[eng])))
                meta = {"model": lm.name, "device": str(dev), "dtype": str(dt).replace("torch.", ""), "n": n,
                        "attention": attn, "threads": torch.get_num_threads(), "matmul_gflops": rate / 1e9,
                        "steal_fraction": stolen, "rounds": len(rounds["matmul"])}
                for v, (fn, work, logit_bytes) in variants.items():
                    sec = timed[v]
                    rows.append({**meta, "batch": B, "variant": v, "chain_steps_per_s": work / sec,
                                 "compute_bound_steps_per_s": bound, "fraction_of_bound": work / sec / bound,
                                 "logit_bytes": logit_bytes, "peak_memory_bytes": peaks.get(v, np.nan), **spread[v]})
                sec = timed["rectangles"]
                rows.append({**meta, "batch": 4 * R, "variant": "rectangles", "chain_steps_per_s": R / sec,
                             "compute_bound_steps_per_s": bound / 4, "fraction_of_bound": R / sec / (bound / 4),
                             "logit_bytes": 4 * R * vocab.size * 4, "peak_memory_bytes": peaks.get("rectangles", np.nan),
                             **spread["rectangles"]})
                if on_cell is not None:
                    on_cell(_with_speedups(rows))
    return _with_speedups(rows)


def _with_speedups(rows) -> pd.DataFrame:
    """The engine's rate over each older way's at the same model, n and batch (a ratio of the
    median rates; the ``*_q25``/``*_q75`` columns hold the spread of the per-round ratios)."""
    df = pd.DataFrame(rows)
    for engine, col in SPEEDUP_COLUMNS:
        if engine not in set(df.variant):
            continue
        eng = df[df.variant == engine].set_index(["model", "n", "batch"]).chain_steps_per_s
        df[col] = [eng.get((m, n, b), np.nan) / s if v in OLDER else np.nan
                   for m, n, b, v, s in zip(df.model, df.n, df.batch, df.variant, df.chain_steps_per_s)]
    return df


def _write_table(df: pd.DataFrame, out: Path, a, argv, models_wanted, dev) -> None:
    """The finished table, its JSON record (arguments, command, machine), and no partial file."""
    from .results import write_manifest

    df.to_csv(out, index=False)
    out.with_suffix(".partial.csv").unlink(missing_ok=True)
    write_manifest(out.parent, name=out.with_suffix(".json").name, parameters=vars(a),
                   models=[{"name": m} for m in models_wanted], seed=SEED, tables=[out.name],
                   extra={"command": " ".join(["python -m textglauber.bench", *(sys.argv[1:] if argv is None else argv)]),
                          "machine": provenance.machine_line(dev, torch.get_num_threads())})


def main(argv=None) -> int:
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
    a = ap.parse_args(argv)
    if a.metastable:
        return _main_metastable(a, argv)
    a.steps = 3 if a.steps is None else a.steps
    from .device import pick_device, pick_dtype
    from .models import check_available
    from .paths import repo_root

    dev = pick_device(a.device)                      # bad device or dtype: one error before any compute
    pick_dtype(a.dtype, dev)
    models_wanted = a.models or (["bert-base", "package:antiberty"] if a.quick
                                 else ["bert-base", "package:antiberty", "package:rxnfp-bert"])
    lengths = a.lengths or ([20] if a.quick else [20, 64, 128])
    gpu_batches = [1, 16, 64, 256, 512, 1024]
    batches = a.batches or ([1, 16, 64] if a.quick else gpu_batches if dev.type == "cuda" else [1, 16, 64, 256])
    if min(lengths) < 1 or min(batches) < 1 or a.steps < 1 or a.rounds < 1:
        raise SystemExit("lengths, batches, steps and rounds must all be at least 1")
    if max(lengths) > 510:
        raise SystemExit(f"n = {max(lengths)} is longer than the grid's models accept (510 content tokens)")
    check_available([m for m in models_wanted if m != "bert-base"])
    torch.set_num_threads(torch.get_num_threads())
    out = Path(a.out) if a.out else repo_root() / "results" / "bench" / f"bench-{dev.type}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial.csv")

    def on_cell(df):                    # a long grid keeps what it measured if it is stopped
        df.to_csv(partial, index=False)
        last = df[df.variant == "engine"].iloc[-1]
        print(f"[bench] {last.model} n={last.n} batch={last.batch} done", flush=True)

    df = run_grid(models_wanted, lengths, batches, a.device, steps=a.steps, min_rounds=a.rounds, on_cell=on_cell,
                  dtype=a.dtype, compile=a.compile)
    _write_table(df, out, a, argv, models_wanted, dev)
    cols = ["model", "n", "batch", "variant", "chain_steps_per_s", "fraction_of_bound", "engine_speedup",
            "compiled_speedup", "logit_bytes", "peak_memory_bytes"]
    with pd.option_context("display.width", 220, "display.max_columns", 20):
        print(df[[c for c in cols if c in df]].round(3).to_string(index=False))
    print(f"\nwritten to {out}")
    return 0


METASTABLE_MODES = ("plain", "memo", "jump", "auto")
METASTABLE_MODELS = ("package:antiberty", "package:rxnfp-bert", "trained:english")
METASTABLE_TEMPERATURES = (0.25, 0.5, 0.7, 1.0, 2.0)
TRAP_TEMPERATURE = 0.25
NEAR_ONE_TEMPERATURE = 2.0  # the temperature where auto's target (NEAR_ONE_TARGET) is a ratio near 1
NEAR_ONE_TARGET = 0.95
NEAR_ONE_ROUNDS = 7         # least rounds of such a cell, whose plain runs the full length too (see metastable_grid)
TRAP_HOLD = 300             # least expected holding time (steps, at T = 0.25) of a trap cell's starts: chapter 5's window
TRAP_START_BATCHES = 8      # batches of random starts (chains each) searched for such traps
TRAP_STEPS = 10_000         # a trap cell's chain length for the modes other than plain: the preprint's chains
LOSING_ROWS = 2.0           # rows per chain-step (plain: 1) past which a mode's run is cut, and timed in one round


class RowBudgetSpent(Exception):
    """Raised by :class:`RowCount` instead of scoring a batch that would take it past its budget."""


class RowCount:
    """A scorer that counts the rows (masked sequences) it scores: the engine's passes. With a
    ``budget``, a call that would take the count past it scores nothing and raises
    :class:`RowBudgetSpent` (``spent`` is then true and ``wanted`` the count it asked for)."""

    def __init__(self, inner, budget: int | None = None):
        self.inner, self.vocab, self.rows, self.budget = inner, inner.vocab, 0, budget
        self.spent, self.wanted = False, 0
        self.lm = getattr(inner, "lm", None)

    @property
    def max_length(self) -> int:
        return self.inner.max_length

    def scores(self, states, sites):
        if self.budget is not None and self.rows + len(sites) > self.budget:
            self.spent, self.wanted = True, self.rows + len(sites)
            raise RowBudgetSpent(f"{self.wanted} rows asked for, {self.budget} allowed")
        self.rows += len(sites)
        return self.inner.scores(states, sites)


def perfect_trap(scorer, states: torch.Tensor, sweeps: int = 50) -> torch.Tensor:
    """Coordinate ascent from each state (every site in turn set to its conditional's argmax,
    kept where the current token ties with it) until no site changes: states whose every site is
    its own conditional's argmax, perfect traps.

    A masked LM's conditionals need not be those of one joint law, so the ascent can cycle from
    some starts. Returns the fixed points of the starts that reached one within ``sweeps`` sweeps,
    in their order; raises only if none did. A start whose state after a sweep repeats one it held
    after an earlier sweep cycles (the sweep is a deterministic map) and is dropped at once."""
    x = torch.as_tensor(states, dtype=torch.long).clone()
    index_of = scorer.vocab.index_of
    ids = scorer.vocab.ids
    done = torch.zeros(len(x), dtype=torch.bool)
    cycling = torch.zeros(len(x), dtype=torch.bool)
    seen = [{tuple(r)} for r in x.tolist()]
    for _ in range(sweeps):
        changed = torch.zeros(len(x), dtype=torch.bool)
        live = (~done & ~cycling).nonzero().flatten()
        if not len(live):
            break
        for i in range(x.shape[1]):
            s = scorer.scores(x[live], torch.full((len(live),), i)).cpu()
            best = s.argmax(-1)
            here = index_of(x[live, i])
            better = s.gather(1, best[:, None])[:, 0] > s.gather(1, here[:, None])[:, 0]
            x[live[better], i] = ids[best[better]]
            changed[live[better]] = True
        done |= ~changed & ~cycling
        for b in (changed & ~cycling).nonzero().flatten().tolist():
            state = tuple(x[b].tolist())
            cycling[b] = state in seen[b]
            seen[b].add(state)
    if not done.any():
        raise RuntimeError(f"no start reached an argmax fixed point within {sweeps} sweeps")
    return x[done]


def holding_steps(scorer, states: torch.Tensor, temperature: float) -> np.ndarray:
    """Each state's exact expected holding time at ``temperature``, in steps: 1 / q with
    q = (1/n) sum_i (1 - pi_i(x_i | x_-i)) the chance that one Glauber step (uniform site, token
    from softmax(s_i / T)) leaves it; one model row per site (inf where q is 0)."""
    from .exact import conditionals

    x = torch.as_tensor(states, dtype=torch.long)
    n = x.shape[1]
    out = []
    for state in x:                                   # one state at a time: n x |A| float64, not S x n x |A|
        p = conditionals(scorer, state[None].numpy(), list(range(n)), temperature)[0]
        p[np.arange(n), scorer.vocab.index_of(state).numpy()] = 0.0     # the other tokens' mass: no 1 - (1 - q)
        q = float(p.sum(-1).mean())
        out.append(np.inf if q == 0 else 1 / q)
    return np.asarray(out, dtype=float)


def deep_traps(scorer, n: int, chains: int, generator: torch.Generator, *, temperature: float = TRAP_TEMPERATURE,
               hold: float = TRAP_HOLD, batches: int = TRAP_START_BATCHES) -> tuple[torch.Tensor, dict]:
    """Perfect traps the chain stays in: argmax fixed points (:func:`perfect_trap`) whose exact
    expected holding time at ``temperature`` (:func:`holding_steps`) is at least ``hold`` steps.

    Random starts are drawn from ``generator`` ``chains`` at a time, at most ``batches`` times,
    until ``chains`` distinct such traps are found. Returns ``chains`` states (the traps found,
    repeated in order to fill) and what was found: ``trap_states`` (distinct traps the chains start
    from), ``trap_hold_min`` / ``trap_hold_median`` (their holding times), ``fixed_points`` (distinct
    fixed points reached) and ``deep`` (whether they hold at least ``hold``). Where no fixed point
    holds that long, the chains start from the deepest one reached and ``deep`` is false."""
    ids = scorer.vocab.ids
    found: dict[tuple, float] = {}
    for _ in range(batches):
        starts = ids[torch.randint(scorer.vocab.size, (chains, n), generator=generator)]
        try:
            fixed = perfect_trap(scorer, starts)
        except RuntimeError:
            continue
        new = list(dict.fromkeys(tuple(r) for r in fixed.tolist() if tuple(r) not in found))
        if new:
            found.update(zip(new, holding_steps(scorer, torch.tensor(new), temperature)))
        if sum(h >= hold for h in found.values()) >= chains:
            break
    if not found:
        raise RuntimeError(f"no start reached an argmax fixed point in {batches} batches of {chains} starts")
    deep = [k for k, h in found.items() if h >= hold][:chains]
    picked = deep or [max(found, key=found.get)]
    holds = np.array([found[k] for k in picked])
    x = torch.tensor(picked)[torch.arange(chains) % len(picked)]
    return x, {"trap_states": len(picked), "trap_hold_min": float(holds.min()),
               "trap_hold_median": float(np.median(holds)), "fixed_points": len(found), "deep": bool(deep)}


def _modes_cell(scorer, x0: torch.Tensor, T: float, steps: int, seed: int, meta: dict, rounds: int,
                horizon: int | None = None, plain_steps: int | None = None) -> list[dict]:
    """One cell of the metastable grid: every mode from the same states and seed (so each call of
    a mode repeats the same work), timed in ``rounds`` interleaved rounds (median), after one
    short plain run that warms the model up.

    Lengths. ``memo``, ``jump`` and ``auto`` run ``horizon`` steps (default ``steps``): they pay
    once for a state's conditionals and then run free, so their rate depends on how long the chain
    stays, and a trap cell times them over the length of the chains that chapter 5 runs (the
    preprint's 10,000 steps). ``plain`` runs ``plain_steps`` (default ``steps``): it scores one row
    per chain at every step, a batch of the same shape whatever the state, so its rate per step does
    not depend on the length it is timed over, and a shorter plain call buys the grid's other
    cells. The cell's no-op share (``cell_noop_share``) is read off memo's trajectory, which is
    plain's chain (the same site and uniform at every step) over the full length.

    Losing modes are cut. A mode other than plain runs with a budget of :data:`LOSING_ROWS` rows
    per chain-step of its length (plain scores one). Where it needs more (jump on the fast side,
    where every move costs it the m rows of a new state), its run stops at the call that would
    pass the budget. The stopped run is a prefix of the full one (same starts and seed), so the
    full run takes at least its time: the row's ``speedup`` and ``chain_steps_per_s`` are upper
    bounds, its ``passes_per_step`` (the rows it asked for over the full length) a lower bound,
    and ``cut`` says so. The budget is a count, not a clock, so which modes are cut does not depend
    on the machine. A cut mode is not timed again (its ``rounds`` is 1, its quartiles those of its
    one paired ratio): on the fast side one full-length jump call cost ten to twenty plain ones
    (rxnfp n = 20 at T = 2: 10.8 rows per step), most of such a cell's time, to say only that it
    loses."""
    from .engine import ChainSpec, run

    stats = {}
    chains = x0.shape[0]
    length = {m: (plain_steps or steps) if m == "plain" else (horizon or steps) for m in METASTABLE_MODES}

    def one(mode, k=None):
        k = k or length[mode]
        counted = RowCount(scorer, None if mode == "plain" else int(LOSING_ROWS * chains * k))
        try:
            r = run(counted, x0, ChainSpec(temperature=T, steps=k, record_every=1, checkpoint_every=k,
                                           mode=mode), seed=seed)
        except RowBudgetSpent:
            stats[mode] = {"passes_per_step": counted.wanted / (chains * k), "noop_share": np.nan,
                           "auto_segments": "", "cut": True}
            return
        moved = (r.states[1:] != r.states[:-1]).any(-1)
        stats[mode] = {"passes_per_step": counted.rows / moved.size, "noop_share": 1 - float(moved.mean()),
                       "auto_segments": " ".join(f"{m}:{k}" for m, k in r.modes) if r.modes else "",
                       "cut": False}

    timed, _ = _time_interleaved({m: (lambda m=m: one(m)) for m in METASTABLE_MODES}, min_rounds=rounds,
                                 max_rounds=rounds, warmup=lambda: one("plain", min(5, length["plain"])),
                                 once=lambda m: stats[m]["cut"])
    per_step = {m: np.asarray(v) / length[m] for m, v in timed.items()}      # seconds per step of each round
    rate = {m: chains / statistics.median(v) for m, v in per_step.items()}
    return [{**meta, "temperature": T, "mode": m, "steps": length[m], "chain_steps_per_s": rate[m],
             "speedup": paired_median(per_step["plain"], per_step[m]),
             **dict(zip(("speedup_q25", "speedup_q75"), paired_quartiles(per_step["plain"], per_step[m]))),
             "cell_noop_share": stats["memo"]["noop_share"], "rounds": len(timed[m]), **stats[m]}
            for m in METASTABLE_MODES]


def metastable_cell_key(record: dict) -> str:
    """What a measured cell depends on: its coordinates and lengths, the library code the
    benchmark can reach, the installed versions and the machine. A resumed grid re-uses a cell
    only when this matches (16 hex digits)."""
    return provenance.digest({**record, **_key_context(), "threads": torch.get_num_threads()})[:16]


@functools.lru_cache(maxsize=1)
def _key_context() -> dict:
    from . import benchcache

    return {"code": benchcache.code(), "machine": provenance.machine(), "environment": provenance.versions()}


def _cell_seed(*coords) -> int:
    """A seed (below 2^31) that depends on :data:`SEED` and the given coordinates alone."""
    return int(provenance.digest([SEED, *coords])[:8], 16) >> 1


def metastable_grid(models_wanted, lengths, temperatures, *, chains: int = 16, steps: int = 400, burn: int = 100,
                    device: str = "cpu", dtype: str = "auto", trap: bool = True, rounds: int = 3,
                    trap_steps: int = TRAP_STEPS, plain_steps: int | None = None, done: pd.DataFrame | None = None,
                    on_cell=None, near_one_rounds: int = NEAR_ONE_ROUNDS) -> pd.DataFrame:
    """chain-steps per second of each engine mode on each (model, n, T), from random states burned
    in for ``burn`` plain steps at that temperature, and (``trap``) from perfect traps at
    T = 0.25 (:func:`deep_traps`: argmax fixed points whose exact expected holding time is at least
    :data:`TRAP_HOLD` steps, the window over which chapter 5 detects a trap; the rows say how many
    distinct traps the chains start from and how long they hold). An argmax fixed point need not
    trap: of the 14 that ascent reached from 16 random starts on the trained English MLM at n = 20,
    13 hold 5 to 34 steps at T = 0.25 and one 5,894.

    ``cell_noop_share`` is the share of the chain's steps that changed nothing; ``speedup`` is the
    median of a mode's per-round rate over plain's in the same round, ``speedup_q25``/``_q75``
    their quartiles (so the median always lies between them; a ratio of the two median rates need
    not, and pairs a mode timed once with rounds it did not share).

    In a trap cell the modes other than plain run ``trap_steps`` steps (plain runs ``plain_steps``,
    default ``steps``; its rate does not depend on the length, see :func:`_modes_cell`): a chain
    that must first score all n sites of its state cannot beat plain by more than steps / n, so 400
    steps at n = 20 would cap any engine at 20x before it spends a single step.

    Cells at :data:`NEAR_ONE_TEMPERATURE` are timed in at least ``near_one_rounds`` rounds, with
    plain over the full ``steps``: their target is a ratio within 5% of one, which a median of
    three rounds cannot resolve on a shared host. On rxnfp BERT at n = 64, T = 2, where auto runs
    plain's own path, three rounds (plain over 100 steps) read 0.933x [0.926, 1.018], while three
    interleaved pairs of 400-step calls on the same chains took 42.3, 42.4, 46.6 s (auto) and
    43.1, 43.1, 43.5 s (plain): one slow window in a short plain call, or in one of three auto
    calls, moves the median by the whole margin.

    ``done``: rows measured before (a stopped grid's partial table). A cell whose ``cell_key``
    (:func:`metastable_cell_key`) is there with all its modes is taken from it and not measured
    again. Each cell's starts and seed are drawn from a generator seeded by its own coordinates
    (:func:`_cell_seed`), so a resumed grid, or one asked for part of the models, lengths or
    temperatures, measures the same chains in a cell as the whole grid in one go. The result holds
    every row of ``done`` (other models' cells included) and the new ones; a cell measured now
    replaces any older row at the same coordinates (model, n, start, temperature). ``commit`` names
    the code of each cell."""
    from . import models as M
    from .provenance import git_commit
    from . import vocabulary
    from .engine import ChainSpec, run
    from .device import pick_device, pick_dtype

    dev = pick_device(device)
    dt = pick_dtype(dtype, dev)
    kept = pd.DataFrame() if done is None or "cell_key" not in done else done
    have = {k for k, g in kept.groupby("cell_key") if set(g["mode"]) >= set(METASTABLE_MODES)} if len(kept) else set()
    rows = kept.to_dict("records")
    plain_steps = min(plain_steps or steps, steps)
    git = git_commit()                  # a table measured in pieces says which code measured each cell
    commit = (git["commit"] or "unknown")[:12] + ("+dirty" if git["dirty"] else "")

    def protocol(start, T):
        """(rounds, plain's steps) of a cell: the one place that decides them, for its key and its run."""
        if start != "perfect trap" and float(T) == NEAR_ONE_TEMPERATURE:
            return max(rounds, near_one_rounds), steps
        return rounds, plain_steps

    def key(name, n, start, T, horizon):
        r, ps = protocol(start, T)
        return metastable_cell_key({"model": name, "n": n, "start": start, "temperature": T, "chains": chains,
                                    "steps": steps, "horizon": horizon, "plain_steps": ps, "burn": burn,
                                    "rounds": r, "device": str(dev), "dtype": str(dt), "seed": SEED})

    def cell(name, n, start, T, horizon, measure):
        nonlocal rows
        k = key(name, n, start, T, horizon)
        if k in have:
            print(f"[bench] {name} n={n} {start} T={T}: measured before (cell {k})", flush=True)
            return
        new = [{**r, "cell_key": k, "commit": commit} for r in measure()]
        rows = [r for r in rows if (r["model"], r["n"], r["start"], r["temperature"]) != (name, n, start, T)] + new
        print(f"[bench] {name} n={n} {start} T={T} done", flush=True)
        if on_cell is not None:
            on_cell(pd.DataFrame(rows))

    for name in models_wanted:
        lm = M.load(name, device=str(dev), dtype=str(dt).split(".")[-1])
        scorer = M.MaskedLMScorer(lm, vocabulary.allowed_vocabulary(lm.tokenizer))
        for n in lengths:
            meta = {"model": name, "device": str(dev), "n": n, "chains": chains, "threads": torch.get_num_threads()}
            gen = torch.Generator().manual_seed(_cell_seed(name, n))
            x = scorer.vocab.ids[torch.randint(scorer.vocab.size, (chains, n), generator=gen)]
            for T in temperatures:
                seed = _cell_seed(name, n, float(T))

                def burned_in(x=x, T=T, seed=seed):
                    warm = run(scorer, x, ChainSpec(temperature=T, steps=burn, record_every=burn, mode="plain"),
                               seed=seed)
                    r, ps = protocol(f"burned in {burn} steps", T)
                    return _modes_cell(scorer, torch.as_tensor(warm.states[-1]), T, steps, seed + 1,
                                       {**meta, "start": f"burned in {burn} steps"}, r, plain_steps=ps)

                cell(name, n, f"burned in {burn} steps", T, steps, burned_in)
            if trap:
                def trapped():
                    x_trap, found = deep_traps(scorer, n, chains, torch.Generator().manual_seed(_cell_seed(name, n, "trap")))
                    r, ps = protocol("perfect trap", TRAP_TEMPERATURE)
                    return _modes_cell(scorer, x_trap, TRAP_TEMPERATURE, steps, SEED,
                                       {**meta, "start": "perfect trap", **found}, r, horizon=trap_steps, plain_steps=ps)

                cell(name, n, "perfect trap", TRAP_TEMPERATURE, trap_steps, trapped)
    return pd.DataFrame(rows)


def metastable_targets(df: pd.DataFrame) -> pd.DataFrame:
    """The issue's targets for auto, as ratios to plain in one run (the least cell that each
    target covers): at least 20x on a perfect trap at T = 0.25, never below 0.95x at T = 2.

    ``row bound``: in the least cell, plain's rows per chain-step (one) over the fewest that memo
    or jump scored. A mode that spends as much per row as plain cannot beat plain by more than
    this, whatever its bookkeeping costs: a count, not a clock.

    Retired: "at least 2x wherever plain's no-op share is 0.9 or more". The no-op share does not
    fix the rows an exact mode must score. Memo scores one row for each (state, site) pair the
    chains need for the first time (and one for a move to a token beyond the few it remembers);
    a chain that never came back to a state would need about m q / (1 + (m - 1) q) of them per
    step at move rate q on m sites (the distinct sites it visits while it holds): 0.69 at a
    no-op share of 0.9 on 20 sites, a row bound of 1.45, short of 2x on a CPU, where a row costs
    every mode about the same. Chains that return to states, or share them, need fewer, so the
    count can allow 2x in one cell and rule it out in the next at the same share: it is a
    ceiling to report (:func:`row_bounds`), not a target to ask for.

    A cut auto row (``cut``, see :func:`_modes_cell`) holds an upper bound, which cannot show a
    target met: its ``met`` is false."""
    auto = df[df["mode"] == "auto"]
    cases = ((f"x plain on a perfect trap at T = {TRAP_TEMPERATURE} (least cell)", auto[auto.start == "perfect trap"], 20.0),
             (f"x plain at T = {NEAR_ONE_TEMPERATURE:g} (least cell)",
              auto[(auto.temperature == NEAR_ONE_TEMPERATURE) & (auto.start != "perfect trap")], NEAR_ONE_TARGET))

    coords = [k for k in ("model", "n", "start", "temperature") if k in df]
    fewest = df[df["mode"].isin(("memo", "jump"))].groupby(coords)["passes_per_step"].min() if "passes_per_step" in df else None

    def least(label, cells, needed):
        c = cells.loc[cells.speedup.idxmin()]
        where = ", ".join(f"{k} {c[k]:g}" if k != "model" else str(c[k]) for k in ("model", "n", "temperature") if k in c)
        bound = np.nan if fewest is None else 1 / float(fewest.get(tuple(c[k] for k in coords), np.nan))
        return {"target": label, "measured": float(c.speedup), "q25": float(c.get("speedup_q25", np.nan)),
                "q75": float(c.get("speedup_q75", np.nan)), "needed": needed, "cells": len(cells),
                "met": bool(c.speedup >= needed and not _is_cut(c)), "least cell": where, "row bound": bound}

    rows = [least(*case) for case in cases if len(case[1])]
    return pd.DataFrame(rows, columns=["target", "measured", "q25", "q75", "needed", "cells", "met", "least cell",
                                       "row bound"])


HIGH_NOOP_SHARE = 0.9       # where the retired 2x target applied (metastable_targets); row_bounds reports there


def row_bounds(df: pd.DataFrame, share: float = HIGH_NOOP_SHARE) -> pd.DataFrame:
    """What holds where plain's no-op share is at least ``share`` (burned-in cells): auto's ratio
    to plain beside the cell's row bound, plain's rows per chain-step (one) over memo's. Memo's rows
    are the (state, site) pairs the chains needed, each scored once, and a move now and then to a
    token it did not remember, so no exact mode that scores those rows at plain's cost per row (a
    CPU at the compute bound) beats plain by much more than this ratio. One row per cell, the
    lowest bound first; empty where no such cell was measured (or memo's rows were not recorded)."""
    cols = ["model", "n", "temperature", "no-op share", "memo rows per step", "row bound", "auto x plain", "auto cut"]
    if "passes_per_step" not in df or "cell_noop_share" not in df:
        return pd.DataFrame(columns=cols)
    keys = [k for k in ("model", "n", "start", "temperature") if k in df]
    high = df[(df.start != "perfect trap") & (df.cell_noop_share >= share)]
    memo = high[high["mode"] == "memo"].set_index(keys)
    auto = high[high["mode"] == "auto"].set_index(keys).reindex(memo.index)
    out = pd.DataFrame({"no-op share": memo.cell_noop_share, "memo rows per step": memo.passes_per_step,
                        "row bound": 1 / memo.passes_per_step, "auto x plain": auto.speedup,
                        "auto cut": [_is_cut(r) for _, r in auto.iterrows()]}, index=memo.index)
    return out.reset_index()[cols].sort_values("row bound", ignore_index=True)


def _is_cut(row) -> bool:
    """Whether a metastable row's mode was cut (tables from before the ``cut`` column: never)."""
    v = row.get("cut", False)
    return bool(v) if pd.notna(v) else False


def _main_metastable(a, argv) -> int:
    from .device import pick_device, pick_dtype
    from .models import ModelUnavailableError, check_available
    from .paths import repo_root

    dev = pick_device(a.device)
    pick_dtype(a.dtype, dev)
    models_wanted = a.models
    if not models_wanted:                    # the default list: the models this machine has
        models_wanted = []
        for m in METASTABLE_MODELS:
            try:
                check_available([m])
                models_wanted.append(m)
            except ModelUnavailableError as exc:
                print(f"[bench] skipped: {exc}", flush=True)
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
    check_available(models_wanted)
    out = Path(a.out) if a.out else repo_root() / "results" / "bench" / f"metastable-{dev.type}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial.csv")
    earlier = [] if a.fresh else [pd.read_csv(f) for f in (out, partial) if f.exists()]
    done = pd.concat(earlier, ignore_index=True) if earlier else None
    if done is not None:       # the partial file holds the newer copy of a cell (same key or not)
        coords = [c for c in ("model", "n", "start", "temperature", "mode") if c in done]
        done = done.drop_duplicates(coords, keep="last")
    df = metastable_grid(models_wanted, lengths, temperatures, chains=a.chains, steps=steps, device=a.device,
                         dtype=a.dtype, rounds=a.rounds, trap=not a.no_trap, trap_steps=a.trap_steps,
                         plain_steps=plain_steps, done=done, near_one_rounds=a.near_one_rounds,
                         on_cell=lambda d: d.to_csv(partial, index=False))
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


def workload(profile: str) -> pd.DataFrame:
    """Masked rows (one row = one chain-step's worth of encoder work at that length) that each
    chapter of a profile asks for, from its parameters. Upper bounds where runs can stop early
    (coupled pairs that meet leave the batch)."""
    from .params import chapter_parameters, load_profile

    spec = load_profile(profile)
    rows = []
    for ch in spec["chapters"]:
        p = chapter_parameters(profile, ch)
        if ch == "incompatibility":
            k = len(p["mlms"])
            work, n = 6 * p["n_rectangles"] * k + 2 * p.get("grid_k", 0) * p.get("n_grids", 0) * k, p["seq_len"]
        elif ch == "bounds":
            n, q = p["seq_len"], 1 + p["top_k"] + p["extra"]
            work = len(p["mlms"]) * (p["n_contexts"] * n * (q * (n - 1) + 1) + p["drift_states"] * n)
        elif ch == "crossover":
            L = p["lengths"]
            n = int(np.mean(L))
            CL = p.get("coupling_lengths") or L                 # budgets in sweeps: sweeps x n steps per length
            work = (p["trials"] * p["sweeps"] * sum(L) * len(p["drift_temperatures"])
                    + 2 * p["pairs"] * p["budget_sweeps"] * sum(CL) * len(p["coupling_temperatures"]))
        elif ch == "basins":
            n = p["seq_len"]
            chains = len(p.get("seed_topics", range(5))) * p["seeds_per_topic"] * p["chains_per_seed"]
            chains += p.get("null_chains", 0)                   # the null model's chains, per model
            work = len(p["mlms"]) * chains * p["steps"] + p["prefix_chains"] * p["steps"]
        elif ch == "traps":
            n, work = p["seq_len"], p["chains"] * p["steps"]
        else:
            continue
        rows.append({"profile": profile, "chapter": ch, "masked rows": int(work), "typical n": int(n)})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- reading the tables back
def read_tables(folder) -> dict[str, pd.DataFrame]:
    """Every finished benchmark table under ``folder`` (partial files of stopped runs are left
    out), combined per device. A cell (device, model, n, batch) is taken whole from the newest
    file that measured it, so that no ratio compares variants timed in different runs. Each row
    keeps the name of its file in ``run``."""
    files = sorted((p for p in Path(folder).glob("bench-*.csv") if not p.name.endswith(".partial.csv")),
                   key=lambda p: p.stat().st_mtime)
    if not files:
        return {}
    df = pd.concat([pd.read_csv(p).assign(run=p.stem, _order=k) for k, p in enumerate(files)], ignore_index=True)
    cell = ["device", "model", "n", "batch"]
    df = df[df._order == df.groupby(cell)._order.transform("max")].drop(columns="_order")
    df = df.sort_values(cell + ["variant"], kind="stable")
    return {dev: _with_speedups(g.drop(columns=[c for _, c in SPEEDUP_COLUMNS if c in g])).reset_index(drop=True)
            for dev, g in df.groupby("device")}


def targets(df: pd.DataFrame) -> pd.DataFrame:
    """The benchmark issue's targets beside what one device's table measured (a target whose
    cells were not measured has no row). Speedups are the engine's rate over the other variant's
    in the same cell; the compiled engine is reported next to the eager one where it was run.
    ``q25``/``q75`` are the quartiles of the per-round ratios in the cell that decided the target
    (NaN for tables written before they were recorded); ``met`` reads the median."""
    rows = []
    gpu = str(df.device.iloc[0]).startswith("cuda")
    # the bound target: (n, least batch, fraction needed, label) on this kind of device
    bn, bb, needed_bound, bound_label = ((128, 512, 0.5, "fraction of the bf16 bound, n = 128, batch >= 512 (least cell)")
                                         if gpu else (20, 64, 0.8, "fraction of the bound, n = 20, batch >= 64 (least cell)"))

    def spread(row, col):                   # the picked cell's per-round quartiles (NaN for older tables)
        return {"q25": row.get(col + "_q25", np.nan), "q75": row.get(col + "_q75", np.nan)}

    for model, m in df.groupby("model"):
        for eng, col in SPEEDUP_COLUMNS:
            if eng not in set(m.variant):
                continue
            e = m[m.variant == eng].set_index(["n", "batch"]).chain_steps_per_s
            cells = m[(m.variant == eng) & (m.n == bn) & (m.batch >= bb)]
            if model.startswith("bert-base") and len(cells):
                least = cells.loc[cells.fraction_of_bound.idxmin()]
                rows.append({"target": bound_label, "model": model, "engine": eng, "measured": least.fraction_of_bound,
                             **spread(least, "fraction"), "needed": needed_bound, "cells": len(cells)})
            if gpu:
                continue
            for n, g in m.groupby("n"):
                for other, label, pick, needed in (("fill_mask_loop", f"x the fill-mask loop, n = {n} (best batch)", np.argmax, 4.0),
                                                   ("shared_site_full", f"x shared-site full logits, n = {n} (every batch)",
                                                    np.argmin, 1.0)):
                    o = g[g.variant == other].set_index("batch")
                    both = [b for b in o.index if (n, b) in e.index]
                    if both:
                        ratios = [e[(n, b)] / o.chain_steps_per_s[b] for b in both]
                        k = int(pick(ratios))
                        rows.append({"target": label, "model": model, "engine": eng, "measured": float(ratios[k]),
                                     **spread(o.loc[both[k]], col), "needed": needed, "cells": len(ratios)})
    out = pd.DataFrame(rows)
    if len(out):
        out["met"] = out.measured >= out.needed
    return out


def projected_hours(work: pd.DataFrame, df: pd.DataFrame, variant: str = "engine") -> pd.Series:
    """Hours each row of :func:`workload` would take on the BERT-base shape: the engine's
    measured rate at the measured length nearest the chapter's typical n (at its fastest batch
    size there), rescaled by the FLOPs ratio of the two lengths."""
    from transformers import BertConfig

    e = df[(df.variant == variant) & df.model.str.startswith("bert-base")]
    if not len(e):
        return pd.Series(np.nan, index=work.index)
    cfg = BertConfig()
    best = e.groupby("n").chain_steps_per_s.max()          # the fastest batch at each measured n
    hours = []
    for rows_, n in zip(work["masked rows"], work["typical n"]):
        n0 = min(best.index, key=lambda v: abs(v - n))
        rate = best[n0] * flops_per_step(cfg, n0 + 2, cfg.vocab_size) / flops_per_step(cfg, n + 2, cfg.vocab_size)
        hours.append(rows_ / rate / 3600)
    return pd.Series(hours, index=work.index)


if __name__ == "__main__":
    raise SystemExit(main())
