"""The models of a profile file (its top level, ``defaults`` and each chapter's entry) and of the
model entries a chapter's parameters hold (a masked LM, the causal control, an embedded or an exact
model): every one closed to keys it does not declare."""
from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar

from annotated_types import MinLen
from pydantic import AfterValidator, BaseModel, ConfigDict, Strict, model_validator
from pydantic_core import PydanticCustomError

from .errors import NAME_RE
from .values import (PHASE_MAX_N, Bool, ChapterName, CorpusName, Device, DType, Embedder, Int, Length, ListOf,
                     MissingModel, ModelName, Num, OneOf, PosInt, ProfileName, Seed, Text, Token, explained)


# --------------------------------------------------------------------------- models
class Closed(BaseModel):
    """Unknown keys refused, types taken as written."""
    model_config = ConfigDict(extra="forbid", strict=True)
    noun: ClassVar[str] = "a key here"

    @classmethod
    def default_of(cls, key: str):
        """The default declared for ``key``: what a value that leaves it out runs with (a fresh copy,
        so a list default is never shared). Code that reads a parameter a profile may leave out
        takes its default from here; the schema is its one home."""
        field = cls.model_fields[key]
        return field.default_factory() if field.default_factory is not None else copy.deepcopy(field.default)

    @classmethod
    def part_of(cls, value):
        """The keys of ``value`` that this model declares, checked and typed, each key left out at its
        declared default: how code outside the schema reads an entry that may hold more keys (a
        chapter's model entry read as a :class:`ModelSpec`), so that no default is restated there.
        An instance of this model (or of one derived from it) is already that, and is returned as it is."""
        if isinstance(value, cls):
            return value
        return cls.model_validate({k: v for k, v in value.items() if k in cls.model_fields})


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
                        explained("a path pattern relative to the repository, without '..'")]


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


def is_model_entry(value) -> bool:
    """Whether ``value`` names a model as a profile does (a mapping, or a typed entry that
    :func:`textglauber.profile.check_chapter` handed a chapter) rather than being a model object
    handed in directly (a test's scorer)."""
    return isinstance(value, (Mapping, ModelEntry))


def entry_name(value) -> str:
    """The ``name`` of a model entry, a mapping or a typed one."""
    return str(value["name"] if isinstance(value, Mapping) else value.name)


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
    def role_of(cls, value) -> str:
        """What a model entry of chapter 1 is (a mapping or a typed entry): the causal control or a masked LM."""
        kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
        return "causal" if kind == "causal" else "mlm"       # as rectangle.runs reads kind


class BoundsModel(CorpusModel):
    drift_token: Token


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
