"""Coupled Glauber chains and the maximal coupling (SPEC section 4).

Two chains start from different states. At every step both update the *same* site; the two
new tokens come from a maximal coupling of the two conditionals: with probability
w = sum_a min(p, q)(a) one token drawn from min(p, q)/w is written into both, otherwise each
chain draws from its own residual. Once the two states are equal they see equal
conditionals and stay equal, so the first such step is the coupling (coalescence) time.
By the coupling inequality TV(P^t(x, .), P^t(y, .)) <= P(tau_{x,y} > t) for the two starts of a
pair, and d(t) = max_x TV(P^t(x, .), pi) <= max_{x,y} P(tau_{x,y} > t) over all pairs of starts.

Many pairs, each with its own temperature, advance as one batch: one scorer call per step
serves all live pairs (2 rows each); pairs that have coalesced leave the batch.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .chain import validate, ChainSpec


def maximal_coupling(p: torch.Tensor, q: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw (X, Y) with X ~ p, Y ~ q and P(X != Y) = TV(p, q), row by row.

    ``u`` holds three uniforms per row (B, 3): the first decides whether to draw from the
    overlap, the other two drive the inverse-CDF draws.
    """
    p, q = p.double(), q.double()
    m = torch.minimum(p, q)
    w = m.sum(-1)
    u = u.to(p.device).double()

    def draw(weights, v):
        cdf = torch.cumsum(weights, -1)
        idx = torch.searchsorted(cdf, (v * cdf[:, -1]).unsqueeze(1), right=True).squeeze(1)
        return idx.clamp_(max=weights.shape[-1] - 1)

    same = (u[:, 0] < w) | (p == q).all(-1)        # equal laws: always the same token
    common = draw(torch.where(w.unsqueeze(1) > 0, m, p), u[:, 1])
    x_res = draw(torch.clamp(p - m, min=0) + 1e-300, u[:, 1])
    y_res = draw(torch.clamp(q - m, min=0) + 1e-300, u[:, 2])
    x = torch.where(same, common, x_res)
    y = torch.where(same, common, y_res)
    return x, y


@dataclass
class CouplingRun:
    tau: np.ndarray          # (P,) coalescence step, NaN where censored
    censored: np.ndarray     # (P,) bool
    temperature: np.ndarray  # (P,)
    budget: int


def couple(scorer, x0: torch.Tensor, y0: torch.Tensor, temperatures, budget: int, gen: torch.Generator,
           prefix_len: int = 0) -> CouplingRun:
    """Run coupled pairs (x0[p], y0[p]) at temperature temperatures[p] for at most ``budget`` steps."""
    x = torch.as_tensor(x0, dtype=torch.long).clone()
    y = torch.as_tensor(y0, dtype=torch.long).clone()
    if x.shape != y.shape:
        raise ValueError("the two starts of each pair must have the same shape")
    temps = torch.as_tensor(np.broadcast_to(np.asarray(temperatures, float), (len(x),)).copy())
    for t in set(temps.tolist()):
        validate(scorer, x, ChainSpec(temperature=t, steps=budget, prefix_len=prefix_len))
    validate(scorer, y, ChainSpec(temperature=1.0, steps=budget, prefix_len=prefix_len))
    pairs, n = x.shape
    tau = np.full(pairs, np.nan)
    live = torch.ones(pairs, dtype=torch.bool)
    equal = (x == y).all(1)
    tau[equal.numpy()] = 0
    live &= ~equal
    ids = scorer.vocab.ids
    for t in range(1, budget + 1):
        idx = live.nonzero().flatten()
        if len(idx) == 0:
            break
        sites = torch.randint(prefix_len, n, (len(idx),), generator=gen)
        u = torch.rand((len(idx), 3), generator=gen, dtype=torch.float64)
        s = scorer.scores(torch.cat([x[idx], y[idx]]), torch.cat([sites, sites])).double()
        T = temps[idx].to(s.device).unsqueeze(1)
        p = torch.softmax(s[: len(idx)] / T, -1)
        q = torch.softmax(s[len(idx):] / T, -1)
        a, b = maximal_coupling(p, q, u)
        rows = idx
        x[rows, sites] = ids.to(a.device)[a].cpu()
        y[rows, sites] = ids.to(b.device)[b].cpu()
        done = (x[idx] == y[idx]).all(1)
        tau[idx[done].numpy()] = t
        live[idx[done]] = False
    censored = np.isnan(tau)
    return CouplingRun(tau=tau, censored=censored, temperature=temps.numpy(), budget=budget)


def grid_experiment(scorer, passages_for, lengths, temperatures, *, pairs: int, budget: int,
                    gen: torch.Generator):
    """Coupling times over a (T, n) grid: for each n one batched run serves every temperature.

    Each pair starts from two different seed windows. Returns one row per pair."""
    import pandas as pd

    rows = []
    temps = np.repeat(np.asarray(temperatures, float), pairs)
    for n in lengths:
        starts = passages_for(n, 2 * pairs * len(temperatures))
        x0, y0 = starts[0::2], starts[1::2]
        r = couple(scorer, x0, y0, temps, budget, gen)
        for p in range(len(temps)):
            rows.append({"n": n, "temperature": float(temps[p]), "pair": p, "tau": r.tau[p],
                         "censored": bool(r.censored[p])})
    return pd.DataFrame(rows)


def fast_threshold(cells) -> list[tuple[int, float]]:
    """Per length: the lowest grid temperature from which the median pair coupled within the budget
    at that temperature and every higher one; inf where the median did not couple even at the
    highest temperature (beyond the budget). ``cells``: rows with n, temperature, median (NaN = censored)."""
    out = []
    for n, g in cells.groupby("n"):
        g = g.sort_values("temperature", ascending=False)
        coupled = g["median"].notna().to_numpy()
        run = int(np.argmin(coupled)) if not coupled.all() else len(coupled)   # leading run of coupled cells
        out.append((int(n), float(g.temperature.iloc[run - 1]) if run else float("inf")))
    return out


def threshold_trend(boundary: list[tuple[int, float]]) -> str:
    """How the fast threshold moves from the shortest to the longest length, with a censored end
    (inf) read as 'beyond the budget', never dropped."""
    if len(boundary) < 2:
        return "cannot be followed over a single length"
    first, last = boundary[0][1], boundary[-1][1]
    if np.isinf(first) and np.isinf(last):
        return "cannot be located: the median pair did not couple at any temperature of the grid at either end"
    if np.isinf(last):
        return "rises beyond the grid"
    if np.isinf(first):
        return "falls from beyond the grid"
    return "rises" if last > first else ("stays the same" if last == first else "falls")
