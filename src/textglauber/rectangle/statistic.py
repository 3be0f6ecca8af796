"""The rectangle statistic (docs/science.md, chapter 1): rectangles, their sampling, R from a
scorer's four conditionals, and the K x K grid that generalises one rectangle."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

COLUMNS = ["model", "kind", "seq_id", "base", "i", "j", "a", "b", "a_prime", "b_prime", "temperature",
           "path1", "path2", "R", "influence_ij", "influence_ji"]


@dataclass
class Rectangles:
    """A batch of rectangles: base sequences (N, n) and the rectangle coordinates (N,)."""

    seq_id: np.ndarray
    base: torch.Tensor
    i: torch.Tensor
    j: torch.Tensor
    a_prime: torch.Tensor
    b_prime: torch.Tensor

    @property
    def a(self) -> torch.Tensor:
        return self.base[torch.arange(len(self.i)), self.i]

    @property
    def b(self) -> torch.Tensor:
        return self.base[torch.arange(len(self.j)), self.j]

    def __len__(self) -> int:
        return len(self.i)


def _topk_replacement(logits: torch.Tensor, token_ids: torch.Tensor, current: torch.Tensor, k: int,
                      gen: torch.Generator) -> torch.Tensor:
    """Per row, a token drawn uniformly from the top-k of ``logits`` other than ``current``."""
    k = min(k + 1, logits.shape[-1])
    top = token_ids[logits.topk(k, dim=-1).indices.cpu()]              # (N, k) token ids
    keep = top != current.unsqueeze(1)
    choice = []
    for row, ok in zip(top, keep):
        cand = row[ok][: k - 1]
        choice.append(cand[torch.randint(len(cand), (1,), generator=gen)].item())
    return torch.tensor(choice, dtype=torch.long)


def sample(scorer, passages: torch.Tensor, count: int, gen: torch.Generator, top_k: int = 50,
           batch: int = 64) -> Rectangles:
    """``count`` rectangles over the (P, n) passages: random i != j, replacements from the top-k.

    Sites are drawn uniformly among the positions whose token lies in the scorer's allowed
    vocabulary (every position, for windows cut from allowed tokens only); the replacement at
    each site is drawn uniformly from the top-k of the scorer's conditional there, the current
    token excluded.
    """
    passages = torch.as_tensor(passages, dtype=torch.long)
    p, n = passages.shape
    if n < 2:
        raise ValueError("a rectangle needs n >= 2")
    if count < 1 or top_k < 1:
        raise ValueError("count and top_k must be positive")
    allowed = scorer.vocab.contains(passages)
    if (allowed.sum(1) < 2).any():
        raise ValueError("every passage needs at least two positions holding allowed tokens")
    seq = torch.randint(p, (count,), generator=gen)
    base = passages[seq]
    if bool(allowed.all()):
        i = torch.randint(n, (count,), generator=gen)
        j = (i + torch.randint(1, n, (count,), generator=gen)) % n
    else:
        ok = allowed[seq].double()
        i = torch.multinomial(ok, 1, generator=gen).squeeze(1)
        ok[torch.arange(count), i] = 0
        j = torch.multinomial(ok, 1, generator=gen).squeeze(1)
    a2, b2 = [], []
    for lo in range(0, count, batch):
        sl = slice(lo, lo + batch)
        for site, out in ((i, a2), (j, b2)):
            x, s = base[sl], site[sl]
            logits = scorer.scores(x, s)
            out.append(_topk_replacement(logits.cpu(), scorer.vocab.ids, x[torch.arange(len(s)), s], top_k, gen))
    return Rectangles(seq_id=seq.numpy(), base=base, i=i, j=j, a_prime=torch.cat(a2), b_prime=torch.cat(b2))


def _with(x: torch.Tensor, pos: torch.Tensor, tok: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y[torch.arange(len(pos)), pos] = tok
    return y


def _tv(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return 0.5 * (p - q).abs().sum(-1)


def score_mlm(scorer, rects: Rectangles, temperature: float = 1.0, batch: int = 64) -> pd.DataFrame:
    """R for each rectangle from the conditionals of a masked LM (4 masked rows per rectangle)."""
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    cols = {k: [] for k in ("path1", "path2", "influence_ij", "influence_ji")}
    pos_of = scorer.vocab.index_of
    for lo in range(0, len(rects), batch):
        sl = slice(lo, lo + batch)
        x, i, j = rects.base[sl], rects.i[sl], rects.j[sl]
        a, b, a2, b2 = rects.a[sl], rects.b[sl], rects.a_prime[sl], rects.b_prime[sl]
        if (pos_of(torch.cat([a, b, a2, b2])) < 0).any():
            raise ValueError("a rectangle token lies outside the allowed vocabulary")
        m = len(i)
        states = torch.cat([x, _with(x, j, b2), x, _with(x, i, a2)])     # i|b, i|b', j|a, j|a'
        sites = torch.cat([i, i, j, j])
        logp = torch.log_softmax(scorer.scores(states, sites).double().cpu() / temperature, dim=-1)
        rows = torch.arange(m)
        i_b, i_b2, j_a, j_a2 = logp[:m], logp[m:2 * m], logp[2 * m:3 * m], logp[3 * m:]
        pa, pa2, pb, pb2 = pos_of(a), pos_of(a2), pos_of(b), pos_of(b2)
        l_i_given_b = i_b[rows, pa2] - i_b[rows, pa]
        l_i_given_b2 = i_b2[rows, pa2] - i_b2[rows, pa]
        l_j_given_a = j_a[rows, pb2] - j_a[rows, pb]
        l_j_given_a2 = j_a2[rows, pb2] - j_a2[rows, pb]
        cols["path1"].append(l_i_given_b + l_j_given_a2)
        cols["path2"].append(l_j_given_a + l_i_given_b2)
        cols["influence_ij"].append(_tv(i_b.exp(), i_b2.exp()))
        cols["influence_ji"].append(_tv(j_a.exp(), j_a2.exp()))
    return _frame(rects, temperature, {k: torch.cat(v).numpy() for k, v in cols.items()})


def _frame(rects: Rectangles, temperature: float, cols: dict) -> pd.DataFrame:
    return pd.DataFrame({
        "seq_id": rects.seq_id, "base": [row.tolist() for row in rects.base],
        "i": rects.i.numpy(), "j": rects.j.numpy(), "a": rects.a.numpy(), "b": rects.b.numpy(),
        "a_prime": rects.a_prime.numpy(), "b_prime": rects.b_prime.numpy(), "temperature": temperature,
        "path1": cols["path1"], "path2": cols["path2"], "R": np.abs(cols["path1"] - cols["path2"]),
        "influence_ij": cols["influence_ij"], "influence_ji": cols["influence_ji"]})


def grid(scorer, x: torch.Tensor, i: int, j: int, a_list: list[int], b_list: list[int],
         temperature: float = 1.0) -> dict:
    """The K x K generalisation: every rectangle spanned by replacement lists at i and j.

    Returns the matrix of R over all pairs of grid corners anchored at (a_list[0], b_list[0]),
    its mean over all rectangles of the grid, and the least-squares misfit of the best joint
    log mu on the K x K grid to both families of log-ratios (0 exactly when compatible).
    """
    x = torch.as_tensor(x, dtype=torch.long)
    k = len(a_list)
    if len(b_list) != k or k < 2:
        raise ValueError("a_list and b_list must have the same length K >= 2")
    a_t, b_t = torch.tensor(a_list), torch.tensor(b_list)
    states = torch.cat([_with(x.repeat(k, 1), torch.full((k,), j), b_t),       # site i given b_l
                        _with(x.repeat(k, 1), torch.full((k,), i), a_t)])      # site j given a_k
    sites = torch.cat([torch.full((k,), i), torch.full((k,), j)])
    logp = torch.log_softmax(scorer.scores(states, sites).double().cpu() / temperature, dim=-1)
    pa, pb = scorer.vocab.index_of(a_t), scorer.vocab.index_of(b_t)
    Li = logp[:k][:, pa].numpy()        # Li[l, k'] = log pi_i(a_k' | b_l)
    Lj = logp[k:][:, pb].numpy()        # Lj[k', l] = log pi_j(b_l | a_k')
    R = np.zeros((k, k, k, k))
    for (k0, k1, l0, l1) in np.ndindex(k, k, k, k):
        p1 = (Li[l0, k1] - Li[l0, k0]) + (Lj[k1, l1] - Lj[k1, l0])
        p2 = (Lj[k0, l1] - Lj[k0, l0]) + (Li[l1, k1] - Li[l1, k0])
        R[k0, k1, l0, l1] = abs(p1 - p2)
    # least squares: g[k, l] = log mu(a_k, b_l) up to a constant must match every edge
    eqs, rhs = [], []
    for l in range(k):
        for k1 in range(1, k):
            e = np.zeros((k, k)); e[k1, l] += 1; e[0, l] -= 1
            eqs.append(e.ravel()); rhs.append(Li[l, k1] - Li[l, 0])
    for kk in range(k):
        for l1 in range(1, k):
            e = np.zeros((k, k)); e[kk, l1] += 1; e[kk, 0] -= 1
            eqs.append(e.ravel()); rhs.append(Lj[kk, l1] - Lj[kk, 0])
    A, y = np.array(eqs), np.array(rhs)
    sol, *_ = np.linalg.lstsq(A, y, rcond=None)
    misfit = float(np.sqrt(np.mean((A @ sol - y) ** 2)))
    off = [R[k0, k1, l0, l1] for (k0, k1, l0, l1) in np.ndindex(k, k, k, k) if k0 < k1 and l0 < l1]
    return {"R": R, "mean_R": float(np.mean(off)), "misfit": misfit}


def rectangles_of(df: pd.DataFrame) -> Rectangles:
    """The rectangles of a scored frame (one model's rows), to score them again."""
    return Rectangles(seq_id=df["seq_id"].to_numpy(), base=torch.tensor(np.stack(df["base"].map(np.asarray).to_list())),
                      i=torch.tensor(df["i"].to_numpy()), j=torch.tensor(df["j"].to_numpy()),
                      a_prime=torch.tensor(df["a_prime"].to_numpy()), b_prime=torch.tensor(df["b_prime"].to_numpy()))
