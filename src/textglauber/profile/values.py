"""The value types a profile's keys are declared with: strict integers, finite numbers, strings,
lists, choices, each failing as one 'must be ...' line; the markers that say what a value names
to the models (read by :mod:`textglauber.profile.refs`, ignored by pydantic); and the limits and
names of the library the schema states rather than imports."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional

from annotated_types import Ge, Gt, Le, Lt, MinLen
from pydantic import AllowInfNan, BeforeValidator, Strict, StringConstraints, ValidationError, WrapValidator
from pydantic_core import PydanticCustomError

from .errors import NAME_RE, show

# Limits: their one home. The library imports them from here (exact.MAX_STATES, ising.MAX_SPINS,
# phase.TMIX_MAX_STATES, topics.NULL_SEEDS), never the other way round: a chapter's cached key
# covers every module its notebook can reach, this one included (through models -> profile), so
# importing the library from here would tie every chapter to modules it does not use.
MAX_STATES = 20_000                 # states an exact chain enumerates (textglauber.exact)
MAX_SPINS = 12                      # spins an Ising chain enumerates (textglauber.ising)
PHASE_MAX_N = 20                    # longest two-token phase chain: 2^20 states, 10^7 rows (a GPU's)
LANDSCAPE_MAX_N = 64                # textglauber.landscape searches states of n tokens; longer is beyond any model here
PHASE_TMIX_MAX_STATES = 4096        # exact t_mix by powers of a dense kernel up to this many states (textglauber.phase)
NULL_SEEDS = ("shuffled", "random")  # the null seeds textglauber.topics draws
# Names the library defines by what they hold (presets, artifacts); mirrored here, and
# tests/bookbuild/test_bad_params.py ties them to the library's.
TRAINING_PRESETS = ("english", "tiny")                                  # textglauber.train_mlm.PRESETS
ARTIFACTS = ("standins", "bench", "bench-smoke", "bench-metastable", *TRAINING_PRESETS)   # build.build_artifacts


# --------------------------------------------------------------------------- value types
def explained(text: str) -> WrapValidator:
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
    return Annotated[int, Strict(), *bounds, explained(text)]


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
    return Annotated[float, Strict(), AllowInfNan(False), *bounds, explained(text)]


def Text(pattern: str | None = None, what: str = "a non-empty string", min_length: int = 1) -> Any:
    extra = [MinLen(min_length)] if min_length else []
    if pattern is not None:
        extra.append(StringConstraints(pattern=pattern))
    return Annotated[str, Strict(), *extra, explained(what)]


def OneOf(*values: str) -> Any:
    text = repr(values[0]) if len(values) == 1 else "one of " + ", ".join(repr(v) for v in values)
    return Annotated[Literal[values], explained(text)]


Bool = Annotated[bool, Strict(), explained("true or false")]


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


# ----- what a value names, marked on its type (read by refs.model_refs, ignored by pydantic)
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
Embedder = Annotated[Text(r"^(self|hamming|sentence:\S+)$", "'self', 'hamming' or 'sentence:NAME'"),
                     NamesModels(prefixes=(("sentence", "sentence"),))]
TrainingRun = Annotated[Text(r"^([A-Za-z0-9_-]+)?$", "'' or a training preset name", min_length=0),
                        NamesModels(template="trained:{}", role="mlm")]
TopicScorer = Annotated[Text(r"^(nli|embedding):\S+$", "'nli:NAME' or 'embedding:NAME'"),
                        NamesModels(prefixes=(("nli", "nli"), ("embedding", "sentence")))]
