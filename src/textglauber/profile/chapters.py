"""Each chapter's parameters as one model (:data:`CHAPTERS`, by notebook), with the sections they
hold (chapter 3's exact phase diagram, chapter 5's escape, chapter 6's Ising checks) and the
relations between keys that the notebooks and the library would otherwise check at run time."""
from __future__ import annotations

import math
from functools import lru_cache
from typing import ClassVar, Optional

from pydantic import model_validator

from .entries import (BoundsModel, Closed, Control, EmbeddedModel, ExactModel, IncompatibilityModel, ModelSpec,
                      PhaseModel, relation)
from .values import (LANDSCAPE_MAX_N, MAX_SPINS, MAX_STATES, NULL_SEEDS, PHASE_MAX_N, PHASE_TMIX_MAX_STATES,
                     TRAINING_PRESETS, Count0, Device, DType, Int, Length, ListOf, MissingModel, Num, PosInt, PosNum,
                     ProfileName, Seed, Temperatures, Text, TopicScorer, TrainingRun)


class Landscape(Closed):
    """Chapter 3's landscape past enumeration (:mod:`textglauber.landscape`): the two-token chains at
    ``lengths`` longer than a model's ``max_n`` are searched for wells from ``starts`` random states
    (and both uniform ones), one length's search scoring at most ``max_states`` states in all, and a
    search that stops between two wells up to ``settle_states`` more to close Gamma's bracket; the
    global design and the first ``passages`` passages are searched."""
    noun: ClassVar[str] = "a key of phase.landscape"
    lengths: ListOf(Length(Int(ge=3, le=LANDSCAPE_MAX_N)), "integers in [3, 64], increasing", min_length=0,
                    distinct=True)
    passages: Count0
    starts: Int(ge=0, le=256)
    max_states: Int(ge=1, le=100_000)
    settle_states: Int(ge=0, le=100_000)

    @model_validator(mode="after")
    def _relations(self):
        if list(self.lengths) != sorted(self.lengths):
            raise relation("lengths", self.lengths, "must be increasing")
        return self


class Covering(Closed):
    """Chapter 3's covering chains (:mod:`textglauber.phase.covering`): each model's first passage,
    its first n tokens for n in ``lengths``, covered at each of ``temperatures`` until at most ``eps``
    of every visited conditional is left out, or until the sets would hold more than ``max_states``."""
    noun: ClassVar[str] = "a key of phase.covering"
    lengths: ListOf(Length(Int(ge=2, le=12)), "integers in [2, 12]", min_length=0, distinct=True)
    temperatures: Temperatures
    eps: Num(gt=0, lt=0.5)
    max_states: Int(ge=1, le=PHASE_TMIX_MAX_STATES * 4)


class Phase(Closed):
    """Chapter 3's exact phase diagram: two-token chains of each model at every n from ``min_n`` to
    its ``max_n``, at each temperature; t_mix by exact powers up to ``tmix_max_states`` states;
    coupling calibrated on the exact chain at ``calibration_n``."""
    noun: ClassVar[str] = "a key of phase"
    models: ListOf(PhaseModel, "model entries {name, pair, corpus, max_n, ...}")
    min_n: Int(ge=2)
    temperatures: ListOf(PosNum, "finite numbers > 0", min_length=2, distinct=True)
    tmix_max_states: Int(ge=4, le=PHASE_TMIX_MAX_STATES)
    calibration_n: Int(ge=2)
    calibration_pairs: Int(ge=10, le=100_000)
    passages: Int(ge=1, le=20)
    passage_max_n: Int(ge=3, le=PHASE_MAX_N)
    landscape: Landscape
    covering: Covering

    @model_validator(mode="after")
    def _relations(self):
        for k, m in enumerate(self.models):
            if m.max_n < self.min_n:
                raise relation(f"models[{k}].max_n", m.max_n, f"must be at least min_n = {self.min_n}")
            if self.calibration_n > m.max_n:
                raise relation("calibration_n", self.calibration_n,
                               f"must be at most every model's max_n (models[{k}].max_n = {m.max_n})")
        if self.passage_max_n < self.min_n:
            raise relation("passage_max_n", self.passage_max_n, f"must be at least min_n = {self.min_n}")
        if self.landscape.passages > self.passages:
            raise relation("landscape.passages", self.landscape.passages,
                           f"must be at most passages = {self.passages} (the passages that exist)")
        if 2 ** self.calibration_n > self.tmix_max_states:
            raise relation("calibration_n", self.calibration_n, f"must keep 2^calibration_n within tmix_max_states = "
                                                                f"{self.tmix_max_states} (the exact t_mix it is set beside)")
        return self


