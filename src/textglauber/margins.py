"""Score margins and the drift of a token count (docs/science.md, chapter 2): a uniform margin bounds escape from a basin (a theorem); the drift at one level only supports slow escape.

Score gap at position i of state x: g_i = s_i(x_i | x_{-i}) - max_{a != x_i} s_i(a | x_{-i}),
positive exactly when x_i is the model's argmax there. A basin whose every exit site has
gap >= Delta leaves with probability at most (|A| - 1) e^{-Delta/T} per step, so
t_mix >= e^{Delta/T} / (4 (|A| - 1)) whenever the basin holds at most half the mass.

Drift of N(x) = number of copies of one token t:
D(x) = (1/n) sum_i ( 1[x_i != t] pi_i(t|x) - 1[x_i = t] (1 - pi_i(t|x)) ),
exact, from one batched pass over the n sites of each state.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch


def score_gaps(scorer, states: torch.Tensor, batch: int = 512) -> np.ndarray:
    """Per-position gaps g_i for each state: (B, n) in raw score units."""
    states = torch.as_tensor(states, dtype=torch.long)
    b, n = states.shape
    flat_states = states.repeat_interleave(n, 0)
    sites = torch.arange(n).repeat(b)
    out = []
    for s in range(0, len(sites), batch):
        sc = scorer.scores(flat_states[s:s + batch], sites[s:s + batch]).float().cpu()
        cur = flat_states[s:s + batch][torch.arange(len(sc)), sites[s:s + batch]]
        pos = scorer.vocab.index_of(cur)
        if (pos < 0).any():
            raise ValueError("a state holds a token outside the allowed vocabulary")
        own = sc[torch.arange(len(sc)), pos]
        sc[torch.arange(len(sc)), pos] = -torch.inf
        out.append(own - sc.max(-1).values)
    return torch.cat(out).view(b, n).numpy()


def gap_summary(scorer, passages: torch.Tensor) -> dict:
    """How near the seed windows are to the margin assumption: their count, the mean score gap, the
    share of sites holding the argmax, the windows argmax at every site, and |A|."""
    gaps = score_gaps(scorer, passages)
    return {"seed windows": len(gaps), "mean gap": float(gaps.mean()), "share of argmax sites": float((gaps > 0).mean()),
            "all-argmax windows": int((gaps > 0).all(1).sum()), "|A|": scorer.vocab.size}


def escape_bound(delta: float, vocab_size: int, temperature: float) -> float:
    """Per-step escape probability bound (|A| - 1) e^{-Delta/T} (may exceed 1: then it says nothing)."""
    return (vocab_size - 1) * math.exp(-delta / temperature)


def tmix_lower_bound(delta: float, vocab_size: int, temperature: float) -> float:
    """t_mix >= e^{Delta/T} / (4 (|A| - 1)), valid when the basin holds at most half the mass."""
    return math.exp(delta / temperature) / (4 * (vocab_size - 1))


def drift(scorer, states: torch.Tensor, token: int, temperatures, batch: int = 512) -> np.ndarray:
    """Exact one-step drift D(x) of the count of ``token``: (B,) for one temperature, (K, B) for a list.

    The scores are computed once and serve every temperature."""
    temps = np.atleast_1d(np.asarray(temperatures, dtype=float))
    if (temps <= 0).any():
        raise ValueError("temperature must be positive")
    states = torch.as_tensor(states, dtype=torch.long)
    b, n = states.shape
    t_pos = int(scorer.vocab.index_of(torch.tensor([token]))[0])
    if t_pos < 0:
        raise ValueError("the drift token is not in the allowed vocabulary")
    flat = states.repeat_interleave(n, 0)
    sites = torch.arange(n).repeat(b)
    T = torch.tensor(temps, dtype=torch.float64).view(-1, 1, 1)
    p_tok = []
    for s in range(0, len(sites), batch):
        sc = scorer.scores(flat[s:s + batch], sites[s:s + batch]).double().cpu()
        p_tok.append(torch.softmax(sc.unsqueeze(0) / T, -1)[..., t_pos])
    p = torch.cat(p_tok, dim=1).view(len(temps), b, n)
    is_t = (states == token).unsqueeze(0)
    d = torch.where(is_t, -(1 - p), p).mean(-1).numpy()
    return d[0] if np.ndim(temperatures) == 0 else d


def states_with_k(passages: torch.Tensor, token: int, k: int, count: int, gen: torch.Generator,
                  tokenizer=None, tries: int = 200) -> torch.Tensor:
    """``count`` states: a random seed passage with exactly k copies of ``token`` at random positions
    (copies already present elsewhere are replaced by other tokens of the same passage).

    With ``tokenizer``, a planted state must be what the tokenizer would produce from its own text
    whenever its base passage is (a '!' written before a '##ing' piece, say, would re-tokenize
    otherwise): such draws are redrawn, and after ``tries`` failures in a row it is an error."""
    from . import vocabulary

    passages = torch.as_tensor(passages, dtype=torch.long)
    p, n = passages.shape
    if not 0 <= k <= n:
        raise ValueError(f"k must lie in [0, n={n}]")
    out, failures = [], 0
    while len(out) < count:
        x = passages[int(torch.randint(p, (1,), generator=gen))].clone()
        other = x[x != token]
        if len(other) == 0:
            raise ValueError("a seed passage consists only of the drift token")
        base_ok = tokenizer is not None and vocabulary.round_trips(tokenizer, x)
        for pos in (x == token).nonzero().flatten():        # clear existing copies
            x[pos] = other[int(torch.randint(len(other), (1,), generator=gen))]
        x[torch.randperm(n, generator=gen)[:k]] = token
        if base_ok and not vocabulary.round_trips(tokenizer, x):
            failures += 1
            if failures >= tries:
                raise ValueError(f"{tries} planted states in a row are not what the tokenizer would produce "
                                 f"from their text: the drift token does not fit these passages")
            continue
        failures = 0
        out.append(x)
    return torch.stack(out)


@dataclass
class DriftRow:
    temperature: float
    states: int
    k: int
    min_drift: float
    median_drift: float
    fraction_positive: float


def drift_table(scorer, passages, token: int, k: int, count: int, temperatures, gen: torch.Generator,
                tokenizer=None):
    """The preprint's drift table for one model: min, median and share of D > 0 per temperature."""
    states = states_with_k(passages, token, k, count, gen, tokenizer=tokenizer)
    rows, per_state = [], []
    all_d = drift(scorer, states, token, list(temperatures))
    for T, d in zip(temperatures, all_d):
        rows.append(DriftRow(T, len(d), k, float(d.min()), float(np.median(d)), float((d > 0).mean())))
        per_state.append(pd.DataFrame({"temperature": T, "state": np.arange(len(d)), "drift": d}))
    return pd.DataFrame([r.__dict__ for r in rows]), pd.concat(per_state, ignore_index=True), states
