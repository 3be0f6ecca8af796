"""How long a chapter or an artifact should take on this machine when no run of it is recorded
here: its work counted from its parameters, the calibration machine's seconds per unit of that
work, and this machine's speed relative to it read off a short probe.

**The probe** times a fixed batch (32 sequences of 22 tokens, the size of a chapter's batched
chains) through a randomly initialised BERT of the shape of the offline profile's English MLM
(6 layers, 384 wide, 12 heads, 30,522 tokens), scoring one masked row per sequence as the chain
engine does: the median of 2 to 12 passes on one thread, then on torch's threads (the kernels'
setting), about 1.5 s each on a quiet 2-core machine (plus the imports, which the build makes
anyway). A chapter's fixed overhead (kernel, imports, Python) is scaled by the one-thread
reading, its work by the other. It measures the machine as it is at that moment, other jobs on
the same cores included. On an oversubscribed machine the two readings part: at a load average of
10 on 2 cores, torch's 2 threads ran the probe 2 to 7 times slower than one thread did, and a
training step 2 to 4 times (each thread waits for its descheduled partner at every operation), so
such a machine makes every chapter several times slower, the heavy ones most.

**Calibration** (``CALIBRATION_SECONDS``). On 2026-11-24 a fresh clone's default build on a 2-core
machine took, at commit f52a2ef (``params/offline.yaml`` of that commit): incompatibility 119 s,
bounds 178 s, crossover 790 s, traps 345 s, basins 341 s, ground truth 92 s (31 min of chapters),
the English training 28.5 min and the default benchmark about 5 min, about 65 min in all. The
same build on another 2-core machine on 2026-11-25 took over 3 hours (chapters about 119 min,
crossover 2,868 s and traps 1,944 s among them, training 59 min, benchmark 12 min): the factor
between the two, 2 to 3.6, is what the probe is meant to read off in advance. Each chapter's
constant is its time on the first machine, less ``OVERHEAD_S`` (kernel start, imports, model
loading, figures), over its work at f52a2ef's parameters (``CALIBRATION_PARAMETERS``, which the
test suite compares with that commit's profile where git has it). That gives 2 to 7 ms per MiniLM
row at n = 20 across the chapters, as a 2-core CPU's rate suggests. The probe was not run on that
machine; its readings there (``REFERENCE_PROBE_S``, ``REFERENCE_PROBE_ONE_S``) are inferred from
the English training, which it did run: on the machine this module was written on, a MiniLM
optimiser step (batch 32 x 52 tokens, masked head, AdamW) timed between probes took 9 to 13
probe passes on one thread (median 11) and 6 to 9.5 on two under load (about 9.5 expected
quiet, as the two workloads' multiplies are of a size), and the training's 28.5 min there come
to about 1.59 s a MiniLM step (1,066 step-equivalents: 850 steps, 360 scratch steps at 0.39 of
one, 14 evaluations and two pseudo-perplexities), so 0.16 s a probe pass on 2 threads, and 0.26 s
on one with the 1.8 speed-up of the second thread that the training's step counts assume. The
estimates therefore rest on one machine's times, on a work count per chapter that is only as
good as its formula (a run that stops early, as coupled pairs that meet do, costs less than its
upper bound, which the calibration absorbs at the reference parameters only), and on two
inferred constants: read them as the order of magnitude (tens of minutes or hours), not the
minute. At the reference readings a first default build now comes to about 70 min (by these
counts crossover's budgets in sweeps, since 9ac1f6f, ask for 1.5 times the work they did at
f52a2ef, and the basins chapter's null chains 1.4 times).
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

# --------------------------------------------------------------------------- calibration
CALIBRATION_COMMIT = "f52a2ef"
# wall seconds of each chapter on the calibration machine (2026-11-24, 2 cores, profile offline)
CALIBRATION_SECONDS = {"incompatibility": 119.0, "bounds": 178.0, "crossover": 790.0, "traps": 345.0,
                       "basins": 341.0, "ground_truth": 92.0}
# the parameters those times ran with, as far as chapter_work() reads them: params/offline.yaml at
# CALIBRATION_COMMIT (tests/bookbuild/test_plan.py compares them with `git show f52a2ef:params/offline.yaml`
# where git has that commit); reference_work() is chapter_work() at them.
_MLMS = [{"name": "package:antiberty"}, {"name": "package:rxnfp-bert"}, {"name": "package:rxnmapper-albert"},
         {"name": "trained:english"}]
_ENGLISH = {"name": "trained:english", "embedder": "sentence:package:all-MiniLM-L6-v2"}
CALIBRATION_PARAMETERS = {
    "incompatibility": {"mlms": _MLMS, "seq_len": 20, "n_rectangles": 300, "grid_k": 4, "n_grids": 30,
                        "training_run": "english",
                        "control": {"name": "package:smollm2-135m", "rectangles": 20, "candidates": 16}},
    "bounds": {"mlms": _MLMS, "seq_len": 14, "n_contexts": 3, "top_k": 10, "extra": 5, "drift_states": 200,
               "drift_temperatures": [0.5, 1.0]},
    "crossover": {"model": _ENGLISH, "lengths": [6, 10, 16, 28, 48], "drift_temperatures": [0.5, 1.0, 2.0],
                  "trials": 20, "steps": 200, "record_every": 10, "coupling_lengths": [6, 10, 16, 24],
                  "coupling_temperatures": [0.25, 0.5, 1.0, 1.5, 2.0, 3.0], "pairs": 8, "budget": 1200},
    "traps": {"model": _ENGLISH, "seq_len": 20, "chains": 16, "steps": 10000, "record_every": 10},
    "basins": {"mlms": [{"name": "trained:english"}], "topic_scorer": "embedding:package:all-MiniLM-L6-v2",
               "seeds_per_topic": 4, "chains_per_seed": 2, "seq_len": 16, "steps": 3000, "score_every": 100,
               "prefix_chains": 8},
    "ground_truth": {"models_": [{"name": "package:rxnmapper-albert", "tokens": ["C", "c", "O", "N"], "n": 5},
                                {"name": "package:antiberty", "tokens": ["G", "S", "Y", "A"], "n": 5},
                                {"name": "trained:english", "tokens": ["the", "a", "of", "and"], "n": 5}],
                     "temperatures": [0.25, 0.5, 1.0, 2.0, 4.0], "pairs": 300, "budget": 5000, "rectangles": 1000,
                     "chains": 32, "holding": {"temperatures": [0.1, 0.25], "deepest": 2, "chains": 200,
                                                                                      "steps": 10_000_000}},
}
OVERHEAD_S = 12.0               # per chapter at the reference speed: kernel, imports, models, figures
FIXED_S = {"cost": 30.0}        # chapters with no work count: a fixed time at the reference speed
# the English training preset on the calibration machine (850 MiniLM and 360 scratch steps)
TRAINING_SECONDS = {"english": 28.5 * 60}
REFERENCE_TRAINING_STEPS = {"minilm": 850, "scratch": 360}
TRAINING_OVERHEAD_S = 20.0      # corpus, tokenizer, first evaluation
# the build's benchmark artifacts at the reference speed (textglauber.bench.cache.PRESETS)
BENCH_SECONDS = {"bench": 150.0, "bench-smoke": 60.0, "bench-metastable": 3600.0}
STANDINS_SECONDS = 240.0        # every stand-in of the standin profile (textglauber.standins)
REFERENCE_PROBE_S = 0.16        # the probe on torch's 2 threads on the calibration machine (inferred)
REFERENCE_PROBE_ONE_S = 0.26    # the probe on one thread there (inferred)

# --------------------------------------------------------------------------- model costs
# (layers, width, feed-forward width, head columns per scored row, feed-forward matrices)
_MINILM = (6, 384, 1536, 29523, 2)
SHAPES = {
    "trained:english": _MINILM,                       # the chosen start: the MiniLM encoder, |A| columns
    "package:antiberty": (8, 512, 2048, 25, 2),
    "package:rxnfp-bert": (12, 256, 512, 591, 2),
    "package:rxnmapper-albert": (12, 256, 512, 591, 2),
    "package:smollm2-135m": (30, 576, 1536, 49152, 3),
    "package:all-MiniLM-L6-v2": (6, 384, 1536, 0, 2),   # sentence embedder and topic scorer: no head
    "bert-base-uncased": (12, 768, 3072, 30522, 2),
    "bert-large-uncased": (24, 1024, 4096, 30522, 2),
    "roberta-base": (12, 768, 3072, 50265, 2),
    "roberta-large": (24, 1024, 4096, 50265, 2),
    "answerdotai/ModernBERT-base": (22, 768, 1152, 50368, 3),
    "gpt2": (12, 768, 3072, 50257, 2),
    "sentence-transformers/all-mpnet-base-v2": (12, 768, 3072, 0, 2),
}
# A scored row of any model costs at least this much: the engine's and Python's own work. Where rows
# come in large batches (bounds, incompatibility, ground truth's enumeration) that is little: the
# smoke bounds chapter's 8,720 rows of 0.1M-parameter models took 7 s in all on an idle machine
# (probe 0.07 s). A chain step is dearer (the memoizing engine's bookkeeping, the drift tracker):
# the smoke crossover chapter's chains of the same models took 427 s there (probe 0.068 s), as many
# seconds per counted row as the English MLM's at the reference.
ROW_FLOOR = 0.2
CHAIN_ROW_FLOOR = 1.0
COUPLING_SHARE = 0.7   # share of the coupling budget's upper bound 2 pairs temps sum(budget) that pairs score:
                       # with budgets in sweeps most slow cells run to the end, and the offline build of
                       # 2026-11-25 scored 227,114 of 313,344 rows (0.72); 0.2 made its plan say 6 min for 85
EXACT_STEP = 2e-4      # one step of a chain on an enumerated kernel, in rows (a lookup and a draw)
ESCAPE_ROWS = 5        # rows a chain of the escape section has scored, typically: the offline build of 554dc89
                       # scored 23,658 rows for its cells' 4,050 chains (5.8 a chain; rows are shared between
                       # the cells of a model), in 12,956 events, superbasin exits and jumps
SEARCH_ROWS = 80       # rows a quasi-potential search scores per site of its trap, typically: rxnfp's BERT at n = 20
                       # scored 7 to 1,626 rows for k = 1 to 5 (quasipotential.barrier, measured 2026-11-28)
FIND_SWEEPS = 4        # sweeps of coordinate ascent from a random start to a fixed point, typically
ESCAPE_CHAIN = 5.0     # a chain's own bookkeeping in row units (events, superbasin tables): the offline section of
                       # 554dc89 took 182 s for those 4,050 chains and its exactness check's 14,400 (400 a case)


def _layer_cost(shape, tokens: int) -> float:
    layers, h, inter, _, mats = shape
    return tokens * layers * (4 * h * h + mats * h * inter)


_REF_ROW = _layer_cost(_MINILM, 22) + _MINILM[1] * _MINILM[3]      # the MiniLM shape, one row at n = 20


def _shape(name: str):
    """The shape of a named model: from ``SHAPES``, a local folder's config.json, else the MiniLM
    shape; None for the tiny models (and an embedder ``self``), which cost ``ROW_FLOOR``."""
    if not isinstance(name, str):
        return None
    name = name.partition("@")[0]
    for prefix in ("sentence:", "embedding:", "nli:"):
        name = name.removeprefix(prefix)
    if name in SHAPES:
        return SHAPES[name]
    if name.startswith("tiny-") or name == "trained:tiny" or name == "self":
        return None
    cfg = _local_config(name)
    if cfg is None:
        return _MINILM
    layers = cfg.get("num_hidden_layers", cfg.get("n_layer", 6))
    h = cfg.get("hidden_size", cfg.get("n_embd", 384))
    inter = cfg.get("intermediate_size") or cfg.get("n_inner") or 4 * h
    return (int(layers), int(h), int(inter), int(cfg.get("vocab_size", 30522)), 2)


def _local_config(name: str) -> dict | None:
    """config.json of a local model folder (the stand-ins, a path in a profile), or None."""
    if not name or name.startswith(("package:", "trained:")) or ":" in name:
        return None
    try:
        from ..paths import local_path

        f = local_path(name) / "config.json"
        return json.loads(f.read_text()) if f.is_file() else None
    except (OSError, ValueError):
        return None


def model_cost(name: str, n: int, *, head: bool = True, causal: bool = False, floor: float = ROW_FLOOR) -> float:
    """One scored row of ``name`` at length ``n``, in rows of the MiniLM shape at n = 20: the
    encoder over n + 2 tokens and the head on one row (on every token for a causal model's
    sequence probability; none with ``head=False``); at least ``floor``."""
    shape = _shape(name)
    if shape is None:
        return floor
    head_rows = (n + 2) if causal else (1 if head else 0)
    cost = _layer_cost(shape, n + 2) + head_rows * shape[1] * shape[3]
    return max(floor, cost / _REF_ROW)


def step_cost(name: str, n: int) -> float:
    """One chain-step's row (:func:`model_cost` with the chain engine's floor)."""
    return model_cost(name, n, floor=CHAIN_ROW_FLOOR)


def _items(value) -> list:
    return value if isinstance(value, list) else [value] if value else []


def _name(item) -> str:
    return item.get("name", "") if isinstance(item, dict) else str(item or "")


def _embedder_cost(item, n: int) -> float:
    """The cost of embedding one state with a chapter's embedder (``self``: the model's own
    input embeddings, nearly free)."""
    emb = item.get("embedder", "self") if isinstance(item, dict) else "self"
    return 0.0 if emb == "self" else model_cost(emb, n, head=False)


def _training_checkpoints(run: str, n: int) -> float:
    """The rows that scoring a fixed set of rectangles with every checkpoint of a training run costs
    per rectangle (incompatibility along training)."""
    try:
        from ..train_mlm import PRESETS
    except ImportError:
        return 0.0
    preset = PRESETS.get(run)
    if preset is None:
        return 0.0
    total = 0.0
    for start in preset.starts:
        shape = _MINILM if start == "minilm" else (preset.scratch["layers"], preset.scratch["hidden"],
                                                   4 * preset.scratch["hidden"], _MINILM[3], 2)
        if run == "tiny":
            row = ROW_FLOOR
        else:
            row = max(ROW_FLOOR, (_layer_cost(shape, n + 2) + shape[1] * shape[3]) / _REF_ROW)
        total += preset.checkpoints * 4 * row
    return total



def _incompatibility_work(p: dict) -> float:
    n, R = int(p["seq_len"]), int(p["n_rectangles"])
    K, G = int(p.get("grid_k", 0) or 0), int(p.get("n_grids", 0) or 0)
    work = sum((6 * R + 2 * K * K * G) * model_cost(_name(m), n) for m in _items(p.get("mlms")))
    if p.get("training_run"):
        work += R * _training_checkpoints(str(p["training_run"]), n)
    ctl = p.get("control")
    if isinstance(ctl, dict) and ctl.get("name"):
        rects = int(ctl.get("rectangles", R))
        work += rects * int(ctl.get("candidates", 16)) * 4 * model_cost(ctl["name"], n, causal=True)
    return work


def _bounds_work(p: dict) -> float:
    n, q = int(p["seq_len"]), 1 + int(p["top_k"]) + int(p["extra"])
    per = (int(p["n_contexts"]) * n * (q * (n - 1) + 1)
           + int(p["drift_states"]) * n * len(_items(p.get("drift_temperatures"))))
    return sum(per * model_cost(_name(m), n) for m in _items(p.get("mlms")))


PHASE_CELL = 0.01   # a phase cell's linear algebra per state, in rows (about 1 ms a state at 4096 states)


def _crossover_work(p: dict) -> float:
    m = p["model"]
    name = _name(m)
    work = 0.0
    for n in p["lengths"]:
        steps = int(p["sweeps"]) * n if "sweeps" in p else int(p["steps"])
        per_step = step_cost(name, n) + _embedder_cost(m, n) / max(1, int(p.get("record_every", 1)))
        work += int(p["trials"]) * len(p["drift_temperatures"]) * steps * per_step
    for n in p.get("coupling_lengths") or p["lengths"]:
        budget = int(p["budget_sweeps"]) * n if "budget_sweeps" in p else int(p["budget"])
        work += (COUPLING_SHARE * 2 * int(p["pairs"]) * len(p["coupling_temperatures"]) * budget
                 * step_cost(name, n))
    return work + _phase_work(p.get("phase") or {})


def _phase_work(ph: dict) -> float:
    """The exact phase section: per model, both designs score n 2^(n-1) rows at every n from
    ``min_n`` to ``max_n`` (the calibration's n once more), and each (n, T) cell's linear algebra
    costs about :data:`PHASE_CELL` rows per state (eigenvalues, the stationary law, the powers for
    t_mix up to ``tmix_max_states``)."""
    work = 0.0
    for m in _items(ph.get("models")):
        ns = list(range(int(ph.get("min_n", 3)), int(m["max_n"]) + 1)) + [int(ph.get("calibration_n", 0))]
        work += sum(2 * n * 2 ** (n - 1) * model_cost(_name(m), n) for n in ns if n >= 2)
        work += sum(2 * len(ph.get("temperatures", [])) * PHASE_CELL * 2 ** n for n in ns if n >= 2)
    return work


def _escape_work(e: dict) -> float:
    """Chapter 5's escape section: per model, trap, distance and temperature, ``chains`` chains
    that score about :data:`ESCAPE_ROWS` rows each, each trap's quasi-potential searches
    (:data:`SEARCH_ROWS`) and its chains at the preprint's temperature, plus the exactness check's
    enumerated kernels and its chains (twice for k >= 2: the capped run), each chain with its own
    bookkeeping (:data:`ESCAPE_CHAIN`), and the growth section (:func:`_growth_work`). ``max_moves``
    is only the ceiling of a chain's events, far above what the superbasin makes them take."""
    n, ks = int(e["seq_len"]), _items(e.get("distances"))
    cells = int(e["traps"]) * (len(ks) * int(e["temperatures"]) + 1)
    work = sum(cells * int(e["chains"]) * (ESCAPE_ROWS * model_cost(_name(m), n) + ESCAPE_CHAIN)
               + int(e["traps"]) * len(ks) * SEARCH_ROWS * n * model_cost(_name(m), n)
               for m in _items(e.get("models")))
    dists = _items(e.get("exact_distances"))
    cases = len(_items(e.get("exact_temperatures"))) * (len(dists) + sum(int(d) >= 2 for d in dists))
    for m in _items(e.get("exact_models")):
        k, nx = len(m["tokens"]), int(m["n"])
        work += k ** nx * nx * model_cost(_name(m), nx) + cases * int(e["exact_chains"]) * ESCAPE_CHAIN
    return work + (_growth_work(e["growth"], e) if e.get("growth") else 0.0)


def _growth_work(g: dict, e: dict) -> float:
    """Per model and length: coordinate ascent from 2 x ``traps`` random starts (:data:`FIND_SWEEPS`
    sweeps of n rows), a search of at most ``max_states`` states (n rows each, :data:`SEARCH_ROWS`
    per site typically), and the chains at the check lengths."""
    work = 0.0
    for m in _items(g.get("models")):
        for n in _items(g.get("lengths")):
            n = int(n)
            rows = 2 * int(g["traps"]) * FIND_SWEEPS * n + min(int(g["max_states"]), SEARCH_ROWS) * n
            work += rows * model_cost(_name(m), n)
            if n in _items(g.get("check_lengths")):
                work += int(g["chains"]) * (ESCAPE_ROWS * model_cost(_name(m), n) + ESCAPE_CHAIN)
    return work


def _traps_work(p: dict) -> float:
    m, n = p["model"], int(p["seq_len"])
    per_step = step_cost(_name(m), n) + _embedder_cost(m, n) / max(1, int(p.get("record_every", 1)))
    return int(p["chains"]) * int(p["steps"]) * per_step + (_escape_work(p["escape"]) if p.get("escape") else 0.0)


def _basins_work(p: dict) -> float:
    n, steps = int(p["seq_len"]), int(p["steps"])
    topics = len(p.get("seed_topics") or range(5))
    chains = topics * int(p["seeds_per_topic"]) * int(p["chains_per_seed"]) + int(p.get("null_chains", 0) or 0)
    mlms = [_name(m) for m in _items(p.get("mlms"))]
    scorer = str(p.get("topic_scorer", "")).partition(":")[2] or "package:all-MiniLM-L6-v2"
    records = steps / max(1, int(p.get("score_every", 1)))
    work = sum(chains * (steps * step_cost(m, n) + records * model_cost(scorer, n, head=False)) for m in mlms)
    if mlms:
        prefix = int(p.get("prefix_chains", 0))
        work += prefix * (steps * step_cost(mlms[0], n + 6) + model_cost(scorer, n + 6, head=False))
    return work


def _ground_truth_work(p: dict) -> float:
    temps = len(_items(p.get("temperatures")))
    work = 0.0
    for m in _items(p.get("models_")):
        n, k = int(m["n"]), len(m["tokens"])
        work += k ** n * n * model_cost(_name(m), n)                 # the enumerated conditionals
        work += temps * (int(p["pairs"]) + int(p["chains"])) * int(p["budget"]) * EXACT_STEP
        work += temps * int(p["rectangles"]) * 4 * EXACT_STEP
        hold = p.get("holding") or {}
        if hold:                                  # chains timed out of the deepest states, by jumps
            work += (len(_items(hold.get("temperatures"))) * int(hold.get("deepest", 0)) * int(hold.get("chains", 0))
                     * ESCAPE_CHAIN)
    return work


_WORK = {"incompatibility": _incompatibility_work, "bounds": _bounds_work, "crossover": _crossover_work,
         "traps": _traps_work, "basins": _basins_work, "ground_truth": _ground_truth_work}


def chapter_work(chapter: str, prm: dict) -> float | None:
    """The encoder work a chapter's parameters ask for, in rows of the MiniLM shape at n = 20
    (:func:`model_cost`); None for a chapter with no count (its time is ``FIXED_S``). Each term
    is a count of the chapter's loops (see the notebooks); constants that are the same at every
    size are left to the calibration."""
    count = _WORK.get(chapter)
    return None if count is None else count(prm)


# --------------------------------------------------------------------------- estimates
def reference_work(chapter: str) -> float | None:
    """:func:`chapter_work` at the calibration's parameters (the same formula as for a profile, so
    a change to the formula keeps the calibration in step)."""
    prm = CALIBRATION_PARAMETERS.get(chapter)
    return None if prm is None else chapter_work(chapter, prm)


def seconds_per_unit(chapter: str) -> float | None:
    """Seconds per unit of :func:`chapter_work` on the calibration machine."""
    work = reference_work(chapter)
    if chapter not in CALIBRATION_SECONDS or not work:
        return None
    return max(CALIBRATION_SECONDS[chapter] - OVERHEAD_S, 1.0) / work


def estimate(chapter: str, prm: dict, probe_: "Probe") -> float | None:
    """Seconds a chapter with these parameters would take at the probe's reading (None: no basis):
    its overhead at the one-thread reading, its work at the reading on torch's threads."""
    if chapter in FIXED_S:
        return probe_.scale(FIXED_S[chapter], 0.0)
    spu = seconds_per_unit(chapter)
    try:
        work = chapter_work(chapter, prm)
    except (KeyError, TypeError, ValueError):
        return None
    if spu is None or work is None:
        return None
    return probe_.scale(OVERHEAD_S, spu * work)


def rescaled(seconds: float, chapter: str, old: dict | None, new: dict) -> tuple[float, float | None]:
    """A last run's time carried over to other parameters: the part above ``OVERHEAD_S`` scales
    with the work. Returns (seconds, the work ratio or None where it is one or unknown)."""
    if not old:
        return seconds, None
    try:
        a, b = chapter_work(chapter, old), chapter_work(chapter, new)
    except (KeyError, TypeError, ValueError):
        return seconds, None
    if not a or not b or math.isclose(a, b, rel_tol=1e-9):
        return seconds, None
    return OVERHEAD_S + max(seconds - OVERHEAD_S, 0.0) * b / a, b / a


# --------------------------------------------------------------------------- the probe
PROBE_BATCH, PROBE_TOKENS = 32, 22
PROBE_PASSES = (2, 12)       # at least, at most, per thread setting
PROBE_BUDGET_S = 1.5         # per thread setting


def probe(budget_s: float = PROBE_BUDGET_S) -> tuple[float, float]:
    """(seconds per pass on one thread, seconds per pass on torch's threads), the median of each,
    for the fixed probe batch on this machine now (see the module docstring). The random model is
    built inside ``torch.random.fork_rng`` and the thread count is restored: the process is left
    as it was."""
    import statistics

    import torch
    from transformers import BertConfig, BertForMaskedLM

    layers, h, inter, _, _ = _MINILM
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = BertForMaskedLM(BertConfig(vocab_size=30522, hidden_size=h, num_hidden_layers=layers,
                                           num_attention_heads=12, intermediate_size=inter)).eval()
        ids = torch.randint(1000, 30000, (PROBE_BATCH, PROBE_TOKENS))
    rows = torch.arange(PROBE_BATCH)
    threads = torch.get_num_threads()
    out = []
    try:
        for n in (1, threads):
            torch.set_num_threads(n)
            times = []
            with torch.inference_mode():
                model.cls(model.bert(input_ids=ids)[0][rows, 1])            # warm-up
                t0 = time.perf_counter()
                while len(times) < PROBE_PASSES[0] or (len(times) < PROBE_PASSES[1]
                                                       and time.perf_counter() - t0 < budget_s):
                    t = time.perf_counter()
                    model.cls(model.bert(input_ids=ids)[0][rows, 1])
                    times.append(time.perf_counter() - t)
            out.append(float(statistics.median(times)))
    finally:
        torch.set_num_threads(threads)
    return out[0], out[1]


class Probe:
    """The probe, run at most once and only when some line of the plan needs it. ``one`` and
    ``many``: seconds per pass on one thread and on torch's threads."""

    def __init__(self, measure=probe):
        self._measure, self.one, self.many, self.error = measure, None, None, None

    def __call__(self) -> float | None:
        """The probe's reading on torch's threads (None if it failed)."""
        if self.many is None and self.error is None:
            try:
                got = self._measure()
                self.one, self.many = (float(got), float(got)) if isinstance(got, (int, float)) else map(float, got)
            except Exception as exc:            # the plan only prints: never stop a build for it
                self.error = f"{type(exc).__name__}: {exc}"
        return self.many

    @property
    def seconds(self) -> float | None:
        return self.many

    def scale(self, overhead_s: float, compute_s: float) -> float:
        """Seconds here for work that takes ``overhead_s`` (one thread: kernel, imports, Python) plus
        ``compute_s`` (torch's threads) on the calibration machine."""
        self()
        return overhead_s * self.one / REFERENCE_PROBE_ONE_S + compute_s * self.many / REFERENCE_PROBE_S

    def basis(self) -> str:
        return f"estimated from a {self.many:.2f} s probe"



def training_work(preset) -> float:
    """Optimiser steps of a training preset, each weighed by its start's cost per step relative to
    the MiniLM start's (the layers over the padded batch and the head on the masked rows)."""
    def per_token(layers, h, inter, vocab):
        return layers * (4 * h * h + 2 * h * inter) + preset.mask_prob * h * vocab

    vocab = _MINILM[3] if preset.tokenizer == "minilm" else 200
    ref = per_token(6, 384, 1536, _MINILM[3]) * 32 * 128
    total = 0.0
    for start in preset.starts:
        if start == "minilm":
            shape = (6, 384, 1536)
        else:
            shape = (preset.scratch["layers"], preset.scratch["hidden"], 4 * preset.scratch["hidden"])
        total += preset.steps_of(start) * per_token(*shape, vocab) * preset.batch * preset.max_len / ref
    return total


def training_done(preset, partial: Path) -> float:
    """The part of :func:`training_work` an interrupted training has done (finished starts, and
    the saved step of the one it was in, where its progress file says)."""
    done = 0.0
    for start in preset.starts:
        one = type(preset)(**{**preset.__dict__, "starts": (start,)})
        folder = partial / start
        if (folder / "run.json").exists():
            done += training_work(one)
            continue
        try:
            step = json.loads((folder / "progress.json").read_text())["step"]
        except (OSError, ValueError, KeyError):
            continue
        done += training_work(one) * min(1.0, step / max(1, preset.steps_of(start)))
    return done