# ----- the chapters
class Chapter(Closed):
    """What the build injects into every chapter: the profile's name, the results folder and the
    profile's ``defaults`` (a chapter may set those for itself)."""
    noun: ClassVar[str] = "a parameter of this chapter"
    profile: ProfileName
    results_root: Text(None, "a folder path")
    seed: Seed
    device: Device
    dtype: DType
    on_missing_model: MissingModel


class Incompatibility(Chapter):
    models: ListOf(IncompatibilityModel, "model entries {name, corpus, ...}")
    control: Optional[Control]
    seq_len: Length(Int(ge=2))         # a rectangle changes two distinct sites
    n_rectangles: PosInt
    top_k: Int(ge=1, le=1000)
    temperature: PosNum
    grid_k: Int(ge=0)
    n_grids: Count0
    training_run: TrainingRun

    @model_validator(mode="after")
    def _relations(self):
        if self.grid_k == 1:
            raise relation("grid_k", 1, "must be 0 (no grids) or at least 2: a grid is grid_k x grid_k tokens")
        if self.grid_k > self.top_k:
            raise relation("grid_k", self.grid_k, f"must be at most top_k = {self.top_k}: the grid's other tokens "
                                                  "are drawn from the model's top-k")
        if self.training_run:
            if self.training_run not in TRAINING_PRESETS:
                raise relation("training_run", self.training_run,
                               f"must be '' or a training preset: {', '.join(TRAINING_PRESETS)}")
        return self


class Bounds(Chapter):
    models: ListOf(BoundsModel, "model entries {name, corpus, drift_token, ...}")
    seq_len: Length(Int(ge=2))         # influence compares sites i != j
    n_contexts: PosInt
    top_k: PosInt
    extra: Count0
    temperatures: Temperatures
    eps: Num(gt=0, lt=1) = 0.25        # the distance of the mixing bound t_mix(eps)
    drift_k: Count0
    drift_states: PosInt
    drift_temperatures: Temperatures

    @model_validator(mode="after")
    def _relations(self):
        if self.drift_k > self.seq_len:
            raise relation("drift_k", self.drift_k, f"must be at most seq_len = {self.seq_len} (copies planted in a window)")
        return self


Lengths = Length(ListOf(Int(ge=2), "integers >= 2", min_length=2, distinct=True))
Drift = Num(gt=0, lt=2)                # 1 - cos lies in [0, 2]


class Crossover(Chapter):
    model: EmbeddedModel
    lengths: Lengths
    drift_temperatures: Temperatures
    trials: PosInt
    sweeps: PosNum
    record_every: PosInt
    delta: Drift
    delta_sensitivity: ListOf(Drift, "finite numbers in (0, 2)")
    fixed_t: PosInt
    coupling_lengths: Length(ListOf(Int(ge=2), "integers >= 2", min_length=2, distinct=True, nullable=True))
    coupling_temperatures: Temperatures
    pairs: PosInt
    budget_sweeps: PosNum
    reference_sweeps: PosNum
    fast_within: PosNum
    power_replicates: Int(ge=1, le=1000)
    phase: Phase

    @model_validator(mode="after")
    def _relations(self):
        shortest = min(self.lengths)
        budget = self.sweeps * shortest
        if self.fixed_t > budget:
            raise relation("fixed_t", self.fixed_t, f"must be at most sweeps * min(lengths) = {self.sweeps:g} * {shortest} "
                                                    f"= {budget:g} steps (the hitting-time budget at the shortest length)")
        if self.record_every > self.fixed_t:
            raise relation("record_every", self.record_every, f"must be at most fixed_t = {self.fixed_t}, or the drift "
                                                              "'at fixed_t' is read at step 0")
        if self.reference_sweeps > self.budget_sweeps:
            raise relation("reference_sweeps", self.reference_sweeps,
                           f"must be at most budget_sweeps = {self.budget_sweeps:g} (read off the same pairs)")
        longest = max(self.coupling_lengths or self.lengths)
        need = self.fast_within * math.log(longest)
        if self.budget_sweeps < need:
            raise relation("budget_sweeps", self.budget_sweeps,
                           f"must be at least fast_within * ln(max coupling length) = {self.fast_within:g} * ln({longest}) "
                           f"= {need:.1f}, or a cell censored before its limit could be fast or slow")
        return self


