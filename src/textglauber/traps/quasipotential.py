"""The cost of leaving a perfect trap at low temperature, from the model's own scores (docs/science.md,
chapter 5: escape exponents).

At temperature T a Glauber step picks site i (chance 1/n) and writes token a there with chance
softmax(s_i(. | x_-i) / T)(a), which behaves as exp(-c / T) with the *move cost*

    c(x -> x with a at i) = max_b s_i(b | x_-i) - s_i(a | x_-i)   (>= 0; 0 for the argmax).

The chain need not be reversible (a masked LM's conditionals need not come from one joint law), so
there is no energy whose differences would be barriers. What takes the place of a barrier is the
*quasi-potential* of Freidlin and Wentzell: the least total cost of a path. For a trap x* and an
escape distance k,

    V_k = min over paths x* = y_0, y_1, ..., y_m with d(y_j, x*) < k for j < m and d(y_m, x*) >= k
          of the sum of the moves' costs.

:func:`barrier` finds it by Dijkstra's search over the states it reaches (a move's cost is never
negative), scoring a state's n rows only when the search expands it; the rows go through the
caller's :class:`~textglauber.traps.escape.RowMemo`, so the escape chains and the search share them.
A greedy path (cheapest move at a site not yet changed, until k sites differ) bounds V_k from above
before the search starts, and the search never opens a state dearer than that bound. V_1 is the
trap's margin, the smallest gap between a site's argmax and its runner-up.

**When V_k is the exponent.** As T falls, a step makes only the moves of cost zero. A *well* is
a bottom class of the graph of those moves (:mod:`textglauber.landscape.zerocost`): a set of states that
zero-cost moves cannot leave and inside which they go from any member to any other. A fixed point
(every move costs more than zero) is a well of one state; states that the zero-cost moves cycle
through are one well of several. If the ball {d < k} holds no well other than x*, the escape time
from x* grows as exp(V_k / T) as T falls. A well met on the way changes that: the chain can rest
in it, and the exponent follows the cycle structure of Freidlin and Wentzell. :func:`barrier` then
reduces the chain to its wells (x* and those the search met below V_k, each searched from all its
members at once), with the least path costs between them that avoid the other wells, and takes the
exponent from the W-graph formula (:func:`cycle_exponent`, Freidlin and Wentzell, chapter 6). The
search knows the moves of the states it expanded only, so a class counts as a well only when all
its members were expanded and none of their zero-cost moves leads elsewhere (a zero-cost move out
of the ball makes no well). At k = 1 and k = 2 no other well can exist (a state one move from x*
can move back at no cost), so there V_k is the exponent.
"""
from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import torch

from ..landscape.zerocost import bottom_classes
from .escape import RowMemo, site_scores

MAX_STATES = 500          # states one search may open (n rows each at most) before it reports a lower bound
MAX_WELLS = 6               # wells the W-graph formula enumerates (x* included): 6^6 graphs at most
TIE = 1e-9                  # costs within this of each other are equal (float32 scores, float64 sums)


@dataclass
class Move:
    site: int
    old: int                # token id before the move
    new: int                # token id after it
    cost: float

    def text(self, decode=str) -> str:
        return f"{self.site}:{decode(self.old)}->{decode(self.new)} ({self.cost:.3f})"


@dataclass
class Barrier:
    """The least cost of leaving a trap's Hamming ball of radius k (:func:`barrier`)."""

    k: int
    value: float             # V_k; a lower bound where ``finished`` is false
    finished: bool           # the search reached distance k within its budget
    upper: float             # the greedy path's cost, V_k's upper bound
    path: list[Move]         # the cheapest path out (empty where not finished)
    wells: int               # wells (bottom classes) other than the trap's that the search met below V_k
    exponent: float          # the low-temperature exponent: V_k with no other well, else the W-graph value
    case: str                # "one well", "several wells", "unfinished" (a search ran out of its budget)
                             # or "too many wells" (more than MAX_WELLS - 1 others: the formula is not run)
    rows: int                # rows the model scored for these searches (rows already in the memo are free)
    states: int              # states the searches expanded
    well_states: list[tuple] = field(default_factory=list)     # per well, its member states (tuples)

    def path_text(self, decode=str) -> str:
        return "; ".join(m.text(decode) for m in self.path)


def move_costs(scorer, state: tuple) -> np.ndarray:
    """(n, |A|) the cost of writing each allowed token at each site of ``state``."""
    rows = site_scores(scorer, torch.tensor(state)).numpy()
    return rows.max(-1, keepdims=True) - rows


