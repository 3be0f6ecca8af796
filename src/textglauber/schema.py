"""The declared schema of a profile: every key, its type, its range and the relations between keys.

A profile (``params/NAME.yaml``) is checked in full before anything is loaded, by the build
(``python -m textglauber.bookbuild``) and by ``python -m textglauber.params``: the top-level keys
(:class:`Profile`, or :class:`DerivedProfile` for one that ``derive:``s from another), the
``defaults``, each chapter's entry, and each chapter's parameters as papermill will inject them
(the notebook's own defaults, under the profile's ``defaults``, under the chapter's
``parameters``, after ``derive``/``replace``/``sizes``), against the model declared for that
notebook in :data:`CHAPTERS`.

Every model forbids keys it does not declare, at every level, and takes its types strictly:
no string for a number, no bool for an integer, no float for an integer, no NaN or infinity.
A chapter's model declares exactly the names of its notebook's parameters cell (the build
refuses a notebook whose cell and model differ), so a notebook run through the build can
receive no parameter it does not declare. The checks the notebooks and the library make at run
time on the parameters alone (``fixed_t`` within the hitting-time budget, ``window`` spanning
two records, ``steps`` a multiple of ``score_every``, ...) are relations here, so they fail
before a model loads; what depends on a model or a corpus (a window longer than the corpus
holds, a token the vocabulary lacks) is the pre-flight's (:mod:`textglauber.bookbuild.preflight`), over
every model the parameters name, at any depth: :func:`model_refs` finds them by their types
(:class:`ModelEntry`, the strings marked :class:`NamesModels`) with the tokens and lengths asked of each.

A problem is one line: ``params/smoke.yaml: chapter 'incompatibility': temperature = nan: must
be a finite number > 0`` (:func:`textglauber.params.check_profile` raises :class:`ProfileError` with
one line per problem).
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import json
import math
import re
import types
import typing
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Optional

from annotated_types import Ge, Gt, Le, Lt, MinLen
from pydantic import (AfterValidator, AllowInfNan, BaseModel, BeforeValidator, ConfigDict, Strict, StringConstraints,
                      ValidationError, WrapValidator, model_validator)
from pydantic_core import PydanticCustomError

from .config_errors import NAME_RE, ProfileError, where
from .paths import repo_root

INJECTED = ("profile", "results_root")  # set by the build for every chapter, never by a profile
DEFAULT_KEYS = ("seed", "device", "dtype", "on_missing_model")

# Limits and names the library defines, stated here rather than imported: a chapter's cached key
# covers every module its notebook can reach, this one included (through models -> params), so
# importing the library from here would tie every chapter to modules it does not use.
# tests/bookbuild/test_bad_params.py checks that each equals the library's own.
MAX_STATES = 20_000                 # textglauber.exact.MAX_STATES: states an exact chain enumerates
MAX_SPINS = 12                      # textglauber.ising.MAX_SPINS
PHASE_MAX_N = 20                    # textglauber.phase.MAX_N: 2^20 states, 10^7 rows (a GPU's)
PHASE_TMIX_MAX_STATES = 4096        # textglauber.phase.TMIX_MAX_STATES: exact powers of a dense kernel
NULL_SEEDS = ("shuffled", "random")  # textglauber.topics.NULL_SEEDS
TRAINING_PRESETS = ("english", "tiny")                                  # textglauber.train_mlm.PRESETS
ARTIFACTS = ("standins", "bench", "bench-smoke", "bench-metastable", *TRAINING_PRESETS)   # build.build_artifacts


# --------------------------------------------------------------------------- value types
def _explained(text: str) -> WrapValidator:
    """Any failure of the type and constraints before it reads as 'must be <text>'."""
    def wrap(value, handler):
        try:
            return handler(value)
        except ValidationError:
            raise PydanticCustomError("allowed", "must be {allowed}", {"allowed": text}) from None
    return WrapValidator(wrap)


def Int(ge: int | None = None, le: int | None = None) -> Any:
    """An integer (not a bool, not a float such as 3.0, not a string) within the bounds."""
    text = ("an integer" + (f" in [{ge}, {le}]" if ge is not None and le is not None else
                            f" >= {ge}" if ge is not None else f" <= {le}" if le is not None else ""))
    bounds = [b for b in (Ge(ge) if ge is not None else None, Le(le) if le is not None else None) if b]
    return Annotated[int, Strict(), *bounds, _explained(text)]


def Num(gt: float | None = None, ge: float | None = None, lt: float | None = None, le: float | None = None) -> Any:
    """A finite number (an integer is taken as a number; a bool, a string, NaN or inf are not)."""
    lo = f"({gt:g}" if gt is not None else f"[{ge:g}" if ge is not None else None
    hi = f"{lt:g})" if lt is not None else f"{le:g}]" if le is not None else None
    if lo and hi:
        text = f"a finite number in {lo}, {hi}"
    elif lo:
        text = f"a finite number {'>' if gt is not None else '>='} {lo[1:]}"
    elif hi:
        text = f"a finite number {'<' if lt is not None else '<='} {hi[:-1]}"
    else:
        text = "a finite number"
    bounds = [c(v) for c, v in ((Gt, gt), (Ge, ge), (Lt, lt), (Le, le)) if v is not None]
    return Annotated[float, Strict(), AllowInfNan(False), *bounds, _explained(text)]


def Text(pattern: str | None = None, what: str = "a non-empty string", min_length: int = 1) -> Any:
    extra = [MinLen(min_length)] if min_length else []
    if pattern is not None:
        extra.append(StringConstraints(pattern=pattern))
    return Annotated[str, Strict(), *extra, _explained(what)]


def OneOf(*values: str) -> Any:
    text = repr(values[0]) if len(values) == 1 else "one of " + ", ".join(repr(v) for v in values)
    return Annotated[Literal[values], _explained(text)]


Bool = Annotated[bool, Strict(), _explained("true or false")]


def ListOf(item: Any, what: str, min_length: int = 1, distinct: bool = False, nullable: bool = False) -> Any:
    """A YAML list of ``item`` with at least ``min_length`` entries (distinct ones with ``distinct``);
    ``nullable``: null is allowed too."""
    allowed = (f"a list of {'at least ' + str(min_length) + ' ' if min_length > 1 else ''}"
               f"{'distinct ' if distinct else ''}{what}" + (", or null" if nullable else ""))

    def check(value):
        if value is None and nullable:
            return value
        if not isinstance(value, list) or len(value) < min_length:
            raise PydanticCustomError("allowed", "must be {allowed}", {"allowed": allowed})
        if distinct:
            seen = []
            for v in value:
                if any(type(v) is type(s) and v == s for s in seen):
                    raise PydanticCustomError("allowed", "must be {allowed} ({dup} appears twice)",
                                              {"allowed": allowed, "dup": show(v)})
                seen.append(v)
        return value
    inner = Optional[list[item]] if nullable else list[item]
    return Annotated[inner, BeforeValidator(check)]


PosInt = Int(ge=1)
Count0 = Int(ge=0)
PosNum = Num(gt=0)
Seed = Int(ge=0, le=2**32 - 1)
ProfileName = Text(NAME_RE, "a name of letters, digits, _ and - (a file params/NAME.yaml)")
ChapterName = Text(NAME_RE, "a name of letters, digits, _ and -")


# ----- what a value names, marked on its type (read by model_refs below, ignored by pydantic)
class _Mark:
    """A marker in a type's ``Annotated[...]`` metadata: what a value of that type is to the models."""

    def __init__(self, what: str):
        self.what = what

    def __repr__(self) -> str:
        return f"<{self.what}>"