class EscapeGrowth(Closed):
    """Chapter 5's growth of escape with length (:func:`textglauber.traps.escape_growth`): at each length,
    the deepest of ``traps`` perfect traps found (largest margin) and its V_k at k = ceil(n/4), by a
    search of at most ``max_states`` states; chains at ``temperature`` at the ``check_lengths``."""
    noun: ClassVar[str] = "a key of escape.growth"
    models: ListOf(ModelSpec, "model entries {name, ...}")
    lengths: ListOf(Length(Int(ge=4)), "integers >= 4, increasing", distinct=True)
    traps: PosInt
    max_states: Int(ge=1, le=100_000)
    check_lengths: ListOf(Int(ge=4), "lengths of escape.growth.lengths", min_length=0, distinct=True)
    temperature: PosNum
    chains: Int(ge=2, le=10_000)

    @model_validator(mode="after")
    def _relations(self):
        if list(self.lengths) != sorted(self.lengths):
            raise relation("lengths", self.lengths, "must be increasing")
        for k, n in enumerate(self.check_lengths):
            if n not in self.lengths:
                raise relation(f"check_lengths[{k}]", n, f"must be one of lengths = {list(self.lengths)}")
        return self


class EscapeLength(Closed):
    """Chapter 5's escape against length by slopes (:func:`textglauber.traps.escape_length`): one nested
    family of traps over ``lengths`` (from ``traps`` found at the shortest), at each length the exponent
    at k = ceil(n/4) (a search of at most ``max_states`` states) and an Arrhenius slope over
    ``temperatures`` temperatures where exp(exponent / T) spans 10^holding_decades, ``chains`` chains each."""
    noun: ClassVar[str] = "a key of escape.length"
    models: ListOf(ModelSpec, "model entries {name, ...}")
    lengths: ListOf(Length(Int(ge=2)), "at least 3 integers >= 2, increasing", min_length=3, distinct=True)
    traps: PosInt
    max_states: Int(ge=1, le=100_000)
    temperatures: Int(ge=4)
    holding_decades: ListOf(Num(ge=0, le=15), "two numbers in [0, 15], the first smaller", min_length=2)
    chains: Int(ge=2)

    @model_validator(mode="after")
    def _relations(self):
        if list(self.lengths) != sorted(self.lengths):
            raise relation("lengths", self.lengths, "must be increasing")
        lo_hi = self.holding_decades
        if len(lo_hi) != 2 or lo_hi[0] >= lo_hi[1]:
            raise relation("holding_decades", lo_hi, "must be two numbers [low, high] with low < high")
        return self