def _distance(x: tuple, center: tuple) -> int:
    return sum(a != b for a, b in zip(x, center))


def greedy_bound(scorer, center: tuple, source: tuple, k: int) -> float:
    """A path's cost from ``source`` to distance k from ``center``: at each step the cheapest move that
    changes a site where the state still agrees with ``center``. An upper bound of V_k from source."""
    ids = scorer.vocab.ids.tolist()
    pos = {t: j for j, t in enumerate(ids)}
    x, total = tuple(source), 0.0
    while _distance(x, center) < k:
        c = move_costs(scorer, x)
        same = [i for i in range(len(x)) if x[i] == center[i]]
        for i in same:
            c[i, pos[center[i]]] = math.inf
        c = c[same]
        r, a = np.unravel_index(int(np.argmin(c)), c.shape)
        total += float(c[r, a])
        y = list(x)
        y[same[r]] = ids[a]
        x = tuple(y)
    return total


@dataclass
class _Search:
    cost: dict                # settled state -> least cost from the source
    parent: dict              # settled state -> (previous state, Move)
    exit: tuple | None        # the first state at distance >= k that was settled
    zero: dict                # expanded state -> the states its zero-cost moves reach
    frontier: float           # the least cost not yet settled when the search stopped
    expanded: int


def _search(scorer, center: tuple, sources, k: int, bound: float, absorbing=frozenset(),
            targets=frozenset(), max_states: int = 20_000) -> _Search:
    """Dijkstra from the states ``sources`` (each at cost 0) over the ball {d(., center) < k}, moves
    dearer than ``bound`` in total never queued. Stops when the way out is settled and every state of
    ``targets`` is settled (or cannot be within the bound), or after ``max_states`` expansions. States in ``absorbing`` are
    settled but not expanded (paths that avoid them)."""
    ids = scorer.vocab.ids.tolist()
    pos = {t: j for j, t in enumerate(ids)}
    cost, parent, zero = {}, {}, {}
    sources = [tuple(x) for x in sources]
    heap = [(0.0, j, x, None, None) for j, x in enumerate(sources)]
    tick, exit_, expanded = itertools.count(len(sources)), None, 0
    left = set(targets)
    while heap:
        c, _, x, prev, move = heapq.heappop(heap)
        if x in cost:
            continue
        if expanded >= max_states:
            return _Search(cost, parent, exit_, zero, c, expanded)
        cost[x], parent[x] = c, (prev, move)
        left.discard(x)
        if _distance(x, center) >= k:
            exit_ = exit_ or x
            if not left:
                break
            continue
        if x in absorbing and x not in sources:
            if exit_ is not None and not left:
                break
            continue
        moves = move_costs(scorer, x)
        expanded += 1
        moves[np.arange(len(x)), [pos[t] for t in x]] = math.inf
        zero[x] = [x[:i] + (ids[a],) + x[i + 1:] for i, a in zip(*np.nonzero(moves <= TIE))]
        for i, a in zip(*np.nonzero(c + moves <= bound + TIE)):
            y = x[:i] + (ids[a],) + x[i + 1:]
            if y not in cost:
                heapq.heappush(heap, (c + float(moves[i, a]), next(tick), y, x, Move(int(i), x[i], ids[a], float(moves[i, a]))))
        if exit_ is not None and not left:
            break
    return _Search(cost, parent, exit_, zero, heap[0][0] if heap else math.inf, expanded)


def search_wells(zero: dict) -> list[tuple]:
    """The wells among the expanded states of a search (``zero``: each one's zero-cost moves): the
    bottom classes of the zero-cost graph whose members were all expanded, each as a tuple of
    states in the order first met."""
    order = list(zero)
    for ys in zero.values():
        order += [y for y in ys if y not in zero]
    index = {x: j for j, x in enumerate(dict.fromkeys(order))}
    src = [index[x] for x, ys in zero.items() for _ in ys]
    dst = [index[y] for ys in zero.values() for y in ys]
    states = list(index)
    graph = sp.csr_matrix((np.ones(len(src), np.int8), (src, dst)), shape=(len(states), len(states)))
    return [tuple(states[j] for j in c) for c in bottom_classes(graph) if all(states[j] in zero for j in c)]


def _path(search: _Search, end: tuple) -> list[Move]:
    out, x = [], end
    while search.parent[x][0] is not None:
        prev, move = search.parent[x]
        out.append(move)
        x = prev
    return out[::-1]


