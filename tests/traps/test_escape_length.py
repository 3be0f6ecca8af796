"""Issue 63 against answers known by hand: wells as bottom classes of the zero-cost graph (a planted
cycle with no fixed point, and a planted two-state well that changes the escape exponent), the
``nontrivial`` statistic on cases where it must be False and True, and the slope of escape against
length checked against exact mean escape times solved here by a linear system."""
import math

import numpy as np
import pytest
import torch

from textglauber import exact, traps
from textglauber.pages import traps as traps_page
from textglauber.traps import escape, finder, length
from textglauber.traps import quasipotential as qp
from textglauber.vocabulary import AllowedVocab
from textglauber.profile import EscapeLength
from conftest import JointScorer


class DictScorer:
    """Scores written down by hand: ``table[(masked context, site)]`` is the score row over the
    tokens 0 .. K-1 (the masked site holds -1 in the context)."""

    def __init__(self, K: int, n: int, table: dict):
        self.vocab = AllowedVocab(ids=torch.arange(K), tokens=tuple(map(str, range(K))), vocab_size=K)
        self.n, self.table = n, table

    @property
    def max_length(self):
        return self.n

    def scores(self, states, sites):
        rows = []
        for x, i in zip(states.tolist(), sites.tolist()):
            x[i] = -1
            rows.append(self.table[(tuple(x), i)])
        return torch.tensor(rows, dtype=torch.float64)


def _cycle_scorer():
    """Two sites, two tokens: site 0 prefers to copy site 1, site 1 prefers the opposite of site 0
    (by 1 each). Zero-cost moves: 00 -> 01 -> 11 -> 10 -> 00, a 4-cycle and no fixed point."""
    table = {}
    for b in (0, 1):
        table[((-1, b), 0)] = [1.0, 0.0] if b == 0 else [0.0, 1.0]
    for a in (0, 1):
        table[((a, -1), 1)] = [0.0, 1.0] if a == 0 else [1.0, 0.0]
    return DictScorer(2, 2, table)


def test_a_zero_cost_cycle_is_one_well_and_has_no_fixed_point():
    sc = _cycle_scorer()
    with pytest.raises(finder.NoFixedPoint):
        finder.coordinate_ascent(sc, torch.tensor([[0, 0], [1, 1]]))
    s = qp._search(sc, (0, 0), [(0, 0)], 3, math.inf)           # no state lies at distance 3: the whole space
    wells = qp.search_wells(s.zero)
    assert len(wells) == 1 and set(wells[0]) == {(0, 0), (0, 1), (1, 1), (1, 0)}
    # the same answer from the landscape's wells on the enumerated moves
    from textglauber.landscape.zerocost import wells as landscape_wells
    states = [(0, 0), (0, 1), (1, 0), (1, 1)]
    src, dst, cost = [], [], []
    for a, x in enumerate(states):
        c = qp.move_costs(sc, x)
        for i in range(2):
            y = list(x)
            y[i] = 1 - x[i]
            src.append(a), dst.append(states.index(tuple(y))), cost.append(c[i, y[i]])
    assert [sorted(states[j] for j in w) for w in landscape_wells(4, src, dst, cost)] == [sorted(states)]


def _two_state_well():
    """The planted law of test_quasipotential with its second well widened to two states: U(0000) = 0,
    distance 1 at 3, distance 2 at 3.5, distance 3 at 4, 1111 at 5, and 1100 and 1110 both at -1
    (moving between them costs nothing both ways, so neither is a fixed point; together they are one
    well). By hand, out of the ball of radius 4 (every state but 1111): V_4 = 5 (along 0001, 0011,
    0111, avoiding the well); into the well costs 3, out of it 6 (1110 -> 1111), back to the trap 4.
    The W-graph value is min(5 + 6, 3 + 6, 5 + 4) - min(4, 3) = 6."""
    states = exact.enumerate_states(np.arange(2), 4)
    d = states.sum(1)
    U = np.select([d == 0, d == 1, d == 2, d == 3, d == 4], [0.0, 3.0, 3.5, 4.0, 5.0])
    for w in ([1, 1, 0, 0], [1, 1, 1, 0]):
        U[(states == w).all(1)] = -1.0
    return JointScorer(np.arange(2), 4, -U)


def _exact_means(scorer, state, k, temperatures):
    """Mean escape times from ``state`` out of its Hamming ball of radius k, by solving
    (I - Q) t = 1 on the ball directly (Q: the kernel restricted to it) in 80-digit arithmetic, the
    diagonal of I - Q written as the row's mass off the diagonal (so no 1 - P(x, x) loses digits)."""
    import mpmath

    mpmath.mp.dps = 80
    out = []
    for T in temperatures:
        chain = exact.glauber_kernel(scorer, len(state), T)
        P = np.asarray(chain.kernel.toarray() if hasattr(chain.kernel, "toarray") else chain.kernel)
        inside = np.flatnonzero((chain.states != np.asarray(state)).sum(1) < k)
        A = mpmath.matrix(len(inside), len(inside))
        for r, x in enumerate(inside):
            for c, y in enumerate(inside):
                A[r, c] = -mpmath.mpf(P[x, y]) if x != y else mpmath.fsum(mpmath.mpf(v) for j, v in enumerate(P[x]) if j != x)
        t = mpmath.lu_solve(A, mpmath.matrix([1] * len(inside)))
        at = int(np.flatnonzero(inside == int(np.flatnonzero((chain.states == state).all(1))[0]))[0])
        out.append(float(t[at]))
    return np.asarray(out)