IN_VOCABULARY = _Mark("tokens that must be in the vocabulary of the model whose entry holds them")
CONTENT_LENGTH = _Mark("content tokens asked of the models of the mapping that holds it")
CORPUS = _Mark("the corpus of the model whose entry holds it")


@dataclass(frozen=True)
class NamesModels:
    """A marker in a string type's metadata: such a string names a model. ``prefixes`` maps a
    ``KIND`` of ``KIND:NAME`` to the role of the model NAME (a string with none of them names no
    model: an embedder ``self``); ``template`` makes any non-empty string name the model
    ``template.format(value)`` in ``role`` (a training run ``tiny`` names ``trained:tiny``)."""

    prefixes: tuple[tuple[str, str], ...] = ()
    template: str = ""
    role: str = ""

    def named(self, value: str) -> tuple[str, str, str] | None:
        """(model name, role, how it was named: the prefix or the template's) or None."""
        kind, sep, rest = value.partition(":")
        for prefix, role in self.prefixes:
            if sep and kind == prefix and rest:
                return rest, role, prefix
        if self.template and value:
            return self.template.format(value), self.role, self.template.partition(":")[0]
        return None


def Length(tp: Any) -> Any:
    """``tp`` (an integer or a list of them) read as lengths in content tokens that the models named
    beside it (in the same mapping, or the entry itself) must take: the pre-flight checks them."""
    return Annotated[tp, CONTENT_LENGTH]


ModelName = Text(r"^\S(.*\S)?$", "a model name: a non-empty string without surrounding spaces")
CorpusName = Annotated[Text(r"^\S(.*\S)?$", "a corpus name or path: a non-empty string without surrounding spaces"),
                       CORPUS]
Token = Annotated[Text(None, "a token: a non-empty string"), IN_VOCABULARY]
Temperatures = ListOf(PosNum, "finite numbers > 0")
Device = Text(r"^(auto|cpu|mps|cuda(:[0-9]+)?)$", "'auto', 'cpu', 'mps', 'cuda' or 'cuda:N'")
DType = OneOf("auto", "float32", "fp32", "bfloat16", "bf16", "float16", "fp16")
MissingModel = OneOf("skip", "fail")


# --------------------------------------------------------------------------- models
class Closed(BaseModel):
    """Unknown keys refused, types taken as written."""
    model_config = ConfigDict(extra="forbid", strict=True)
    noun: ClassVar[str] = "a key here"


def relation(key: str, value, text: str) -> PydanticCustomError:
    """An error between keys, reported on ``key`` (a dotted path inside the model)."""
    return PydanticCustomError("relation", "{text}", {"key": key, "value": value, "text": text})


class Defaults(Closed):
    """``defaults:``: given to every chapter (a chapter's ``parameters`` may set them for itself).
    A profile states all four (after ``derive``); a derived one may leave out what its base gives."""
    noun: ClassVar[str] = "a key of defaults"
    seed: Seed = None
    device: Device = None
    dtype: DType = None
    on_missing_model: MissingModel = None


