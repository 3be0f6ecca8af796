"""The work a chapter's parameters ask for, in rows of the MiniLM shape at n = 20: one count per
chapter of its loops (see the notebooks), with the typical rows of the steps that have no fixed count."""
from __future__ import annotations

from ...profile import Control
from ...scheduler import chain_blocks
from .costs import MINILM_SHAPE, REF_ROW, bookkeeping, counting, floored, layer_cost, model_cost, step_cost

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
        from ...train_mlm import PRESETS
    except ImportError:
        return 0.0
    preset = PRESETS.get(run)
    if preset is None:
        return 0.0
    total = 0.0
    for start in preset.starts:
        shape = MINILM_SHAPE if start == "minilm" else (preset.scratch["layers"], preset.scratch["hidden"],
                                                   4 * preset.scratch["hidden"], MINILM_SHAPE[3], 2)
        row = floored(0.0 if run == "tiny" else (layer_cost(shape, n + 2) + shape[1] * shape[3]) / REF_ROW)
        total += preset.checkpoints * 4 * row
    return total


def _incompatibility_work(p: dict) -> float:
    work = sum(_rectangles_work(p, m) for m in _items(p.get("models"))) + _control_work(p)
    if p.get("training_run"):
        work += int(p["n_rectangles"]) * _training_checkpoints(str(p["training_run"]), int(p["seq_len"]))
    return work


def _rectangles_work(p: dict, m) -> float:
    """One masked LM's rectangles and grids (one unit of work)."""
    n, R = int(p["seq_len"]), int(p["n_rectangles"])
    K, G = int(p.get("grid_k", 0) or 0), int(p.get("n_grids", 0) or 0)
    return (6 * R + 2 * K * K * G) * model_cost(_name(m), n)


def _control_work(p: dict) -> float:
    """The causal control's rectangles (one unit of work; nothing without a control)."""
    ctl = p.get("control")
    if not (isinstance(ctl, dict) and ctl.get("name")):
        return 0.0
    rects, n = int(ctl.get("rectangles", p["n_rectangles"])), int(p["seq_len"])
    # not Control.part_of: a recorded build's parameters (``data/timings``, the calibration's) are priced as
    # they were written, and the calibration's control names no kind or corpus
    return rects * int(ctl.get("candidates", Control.default_of("candidates"))) * 4 * model_cost(ctl["name"], n, causal=True)


def _bounds_work(p: dict) -> float:
    n, q = int(p["seq_len"]), 1 + int(p["top_k"]) + int(p["extra"])
    per = (int(p["n_contexts"]) * n * (q * (n - 1) + 1)
           + int(p["drift_states"]) * n * len(_items(p.get("drift_temperatures"))))
    return sum(per * model_cost(_name(m), n) for m in _items(p.get("models")))


PHASE_CELL = 0.01   # a phase cell's linear algebra per state, in rows (about 1 ms a state at 4096 states)


def _crossover_work(p: dict) -> float:
    work = sum(_drift_work(p, n) for n in p["lengths"] for _ in p["drift_temperatures"])
    work += sum(_coupling_work(p, n) for n in p.get("coupling_lengths") or p["lengths"])
    return work + _phase_work(p.get("phase") or {})


def _drift_work(p: dict, n: int) -> float:
    """One drift cell (n, T) (one unit of work): ``trials`` chains for the length's budget, the
    embedder at every recording."""
    m = p["model"]
    steps = int(p["sweeps"]) * n if "sweeps" in p else int(p["steps"])
    per_step = step_cost(_name(m), n) + _embedder_cost(m, n) / max(1, int(p.get("record_every", 1)))
    return int(p["trials"]) * steps * per_step


def _coupling_work(p: dict, n: int) -> float:
    """One coupling length (one unit of work): every pair of every temperature for its budget."""
    budget = int(p["budget_sweeps"]) * n if "budget_sweeps" in p else int(p["budget"])
    return COUPLING_SHARE * 2 * int(p["pairs"]) * len(p["coupling_temperatures"]) * budget * step_cost(_name(p["model"]), n)


