"""Chapter 3's exact phase diagram, run for the models of a profile: each model restricted to two
tokens per site in two designs, every length from ``min_n`` to its ``max_n``, every temperature
(:func:`model_table`); the chapter's coupling protocol calibrated on the same exact chains
(:func:`calibration`); and the growth verdicts read off the table (:func:`verdicts`). The exact
quantities themselves are :mod:`textglauber.phase`'s.

The two designs (issue 51):

- ``global``: one pair of tokens (``pair``) at every site;
- ``passage``: the first n tokens of a passage of the model's corpus, each site allowed its own
  token and the model's top alternative there (given the n-token passage, in the model's frame).

Two-token chains are chains of the model's conditionals restricted to two tokens per site, not of
its free generation over the whole vocabulary: the page keeps the two apart.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from . import corpus, phase
from .profile import PhaseModel

CALIBRATION_BUDGET = 20          # coupling runs for at most this many times the exact t_mix ...
CALIBRATION_MAX_STEPS = 200_000  # ... and at most this many steps (numpy steps, every pair at once)


def designs(lm, spec: dict, p: dict, seed: int) -> list[tuple[str, object, dict]]:
    """(design, scorer, {n: pairs}) for the global and the passage designs of one model, every n
    from ``p['min_n']`` to ``spec['max_n']``. The passage is one window of ``max_n`` tokens of the
    model's corpus whose tokens all lie in the model's allowed vocabulary (``whole_words`` and
    ``alphabetic`` of its entry), drawn with ``seed``; length n takes its first n tokens."""
    from . import models, vocabulary

    ns = range(int(p["min_n"]), int(spec["max_n"]) + 1)
    a, b = (vocabulary.single_token(lm.tokenizer, t) for t in spec["pair"])
    glob = {n: phase.global_pairs(a, b, n) for n in ns}
    full = models.MaskedLMScorer(lm, vocabulary.allowed_vocabulary(
        lm.tokenizer, whole_words=spec.get("whole_words", PhaseModel.default_of("whole_words")),
        alphabetic=spec.get("alphabetic", PhaseModel.default_of("alphabetic"))))
    text = corpus.windows(lm.tokenizer, spec["corpus"], int(spec["max_n"]), 1, seed, vocab=full.vocab)[0]
    pas = {n: phase.passage_pairs(full, text[:n].numpy()) for n in ns}
    return [("global", phase.design_scorer(lm, glob.values()), glob),
            ("passage", phase.design_scorer(lm, pas.values()), pas)]


@dataclass
class PhaseRun:
    """What the phase section computed for a profile: the ``phase_exact`` table, the coupling
    calibration, per model the rows scored and the largest n (``cost``; its ``seconds`` is for the
    page only and is not written to a table: no table holds a wall-clock time), and one line per
    model that could not be had."""

    table: pd.DataFrame
    calibration: pd.DataFrame
    cost: pd.DataFrame
    notes: list[str]


def model_table(lm, spec: dict, p: dict, made: list) -> pd.DataFrame:
    """The ``phase_exact`` rows of one model: both designs (``made``, from :func:`designs`), every n
    and temperature (:func:`textglauber.phase.phase_table`). A passage design's ``rows_scored``
    includes the n rows that found its alternatives."""
    out = []
    for design, scorer, pairs in made:
        t = phase.phase_table(scorer, lm.name, design, pairs, p["temperatures"],
                              tmix_max_states=int(p["tmix_max_states"]))
        if design == "passage":
            t["rows_scored"] = t["rows_scored"] + t["n"]
        out.append(t)
    return pd.concat(out, ignore_index=True)


CALIBRATION_COLUMNS = ["model", "design", "n", "temperature", "starts", "pairs", "t_mix", "median", "q75", "budget"]


def calibration(lm, p: dict, made: list, rng: np.random.Generator) -> pd.DataFrame:
    """The chapter's coupling protocol on the exact chains at n = ``calibration_n``: per design and
    temperature where the exact t_mix(1/4) is known and at most :data:`CALIBRATION_MAX_STEPS` /
    :data:`CALIBRATION_BUDGET` steps, ``calibration_pairs`` pairs started the way the chapter starts
    them (two unrelated states, drawn uniformly, as the chapter draws two unrelated passages) and
    as many from the worst pair of starts (:func:`textglauber.phase.worst_pair`); their median and
    75% quantile beside the exact t_mix. A quantile beyond the budget is inf."""
    n, m = int(p["calibration_n"]), int(p["calibration_pairs"])
    rows = []
    for design, scorer, pairs in made:
        scores = phase.score_table(scorer, pairs[n])
        for T in p["temperatures"]:
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


def run(p: dict, *, device: str, dtype: str, on_missing_model: str, gen: torch.Generator) -> PhaseRun:
    """The phase section for a profile's ``phase`` parameters: every model of ``p['models']`` that
    can be had (else a note, or an error under ``on_missing_model='fail'``). The seeds of every
    model's passage and calibration are drawn from ``gen`` before any model is opened, so a
    skipped model changes no other model's rows."""
    from . import models

    seeds = [(seed_for(gen), seed_for(gen)) for _ in p["models"]]
    tables, cals, cost, notes = [], [], [], []
    for spec, (passage_seed, pair_seed) in zip(p["models"], seeds):
        lm = models.or_skip(on_missing_model, notes, spec["name"], models.load, spec["name"], kind="mlm",
                            device=device, dtype=dtype)
        if lm is None:
            continue
        began = time.perf_counter()
        made = designs(lm, spec, p, passage_seed)
        table = model_table(lm, spec, p, made)
        cals.append(calibration(lm, p, made, np.random.default_rng(pair_seed)))
        tables.append(table)
        cost.append({"model": lm.name, "max_n": int(spec["max_n"]), "rows_scored": int(table.drop_duplicates(
            ["design", "n"]).rows_scored.sum()), "seconds": time.perf_counter() - began})
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=phase.COLUMNS)
    cal = pd.concat(cals, ignore_index=True) if cals else pd.DataFrame(columns=CALIBRATION_COLUMNS)
    return PhaseRun(table, cal, pd.DataFrame(cost, columns=["model", "max_n", "rows_scored", "seconds"]), notes)


def verdicts(table: pd.DataFrame, factor: float) -> pd.DataFrame:
    """Per model, design and temperature: how t_rel and t_mix grow with n over the table's range
    (:func:`textglauber.phase.growth_verdict`), with the words it gives, the n range, and whether
    Dobrushin's condition (alpha < 1) holds at every n."""
    rows = []
    for (model, design, T), g in table.groupby(["model", "design", "temperature"], sort=False):
        g = g.sort_values("n")
        ns = g.n.to_numpy()
        rel, rel_words = phase.growth_verdict(ns, g.t_rel.to_numpy(float), factor, what="t_rel")
        have_mix = g.t_mix.notna()
        mix, mix_words = (phase.growth_verdict(ns[have_mix], g.t_mix[have_mix].to_numpy(float), factor, what="t_mix")
                          if have_mix.sum() >= 3 else ("not computed", ""))
        rows.append({"model": model, "design": design, "temperature": float(T), "n from": int(ns.min()),
                     "n to": int(ns.max()), "t_rel growth": rel, "t_mix growth": mix,
                     "dobrushin at every n": bool((g.alpha < 1).all()), "max alpha": float(g.alpha.max()),
                     "t_rel words": rel_words, "t_mix words": mix_words})
    return pd.DataFrame(rows)


def seed_for(gen: torch.Generator) -> int:
    return int(torch.randint(2**31 - 1, (1,), generator=gen))