NotebookPath = Text(r"^book/[A-Za-z0-9_-]+\.ipynb$", "a notebook path book/NAME.ipynb")


def _inside(pattern: str) -> str:
    """A pattern the build reads files by: inside the repository (or the results folder)."""
    if pattern.startswith(("/", "~")) or ".." in Path(pattern).parts:
        raise PydanticCustomError("outside", "outside the repository")
    return pattern


FilePattern = Annotated[str, Strict(), MinLen(1), AfterValidator(_inside),
                        _explained("a path pattern relative to the repository, without '..'")]


class ChapterEntry(Closed):
    noun: ClassVar[str] = "a chapter key"
    notebook: NotebookPath
    parameters: dict[str, Any] = {}
    reads: ListOf(ChapterName, "chapter names", min_length=0, distinct=True) = []
    reads_files: ListOf(FilePattern, "path patterns", min_length=0, distinct=True) = []


class Profile(Closed):
    """A profile written out: ``chapters`` in full."""
    noun: ClassVar[str] = "a profile key"
    profile: ProfileName = None
    description: Text(None, "a string", min_length=0) = None
    defaults: Defaults = None
    artifacts: ListOf(Text(NAME_RE, "an artifact name"), "artifact names", min_length=0, distinct=True) = []
    chapters: dict[ChapterName, ChapterEntry]

    @model_validator(mode="after")
    def _some_chapter(self):
        if not self.chapters:
            raise relation("chapters", {}, "must name at least one chapter")
        return self


class DerivedProfile(Closed):
    """A profile written as another one (``derive: NAME``) with names replaced and counts scaled."""
    noun: ClassVar[str] = "a key of a derived profile"
    profile: ProfileName = None
    derive: ProfileName
    description: Text(None, "a string", min_length=0) = None
    defaults: Defaults = None
    artifacts: ListOf(Text(NAME_RE, "an artifact name"), "artifact names", min_length=0, distinct=True) = []
    replace: dict[Text(None, "a name"), Text(None, "a non-empty replacement name")] = {}
    sizes: dict[ChapterName, dict[str, Any]] = {}


# ----- the models chapters name
class ModelEntry(Closed):
    """A mapping that names one model (its ``name``) in a role: every subclass, wherever a chapter's
    model declares it, is found by :func:`model_refs`. ``role`` is a key of
    ``textglauber.models.ROLES``; a subclass whose role depends on its values overrides :meth:`role_of`."""
    role: ClassVar[str] = "mlm"

    @classmethod
    def role_of(cls, value: dict) -> str:
        return cls.role


class ModelSpec(ModelEntry):
    """A masked LM and how its allowed vocabulary is cut (:func:`textglauber.models.open_mlm`)."""
    noun: ClassVar[str] = "a key of a model entry"
    name: ModelName
    whole_words: Bool = False
    alphabetic: Bool = False
    tokens: ListOf(Token, "tokens", min_length=2, distinct=True, nullable=True) = None


class CorpusModel(ModelSpec):
    corpus: CorpusName


class IncompatibilityModel(CorpusModel):
    kind: OneOf("mlm") = "mlm"
    rectangles: PosInt = None          # this model's own rectangle count


class Control(ModelEntry):
    """The joint-model control: a causal LM over its corpus's most frequent tokens."""
    noun: ClassVar[str] = "a key of the control"
    name: ModelName
    kind: OneOf("causal")
    corpus: CorpusName
    rectangles: PosInt = None
    candidates: Int(ge=2) = 24
    noise: Num(ge=0) = 0.0

    @classmethod
    def role_of(cls, value: dict) -> str:
        return "causal" if value.get("kind") == "causal" else "mlm"       # as rectangle.py reads kind


class BoundsModel(CorpusModel):
    drift_token: Token


Embedder = Annotated[Text(r"^(self|hamming|sentence:\S+)$", "'self', 'hamming' or 'sentence:NAME'"),
                     NamesModels(prefixes=(("sentence", "sentence"),))]


class EmbeddedModel(CorpusModel):
    embedder: Embedder


class ExactModel(ModelSpec):
    """A model restricted to a few tokens at a short length: every state enumerated."""
    tokens: ListOf(Token, "tokens", min_length=2, distinct=True)
    n: Length(Int(ge=2))


class PhaseModel(ModelSpec):
    """A masked LM of the exact phase diagram (:mod:`textglauber.phase`): restricted to two tokens
    per site, ``pair`` at every site (the global design) and a passage of ``corpus`` with the
    model's top alternative at each site (the passage design), at every n up to ``max_n``."""
    pair: ListOf(Token, "two tokens", min_length=2, distinct=True)
    corpus: CorpusName
    max_n: Length(Int(ge=3, le=PHASE_MAX_N))

    @model_validator(mode="after")
    def _two(self):
        if len(self.pair) != 2:
            raise relation("pair", self.pair, "must name exactly two tokens")
        return self


