"""The rectangle test run on models (docs/science.md, chapter 1): the chapter's protocol for one
model and for a list, the per-model summary with its cluster-bootstrap interval, the curve along
training, and the precision floor."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..device import measurement_dtype
from ..models import CausalLMScorer
from ..profile import Control, IncompatibilityModel
from ..scheduler import RunSettings, run_all
from ..seeding import child_seed
from .controls import JointConditionals, PerturbedScorer, candidate_vocab, control_passages
from .statistic import COLUMNS, grid, rectangles_of, sample, score_mlm


def entry_of(spec) -> Control | IncompatibilityModel:
    """A model entry of the chapter as its schema types it: the causal control (``kind: causal``,
    :class:`textglauber.profile.Control`) or a masked LM (:class:`textglauber.profile.IncompatibilityModel`)."""
    return (Control if Control.role_of(spec) == "causal" else IncompatibilityModel).part_of(spec)


def experiment(model, *, n: int, count: int, top_k: int, temperature: float, gen: torch.Generator,
               device: str = "auto", dtype: str = "auto", grid_k: int = 0, n_grids: int = 0,
               texts_of: str | None = None):
    """The chapter's protocol for one model: load, cut passages, sample rectangles, score them.

    ``model`` is a model entry (:func:`entry_of`: ``name``, ``kind`` "mlm" or "causal", ``corpus``,
    and ``rectangles``, a per-model count that overrides ``count`` where it is set). A causal
    model is the joint-model control: its conditionals over the ``candidates`` most frequent tokens
    of its corpus (:class:`JointConditionals`; the default count is :class:`textglauber.profile.Control`'s)
    go through the same sampling and scoring as a masked LM's; with ``noise`` > 0 the same rectangles are scored
    again with that much fixed noise on every conditional (:class:`PerturbedScorer`, kind
    "perturbed"), a copy of the control that must fail. ``texts_of`` names the masked LM whose
    texts the control's windows are cut from (:func:`control_passages`). Returns (rectangles DataFrame with
    ``model`` and ``kind`` columns, grid DataFrame or None, model description).
    """
    from .. import corpus, models

    model = entry_of(model)
    kind = Control.role_of(model)
    count = count if model.rectangles is None else model.rectangles
    seed = child_seed(gen)
    grids, extra = None, {}
    if kind == "causal":
        lm = models.load(model.name, kind=kind, device=device, dtype=dtype)
        _check_length(lm, n)
        control = model
        vocab = candidate_vocab(lm.tokenizer, control.corpus, control.candidates)
        scorer = JointConditionals(CausalLMScorer(lm), vocab)
        text_from = models.tokenizer(texts_of) if texts_of else None
        passages = control_passages(vocab, lm.tokenizer, control.corpus, n, count, seed, text_from=text_from)
        rects = sample(scorer, passages, count, gen, top_k=top_k)
        df = score_mlm(scorer, rects, temperature=temperature)
        df.insert(0, "kind", kind)
        noise = float(control.noise)
        if noise > 0:
            noisy = score_mlm(PerturbedScorer(scorer, noise, seed=seed), rects, temperature=temperature)
            noisy.insert(0, "kind", "perturbed")
            noisy.insert(0, "model", f"{model.name} + noise {noise:g}")
            df.insert(0, "model", model.name)
            df = pd.concat([df, noisy], ignore_index=True)
        extra = {"candidates": vocab.size, "candidate_tokens": list(vocab.tokens), "noise": noise,
                 "texts_of": texts_of or "its own windows"}
    else:
        lm, scorer = models.open_mlm(model, device=device, dtype=dtype)
        _check_length(lm, n)
        vocab = scorer.vocab
        passages = corpus.windows(lm.tokenizer, model.corpus, n, count, seed, vocab=vocab)
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
            grids.insert(0, "model", model.name)
    if "model" not in df:
        df.insert(0, "model", model.name)
    return df, grids, {**lm.describe(), "corpus": model.corpus, "n": n, "rectangles": count, **extra}


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


@dataclass
class RectangleRuns:
    """:func:`run_models`' result, in the order of the model entries: every rectangle, the grids
    (None: none asked for or had), each model's description, and a note per model skipped."""

    rects: pd.DataFrame
    grids: pd.DataFrame | None
    described: list[dict]
    notes: list[str]


