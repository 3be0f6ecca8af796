"""The landscape of a chain too large to list: wells found from starting states, least costs
between them by Dijkstra's search, and Gamma over the wells found (docs/science.md, chapter 3:
the landscape).

A state is a tuple of token ids; site i may hold the tokens ``candidates[i]`` (two for a two-token
design, the model's whole allowed vocabulary for its own chain). Rows come from the caller's scorer
(wrap it in a memo so that searches share them: the rows of a state do not depend on T).

How wells are found: from each start, steepest descent (the zero-cost move that gains the most) until
a state has no zero-cost move (a fixed point) or a state repeats (a zero-cost cycle); a cycle is
closed by a breadth-first walk over zero-cost moves and its bottom classes are the wells. The
Dijkstra searches between wells add every fixed point they open; they break ties of cost toward the
target (:func:`_toward`), so a plateau of zero-cost moves is crossed, not scored level by level. Nothing certifies that every
well was found: :class:`Searched` says how many states were opened and whether any search ran
out of its budget.

Cost: one search scores at most ``max_states`` states, its descents and all its Dijkstra searches
together (:class:`Moves` keeps the budget); a search that runs out says so (``finished`` False).
Where it ran out before every cost between wells was settled, :func:`bracket` brackets Gamma with at
most ``settle_states`` states more: descents from the edge of what was scored give upper ends (an exit
climbs to a saddle and falls into the other well at no cost), forward or bidirectional Dijkstra
searches lower ones. That is ``max_states + settle_states`` in all, and 2n for a last path per cost
left unsettled.
"""
from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import networkx as nx
import numpy as np
import torch

from .wgraph import TIE, deepest_root, gamma, least_weight

MAX_CLOSURE = 256
"""States one zero-cost closure may open before the search stops it and walks on (:func:`bottom_of`)."""

WALK = 32
"""Zero-cost moves walked between two closures that outgrew :data:`MAX_CLOSURE`."""

ATTEMPTS = 8
"""Closures tried from one start before the search gives up on it (no well from that start)."""


MET = 1e-12
"""Relative gap at which a bracket's two ends have met: the same least cost summed in another order."""


class OutOfStates(Exception):
    """A search asked for the rows of one more state than its budget allows."""


class Moves:
    """Move costs of a chain on ``scorer`` with per-site candidate tokens: for a state, an (n, K)
    array cost[i, j] = max_b s_i(b) - s_i(candidates[i][j]) over the candidates, and the candidates.
    At most ``budget`` states are scored (None: no bound); asking for one more raises
    :class:`OutOfStates`, while states already scored stay free."""

    def __init__(self, scorer, candidates, budget: int | None = None):
        self.scorer = scorer
        self.budget = budget
        self.tokens = [np.asarray(c, np.int64) for c in candidates]
        self.cols = [scorer.vocab.index_of(torch.as_tensor(c)).numpy() for c in self.tokens]
        if any((c < 0).any() for c in self.cols):
            raise ValueError("a candidate token is not in the scorer's allowed vocabulary")
        self.seen: dict[tuple, list] = {}

    @property
    def left(self) -> int | None:
        """States the budget still allows (None: no bound)."""
        return None if self.budget is None else max(self.budget - len(self.seen), 0)

    @property
    def opened(self) -> int:
        """States whose rows were scored (each once: the costs are kept)."""
        return len(self.seen)

    def costs(self, x: tuple) -> list[np.ndarray]:
        if x in self.seen:
            return self.seen[x]
        if self.budget is not None and len(self.seen) >= self.budget:
            raise OutOfStates(self.budget)
        n = len(x)
        rows = self.scorer.scores(torch.tensor(x).repeat(n, 1), torch.arange(n)).double().cpu().numpy()
        out = []
        for i in range(n):
            s = rows[i, self.cols[i]]
            out.append(s.max() - s)
        self.seen[x] = out
        return out


def _zero_moves(moves: Moves, x: tuple, c: list) -> list[tuple]:
    out = []
    for i, ci in enumerate(c):
        for j in np.flatnonzero(ci <= TIE):
            t = int(moves.tokens[i][j])
            if t != x[i]:
                out.append(x[:i] + (t,) + x[i + 1:])
    return out