class Phase(Closed):
    """Chapter 3's exact phase diagram: two-token chains of each model at every n from ``min_n`` to
    its ``max_n``, at each temperature; t_mix by exact powers up to ``tmix_max_states`` states;
    coupling calibrated on the exact chain at ``calibration_n``."""
    noun: ClassVar[str] = "a key of phase"
    models: ListOf(PhaseModel, "model entries {name, pair, corpus, max_n, ...}")
    min_n: Int(ge=2)
    temperatures: ListOf(PosNum, "finite numbers > 0", min_length=2, distinct=True)
    tmix_max_states: Int(ge=4, le=PHASE_TMIX_MAX_STATES)
    linear_factor: Num(gt=1)
    calibration_n: Int(ge=2)
    calibration_pairs: Int(ge=10)

    @model_validator(mode="after")
    def _relations(self):
        for k, m in enumerate(self.models):
            if m.max_n < self.min_n:
                raise relation(f"models[{k}].max_n", m.max_n, f"must be at least min_n = {self.min_n}")
            if self.calibration_n > m.max_n:
                raise relation("calibration_n", self.calibration_n,
                               f"must be at most every model's max_n (models[{k}].max_n = {m.max_n})")
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


TrainingRun = Annotated[Text(r"^([A-Za-z0-9_-]+)?$", "'' or a training preset name", min_length=0),
                        NamesModels(template="trained:{}", role="mlm")]


class Incompatibility(Chapter):
    mlms: ListOf(IncompatibilityModel, "model entries {name, corpus, ...}")
    control: Optional[Control]
    seq_len: Length(Int(ge=2))         # a rectangle changes two distinct sites
    n_rectangles: PosInt
    top_k: PosInt
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
    mlms: ListOf(BoundsModel, "model entries {name, corpus, drift_token, ...}")
    seq_len: Length(Int(ge=2))         # influence compares sites i != j
    n_contexts: PosInt
    top_k: PosInt
    extra: Count0
    temperatures: Temperatures
    eps: Num(gt=0, lt=1)
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
    power_replicates: PosInt
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
    """Chapter 5's growth of escape with length (:func:`textglauber.arrhenius.growth`): at each length,
    the deepest of ``traps`` perfect traps found (largest margin) and its V_k at k = ceil(n/4), by a
    search of at most ``max_states`` states; chains at ``temperature`` at the ``check_lengths``."""
    noun: ClassVar[str] = "a key of escape.growth"
    models: ListOf(ModelSpec, "model entries {name, ...}")
    lengths: ListOf(Length(Int(ge=4)), "integers >= 4, increasing", distinct=True)
    traps: PosInt
    max_states: PosInt
    check_lengths: ListOf(Int(ge=4), "lengths of escape.growth.lengths", distinct=True)
    temperature: PosNum
    chains: Int(ge=2)

    @model_validator(mode="after")
    def _relations(self):
        if list(self.lengths) != sorted(self.lengths):
            raise relation("lengths", self.lengths, "must be increasing")
        for k, n in enumerate(self.check_lengths):
            if n not in self.lengths:
                raise relation(f"check_lengths[{k}]", n, f"must be one of lengths = {list(self.lengths)}")
        return self


class Escape(Closed):
    """Chapter 5's escape section (:mod:`textglauber.arrhenius`)."""
    noun: ClassVar[str] = "a key of escape"
    models: ListOf(ModelSpec, "model entries {name, ...}")
    seq_len: Length(Int(ge=2))
    traps: PosInt
    chains: Int(ge=2)
    distances: ListOf(PosInt, "integers >= 1", distinct=True)
    holding_decades: ListOf(Num(ge=0, le=15), "two numbers in [0, 15], the first smaller", min_length=2)
    temperatures: Int(ge=2)
    horizon: Num(ge=1)
    max_moves: PosInt            # events (single jumps and superbasin exits) a chain may make
    exact_models: ListOf(ExactModel, "model entries {name, tokens, n}")
    exact_temperatures: Temperatures
    exact_distances: ListOf(PosInt, "integers >= 1", distinct=True)
    exact_chains: Int(ge=2)
    exact_max_moves: PosInt      # events a chain of the exactness check may make
    growth: EscapeGrowth

    @model_validator(mode="after")
    def _relations(self):
        lo_hi = self.holding_decades
        if len(lo_hi) != 2 or lo_hi[0] >= lo_hi[1]:
            raise relation("holding_decades", lo_hi, "must be two numbers [low, high] with low < high "
                                                            "(decades of the one-state holding time)")
        for k, d in enumerate(self.distances):
            if d > self.seq_len:
                raise relation(f"distances[{k}]", d, f"must be at most escape.seq_len = {self.seq_len}")
        for k, m in enumerate(self.exact_models):
            if len(m.tokens) ** m.n > MAX_STATES:
                raise relation(f"exact_models[{k}].n", m.n, f"must keep len(tokens)^n = {len(m.tokens)}^{m.n} "
                                                                   f"within {MAX_STATES} enumerated states")
        # every distance is checked on every enumerated model: one wider than a model's n sites is a
        # ball no chain of it can leave, and its case would not run (arrhenius.exact_cases skips it)
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
        return self


TopicScorer = Annotated[Text(r"^(nli|embedding):\S+$", "'nli:NAME' or 'embedding:NAME'"),
                        NamesModels(prefixes=(("nli", "nli"), ("embedding", "sentence")))]
Label = Text(None, "a label: a non-empty string")


