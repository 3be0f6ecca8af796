"""The two-token chain itself (see :mod:`textglauber.phase` for the conventions): states as bit
vectors, the score table of every (site, context), the exact kernel, and Dobrushin's influence
coefficients read off the table (docs/science.md, chapter 2)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
from scipy.special import expit

# ----------------------------------------------------------------------------------------- states

def site_bits(states: np.ndarray, n: int) -> np.ndarray:
    """The (..., n) bits of each state index, site 0 first (the most significant bit)."""
    states = np.asarray(states, np.int64)
    shifts = np.arange(n - 1, -1, -1)
    return (states[..., None] >> shifts) & 1


def context_of(states, sites, n: int) -> np.ndarray:
    """The context index of each (state, site): the state's other n - 1 bits, in site order."""
    states, sites = np.asarray(states, np.int64), np.asarray(sites, np.int64)
    low_width = n - 1 - sites
    high = states >> (low_width + 1)
    low = states & ((np.int64(1) << low_width) - 1)
    return (high << low_width) | low


def with_context(contexts, sites, bit, n: int) -> np.ndarray:
    """The state index whose site ``sites`` holds ``bit`` and whose other sites hold ``contexts``."""
    contexts, sites = np.asarray(contexts, np.int64), np.asarray(sites, np.int64)
    low_width = n - 1 - sites
    high = contexts >> low_width
    low = contexts & ((np.int64(1) << low_width) - 1)
    return (high << (low_width + 1)) | (np.asarray(bit, np.int64) << low_width) | low


# ---------------------------------------------------------------------------------------- scoring

@dataclass
class Scores:
    """The model's logits for the two tokens of every site in every context.

    ``logits[i, c, b]`` is s_i(pair_i[b] | context c) in the model's own frame (special tokens
    around the content); ``rows_scored`` counts the masked rows the model was asked for (0 for a
    synthetic table)."""

    logits: np.ndarray                # (n, 2^(n-1), 2) float64
    pairs: np.ndarray | None = None   # (n, 2) token ids, or None for a synthetic table
    rows_scored: int = 0

    def __post_init__(self):
        self.logits = np.asarray(self.logits, np.float64)
        n = self.logits.shape[0]
        if self.logits.shape != (n, 2 ** (n - 1), 2):
            raise ValueError(f"logits must have shape (n, 2^(n-1), 2), got {self.logits.shape}")

    @property
    def n(self) -> int:
        return self.logits.shape[0]

    def p_one(self, temperature: float) -> np.ndarray:
        """p_i(1 | c) for every site and context, (n, 2^(n-1)), from the logit difference (stable)."""
        return expit((self.logits[..., 1] - self.logits[..., 0]) / temperature)


def _check_pairs(scorer, pairs: np.ndarray) -> np.ndarray:
    """The pairs' columns in the scorer's allowed vocabulary, after checking the pairs make sense."""
    if pairs.ndim != 2 or pairs.shape[1] != 2 or len(pairs) < 1:
        raise ValueError(f"pairs must be an (n, 2) array of token ids, got shape {pairs.shape}")
    if (pairs[:, 0] == pairs[:, 1]).any():
        raise ValueError("a site's two tokens must differ")
    if len(pairs) > getattr(scorer, "max_length", len(pairs)):
        raise ValueError(f"n = {len(pairs)} exceeds the model's content length {scorer.max_length}")
    cols = scorer.vocab.index_of(torch.as_tensor(pairs)).numpy()
    if (cols < 0).any():
        raise ValueError(f"tokens {sorted(set(pairs[cols < 0].tolist()))} are not in the scorer's allowed vocabulary")
    return cols


def score_table(scorer, pairs, batch: int = 2048) -> Scores:
    """Every logit the two-token chain on ``pairs`` can ask for, each (site, context) scored once.

    Row r = i * 2^(n-1) + c is site i masked in the state whose other sites hold context c (the
    site's own token is irrelevant: it is masked). Rows go to ``scorer.scores`` ``batch`` at a
    time; the two logits of the site's pair are kept from the row of allowed-vocabulary logits."""
    pairs = np.asarray(pairs, np.int64)
    cols = _check_pairs(scorer, pairs)
    n = len(pairs)
    rows = n * 2 ** (n - 1)
    sites = np.repeat(np.arange(n), 2 ** (n - 1))
    contexts = np.tile(np.arange(2 ** (n - 1)), n)
    out = np.empty((rows, 2))
    for lo in range(0, rows, batch):
        i, c = sites[lo:lo + batch], contexts[lo:lo + batch]
        bits = site_bits(with_context(c, i, 0, n), n)
        tokens = pairs[np.arange(n), bits]                        # (B, n) token ids
        sc = scorer.scores(torch.as_tensor(tokens), torch.as_tensor(i)).double().cpu().numpy()
        out[lo:lo + batch] = np.take_along_axis(sc, cols[i], axis=1)
    return Scores(out.reshape(n, 2 ** (n - 1), 2), pairs, rows)


# ----------------------------------------------------------------------------------------- kernel

def kernel(scores: Scores, temperature: float) -> sp.csr_matrix:
    """The exact kernel P (2^n x 2^n, row-stochastic, float64) at temperature T.

    From state x: pick site i with probability 1/n and write bit b with probability p_i(b | x_{-i}).
    Writing the other bit moves the chain; writing the same bit back holds it, so P(x, x) is the sum
    of the n write-back terms (never 1 minus the moves: that would lose a deep trap's digits). Both
    probabilities come from the logit difference through the logistic function, each computed
    directly, so a probability of 1e-30 keeps its digits."""
    n, states = scores.n, np.arange(2 ** scores.n)
    d = (scores.logits[..., 1] - scores.logits[..., 0]) / temperature
    hold = np.zeros(len(states))
    rows, cols, vals = [states], [states], []
    for i in range(n):
        di = d[i, context_of(states, i, n)]
        bit = (states >> (n - 1 - i)) & 1
        signed = np.where(bit == 1, di, -di)                      # favours the current bit when > 0
        hold += expit(signed) / n
        rows.append(states)
        cols.append(states ^ (1 << (n - 1 - i)))
        vals.append(expit(-signed) / n)
    vals.insert(0, hold)
    shape = (len(states), len(states))
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=shape)


# ---------------------------------------------------------------------------------------- alpha

def dobrushin_alpha(scores: Scores, temperature: float) -> tuple[float, np.ndarray]:
    """Exact influence coefficients alpha_ij = max over contexts differing only at site j of
    |p_i(1 | x) - p_i(1 | y)| (the TV distance of two conditionals on two tokens), and Dobrushin's
    alpha = max_i sum_{j != i} alpha_ij (docs/science.md, chapter 2).

    Site i's p_i(1 | .) over its 2^(n-1) contexts is reshaped to one axis per other site, so the
    differences across site j are one ``numpy.diff`` along that axis."""
    n, p1 = scores.n, scores.p_one(temperature)
    A = np.zeros((n, n))
    for i in range(n):
        table = p1[i].reshape((2,) * (n - 1))
        others = [j for j in range(n) if j != i]
        for axis, j in enumerate(others):
            A[i, j] = np.abs(np.diff(table, axis=axis)).max()
    return float(A.sum(1).max()), A
