"""Chapter 3's exact section, run for the models of a profile: each model restricted to two tokens
per site, every listed length and temperature (:func:`model_table`); the landscape of the same
chains, listed and searched past enumeration; covering chains of the model's own mass
(:func:`covering`); the chapter's coupling protocol calibrated on the exact chains
(:func:`calibration`); and the verdicts read off the tables (:func:`verdicts`, :func:`hot`). The
quantities themselves are :mod:`textglauber.phase`'s and :mod:`textglauber.landscape`'s.

The designs:

- ``global``: one pair of tokens (``pair``) at every site;
- ``passage K`` (nested): the K-th passage of the model's corpus, each site allowed its own token
  and the model's top alternative, chosen once in the longest frame (:func:`frame_length`); length
  n keeps the first n sites, so every n of a passage belongs to one family of chains.

Two-token chains are chains of the model's conditionals restricted to two tokens per site, not of
its free generation over the whole vocabulary: the page keeps the two apart, and says what carries
over only through the landscape and the covering chains' transfer bound.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from . import corpus, phase
from .profile import Phase, PhaseModel
from .seeding import child_seed

CALIBRATION_BUDGET = 20          # coupling runs for at most this many times the exact t_mix ...
CALIBRATION_MAX_STEPS = 200_000  # ... and at most this many steps (numpy steps, every pair at once)


def designs(lm, spec: PhaseModel, p: Phase, seed: int) -> list[tuple[str, object, dict]]:
    """(design, scorer, {n: pairs}) for the global design and the nested passage designs of one
    model. The global design holds every n from ``p.min_n`` to ``spec.max_n`` and the landscape's
    longer lengths; passage k (``p.passages`` of them) is one window of the model's corpus whose
    tokens all lie in the model's allowed vocabulary (``whole_words`` and ``alphabetic`` of its
    entry), drawn with ``seed``, as long as the longest length asked of it. Its alternatives are
    chosen once, in that longest frame, and length n takes the first n sites: every n of a passage
    belongs to one family of chains (a nested design)."""
    from . import vocabulary

    listed = list(range(p.min_n, spec.max_n + 1))
    searched = [n for n in p.landscape.lengths if n > spec.max_n]
    a, b = (vocabulary.single_token(lm.tokenizer, t) for t in spec.pair)
    glob = {n: phase.global_pairs(a, b, n) for n in listed + searched}
    full = full_scorer(lm, spec)
    count, longest = p.passages, frame_length(spec, p)
    texts = corpus.windows(lm.tokenizer, spec.corpus, longest, count, seed, vocab=full.vocab)
    out = [("global", phase.design_scorer(lm, glob.values()), glob)]
    for k, text in enumerate(texts):
        frame = phase.passage_pairs(full, text[:longest].numpy())
        own = listed[:max(1, p.passage_max_n - p.min_n + 1)]
        lengths = own + (searched if k < p.landscape.passages else [])
        pas = {n: frame[:n] for n in lengths}
        out.append((f"passage {k + 1}", phase.design_scorer(lm, pas.values()), pas))
    return out


def full_scorer(lm, spec: PhaseModel):
    """The model over its whole allowed vocabulary (``whole_words`` and ``alphabetic`` of its entry):
    what finds a passage's alternatives and what a covering chain covers."""
    from . import models, vocabulary

    return models.MaskedLMScorer(lm, vocabulary.allowed_vocabulary(
        lm.tokenizer, whole_words=spec.whole_words, alphabetic=spec.alphabetic))


def frame_length(spec: PhaseModel, p: Phase) -> int:
    """The length of every passage's frame: the longest length any part of the section asks of it."""
    return max([spec.max_n, *p.landscape.lengths, *p.covering.lengths])


def listed_lengths(spec: PhaseModel, p: Phase, design: str) -> list[int]:
    """The lengths of a design whose states are all listed (the rest are searched)."""
    top = spec.max_n if design == "global" else min(spec.max_n, p.passage_max_n)
    return list(range(p.min_n, top + 1))


