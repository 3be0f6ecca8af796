"""Draws from a row of scores: the inverse-CDF sampler every mode shares, the keep-interval of
uniforms that leaves a token in place, leave probabilities, and the jump's holding times.

Every law here is formed in float64 from the raw scores, so the plain, memo and jump modes, the
coupled pairs and the exact kernels sample one conditional law."""
from __future__ import annotations

import math

import torch


def cdf_of(scores: torch.Tensor, temperature) -> torch.Tensor:
    """The inverse-CDF sampler's table: cumsum of softmax(scores / T) row by row, all in float64
    (a float32 softmax before issue 41; see ``store.SAMPLER``)."""
    p = torch.softmax(scores.double() / temperature, dim=-1)
    return torch.cumsum(p, dim=-1)


def search(cdf: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The index each row's uniform u in [0, 1) picks from its cdf table (scaled by the row's total)."""
    idx = torch.searchsorted(cdf, (u.to(cdf.device) * cdf[:, -1]).unsqueeze(1), right=True).squeeze(1)
    return idx.clamp_(max=cdf.shape[-1] - 1)


def sample_index(scores: torch.Tensor, temperature: float, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw from softmax(scores / T) row by row, with given uniforms u in [0, 1)."""
    return search(cdf_of(scores, temperature), u)


def keep_interval(cdf: torch.Tensor, pos: torch.Tensor):
    """(lo, hi, tot) on the CPU with ``search(cdf, u) == pos`` exactly when lo <= u * tot < hi
    (the same float64 product the sampler forms); an empty interval where pos is -1."""
    r, k = cdf.shape
    pos = pos.to(cdf.device)
    pc = pos.clamp(0, k - 1)
    rows = torch.arange(r, device=cdf.device)
    inf = torch.full((r,), math.inf, dtype=cdf.dtype, device=cdf.device)
    lo = torch.where(pc > 0, cdf[rows, (pc - 1).clamp(min=0)], -inf)
    hi = torch.where(pc < k - 1, cdf[rows, pc], inf)
    lo = torch.where(pos >= 0, lo, inf)
    return lo.cpu(), hi.cpu(), cdf[:, -1].cpu()


def without(p: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """A copy of the rows p with column pos of each row set to zero (nothing where pos is -1)."""
    out = p.clone()
    pos = pos.to(p.device)
    rows = (pos >= 0).nonzero().flatten()
    out[rows, pos[rows]] = 0
    return out


def leave_probability(scores: torch.Tensor, pos: torch.Tensor, temperature) -> torch.Tensor:
    """1 - pi(x | .) per row at temperature T for the token at ``pos`` ((rows,), or (rows, k) for
    k tokens of each row from one softmax); the sum of the row where the token is not in A (-1).

    Without cancellation where pi(x) is close to 1, as in a trap: only a row's most likely token
    can hold more than half, and for it the value is the sum over the other tokens; for any other
    token the total less its probability (at least a half) keeps its relative precision. The most
    likely column is zeroed in place in this call's own softmax, once the other columns are read:
    the memo segments of an ``auto`` run summarise every row they score this way, and a copy of a
    30,000-token row per row scored would cost a pass each."""
    p = torch.softmax(scores.double() / temperature, dim=-1)
    cols = pos.to(p.device)[:, None] if pos.dim() == 1 else pos.to(p.device)
    big = p.argmax(-1, keepdim=True)
    total = p.sum(-1, keepdim=True)
    own = p.gather(1, cols.clamp(min=0))
    rest = p.scatter_(1, big, 0.0).sum(-1, keepdim=True)      # the sum over all but the most likely token
    out = torch.where(cols == big, rest, total - own)
    out = torch.where(cols >= 0, out, total)
    return out.reshape(pos.shape)


def restricted(p: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """The weights a jump draws its new token from: pi_i without the current token."""
    return without(p, pos)


def draw_from(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF index per row of nonnegative weights with uniforms u; never an index of weight 0."""
    cdf = torch.cumsum(weights, -1)
    idx = torch.searchsorted(cdf, (u.to(cdf.device) * cdf[:, -1]).unsqueeze(1), right=True).squeeze(1)
    last = weights.shape[-1] - 1 - torch.argmax(torch.flip(weights > 0, [-1]).to(torch.int8), dim=-1)
    return torch.minimum(idx, last)


def holding_time(q: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Steps up to and including the first change (>= 1), geometric with leave probability q,
    from uniforms u in [0, 1): P(H > k) = (1 - q)^k. Float64, inf where q is 0."""
    rate = -torch.log1p(-q.clamp(0.0, 1.0))
    h = torch.floor(-torch.log1p(-u) / rate) + 1
    return torch.where(q > 0, h, torch.full_like(h, math.inf))


def score_gap(scores: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """s(x_i) - max_{a != x_i} s(a) for the token at ``index`` of each row (negative if not argmax)."""
    rows = torch.arange(scores.shape[0], device=scores.device)
    own = scores[rows, index]
    other = scores.clone()
    other[rows, index] = -torch.inf
    return own - other.max(dim=-1).values
