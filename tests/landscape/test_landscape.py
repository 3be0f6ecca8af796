"""The landscape (textglauber.landscape) against independent answers: W-graph weights by brute force
over every arrow map, wells and barriers planted in synthetic score tables with closed-form depths,
exact eigenvalues of the enumerated kernel as T falls, and the search against full enumeration."""
import itertools
import math

import numpy as np
import pytest
import torch

from textglauber import phase
from textglauber.landscape import check, enumerated, explore, wgraph
from textglauber.vocabulary import AllowedVocab


# ----------------------------------------------------------------------------- independent helpers

def brute_w(V: np.ndarray, roots) -> float:
    """Least W-graph weight with root set ``roots`` by trying every arrow map (no library)."""
    m, roots = len(V), set(roots)
    others = [a for a in range(m) if a not in roots]
    best = math.inf
    for choice in itertools.product(range(m), repeat=len(others)):
        succ = dict(zip(others, choice))
        if any(a == b or not np.isfinite(V[a, b]) for a, b in succ.items()):
            continue
        ok = True
        for a in others:
            seen, x = set(), a
            while x in succ:
                if x in seen:
                    ok = False
                    break
                seen.add(x)
                x = succ[x]
            ok = ok and x in roots
        if ok:
            best = min(best, sum(V[a, b] for a, b in succ.items()))
    return best


def table(n: int, field) -> phase.Scores:
    """A two-token score table whose logit of bit 1 at site i is field(i, bits of the other sites)
    (the logit of bit 0 is 0)."""
    logits = np.zeros((n, 2 ** (n - 1), 2))
    for i in range(n):
        for c in range(2 ** (n - 1)):
            others = [(c >> (n - 2 - j)) & 1 for j in range(n - 1)]
            bits = others[:i] + [None] + others[i:]
            logits[i, c, 1] = field(i, bits)
    return phase.Scores(logits)


def curie_weiss(n: int, J: float, h: float) -> phase.Scores:
    return table(n, lambda i, b: J * sum(2 * x - 1 for x in b if x is not None) + h)


class TableScorer:
    """The score table as a scorer over token ids 0 and 1 (what the search is given)."""

    def __init__(self, scores: phase.Scores):
        self.s, self.n = scores, scores.n
        self.vocab = AllowedVocab(ids=torch.tensor([0, 1]), tokens=("0", "1"), vocab_size=2)

    @property
    def max_length(self):
        return self.n

    def scores(self, states, sites):
        x, i = states.numpy(), sites.numpy()
        state = (x * (1 << np.arange(self.n - 1, -1, -1))).sum(1)
        return torch.as_tensor(self.s.logits[i, phase.context_of(state, i, self.n)])


# ----------------------------------------------------------------------------------------- W-graphs

@pytest.mark.parametrize("m", [2, 3, 4, 5])
def test_forest_weights_match_brute_force(m):
    rng = np.random.default_rng(m)
    for _ in range(6):
        V = rng.exponential(2.0, (m, m))
        V[rng.random((m, m)) < 0.2] = np.inf
        for k in (1, 2):
            for roots in itertools.combinations(range(m), k):
                assert wgraph.forest_weight(V, roots) == pytest.approx(brute_w(V, roots), abs=1e-9)


def test_gamma_of_two_wells_is_the_shallower_exit():
    V = np.array([[np.inf, 3.0], [5.0, np.inf]])
    assert wgraph.gamma(V) == 3.0 and wgraph.deepest_root(V) == 1


def test_gamma_of_three_wells_by_hand():
    # wells 0 -> 1 costs 2, 1 -> 0 costs 6, 1 -> 2 costs 4, 2 -> 1 costs 7, 0 <-> 2 impossible.
    # W(1): root 2: 0->1, 1->2 = 6; root 1: 0->1, 2->1 = 9; root 0: 1->0, 2->1 = 13. So W(1) = 6.
    # W(2): {1, 2}: 0->1 = 2; {0, 2}: 1->2 = 4 (or 1->0 = 6); {0, 1}: 2->1 = 7. So W(2) = 2.
    V = np.array([[np.inf, 2.0, np.inf], [6.0, np.inf, 4.0], [np.inf, 7.0, np.inf]])
    assert wgraph.least_weight(V, 1) == 6.0 and wgraph.least_weight(V, 2) == 2.0
    assert wgraph.gamma(V) == 4.0 and wgraph.deepest_root(V) == 2
    assert math.isnan(wgraph.gamma(V[:1, :1]))


