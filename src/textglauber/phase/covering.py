"""Chains that cover the model's own mass: each site gets a small set of tokens S_i, grown until
the chain restricted to prod S_i leaves out at most eps of every conditional it visits.

The two-token chains of :mod:`textglauber.phase` are other chains than the model's: a site of the
model's chain may write any token of the allowed vocabulary A. Here the sets are chosen from the
model's conditionals themselves (:func:`cover`), the mass the restricted chain leaves out is
measured exactly (``Covering.left_out``), and :mod:`textglauber.phase.transfer` turns that mass
into a rigorous lower bound on the full chain's mixing time.

A state of the restricted chain is a token tuple x with x_i in S_i; states are numbered in mixed
radix, site 0 the most significant digit and each digit the token's position in its sorted set
(:class:`ProductSpace`)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp
import torch
from scipy.special import log_softmax, softmax

from .transfer import transfer_lower_bound


# ---------------------------------------------------------------------------------- state spaces

@dataclass
class ProductSpace:
    """The product of per-site token sets, numbered in mixed radix (site 0 most significant)."""

    sets: list

    def __post_init__(self):
        self.sets = [np.unique(np.asarray(s, np.int64)) for s in self.sets]

    @property
    def radices(self) -> np.ndarray:
        return np.array([len(s) for s in self.sets], np.int64)

    @property
    def size(self) -> int:
        return int(np.prod([len(s) for s in self.sets], dtype=object))

    @property
    def strides(self) -> np.ndarray:
        """The index step of one position at each site: the product of the later sites' radices."""
        r = self.radices
        return np.concatenate([np.cumprod(r[::-1])[::-1][1:], [1]]).astype(np.int64)

    def tokens(self, index) -> np.ndarray:
        """The (..., n) token ids of each state index."""
        pos = np.asarray(index, np.int64)[..., None] // self.strides % self.radices
        return np.stack([s[pos[..., i]] for i, s in enumerate(self.sets)], axis=-1)

    def index(self, tokens) -> np.ndarray:
        """The state index of each (..., n) token tuple; an error for a token outside its site's set."""
        tokens = np.asarray(tokens, np.int64)
        pos = np.stack([np.searchsorted(s, tokens[..., i]) for i, s in enumerate(self.sets)], axis=-1)
        found = [s[np.minimum(pos[..., i], len(s) - 1)] == tokens[..., i] for i, s in enumerate(self.sets)]
        if not np.all(found):
            raise ValueError("a state holds a token outside its site's set")
        return (pos * self.strides).sum(-1)

    def states(self) -> np.ndarray:
        """Every state as an (size, n) array of token ids, in index order."""
        return self.tokens(np.arange(self.size))


# ------------------------------------------------------------------------------------- covering

@dataclass
class Covering:
    """The sets of a covering and what they leave out.

    ``left_out`` is the largest, over the states x of prod S_i and the sites i, of the mass
    1 - pi_i(S_i | x_{-i}) the model puts outside S_i (summed over the tokens outside, never taken
    as 1 minus the mass inside). ``step_left_out`` is the largest over states of that mass averaged
    over the sites: the chance that one step of the coupled pair (a uniform site) splits them, the
    number the uniform transfer bound uses (at most ``left_out``, and up to n times smaller);
    ``state_left_out`` holds that site average at every state, in index order, for the bound that
    weighs the leak along the chain's path (:mod:`.transfer`). ``rows`` holds
    every masked row scored, keyed by (site, context tuple): the logits of all of A, so the
    restricted kernel needs no further model call."""

    sets: list
    left_out: float
    step_left_out: float
    states: int
    rows_scored: int
    rounds: int
    complete: bool
    reason: str
    temperature: float
    eps: float
    vocab_ids: np.ndarray
    state_left_out: np.ndarray = field(repr=False)
    rows: dict = field(repr=False, default_factory=dict)

    @property
    def space(self) -> ProductSpace:
        return ProductSpace(self.sets)


