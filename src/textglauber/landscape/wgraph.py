"""W-graphs over wells, and the relaxation exponent Gamma = W(1) - W(2) (docs/science.md, chapter 3:
the landscape).

A chain whose one-step probabilities behave as exp(-c / T) as T falls, with move costs c >= 0, is
reduced to its wells and the least costs V(a, b) of going from well a to well b. A *W-graph* with
root set R is a set of arrows, one leaving each well outside R and none leaving a well of R, with
no cycle: every well reaches R. Its weight is the sum of V over its arrows, and W(k) is the least
weight over root sets of k wells. Wentzell's theorem on the eigenvalues of such matrices (also
non-symmetric ones) gives the spectral gap as exp(-(W(1) - W(2)) / T) to leading order, so

    Gamma = W(1) - W(2) = lim_{T -> 0} T ln t_rel.

The least W-graph with a fixed root set is a minimum spanning arborescence once every arrow is
turned around and the roots hang from one extra node; networkx's Edmonds algorithm finds it, so no
search of our own is written here. Costs are treated as exact: :data:`TIE` only guards the float
sums of :func:`gamma`.
"""
from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np

TIE = 1e-9
"""Costs are float32 scores summed in float64: differences below this are zero."""

MAX_PAIRS = 5000
"""Root pairs :func:`least_weight` tries for W(2) (one arborescence each) before it gives up: with m
wells there are m (m - 1) / 2 pairs, so this allows about 100 wells."""


def forest_weight(V: np.ndarray, roots) -> float:
    """The least weight of a W-graph on the wells of ``V`` (an (m, m) matrix of least costs, inf
    where there is no path, the diagonal ignored) whose root set is ``roots``: inf when some well
    cannot reach a root."""
    V = np.asarray(V, float)
    m, roots = len(V), set(int(r) for r in roots)
    if not roots or not roots <= set(range(m)):
        raise ValueError(f"roots must be a non-empty subset of the {m} wells, got {sorted(roots)}")
    if len(roots) == m:
        return 0.0
    g = nx.DiGraph()
    top = "root"
    g.add_node(top)
    g.add_nodes_from(range(m))
    for r in roots:
        g.add_edge(top, r, weight=0.0)
    for a in range(m):
        if a in roots:
            continue                                 # no arrow leaves a root
        for b in range(m):
            if b != a and math.isfinite(V[a, b]):
                g.add_edge(b, a, weight=float(V[a, b]))   # arrow a -> b, turned around
    try:
        tree = nx.minimum_spanning_arborescence(g, attr="weight", preserve_attrs=True)
    except nx.NetworkXException:
        return math.inf
    return float(sum(w for _, _, w in tree.edges(data="weight")))


def least_weight(V: np.ndarray, k: int) -> float:
    """W(k): the least W-graph weight over every root set of ``k`` wells."""
    m = len(V)
    if not 1 <= k <= m:
        raise ValueError(f"k = {k}: must be between 1 and the number of wells, {m}")
    sets = itertools.combinations(range(m), k)
    if math.comb(m, k) > MAX_PAIRS:
        raise ValueError(f"{math.comb(m, k)} root sets of {k} among {m} wells: more than {MAX_PAIRS}")
    return min(forest_weight(V, r) for r in sets)


def gamma(V: np.ndarray) -> float:
    """Gamma = W(1) - W(2), the exponent of the relaxation time at low temperature; NaN with one well
    (the chain then relaxes without a barrier between wells) and inf when the wells do not
    communicate (then the chain is not irreducible at T -> 0)."""
    V = np.asarray(V, float)
    if len(V) < 2:
        return math.nan
    w1, w2 = least_weight(V, 1), least_weight(V, 2)
    if not math.isfinite(w1):
        return math.inf
    return max(w1 - w2, 0.0) if abs(w1 - w2) > TIE else 0.0


def deepest_root(V: np.ndarray) -> int:
    """The well that roots the least 1-root W-graph (the ground well: the one that holds the
    stationary mass as T -> 0); the first on ties."""
    m = len(V)
    w = [forest_weight(V, [r]) for r in range(m)]
    return int(np.argmin(w))