# ------------------------------------------------------------------------------- planted landscapes

@pytest.mark.parametrize("n, J, h", [(4, 1.0, 0.0), (5, 1.0, 0.3), (6, 0.7, 0.5), (7, 0.4, 0.9)])
def test_curie_weiss_wells_and_barrier_in_closed_form(n, J, h):
    L = enumerated.two_token_landscape(curie_weiss(n, J, h))
    up = sum(max(0.0, J * (n - 1 - 2 * k) - h) for k in range(n))     # all 0 -> all 1, one site at a time
    down = sum(max(0.0, J * (n - 1 - 2 * k) + h) for k in range(n))
    assert [list(w) for w in L.wells] == [[0], [2 ** n - 1]]
    assert L.V[0, 1] == pytest.approx(up) and L.V[1, 0] == pytest.approx(down)
    assert L.gamma == pytest.approx(min(up, down))
    assert L.ground == (1 if down > up else 0) or up == down


def cycle_pair_and_ferro(J: float) -> phase.Scores:
    """Sites 0, 1: site 0 copies site 1 and site 1 writes the opposite of site 0 (a zero-cost cycle of
    four states, no fixed point); sites 2, 3 copy each other with strength J."""
    def field(i, b):
        if i == 0:
            return 3.0 * (2 * b[1] - 1)
        if i == 1:
            return -3.0 * (2 * b[0] - 1)
        return J * (2 * b[5 - i] - 1)
    return table(4, field)


def test_zero_cost_cycles_are_wells():
    L = enumerated.two_token_landscape(cycle_pair_and_ferro(1.5))
    assert len(L.wells) == 2 and all(len(w) == 4 for w in L.wells)
    low = {int(s) & 3 for s in L.wells[0]} | {int(s) & 3 for s in L.wells[1]}
    assert low == {0, 3}                                              # the ferromagnetic pair aligned
    assert L.gamma == pytest.approx(1.5)
    src, dst, cost = enumerated.two_token_moves(cycle_pair_and_ferro(1.5))
    zero = np.zeros(16, int)
    np.add.at(zero, src[cost <= 1e-9], 1)
    assert (zero > 0).all()          # every state has a zero-cost move: no fixed point, so a
                                     # fixed-point-only search would find no well at all here


def test_gamma_is_the_limit_of_T_ln_trel():
    for scores in (curie_weiss(6, 0.7, 0.5), cycle_pair_and_ferro(1.5), curie_weiss(7, 0.4, 0.9)):
        L = enumerated.two_token_landscape(scores)
        c = check.cold_check(scores, L.gamma)
        assert check.resolved_count(c) >= 4
        coldest, raw, line = check.limit(c)
        assert check.agreement(raw, L.gamma) < 0.15
        assert check.agreement(line, L.gamma) < 0.05


def test_random_tables_gamma_against_exact_eigenvalues():
    done = 0
    for seed in range(60):                       # independent random logits: a rugged landscape
        rng = np.random.default_rng(seed)
        s = phase.Scores(rng.normal(scale=2.0, size=(5, 16, 2)))
        L = enumerated.two_token_landscape(s)
        if len(L.wells) < 2 or not L.gamma > 0.05:
            continue
        c = check.cold_check(s, L.gamma)
        assert check.resolved_count(c) >= 4
        assert check.agreement(check.limit(c)[2], L.gamma) < 0.1
        done += 1
    assert done >= 8


def test_the_check_can_fail_on_a_wrong_exponent():
    s = curie_weiss(6, 0.7, 0.5)
    L = enumerated.two_token_landscape(s)
    wrong = L.V[1, 0]                                                  # the deeper well's exit, not Gamma
    c = check.cold_check(s, wrong)
    assert check.agreement(check.limit(c)[2], wrong) > 0.15