def _contexts(states: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct contexts of site i among the states (the other sites' tokens, in site order),
    and each state's position among them."""
    return np.unique(np.delete(states, i, axis=1), axis=0, return_inverse=True)


def _site_rows(scorer, rows: dict, i: int, contexts: np.ndarray, filler: int, batch: int) -> tuple[np.ndarray, int]:
    """The (len(contexts), |A|) logits of site i in each context, scoring only the contexts not yet
    in ``rows`` (the masked site holds ``filler``, which the model never sees). Returns the logits and
    the number of rows scored."""
    keys = [(i, tuple(c)) for c in contexts.tolist()]
    new = [k for k, c in enumerate(keys) if c not in rows]
    for lo in range(0, len(new), batch):
        chunk = new[lo:lo + batch]
        x = np.insert(contexts[chunk], i, filler, axis=1)
        sc = scorer.scores(torch.as_tensor(x), torch.full((len(chunk),), i)).double().cpu().numpy()
        for k, row in zip(chunk, sc):
            rows[keys[k]] = row
    return np.stack([rows[k] for k in keys]), len(new)


def _outside_mass(logits: np.ndarray, temperature: float, inside: np.ndarray) -> np.ndarray:
    """Each row's conditional mass on the columns not flagged in ``inside``, summed directly."""
    p = np.exp(log_softmax(logits / temperature, axis=1))
    return np.where(inside, 0.0, p).sum(1)


def _top_columns(logits: np.ndarray, temperature: float, eps: float) -> np.ndarray:
    """The columns of A in the smallest top sets (by logit, ties in column order) whose outside mass
    is at most eps, i.e. whose mass reaches 1 - eps, united over the rows."""
    order = np.argsort(-logits, axis=1, kind="stable")
    p = np.take_along_axis(np.exp(log_softmax(logits / temperature, axis=1)), order, axis=1)
    tail = np.cumsum(p[:, ::-1], axis=1)[:, ::-1]               # tail[:, k] = mass outside the top k
    fits = np.concatenate([tail[:, 1:], np.zeros((len(p), 1))], axis=1) <= eps
    size = fits.argmax(1) + 1
    return np.unique(np.concatenate([order[r, :k] for r, k in enumerate(size)]))


def cover(scorer, seed, temperature: float, eps: float, *, max_states: int, max_rounds: int = 20,
          batch: int = 2048) -> Covering:
    """Grow per-site token sets from ``seed`` until the restricted chain leaves out at most eps.

    Start with S_i = {seed_i}. Each round enumerates prod S_i; for every site i and every context
    of i among those states it takes the model's conditional pi_i^T(. | context) over all of A and
    adds to S_i the smallest set of top tokens whose mass reaches 1 - eps. A row is scored once
    for the whole run (rows of earlier rounds are kept). The rounds stop at closure (no set grew:
    ``complete``, and then ``left_out`` <= eps), or when the grown sets would hold more than
    ``max_states`` states, or after ``max_rounds`` rounds; the sets reported are always the last
    ones enumerated, so ``left_out`` is exact for them.

    The closure is greedy: the least family of sets that holds the seed and, for every state of its
    product and every site, that site's top set in the state's context. It is not necessarily the
    smallest family leaving out at most eps (another choice of tokens per context might close on
    fewer), so its sizes are an upper bound on what a covering needs, not the minimum."""
    vocab_ids = scorer.vocab.ids.numpy()
    seed = np.asarray(seed, np.int64)
    longest = getattr(scorer, "max_length", seed.size)
    if seed.ndim != 1 or not 1 <= len(seed) <= longest:
        raise ValueError(f"the seed must be one token tuple, 1 to {longest} long; got shape {seed.shape}")
    if (scorer.vocab.index_of(torch.as_tensor(seed)) < 0).any():
        raise ValueError("the seed holds a token outside the scorer's allowed vocabulary")
    n, rows, scored = len(seed), {}, 0
    sets = [seed[i:i + 1] for i in range(n)]
    for rounds in range(1, max_rounds + 1):
        states = ProductSpace(sets).states()
        grown, left, per_state = [], 0.0, np.zeros(len(states))
        for i in range(n):
            contexts, where = _contexts(states, i)
            logits, new = _site_rows(scorer, rows, i, contexts, int(sets[i][0]), batch)
            scored += new
            out = _outside_mass(logits, temperature, np.isin(vocab_ids, sets[i]))
            left = max(left, float(out.max()))
            per_state += out[where.ravel()] / n
            grown.append(np.union1d(sets[i], vocab_ids[_top_columns(logits, temperature, eps)]))
        done = all(len(g) == len(s) for g, s in zip(grown, sets))
        size = ProductSpace(grown).size
        if done or size > max_states or rounds == max_rounds:
            break
        sets = grown
    reason = ("closed" if done else f"the sets outgrow max_states = {max_states} ({size} states next)"
              if size > max_states else f"no closure within max_rounds = {max_rounds}")
    return Covering(sets, left, float(per_state.max()), ProductSpace(sets).size, scored, rounds, done, reason,
                    temperature, eps, vocab_ids, per_state, rows)


# --------------------------------------------------------------------------------------- kernel

def restricted_kernel(cov: Covering, temperature: float) -> sp.csr_matrix:
    """The exact kernel of the chain restricted to prod S_i (CSR, row-stochastic, float64).

    From x: pick site i with probability 1/n and write a of S_i with probability
    exp(s_i(a | x_{-i}) / T) / sum over b in S_i of exp(s_i(b | x_{-i}) / T), the model's
    conditional renormalised over S_i, read from the covering's stored rows (no model call).
    P(x, x) is the sum of the n write-back terms, never 1 minus the moves. ``left_out`` describes
    this chain at the covering's own temperature only."""
    space = cov.space
    states, n, strides = space.states(), len(cov.sets), space.strides
    index = np.arange(len(states))
    hold = np.zeros(len(states))
    rows, cols, vals = [], [], []
    for i, s_i in enumerate(space.sets):
        contexts, where = _contexts(states, i)
        logits = np.stack([cov.rows[(i, tuple(c))] for c in contexts.tolist()])[where.ravel()]
        q = softmax(logits[:, np.searchsorted(cov.vocab_ids, s_i)] / temperature, axis=1)
        own = np.searchsorted(s_i, states[:, i])
        hold += q[index, own] / n
        for a in range(len(s_i)):
            moves = own != a
            rows.append(index[moves])
            cols.append(index[moves] + (a - own[moves]) * strides[i])
            vals.append(q[moves, a] / n)
    rows, cols, vals = [index, *rows], [index, *cols], [hold, *vals]
    shape = (len(states), len(states))
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=shape)


# ---------------------------------------------------------------------------------------- table

COVERING_COLUMNS = ["model", "n", "temperature", "epsilon", "left_out", "step_left_out", "tokens_per_site", "sets", "states",
                    "complete", "t_rel", "t_mix", "t_mix_full_lower", "transfer", "rows_scored"]


def sets_text(scorer, sets) -> str:
    """The sets as text, "a/b/c" per site joined by spaces (the tokenizer's tokens, else the ids)."""
    tok = getattr(getattr(getattr(scorer, "lm", None), "tokenizer", None), "convert_ids_to_tokens", None)
    name = (lambda ids: tok([int(t) for t in ids])) if tok is not None else (lambda ids: [str(int(t)) for t in ids])
    return " ".join("/".join(name(s)) for s in sets)


def covering_row(scorer, model_name: str, seed, temperature: float, *, eps: float, max_states: int,
                 tmix_max_states: int) -> dict:
    """One cell of :func:`covering_table`: the covering, the restricted chain's times and the transfer
    bound on the full chain (NaN with the reason where nothing transfers).

    The bound weighs the leak along the restricted chain's path (:mod:`.transfer`), measured at
    every state of the sets reported, so it holds whether or not the sets closed at eps: an open
    covering is a restriction whose leak is known exactly, only larger somewhere than eps."""
    cov = cover(scorer, seed, temperature, eps, max_states=max_states)
    tr = transfer_lower_bound(restricted_kernel(cov, temperature), cov.state_left_out, max_states=tmix_max_states)
    return {"model": model_name, "n": len(cov.sets), "temperature": float(temperature), "epsilon": float(eps),
            "left_out": cov.left_out, "step_left_out": cov.step_left_out, "tokens_per_site": " ".join(str(len(s)) for s in cov.sets),
            "sets": sets_text(scorer, cov.sets), "states": cov.states, "complete": cov.complete,
            "t_rel": tr.t_rel, "t_mix": tr.t_mix, "t_mix_full_lower": tr.t_lower,
            "transfer": tr.reason if cov.complete or tr.reason != "holds" else f"holds (open sets: {cov.reason})",
            "rows_scored": cov.rows_scored}


def covering_table(scorer, model_name: str, seeds_by_n: dict, temperatures, *, eps: float, max_states: int,
                   tmix_max_states: int) -> pd.DataFrame:
    """One row per (n, T): the covering grown from the seed of length n at temperature T, what it
    leaves out, its cost in masked rows, the restricted chain's t_rel and t_mix(1/4), and the
    transfer bound on the full chain's t_mix(1/4). Higher T flattens the conditionals, so the sets
    grow; a cell whose sets outgrow ``max_states`` is reported with ``complete`` False, on the last
    sets enumerated, with their exact leak.
    No wall-clock time is kept: it went into the parquet file's metadata, so two runs of the same
    cells wrote different bytes."""
    out = []
    for n, seed in sorted(seeds_by_n.items()):
        if len(seed) != n:
            raise ValueError(f"the seed for n = {n} has {len(seed)} tokens")
        for T in temperatures:
            out.append(covering_row(scorer, model_name, seed, T, eps=eps, max_states=max_states,
                                    tmix_max_states=tmix_max_states))
    return pd.DataFrame(out, columns=COVERING_COLUMNS)
