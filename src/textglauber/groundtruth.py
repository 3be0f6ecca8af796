"""The book's diagnostics beside exact answers, on chains small enough to enumerate.

A masked LM restricted to a few tokens and a short length has a few hundred to a few thousand
states, so :mod:`textglauber.exact` gives its kernel, stationary law, mixing time and exit times
exactly. Here each diagnostic of the book runs on such a chain and is set beside the exact value:
the coupling estimate and the contraction bound (:func:`ground_truth`), the margin certificate
(:func:`margin_check`), the embedding hitting time (:func:`hitting_check`), the traps detector's
basins (:func:`trap_basins`) and the holding times of the deepest traps (:func:`holding_check`).
:func:`compare` counts what the comparison shows, for the chapter and the findings page alike;
the rest builds the chapter's tables. Its sentences, views and figures are in
:mod:`textglauber.pages.ground_truth`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from . import influence, margins, models, rectangle, semantics, stats, traps
from .device import measurement_dtype
from .profile import ExactModel, Holding
from .engine import ChainSpec, couple, first_changes, run
from .exact import (TabulatedScorer, compatibility_gap, conductance, deepest_traps, exit_time, glauber_kernel,
                    leave_probabilities, mixing_steps, pseudo_likelihood_law, spectral_gap, stationary)
from .scheduler import RunSettings, run_all
from .seeding import child_seed

TRUTH_COLUMNS = ["model", "tokens", "n", "states", "temperature", "exact t_mix", "relaxation time", "coupling estimate",
                 "censored pairs", "hitting time (median)", "exact alpha", "contraction bound", "TV(pi, PL law)",
                 "KL(pi || PL law)", "mean R at T"]
MARGIN_COLUMNS = ["model", "temperature", "margin Delta", "pi(trap)", "certified holding time", "exact holding time",
                  "margin t_mix bound", "exact t_mix"]
HOLDING_COLUMNS = ["model", "tokens", "temperature", "trap rank", "state", "exact mean holding time",
                   "simulated mean holding time", "CI low", "CI high", "exact inside CI", "chains", "censored",
                   "steps simulated", "jumps", "rows scored"]


# --------------------------------------------------------------------------- the checks
def tabulated_chains(table: TabulatedScorer, temperature: float, chains: int, steps: int, gen: torch.Generator):
    """Chains of the engine on a tabulated scorer from uniform random starts, every step recorded."""
    states = table.chain.states
    start = torch.as_tensor(states[torch.randint(len(states), (chains,), generator=gen).numpy()])
    seed = child_seed(gen)
    return run(table, start, ChainSpec(temperature=float(temperature), steps=steps, record_every=1,
                                       prefix_len=table.chain.free[0], checkpoint_every=max(steps, 1)), seed=seed)


def holding_check(table: TabulatedScorer, temperature: float, *, traps: int, chains: int, steps: int,
                  gen: torch.Generator, level: float = 0.95, P=None) -> pd.DataFrame:
    """Simulated holding times in the deepest traps of an enumerable chain beside their exact mean.

    Each of the ``traps`` states with the longest exact expected holding time 1 / (1 - P(x, x))
    starts ``chains`` chains of the engine, which leave it by one jump each
    (:func:`textglauber.engine.first_changes`): the trap's m rows, scored once for all its chains,
    and a row for each chain that leaves, however long it holds.
    A chain still there after ``steps`` steps is censored. The estimate of the mean is the
    geometric law's maximum likelihood under censoring with its interval at ``level``
    (:func:`textglauber.stats.geometric_mean_ci`). One row per trap: the exact and simulated
    means, the chains, how many were censored, the chain-steps simulated (what the plain engine
    would score, one row per chain and step), the jumps made and the rows scored."""
    ch = table.chain
    P = glauber_kernel(table, table.n, temperature, prefix=ch.states[0, :ch.free[0]]).kernel if P is None else P
    leave = leave_probabilities(P)
    word = dict(zip(table.vocab.ids.tolist(), table.vocab.tokens))
    rows = []
    for rank, x in enumerate(deepest_traps(P, traps)):
        start = torch.as_tensor(ch.states[x]).repeat(chains, 1)
        seed = child_seed(gen)
        fc = first_changes(table, start, ChainSpec(temperature=float(temperature), steps=steps,
                                                   prefix_len=ch.free[0]), seed)
        held = np.where(fc.censored, steps, fc.steps)
        mean, lo, hi = stats.geometric_mean_ci(held, fc.censored, level)
        exact_mean = 1.0 / leave[x] if leave[x] > 0 else np.inf
        rows.append({"temperature": float(temperature), "trap rank": rank + 1, "state index": int(x),
                     "state": " ".join(word[int(t)] for t in ch.states[x]),
                     "exact mean holding time": exact_mean, "simulated mean holding time": mean,
                     "CI low": lo, "CI high": hi, "exact inside CI": bool(lo <= exact_mean <= hi),
                     "chains": chains, "censored": int(fc.censored.sum()), "budget": steps,
                     "steps simulated": int(held.sum()), "jumps": int((~fc.censored).sum()), "rows scored": fc.rows})
    return pd.DataFrame(rows)


def margin_check(table: TabulatedScorer, P, temperature: float, pi: np.ndarray | None = None) -> dict:
    """The margin certificate against exact answers, on the state whose every free site is the
    model's argmax with the largest margin Delta = min_i g_i (the strongest perfect trap).

    Its exact mean holding time 1 / (1 - P(x, x)) must be at least the certified
    1 / ((|A| - 1) e^{-Delta/T}), and the exact t_mix at least e^{Delta/T} / (4 (|A| - 1)) when
    pi(x) <= 1/2. Returns NaNs when no state is an argmax fixed point."""
    pi = stationary(P) if pi is None else pi
    free = table.chain.free
    gaps = margins.score_gaps(table, torch.as_tensor(table.chain.states))[:, free]
    delta = gaps.min(1)
    k = table.vocab.size
    if not (delta > 0).any():
        return {"margin Delta": np.nan, "pi(trap)": np.nan, "exact holding time": np.nan,
                "certified holding time": np.nan, "margin t_mix bound": np.nan}
    x = int(np.argmax(delta))
    return {"margin Delta": float(delta[x]), "pi(trap)": float(pi[x]),
            "exact holding time": float(exit_time(P, np.arange(len(pi)) == x)[0]),
            "certified holding time": 1.0 / margins.escape_bound(float(delta[x]), k, temperature),
            "margin t_mix bound": (margins.tmix_lower_bound(float(delta[x]), k, temperature)
                                   if pi[x] <= 0.5 else np.nan)}


def hitting_check(table: TabulatedScorer, chain_run, emb: np.ndarray, pi: np.ndarray, rel_delta: float,
                  idx: np.ndarray | None = None) -> dict:
    """Embedding hitting times of the recorded chains against the exact stationary law.

    ``emb`` holds a unit embedding of every enumerated state. Chain b starting at x_0 hits when
    1 - cos(E(x_0), E(x_t)) first reaches rel_delta times its exact stationary value
    E_{y ~ pi}[1 - cos(E(x_0), E(y))]: a fixed fraction of the distance a mixed chain would show.
    Returns the censored median and the share censored. ``idx`` is the recorded states' index in
    the enumeration (R, B), when the caller has it already."""
    idx = table.chain.index(chain_run.states) if idx is None else idx      # (R, B)
    d = semantics.drift_of(emb[idx])
    target = rel_delta * (1.0 - emb[idx[0]] @ (emb.T @ pi))          # (B,)
    hit = d >= target[None, :]
    censored = ~hit.any(0)
    tau = np.where(censored, np.nan, chain_run.steps[hit.argmax(0)].astype(float))
    med = semantics.censored_median(tau, censored, float(chain_run.steps[-1]))
    return {"hitting time (median)": med["median"], "hitting censored": med["censored"]}


def trap_basins(table: TabulatedScorer, chain_run, emb: np.ndarray, P, pi: np.ndarray, *, window: int,
                rel_threshold: float, idx: np.ndarray | None = None) -> pd.DataFrame:
    """The traps chapter's detector on chains over an enumerable space, each trap's basin (the
    states it visited) with its exact conductance and exact mean exit time.

    The detector's threshold, a drift rate per step, is ``rel_threshold`` times the mean drift of one
    move of these chains (with a record at every step, as :func:`tabulated_chains` makes, each
    nonzero drift between records is one move); ``idx`` as in :func:`hitting_check`."""
    idx = table.chain.index(chain_run.states) if idx is None else idx
    c = traps.consecutive_drift(emb[idx])
    moves = c[1:][c[1:] > 0]
    if len(moves) == 0:
        return pd.DataFrame()
    threshold = rel_threshold * float(moves.mean())
    rows = []
    for b in range(idx.shape[1]):
        for start, end in traps.detect(chain_run.steps, c[:, b], window, threshold):
            inside = idx[(chain_run.steps >= start) & (chain_run.steps <= end), b]
            members = np.zeros(len(pi), bool)
            members[np.unique(inside)] = True
            if members.all():
                continue
            rep = int(np.bincount(inside).argmax())
            exits = exit_time(P, members)
            rows.append({"chain": b, "start": start, "duration": end - start,
                         "censored": bool(end >= chain_run.steps[-1]), "basin states": int(members.sum()),
                         "pi(basin)": float(pi[members].sum()), "conductance": conductance(P, members, pi),
                         "exact mean exit time": float(exits[np.flatnonzero(members).searchsorted(rep)])})
    return pd.DataFrame(rows)


def coupling_estimate(tau: np.ndarray, censored: np.ndarray, budget: int, eps: float) -> float:
    """The first t in 0..budget at which the share of pairs not yet coupled (tau > t, a censored
    pair never coupled) is at most ``eps``; NaN when the budget ends before that."""
    tau = np.where(censored, np.inf, tau)
    grid = np.arange(budget + 1)
    tail = (tau[None, :] > grid[:, None]).mean(1)
    return int(grid[np.argmax(tail <= eps)]) if (tail <= eps).any() else np.nan


# --------------------------------------------------------------------------- every diagnostic, per temperature
@dataclass
class Diagnostics:
    """What :func:`ground_truth` returns for one model (the chapter's parameters are
    :class:`textglauber.profile.chapters.GroundTruth`)."""
    table: pd.DataFrame       # one row per temperature: every diagnostic beside its exact value
    traps: pd.DataFrame       # one row per trap found on the exact chains


@dataclass
class _Settings:
    """What :func:`ground_truth` runs at each temperature besides the exact computation."""
    pairs: int
    budget: int
    eps: float
    embedding: np.ndarray | None
    chains: int
    rel_delta: float
    trap_window: int
    trap_threshold: float


def ground_truth(table: TabulatedScorer, temperatures, *, pairs: int, budget: int, rectangles: int,
                 gen: torch.Generator, eps: float, chains: int, rel_delta: float, trap_window: int,
                 trap_threshold: float, embedding: np.ndarray | None = None) -> Diagnostics:
    """Every diagnostic of the book beside the exact answer, on one enumerable chain.

    Per temperature: exact t_mix(eps), absolute spectral gap and relaxation time, the
    compatibility gap between pi_T and the pseudo-likelihood law, the exact alpha(T) and the
    contraction bound where alpha < 1, and the coupling estimate (the first t at which the
    sampled pairs' coalescence tail drops to eps; an estimate, since the pairs are random,
    not the worst case). Also the mean rectangle R at T = 1 (R scales as 1/T), and the margin
    certificate against the exact holding time and t_mix (:func:`margin_check`).

    With ``embedding`` (a unit vector per enumerated state), ``chains`` engine chains run for
    ``budget`` steps at each temperature: their embedding hitting time is set beside the exact
    t_mix (:func:`hitting_check`) and the traps they show get exact conductances
    (:func:`trap_basins`). The chapter's schema holds the values of every keyword
    (:class:`textglauber.profile.chapters.GroundTruth`); none has a default here."""
    if table.chain.free[0] != 0:
        raise ValueError("ground_truth needs a table without a frozen prefix")
    settings = _Settings(pairs, budget, eps, embedding, chains, rel_delta, trap_window, trap_threshold)
    states = torch.as_tensor(table.chain.states)
    rects = rectangle.sample(table, states, rectangles, gen, top_k=table.vocab.size)
    mean_R = float(rectangle.score_mlm(table, rects, temperature=1.0).R.mean())
    infl = influence.influence(table, states, temperatures, top_k=None)
    rows, trap_rows = [], []
    for ti, T in enumerate(temperatures):
        known = {"exact alpha": float(infl.alpha[ti]), "contraction bound": float(infl.mixing_bound(eps)[ti]),
                 "mean R at T=1": mean_R, "mean R at T": mean_R / T}
        row, found = _at_temperature(table, states, T, gen, settings, known)
        rows.append(row)
        if len(found):
            trap_rows.append(found.assign(temperature=float(T)))
    return Diagnostics(pd.DataFrame(rows), pd.concat(trap_rows, ignore_index=True) if trap_rows else pd.DataFrame())


def _at_temperature(table: TabulatedScorer, states: torch.Tensor, T: float, gen: torch.Generator,
                    s: _Settings, known: dict) -> tuple[dict, pd.DataFrame]:
    """One temperature's row (the exact answers, ``known``'s alpha, bound and rectangles, the
    diagnostics) and the traps its chains showed. The generator draws the coupled pairs' starts and
    seed first, then the engine chains'."""
    P = glauber_kernel(table, states.shape[1], T).kernel
    pi = stationary(P)
    spec = spectral_gap(P)
    gap = compatibility_gap(pi, pseudo_likelihood_law(table.chain, table, T))
    pick = torch.randint(len(states), (2, s.pairs), generator=gen)
    pairs = couple(table, states[pick[0]], states[pick[1]], T, s.budget, gen)
    try:
        tmix = mixing_steps(P, s.eps, pi=pi)
    except RuntimeError:
        tmix = np.nan
    extra, found = margin_check(table, P, float(T), pi), pd.DataFrame()
    if s.embedding is not None:
        chains = tabulated_chains(table, T, s.chains, s.budget, gen)
        idx = table.chain.index(chains.states)                      # the chains mapped once, for both checks
        extra |= hitting_check(table, chains, s.embedding, pi, s.rel_delta, idx=idx)
        found = trap_basins(table, chains, s.embedding, P, pi, window=s.trap_window, rel_threshold=s.trap_threshold,
                            idx=idx)
    row = {"temperature": float(T), "states": len(states), "exact t_mix": tmix,
           "relaxation time": spec["relaxation_time"], "complex spectrum": spec["complex"],
           "TV(pi, PL law)": gap["tv"], "KL(pi || PL law)": gap["kl"],
           "exact alpha": known["exact alpha"], "contraction bound": known["contraction bound"],
           "coupling estimate": coupling_estimate(pairs.tau, pairs.censored, s.budget, s.eps),
           "censored pairs": float(pairs.censored.mean()),
           "mean R at T=1": known["mean R at T=1"], "mean R at T": known["mean R at T"]}
    return row | extra, found