def test_the_worst_hitting_time_against_a_direct_solve():
    s = curie_weiss(5, 0.6, 0.3)
    L = enumerated.two_token_landscape(s)
    P = phase.kernel(s, 0.7).toarray()
    out = np.ones(32, bool)
    out[L.wells[L.ground]] = False
    t = np.linalg.solve(np.eye(out.sum()) - P[np.ix_(out, out)], np.ones(out.sum()))   # hot: no digits lost
    assert check.worst_hit(phase.kernel(s, 0.7), L.wells[L.ground]) == pytest.approx(t.max(), rel=1e-9)


@pytest.mark.parametrize("scores", [curie_weiss(6, 0.7, 0.5), cycle_pair_and_ferro(1.5), curie_weiss(7, 0.4, 0.9)])
def test_the_hitting_time_reaches_gamma_where_the_gap_cannot_be_resolved(scores):
    L = enumerated.two_token_landscape(scores)
    c = check.cold_check(scores, L.gamma, ground=L.wells[L.ground])
    hot_T, hit = check.hit_limit(c)
    assert hot_T == pytest.approx(L.gamma / max(check.HIT_TARGETS))
    assert hot_T < c[c.resolved.astype(bool)].temperature.min()       # colder than any resolved gap
    assert check.agreement(hit, L.gamma) < 0.05
    assert c[c.measure == "hit"].t_rel.isna().all()


def test_the_hitting_check_can_fail_on_a_wrong_exponent():
    s = curie_weiss(6, 0.7, 0.5)
    L = enumerated.two_token_landscape(s)
    wrong = L.V[L.ground, 1 - L.ground]                                # the deeper well's exit, not Gamma
    c = check.cold_check(s, wrong, ground=L.wells[L.ground])
    assert check.agreement(check.hit_limit(c)[1], wrong) > 0.15


# ------------------------------------------------------------------------------------------- search

