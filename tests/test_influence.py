"""The pairwise maxima behind alpha and osc, computed a block at a time on the scores' own device and
dtype: the same answer as a brute-force float64 loop, whatever the block size, and a stated float32 error."""
import numpy as np
import torch

from textglauber import influence


def _brute(P: np.ndarray, S: np.ndarray):
    k, q, _ = P.shape
    tv = np.zeros(k)
    osc = 0.0
    for r in range(q):
        for s in range(q):
            tv = np.maximum(tv, 0.5 * np.abs(P[:, r] - P[:, s]).sum(-1))
            d = S[r] - S[s]
            osc = max(osc, (d.max() - d.min()) / 2)
    return tv, osc


def _case(q=9, a=3000, seed=0):
    g = np.random.default_rng(seed)
    # rows drift along one direction, so the widest pair is the first with the last (not neighbours)
    S = g.normal(scale=1.0, size=(q, a)) * 0.3 + np.arange(q)[:, None] * g.normal(scale=0.5, size=a)
    T = np.array([0.25, 1.0, 8.0]).reshape(-1, 1, 1)
    z = S[None] / T
    P = np.exp(z - z.max(-1, keepdims=True))
    return P / P.sum(-1, keepdims=True), S


def test_pairwise_matches_brute_force_for_any_block():
    P, S = _case()
    tv0, osc0 = _brute(P, S)
    for chunk in (1, 10**5, 2**28):          # one row per block, a few rows, everything at once
        tv, osc = influence._pairwise(torch.tensor(P), torch.tensor(S), chunk_bytes=chunk)
        np.testing.assert_allclose(tv.numpy(), tv0, rtol=0, atol=1e-12)
        assert abs(float(osc) - osc0) < 1e-12


def test_pairwise_float32_error_is_below_the_stated_bound():
    P, S = _case(q=12, a=30000, seed=1)     # |A| of a real vocabulary
    tv0, osc0 = _brute(P, S)
    tv, osc = influence._pairwise(torch.tensor(P, dtype=torch.float32), torch.tensor(S, dtype=torch.float32),
                                  chunk_bytes=2**22)
    assert np.abs(tv.double().numpy() - tv0).max() < 1e-5
    assert abs(float(osc) - osc0) < 1e-5 * (S.max() - S.min())
    # the check can fail: a wrong pair rule (only neighbouring rows) misses the maximum here
    wrong = np.max([0.5 * np.abs(P[:, r] - P[:, r + 1]).sum(-1) for r in range(len(S) - 1)], axis=0)
    assert wrong[-1] < tv0[-1] - 1e-3