class Escape(Closed):
    """Chapter 5's escape section (:mod:`textglauber.traps.escape_section`)."""
    noun: ClassVar[str] = "a key of escape"
    models: ListOf(ModelSpec, "model entries {name, ...}")
    seq_len: Length(Int(ge=2))
    traps: PosInt
    chains: Int(ge=2)
    distances: ListOf(PosInt, "integers >= 1", distinct=True)
    holding_decades: ListOf(Num(ge=0, le=15), "two numbers in [0, 15], the first smaller", min_length=2)
    temperatures: Int(ge=2)
    horizon: Num(ge=1)
    max_moves: Int(ge=1, le=100_000)           # events (single jumps and superbasin exits) a chain may make
    exact_models: ListOf(ExactModel, "model entries {name, tokens, n}")
    exact_temperatures: Temperatures
    exact_distances: ListOf(PosInt, "integers >= 1", distinct=True)
    exact_chains: Int(ge=2)
    exact_max_moves: Int(ge=1, le=100_000)     # events a chain of the exactness check may make
    growth: EscapeGrowth
    candidates: PosInt               # traps found before the section picks ``traps`` (non-trivial ones first)
    length: EscapeLength

    @model_validator(mode="after")
    def _relations(self):
        lo_hi = self.holding_decades
        if len(lo_hi) != 2 or lo_hi[0] >= lo_hi[1]:
            raise relation("holding_decades", lo_hi, "must be two numbers [low, high] with low < high "
                                                            "(decades of the one-state holding time)")
        if self.candidates < self.traps:
            raise relation("candidates", self.candidates, f"must be at least traps = {self.traps}")
        for k, d in enumerate(self.distances):
            if d > self.seq_len:
                raise relation(f"distances[{k}]", d, f"must be at most escape.seq_len = {self.seq_len}")
        for k, m in enumerate(self.exact_models):
            if len(m.tokens) ** m.n > MAX_STATES:
                raise relation(f"exact_models[{k}].n", m.n, f"must keep len(tokens)^n = {len(m.tokens)}^{m.n} "
                                                                   f"within {MAX_STATES} enumerated states")
        # every distance is checked on every enumerated model: one wider than a model's n sites is a
        # ball no chain of it can leave, and its case would not run (traps.escape_section.exact_cases skips it)
        low = min(range(len(self.exact_models)), key=lambda j: self.exact_models[j].n)
        n = self.exact_models[low].n
        for k, d in enumerate(self.exact_distances):
            if d > n:
                raise relation(f"exact_distances[{k}]", d,
                               f"must be at most the smallest exact model's n = {n} (escape.exact_models[{low}].n): "
                               "each distance is checked on every exact model, and none can move further than its n sites")
        return self


class Traps(Chapter):
    model: EmbeddedModel
    seq_len: Length(PosInt)
    chains: PosInt
    steps: PosInt
    temperature: PosNum
    record_every: PosInt
    window: PosInt
    threshold: PosNum
    checkpoint_every: PosInt
    escape: Escape

    @model_validator(mode="after")
    def _relations(self):
        if self.record_every > self.steps:
            raise relation("record_every", self.record_every, f"must be at most steps = {self.steps}")
        if self.window < 2 * self.record_every:
            raise relation("window", self.window, f"must be at least 2 * record_every = {2 * self.record_every} "
                                                  "(a window spans two records)")
        if self.window > self.steps:
            raise relation("window", self.window, f"must be at most steps = {self.steps}")
        if self.checkpoint_every > self.steps:
            raise relation("checkpoint_every", self.checkpoint_every, f"must be at most steps = {self.steps}")
        return self


Label = Text(None, "a label: a non-empty string")


@lru_cache(maxsize=1)
def seed_topics_available() -> tuple[str, ...]:
    """The topics of the packaged seed sentences (textglauber.topics.seed_texts, read without it)."""
    from importlib.resources import files

    text = files("textglauber").joinpath("data/topic_seeds.tsv").read_text(encoding="utf-8")
    return tuple(sorted({ln.split("\t", 1)[0] for ln in text.splitlines() if ln.strip() and not ln.startswith("#")}))


class Basins(Chapter):
    models: ListOf(ModelSpec, "model entries {name, ...}")
    topic_scorer: TopicScorer
    labels: ListOf(Label, "labels", min_length=2, distinct=True)
    basin_label: Label
    seed_topics: ListOf(Label, "seed topics", distinct=True) = ["health", "sport", "science", "food", "technology"]
    seeds_per_topic: PosInt
    chains_per_seed: PosInt
    seq_len: Length(PosInt)
    steps: PosInt
    score_every: PosInt
    temperature: PosNum
    prefix: Text(None, "a string", min_length=0)
    prefix_chains: PosInt
    null_seeds: ListOf(Text(None, "a kind of null seed"), "kinds of null seed", min_length=0, distinct=True)
    null_chains: Count0
    null_alpha: Num(gt=0, lt=1) = 0.05          # level of the one-sided tests against the null

    @model_validator(mode="after")
    def _relations(self):
        for k, kind in enumerate(self.null_seeds):
            if kind not in NULL_SEEDS:
                raise relation(f"null_seeds[{k}]", kind, f"must be one of {', '.join(map(repr, NULL_SEEDS))}")
        if self.null_chains and not self.null_seeds:
            raise relation("null_seeds", [], f"must name at least one kind of null seed for null_chains = {self.null_chains}")
        if self.basin_label not in self.labels:
            raise relation("basin_label", self.basin_label, "must be one of labels")
        if self.steps % self.score_every:
            raise relation("steps", self.steps, f"must be a multiple of score_every = {self.score_every}")
        known = seed_topics_available()
        for k, topic in enumerate(self.seed_topics):
            if topic not in known:
                raise relation(f"seed_topics[{k}]", topic, f"must be a topic with seed sentences: {', '.join(known)}")
        return self