@lru_cache(maxsize=1)
def seed_topics_available() -> tuple[str, ...]:
    """The topics of the packaged seed sentences (textglauber.topics.seed_texts, read without it)."""
    from importlib.resources import files

    text = files("textglauber").joinpath("data/topic_seeds.tsv").read_text(encoding="utf-8")
    return tuple(sorted({ln.split("\t", 1)[0] for ln in text.splitlines() if ln.strip() and not ln.startswith("#")}))


class Basins(Chapter):
    mlms: ListOf(ModelSpec, "model entries {name, ...}")
    topic_scorer: TopicScorer
    labels: ListOf(Label, "labels", min_length=2, distinct=True)
    basin_label: Label
    seed_topics: ListOf(Label, "seed topics", distinct=True)
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
    null_alpha: Num(gt=0, lt=1)

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
    steps: PosInt


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
    sample_size: PosInt
    replicates: PosInt


class GroundTruth(Chapter):
    models_: ListOf(ExactModel, "model entries {name, tokens, n}")
    temperatures: Temperatures
    pairs: PosInt
    budget: PosInt
    rectangles: PosInt
    chains: PosInt
    rel_delta: Num(gt=0, le=1)
    trap_window: PosInt
    trap_threshold: PosNum
    holding: Holding
    ising_separation: IsingSeparation
    ising_cliques: ListOf(Int(ge=2), "integers >= 2", distinct=True)
    ising_fit: IsingFit

    @model_validator(mode="after")
    def _relations(self):
        for k, m in enumerate(self.models_):
            if len(m.tokens) ** m.n > MAX_STATES:
                raise relation(f"models_[{k}].n", m.n, f"must keep len(tokens)^n = {len(m.tokens)}^{m.n} within "
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


# --------------------------------------------------------------------------- notebooks
def notebook_parameters(path: Path) -> dict:
    """The names and default values of a notebook's parameters cell (literals only, read without
    executing anything)."""
    path = Path(path)
    return dict(_notebook_parameters(str(path), path.stat().st_mtime_ns))


@lru_cache(maxsize=32)
def _notebook_parameters(path: str, _mtime: int) -> tuple:
    nb = json.loads(Path(path).read_text())
    cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ProfileError(f"{path}: needs exactly one cell tagged 'parameters', has {len(cells)}")
    src = cells[0]["source"]
    out = []
    for node in ast.parse(src if isinstance(src, str) else "".join(src)).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            raise ProfileError(f"{path}: the parameters cell holds something other than NAME = literal "
                               f"(line {node.lineno})")
        try:
            value = ast.literal_eval(node.value)
        except ValueError:
            raise ProfileError(f"{path}: parameter {node.targets[0].id} is not a literal (line {node.lineno})") from None
        out.append((node.targets[0].id, value))
    return tuple(out)


def schema_mismatch(notebook: str, root: Path) -> str | None:
    """Why a notebook's parameters cell and its model differ, or None."""
    declared = set(CHAPTERS[notebook].model_fields)
    names = set(notebook_parameters(root / notebook))
    lines = []
    if names - declared:
        lines.append(f"its parameters cell declares {sorted(names - declared)}, which the schema does not")
    if declared - names:
        lines.append(f"the schema declares {sorted(declared - names)}, which its parameters cell does not")
    if not lines:
        return None
    return (f"{notebook}: " + "; ".join(lines) + f" (textglauber.schema.{CHAPTERS[notebook].__name__} declares "
            "exactly the cell's names: change both together)")


# --------------------------------------------------------------------------- the models a chapter names
@dataclass(frozen=True)
class ModelRef:
    """One model a chapter's parameters name, found by its type (:func:`model_refs`).

    ``key``: the dotted key of the entry or string that names it (``escape.exact_models[0]``,
    ``model.embedder``); ``role``: a key of ``textglauber.models.ROLES``; ``tokens``: (dotted key,
    value as written, tokens) of the tokens that must be in its vocabulary; ``lengths``: (dotted
    key, value as written, longest) of the content lengths asked of it: the entry's own where it
    states one (an exact model's ``n``), else those of the mapping that names it (``escape.seq_len``
    for ``escape.models``, the chapter's ``seq_len`` for its ``mlms``); ``corpus``: its entry's
    corpus; ``via``: how a string named it (its ``KIND:`` prefix, ``trained`` for a training run),
    '' for an entry's ``name``."""

    key: str
    name: str
    role: str
    tokens: tuple[tuple[str, Any, tuple[str, ...]], ...] = ()
    lengths: tuple[tuple[str, Any, int], ...] = ()
    corpus: str | None = None
    via: str = ""


def model_refs(notebook: str | None, params: dict) -> list[ModelRef]:
    """Every model a chapter's parameters name, at any depth, found by the types of
    ``CHAPTERS[notebook]``: a :class:`ModelEntry` anywhere (in a list, a nested section such as
    ``escape``, an Optional) and a string whose type is marked :class:`NamesModels`. A new field of
    those types is found without a change here. The notebook's own defaults stand where ``params``
    (as the build injects them) leaves a parameter out: the notebook reads them.

    ``notebook`` None (a caller that has only the parameters): the chapter's model is the one whose
    fields hold every key given; where none or several do, each key is read by the type every
    chapter declares for it."""
    model = CHAPTERS.get(notebook) if notebook else None
    if model is None:
        return _inferred_refs(params)
    path = repo_root() / notebook
    defaults = notebook_parameters(path) if path.is_file() else {}
    return refs_in(model, {**{k: v for k, v in defaults.items() if k in model.model_fields}, **params})


def _inferred_refs(params: dict) -> list[ModelRef]:
    """:func:`model_refs` without the notebook: read by the chapter models whose fields hold every
    key of ``params`` (all of them where none does), what any of them finds."""
    chapters = list(dict.fromkeys(CHAPTERS.values()))
    fits = [m for m in chapters if set(params) <= set(m.model_fields)] or chapters
    found: dict[tuple, ModelRef] = {}
    for m in fits:
        for ref in refs_in(m, params):
            at = (ref.key, ref.name, ref.role, ref.via)
            had = found.setdefault(at, ref)        # read by two chapters' types: what either finds
            found[at] = dataclasses.replace(had, tokens=_union(had.tokens, ref.tokens),
                                            lengths=_union(had.lengths, ref.lengths),
                                            corpus=had.corpus or ref.corpus)
    return list(found.values())


def _union(a: tuple, b: tuple) -> tuple:
    return a + tuple(x for x in b if x not in a)


def refs_in(model: type[BaseModel], values: dict, prefix: str = "") -> list[ModelRef]:
    """The models named in ``values``, a mapping of ``model``'s fields (keys it does not declare are
    left to the schema check), in the order ``values`` holds them; ``prefix``: the dotted key of
    the mapping itself."""
    if not isinstance(values, dict):
        return []
    lengths = _lengths(model, values, prefix)
    out = []
    for name, value in values.items():
        field = model.model_fields.get(name)
        if field is not None:
            out += _refs(field.rebuild_annotation(), value, _join(prefix, name), lengths)
    return out


def _join(prefix: str, name) -> str:
    return f"{prefix}.{name}" if prefix else str(name)


def _unwrap(tp) -> tuple[list, Any]:
    """The markers on ``tp`` outside any container, and the type under Annotated and Optional."""
    marks = []
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            marks += list(tp.__metadata__)
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return marks, tp
            tp = args[0]
        else:
            return marks, tp


def _is_model(tp) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _arm(tp, value):
    """The arm of a union (of several types) that ``value`` is written as, or None."""
    for arm in typing.get_args(tp):
        inner = _unwrap(arm)[1]
        origin = typing.get_origin(inner)
        if isinstance(value, dict) and (_is_model(inner) and set(value) <= set(inner.model_fields) or origin is dict):
            return arm
        if isinstance(value, list) and origin is list or isinstance(value, str) and inner is str:
            return arm
    return None


def _refs(tp, value, key: str, lengths: tuple) -> list[ModelRef]:
    """The models ``value`` (at dotted ``key``) names, read by its declared type ``tp``: a marked
    string, a model entry (and what its own fields name), or what the items of a list, the values of
    a dict or the fields of a section name. ``lengths``: those of the mapping that holds it."""
    marks, tp = _unwrap(tp)
    if value is None:
        return []
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        arm = _arm(tp, value)
        return _refs(Annotated[arm, *marks] if marks else arm, value, key, lengths) if arm is not None else []
    names = next((m for m in marks if isinstance(m, NamesModels)), None)
    if names is not None and isinstance(value, str):
        named = names.named(value)
        return [ModelRef(key, named[0], named[1], lengths=lengths, via=named[2])] if named else []
    if _is_model(tp) and isinstance(value, dict):
        inner = refs_in(tp, value, key)
        if issubclass(tp, ModelEntry) and isinstance(value.get("name"), str) and value["name"]:
            return [_entry(tp, value, key, lengths)] + inner
        return inner
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, tuple) and isinstance(value, (list, tuple)):
        item = args[0] if args else Any
        return [r for i, v in enumerate(value) for r in _refs(item, v, f"{key}[{i}]", lengths)]
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        return [r for k, v in value.items() for r in _refs(args[1], v, f"{key}.{k}", lengths)]
    return []


