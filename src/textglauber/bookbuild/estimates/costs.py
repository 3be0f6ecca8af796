"""What one scored row of a model costs, in rows of the MiniLM shape at n = 20: the shapes of the
models the profiles name and the floors below which a row costs no less."""
from __future__ import annotations

import contextvars
import json
from contextlib import contextmanager
from pathlib import Path

# (layers, width, feed-forward width, head columns per scored row, feed-forward matrices)
MINILM_SHAPE = (6, 384, 1536, 29523, 2)
SHAPES = {
    "trained:english": MINILM_SHAPE,                 # the chosen start: the MiniLM encoder, |A| columns
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


def layer_cost(shape, tokens: int) -> float:
    layers, h, inter, _, mats = shape
    return tokens * layers * (4 * h * h + mats * h * inter)


REF_ROW = layer_cost(MINILM_SHAPE, 22) + MINILM_SHAPE[1] * MINILM_SHAPE[3]      # the MiniLM shape, one row at n = 20


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
    cfg = _local_config(name) or _standin_config(name)
    if cfg is None:
        return MINILM_SHAPE
    layers = cfg.get("num_hidden_layers", cfg.get("n_layer", 6))
    h = cfg.get("hidden_size", cfg.get("n_embd", 384))
    inter = cfg.get("intermediate_size") or cfg.get("n_inner") or 4 * h
    return (int(layers), int(h), int(inter), int(cfg.get("vocab_size", 30522)), 2)


def _local_config(name: str) -> dict | None:
    """config.json of a local model folder (the stand-ins, a path in a profile), or None."""
    if not name or name.startswith(("package:", "trained:")) or ":" in name:
        return None
    try:
        from ...paths import local_path

        f = local_path(name) / "config.json"
        return json.loads(f.read_text()) if f.is_file() else None
    except (OSError, ValueError):
        return None


def _standin_config(name: str) -> dict | None:
    """The config of a stand-in (a folder named for one of :data:`textglauber.standins.STANDINS`) that
    is not built yet, from its recipe: the plan of a first stand-in build, and a plan read where the
    stand-ins were never built, price the small random models that will run, not their hub models."""
    if Path(name).parent.name != "standins":
        return None
    from ... import standins

    recipe = standins.STANDINS.get(Path(name).name)
    if recipe is None:
        return None
    wordpiece = recipe.arch in ("bert", "mpnet-sentence")        # the others train a BPE of BPE_VOCAB pieces
    return {"num_hidden_layers": recipe.layers, "hidden_size": recipe.hidden, "intermediate_size": 4 * recipe.hidden,
            "vocab_size": 30522 if wordpiece else standins.BPE_VOCAB}


PARTS = ("all", "encoder", "bookkeeping")
_PART = contextvars.ContextVar("work_part", default="all")


@contextmanager
def counting(part: str):
    """Count one part of the work inside this block: ``all`` (a row costs its encoder work, at least
    its floor, and the chapters' own bookkeeping is added: :func:`textglauber.bookbuild.estimates.work.chapter_work`),
    ``encoder`` (a row costs its encoder work only, which torch's threads run) or ``bookkeeping``
    (a row costs its floor, the engine's and Python's own work on one thread, and the chapters'
    bookkeeping terms count as they are)."""
    if part not in PARTS:
        raise ValueError(f"part = {part!r}; allowed: {', '.join(PARTS)}")
    token = _PART.set(part)
    try:
        yield
    finally:
        _PART.reset(token)


def bookkeeping(rows: float) -> float:
    """A term of a chapter's own work outside the encoder (chain events, linear algebra, lookups), in
    rows: nothing when only the encoder is counted."""
    return 0.0 if _PART.get() == "encoder" else rows


def model_cost(name: str, n: int, *, head: bool = True, causal: bool = False, floor: float = ROW_FLOOR) -> float:
    """One scored row of ``name`` at length ``n``, in rows of the MiniLM shape at n = 20: the
    encoder over n + 2 tokens and the head on one row (on every token for a causal model's
    sequence probability; none with ``head=False``); at least ``floor``. Under
    :func:`counting`, its encoder part alone or its floor alone."""
    shape = _shape(name)
    if shape is None:
        return floored(0.0, floor)
    head_rows = (n + 2) if causal else (1 if head else 0)
    return floored((layer_cost(shape, n + 2) + head_rows * shape[1] * shape[3]) / REF_ROW, floor)


def floored(encoder: float, floor: float = ROW_FLOOR) -> float:
    """A row whose encoder work is ``encoder`` rows, under the part being counted (:func:`counting`)."""
    part = _PART.get()
    return encoder if part == "encoder" else floor if part == "bookkeeping" else max(floor, encoder)


def step_cost(name: str, n: int) -> float:
    """One chain-step's row (:func:`model_cost` with the chain engine's floor)."""
    return model_cost(name, n, floor=CHAIN_ROW_FLOOR)