@dataclass
class PhaseRun:
    """What the phase section computed for a profile: the ``phase_exact`` table, the coupling
    calibration, the landscape (wells and Gamma per design and n), its check against T ln t_rel,
    the covering chains, per model the rows scored and the largest n (``cost``; its ``seconds`` is
    for the page only and is not written to a table: no table holds a wall-clock time), and one line
    per model that could not be had."""

    table: pd.DataFrame
    calibration: pd.DataFrame
    cost: pd.DataFrame
    notes: list[str]
    landscape: pd.DataFrame = None
    landscape_check: pd.DataFrame = None
    covering: pd.DataFrame = None


@dataclass
class ModelRun:
    """One model's part of :class:`PhaseRun`."""

    table: pd.DataFrame
    landscape: pd.DataFrame
    check: pd.DataFrame


def model_table(lm, spec: PhaseModel, p: Phase, made: list, rng: np.random.Generator) -> ModelRun:
    """The ``phase_exact`` rows of one model (both kinds of design, every listed n and temperature,
    :func:`textglauber.phase.phase_table`) and its landscape rows: exact on the listed lengths (from
    the same score tables), searched on the longer ones. A passage design's ``rows_scored``
    includes the rows that found its alternatives (:func:`frame_length`, one row a site)."""
    from .landscape import tables as land

    out, lands, checks = [], [], []
    for design, scorer, pairs in made:
        listed = [n for n in listed_lengths(spec, p, design) if n in pairs]
        scores = {n: phase.score_table(scorer, pairs[n]) for n in listed}
        t = phase.phase_table(scorer, lm.name, design, {n: pairs[n] for n in listed}, p.temperatures,
                              tmix_max_states=p.tmix_max_states, scores_by_n=scores)
        if design != "global":
            t["rows_scored"] = t["rows_scored"] + frame_length(spec, p)
        out.append(t)
        text = phase.design_tokens(scorer, design, pairs[max(pairs)])
        rows, check = land.enumerated_rows(scorer, lm.name, design, text, pairs, scores)
        far = {n: pairs[n] for n in pairs if n not in listed}
        q = p.landscape
        searched = land.searched_rows(scorer, lm.name, design, text, far, starts=q.starts,
                                      max_states=q.max_states, settle_states=q.settle_states,
                                      rng=rng) if far else rows.iloc[:0]
        lands.append(pd.concat([rows, searched], ignore_index=True))
        checks.append(check)
    return ModelRun(pd.concat(out, ignore_index=True), pd.concat(lands, ignore_index=True),
                    pd.concat(checks, ignore_index=True))


def covering(lm, spec: PhaseModel, p: Phase, made: list) -> pd.DataFrame:
    """The covering chains of one model: seeded with the first passage's first n tokens (its own
    tokens, the nested design's frame), at the covering's lengths and temperatures, over the model's
    whole allowed vocabulary (:func:`textglauber.phase.covering.covering_table`)."""
    from .phase import covering as cov

    q = p.covering
    passage = next((pairs for design, _, pairs in made if design != "global"), None)
    if passage is None or not q.lengths:
        return pd.DataFrame(columns=cov.COVERING_COLUMNS)
    frame = passage[max(passage)][:, 0]
    full = full_scorer(lm, spec)
    seeds = {n: frame[:n] for n in q.lengths}
    return cov.covering_table(full, lm.name, seeds, q.temperatures, eps=q.eps,
                              max_states=q.max_states, tmix_max_states=p.tmix_max_states)


CALIBRATION_COLUMNS = ["model", "design", "n", "temperature", "starts", "pairs", "t_mix", "median", "q75", "budget"]


