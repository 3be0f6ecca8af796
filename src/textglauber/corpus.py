"""Seed passages: texts from a named corpus, cut into token windows of length n."""
from __future__ import annotations

import numpy as np
import torch


def _tiny() -> list[str]:
    from .tiny import corpus_lines

    return corpus_lines()


def _msmarco(limit: int = 5000) -> list[str]:
    from datasets import load_dataset

    ds = load_dataset("microsoft/ms_marco", "v1.1", split="validation", streaming=True)
    out = []
    for row in ds:
        out.extend(row["passages"]["passage_text"])
        if len(out) >= limit:
            break
    return out


SOURCES = {"tiny": _tiny, "msmarco": _msmarco}


def texts(source: str) -> list[str]:
    if source not in SOURCES:
        raise ValueError(f"unknown corpus {source!r}; known: {sorted(SOURCES)}")
    return SOURCES[source]()


def windows(tokenizer, source: str, n: int, count: int, seed: int, vocab=None) -> torch.Tensor:
    """``count`` windows of n content tokens (no special tokens), as a (count, n) tensor.

    Texts at least n tokens long give their first n tokens; shorter texts are joined into
    one stream (in a seeded order) and cut at random offsets. With ``vocab``, only windows
    whose tokens all lie in the allowed vocabulary are kept.
    """
    if n < 1 or count < 1:
        raise ValueError("n and count must be positive")
    rng = np.random.default_rng(seed)
    docs = texts(source)
    enc = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in docs]
    long = [e[:n] for e in enc if len(e) >= n]
    order = rng.permutation(len(enc))
    stream = [tok for k in order for tok in enc[k]]
    cand = list(long)
    if len(cand) < count and len(stream) >= n:
        cand += [stream[s:s + n] for s in rng.integers(0, len(stream) - n + 1, size=4 * count)]
    if vocab is not None:
        cand = [c for c in cand if bool(vocab.contains(torch.tensor(c)).all())]
    if not cand:
        raise ValueError(f"corpus {source!r} gives no window of {n} allowed tokens")
    pick = rng.choice(len(cand), size=count, replace=len(cand) < count)
    return torch.tensor([cand[k] for k in pick], dtype=torch.long)