def _phase_work(ph: dict) -> float:
    """The exact phase section: per model, the global design scores n 2^(n-1) rows at every n from
    ``min_n`` to ``max_n`` and each of the ``passages`` nested passages up to ``passage_max_n`` (the
    calibration's n once more, for two designs); each (n, T) cell's linear algebra costs about
    :data:`PHASE_CELL` rows per state (eigenvalues, the stationary law, the powers for t_mix up to
    ``tmix_max_states``), and the landscape check six more cells per listed chain. Past the listed
    lengths, the landscape's searches score up to ``max_states`` states of n rows each
    (:data:`SEARCH_SHARE`), and up to ``settle_states`` more where they stop between wells
    (:data:`SETTLE_SHARE`), on the global pair and ``landscape.passages``
    passages; the covering chains score at most ``max_states`` rows a cell."""
    work = 0.0
    q, cov = ph.get("landscape") or {}, ph.get("covering") or {}
    designs = 1 + int(ph.get("passages", 1))
    for m in _items(ph.get("models")):
        cost = model_cost(_name(m), int(m["max_n"]))
        top = int(m["max_n"])
        lo = int(ph.get("min_n", 3))
        glob = list(range(lo, top + 1))
        pas = list(range(lo, min(top, int(ph.get("passage_max_n", top))) + 1))
        ns = glob + pas * (designs - 1) + [int(ph.get("calibration_n", 0))] * 2
        work += sum(n * 2 ** (n - 1) * model_cost(_name(m), n) for n in ns if n >= 2)
        work += sum(bookkeeping((len(ph.get("temperatures", [])) + 6) * PHASE_CELL * 2 ** n) for n in ns if n >= 2)
        far = [int(n) for n in _items(q.get("lengths")) if int(n) > top]
        searched = 1 + int(q.get("passages", 0))
        top_states = int(q.get("max_states", 0))        # records made before settle_states bracketed with max_states
        states = SEARCH_SHARE * top_states + SETTLE_SHARE * int(q.get("settle_states", top_states))
        work += sum(searched * states * n * cost for n in far)
        work += len(_items(cov.get("lengths"))) * len(_items(cov.get("temperatures"))) * int(cov.get("max_states", 0)) * cost
    return work


SEARCH_SHARE = 1     # a landscape search's states over its max_states, before any bracket
SETTLE_SHARE = 0.15  # ... and over its settle_states, typically: most searches settle before they bracket (offline,
                     # 2026-12-02, settle_states 3000: 5,110 states more over 12 searches, 0.14 of 12 x 3000)


def _escape_model_work(e: dict, m) -> float:
    """One model's unit of chapter 5's escape section (:func:`textglauber.traps.run_escape`): per
    trap, distance and temperature, ``chains`` chains that score about :data:`ESCAPE_ROWS` rows each,
    each trap's quasi-potential searches (:data:`SEARCH_ROWS`) and its chains at the preprint's
    temperature, each chain with its own bookkeeping (:data:`ESCAPE_CHAIN`), and the searches of the
    traps passed over. ``max_moves`` is only the ceiling of a chain's events, far above what the
    superbasin makes them take."""
    n, ks = int(e["seq_len"]), _items(e.get("distances"))
    cells = int(e["traps"]) * (len(ks) * int(e["temperatures"]) + 1)
    extra = max(0, int(e.get("candidates", e["traps"])) - int(e["traps"]))      # traps searched, then passed over
    cost = model_cost(_name(m), n)
    return (cells * int(e["chains"]) * (ESCAPE_ROWS * cost + bookkeeping(ESCAPE_CHAIN))
            + (int(e["traps"]) + extra) * len(ks) * SEARCH_ROWS * n * cost)


def _escape_work(e: dict) -> float:
    """Chapter 5's escape section: each model's unit (:func:`_escape_model_work`), the exactness
    check's enumerated kernels and its chains (twice for k >= 2: the capped run), and the length and
    growth sections (:func:`_length_work`, :func:`_growth_work`)."""
    work = sum(_escape_model_work(e, m) for m in _items(e.get("models")))
    dists = _items(e.get("exact_distances"))
    cases = len(_items(e.get("exact_temperatures"))) * (len(dists) + sum(int(d) >= 2 for d in dists))
    for m in _items(e.get("exact_models")):
        k, nx = len(m["tokens"]), int(m["n"])
        work += k ** nx * nx * model_cost(_name(m), nx) + bookkeeping(cases * int(e["exact_chains"]) * ESCAPE_CHAIN)
    work += _length_work(e["length"]) if e.get("length") else 0.0
    return work + (_growth_work(e["growth"], e) if e.get("growth") else 0.0)