def test_the_search_walks_out_of_a_closure_too_large_to_list():
    """A 4-state zero-cost cycle on sites 0 and 1 and twelve free sites that each prefer token 1:
    steepest descent cycles on the pair first, and the cycle's zero-cost closure holds 4 x 2^12
    states. The search must still find the one well (the cycle with every free site at 1) within a
    budget of 1/32 of the space."""
    def field(i, b):
        return 3.0 * (2 * b[1] - 1) if i == 0 else -3.0 * (2 * b[0] - 1) if i == 1 else 1.0
    n = 14
    scores = table(n, field)
    moves = explore.Moves(TableScorer(scores), [[0, 1]] * n)
    found = explore.search(moves, [tuple([0] * n), tuple([1, 0] * 7)], max_states=2 ** n // 32)
    assert len(found.wells) == 1 and len(found.wells[0]) == 4
    assert all(x[2:] == (1,) * 12 for x in found.wells[0])
    assert {x[:2] for x in found.wells[0]} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert math.isnan(found.gamma)


@pytest.mark.parametrize("scores", [curie_weiss(8, 0.5, 0.2), cycle_pair_and_ferro(2.0)])
def test_search_finds_the_enumerated_landscape(scores):
    L = enumerated.two_token_landscape(scores)
    n = scores.n
    moves = explore.Moves(TableScorer(scores), [[0, 1]] * n)
    rng = np.random.default_rng(1)
    found = explore.search(moves, [tuple(rng.integers(2, size=n).tolist()) for _ in range(6)], max_states=400)
    as_sets = {frozenset(int("".join(map(str, x)), 2) for x in w) for w in found.wells}
    assert as_sets == {frozenset(int(s) for s in w) for w in L.wells}
    assert found.gamma == pytest.approx(L.gamma) and found.finished
    assert found.opened <= 2 ** n


def test_search_budget_is_reported():
    s = curie_weiss(8, 0.5, 0.2)
    moves = explore.Moves(TableScorer(s), [[0, 1]] * 8)
    found = explore.search(moves, [(0,) * 8, (1,) * 8], max_states=3)
    assert not found.finished and found.opened <= 3 + 3 + 2 * 8      # the budget, the bracket's as much again, a path


@pytest.mark.slow
def test_one_budget_for_the_whole_search():
    """The budget counts the states of every descent and every Dijkstra search of one length together.
    On a Curie-Weiss chain of 2^14 states the least-cost path must first settle every state cheaper
    than the saddle (about half of them): 1/16 of the space leaves the search unfinished, with both
    wells found but no cost between them; the whole space gives the exact Gamma."""
    s = curie_weiss(14, 0.5, 0.2)
    L = enumerated.two_token_landscape(s)
    for budget, done in ((2 ** 14 // 16, False), (2 ** 14, True)):
        moves = explore.Moves(TableScorer(s), [[0, 1]] * 14)
        found = explore.search(moves, [(0,) * 14, (1,) * 14], max_states=budget)
        assert found.opened <= 2 * budget + 4 * 14 and found.finished is done and len(found.wells) == 2
        assert found.gamma == pytest.approx(L.gamma) if done else math.isinf(found.gamma)


@pytest.mark.parametrize("n, J, h", [(14, 0.5, 0.2), (12, 0.8, 0.5), (13, 0.3, -0.1)])
def test_an_unfinished_search_brackets_gamma(n, J, h):
    """Out of budget between two wells, the search still brackets Gamma: below by the least cost it
    had not settled, above by one path's cost. The exact Gamma (every state listed) lies inside, the
    bracket is not empty of content (low > 0, high finite), and the other well's exit (a wrong
    exponent, larger than Gamma) lies above it."""
    s = curie_weiss(n, J, h)
    L = enumerated.two_token_landscape(s)
    moves = explore.Moves(TableScorer(s), [[0, 1]] * n)
    found = explore.search(moves, [(0,) * n, (1,) * n], max_states=2 ** n // 32)
    assert not found.finished and len(found.wells) == 2
    assert 0 < found.gamma_low <= L.gamma + 1e-9 <= found.gamma_high + 2e-9 < math.inf
    wrong = L.V[L.ground, 1 - L.ground]
    assert wrong > found.gamma_high + 1e-6


def test_a_finished_search_has_an_empty_bracket():
    s = curie_weiss(8, 0.5, 0.2)
    found = explore.search(explore.Moves(TableScorer(s), [[0, 1]] * 8), [(0,) * 8, (1,) * 8], max_states=400)
    assert found.finished and found.gamma_low == found.gamma == found.gamma_high


def test_path_cost_bounds_the_least_cost_from_above():
    """Every path's cost is at least the least cost V that Dijkstra's search gives, on random tables."""
    rng = np.random.default_rng(3)
    for _ in range(5):
        n = 7
        w = rng.normal(size=(n, 2))
        s = table(n, lambda i, b: float(w[i, 0] + w[i, 1] * sum(2 * x - 1 for x in b if x is not None) / n))
        L = enumerated.two_token_landscape(s)
        if len(L.wells) != 2:
            continue
        moves = explore.Moves(TableScorer(s), [[0, 1]] * n)
        a, b = (tuple(int(c) for c in format(int(min(wl)), f"0{n}b")) for wl in L.wells)
        assert explore.path_cost(moves, a, b) >= L.V[0, 1] - 1e-9


def test_the_bidirectional_search_settles_the_least_cost_and_brackets_it_when_cut_short():
    """On random two-well tables, the bidirectional search between the wells gives the enumerated least
    cost V exactly with room enough; with 5 or 20 states it brackets V."""
    rng = np.random.default_rng(3)
    tried = 0
    for _ in range(40):
        n = 7
        w = rng.normal(size=(n, 2))
        s = table(n, lambda i, b: float(w[i, 0] + 3 * w[i, 1] * sum(2 * x - 1 for x in b if x is not None) / n))
        L = enumerated.two_token_landscape(s)
        if len(L.wells) != 2:
            continue
        tried += 1
        a, b = (frozenset(tuple(int(c) for c in format(int(x), f"0{n}b")) for x in wl) for wl in L.wells)
        lo, hi = explore.between(explore.Moves(TableScorer(s), [[0, 1]] * n), a, b, 10 ** 9)
        assert lo == pytest.approx(L.V[0, 1]) and hi == pytest.approx(L.V[0, 1])
        for budget in (5, 20):
            moves = explore.Moves(TableScorer(s), [[0, 1]] * n)
            lo, hi = explore.between(moves, a, b, budget)
            assert moves.opened <= budget and lo <= L.V[0, 1] + 1e-9 <= hi + 1e-9
    assert tried >= 5


@pytest.mark.parametrize("n, J, h", [(12, 0.5, 0.6), (12, 0.8, 0.5), (13, 0.3, -0.1)])
def test_a_search_cut_short_brackets_gamma_narrowly(n, J, h):
    """On Curie-Weiss chains, with an eighth of the states (and as much again for the bracket), the
    bracket holds the enumerated Gamma and its lower end is within 30% of it: the wells' searches share
    the budget, so neither spends what the other needs (with the first search spending it all, the
    lower end was the other's first unsettled cost, 30-35% of Gamma on these chains)."""
    s = curie_weiss(n, J, h)
    L = enumerated.two_token_landscape(s)
    found = explore.search(explore.Moves(TableScorer(s), [[0, 1]] * n), [(1,) * n, (0,) * n], max_states=2 ** n // 8)
    assert not found.finished and len(found.wells) == 2
    assert 0.7 * L.gamma < found.gamma_low <= L.gamma + 1e-9 <= found.gamma_high + 1e-9


def random_landscapes(count: int, least_wells: int, seed: int = 5):
    """Enumerated landscapes of random 7-site tables with pairwise couplings, with at least ``least_wells``."""
    rng, n = np.random.default_rng(seed), 7
    while count:
        J, h = rng.normal(size=(n, n)) * 1.5, rng.normal(size=n)
        s = table(n, lambda i, b: float(h[i] + sum(J[i, j] * (2 * x - 1) for j, x in enumerate(b) if x is not None)))
        L = enumerated.two_token_landscape(s)
        if len(L.wells) >= least_wells:
            count -= 1
            yield s, L, [frozenset(tuple(int(c) for c in format(int(x), f"0{n}b")) for x in w) for w in L.wells]


def test_least_costs_through_third_wells_give_the_same_gamma():
    """The bracket's searches may pass through a third well; W(1) - W(2) from those least costs is the
    enumerated Gamma (whose V keeps off third wells) on random tables with three wells or more."""
    for s, L, wells in random_landscapes(8, 3):
        m = len(wells)
        U = np.array([[0.0 if a == b else explore.between(explore.Moves(TableScorer(s), [[0, 1]] * 7), wells[a],
                                                          wells[b], 10 ** 9)[0] for b in range(m)] for a in range(m)])
        assert (U <= L.V + 1e-9).all()
        assert wgraph.gamma(U) == pytest.approx(L.gamma, abs=1e-9)


def test_an_unfinished_search_brackets_gamma_over_three_wells_or_more():
    """Cut short on random tables with three wells or more, the search's bracket holds the enumerated
    Gamma whenever it found every well; given all the states, it closes on it."""
    checked = 0
    for s, L, wells in random_landscapes(8, 3, seed=7):
        starts = [min(w) for w in wells]
        for budget, closes in ((24, False), (128, True)):
            found = explore.search(explore.Moves(TableScorer(s), [[0, 1]] * 7), starts, max_states=budget)
            if set(found.wells) != set(wells):
                continue
            checked += 1
            assert found.gamma_low - 1e-9 <= L.gamma <= found.gamma_high + 1e-9
            if closes:
                assert found.gamma == pytest.approx(L.gamma, abs=1e-9)
    assert checked >= 8


def test_a_search_whose_descents_run_out_finds_no_well_and_settles_nothing():
    """The 4-cycle with twelve free sites: its closures need more states than a budget of 40 allows, so
    no descent ends in a well; the search says Gamma is not settled (inf), not that there is one well."""
    def field(i, b):
        return 3.0 * (2 * b[1] - 1) if i == 0 else -3.0 * (2 * b[0] - 1) if i == 1 else 1.0
    n = 14
    moves = explore.Moves(TableScorer(table(n, field)), [[0, 1]] * n)
    found = explore.search(moves, [tuple([0] * n)], max_states=40)
    assert found.wells == [] and math.isinf(found.gamma) and not found.finished and found.opened <= 40


@pytest.mark.parametrize("n, J, h", [(10, 0.5, 0.2), (11, 0.8, 0.5), (9, 0.3, -0.1)])
def test_a_descent_from_the_edge_bounds_the_exit_and_meets_it_past_the_saddle(n, J, h):
    """On Curie-Weiss chains, the descent bound from the shallow well to the deep one is never below
    the enumerated least cost V (a cost of a state that does not fall into the deep well would be),
    and once the scored region reaches the saddle it is V itself; with nothing scored past the well,
    no descent falls into the other well."""
    s = curie_weiss(n, J, h)
    L = enumerated.two_token_landscape(s)
    shallow = 1 - L.ground
    wells = [frozenset(tuple(int(c) for c in format(int(x), f"0{n}b")) for x in w) for w in L.wells]
    V = L.V[shallow, L.ground]
    for budget in (2 * n, 2 ** n // 8, 2 ** n):
        moves = explore.Moves(TableScorer(s), [[0, 1]] * n)
        explore._dijkstra(moves, wells[shallow], {x: 0 for x in wells[L.ground]}, budget, 0)
        bound = explore.descent_bound(moves, wells[shallow], wells[L.ground], 2 ** n)
        assert bound >= V - 1e-9
        if budget == 2 ** n:
            assert bound == pytest.approx(V)
    moves = explore.Moves(TableScorer(s), [[0, 1]] * n)
    assert math.isinf(explore.descent_bound(moves, wells[shallow], wells[L.ground], 0))


def plateau(n: int) -> phase.Scores:
    """Two wells, all 0 and all 1, each held by 3 logits while the other sites agree with it; every
    other state lies on one plateau where both tokens of a site score alike (every move costs 0).
    Each exit costs 3 and crosses the plateau of 2^n - 2 states; Gamma = 3."""
    def field(i, b):
        others = [x for x in b if x is not None]
        return -3.0 if not any(others) else 3.0 if all(others) else 0.0
    return table(n, field)


def test_the_search_crosses_a_plateau_toward_the_other_well():
    """Dijkstra's searches break ties of cost toward the target, so the exit across a plateau of
    4094 states is settled with 4n states scored; a search that took ties in the order it met them
    would score the plateau level by level (every state within n - 1 flips of the source) first."""
    n = 12
    s = plateau(n)
    L = enumerated.two_token_landscape(s)
    assert len(L.wells) == 2 and L.gamma == pytest.approx(3.0)
    moves = explore.Moves(TableScorer(s), [[0, 1]] * n)
    found = explore.search(moves, [(0,) * n, (1,) * n], max_states=4 * n)
    assert found.finished and found.gamma == pytest.approx(L.gamma) and found.opened <= 4 * n
    assert explore._toward([(0,) * n, (1,) * 4 + (0,) * (n - 4)])((1,) * n) == n - 4


def test_an_unfinished_search_reports_gamma_only_where_its_bracket_met():
    """Cut short on random tables with two wells or more, a search that settled some V between its
    wells but not all must not read Gamma off the V it settled (W(1) - W(2) with an unsettled V at
    inf): on these tables that gave 0.602 where Gamma is 0.227. Gamma is inf unless the bracket met,
    and then it is the enumerated Gamma; some searches here do stop with a V settled and the bracket
    open, so the rule is exercised."""
    exercised = 0
    for s, L, wells in random_landscapes(40, 2, seed=11):
        for budget in (8, 12, 16, 24, 32, 48):
            found = explore.search(explore.Moves(TableScorer(s), [[0, 1]] * 7), [min(w) for w in wells],
                                   max_states=budget)
            if found.finished or set(found.wells) != set(wells):
                continue
            off = ~np.eye(len(wells), dtype=bool)
            if np.isfinite(found.V[off]).any() and found.gamma_high - found.gamma_low > 1e-9:
                exercised += 1
                assert math.isinf(found.gamma)
            if np.isfinite(found.gamma):
                assert found.gamma == pytest.approx(L.gamma, abs=1e-9)
                assert found.gamma_low <= found.gamma <= found.gamma_high + 1e-12
    assert exercised >= 5


def test_an_unfinished_search_with_one_well_says_so_rather_than_inf():
    """A field strong enough for one well: cut short (a start left undescended), the search found that
    well only, and Gamma is NaN (one well, the table's convention), not inf (two wells or more, not
    settled)."""
    n = 12
    s = curie_weiss(n, 0.1, 2.0)
    assert len(enumerated.two_token_landscape(s).wells) == 1
    found = explore.search(explore.Moves(TableScorer(s), [[0, 1]] * n), [(0,) * n, (0, 1) * (n // 2)],
                           max_states=30)          # the second start's descent runs out of the budget
    assert len(found.wells) == 1 and not found.finished and math.isnan(found.gamma)


@pytest.mark.parametrize("n, J, h", [(12, 0.8, 0.5), (13, 0.3, -0.1)])
def test_settle_states_close_a_bracket_that_max_states_leave_open(n, J, h):
    """A search cut short at 1/32 of the states leaves Gamma's bracket open when it may spend only as
    much again on it; given settle_states of the whole space it closes on the enumerated Gamma (each
    unsettled cost is raised only up to W(1)'s upper end, and a search short of it runs again on the
    states the others scored: with an even split and each cost raised to its own upper end, 2677
    states were opened on the first chain and the bracket stayed [15.0, 25.8]).
    A search that settles within max_states spends none of settle_states: the same states opened,
    the same Gamma, whatever settle_states is."""
    s = curie_weiss(n, J, h)
    L = enumerated.two_token_landscape(s)
    cut = 2 ** n // 32

    def run(settle):
        return explore.search(explore.Moves(TableScorer(s), [[0, 1]] * n), [(0,) * n, (1,) * n], max_states=cut,
                              settle_states=settle)

    short, long = run(cut), run(2 ** n)
    assert math.isinf(short.gamma) and short.gamma_low < short.gamma_high
    assert long.gamma == pytest.approx(L.gamma, abs=1e-9) and long.gamma_low == long.gamma_high
    assert not long.finished and long.opened > short.opened      # the main search ran out: wells may be missing
    small = curie_weiss(8, 0.5, 0.2)
    done = [explore.search(explore.Moves(TableScorer(small), [[0, 1]] * 8), [(0,) * 8, (1,) * 8], max_states=400,
                           settle_states=k) for k in (0, 10 ** 6)]
    assert all(d.finished for d in done) and done[0].opened == done[1].opened and done[0].gamma == done[1].gamma


def test_no_descent_is_tried_at_or_above_the_ceiling():
    """An upper end at W(1) of the upper ends found, or above, is of no use to the bracket: with the
    ceiling at 0 no boundary state is tried (no state scored, inf); without one the descents find the
    other well's exit, an upper end on the least cost."""
    s = curie_weiss(10, 0.8, 0.5)
    L = enumerated.two_token_landscape(s)
    moves = explore.Moves(TableScorer(s), [[0, 1]] * 10)
    found = explore.search(moves, [(0,) * 10, (1,) * 10], max_states=40, settle_states=0)
    assert len(found.wells) == 2 and not found.finished
    a, b = found.wells
    before = moves.opened
    assert math.isinf(explore.descent_bound(moves, a, b, 10 ** 6, ceiling=0.0)) and moves.opened == before
    hi = explore.descent_bound(moves, a, b, 10 ** 6)
    ia = 0 if min(a) == (0,) * 10 else 1
    assert moves.opened > before and L.V[ia, 1 - ia] - 1e-9 <= hi < math.inf