# --------------------------------------------------------------------------- what the comparison shows
@dataclass
class Comparison:
    """What a ground-truth table (and its holding-time table) says about the diagnostics, as counts
    over its model-temperature cases where both sides are known (worded by
    :mod:`textglauber.pages.ground_truth`)."""
    cases: int
    coupling_cases: int           # a coupling estimate and an exact t_mix
    coupling_near: int            # of those, the estimate within a factor 2 of t_mix
    hitting_cases: int            # a median hitting time and an exact t_mix
    hitting_below: int            # of those, the median below t_mix
    hitting_max_ratio: float      # the largest t_mix over the median hitting time
    bound_cases: int              # a contraction bound (alpha < 1) and an exact t_mix
    bound_holds: int              # of those, the bound at least t_mix
    bound_mean_ratio: float       # the mean of the bound over t_mix
    holding_traps: int = 0        # deepest traps timed by jumps
    holding_inside: int = 0       # of those, the exact mean inside the simulated interval
    holding_left: int = 0         # of those, traps some chain left within the budget
    holding_steps: int = 0        # chain-steps the jumps simulated


def compare(truth: pd.DataFrame, holding: pd.DataFrame | None = None) -> Comparison:
    """Count what the exact answers say about the coupling estimate, the median hitting time and
    the contraction bound in ``truth`` (the chapter's ``ground_truth`` table), and, with the
    ``holding_times`` table, how often the exact mean hold lies inside the simulated interval."""
    c, h, b = cases(truth)
    r = h["exact t_mix"] / h["hitting time (median)"]
    out = Comparison(cases=len(truth), coupling_cases=len(c),
                   coupling_near=int((c["coupling estimate"] / c["exact t_mix"]).between(0.5, 2).sum()),
                   hitting_cases=len(h), hitting_below=int((r > 1).sum()),
                   hitting_max_ratio=float(r.max()) if len(h) else np.nan, bound_cases=len(b),
                   bound_holds=int((b["contraction bound"] >= b["exact t_mix"]).sum()),
                   bound_mean_ratio=float((b["contraction bound"] / b["exact t_mix"]).mean()) if len(b) else np.nan)
    if holding is not None and len(holding):
        for name, value in holding_counts(holding).items():
            setattr(out, f"holding_{name}", value)
    return out