def barrier(scorer, trap, k: int, max_states: int = MAX_STATES) -> Barrier:
    """V_k of ``trap`` ((n,) token ids) and the low-temperature exponent of leaving its ball of radius
    k (module docstring). ``scorer`` is wrapped in a :class:`RowMemo` unless it is one."""
    memo = scorer if isinstance(scorer, RowMemo) else RowMemo(scorer)
    center = tuple(torch.as_tensor(trap).flatten().tolist())
    if not 1 <= k <= len(center):
        raise ValueError(f"k = {k}: must be in [1, n = {len(center)}] (the escape distance from the trap)")
    rows0 = memo.rows
    upper = greedy_bound(memo, center, center, k)
    s = _search(memo, center, [center], k, upper, max_states=max_states)
    expanded = s.expanded
    found = [w for w in search_wells(s.zero) if center not in w]
    if s.exit is None:
        return Barrier(k, s.frontier, False, upper, [], len(found), math.nan, "unfinished", memo.rows - rows0,
                       expanded, found)
    value = s.cost[s.exit]
    wells = [w for w in found if s.cost[w[0]] <= value + TIE]
    exponent, case = value, "one well"
    if len(wells) >= MAX_WELLS:
        exponent, case = math.nan, "too many wells"
    elif wells:
        exponent, extra = _reduced_exponent(memo, center, k, [(center,), *wells], max_states)
        expanded += extra
        case = "several wells" if math.isfinite(exponent) else "unfinished"
        exponent = exponent if math.isfinite(exponent) else math.nan
    return Barrier(k, value, True, upper, _path(s, s.exit), len(wells), exponent, case, memo.rows - rows0,
                   expanded, wells)


def _reduced_exponent(memo, center: tuple, k: int, wells: list[tuple], max_states: int) -> tuple[float, int]:
    """The W-graph exponent of the chain reduced to ``wells`` (each a tuple of member states;
    wells[0] the trap's) and the way out: from each well (all its members at cost 0), the least cost
    to the way out and to each other well over paths that avoid the rest. A cost the search does not
    reach within twice the well's greedy bound is taken as out of play (infinite)."""
    m, expanded = len(wells), 0
    V = np.full((m, m + 1), math.inf)              # column m: the way out
    for a, w in enumerate(wells):
        bound = 2 * greedy_bound(memo, center, w[0], k)
        others = frozenset(z for b, ws in enumerate(wells) if b != a for z in ws)
        s = _search(memo, center, w, k, bound, absorbing=others, targets=others, max_states=max_states)
        expanded += s.expanded
        if s.exit is not None:
            V[a, m] = s.cost[s.exit]
        for b, ws in enumerate(wells):
            reached = [s.cost[z] for z in ws if z in s.cost]
            if b != a and reached:
                V[a, b] = min(reached)
    return cycle_exponent(V), expanded


def cycle_exponent(V: np.ndarray) -> float:
    """lim T log E(exit time from well 0) for a chain reduced to m wells and one way out, from the
    (m, m + 1) least path costs V (column m: the way out; inf: no such path). By the W-graph formula
    of Freidlin and Wentzell (chapter 6), with the graphs enumerated: the least total cost of a
    forest in which every well leads out, less the least over wells y of a forest in which every
    well other than y leads out or to y, and well 0 leads to y."""
    m = V.shape[0]
    num = _least_forest(V, list(range(m)), sinks=(m,), leads_to=None)
    den = min(_least_forest(V, [a for a in range(m) if a != y], sinks=(m, y), leads_to=(0, y)) for y in range(m))
    return float(num - den)


def _least_forest(V, nodes, sinks, leads_to) -> float:
    """The least sum of V[a, choice(a)] over maps ``choice`` of ``nodes`` into wells or the way out
    with no cycle (every node reaches a sink); where ``leads_to`` = (a, y), node a must reach y."""
    m = V.shape[0]
    best = math.inf
    if not nodes:
        return 0.0 if leads_to is None or leads_to[0] == leads_to[1] else math.inf
    options = [[b for b in range(m + 1) if b != a and np.isfinite(V[a, b])] for a in nodes]
    for choice in itertools.product(*options):
        succ = dict(zip(nodes, choice))
        total = sum(V[a, b] for a, b in succ.items())
        if total >= best:
            continue
        ends = {}
        ok = True
        for a in nodes:
            seen, x = set(), a
            while x in succ and x not in sinks:
                if x in seen:
                    ok = False
                    break
                seen.add(x)
                x = succ[x]
            if not ok:
                break
            ends[a] = x
        if not ok:
            continue
        if leads_to is not None and leads_to[0] != leads_to[1] and ends.get(leads_to[0]) != leads_to[1]:
            continue
        best = total
    return best
