"""The superbasin move against closed forms: the exit step it draws is the inverse of the exit-time
distribution computed by plain matrix powers, the member it leaves from has the law Q^(t-1) r, and
in a trap whose 1 - P(x, x) is 1e-20 (1.0 in float64 for P(x, x)) the exit step keeps its digits."""
import math

import numpy as np
import pytest

from textglauber.engine import superbasin


def _random_chain(m_all=8, m=5, seed=0, lazy=0.9):
    """A lazy random stochastic matrix on m_all states; S = its first m states."""
    rng = np.random.default_rng(seed)
    P = rng.random((m_all, m_all)) ** 3
    P /= P.sum(1, keepdims=True)
    P = lazy * np.eye(m_all) + (1 - lazy) * P
    Q = P[:m, :m]
    inside = Q - np.diag(np.diag(Q))
    leave = 1 - np.diag(P)[:m]
    r = P[:m, m:].sum(1)
    return Q, inside, leave, r


def test_exit_step_inverts_the_exit_time_distribution():
    """For many uniforms v, the drawn step is the least t with P(exit by t) >= v, P from Q^t directly."""
    Q, inside, leave, r = _random_chain()
    law = superbasin.exit_law(inside, r, horizon=5000)
    F, Qt = [0.0], np.eye(len(Q))
    for _ in range(3000):
        Qt = Qt @ Q
        F.append(1 - Qt.sum(1)[2])
    F = np.array(F)
    for v in np.random.default_rng(1).random(300):
        t, _ = superbasin.sample_exit(law, 2, v, 0.5)
        want = int(np.argmax(F >= v))
        assert F[want] >= v and F[want - 1] < v
        if abs(F[want] - v) > 1e-12 and abs(F[want - 1] - v) > 1e-12:    # not at a rounding tie
            assert t == want, (v, t, want)


def test_the_member_left_from_has_the_law_of_the_last_step_inside():
    """Given the exit step t, the member is drawn with weight Q^(t-1)(s, y) r(y): the uniform w maps
    onto that distribution's quantiles."""
    Q, inside, leave, r = _random_chain(seed=3)
    law = superbasin.exit_law(inside, r, horizon=1000)
    F, Qt = [0.0], np.eye(len(Q))
    powers = [Qt]
    for _ in range(200):
        Qt = Qt @ Q
        powers.append(Qt)
        F.append(1 - Qt.sum(1)[0])
    F = np.array(F)
    for v in [0.1, 0.37, 0.8]:
        t = int(np.argmax(F >= v))
        weight = powers[t - 1][0] * r
        cdf = np.cumsum(weight) / weight.sum()
        for w in np.linspace(0.01, 0.99, 41):
            got_t, y = superbasin.sample_exit(law, 0, v, w)
            assert got_t == t
            assert y == int(np.searchsorted(cdf, w, side="right"))


def test_mean_exit_time_of_many_draws_is_the_exact_mean():
    """The mean of the drawn exit steps against (I - Q)^-1 1 (a statistical check, 4 standard errors)."""
    Q, inside, leave, r = _random_chain(seed=5, lazy=0.99)
    want = np.linalg.solve(np.eye(len(Q)) - Q, np.ones(len(Q)))[1]
    law = superbasin.exit_law(inside, r, horizon=1e9)
    rng = np.random.default_rng(0)
    t = np.array([superbasin.sample_exit(law, 1, *rng.random(2))[0] for _ in range(4000)])
    assert abs(t.mean() - want) < 4 * t.std() / math.sqrt(len(t))


@pytest.mark.parametrize("q,back,out", [(1e-20, 0.3, 1e-3), (1e-3, 0.3, 1e-19), (1e-18, 0.5, 1e-18)])
def test_a_deep_trap_keeps_its_digits(q, back, out):
    """A trap with leave probability q beside a neighbour that flickers back to it with chance
    ``back`` and leaves S with chance ``out``. Where q or out is below the float64 rounding of 1 or
    of ``back`` (1 - q == 1.0, or back + out == back), the drawn step for v = 1 - 1/e is still the
    exact quantile, to 1e-9: the exit time is exponential to that precision (the slow time is 1e18
    or more times the fast one), with the two-state mean (back + out) / (q out) + 1 / out."""
    assert 1 - q == 1.0 or back + out == back
    inside = np.array([[0.0, q], [back, 0.0]])
    r = np.array([0.0, out])
    law = superbasin.exit_law(inside, r, horizon=1e40)
    t, y = superbasin.sample_exit(law, 0, 1 - math.exp(-1), 0.5)
    assert y == 1
    assert t == pytest.approx((back + out) / (q * out) + 1 / out, rel=1e-9)


def test_exits_beyond_the_horizon_are_inf():
    law = superbasin.exit_law(np.zeros((1, 1)), np.array([1e-6]), horizon=100)
    assert law.max_steps >= 100
    assert superbasin.sample_exit(law, 0, 0.5, 0.5)[0] == math.inf


def test_mismatched_shapes_are_refused():
    with pytest.raises(ValueError, match="do not match"):
        superbasin.exit_law(np.zeros((3, 3)), np.ones(2), 10)
