"""The rectangle test of incompatibility (SPEC section 2).

A rectangle is a base sequence x, two positions i != j and replacements a -> a' at i and
b -> b' at j. With l_i(a -> a' | c) = log pi_i(a'|c) - log pi_i(a|c),

    path1 = l_i(a -> a' | b at j)  + l_j(b -> b' | a' at i)
    path2 = l_j(b -> b' | a at i)  + l_i(a -> a' | b' at j)
    R     = |path1 - path2|,

which is 0 for any family of conditionals that comes from one joint law. For a masked LM
the four masked inputs (site i with b or b' at j, site j with a or a' at i) of many
rectangles go through the scorer as one batch; for a causal LM the edges are differences
of sequence log-probabilities of the four corner states.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .models import CausalLMScorer

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

    For a masked LM the top-k comes from the masked conditional at that site; for a causal
    LM, from the next-token distribution at that position. Candidates are limited to the
    allowed vocabulary (the full vocabulary minus special tokens for a causal LM).
    """
    passages = torch.as_tensor(passages, dtype=torch.long)
    p, n = passages.shape
    if n < 2:
        raise ValueError("a rectangle needs n >= 2")
    if count < 1 or top_k < 1:
        raise ValueError("count and top_k must be positive")
    seq = torch.randint(p, (count,), generator=gen)
    i = torch.randint(n, (count,), generator=gen)
    j = (i + torch.randint(1, n, (count,), generator=gen)) % n
    base = passages[seq]
    a2, b2 = [], []
    for lo in range(0, count, batch):
        sl = slice(lo, lo + batch)
        for site, out in ((i, a2), (j, b2)):
            x, s = base[sl], site[sl]
            if isinstance(scorer, CausalLMScorer):
                logits = scorer.next_token_logits(x, s)
                ids = torch.arange(logits.shape[-1])
                special = torch.tensor(scorer.lm.tokenizer.all_special_ids, dtype=torch.long)
                logits[:, special] = -torch.inf
            else:
                logits = scorer.scores(x, s)
                ids = scorer.vocab.ids
            out.append(_topk_replacement(logits.cpu(), ids, x[torch.arange(len(s)), s], top_k, gen))
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


def score_causal(scorer: CausalLMScorer, rects: Rectangles, batch: int = 64) -> pd.DataFrame:
    """R for each rectangle of a joint model: every edge is a difference of log p of two corners."""
    corners = []
    for lo in range(0, len(rects), batch):
        sl = slice(lo, lo + batch)
        x, i, j = rects.base[sl], rects.i[sl], rects.j[sl]
        x10 = _with(x, i, rects.a_prime[sl])
        x01 = _with(x, j, rects.b_prime[sl])
        x11 = _with(x10, j, rects.b_prime[sl])
        corners.append(scorer.sequence_logprob(torch.cat([x, x10, x01, x11])).view(4, -1).T)
    lp = torch.cat(corners).numpy()          # (N, 4): x00, x10, x01, x11
    path1 = (lp[:, 1] - lp[:, 0]) + (lp[:, 3] - lp[:, 1])
    path2 = (lp[:, 2] - lp[:, 0]) + (lp[:, 3] - lp[:, 2])
    nan = np.full(len(rects), np.nan)
    return _frame(rects, 1.0, {"path1": path1, "path2": path2, "influence_ij": nan, "influence_ji": nan})


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


def experiment(model: dict, *, n: int, count: int, top_k: int, temperature: float, gen: torch.Generator,
               device: str = "auto", dtype: str = "auto", grid_k: int = 0, n_grids: int = 0):
    """The chapter's protocol for one model: load, cut passages, sample rectangles, score them.

    ``model`` is a dict with ``name``, ``kind`` ("mlm" or "causal"), ``corpus`` and optionally
    ``whole_words`` and ``rectangles`` (a per-model count that overrides ``count``). Returns
    (rectangles DataFrame, grid DataFrame or None, model description).
    """
    from . import corpus, models

    if temperature <= 0:
        raise ValueError("temperature must be positive")
    kind = model.get("kind", "mlm")
    count = int(model.get("rectangles", count))
    seed = int(torch.randint(2**31 - 1, (1,), generator=gen))
    if kind == "causal":
        lm = models.load(model["name"], kind=kind, device=device, dtype=dtype)
        _check_length(lm, n)
        scorer = CausalLMScorer(lm)
        passages = corpus.windows(lm.tokenizer, model["corpus"], n, count, seed)
        rects = sample(scorer, passages, count, gen, top_k=top_k)
        df = score_causal(scorer, rects)
        grids = None
    else:
        lm, scorer = models.open_mlm(model, device=device, dtype=dtype)
        _check_length(lm, n)
        vocab = scorer.vocab
        passages = corpus.windows(lm.tokenizer, model["corpus"], n, count, seed, vocab=vocab)
        rects = sample(scorer, passages, count, gen, top_k=top_k)
        df = score_mlm(scorer, rects, temperature=temperature)
        grids = None
        if grid_k >= 2 and n_grids > 0:
            rows = []
            for g in range(min(n_grids, len(rects))):
                x, i, j = rects.base[g], int(rects.i[g]), int(rects.j[g])
                a_list = _grid_tokens(scorer, x, i, grid_k, gen, top_k)
                b_list = _grid_tokens(scorer, x, j, grid_k, gen, top_k)
                res = grid(scorer, x, i, j, a_list, b_list, temperature)
                rows.append({"grid": g, "K": grid_k, "mean_R": res["mean_R"], "misfit": res["misfit"]})
            grids = pd.DataFrame(rows)
            grids.insert(0, "model", model["name"])
    df.insert(0, "model", model["name"])
    return df, grids, {**lm.describe(), "corpus": model["corpus"], "n": n, "rectangles": count}


