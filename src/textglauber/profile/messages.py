"""A pydantic error below a profile's model as one line: the dotted key, the value as the profile
writes it and what is allowed (a misspelt key with the declared key it is closest to)."""
from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Annotated

from pydantic import BaseModel, ValidationError

from .errors import show


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


RENAMED = {"mlms": "models", "models_": "models"}
"""Keys that were renamed, and their names now: the model list has one spelling in every chapter."""


def _suggestion(root: type[BaseModel], loc) -> str | None:
    """The declared key closest to the unknown key at ``loc``, if one is close (a renamed key: its new
    name, where the holder declares it)."""
    holder = _model_at(root, loc[:-1])
    if holder and RENAMED.get(str(loc[-1])) in holder.model_fields:
        return RENAMED[str(loc[-1])]
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
        if close and RENAMED.get(str(loc[-1])) == close:
            hint = f" (renamed: it is {close!r} now)"
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