def calibration(lm, p: Phase, made: list, rng: np.random.Generator) -> pd.DataFrame:
    """The chapter's coupling protocol on the exact chains at n = ``calibration_n``: per design and
    temperature where the exact t_mix(1/4) is known and at most :data:`CALIBRATION_MAX_STEPS` /
    :data:`CALIBRATION_BUDGET` steps, ``calibration_pairs`` pairs started the way the chapter starts
    them (two unrelated states, drawn uniformly, as the chapter draws two unrelated passages) and
    as many from the worst pair of starts (:func:`textglauber.phase.worst_pair`); their median and
    75% quantile beside the exact t_mix. A quantile beyond the budget is inf. The global pair and the
    first passage are calibrated (the other passages would repeat the check)."""
    n, m = p.calibration_n, p.calibration_pairs
    rows = []
    for design, scorer, pairs in [d for d in made[:2] if n in d[2]]:     # the global pair and the first passage
        scores = phase.score_table(scorer, pairs[n])
        for T in p.temperatures:
            P = phase.kernel(scores, float(T))
            mix = phase.mixing_time(P, 0.25, max_states=2 ** n).t_mix
            if not np.isfinite(mix) or mix * CALIBRATION_BUDGET > CALIBRATION_MAX_STEPS:
                continue
            budget = int(CALIBRATION_BUDGET * mix)
            random = rng.integers(2 ** n, size=(m, 2))
            worst = np.tile(phase.worst_pair(P), (m, 1))
            for start, starts in (("random pairs", random), ("worst pair", worst)):
                tau = phase.coupling_times_exact(scores, float(T), starts, budget, rng)
                rows.append({"model": lm.name, "design": design, "n": n, "temperature": float(T), "starts": start,
                             "pairs": m, "t_mix": float(mix), "median": float(np.quantile(tau, 0.5)),
                             "q75": float(np.quantile(tau, 0.75)), "budget": budget})
    return pd.DataFrame(rows, columns=CALIBRATION_COLUMNS)


@dataclass
class ModelPart:
    """What one model contributes to :class:`PhaseRun`: one unit of work (:func:`model_part`)."""

    table: pd.DataFrame | None = None
    calibration: pd.DataFrame | None = None
    landscape: pd.DataFrame | None = None
    check: pd.DataFrame | None = None
    covering: pd.DataFrame | None = None
    cost: dict | None = None
    notes: list = field(default_factory=list)


def model_part(p: Phase, spec: PhaseModel, seeds: tuple[int, int, int], device: str, dtype: str,
               on_missing_model: str) -> ModelPart:
    """One model's rows of every phase table, from its three seeds (passages, pairs, search): a unit
    of work that runs the same in this process or on a worker (:mod:`textglauber.scheduler`)."""
    from . import models

    passage_seed, pair_seed, search_seed = seeds
    notes: list = []
    lm = models.or_skip(on_missing_model, notes, spec.name, models.load, spec.name, kind="mlm",
                        device=device, dtype=dtype)
    if lm is None:
        return ModelPart(notes=notes)
    began = time.perf_counter()
    made = designs(lm, spec, p, passage_seed)
    part = model_table(lm, spec, p, made, np.random.default_rng(search_seed))
    cal = calibration(lm, p, made, np.random.default_rng(pair_seed))
    cover = covering(lm, spec, p, made)
    cost = {"model": lm.name, "max_n": spec.max_n, "rows_scored": int(part.table.drop_duplicates(
        ["design", "n"]).rows_scored.sum()), "seconds": time.perf_counter() - began}
    return ModelPart(part.table, cal, part.landscape, part.check, cover, cost, notes)