def test_a_two_state_well_is_found_and_sets_the_exponent():
    sc = _two_state_well()
    b = qp.barrier(sc, torch.tensor([0, 0, 0, 0]), 4)
    assert b.value == pytest.approx(5.0) and b.case == "several wells"
    assert [set(w) for w in b.well_states] == [{(1, 1, 0, 0), (1, 1, 1, 0)}]
    assert b.exponent == pytest.approx(6.0)
    Ts = np.array([6 / 60, 6 / 90])                          # low enough that the prefactor is settled
    means = _exact_means(sc, np.zeros(4, int), 4, Ts)
    slope = (math.log(means[1]) - math.log(means[0])) / (1 / Ts[1] - 1 / Ts[0])
    assert slope == pytest.approx(6.0, rel=0.02) and abs(slope - 5.0) > 0.5


def _margin_law(second: float):
    """A joint law on {0, 1}^3: 000 at 0, its neighbours at 2 (margin 2), the states at distance 2 at
    ``second`` and 111 at 6. With second <= 2 the first move off 000 carries the whole cost to
    distance 2 (V_2 = 2, the margin); with second = 3, V_2 = 3."""
    states = exact.enumerate_states(np.arange(2), 3)
    d = states.sum(1)
    return JointScorer(np.arange(2), 3, -np.select([d == 0, d == 1, d == 2, d == 3], [0.0, 2.0, second, 6.0]))


@pytest.mark.parametrize("second,want", [(1.0, False), (2.0, False), (3.0, True)])
def test_nontrivial_fails_where_the_first_move_carries_the_cost(second, want):
    sc = _margin_law(second)
    x = torch.tensor([0, 0, 0])
    b = qp.barrier(sc, x, 2)
    margin = escape.margin(escape.site_scores(sc, x), x, sc.vocab)
    assert margin == pytest.approx(2.0) and b.exponent == pytest.approx(max(2.0, second))
    assert traps.nontrivial(b.exponent, margin) is want


def test_nontrivial_by_hand():
    assert not traps.nontrivial(2.0, 2.0) and not traps.nontrivial(2.0 + 1e-9, 2.0) and not traps.nontrivial(math.nan, 2.0)
    assert traps.nontrivial(2.01, 2.0) and traps.nontrivial(1.5, 2.0)


def test_the_counts_keep_trivial_fits_apart():
    """Two k = 2 fits: one whose exponent is the margin (trivial), one above it; the summary counts
    them apart and names the non-trivial count per model."""
    import pandas as pd

    cells = pd.DataFrame({"model": ["a", "a"], "trap": [0, 1], "median": [10.0, 100.0]})
    fits = pd.DataFrame({"model": "a", "k": [2, 2], "slope": [2.0, 3.1], "margin": [2.0, 2.0], "slope_low": [1.8, 2.9],
                         "slope_high": [2.2, 3.3], "medians": [4, 4], "exponent": [2.0, 3.0],
                         "predicted_exponent": [2.0, 3.0], "exponent case": "one well", "fit p": 0.5, "line holds": True,
                         "one-state slope": 2.0, "cold slope": 2.0, "cold slope_low": 1.0, "cold slope_high": 4.0})
    h = traps.escape_counts(cells, fits)
    assert h["trivial"] == 1 and h["nontrivial_by_model"] == {"a": 1} and h["deeper_ratio"] == [pytest.approx(3.1 / 3)] * 2
    words = traps_page.summary(h)
    assert "1 fits with k > 1 have an exponent equal to the margin" in words
    assert "1 fits with k > 1 have a non-trivial exponent, one that differs from the margin (1 for a)" in words
    none = traps_page.summary(traps.escape_counts(cells, fits.assign(exponent=2.0)))
    assert "tests nothing beyond k = 1" in none


def test_escape_length_slopes_against_exact_means(small_scorer):
    """The tiny MLM on three tokens at n = 4, 5, 6 (enumerable): one family, a row per length; at each
    length the exact slope column equals the slope of the exact means solved here, and the fitted
    slope's interval (60 chains at each of 4 temperatures, from medians) holds that exact slope."""
    g = EscapeLength(models=[{"name": "tiny-mlm"}], lengths=[4, 5, 6], traps=2, max_states=200, temperatures=4,
                     holding_decades=[2.0, 4.0], chains=60)
    el = traps.escape_length(small_scorer, "tiny", g, torch.Generator().manual_seed(2), horizon=1e30, max_moves=500)
    assert list(el.n) == [4, 5, 6] and list(el.k) == [1, 2, 2] and (el.temperatures == 4).all()
    assert set(el.chosen) <= {"deepest found", "grown", "deepest found again"} and el.chosen.iloc[0] == "deepest found"
    for _, r in el.iterrows():
        x = np.array([int(t) for t in r.trap.split()])
        Ts = 1 / np.linspace(1 / r["T high"], 1 / r["T low"], 4)          # evenly spaced in 1/T
        means = np.log(_exact_means(small_scorer, x, r.k, Ts))
        want = np.polyfit(1 / Ts, means, 1)[0]
        assert r["exact slope"] == pytest.approx(want, rel=1e-4)
        assert r.slope_low <= r["exact slope"] <= r.slope_high, r.to_dict()
    words = traps_page.length_sentence(el)
    assert "n = 4" in words and "n = 6" in words