def _check_length(lm, n: int) -> None:
    if n > lm.max_content_length:
        raise ValueError(f"n={n} exceeds what {lm.name} accepts ({lm.max_content_length} content tokens)")


def _grid_tokens(scorer, x: torch.Tensor, site: int, k: int, gen: torch.Generator, top_k: int) -> list[int]:
    """The current token at ``site`` followed by k - 1 distinct draws from the model's top-k there."""
    logits = scorer.scores(x.unsqueeze(0), torch.tensor([site])).cpu()[0]
    top = scorer.vocab.ids[logits.topk(min(top_k, len(logits))).indices]
    cur = int(x[site])
    cand = top[top != cur]
    pick = cand[torch.randperm(len(cand), generator=gen)[: k - 1]]
    return [cur] + pick.tolist()


def run_models(specs: list[dict], *, n: int, count: int, top_k: int, temperature: float, gen: torch.Generator,
               device: str = "auto", dtype: str = "auto", grid_k: int = 0, n_grids: int = 0,
               on_missing_model: str = "skip"):
    """:func:`experiment` for each model in turn.

    A model that cannot be had becomes a note (``on_missing_model="skip"``) or stops the run
    (``"fail"``). Returns (rectangles, grids, model descriptions, notes).
    """
    from .models import or_skip

    frames, grids, described, notes = [], [], [], []
    for spec in specs:
        out = or_skip(on_missing_model, notes, spec["name"], experiment, spec, n=n, count=count, top_k=top_k,
                      temperature=temperature, gen=gen, device=device, dtype=dtype, grid_k=grid_k, n_grids=n_grids)
        if out is None:
            continue
        df, g, info = out
        df.insert(1, "kind", spec.get("kind", "mlm"))
        frames.append(df)
        if g is not None:
            grids.append(g)
        described.append(info)
    rects = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    return rects, (pd.concat(grids, ignore_index=True) if grids else None), described, notes


def summary(rects: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Per model: count, mean R with a bootstrap 95% interval, median, max, and the rank
    correlation of R with the cross-influence of the two positions."""
    from .stats import bootstrap_ci

    rows = []
    for (model, kind), g in rects.groupby(["model", "kind"], sort=False):
        lo, hi = bootstrap_ci(g.R.to_numpy(), seed=seed)
        infl = g[["influence_ij", "influence_ji"]].mean(axis=1)
        rho = g.R.rank().corr(infl.rank()) if infl.notna().all() and len(g) > 2 else np.nan
        rows.append({"model": model, "kind": kind, "rectangles": len(g), "mean R": g.R.mean(),
                     "95% CI low": lo, "95% CI high": hi, "median R": g.R.median(), "max R": g.R.max(),
                     "Spearman(R, influence)": rho})
    return pd.DataFrame(rows)


def along_training(run: str, *, n: int, count: int, top_k: int, temperature: float, gen: torch.Generator,
                   device: str = "auto", dtype: str = "auto", seed: int = 0) -> pd.DataFrame:
    """Mean R of every saved checkpoint of a ``train_mlm`` run, on one fixed set of rectangles.

    The rectangles (bases, sites and replacements) are drawn once with the final model and then
    scored with each checkpoint's conditionals, so the curve shows how incompatibility moves as
    the model learns, not sampling noise.
    """
    import json

    from . import corpus, models
    from .stats import bootstrap_ci
    from .train_mlm import models_root
    from .vocabulary import allowed_vocabulary

    folder = models_root() / run
    manifest = json.loads((folder / "manifest.json").read_text())
    final = models.load(f"trained:{run}", device=device, dtype=dtype)
    vocab = allowed_vocabulary(final.tokenizer)
    passages = corpus.windows(final.tokenizer, manifest["corpus"]["name"], n, count,
                              int(torch.randint(2**31 - 1, (1,), generator=gen)), vocab=vocab)
    rects = sample(models.MaskedLMScorer(final, vocab), passages, count, gen, top_k=top_k)
    rows = []
    for r in manifest["runs"]:
        for c in r["checkpoints"]:
            lm = models.load(f"trained:{run}@{c['path']}", device=device, dtype=dtype)
            R = score_mlm(models.MaskedLMScorer(lm, vocab), rects, temperature=temperature).R.to_numpy()
            lo, hi = bootstrap_ci(R, seed=seed)
            rows.append({"run": run, "start": r["start"], "checkpoint": c["checkpoint"], "step": c["step"],
                         "tokens_seen": c["tokens_seen"], "fraction": c["fraction"], "top1": c["top1"],
                         "top5": c["top5"], "heldout_loss": c["heldout_loss"], "mean R": float(R.mean()),
                         "95% CI low": lo, "95% CI high": hi, "chosen": r["start"] == manifest["chosen"]})
    return pd.DataFrame(rows)
