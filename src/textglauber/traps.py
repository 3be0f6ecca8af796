"""Traps: metastable windows of long chains, classified by their score margins (SPEC section 6).

Along a recorded trajectory, c_r = 1 - cos(E(x_r), E(x_{r-1})) is the drift between
consecutive records. Its rolling mean over a window of ``window`` steps falling below
``threshold`` marks a trap; a trap is a maximal run of such windows. Each trap has a start,
an end, a duration and a representative state (the most frequent state inside it).

The representative state's per-position score gaps g_i = s_i(x_i) - max_{a != x_i} s_i(a)
classify it: *perfect* when every g_i > 0 (the margin assumption of the bounds chapter
holds, with Delta = min g_i), *approximate* otherwise (some site is not the model's argmax,
yet the chain stays). For a perfect trap the margin bound gives a predicted mean escape time
of at least 1 / ((|A| - 1) e^{-Delta/T}) steps, which is below one step (vacuous) whenever
(|A| - 1) e^{-Delta/T} >= 1.
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from . import margins


def consecutive_drift(emb: np.ndarray) -> np.ndarray:
    """1 - cos between consecutive recorded embeddings (R, B, d) -> (R, B), first row 0."""
    e = emb / np.maximum(np.linalg.norm(emb, axis=-1, keepdims=True), 1e-12)
    c = np.zeros(e.shape[:2])
    c[1:] = 1.0 - np.einsum("rbd,rbd->rb", e[1:], e[:-1])
    return c


def detect(steps: np.ndarray, c: np.ndarray, window: int, threshold: float) -> list[tuple[int, int]]:
    """Traps along one chain: maximal runs where the rolling mean of c over ``window`` steps is
    below ``threshold``. The union of a run's windows is trimmed of the transitions at its edges
    whose own drift is at or above the threshold (they are moves into or out of the trap).
    Returns (start step, end step) pairs."""
    steps = np.asarray(steps)
    if len(steps) < 2:
        return []
    every = int(steps[1] - steps[0])
    w = max(1, int(round(window / every)))
    if len(c) <= w:
        return []
    csum = np.concatenate([[0.0], np.cumsum(c[1:])])          # c[0] is no transition
    roll = (csum[w:] - csum[:-w]) / w                          # mean of c over records (k-w, k]
    below = roll < threshold
    traps, k = [], 0
    while k < len(below):
        if below[k]:
            j = k
            while j + 1 < len(below) and below[j + 1]:
                j += 1
            lo, hi = k, j + w                                  # records covered by the run's windows
            while lo < hi and c[lo + 1] >= threshold:          # trim the moves at either edge
                lo += 1
            while hi > lo and c[hi] >= threshold:
                hi -= 1
            if hi > lo:
                traps.append((int(steps[lo]), int(steps[hi])))
            k = j + 1
        else:
            k += 1
    return traps


def catalogue(run, emb_states: np.ndarray, scorer, *, window: int, threshold: float, tokenizer=None) -> pd.DataFrame:
    """Every trap of every chain of a :class:`~textglauber.chain.ChainRun`, with margins and bounds."""
    c = consecutive_drift(emb_states)
    rows = []
    T = run.spec.temperature
    a_size = scorer.vocab.size
    for b in range(run.states.shape[1]):
        for start, end in detect(run.steps, c[:, b], window, threshold):
            inside = (run.steps >= start) & (run.steps <= end)
            counts = Counter(tuple(s) for s in run.states[inside, b])
            rep, hits = counts.most_common(1)[0]
            gaps = margins.score_gaps(scorer, np.array([rep]))[0]
            delta = float(gaps.min())
            perfect = bool((gaps > 0).all())
            esc = margins.escape_bound(delta, a_size, T) if perfect else np.inf
            rows.append({"chain": b, "start": start, "end": end, "duration": end - start,
                         "censored": bool(end >= run.steps[-1]),      # still trapped when the run ended
                         "state": list(rep), "share of records": hits / int(inside.sum()),
                         "text": tokenizer.decode(list(rep)) if tokenizer is not None else "",
                         "mean gap": float(gaps.mean()), "min gap": delta, "all argmax": perfect,
                         "type": "perfect" if perfect else "approximate",
                         "escape bound per step": esc,
                         "predicted escape time (steps)": (1.0 / esc) if perfect else 0.0})
    return pd.DataFrame(rows)