def _marked(tp, mark) -> bool:
    """Whether ``mark`` is on ``tp`` or on the items of the lists it allows."""
    marks, inner = _unwrap(tp)
    if mark in marks:
        return True
    if typing.get_origin(inner) in (typing.Union, types.UnionType):
        return any(_marked(a, mark) for a in typing.get_args(inner))
    return typing.get_origin(inner) in (list, tuple) and any(_marked(a, mark) for a in typing.get_args(inner)[:1])


def _field_values(model: type[BaseModel], values: dict, mark, prefix: str):
    """(dotted key, value) of each field of ``model`` marked ``mark``, as ``values`` give it or by
    its default; fields without a value left out."""
    for name, field in model.model_fields.items():
        if _marked(field.rebuild_annotation(), mark):
            value = values.get(name, None if field.is_required() else field.default)
            if value is not None:
                yield _join(prefix, name), value


def _lengths(model: type[BaseModel], values: dict, prefix: str) -> tuple:
    """(dotted key, value as written, longest) of each length field of one mapping (a list of
    lengths asks its longest)."""
    out = []
    for key, value in _field_values(model, values, CONTENT_LENGTH, prefix):
        items = value if isinstance(value, list) else [value]
        ints = [v for v in items if isinstance(v, int) and not isinstance(v, bool)]
        if ints:
            out.append((key, value, max(ints)))
    return tuple(out)


