"""The trap catalogue: metastable windows of recorded chains, classified by their score margins
(docs/science.md, chapter 5). The perfect traps searched for from the scores, before any chain
runs, are :mod:`textglauber.traps.finder`'s; the catalogue's sentences and plots are
:mod:`textglauber.pages.traps`'s.

**The statistic, per step.** The drift of step u is c_u = 1 - cos(E(x_u), E(x_{u-1})) (0 when
the step rewrote the token already there). A window of ``window`` consecutive steps is quiet
when the mean of c over it is below ``threshold``, a rate per step. A trap is a maximal stretch
of steps covered by quiet windows (overlapping windows join, so traps never overlap), less a
prefix and a suffix: those whose drift in excess of the threshold, sum_u (c_u - threshold), is
largest (the moves into and out of it; a cut-off edge drifts at least at the threshold rate).
A trap must still span at least one window after that trimming: shorter stays, left over where a
barely quiet stretch drifts near the threshold rate throughout, are not reported. Window, threshold and the trap's start, end and duration
are all in steps, so none of them depends on how often the chain was recorded.

**What records give.** A run records the state every ``r`` steps. The drift of the r steps
between two records, sum_u c_u, is replaced by the drift between the records themselves,
D = 1 - cos(E(x_s), E(x_{s+r})), spread evenly over those steps (D / r per step); the rolling
mean and the trimming then run at step resolution (:func:`step_drift`). This is exact when at
most one step of the interval changed the state (always when r = 1); when several did, D is
only an estimate of their summed drift and bounds it neither way in general (a chain that
leaves and comes back has D = 0; several small turns in one direction can give a D above
their sum, since 1 - cos grows like the squared angle). Where the interval's move was made
inside it is unknown, so trap edges are known to r steps: they are reported at records, the
first and last record inside the stretch. Recording the same chain every step and every r
steps therefore finds the same traps up to the r-step resolution and these estimates (the
tests check this on one chain recorded both ways).

Each trap has a start, an end, a duration and a representative state (the most frequent
recorded state inside it). Two flags say where a duration is cut by the run rather than by the
chain: ``censored`` (still trapped at the last record, so the duration is a lower bound) and
``present at step 0`` (trapped from the first record: the chain may have been seeded in it,
and the time before the run is not counted either). The representative state's per-position
score gaps g_i = s_i(x_i) - max_{a != x_i} s_i(a) classify it: *perfect* when every g_i > 0
(the margin assumption of the bounds chapter holds, with Delta = min g_i), *approximate*
otherwise (some site is not the model's argmax, yet the chain stays). For a perfect trap the
margin bound gives a predicted mean escape time of at least 1 / ((|A| - 1) e^{-Delta/T})
steps, which is below one step (vacuous) whenever (|A| - 1) e^{-Delta/T} >= 1 (:func:`vacuous`
counts those); an approximate trap has no margin and no bound (NaN in both columns). The
margins are read at the representative state alone, so the bound is on the chain's holding time
in that one state; the trap's duration is its stay in a basin of near-copies (the drift stays
low while it moves among them), so the two do not time the same exit.
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from .. import margins, vocabulary

COLUMNS = ["chain", "start", "end", "duration", "censored", "present at step 0", "state", "share of records", "text",
           "mean gap", "min gap", "all argmax", "type", "escape bound per step", "predicted escape time (steps)"]
_EMPTY_DTYPES = {"chain": int, "start": int, "end": int, "duration": int, "censored": bool, "present at step 0": bool,
                 "share of records": float, "mean gap": float, "min gap": float, "all argmax": bool,
                 "escape bound per step": float, "predicted escape time (steps)": float}


def consecutive_drift(emb: np.ndarray) -> np.ndarray:
    """1 - cos between consecutive recorded embeddings (R, B, d) -> (R, B), first row 0."""
    e = emb / np.maximum(np.linalg.norm(emb, axis=-1, keepdims=True), 1e-12)
    c = np.zeros(e.shape[:2])
    c[1:] = 1.0 - np.einsum("rbd,rbd->rb", e[1:], e[:-1])
    return c


def step_drift(steps: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Per-step drift from the drift between consecutive records: entry u - steps[0] - 1 is step u's.

    ``c[k]`` is the drift from the record at ``steps[k-1]`` to the one at ``steps[k]`` (``c[0]`` is
    unused); it is spread evenly over the steps between them (exact when at most one of them
    changed the state)."""
    steps = np.asarray(steps, dtype=np.int64)
    gaps = np.diff(steps)
    if (gaps <= 0).any():
        raise ValueError("record steps must increase")
    return np.repeat(np.asarray(c, dtype=float)[1:] / gaps, gaps)


