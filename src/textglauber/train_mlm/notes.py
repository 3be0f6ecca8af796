"""What the pages say about a trained run: its description for the book's table and the
sentences on its origin and on an encoder it shares with a chapter's reader."""
from __future__ import annotations

import json

from ..paths import models_root
from .presets import PRESETS


def describe(run: str) -> dict:
    """What a trained run is, for the book: data, size, steps, held-out metrics, the chosen start.
    "minutes" and "CPU minutes" say what the training took on the machine that ran it (information
    only: the run stops on its step count)."""
    m = json.loads((models_root() / run / "manifest.json").read_text())
    chosen = next(r for r in m["runs"] if r["start"] == m["chosen"])
    cpu = chosen.get("cpu_seconds")
    return {"run": run, "chosen start": m["chosen"], "parameters": chosen["parameters"],
            "training documents": m["corpus"]["train_documents"], "training tokens": m["corpus"]["train_tokens"],
            "held-out documents": m["corpus"]["heldout_documents"], "steps": chosen["steps"],
            "batch": m["settings"].get("batch"), "seed": m.get("seed"),
            "minutes": round(chosen["seconds"] / 60, 1),
            "CPU minutes": None if cpu is None else round(cpu / 60, 1), "held-out top-1": m["final"]["top1"],
            "held-out top-5": m["final"]["top5"], "pseudo-perplexity": m["final"]["pseudo_perplexity"],
            "other starts": "; ".join(f"{r['start']}: top-1 {r['final']['top1']:.3f} after {r['steps']} steps"
                                      for r in m["runs"] if r["start"] != m["chosen"]) or "none"}


MINILM_NAMES = ("all-MiniLM-L6-v2", "all-minilm-l6-v2")


def shared_encoder_note(model: str, others: list[str]) -> str:
    """A sentence for the pages, or "": when ``model`` is a run of this package that started from
    the all-MiniLM-L6-v2 encoder and one of ``others`` (an embedder or topic scorer name) is that
    same network, say so and what the shared origin could do to the measurement."""
    if not model.startswith("trained:"):
        return ""
    run = model.removeprefix("trained:").partition("@")[0]
    try:
        chosen = json.loads((models_root() / run / "manifest.json").read_text())["chosen"]
    except (OSError, KeyError, ValueError):
        return ""
    hits = [o for o in others if any(m in o for m in MINILM_NAMES)]
    if chosen != "minilm" or not hits:
        return ""
    return (f"The MLM `{model}` was fine-tuned from the all-MiniLM-L6-v2 encoder, the same network that "
            f"{' and '.join(f'`{h}`' for h in hits)} uses here to read the chain's states. The two share their "
            "input embeddings and first representations, so the reader may be partial to exactly the text the "
            "sampler favours: drift it should see can look smaller, and basins shaped by the shared encoder "
            "can look tighter, than an independent reader would report.")


CORPUS_WORDS = {"english": "English text shipped with Python packages (news, film reviews, headlines, 2016 US presidential "
                           "debate statements and convention speeches, and more)",
                "tiny": "sentences written for this project"}


def origin_note(name: str) -> str:
    """A sentence for the pages, or "": when the model ``name`` was trained by this project (a
    tiny model or a run of this package), on what text, and what that means for its results."""
    from ..models import tiny

    if name.startswith("tiny-"):
        return (f"`{name}` is a toy model trained for seconds on {len(tiny.corpus_lines())} sentences written for this "
                "project: its chains exercise the code and say nothing about any real model.")
    if not name.startswith("trained:"):
        return ""
    run = name.removeprefix("trained:").partition("@")[0]
    try:
        d = describe(run)
    except (OSError, KeyError, ValueError, StopIteration):
        return f"`{name}` was trained by this project (its manifest could not be read)."
    corpus = PRESETS[run].corpus if run in PRESETS else run
    what = CORPUS_WORDS.get(corpus, "text")
    return (f"`{name}` was trained by this project ({d['steps']:,} steps from the {d['chosen start']} start) on "
            f"{d['training documents']:,} documents ({d['training tokens']:,} tokens) of {what}: where its chains "
            "settle is a property of this model and that corpus, not of English at large.")