def _length_work(g: dict) -> float:
    """Escape against length by slopes: per model and length, the family's coordinate ascent
    (:data:`FIND_SWEEPS` sweeps of n rows), a search of at most ``max_states`` states, and
    ``temperatures`` x ``chains`` chains of about :data:`ESCAPE_ROWS` rows each."""
    work = 0.0
    for m in _items(g.get("models")):
        for n in _items(g.get("lengths")):
            n, cost = int(n), model_cost(_name(m), int(n))
            rows = 2 * int(g["traps"]) * FIND_SWEEPS * n + min(int(g["max_states"]), SEARCH_ROWS) * n
            work += rows * cost + int(g["temperatures"]) * int(g["chains"]) * (ESCAPE_ROWS * cost + bookkeeping(ESCAPE_CHAIN))
    return work


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
                work += int(g["chains"]) * (ESCAPE_ROWS * model_cost(_name(m), n) + bookkeeping(ESCAPE_CHAIN))
    return work


def _traps_work(p: dict) -> float:
    m, n = p["model"], int(p["seq_len"])
    embed = int(p["chains"]) * int(p["steps"]) * _embedder_cost(m, n) / max(1, int(p.get("record_every", 1)))
    return (_trap_chains_work(p, int(p["chains"])) + embed
            + (_escape_work(p["escape"]) if p.get("escape") else 0.0))


def _trap_chains_work(p: dict, chains: int) -> float:
    """``chains`` of the chapter's chains (a block of them is one unit of work; the embedder reads
    their records in the notebook's process)."""
    return chains * int(p["steps"]) * step_cost(_name(p["model"]), int(p["seq_len"]))


def _basin_chains(p: dict) -> int:
    topics = len(p.get("seed_topics") or range(5))
    return topics * int(p["seeds_per_topic"]) * int(p["chains_per_seed"]) + int(p.get("null_chains", 0) or 0)


def _basins_work(p: dict) -> float:
    n, steps = int(p["seq_len"]), int(p["steps"])
    models = [_name(m) for m in _items(p.get("models"))]
    scorer = str(p.get("topic_scorer", "")).partition(":")[2] or "package:all-MiniLM-L6-v2"
    records = steps / max(1, int(p.get("score_every", 1)))
    work = sum(_basin_model_work(p, m) + _basin_chains(p) * records * model_cost(scorer, n, head=False) for m in models)
    if models:
        prefix = int(p.get("prefix_chains", 0))
        work += prefix * (steps * step_cost(models[0], n + 6) + model_cost(scorer, n + 6, head=False))
    return work


def _basin_model_work(p: dict, m) -> float:
    """One model's chains (one unit of work; their texts are scored in the notebook's process)."""
    return _basin_chains(p) * int(p["steps"]) * step_cost(_name(m), int(p["seq_len"]))


def _ground_truth_work(p: dict) -> float:
    work = 0.0
    for m in _items(p.get("models")):
        work += _ground_truth_model_work(p, m)
        hold = p.get("holding") or {}
        if hold:                                  # chains timed out of the deepest states, by jumps
            work += bookkeeping(len(_items(hold.get("temperatures"))) * int(hold.get("deepest", 0))
                                * int(hold.get("chains", 0)) * ESCAPE_CHAIN)
    return work


def _ground_truth_model_work(p: dict, m) -> float:
    """One model entry's unit of the ground-truth chapter (:func:`textglauber.groundtruth.model_unit`):
    its enumerated conditionals, then its chains, pairs and rectangles at every temperature."""
    temps = len(_items(p.get("temperatures")))
    n, k = int(m["n"]), len(m["tokens"])
    work = k ** n * n * model_cost(_name(m), n)                      # the enumerated conditionals
    work += bookkeeping(temps * (int(p["pairs"]) + int(p["chains"])) * int(p["budget"]) * EXACT_STEP)
    return work + bookkeeping(temps * int(p["rectangles"]) * 4 * EXACT_STEP)


