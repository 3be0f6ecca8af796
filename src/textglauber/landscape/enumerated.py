"""The landscape of a chain whose states can all be listed: its wells, the least costs between
them, and the exponent Gamma of its relaxation time (docs/science.md, chapter 3: the landscape).

A chain is given by its moves: arrays ``src``, ``dst`` and ``cost`` over state indices, one entry
per single-site change, with cost = max_b s_i(b) - s_i(new token) >= 0 (so the move's probability
behaves as exp(-cost / T)). :func:`two_token_moves` builds them for the two-token chains of
:mod:`textglauber.phase`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from ..phase.states import Scores, context_of
from .zerocost import wells as find_wells
from .wgraph import deepest_root, gamma

ZERO = 1e-300
"""A zero-cost move is stored with this weight: a sparse graph drops entries equal to zero, and a
weight this small changes no sum that matters."""


@dataclass
class Landscape:
    """Wells (each an array of state indices), the least costs ``V[a, b]`` from well a to well b
    over paths that meet no third well, the exponent ``gamma`` (NaN with one well), the ground well
    (``ground``: the root of the least 1-root W-graph), and how much of the space was opened."""

    wells: list
    V: np.ndarray
    gamma: float
    ground: int
    opened: int
    complete: bool


def two_token_moves(scores: Scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every flip of the two-token chain on ``scores``: from state x, writing the other token at
    site i costs max(0, s(current) - s(other)), the logit gap it has to climb."""
    n = scores.n
    states = np.arange(2 ** n)
    src, dst, cost = [], [], []
    for i in range(n):
        rows = scores.logits[i, context_of(states, i, n)]            # (S, 2)
        bit = (states >> (n - 1 - i)) & 1
        here = np.take_along_axis(rows, bit[:, None], 1)[:, 0]
        there = np.take_along_axis(rows, 1 - bit[:, None], 1)[:, 0]
        src.append(states)
        dst.append(states ^ (1 << (n - 1 - i)))
        cost.append(np.maximum(here - there, 0.0))
    return np.concatenate(src), np.concatenate(dst), np.concatenate(cost)


def between_wells(states: int, src, dst, cost, wells: list) -> np.ndarray:
    """V[a, b]: the least total cost from well a to well b over paths that stop at the first well
    they meet (the other wells absorb), by Dijkstra from all of a's states at once."""
    member = np.full(states, -1)
    for k, w in enumerate(wells):
        member[w] = k
    m = len(wells)
    V = np.full((m, m), np.inf)
    weight = np.maximum(np.asarray(cost, float), ZERO)
    for a, w in enumerate(wells):
        keep = (member[src] < 0) | (member[src] == a)               # no move out of another well
        graph = sp.csr_matrix((weight[keep], (src[keep], dst[keep])), shape=(states, states))
        dist = dijkstra(graph, directed=True, indices=w, min_only=True)
        for b, z in enumerate(wells):
            if b != a:
                V[a, b] = float(dist[z].min())
    V[V <= 10 * ZERO * states] = 0.0
    return V


def landscape(states: int, src, dst, cost) -> Landscape:
    """Wells, inter-well costs and Gamma of a chain listed in full."""
    src, dst, cost = np.asarray(src), np.asarray(dst), np.asarray(cost, float)
    ws = find_wells(states, src, dst, cost)
    V = between_wells(states, src, dst, cost, ws)
    ground = deepest_root(V) if len(ws) > 1 else 0
    return Landscape(ws, V, gamma(V), ground, states, True)


def two_token_landscape(scores: Scores) -> Landscape:
    """The landscape of the two-token chain on a score table (every state listed)."""
    return landscape(2 ** scores.n, *two_token_moves(scores))