def _entry(cls: type[ModelEntry], value: dict, key: str, lengths: tuple) -> ModelRef:
    """The model one entry names, with the tokens and the corpus its own fields give it."""
    tokens = []
    for k, v in _field_values(cls, value, IN_VOCABULARY, key):
        got = [v] if isinstance(v, str) else [t for t in v if isinstance(t, str)] if isinstance(v, list) else []
        if got:
            tokens.append((k, v, tuple(got)))
    corpus = next((v for _, v in _field_values(cls, value, CORPUS, key) if isinstance(v, str) and v), None)
    own = _lengths(cls, value, key)          # an entry that states its length (an exact model's n) runs at it
    return ModelRef(key, value["name"], cls.role_of(value), tuple(tokens), own or lengths, corpus)


# --------------------------------------------------------------------------- messages
def show(value, limit: int = 80) -> str:
    """A value as the profile writes it (YAML flow style), shortened."""
    def fmt(v):
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return repr(v)
        if isinstance(v, str):
            return repr(v)
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {fmt(x)}" for k, x in v.items()) + "}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(fmt(x) for x in v) + "]"
        return repr(v)
    text = fmt(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def dotted(loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _strip(tp):
    """The model or container under Annotated and Optional."""
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _model_at(root: type[BaseModel], loc) -> type[BaseModel] | None:
    """The model that holds the key at ``loc`` (a pydantic error location below ``root``)."""
    tp = root
    for part in loc:
        tp = _strip(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(part)
            if field is None:
                return None
            tp = field.annotation
        elif typing.get_origin(tp) is list and isinstance(part, int):
            tp = typing.get_args(tp)[0]
        elif typing.get_origin(tp) is dict:
            tp = typing.get_args(tp)[1]
        else:
            return None
    tp = _strip(tp)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def _suggestion(root: type[BaseModel], loc) -> str | None:
    """The declared key closest to the unknown key at ``loc``, if one is close."""
    holder = _model_at(root, loc[:-1])
    close = difflib.get_close_matches(str(loc[-1]), list(holder.model_fields) if holder else [], n=1, cutoff=0.6)
    return close[0] if close else None


def _written(data, key: str, default):
    """The value at dotted ``key`` (``a.b[2]``) as the input holds it (61, not the 61.0 validated)."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", key):
        try:
            data = data[int(part[1:-1])] if part.startswith("[") else data[part]
        except (KeyError, IndexError, TypeError, ValueError):
            return default
    return data


def explain(root: type[BaseModel], error: dict, noun: str | None = None, data=None) -> tuple[str, str]:
    """(dotted key, 'key = value: what is allowed') for one pydantic error below ``root`` (``data``:
    the input, whose values a relation shows as written)."""
    loc, kind, value = tuple(error["loc"]), error["type"], error.get("input")
    if kind == "relation":
        key = dotted(loc + tuple(error["ctx"]["key"].split(".")))
        return key, f"{key} = {show(_written(data, key, error['ctx']['value']))}: {error['ctx']['text']}"
    if loc and loc[-1] == "[key]":                       # a mapping's key itself
        key = dotted(loc[:-2] + (loc[-2],))
        return key, f"{key}: the key {show(loc[-2])} {error['msg']}"
    key = dotted(loc)
    if kind == "extra_forbidden":
        holder = _model_at(root, loc[:-1])
        names = list(holder.model_fields) if holder else []
        close = _suggestion(root, loc)
        what = noun if holder is root and noun else getattr(holder, "noun", "a key here")
        hint = f" (did you mean {close!r}?)" if close else ""
        listing = f"; allowed: {', '.join(names)}" if names and len(names) <= 8 else ""
        return key, f"{key} = {show(value)}: not {what}{hint}{listing}"
    if kind == "missing":
        return key, f"{key}: missing (required)"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        holder = _model_at(root, loc)
        names = f" with keys {', '.join(holder.model_fields)}" if holder else ""
        return key, f"{key} = {show(value)}: must be a mapping{names}"
    if kind == "list_type":
        return key, f"{key} = {show(value)}: must be a list"
    if kind in ("string_type", "str_type"):
        return key, f"{key} = {show(value)}: must be a string"
    return key, f"{key} = {show(value)}: {error['msg'][0].lower() + error['msg'][1:]}"


def problems(model: type[BaseModel], data, prefix: str, noun: str | None = None,
             note=lambda key: "") -> list[str]:
    """One line per problem of ``data`` against ``model``: ``prefix`` + explanation (+ ``note(key)``)."""
    try:
        model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # a misspelt key is one problem: 'embeder' unknown and 'embedder' missing read as the first alone
        meant = {tuple(e["loc"][:-1]) + (_suggestion(model, tuple(e["loc"])),)
                 for e in errors if e["type"] == "extra_forbidden"}
        errors = [e for e in errors if not (e["type"] == "missing" and tuple(e["loc"]) in meant)]
        return [prefix + line + note(key) for key, line in (explain(model, e, noun, data) for e in errors)]
    return []


# --------------------------------------------------------------------------- profiles
def check_raw(spec, path: Path) -> None:
    """The top level of one profile file as written (before ``derive``): its keys, their types,
    ``defaults``, and each chapter's entry (its parameters are checked once the profile is whole)."""
    at = f"{where(path)}: "
    if not isinstance(spec, dict):
        raise ProfileError(f"{at}must hold a mapping (profile, description, defaults, artifacts, chapters)")
    model = DerivedProfile if "derive" in spec else Profile
    lines = problems(model, spec, at)
    if spec.get("profile") is not None and spec.get("profile") != Path(path).stem and not lines:
        lines.append(f"{at}profile = {show(spec['profile'])}: must be the file's own name {Path(path).stem!r} (or left out)")
    if lines:
        raise ProfileError("\n".join(lines))


def chapter_problems(spec: dict, chapter: str, path: Path, injected: dict) -> list[str]:
    """Every problem of one chapter's parameters, as papermill would inject them (``injected``: the
    profile's parameters for it, :func:`textglauber.params.chapter_parameters`)."""
    at = f"{where(path)}" + (f" (derives from {spec['derived_from']!r})" if spec.get("derived_from") else "")
    at += f": chapter {chapter!r}: "
    entry = spec["chapters"][chapter]
    notebook = entry["notebook"]
    model = CHAPTERS.get(notebook)
    if model is None:
        return [f"{at}notebook = {notebook!r}: has no declared parameters (textglauber.schema.CHAPTERS lists "
                f"{', '.join(CHAPTERS)})"]
    lines = []
    mismatch = schema_mismatch(notebook, repo_root())
    if mismatch:
        lines.append(f"{at}{mismatch}")
    given = entry.get("parameters") or {}
    for key in INJECTED:
        if key in given:
            lines.append(f"{at}{key} = {show(given[key])}: set by the build, not by a profile")
    nb_defaults = {k: v for k, v in notebook_parameters(repo_root() / notebook).items() if k in model.model_fields}
    merged = {**nb_defaults, **injected}
    from_profile = set(given) | set(spec.get("defaults") or {})

    def note(key: str) -> str:
        top = re.split(r"[.\[]", key, maxsplit=1)[0]
        return "" if top in from_profile or top not in nb_defaults else " (the notebook's default: the profile does not set it)"
    lines += problems(model, merged, at, noun=f"a parameter of {notebook}", note=note)
    return lines


# what a kernel's namespace holds before a chapter's first cell runs, besides the parameters
KERNEL_NAMES = ("In", "Out", "exit", "quit", "get_ipython", "open")
PARAMETER_TYPES = (bool, int, float, str, list, dict, tuple, type(None))   # what papermill injects


def unknown_parameters(notebook: str, values: dict) -> list[str]:
    """Names in a notebook's namespace that look injected (plain data, as papermill writes them)
    but that its model does not declare: a misspelt parameter (``escpe``), which papermill only
    warns about and runs with the defaults. Modules, functions and classes a cell imported, and
    the kernel's own names, are not parameters."""
    declared = set(CHAPTERS[notebook].model_fields)
    return sorted(name for name, value in values.items()
                  if not name.startswith("_") and name not in declared and name not in KERNEL_NAMES
                  and isinstance(value, PARAMETER_TYPES))


def check_chapter(notebook: str, values: dict) -> None:
    """A chapter's parameters as its notebook holds them when it runs (``values``: the notebook's
    namespace, of which the names its model declares are read), checked against that model before
    anything is computed. The build has checked the same values already; this stops a papermill
    run outside the build (``-p window 5``) too, and a name it injects that the chapter does not
    declare (:func:`unknown_parameters`). Raises :class:`ProfileError`, one line per problem."""
    model = CHAPTERS[notebook]
    given = {name: values[name] for name in model.model_fields if name in values}
    lines = []
    for name in unknown_parameters(notebook, values):
        close = difflib.get_close_matches(name, list(model.model_fields), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        lines.append(f"{notebook}: {name} = {show(values[name])}: not a parameter of {notebook}{hint}; "
                     f"its parameters: {', '.join(model.model_fields)}")
    lines += problems(model, given, f"{notebook}: ", noun=f"a parameter of {notebook}")
    if lines:
        raise ProfileError("\n".join(lines))


def profile_problems(spec: dict, path: Path, injected: dict[str, dict]) -> list[str]:
    """Every problem of a loaded profile (``spec``, read from ``path``): its defaults, its artifacts and
    each chapter's parameters (``injected[chapter]``: what papermill would inject). One line each."""
    at = f"{where(path)}: "
    lines = []
    defaults = spec.get("defaults") or {}
    for key in DEFAULT_KEYS:
        if key not in defaults:
            lines.append(f"{at}defaults.{key}: missing (every profile states {', '.join(DEFAULT_KEYS)}; "
                         "a derived one may take them from its base)")
    lines += problems(Defaults, defaults, f"{at}defaults.")
    lines += artifact_problems(spec.get("artifacts") or [], at)
    for chapter in spec["chapters"]:
        lines += chapter_problems(spec, chapter, path, injected[chapter])
    return lines


def artifact_problems(names: list[str], at: str) -> list[str]:
    known = ARTIFACTS
    out = []
    for k, name in enumerate(names):
        if name not in known:
            close = difflib.get_close_matches(str(name), known, n=1)
            out.append(f"{at}artifacts[{k}] = {show(name)}: not an artifact"
                       + (f" (did you mean {close[0]!r}?)" if close else "") + f"; known: {', '.join(known)}")
    return out