def run(p: Phase | dict, *, device: str, dtype: str, on_missing_model: str, gen: torch.Generator,
        scheduler: str | None = None) -> PhaseRun:
    """The phase section for a profile's ``phase`` parameters (a :class:`Phase`, or the mapping the
    schema reads as one: the values a chapter's kernel checked), every model of ``p.models`` that
    can be had (else a note, or an error under ``on_missing_model='fail'``), one unit of work per
    model (:func:`model_part`) on ``scheduler`` (:mod:`textglauber.scheduler`; None: its setting from
    the environment, serial by default). The seeds of every model's passages, landscape search and
    calibration are drawn from ``gen`` before any unit runs, so neither a skipped model nor the
    scheduler changes any model's rows."""
    from .landscape import tables as land
    from .phase import covering as cov
    from .scheduler import run_all

    p = Phase.model_validate(p)            # typed as the schema declares it; a Phase is taken as it is
    seeds = [(child_seed(gen), child_seed(gen), child_seed(gen)) for _ in p.models]
    units = [(f"crossover, phase section, model {spec.name}", model_part,
              (p, spec, s, device, dtype, on_missing_model)) for spec, s in zip(p.models, seeds)]
    parts = run_all(units, scheduler)
    notes = [note for part in parts for note in part.notes]
    done = [part for part in parts if part.table is not None]

    def joined(name, columns):
        frames = [getattr(part, name) for part in done]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)

    return PhaseRun(joined("table", phase.COLUMNS), joined("calibration", CALIBRATION_COLUMNS),
                    pd.DataFrame([part.cost for part in done], columns=["model", "max_n", "rows_scored", "seconds"]),
                    notes, joined("landscape", land.COLUMNS), joined("check", land.CHECK_COLUMNS),
                    joined("covering", cov.COVERING_COLUMNS))


HOT_COLUMNS = ["model", "design", "temperature", "n from", "n to", "ratio min", "ratio max", "verdict", "words"]


def hot(table: pd.DataFrame) -> pd.DataFrame:
    """Per model, design and temperature: the exact t_mix over the t_mix of the product chain with
    the same single-site stationary marginals, and how that ratio behaves over n
    (:func:`textglauber.phase.ratio_verdict`), where t_mix is known at three lengths or more."""
    rows = []
    for (model, design, T), g in table.groupby(["model", "design", "temperature"], sort=False):
        g = g[g.t_mix.notna()].sort_values("n")
        if len(g) < 3:
            continue
        ratio = (g.t_mix / g.t_mix_product).to_numpy(float)
        v, words = phase.ratio_verdict(g.n.to_numpy(), ratio)
        rows.append({"model": model, "design": design, "temperature": float(T), "n from": int(g.n.min()),
                     "n to": int(g.n.max()), "ratio min": float(np.nanmin(ratio)), "ratio max": float(np.nanmax(ratio)),
                     "verdict": v, "words": words})
    return pd.DataFrame(rows, columns=HOT_COLUMNS)


def verdicts(table: pd.DataFrame) -> pd.DataFrame:
    """Per model, design and temperature: how t_rel and t_mix grow with n over the table's range
    (:func:`textglauber.phase.growth_verdict`), with the words it gives, the n range, and whether
    Dobrushin's condition (alpha < 1) holds at every n."""
    rows = []
    for (model, design, T), g in table.groupby(["model", "design", "temperature"], sort=False):
        g = g.sort_values("n")
        ns = g.n.to_numpy()
        rel, rel_words = phase.growth_verdict(ns, g.t_rel.to_numpy(float), what="t_rel")
        have_mix = g.t_mix.notna()
        mix, mix_words = (phase.growth_verdict(ns[have_mix], g.t_mix[have_mix].to_numpy(float), what="t_mix")
                          if have_mix.sum() >= 3 else ("not computed", ""))
        rows.append({"model": model, "design": design, "temperature": float(T), "n from": int(ns.min()),
                     "n to": int(ns.max()), "t_rel growth": rel, "t_mix growth": mix,
                     "dobrushin at every n": bool((g.alpha < 1).all()), "max alpha": float(g.alpha.max()),
                     "t_rel words": rel_words, "t_mix words": mix_words})
    return pd.DataFrame(rows)


