"""Wells of a chain's zero-temperature dynamics (docs/science.md, chapter 3: the landscape).

As T falls, a Glauber step only makes moves of cost zero: it writes a site's highest-scoring token.
A *well* is a set of states that these moves cannot leave and inside which they can go from any
state to any other: a bottom class (a strongly connected component with no zero-cost move out) of
the graph of zero-cost moves. A fixed point (every site already holds its argmax) is a well of one
state; a set of states that the zero-cost moves cycle through (ties, or a site's argmax that
depends on another's in a loop) is a well of several. Detecting wells only as fixed points would
miss the second kind, and a chain with no fixed point at all still has at least one well.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .wgraph import TIE


def zero_cost_graph(states: int, src, dst, cost) -> sp.csr_matrix:
    """The (states x states) adjacency of the moves of cost at most :data:`TIE`, as ones."""
    src, dst, cost = (np.asarray(a) for a in (src, dst, cost))
    keep = (cost <= TIE) & (src != dst)
    ones = np.ones(int(keep.sum()), np.int8)
    return sp.csr_matrix((ones, (src[keep], dst[keep])), shape=(states, states))


def bottom_classes(graph: sp.csr_matrix) -> list[np.ndarray]:
    """The bottom strongly connected classes of a directed graph, each as sorted state indices,
    ordered by their smallest state."""
    _, label = connected_components(graph, directed=True, connection="strong")
    coo = graph.tocoo()
    leaves = label[coo.row] != label[coo.col]
    left = np.zeros(label.max() + 1, bool)
    left[label[coo.row[leaves]]] = True
    classes = [np.flatnonzero(label == c) for c in np.flatnonzero(~left)]
    return sorted(classes, key=lambda members: int(members[0]))


def wells(states: int, src, dst, cost) -> list[np.ndarray]:
    """The wells of a chain given by its moves (``src`` -> ``dst`` at ``cost``): the bottom classes
    of its zero-cost moves (module docstring)."""
    return bottom_classes(zero_cost_graph(states, src, dst, cost))