def run_models(specs: list, run: RunSettings, *, n: int, count: int, top_k: int, temperature: float,
               grid_k: int = 0, n_grids: int = 0) -> RectangleRuns:
    """:func:`experiment` for each model entry, one unit of work per model (:func:`model_unit`) as
    ``run`` says (:class:`textglauber.scheduler.RunSettings`: every model's seed drawn from its
    generator, in the order of ``specs``, before any unit runs, so neither a skipped model nor the
    scheduler changes another's rows), with float32 weights unless a dtype is named
    (:func:`textglauber.device.measurement_dtype`). The masked LMs run first; a causal control then
    reads the texts of the first masked LM on its corpus that could be had. Each entry of ``specs``
    is read as the chapter's schema types it (:func:`entry_of`)."""
    specs = [entry_of(spec) for spec in specs]
    seeds = [child_seed(run.gen) for _ in specs]
    settings = {"n": n, "count": count, "top_k": top_k, "temperature": temperature, "device": run.device,
                "dtype": measurement_dtype(run.dtype), "grid_k": grid_k, "n_grids": n_grids}
    causal = [k for k, spec in enumerate(specs) if isinstance(spec, Control)]
    got: dict[int, tuple] = {}

    def batch(ks, texts_of=lambda spec: {}):
        units = [(f"incompatibility, rectangles, model {specs[k].name}", model_unit,
                  (specs[k], seeds[k], run.on_missing_model, {**settings, **texts_of(specs[k])})) for k in ks]
        got.update(zip(ks, run_all(units, run.scheduler) if units else []))

    batch([k for k in range(len(specs)) if k not in causal])

    def texts_of(spec):                  # the control reads the texts of a masked LM on its corpus
        return {"texts_of": next((got[k][0][2]["name"] for k in sorted(got) if got[k][0] is not None
                                  and got[k][0][2].get("kind") == "mlm" and got[k][0][2].get("corpus") == spec.corpus),
                                 None)}

    batch(causal, texts_of)
    outs = [got[k] for k in range(len(specs))]
    notes = [note for _, ns in outs for note in ns]
    done = [out for out, _ in outs if out is not None]
    rects = pd.concat([df for df, _, _ in done], ignore_index=True) if done else pd.DataFrame(columns=COLUMNS)
    grids = [g for _, g, _ in done if g is not None]
    return RectangleRuns(rects, pd.concat(grids, ignore_index=True) if grids else None, [info for _, _, info in done],
                         notes)


def model_unit(spec: Control | IncompatibilityModel, seed: int, on_missing_model: str, settings: dict):
    """One model's rectangles (:func:`experiment`) from a generator seeded with ``seed``: ((rectangles,
    grids, description) or None where the model was skipped, notes). A unit of work that runs the
    same in this process or on a worker."""
    from ..models import or_skip

    notes: list = []
    out = or_skip(on_missing_model, notes, spec.name, experiment, spec,
                  gen=torch.Generator().manual_seed(int(seed)), **settings)
    return out, notes


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
    from ..stats import cluster_bootstrap_ci

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

    from .. import corpus, models
    from ..stats import cluster_bootstrap_ci
    from ..paths import models_root
    from ..vocabulary import allowed_vocabulary

    folder = models_root() / run
    manifest = json.loads((folder / "manifest.json").read_text())
    final = models.load(f"trained:{run}", device=device, dtype=dtype)
    vocab = allowed_vocabulary(final.tokenizer)
    passages = corpus.windows(final.tokenizer, manifest["corpus"]["name"], n, count,
                              child_seed(gen), vocab=vocab)
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


def dtype_floor(model, scored: pd.DataFrame, *, dtype: str = "bfloat16", device: str = "auto") -> pd.DataFrame:
    """The same rectangles scored with the model's weights in ``dtype`` (the chains' dtype on a
    GPU) beside their float32 R: the noise floor lower precision adds to R.

    ``scored`` holds one masked LM's rectangles as :func:`score_mlm` wrote them in float32."""
    from .. import models

    _, scorer = models.open_mlm(model, device=device, dtype=dtype)
    again = score_mlm(scorer, rectangles_of(scored), temperature=float(scored["temperature"].iloc[0]))
    diff = (again["R"].to_numpy() - scored["R"].to_numpy())
    return pd.DataFrame([{"model": IncompatibilityModel.part_of(model).name, "dtype": dtype, "rectangles": len(scored),
                          "mean R (float32)": float(scored["R"].mean()), f"mean R ({dtype})": float(again["R"].mean()),
                          "mean |R difference|": float(np.abs(diff).mean()), "max |R difference|": float(np.abs(diff).max())}])


def grid_summary(grids: pd.DataFrame) -> pd.DataFrame:
    """Per model: the number of grids, K, and the mean over grids of their mean R and misfit."""
    return grids.groupby("model").agg(grids=("grid", "size"), K=("K", "first"),
                                      mean_R=("mean_R", "mean"), misfit=("misfit", "mean")).reset_index()
