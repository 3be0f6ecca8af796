"""The low-temperature landscape of a Glauber chain, read from the model's own scores (docs/science.md,
chapter 3: the landscape).

A move that writes token a at site i has cost max_b s_i(b) - s_i(a) >= 0, and its probability
behaves as exp(-cost / T) as T falls. From the costs alone:

- ``zerocost``: the wells (:func:`wells`), bottom classes of the graph of zero-cost moves (fixed
  points and zero-cost cycles alike);
- ``wgraph``: W-graphs over the wells by minimum spanning arborescences (networkx's Edmonds
  algorithm), and Gamma = W(1) - W(2), the exponent of the relaxation time;
- ``enumerated``: the landscape of a chain whose states can all be listed (the two-token chains of
  :mod:`textglauber.phase`), exact;
- ``explore``: the landscape of a longer chain, from wells found by descent and Dijkstra's search
  between them (not certified complete);
- ``check``: T ln t_rel against Gamma on enumerated chains, at temperatures chosen from Gamma;
- ``growth``: whether Gamma grows with n (a verdict on heights, with parity named);
- ``tables``: the chapter's landscape tables, built from the above.
"""
from __future__ import annotations

from .enumerated import Landscape, landscape, two_token_landscape, two_token_moves
from .explore import Moves, Searched, descend, search
from .zerocost import bottom_classes, wells
from .wgraph import deepest_root, forest_weight, gamma, least_weight

__all__ = ["Landscape", "Moves", "Searched", "bottom_classes", "deepest_root", "descend", "forest_weight", "gamma",
           "landscape", "least_weight", "search", "two_token_landscape", "two_token_moves", "wells"]
