"""The trap finder on a masked LM: argmax fixed points by coordinate ascent (the primitive), the
one finder from random starts (find_traps), their exact holding times, and the deep ones the
benchmark's trap cells start from (deep_traps, a caller of find_traps)."""
import numpy as np
import pytest
import torch

from textglauber.bench.metastable import RowCount
from textglauber.traps import finder
from conftest import JointScorer


def test_coordinate_ascent_ends_at_an_argmax_fixed_point(small_scorer):
    """Coordinate ascent ends where every site is its own conditional's argmax."""
    import torch

    from textglauber import margins

    x = small_scorer.vocab.ids[torch.randint(3, (6, 4), generator=torch.Generator().manual_seed(0))]
    trap = finder.coordinate_ascent(small_scorer, x)
    assert (margins.score_gaps(small_scorer, trap) >= 0).all()
    assert torch.equal(finder.coordinate_ascent(small_scorer, trap), trap)


class _Cycling:
    """Two sites, tokens {0, 1, 2}, incompatible conditionals: site 0's argmax copies site 1; site
    1's is the other of {0, 1} when site 0 holds 0 or 1, and 2 when it holds 2. The only fixed point
    is (2, 2); ascent from a start with no 2 cycles (0,0) -> (0,1) -> (1,1) -> (1,0) -> (0,0) ..."""

    def __init__(self):
        from textglauber.vocabulary import AllowedVocab

        self.vocab = AllowedVocab(torch.tensor([0, 1, 2]), ("a", "b", "c"), 3)
        self.max_length = 2

    def scores(self, states, sites):
        out = torch.zeros(len(states), 3)
        for r, (x, i) in enumerate(zip(states.tolist(), sites.tolist())):
            out[r, x[1] if i == 0 else (2 if x[0] == 2 else 1 - x[0])] = 1.0
        return out


def test_coordinate_ascent_keeps_the_starts_that_converge_and_fails_only_when_none_do():
    cyc = RowCount(_Cycling())
    fixed = finder.coordinate_ascent(cyc, torch.tensor([[0, 0], [2, 2], [0, 2], [1, 0]]), sweeps=20)
    assert fixed.tolist() == [[2, 2], [2, 2]]          # (0, 2) -> (2, 2); (0, 0) and (1, 0) cycle
    # the sweep map (0, 0) -> (0, 1) -> (1, 0) -> (0, 1) repeats after 3 sweeps: the cycling starts
    # are dropped then (at most 4 sweeps of 4 starts on 2 sites), not kept for all 20 (80 rows and more)
    assert cyc.rows <= 4 * 4 * 2
    with pytest.raises(RuntimeError, match="no start reached"):
        finder.coordinate_ascent(cyc, torch.tensor([[0, 0], [1, 0]]), sweeps=20)


def test_find_traps_keeps_distinct_fixed_points_in_the_order_reached(small_scorer):
    """The finder: random starts, 2 x count a batch, taken by coordinate ascent to their fixed points;
    the distinct ones in the order reached, at most count; with count None and a stopping rule, all
    of them. The same generator state gives the same traps."""
    from textglauber import margins

    traps = finder.find_traps(small_scorer, 5, 2, torch.Generator().manual_seed(0))
    assert 1 <= len(traps) <= 2 and len({tuple(t.tolist()) for t in traps}) == len(traps)
    assert all((margins.score_gaps(small_scorer, t[None]) >= 0).all() for t in traps)
    gen = torch.Generator().manual_seed(0)
    starts = small_scorer.vocab.ids[torch.randint(small_scorer.vocab.size, (4, 5), generator=gen)]
    first = list(dict.fromkeys(tuple(r) for r in finder.coordinate_ascent(small_scorer, starts).tolist()))
    assert [tuple(t.tolist()) for t in traps] == first[:2]
    seen = []
    every = finder.find_traps(small_scorer, 5, None, torch.Generator().manual_seed(0), 3, starts=4,
                              enough=lambda found: seen.append(len(found)) or False)
    assert len(seen) == 3 and len(every) == seen[-1] >= len(traps)
    assert [tuple(t.tolist()) for t in every[:len(first)]] == first


@pytest.mark.parametrize("temperature", [0.25, 1.0])
def test_holding_steps_is_the_exact_kernels_expected_holding_time(small_scorer, temperature):
    """1 / q from the n conditionals of a state equals 1 / (1 - P(x, x)) of the enumerated Glauber
    kernel, for every state of the tiny MLM on three tokens at n = 3."""
    from textglauber import exact

    ch = exact.glauber_kernel(small_scorer, 3, temperature)
    want = 1 / exact.leave_probabilities(ch.kernel)
    got = finder.holding_steps(small_scorer, torch.as_tensor(ch.states), temperature)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert got.min() < 2 < got.max()                     # shallow and deep states alike


def test_deep_traps_start_only_from_argmax_fixed_points_that_hold():
    """On an explicit joint law (81 states) the fixed points and their holding times are known by
    enumeration: the chains start only from fixed points whose exact holding time reaches the
    threshold, and from the deepest one reached where none does."""
    from conftest import random_joint

    from textglauber import exact, margins

    n, T = 4, 0.25
    sc = JointScorer(np.arange(3), n, random_joint(3, n, seed=3, spread=1.0))
    ch = exact.glauber_kernel(sc, n, T)
    hold = dict(zip(map(tuple, ch.states.tolist()), 1 / exact.leave_probabilities(ch.kernel)))
    at_argmax = margins.score_gaps(sc, torch.as_tensor(ch.states)) >= 0
    fixed = {tuple(s) for s, a in zip(ch.states.tolist(), at_argmax) if a.all()}
    holds = sorted(hold[f] for f in fixed)
    assert len(fixed) >= 3 and holds[0] < holds[-1]
    threshold = holds[len(holds) // 2]

    x, found = finder.deep_traps(sc, n, 6, torch.Generator().manual_seed(0), temperature=T, hold=threshold,
                                batches=100)
    starts = {tuple(r) for r in x.tolist()}
    assert starts <= fixed and all(hold[s] >= threshold for s in starts)
    assert found["deep"] and found["trap_states"] == len(starts) == sum(h >= threshold for h in holds)
    assert found["fixed_points"] == len(fixed) > len(starts)       # shallower fixed points were reached, and left out
    assert found["trap_hold_min"] == pytest.approx(min(hold[s] for s in starts))

    x, found = finder.deep_traps(sc, n, 6, torch.Generator().manual_seed(0), temperature=T, hold=np.inf, batches=100)
    assert {tuple(r) for r in x.tolist()} == {max(fixed, key=hold.get)} and not found["deep"]
    assert found["trap_hold_min"] == pytest.approx(holds[-1])