def cases(truth: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The rows with an exact t_mix and, beside it, a coupling estimate, a median hitting time, or
    a contraction bound (finite: alpha < 1)."""
    exact = truth["exact t_mix"].notna()
    return (truth[truth["coupling estimate"].notna() & exact], truth[truth["hitting time (median)"].notna() & exact],
            truth[np.isfinite(truth["contraction bound"]) & exact])


def holding_counts(h: pd.DataFrame) -> dict:
    """Traps timed, exact means inside their interval, traps some chain left, chain-steps simulated."""
    return {"traps": len(h), "inside": int(h["exact inside CI"].sum()), "left": len(h[h.jumps > 0]),
            "steps": int(h["steps simulated"].sum())}


# --------------------------------------------------------------------------- the chapter
@dataclass
class Restricted:
    """The chapter's restricted models, run: the ground-truth rows and trap basins of all of them,
    each model's label and table, and the models' descriptions for the manifest."""
    truth: pd.DataFrame
    basins: pd.DataFrame
    tables: list[tuple[dict, TabulatedScorer]]
    described: list[dict]
    notes: list[str]


def run_models(specs: list, run: RunSettings, *, temperatures, **settings) -> Restricted:
    """:func:`ground_truth` for each model entry of ``specs`` restricted to its tokens and length, with the
    model's own embedding of each state; ``settings`` are :func:`ground_truth`'s. One unit of work per
    entry (:func:`model_unit`) as ``run`` says (:class:`textglauber.scheduler.RunSettings`: each
    entry's seed drawn from its generator, in the order of ``specs``, before any runs), with float32
    weights unless a dtype is named (:func:`textglauber.device.measurement_dtype`). Each entry of
    ``specs`` is read as the chapter's schema types it (:class:`textglauber.profile.ExactModel`)."""
    specs = [ExactModel.part_of(spec) for spec in specs]
    seeds = [child_seed(run.gen) for _ in specs]
    units = [(f"ground_truth, restricted chain, model {spec.name}, tokens {' '.join(spec.tokens)}, n = {spec.n}",
              model_unit, (spec, seed, run.on_missing_model, run.device, run.dtype, temperatures, settings))
             for spec, seed in zip(specs, seeds)]
    parts = run_all(units, run.scheduler)
    notes = [note for _, ns in parts for note in ns]
    done = [part for part, _ in parts if part is not None]
    frames = [part.truth for part in done]
    traps = [part.basins for part in done if len(part.basins)]
    return Restricted(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(),
                      pd.concat(traps, ignore_index=True) if traps else pd.DataFrame(),
                      [(part.label, part.table) for part in done], [part.described for part in done], notes)


@dataclass
class RestrictedPart:
    """One model entry's share of :class:`Restricted` (:func:`model_unit`)."""

    truth: pd.DataFrame
    basins: pd.DataFrame
    label: dict
    table: TabulatedScorer
    described: dict


def model_unit(spec: ExactModel, seed: int, on_missing_model: str, device: str, dtype: str, temperatures, settings: dict):
    """:func:`ground_truth` of one model entry, from a generator seeded with ``seed``:
    (:class:`RestrictedPart`, or None where the model was skipped, notes). A unit of work that runs
    the same in this process or on a worker (its table holds the scores, not the model)."""
    notes: list = []
    opened = models.or_skip(on_missing_model, notes, spec.name, models.open_mlm, spec, device=device,
                            dtype=measurement_dtype(dtype))
    if opened is None:
        return None, notes
    lm, scorer = opened
    table = TabulatedScorer(scorer, spec.n)
    embedding = semantics.embedder("self", lm)(table.chain.states)      # the model's own view of each state
    gt = ground_truth(table, temperatures, gen=torch.Generator().manual_seed(int(seed)), embedding=embedding,
                      **settings)
    label = dict(model=spec.name, tokens=" ".join(spec.tokens), n=spec.n)
    basins = gt.traps.assign(**label) if len(gt.traps) else pd.DataFrame()
    return RestrictedPart(gt.table.assign(**label), basins, label, table, lm.describe()), notes


def basin_summary(basins: pd.DataFrame) -> pd.DataFrame:
    """The traps found on the exact chains, per model and temperature: how many, and the medians of
    their duration, basin size, conductance and exact exit time."""
    return (basins.groupby(["model", "temperature"], sort=False)
            .agg(traps=("chain", "size"), median_duration=("duration", "median"),
                 censored=("censored", "mean"), median_states=("basin states", "median"),
                 median_conductance=("conductance", "median"),
                 median_exact_exit=("exact mean exit time", "median"))
            .reset_index())


def holding_checks(restricted: list[tuple[dict, TabulatedScorer]], holding: Holding, gen: torch.Generator,
                  level: float) -> pd.DataFrame:
    """:func:`holding_check` for each restricted model (label, table) at each of ``holding``'s
    temperatures, its ``deepest`` traps with ``chains`` chains of ``steps`` steps each."""
    frames = []
    for label, tab in restricted:
        for T in holding.temperatures:
            frames.append(holding_check(tab, T, traps=holding.deepest, chains=holding.chains, steps=holding.steps,
                                        gen=gen, level=level).assign(**label))
    return pd.concat(frames, ignore_index=True)