def _gain_step(moves: Moves, x: tuple, c: list) -> tuple | None:
    """The zero-cost move that gains most over the current token (None at a fixed point)."""
    best, gain = None, TIE
    for i, ci in enumerate(c):
        here = ci[np.flatnonzero(moves.tokens[i] == x[i])]
        g = float(here[0]) if len(here) else math.inf
        if g > gain:
            j = int(np.argmin(ci))
            best, gain = x[:i] + (int(moves.tokens[i][j]),) + x[i + 1:], g
    return best


def closure_wells(moves: Moves, x: tuple) -> list[frozenset]:
    """The bottom classes of the zero-cost moves reachable from ``x`` (empty if the closure passes
    :data:`MAX_CLOSURE` states, or a quarter of what the budget of ``moves`` still allows, so that one
    closure cannot spend the states of the other starts)."""
    cap = MAX_CLOSURE if moves.left is None else min(MAX_CLOSURE, max(moves.left // 4, 8))
    g, todo, seen = nx.DiGraph(), [x], {x}
    while todo:
        y = todo.pop()
        g.add_node(y)
        for z in _zero_moves(moves, y, moves.costs(y)):
            g.add_edge(y, z)
            if z not in seen:
                if len(seen) >= cap:
                    return []
                seen.add(z)
                todo.append(z)
    cond = nx.condensation(g)
    return [frozenset(cond.nodes[c]["members"]) for c in cond if cond.out_degree(c) == 0]


def bottom_of(moves: Moves, x: tuple) -> list[frozenset]:
    """Bottom classes of the zero-cost graph reached from ``x``. The closure of ``x`` can hold every
    state that downhill moves at independent sites reach (2^k of them), so when it outgrows
    :data:`MAX_CLOSURE` a walk of :data:`WALK` zero-cost moves (drawn by a generator seeded once per
    call, so the search is reproducible) goes deeper and the closure is tried again from there, up
    to :data:`ATTEMPTS` times. A walk along zero-cost moves ends in a bottom class with probability
    one, and a bottom class's closure is itself; one larger than the cap is given up (empty)."""
    rng = np.random.default_rng(0)
    for _ in range(ATTEMPTS):
        found = closure_wells(moves, x)
        if found:
            return found
        for _ in range(WALK):
            nxt = _zero_moves(moves, x, moves.costs(x))
            if not nxt:
                return [frozenset([x])]
            x = nxt[int(rng.integers(len(nxt)))]
    return []


def descend(moves: Moves, start: tuple, max_steps: int = 10_000) -> list[frozenset]:
    """The wells that steepest zero-cost descent from ``start`` ends in: its fixed point, or, where it
    meets a tie or a cycle, the bottom classes :func:`bottom_of` reaches from there."""
    x, seen = tuple(int(t) for t in start), set()
    for _ in range(max_steps):
        c = moves.costs(x)
        nxt = _gain_step(moves, x, c)
        if nxt is None:
            return bottom_of(moves, x) if _zero_moves(moves, x, c) else [frozenset([x])]
        if x in seen:
            return bottom_of(moves, x)
        seen.add(x)
        x = nxt
    return []


@dataclass
class _Reach:
    cost: dict           # settled state -> least cost from the well
    fixed: list          # fixed points settled that belong to no known well
    finished: bool       # every target settled before the budget ran out
    frontier: float = math.inf   # the last cost settled: no state left unsettled costs less


def path_cost(moves: Moves, x: tuple, y: tuple) -> float:
    """The cost of one path from ``x`` to ``y`` (an upper bound on the least cost): at each step the
    cheapest move that writes one of ``y``'s tokens where the two still differ. Inf if ``moves``
    runs out of its budget on the way."""
    total = 0.0
    try:
        while x != y:
            c = moves.costs(x)
            i = min((k for k in range(len(x)) if x[k] != y[k]),
                    key=lambda k: c[k][np.flatnonzero(moves.tokens[k] == y[k])[0]])
            total += float(c[i][np.flatnonzero(moves.tokens[i] == y[i])[0]])
            x = x[:i] + (y[i],) + x[i + 1:]
    except OutOfStates:
        return math.inf
    return total


def _neighbours(moves: Moves, x: tuple, c: list, forward: bool):
    """(state, cost) of the moves out of ``x`` (forward) or into ``x`` (backward). A move into ``x``
    at site i has the cost of writing ``x[i]`` in x's own context (the rows of site i do not read
    site i), so the rows of ``x`` give the costs of both."""
    for i, ci in enumerate(c):
        into = float(ci[np.flatnonzero(moves.tokens[i] == x[i])[0]]) if not forward else 0.0
        for j, t in enumerate(moves.tokens[i]):
            if t != x[i]:
                yield x[:i] + (int(t),) + x[i + 1:], (float(ci[j]) if forward else into)


def _toward(states) -> Callable[[tuple], int]:
    """Hamming distance from a state to the nearest of ``states`` (0 where there are none). Dijkstra's
    searches break ties of cost with it: a plateau of equal cost (zero-cost moves) is walked toward
    the target first, so an exit that crosses one is met before the rest of the plateau is scored.
    Costs are still settled in order, so every least cost and lower end is as before."""
    if not states:
        return lambda y: 0
    T = np.array(list(states), np.int64)
    return lambda y: int((T != np.asarray(y, np.int64)).sum(1).min())


def between(moves: Moves, source: frozenset, target: frozenset, stop_at: int) -> tuple[float, float]:
    """The least cost from ``source`` to ``target`` (sets of states) bracketed by a bidirectional
    Dijkstra search, forward from ``source`` and backward from ``target``, each step on the side
    whose least unsettled cost is lower. It stops when the sum of the two least unsettled costs
    reaches the best path met (low = high: settled), or before scoring a state once ``moves`` has
    scored ``stop_at`` states (low: that sum, a lower bound on every path not yet met; high: the
    best path met, inf if none)."""
    tick = itertools.count()
    near = (_toward(target), _toward(source))
    g = ({x: 0.0 for x in source}, {x: 0.0 for x in target})
    heaps = ([(0.0, 0, next(tick), x) for x in source], [(0.0, 0, next(tick), x) for x in target])
    done: tuple[set, set] = (set(), set())
    best = min((0.0 for x in source if x in target), default=math.inf)
    while heaps[0] and heaps[1]:
        top = heaps[0][0][0] + heaps[1][0][0]
        if top >= best:
            return best, best
        side = 0 if heaps[0][0][0] <= heaps[1][0][0] else 1
        c, _, _, x = heapq.heappop(heaps[side])
        if x in done[side] or c > g[side][x]:
            continue
        if moves.opened >= stop_at and x not in moves.seen:
            return min(top, best), best
        try:
            rows = moves.costs(x)
        except OutOfStates:
            return min(top, best), best
        done[side].add(x)
        for y, w in _neighbours(moves, x, rows, forward=side == 0):
            if c + w < g[side].get(y, math.inf):
                g[side][y] = c + w
                heapq.heappush(heaps[side], (c + w, near[side](y), next(tick), y))
                if y in g[1 - side]:
                    best = min(best, c + w + g[1 - side][y])
    return best, best


def _boundary(moves: Moves, source: frozenset) -> list[tuple[float, tuple]]:
    """(least cost, state) of the states one move beyond what ``moves`` has scored, reached from
    ``source`` through scored states only, cheapest first: a Dijkstra search that scores nothing."""
    tick = itertools.count()
    heap = [(0.0, next(tick), x) for x in source]
    cost, edge = {}, []
    while heap:
        c, _, x = heapq.heappop(heap)
        if x in cost:
            continue
        cost[x] = c
        if x not in moves.seen:
            edge.append((c, x))
            continue
        for y, w in _neighbours(moves, x, moves.seen[x], forward=True):
            if y not in cost:
                heapq.heappush(heap, (c + w, next(tick), y))
    return edge


def descent_bound(moves: Moves, source: frozenset, target: frozenset, extra: int,
                  ceiling: float = math.inf) -> float:
    """An upper bound on the least cost from ``source`` to ``target``: the least cost g(y) of a state
    y just beyond the scored region (:func:`_boundary`) whose steepest zero-cost descent
    (:func:`descend`) ends in a well that meets ``target``. The descent's moves cost nothing, so the
    path to y and on down is a path of cost g(y). States are tried cheapest first while ``moves``
    has scored fewer than ``extra`` states more than it had (inf if none reached ``target``). Where
    y is the cheapest unsettled state, g(y) is also the lower end of the bracket and it closes: an
    exit over a saddle falls into the other well at no cost, which the bidirectional search, whose
    backward side floods the other well's basin, finds late. No state is tried at ``ceiling`` or
    above (an upper end that high is of no use to the caller): inf then."""
    stop = moves.opened + extra
    if moves.budget is not None:
        moves.budget = max(moves.budget, stop)
    for c, y in _boundary(moves, source):
        if moves.opened >= stop or c >= ceiling:
            break
        try:
            found = descend(moves, y)
        except OutOfStates:
            break
        if any(w & target for w in found):
            return c
    return math.inf


def _dijkstra(moves: Moves, well: frozenset, absorbing: dict, stop_at: int, explore_until: int,
              ceiling: float = math.inf) -> _Reach:
    """Least costs from ``well`` to the states of the other wells (``absorbing``: state -> well),
    which are settled but not expanded. Once every target is settled it goes on (looking for wells
    not yet known) while the search as a whole has scored fewer than ``explore_until`` states; it
    stops before scoring a new state once the search as a whole has scored ``stop_at`` states, or when
    ``moves`` runs out of its budget, or when the least unsettled cost reaches ``ceiling`` (a cost
    already known to be reachable: the frontier then meets it)."""
    targets = set(absorbing)
    near = _toward(targets)
    tick = itertools.count()
    heap = [(0.0, 0, next(tick), x) for x in well]
    cost, fixed = {}, []
    while heap and (targets or moves.opened < explore_until):
        c, _, _, x = heapq.heappop(heap)
        if x in cost:
            continue
        if c >= ceiling and x not in absorbing:
            return _Reach(cost, fixed, not targets, c)
        cost[x] = c
        targets.discard(x)
        if x in absorbing:
            continue
        if moves.opened >= stop_at and x not in moves.seen:
            return _Reach(cost, fixed, not targets, c)
        try:
            mc = moves.costs(x)
        except OutOfStates:
            return _Reach(cost, fixed, not targets, c)
        if x not in well and not _zero_moves(moves, x, mc):
            fixed.append(x)
        for i, ci in enumerate(mc):
            for j, t in enumerate(moves.tokens[i]):
                if t != x[i]:
                    y = x[:i] + (int(t),) + x[i + 1:]
                    if y not in cost:
                        heapq.heappush(heap, (c + float(ci[j]), near(y), next(tick), y))
    return _Reach(cost, fixed, not targets)


@dataclass
class Searched:
    """Wells found (frozensets of states), least costs V between them (inf where a search did not
    reach), Gamma over them, the ground well, states opened, and whether every search finished.
    ``gamma_low`` and ``gamma_high`` bracket Gamma over the wells found: both Gamma where every search
    finished; for an unfinished search with two wells or more, from the bracket of each V it did not
    reach (:func:`bracket`); NaN with one well."""

    wells: list
    V: np.ndarray
    gamma: float
    ground: int
    opened: int
    finished: bool
    gamma_low: float = math.nan
    gamma_high: float = math.nan


def search(moves: Moves, starts, *, max_states: int = 2000, settle_states: int | None = None,
           rounds: int = 3) -> Searched:
    """Wells from ``starts`` by descent, then V by Dijkstra from every well (module docstring);
    fixed points met on the way join the wells and the searches run again, ``rounds`` times at most.
    The search scores at most ``max_states`` states in all (the budget of ``moves`` is set to that,
    counting the states it already holds), its descents at most half of them; a start whose descent
    runs out adds no well, and a search that finds no well reports Gamma as inf (not settled). A
    search that ran out before settling every V brackets Gamma (:func:`bracket`, up to
    ``settle_states`` states more, ``max_states`` where None): only such a search spends them, so a
    large ``settle_states`` costs nothing where the search settles. Where the bracket closes (its ends within :data:`MET`), Gamma is its value
    (``finished`` stays False: wells may be missing), and elsewhere inf, even where some V were
    settled: W(1) - W(2) over V with an unsettled entry at inf is not Gamma."""
    moves.budget = max_states // 2            # descents may spend half the budget, Dijkstra the rest
    wells: list[frozenset] = []
    descended = True
    for s in starts:
        try:
            found = descend(moves, s)
        except OutOfStates:
            found, descended = [], False
        for w in found:
            if w not in wells:
                wells.append(w)
    finished = descended
    moves.budget = max_states
    if not wells:
        return Searched(wells, np.zeros((0, 0)), math.inf, 0, moves.opened, False)
    for _ in range(rounds):
        V, new, done, frontier = _costs(moves, wells, max_states)
        fresh = [frozenset([x]) for x in new if frozenset([x]) not in wells]
        if not fresh:
            break
        wells.extend(dict.fromkeys(fresh))
    else:
        V, _, done, frontier = _costs(moves, wells, max_states)
    finished = finished and done
    g = gamma(V) if len(wells) > 1 else math.nan
    ground = deepest_root(V) if len(wells) > 1 else 0
    extra = max_states if settle_states is None else settle_states
    low, high = (g, g) if finished else bracket(moves, wells, V, frontier, extra)
    if not finished and len(wells) > 1:       # settled only where the bracket met (a V left at inf is not settled)
        met = high - low <= MET * max(1.0, abs(high))
        g, low = (high, high) if met else (math.inf, low)
    return Searched(wells, V, g, ground, moves.opened, finished, low, high)


def bracket(moves: Moves, wells: list, V: np.ndarray, frontier: np.ndarray, extra: int) -> tuple[float, float]:
    """Gamma's bracket over the wells found, for a search that did not settle every V, with at most
    ``extra`` more states. First the upper ends: each V it did not reach, the least settled first, takes an even
    share of half of them (what the ones before it left) for descents over the saddle
    (:func:`descent_bound`), none tried at W(1) over the upper ends found so far or above (past it
    an upper end is of no use).
    Then the lower ends: Dijkstra's search forward from each well (:func:`_raise`) with an even share
    of what is left, stopped at its V's upper end or at U = W(1) over the upper ends, whichever is
    lower; the searches still short of that run once more on whatever the others left (the states
    scored by any of them are free to all). No V need be known past U: a W-graph that uses an arrow of cost U or more weighs at least
    W(1), which is at least W(2), so W(1) and W(2) over V capped at U are W(1) and W(2) themselves.
    A lower end is never below ``frontier`` (Dijkstra settles costs in order); where no descent found
    a path, the bidirectional :func:`between` gives both ends, and where it found none either, the
    upper end is the cost of :func:`path_cost` between the wells' first states (up to 2n more
    states). W(1) and W(2) grow with every entry of V, so Gamma = W(1) - W(2) lies within
    [W1(low) - W2(high), W1(high) - W2(low)]; with two wells that is [min low, min high].
    :func:`between` does not keep its paths off third wells: its costs are the least over all paths,
    which give the same W(1) - W(2) (checked against enumerated landscapes in the tests). NaN with
    one well."""
    m = len(wells)
    if m < 2:
        return math.nan, math.nan
    low, high = V.copy(), V.copy()
    todo = sorted(((a, b) for a in range(m) for b in range(m) if a != b and not np.isfinite(V[a, b])),
                  key=lambda ab: frontier[ab])       # the least settled frontier first: the likeliest cheap exit
    stop, half = moves.opened + extra, moves.opened + extra // 2
    for k, (a, b) in enumerate(todo):
        high[a, b] = descent_bound(moves, wells[a], wells[b], max(half - moves.opened, 0) // (len(todo) - k),
                                   ceiling=least_weight(high, 1))
    cap = least_weight(high, 1)
    low[np.isinf(V)] = frontier[np.isinf(V)]
    for again in (False, True):               # again: on what the first pass left, its scored states free
        left = [(a, b) for a, b in todo if low[a, b] < min(high[a, b], cap)]
        for k, (a, b) in enumerate(left):
            share = max(stop - moves.opened, 0) // (len(left) - k)
            low[a, b], high[a, b] = _raise(moves, wells[a], wells[b], low[a, b], high[a, b],
                                           min(high[a, b], cap), share)
    for a, b in todo:
        if not np.isfinite(high[a, b]):
            moves.budget += 2 * len(min(wells[a]))
            high[a, b] = path_cost(moves, min(wells[a]), min(wells[b]))
            low[a, b] = min(low[a, b], high[a, b])
    least = least_weight(low, 1) - least_weight(high, 2)
    most = least_weight(high, 1) - least_weight(low, 2)
    return (max(float(least), 0.0) if np.isfinite(least) else 0.0), float(most)


def _raise(moves: Moves, source: frozenset, target: frozenset, low: float, hi: float, ceiling: float,
           extra: int) -> tuple[float, float]:
    """The bracket of the least cost from ``source`` to ``target``, given its ends so far (``low``,
    ``hi``), with at most ``extra`` states more: Dijkstra's search forward from ``source`` (its states
    already scored are free) raises the lower end until it settles ``target`` or reaches ``ceiling``
    (at most ``hi``: past it nothing is needed, :func:`bracket`). Where there is no ceiling (no path
    known, and W(1) over the upper ends inf), the bidirectional :func:`between` spends them instead."""
    moves.budget = moves.opened + extra
    if np.isfinite(ceiling):
        r = _dijkstra(moves, source, {x: 0 for x in target}, moves.budget, 0, ceiling=ceiling)
        low = max(low, min((r.cost[x] for x in target if x in r.cost), default=r.frontier))
    else:
        lo, hi = between(moves, source, target, moves.budget)
        low = max(low, lo)
    return min(low, hi), hi


def _shares(moves: Moves, max_states: int, searches_left: int) -> tuple[int, int]:
    """Where the next of ``searches_left`` Dijkstra searches stops (scored states of the whole search):
    at an even share of the states ``max_states`` still allows, and, once its targets are all settled,
    at an even share of what is left of the first 3/4 of ``max_states`` (the last quarter is kept
    for settling targets). Neither a well whose exit is dear nor a search for new wells can spend
    what the other wells' searches need."""
    k = max(searches_left, 1)
    stop = moves.opened + max(max_states - moves.opened, 0) // k
    explore = moves.opened + max(3 * max_states // 4 - moves.opened, 0) // k
    return stop, explore


def _costs(moves: Moves, wells: list, max_states: int) -> tuple[np.ndarray, list, bool, np.ndarray]:
    """V between the wells by one Dijkstra search from each, each first held to its share of the budget
    (:func:`_shares`); the searches that stopped there run again on whatever is left, the one nearest
    to settling (least cost not yet settled) first; the states already scored are free to them."""
    m = len(wells)
    V, new, done = np.full((m, m), np.inf), [], np.zeros(m, bool)
    frontier = np.full((m, m), np.inf)
    for again in (False, True):
        todo = sorted((a for a in range(m) if not done[a]), key=lambda a: np.delete(frontier[a], a).min(initial=np.inf))
        for k, a in enumerate(todo):
            absorbing = {x: b for b, z in enumerate(wells) if b != a for x in z}
            stop, explore = _shares(moves, max_states, 1 if again else len(todo) - k)
            r = _dijkstra(moves, wells[a], absorbing, stop, explore)
            done[a] = r.finished
            new.extend(x for x in r.fixed if x not in new)
            for b, z in enumerate(wells):
                if b != a:
                    V[a, b] = min((r.cost[x] for x in z if x in r.cost), default=math.inf)
                    frontier[a, b] = V[a, b] if np.isfinite(V[a, b]) else r.frontier
    return V, new, bool(done.all()), frontier
