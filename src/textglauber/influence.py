"""Influence coefficients, score oscillation and the high-temperature mixing bound (docs/science.md, chapter 2).

alpha_ij(T) = sup over x, y that differ only at j of TV(pi_i^T(. | x_{-i}), pi_i^T(. | y_{-i})),
osc_ij      = sup over the same pairs of (max_a D(a) - min_a D(a)) / 2 with D = s_i(.|x) - s_i(.|y).

Estimates replace each sup by a maximum over sampled base contexts and, at each j, a set of
replacement tokens (the model's top-k there plus random allowed tokens, plus the token already
there); every pair of variants at j is compared. Estimates are therefore lower bounds on the
true suprema. With every state as a context and all of A as replacements they are exact,
which the tests check on an enumerable chain.

One context costs one batched pass over n x q x n masked rows (q replacements per site); the
oscillation comes from the same scores, and alpha at every temperature too. The chapter's
sentences, plot and comparison with the preprint are in :mod:`textglauber.pages.bounds`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from . import corpus, margins, models, vocabulary
from .device import measurement_dtype
from .profile import BoundsModel
from .scheduler import RunSettings, run_all
from .seeding import child_seed


@dataclass
class InfluenceResult:
    temperatures: np.ndarray       # (K,)
    alpha_ij: np.ndarray           # (K, n, n) lower-bound estimates, diagonal 0
    osc_ij: np.ndarray             # (n, n)
    contexts: int
    replacements: int              # per site and context
    exhaustive: bool               # True when the sups were taken over every pair (exact)

    @property
    def alpha(self) -> np.ndarray:
        """alpha(T) = max_i sum_j alpha_ij(T), one per temperature."""
        return self.alpha_ij.sum(axis=2).max(axis=1)

    @property
    def t_star(self) -> float:
        """Sufficient temperature T* = max_i sum_j osc_ij / 2: above it alpha < 1 is guaranteed."""
        return float(self.osc_ij.sum(axis=1).max() / 2)

    def mixing_bound(self, eps: float) -> np.ndarray:
        """ceil(n / (1 - alpha) log(n / eps)) where alpha < 1, else inf: a bound on t_mix(eps) when alpha
        is exact (``exhaustive``), otherwise only what the theorem would give if it were."""
        n = self.osc_ij.shape[0]
        out = np.full(len(self.temperatures), np.inf)
        ok = self.alpha < 1
        out[ok] = np.ceil(n / (1 - self.alpha[ok]) * math.log(n / eps))
        return out


def replacement_sets(scorer, x: torch.Tensor, top_k: int | None, extra: int, gen: torch.Generator) -> list[torch.Tensor]:
    """For each site j: the current token, the model's top-k at j and ``extra`` random allowed tokens
    (all of A when ``top_k`` is None)."""
    n = x.shape[0]
    ids = scorer.vocab.ids
    if top_k is None:
        return [ids.clone() for _ in range(n)]
    s = scorer.scores(x.unsqueeze(0).expand(n, -1), torch.arange(n)).cpu()
    out = []
    for j in range(n):
        top = ids[s[j].topk(min(top_k, len(ids))).indices]
        rnd = ids[torch.randint(len(ids), (extra,), generator=gen)] if extra else ids[:0]
        out.append(torch.unique(torch.cat([x[j:j + 1], top, rnd])))
    return out


def _pairwise(P: torch.Tensor, S: torch.Tensor, chunk_bytes: int = 2**28) -> tuple[torch.Tensor, torch.Tensor]:
    """Max over pairs of rows of TV(P[r], P[r']) (per temperature) and of the score oscillation.

    P: (K, q, |A|) probabilities at K temperatures; S: (q, |A|) raw scores; both stay on their
    device and in their dtype. Rows are compared a block at a time so that no temporary exceeds
    about ``chunk_bytes`` (the full (K, q, q, |A|) difference would be 10-17 GiB at the paper
    profile's sizes). In float32 the TV differs from float64 by at most about 1e-6 and the
    oscillation by about 1e-6 of the score range (tests/test_bounds.py measures both)."""
    k, q, a = P.shape
    block = max(1, chunk_bytes // max(1, k * q * a * P.element_size()))
    tv = torch.zeros(k, dtype=P.dtype, device=P.device)
    osc = torch.zeros((), dtype=S.dtype, device=S.device)
    for lo in range(0, q, block):
        hi = min(q, lo + block)
        d = 0.5 * (P[:, lo:hi, None, :] - P[:, None, :, :]).abs().sum(-1)      # (K, b, q)
        tv = torch.maximum(tv, d.flatten(1).max(-1).values)
        D = S[lo:hi, None, :] - S[None, :, :]                                   # (b, q, |A|)
        osc = torch.maximum(osc, ((D.max(-1).values - D.min(-1).values) / 2).max())
    return tv, osc


def influence(scorer, contexts: torch.Tensor, temperatures, *, top_k: int | None = 10, extra: int = 5,
              gen: torch.Generator | None = None, batch: int = 512) -> InfluenceResult:
    """Estimate alpha_ij(T) and osc_ij from base contexts (C, n)."""
    contexts = torch.as_tensor(contexts, dtype=torch.long)
    temps = np.atleast_1d(np.asarray(temperatures, dtype=float))
    if (temps <= 0).any() or not np.isfinite(temps).all():
        raise ValueError("temperatures must be positive")
    c, n = contexts.shape
    if n < 2:
        raise ValueError("influence needs n >= 2")
    if n > scorer.max_length:
        raise ValueError(f"n={n} exceeds what the model accepts ({scorer.max_length})")
    gen = gen or torch.Generator().manual_seed(0)
    alpha = torch.zeros((len(temps), n, n), dtype=torch.float64)
    osc = torch.zeros((n, n), dtype=torch.float64)
    T = None
    q_used = 0
    for x in contexts:
        reps = replacement_sets(scorer, x, top_k, extra, gen)
        q_used = max(q_used, max(len(r) for r in reps))
        for j in range(n):
            variants = x.repeat(len(reps[j]), 1)
            variants[:, j] = reps[j]
            others = [i for i in range(n) if i != j]
            states = variants.repeat_interleave(len(others), 0)                 # (q * (n-1), n)
            sites = torch.tensor(others).repeat(len(reps[j]))
            # scores stay on the model's device, in its score dtype (float32 or wider)
            scores = torch.cat([scorer.scores(states[s:s + batch], sites[s:s + batch])
                                for s in range(0, len(states), batch)])
            scores = scores.view(len(reps[j]), len(others), -1)                  # (q, n-1, |A|)
            if T is None:
                T = torch.tensor(temps, dtype=scores.dtype, device=scores.device).view(-1, 1, 1)
            for k, i in enumerate(others):
                S = scores[:, k]
                P = torch.softmax(S.unsqueeze(0) / T, dim=-1)
                tv, o = _pairwise(P, S)
                alpha[:, i, j] = torch.maximum(alpha[:, i, j], tv.double().cpu())
                osc[i, j] = max(osc[i, j], float(o))
    return InfluenceResult(temperatures=temps, alpha_ij=alpha.numpy(), osc_ij=osc.numpy(), contexts=c,
                           replacements=q_used, exhaustive=top_k is None)


def experiment(scorer, passages: torch.Tensor, temperatures, *, n_contexts: int, top_k: int, extra: int,
               gen: torch.Generator, eps: float = 0.25):
    """The chapter's protocol for one model: estimates from ``n_contexts`` seed windows.

    Returns (InfluenceResult, one-row-per-temperature DataFrame). The estimate alpha-hat is a lower
    bound on alpha, so alpha-hat < 1 does not establish the theorem's condition, and the t_mix
    column is what the theorem would give if alpha-hat were the supremum: a bound only when the
    estimate is exhaustive (``res.exhaustive``)."""
    pick = torch.randperm(len(passages), generator=gen)[:n_contexts]
    res = influence(scorer, passages[pick], temperatures, top_k=top_k, extra=extra, gen=gen)
    table = pd.DataFrame({"temperature": res.temperatures, "alpha (lower bound)": res.alpha,
                          "alpha-hat < 1": res.alpha < 1, "t_mix if alpha-hat were alpha": res.mixing_bound(eps)})
    return res, table


# --------------------------------------------------------------------------- the bounds chapter
@dataclass
class BoundsRuns:
    """:func:`run_models`' result: the influence fit of each model by name, and in the order of the
    model entries its alpha, drift and per-state drift rows, its score gaps, its description, and a
    note per model skipped."""

    fits: dict
    alpha: pd.DataFrame
    drift: pd.DataFrame
    states: pd.DataFrame
    gaps: pd.DataFrame
    described: list[dict]
    notes: list[str]


def run_models(specs: list, run: RunSettings, *, seq_len: int, n_contexts: int, top_k: int, extra: int,
               temperatures, eps: float, drift_k: int, drift_states: int, drift_temperatures) -> BoundsRuns:
    """The bounds chapter's protocol for each masked LM, one unit of work per model
    (:func:`model_unit`) as ``run`` says (:class:`textglauber.scheduler.RunSettings`: every model's
    seed drawn from its generator, in the order of ``specs``, before any unit runs, so neither a
    skipped model nor the scheduler changes another's rows), with float32 weights unless a dtype is
    named (:func:`textglauber.device.measurement_dtype`). Each entry of ``specs`` is read as the
    chapter's schema types it (:class:`textglauber.profile.BoundsModel`)."""
    specs = [BoundsModel.part_of(spec) for spec in specs]
    settings = {"device": run.device, "dtype": measurement_dtype(run.dtype), "seq_len": seq_len,
                "n_contexts": n_contexts, "top_k": top_k, "extra": extra, "temperatures": temperatures, "eps": eps,
                "drift_k": drift_k, "drift_states": drift_states, "drift_temperatures": drift_temperatures}
    seeds = [child_seed(run.gen) for _ in specs]
    units = [(f"bounds, influence and drift, model {spec.name}", model_unit, (spec, seed, run.on_missing_model, settings))
             for spec, seed in zip(specs, seeds)]
    parts = run_all(units, run.scheduler)
    notes = [note for _, ns in parts for note in ns]
    done = [part for part, _ in parts if part is not None]
    fits = {part.name: part.fit for part in done}

    def joined(name):
        return pd.concat([getattr(part, name) for part in done], ignore_index=True) if done else pd.DataFrame()

    return BoundsRuns(fits, joined("alpha"), joined("drift"), joined("states"), pd.DataFrame([part.gaps for part in done]),
                      [part.described for part in done], notes)


@dataclass
class BoundsPart:
    """One model's share of the bounds chapter (:func:`model_unit`)."""

    name: str
    fit: InfluenceResult
    alpha: pd.DataFrame
    drift: pd.DataFrame
    states: pd.DataFrame
    gaps: dict
    described: dict


def model_unit(spec: BoundsModel, seed: int, on_missing_model: str, settings: dict):
    """One model's influence estimates (:func:`experiment`), the drift of its ``drift_token`` planted
    ``drift_k`` times (:func:`margins.drift_table`) and the score gaps of its seed windows, from a
    generator seeded with ``seed``: (:class:`BoundsPart`, or None where the model was skipped, notes).
    A unit of work that runs the same in this process or on a worker."""
    notes: list = []
    gen = torch.Generator().manual_seed(int(seed))
    opened = models.or_skip(on_missing_model, notes, spec.name, models.open_mlm, spec, device=settings["device"],
                            dtype=settings["dtype"])
    if opened is None:
        return None, notes
    lm, scorer = opened
    q = settings
    passages = corpus.windows(lm.tokenizer, spec.corpus, q["seq_len"], max(50, q["n_contexts"]),
                              child_seed(gen), vocab=scorer.vocab)
    token = vocabulary.single_token(lm.tokenizer, spec.drift_token)   # one token, or an error before compute
    res, table = experiment(scorer, passages, q["temperatures"], n_contexts=q["n_contexts"], top_k=q["top_k"],
                            extra=q["extra"], gen=gen, eps=q["eps"])
    dt, per_state, _ = margins.drift_table(scorer, passages, token, q["drift_k"], q["drift_states"],
                                           q["drift_temperatures"], gen, tokenizer=lm.tokenizer)
    part = BoundsPart(spec.name, res, table.assign(model=spec.name, t_star=res.t_star),
                      dt.assign(model=spec.name, token=spec.drift_token), per_state.assign(model=spec.name),
                      {"model": spec.name, **margins.gap_summary(scorer, passages)},
                      {**lm.describe(), "corpus": spec.corpus, "|A|": scorer.vocab.size})
    return part, notes


def alpha_summary(alpha_all: pd.DataFrame, profile: str) -> pd.DataFrame:
    """Per model: T*-hat, the lowest temperature of the grid with alpha-hat < 1 and the t_mix the
    theorem would give there if alpha-hat were alpha (NaN where no temperature has it)."""
    summary = alpha_all.groupby("model", sort=False).t_star.first().rename("T* (lower bound)").to_frame()
    below = alpha_all[alpha_all["alpha-hat < 1"]].groupby("model", sort=False).first()
    summary["lowest T with alpha-hat under 1"] = below.temperature
    summary["t_mix there if alpha-hat were alpha"] = below["t_mix if alpha-hat were alpha"]
    summary.insert(0, "profile", profile)
    return summary.reset_index()


def matrices_table(fits: dict) -> pd.DataFrame:
    """alpha_ij at every temperature and osc_ij of every model, one row per (model, T, i, j), i != j."""
    return pd.DataFrame([{"model": m, "temperature": float(t), "i": i, "j": j, "alpha_ij": float(r.alpha_ij[k, i, j]),
                          "osc_ij": float(r.osc_ij[i, j])}
                         for m, r in fits.items() for k, t in enumerate(r.temperatures)
                         for i in range(r.osc_ij.shape[0]) for j in range(r.osc_ij.shape[0]) if i != j])