def detect(steps: np.ndarray, c: np.ndarray, window: int, threshold: float) -> list[tuple[int, int]]:
    """Traps along one chain: maximal stretches of steps covered by windows of ``window`` steps whose
    mean per-step drift is below ``threshold`` (a rate per step; overlapping windows join), less the
    prefix and suffix that drift most in excess of the threshold; what is left must span at least
    ``window`` steps (a shorter stay is not resolved by the window). ``c`` is the drift between
    consecutive records (:func:`consecutive_drift`). Returns (start step, end step) pairs: the first
    and last record inside each stretch."""
    steps = np.asarray(steps, dtype=np.int64)
    window = int(window)
    if window < 1:
        raise ValueError("the window must be at least one step")
    if len(steps) < 2:
        return []
    per = step_drift(steps, c)                                 # per[o]: drift from state offset o to o + 1
    if len(per) < window:
        return []
    csum = np.concatenate([[0.0], np.cumsum(per)])
    roll = (csum[window:] - csum[:-window]) / window           # roll[k]: mean over the window of states k .. k+window
    starts = np.flatnonzero(roll < threshold)
    cover = np.zeros(len(per) + 2, dtype=np.int64)             # how many such windows hold state offset o
    np.add.at(cover, starts, 1)
    np.add.at(cover, starts + window + 1, -1)
    held = np.cumsum(cover)[: len(per) + 1] > 0
    edges = np.flatnonzero(np.diff(np.concatenate([[0], held.astype(np.int8), [0]])))
    offsets = steps - steps[0]
    traps = []
    excess = np.concatenate([[0.0], np.cumsum(per - threshold)])      # drift beyond the threshold up to offset o
    for lo, hi in zip(edges[::2], edges[1::2] - 1):            # states lo .. hi
        # cut the prefix and then the suffix with the largest drift in excess of the threshold (each
        # drifts at least at the threshold rate on average): the moves into and out of the trap
        lo = lo + int(np.argmax(excess[lo:hi + 1]))
        hi = hi - int(np.argmin(excess[lo:hi + 1][::-1]))
        first = int(np.searchsorted(offsets, lo, side="left"))         # first record at or after lo
        last = int(np.searchsorted(offsets, hi, side="right")) - 1     # last record at or before hi
        if last > first and steps[last] - steps[first] >= window:        # at least one window long
            traps.append((int(steps[first]), int(steps[last])))
    return traps


def catalogue(run, emb_states: np.ndarray, scorer, *, window: int, threshold: float, tokenizer=None) -> pd.DataFrame:
    """Every trap of every chain of a :class:`~textglauber.chain.ChainRun`, with margins and bounds.

    One row per trap, with the columns of ``COLUMNS`` even when no trap is found. ``window`` in
    steps and ``threshold`` per step, as in :func:`detect`."""
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
            esc = margins.escape_bound(delta, a_size, T) if perfect else np.nan     # no margin, no bound
            rows.append({"chain": b, "start": start, "end": end, "duration": end - start,
                         "censored": bool(end >= run.steps[-1]),      # still trapped when the run ended
                         "present at step 0": bool(start <= run.steps[0]),   # trapped from the first record
                         "state": list(rep), "share of records": hits / int(inside.sum()),
                         "text": vocabulary.decode(tokenizer, rep) if tokenizer is not None else "",
                         "mean gap": float(gaps.mean()), "min gap": delta, "all argmax": perfect,
                         "type": "perfect" if perfect else "approximate",
                         "escape bound per step": esc,
                         "predicted escape time (steps)": (1.0 / esc) if perfect else np.nan})
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out if rows else out.astype(_EMPTY_DTYPES)


def vacuous(cat: pd.DataFrame) -> tuple[int, int]:
    """(perfect traps whose margin bound guarantees an escape time below one step, perfect traps).

    Only a perfect trap has a margin, so only a perfect trap has a bound to be vacuous; an
    approximate trap is counted in neither number (catalogues written before its predicted
    escape time was left empty hold 0 there, which must not read as a vacuous bound)."""
    if not len(cat):
        return 0, 0
    perfect = cat[cat["type"] == "perfect"]
    return int((perfect["predicted escape time (steps)"] < 1).sum()), len(perfect)


def trajectories(run) -> pd.DataFrame:
    """Every recorded state of a chain run, one row per (chain, record): chain, step and the state
    as a list of token ids."""
    _, chains, n = run.states.shape
    return pd.DataFrame({"chain": np.repeat(np.arange(chains), len(run.steps)), "step": np.tile(run.steps, chains),
                         "state": [list(s) for s in run.states.transpose(1, 0, 2).reshape(-1, n)]})