class Holding(Closed):
    noun: ClassVar[str] = "a key of holding"
    temperatures: Temperatures
    deepest: PosInt
    chains: PosInt
    steps: Int(ge=1, le=10**8)


class IsingSeparation(Closed):
    noun: ClassVar[str] = "a key of ising_separation"
    clique: Int(ge=2)
    free: Count0
    coupling: Num()
    field: Num()
    ks: ListOf(PosInt, "integers >= 1", distinct=True)


class IsingFit(Closed):
    noun: ClassVar[str] = "a key of ising_fit"
    spins: Int(ge=2)
    coupling_scale: Num(ge=0)
    field_scale: Num(ge=0)
    model_seed: Seed
    sample_size: Int(ge=1, le=100_000)
    replicates: Int(ge=1, le=1000)


class GroundTruth(Chapter):
    models: ListOf(ExactModel, "model entries {name, tokens, n}")
    temperatures: Temperatures
    pairs: PosInt
    budget: PosInt
    rectangles: PosInt
    chains: PosInt
    eps: Num(gt=0, lt=1) = 0.25             # the distance of the exact t_mix(eps), its bound and the coupling estimate
    rel_delta: Num(gt=0, le=1) = 0.5        # hit when the drift reaches this share of its exact stationary value
    trap_window: PosInt = 50
    trap_threshold: PosNum = 0.1            # share of the mean drift of one move
    holding: Holding
    ising_separation: IsingSeparation
    ising_cliques: ListOf(Int(ge=2), "integers >= 2", distinct=True)
    ising_fit: IsingFit

    @model_validator(mode="after")
    def _relations(self):
        for k, m in enumerate(self.models):
            if len(m.tokens) ** m.n > MAX_STATES:
                raise relation(f"models[{k}].n", m.n, f"must keep len(tokens)^n = {len(m.tokens)}^{m.n} within "
                                                       f"{MAX_STATES} enumerated states")
        if self.trap_window > self.budget:
            raise relation("trap_window", self.trap_window, f"must be at most budget = {self.budget} (the chains' length)")
        sep = self.ising_separation
        spins = sep.clique + sep.free
        if spins > MAX_SPINS:
            key, value = ("ising_separation.clique", sep.clique) if sep.clique > MAX_SPINS else ("ising_separation.free", sep.free)
            raise relation(key, value, f"must keep clique + free = {spins} within {MAX_SPINS} spins")
        for k, b in enumerate(sep.ks):
            if b > spins:
                raise relation(f"ising_separation.ks[{k}]", b, f"must be at most clique + free = {spins}")
        for k, c in enumerate(self.ising_cliques):
            if c + sep.free > MAX_SPINS:
                raise relation(f"ising_cliques[{k}]", c, f"must keep clique + ising_separation.free = {c + sep.free} "
                                                         f"within {MAX_SPINS} spins")
        if self.ising_fit.spins > MAX_SPINS:
            raise relation("ising_fit.spins", self.ising_fit.spins, f"must be at most {MAX_SPINS}")
        return self


class Cost(Chapter):
    pass


CHAPTERS: dict[str, type[Chapter]] = {
    "book/01_incompatibility.ipynb": Incompatibility,
    "book/02_mixing_bounds.ipynb": Bounds,
    "book/03_crossover.ipynb": Crossover,
    "book/04_basins.ipynb": Basins,
    "book/05_traps.ipynb": Traps,
    "book/06_ground_truth.ipynb": GroundTruth,
    "book/90_cost.ipynb": Cost,
}
