"""The models a chapter's parameters name, at any depth, found by the types its model declares
(:class:`textglauber.profile.entries.ModelEntry` anywhere, a string marked
:class:`textglauber.profile.values.NamesModels`), with the tokens, lengths and corpus asked of each."""
from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel

from .chapters import CHAPTERS
from .entries import ModelEntry
from .values import CONTENT_LENGTH, CORPUS, IN_VOCABULARY, NamesModels


@dataclass(frozen=True)
class ModelRef:
    """One model a chapter's parameters name, found by its type (:func:`model_refs`).

    ``key``: the dotted key of the entry or string that names it (``escape.exact_models[0]``,
    ``model.embedder``); ``role``: a key of ``textglauber.models.ROLES``; ``tokens``: (dotted key,
    value as written, tokens) of the tokens that must be in its vocabulary; ``lengths``: (dotted
    key, value as written, longest) of the content lengths asked of it: the entry's own where it
    states one (an exact model's ``n``), else those of the mapping that names it (``escape.seq_len``
    for ``escape.models``, the chapter's ``seq_len`` for its ``models``); ``corpus``: its entry's
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
    those types is found without a change here. The schema's defaults stand where ``params``
    (as the build injects them) leaves a parameter out: the chapter runs with them.

    ``notebook`` None (a caller that has only the parameters): the chapter's model is the one whose
    fields hold every key given; where none or several do, each key is read by the type every
    chapter declares for it."""
    model = CHAPTERS.get(notebook) if notebook else None
    if model is None:
        return _inferred_refs(params)
    defaults = {k: model.default_of(k) for k, f in model.model_fields.items() if not f.is_required()}
    return refs_in(model, {**defaults, **params})


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


def corpus_names(params: dict, notebook: str | None = None) -> list[str]:
    """Every corpus a chapter's model entries name, at any depth (for the pre-flight check)."""
    return [r.corpus for r in model_refs(notebook, params) if r.corpus]