_WORK = {"incompatibility": _incompatibility_work, "bounds": _bounds_work, "crossover": _crossover_work,
         "traps": _traps_work, "basins": _basins_work, "ground_truth": _ground_truth_work}


def _batches(chapter: str, prm: dict) -> list[list]:
    """Counters of the units a chapter hands to the scheduler, in the order it submits them, one list
    per batch (one :func:`textglauber.scheduler.run_all`, which waits for all of its units)."""
    if chapter == "crossover":
        ph = prm.get("phase") or {}
        drift = [lambda n=n: _drift_work(prm, n) for n in prm.get("lengths") or [] for _ in prm.get("drift_temperatures") or []]
        pairs = [lambda n=n: _coupling_work(prm, n) for n in prm.get("coupling_lengths") or prm.get("lengths") or []]
        phase = [lambda m=m: _phase_work({**ph, "models": [m]}) for m in _items(ph.get("models"))]
        return [b for b in (drift, pairs, phase) if b]
    if chapter == "incompatibility":
        ctl = prm.get("control")
        control = [lambda: _control_work(prm)] if isinstance(ctl, dict) and ctl.get("name") else []
        return [b for b in ([lambda m=m: _rectangles_work(prm, m) for m in _items(prm.get("models"))], control) if b]
    if chapter == "traps":
        chains = [lambda b=b: _trap_chains_work(prm, len(b)) for b in chain_blocks(int(prm.get("chains") or 0))]
        e = prm.get("escape") or {}
        return [b for b in (chains, [lambda m=m: _escape_model_work(e, m) for m in _items(e.get("models"))]) if b]
    if chapter == "basins":
        return [b for b in ([lambda m=m: _basin_model_work(prm, m) for m in _items(prm.get("models"))],) if b]
    if chapter == "bounds":
        return [b for b in ([lambda m=m: _bounds_work({**prm, "models": [m]}) for m in _items(prm.get("models"))],) if b]
    if chapter == "ground_truth":
        return [b for b in ([lambda m=m: _ground_truth_model_work(prm, m) for m in _items(prm.get("models"))],) if b]
    return []


def unit_batches(chapter: str, prm: dict) -> list[list[tuple[float, float]]]:
    """(encoder, bookkeeping) work of each unit a chapter hands to the scheduler
    (:mod:`textglauber.scheduler`), in the order it submits them, one list per batch: the crossover
    hands out one unit per (length, temperature) of its drift chains, then one per length of its
    coupling grid, then one per model of its phase section; the incompatibility chapter one per masked
    LM, then its causal control; the basins, bounds and ground-truth chapters one per model entry;
    the traps one per block of its chains (:func:`textglauber.scheduler.chain_blocks`), then one per
    model of the escape section; empty for a chapter that hands out none."""
    out = []
    for batch in _batches(chapter, prm):
        parts = []
        for count in batch:
            with counting("encoder"):
                encoder = count()
            with counting("bookkeeping"):
                parts.append((encoder, count()))
        out.append(parts)
    return out


def unit_parts(chapter: str, prm: dict) -> list[tuple[float, float]]:
    """Every unit of :func:`unit_batches`, in order."""
    return [u for batch in unit_batches(chapter, prm) for u in batch]


def work_parts(chapter: str, prm: dict) -> tuple[float, float] | None:
    """(encoder, bookkeeping): the two parts of :func:`chapter_work`'s count that run at different
    speeds, the encoder on torch's threads and the rest (each row's floor, chain events, linear
    algebra) on one (:func:`textglauber.bookbuild.estimates.costs.counting`); None as there."""
    count = _WORK.get(chapter)
    if count is None:
        return None
    with counting("encoder"):
        encoder = count(prm)
    with counting("bookkeeping"):
        return encoder, count(prm)


def chapter_work(chapter: str, prm: dict) -> float | None:
    """The encoder work a chapter's parameters ask for, in rows of the MiniLM shape at n = 20
    (:func:`model_cost`); None for a chapter with no count (its time is ``FIXED_S``). Each term
    is a count of the chapter's loops (see the notebooks); constants that are the same at every
    size are left to the calibration."""
    count = _WORK.get(chapter)
    return None if count is None else count(prm)
