"""The rectangle test of incompatibility (docs/science.md, chapter 1).

A rectangle is a base sequence x, two positions i != j and replacements a -> a' at i and
b -> b' at j. With l_i(a -> a' | c) = log pi_i(a'|c) - log pi_i(a|c),

    path1 = l_i(a -> a' | b at j)  + l_j(b -> b' | a' at i)
    path2 = l_j(b -> b' | a at i)  + l_i(a -> a' | b' at j)
    R     = |path1 - path2|,

which is 0 for any family of conditionals that comes from one joint law. The four
conditionals of many rectangles (site i with b or b' at j, site j with a or a' at i) go
through a scorer as one batch. A masked LM's scorer gives its masked conditionals; the
joint-model control (:class:`JointConditionals`) gives conditionals derived from a causal
LM's sequence probabilities over a fixed candidate set, pi_i(a | x_-i) proportional to
p(x with a at i), and goes through exactly the same sampling and scoring code, so its R is
zero only because its conditionals are compatible, up to float error.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .models import CausalLMScorer
from . import reported, vocabulary
from .profile import Control, IncompatibilityModel
from .vocabulary import AllowedVocab

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


class JointConditionals:
    """The conditionals of a causal LM's joint law over a fixed candidate set C (the vocab).

    scores(x, i)[a] = log p(x with a at i) up to a per-row constant, so after the softmax
    pi_i(a | x_-i) = p(x^{i<-a}) / sum over c in C of p(x^{i<-c}): a compatible family (the
    conditionals of p restricted to C at the scored site). Each conditional costs |C| sequence
    probabilities; rows already computed are kept (``cache``), because the rectangle sampler
    and the scorer ask for the conditional at i given the base window twice.
    """

    def __init__(self, causal: CausalLMScorer, vocab: AllowedVocab, cache: bool = True):
        if vocab.size < 2:
            raise ValueError("the candidate set needs at least two tokens")
        self.causal, self.vocab = causal, vocab
        self._cache: dict | None = {} if cache else None

    @property
    def max_length(self) -> int:
        return self.causal.max_length

    def scores(self, states: torch.Tensor, sites: torch.Tensor) -> torch.Tensor:
        states, sites = states.cpu(), sites.cpu()
        if self._cache is None:
            return self.causal.candidate_logprobs(states, sites, self.vocab.ids)
        keys = [(x.numpy().tobytes(), int(s)) for x, s in zip(states, sites)]
        todo = sorted({k: r for r, k in enumerate(keys) if k not in self._cache}.values())
        if todo:
            idx = torch.tensor(todo)
            rows = self.causal.candidate_logprobs(states[idx], sites[idx], self.vocab.ids)
            for r, row in zip(todo, rows):
                self._cache[keys[r]] = row
        return torch.stack([self._cache[k] for k in keys])


class PerturbedScorer:
    """A scorer with fixed random noise added to its log-scores: a control that must fail.

    The noise is a standard normal per (context x_-i, site, candidate) times ``scale``, drawn
    from a hash of the context, so the same conditional always gets the same noise. With
    ``site`` given, only that site's conditional is perturbed. Each rectangle's R then adds
    eight independent noise terms with signs +-1, so on a compatible family
    E[R] = scale * sqrt(16 / pi) when every site is perturbed.
    """

    def __init__(self, inner, scale: float, seed: int = 0, site: int | None = None):
        if scale < 0:
            raise ValueError("scale must be non-negative")
        self.inner, self.scale, self.seed, self.site = inner, float(scale), int(seed), site
        self.vocab = inner.vocab

    @property
    def max_length(self) -> int:
        return self.inner.max_length

    def noise(self, states: torch.Tensor, sites: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(len(sites), self.vocab.size, dtype=torch.float64)
        for r, (x, s) in enumerate(zip(states.cpu(), sites.cpu().tolist())):
            if self.site is not None and s != self.site:
                continue
            ctx = x.clone()
            ctx[s] = -1                                    # the conditional does not see x_i
            h = hashlib.blake2b(ctx.numpy().tobytes(), digest_size=8,
                                key=f"{self.seed}:{s}".encode())
            rng = np.random.default_rng(int.from_bytes(h.digest(), "little"))
            out[r] = torch.from_numpy(rng.standard_normal(self.vocab.size))
        return self.scale * out

    def scores(self, states: torch.Tensor, sites: torch.Tensor) -> torch.Tensor:
        return self.inner.scores(states, sites).double().cpu() + self.noise(states, sites)


def candidate_vocab(tokenizer, source: str, k: int) -> AllowedVocab:
    """The k most frequent tokens of a corpus (special tokens excluded; ties by token id)."""
    from . import corpus

    if k < 2:
        raise ValueError("the candidate set needs at least two tokens")
    special = set(tokenizer.all_special_ids)
    counts = Counter(t for text in corpus.texts(source)
                     for t in tokenizer(text, add_special_tokens=False)["input_ids"] if t not in special)
    top = sorted(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k])
    ids = [t for t, _ in top]
    return AllowedVocab(ids=torch.tensor(ids, dtype=torch.long),
                        tokens=tuple(tokenizer.convert_ids_to_tokens(ids)),
                        vocab_size=max(len(tokenizer), max(ids) + 1))


def control_passages(vocab: AllowedVocab, tokenizer, source: str, n: int, count: int, seed: int,
                     text_from=None) -> torch.Tensor:
    """``count`` windows of n control tokens with at least two positions holding candidates.

    With ``text_from`` (a masked LM's tokenizer) the windows are cut from the texts that masked LM
    reads: its windows of n tokens (the same cut as :func:`corpus.windows` gives it for this seed)
    are decoded and re-encoded with the control's ``tokenizer``, and the first n control tokens
    of each are kept (a window that re-encodes to fewer than n tokens is dropped). So the control
    sees the masked LMs' text, up to the last words where its tokenizer splits more finely.
    Without it, the control cuts its own windows of n of its tokens from the corpus."""
    from . import corpus

    if text_from is None:
        win = corpus.windows(tokenizer, source, n, 2 * count, seed)
    else:
        texts = [vocabulary.decode(text_from, w) for w in corpus.windows(text_from, source, n, 2 * count, seed)]
        enc = [e[:n] for e in vocabulary.encode_many(tokenizer, texts) if len(e) >= n]
        if not enc:
            raise ValueError(f"no window of corpus {source!r} re-encodes to {n} tokens of the control")
        win = torch.tensor(enc, dtype=torch.long)
    win = torch.unique(win, dim=0)                          # sorted, no repeats
    keep = win[vocab.contains(win).sum(1) >= 2]
    keep = keep[torch.randperm(len(keep), generator=torch.Generator().manual_seed(seed))[:count]]
    if len(keep) == 0:
        raise ValueError(f"no window of corpus {source!r} holds two candidate tokens")
    return keep


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


def experiment(model: dict, *, n: int, count: int, top_k: int, temperature: float, gen: torch.Generator,
               device: str = "auto", dtype: str = "auto", grid_k: int = 0, n_grids: int = 0,
               texts_of: str | None = None):
    """The chapter's protocol for one model: load, cut passages, sample rectangles, score them.

    ``model`` is a dict with ``name``, ``kind`` ("mlm" or "causal"), ``corpus`` and optionally
    ``whole_words`` and ``rectangles`` (a per-model count that overrides ``count``). A causal
    model is the joint-model control: its conditionals over the ``candidates`` most frequent tokens
    of its corpus (:class:`JointConditionals`; the default count is :class:`textglauber.profile.Control`'s)
    go through the same sampling and scoring as a masked LM's; with ``noise`` > 0 the same rectangles are scored
    again with that much fixed noise on every conditional (:class:`PerturbedScorer`, kind
    "perturbed"), a copy of the control that must fail. ``texts_of`` names the masked LM whose
    texts the control's windows are cut from (:func:`control_passages`). Returns (rectangles DataFrame with
    ``model`` and ``kind`` columns, grid DataFrame or None, model description).
    """
    from . import corpus, models

    if temperature <= 0:
        raise ValueError("temperature must be positive")
    kind = model.get("kind", IncompatibilityModel.default_of("kind"))
    count = int(model.get("rectangles", count))
    seed = int(torch.randint(2**31 - 1, (1,), generator=gen))
    grids, extra = None, {}
    if kind == "causal":
        lm = models.load(model["name"], kind=kind, device=device, dtype=dtype)
        _check_length(lm, n)
        vocab = candidate_vocab(lm.tokenizer, model["corpus"], int(model.get("candidates", Control.default_of("candidates"))))
        scorer = JointConditionals(CausalLMScorer(lm), vocab)
        text_from = models.tokenizer(texts_of) if texts_of else None
        passages = control_passages(vocab, lm.tokenizer, model["corpus"], n, count, seed, text_from=text_from)
        rects = sample(scorer, passages, count, gen, top_k=top_k)
        df = score_mlm(scorer, rects, temperature=temperature)
        df.insert(0, "kind", kind)
        noise = float(model.get("noise", Control.default_of("noise")))
        if noise > 0:
            noisy = score_mlm(PerturbedScorer(scorer, noise, seed=seed), rects, temperature=temperature)
            noisy.insert(0, "kind", "perturbed")
            noisy.insert(0, "model", f"{model['name']} + noise {noise:g}")
            df.insert(0, "model", model["name"])
            df = pd.concat([df, noisy], ignore_index=True)
        extra = {"candidates": vocab.size, "candidate_tokens": list(vocab.tokens), "noise": noise,
                 "texts_of": texts_of or "its own windows"}
    else:
        lm, scorer = models.open_mlm(model, device=device, dtype=dtype)
        _check_length(lm, n)
        vocab = scorer.vocab
        passages = corpus.windows(lm.tokenizer, model["corpus"], n, count, seed, vocab=vocab)
        rects = sample(scorer, passages, count, gen, top_k=top_k)
        df = score_mlm(scorer, rects, temperature=temperature)
        df.insert(0, "kind", kind)
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
    if "model" not in df:
        df.insert(0, "model", model["name"])
    return df, grids, {**lm.describe(), "corpus": model["corpus"], "n": n, "rectangles": count, **extra}


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
        extra = {}
        if spec.get("kind") == "causal":     # the control reads the texts of a masked LM on its corpus
            extra["texts_of"] = next((d["name"] for d in described
                                      if d.get("kind") == "mlm" and d.get("corpus") == spec["corpus"]), None)
        out = or_skip(on_missing_model, notes, spec["name"], experiment, spec, n=n, count=count, top_k=top_k,
                      temperature=temperature, gen=gen, device=device, dtype=dtype, grid_k=grid_k, n_grids=n_grids,
                      **extra)
        if out is None:
            continue
        df, g, info = out
        frames.append(df)
        if g is not None:
            grids.append(g)
        described.append(info)
    rects = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    return rects, (pd.concat(grids, ignore_index=True) if grids else None), described, notes


def passage_key(rects: pd.DataFrame) -> np.ndarray:
    """One label per base passage: rectangles cut from the same window share a label."""
    if "base" in rects:
        return pd.factorize(rects["base"].map(tuple))[0]
    return rects["seq_id"].to_numpy()


def summary(rects: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Per model: count, mean R with a 95% interval, median, max, and the rank correlation of R
    with the cross-influence of the two positions.

    Rectangles cut from one base passage are correlated (passages are drawn with replacement),
    so the interval is a cluster bootstrap that resamples passages, not rectangles."""
    from .stats import cluster_bootstrap_ci

    rows = []
    for (model, kind), g in rects.groupby(["model", "kind"], sort=False):
        lo, hi = cluster_bootstrap_ci(g.R.to_numpy(), passage_key(g), seed=seed)
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
    from .stats import cluster_bootstrap_ci
    from .paths import models_root
    from .vocabulary import allowed_vocabulary

    folder = models_root() / run
    manifest = json.loads((folder / "manifest.json").read_text())
    final = models.load(f"trained:{run}", device=device, dtype=dtype)
    vocab = allowed_vocabulary(final.tokenizer)
    passages = corpus.windows(final.tokenizer, manifest["corpus"]["name"], n, count,
                              int(torch.randint(2**31 - 1, (1,), generator=gen)), vocab=vocab)
    rects = sample(models.MaskedLMScorer(final, vocab), passages, count, gen, top_k=top_k)
    clusters = pd.factorize(pd.Series([tuple(r) for r in rects.base.tolist()]))[0]   # one label per distinct window
    rows = []
    for r in manifest["runs"]:
        for c in r["checkpoints"]:
            lm = models.load(f"trained:{run}@{c['path']}", device=device, dtype=dtype)
            R = score_mlm(models.MaskedLMScorer(lm, vocab), rects, temperature=temperature).R.to_numpy()
            lo, hi = cluster_bootstrap_ci(R, clusters, seed=seed)
            rows.append({"run": run, "start": r["start"], "checkpoint": c["checkpoint"], "step": c["step"],
                         "tokens_seen": c["tokens_seen"], "fraction": c["fraction"], "top1": c["top1"],
                         "top5": c["top5"], "heldout_loss": c["heldout_loss"], "mean R": float(R.mean()),
                         "95% CI low": lo, "95% CI high": hi, "chosen": r["start"] == manifest["chosen"]})
    return pd.DataFrame(rows)


def rectangles_of(df: pd.DataFrame) -> Rectangles:
    """The rectangles of a scored frame (one model's rows), to score them again."""
    return Rectangles(seq_id=df["seq_id"].to_numpy(), base=torch.tensor(np.stack(df["base"].map(np.asarray).to_list())),
                      i=torch.tensor(df["i"].to_numpy()), j=torch.tensor(df["j"].to_numpy()),
                      a_prime=torch.tensor(df["a_prime"].to_numpy()), b_prime=torch.tensor(df["b_prime"].to_numpy()))


def dtype_floor(model: dict, scored: pd.DataFrame, *, dtype: str = "bfloat16", device: str = "auto") -> pd.DataFrame:
    """The same rectangles scored with the model's weights in ``dtype`` (the chains' dtype on a
    GPU) beside their float32 R: the noise floor lower precision adds to R.

    ``scored`` holds one masked LM's rectangles as :func:`score_mlm` wrote them in float32."""
    from . import models

    _, scorer = models.open_mlm(model, device=device, dtype=dtype)
    again = score_mlm(scorer, rectangles_of(scored), temperature=float(scored["temperature"].iloc[0]))
    diff = (again["R"].to_numpy() - scored["R"].to_numpy())
    return pd.DataFrame([{"model": model["name"], "dtype": dtype, "rectangles": len(scored),
                          "mean R (float32)": float(scored["R"].mean()), f"mean R ({dtype})": float(again["R"].mean()),
                          "mean |R difference|": float(np.abs(diff).mean()), "max |R difference|": float(np.abs(diff).max())}])


# --------------------------------------------------------------------------- the chapter's reading
def control_info(described: list[dict]) -> dict | None:
    """The description of the joint-model control among the models that ran, or None."""
    return next((d for d in described if d.get("kind") == "causal"), None)


def control_note(info: dict | None) -> str:
    """What the control's candidate set and windows are, in Markdown (or that the profile has none)."""
    if info is None:
        return "This profile runs no joint-model control."
    shown = ", ".join(f"`{t}`" for t in info["candidate_tokens"])
    if info.get("texts_of") not in (None, "its own windows"):
        windows = (f"Its windows are cut from the texts that `{info['texts_of']}` reads on the same corpus: each of "
                   f"that model's {info['n']}-token windows is re-encoded with the control's tokenizer and its first "
                   f"{info['n']} tokens kept, ")
    else:
        windows = (f"No masked LM of this chapter reads `{info['corpus']}`, so its windows are its own "
                   f"{info['n']}-token passages of that corpus, ")
    noise = (f"The perturbed copy adds noise of standard deviation {info['noise']:g} to every log-score."
             if info.get("noise", 0) > 0 else "No perturbed copy was run (`noise` is 0).")
    return (f"**The control's candidate set** $C$ for `{info['name']}`: the {info['candidates']} most "
            f"frequent tokens of its corpus `{info['corpus']}` (in the model's own tokenization): {shown}. "
            + windows + "with at least two positions holding a candidate; only those positions are changed. " + noise)


def floor_sentences(rects: pd.DataFrame, info: dict | None) -> str:
    """The control's R as the float-error floor, the share of each masked LM's rectangles above
    it, and the perturbed copy against its expected R ('' when no control ran). ``info``: the
    control's description (:func:`control_info`), for its noise."""
    ctrl, pert, mlm = (rects[rects.kind == k] for k in ("causal", "perturbed", "mlm"))
    if not len(ctrl):
        return ""
    floor_max = ctrl.R.max()
    lines = [f"The control's R, its float-error floor, has mean {ctrl.R.mean():.1e} and maximum {floor_max:.1e} over "
             f"{len(ctrl)} rectangles, while its edges themselves have median size {ctrl.path1.abs().median():.2f} "
             f"(nats)."]
    if len(mlm):
        share = mlm.groupby("model", sort=False).R.apply(lambda r: (r > floor_max).mean())
        lines.append("Share of each masked LM's rectangles with R above the control's largest value: "
                     + "; ".join(f"{m} {s:.0%}" for m, s in share.items()) + ".")
    if len(pert):
        scale = float(info["noise"])
        lines.append(f"The perturbed control (noise {scale:g}) has mean R {pert.R.mean():.3f}; for noise on every "
                     f"conditional the expected value is {scale:g} x sqrt(16/pi) = {scale * np.sqrt(16 / np.pi):.3f} "
                     f"(eight independent noise terms enter each R), and "
                     f"{(pert.R > floor_max).mean():.0%} of its rectangles lie above the unperturbed control's "
                     f"largest R.")
    return " ".join(lines)


def dtype_floor_sentence(floor: pd.DataFrame) -> str:
    """How far lower-precision weights move R (a :func:`dtype_floor` table), beside the float32 mean."""
    f = floor.iloc[0]
    return (f"With bf16 weights the same {f['rectangles']} rectangles of `{f['model']}` move by {f['mean |R difference|']:.3g} "
            f"on average and by up to {f['max |R difference|']:.3g}, against a float32 mean R of {f['mean R (float32)']:.3g}: "
            + ("a floor well below the effect measured here." if f["mean |R difference|"] < 0.1 * f["mean R (float32)"]
               else "not small beside the effect, which is why the measuring chapters score in float32."))


def spread_sentence(mlm_rects: pd.DataFrame) -> str:
    """Each model's 10th and 90th percentiles of R and their ratio ('' without rectangles)."""
    spread = mlm_rects.groupby("model", sort=False).R.quantile([0.1, 0.9]).unstack()
    if not len(spread):
        return ""
    return "10th and 90th percentiles of R: " + "; ".join(
        f"{m} {r[0.1]:.3g} and {r[0.9]:.3g} (ratio {r[0.9] / r[0.1]:.0f})" if r[0.1] > 0 else f"{m} {r[0.1]:.3g} and {r[0.9]:.3g}"
        for m, r in spread.iterrows()) + "."


def grid_summary(grids: pd.DataFrame) -> pd.DataFrame:
    """Per model: the number of grids, K, and the mean over grids of their mean R and misfit."""
    return grids.groupby("model").agg(grids=("grid", "size"), K=("K", "first"),
                                      mean_R=("mean_R", "mean"), misfit=("misfit", "mean")).reset_index()


def plot_along_training(axes, along: pd.DataFrame) -> None:
    """Mean R of each checkpoint with its interval, against the share of the training budget (first
    axes) and the held-out top-1 accuracy (second), one line per start."""
    for start, g in along.groupby("start"):
        for ax, x in zip(axes, ("fraction", "top1")):
            ax.errorbar(g[x], g["mean R"], yerr=[g["mean R"] - g["95% CI low"], g["95% CI high"] - g["mean R"]],
                        marker="o", capsize=3, label=f"start: {start}")
    axes[0].set_xlabel("share of the training budget")
    axes[1].set_xlabel("held-out top-1 accuracy")
    axes[0].set_ylabel("mean R (fixed rectangles)")
    axes[0].legend()


def preprint_table(summary: pd.DataFrame, profile: str) -> pd.DataFrame:
    """The preprint's mean R per model above this run's (:func:`summary`), with its intervals."""
    proto = reported.RECTANGLE_PROTOCOL
    paper = pd.DataFrame([{"source": "preprint (arXiv 2605.16378)", "model": m, "rectangles": proto["rectangles_per_model"],
                           "mean R": r} for m, r in reported.RECTANGLE_MEAN_R.items()])
    ours = summary[["model", "rectangles", "mean R", "95% CI low", "95% CI high"]].assign(source=f"this run, profile '{profile}'")
    return pd.concat([paper, ours], ignore_index=True)[["source", "model", "rectangles", "mean R", "95% CI low",
                                                        "95% CI high"]]


def protocol_sentence(mlms: list[dict], summary: pd.DataFrame, *, seq_len: int, n_rectangles: int, top_k: int,
                      temperature: float) -> str:
    """Where this run's protocol agrees with the preprint's and where it differs: corpus,
    rectangles per masked LM, top-k, temperature."""
    proto = reported.RECTANGLE_PROTOCOL
    corpora = sorted({m["corpus"] for m in mlms})
    differs, agrees = [], []
    (agrees if corpora == ["msmarco"] else differs).append(
        f"passages from {', '.join(corpora)}" + ("" if corpora == ["msmarco"] else f" (the preprint: {proto['corpus']})"))
    counts = sorted(set(summary[summary.kind == "mlm"].rectangles)) or [n_rectangles]
    per_lm = " to ".join(str(c) for c in (counts[0], counts[-1])[: 1 if len(counts) == 1 else 2])
    (agrees if counts == [proto["rectangles_per_model"]] else differs).append(
        f"{per_lm} rectangles per masked LM" + ("" if counts == [proto["rectangles_per_model"]]
                                                else f" (the preprint: {proto['rectangles_per_model']})"))
    (agrees if top_k == proto["top_k"] else differs).append(
        f"replacements from the top-{top_k}" + ("" if top_k == proto["top_k"] else f" (the preprint: top-{proto['top_k']})"))
    (agrees if temperature == proto["temperature"] else differs).append(
        f"T = {temperature:g}" + ("" if temperature == proto["temperature"] else f" (the preprint: T = {proto['temperature']:g})"))
    return (f"Protocol of this run: windows of n = {seq_len} tokens; "
            + (f"as in the preprint, {', '.join(agrees)}" if agrees else "")
            + (("; " if agrees else "") + f"unlike the preprint, {', '.join(differs)}" if differs else "") + ".")


def preprint_sentences(summary: pd.DataFrame, info: dict | None, profile: str) -> list[str]:
    """What this run's summary says beside the preprint: the control, the masked LMs' range of mean R,
    whether it clears the control's floor, its link to influence, and which models are shared."""
    mlm_rows, ctrl_rows = summary[summary.kind == "mlm"], summary[summary.kind == "causal"]
    lines = []
    if len(ctrl_rows):
        c = ctrl_rows.iloc[0]
        lines.append(f"The control here is `{c.model}` with conditionals over {info['candidates']} candidate tokens "
                     f"({c.rectangles} rectangles), passed through the masked-LM code; the preprint's GPT-2 control "
                     "computes each edge from two sequence probabilities directly.")
    if len(mlm_rows):
        lines.append(f"This run's masked LMs have mean R from {mlm_rows['mean R'].min():.3g} to {mlm_rows['mean R'].max():.3g}; "
                     f"the preprint's five English MLMs range from {min(v for m, v in reported.RECTANGLE_MEAN_R.items() if m != 'gpt2'):.3f} "
                     f"to {max(reported.RECTANGLE_MEAN_R.values()):.3f}.")
        if len(ctrl_rows):
            floor = ctrl_rows["max R"].iloc[0]
            above = mlm_rows[mlm_rows["95% CI low"] > floor]
            lines.append(f"For {len(above)} of {len(mlm_rows)} masked LMs the lower end of the 95% interval of mean R lies "
                         f"above the largest R of the compatible control ({floor:.1e}), so their incompatibility is not "
                         "an artefact of the pipeline's float error" + ("." if len(above) == len(mlm_rows) else
                         "; for the others it cannot be told apart from it."))
        rising = mlm_rows[mlm_rows["Spearman(R, influence)"] > 0]
        lines.append(f"R rises with the cross-influence of the two positions (positive rank correlation) for "
                     f"{len(rising)} of {len(mlm_rows)} masked LMs; the preprint reports that it does for its models.")
    if len(ctrl_rows):
        mx = ctrl_rows["max R"].iloc[0]
        lines.append(f"The control ({ctrl_rows.model.iloc[0]}) gives a largest R of {mx:.1e}, "
                     + ("zero up to float error, as GPT-2's is in the preprint." if mx < 1e-3 else
                        "which is not zero up to float error: the control has failed and the pipeline needs checking."))
    same = sorted(set(summary.model) & set(reported.RECTANGLE_MEAN_R))
    if same:
        lines.append(f"Models shared with the preprint: {', '.join(same)}; their numbers can be compared directly.")
    else:
        lines.append(f"No model of profile '{profile}' is one of the preprint's, so only the qualitative findings "
                     "(whether R > 0 for masked LMs and R = 0 for the joint control, the spread of R, its link to influence) "
                     "can be compared; the magnitudes belong to these models, not to BERT or any other English MLM. "
                     "The `paper` profile runs the preprint's models.")
    return lines
