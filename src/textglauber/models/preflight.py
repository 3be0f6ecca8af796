"""The build's checks before any compute: every model a chapter names, in the role it gives it, can be had
and is that kind of model (:func:`check_models`), and takes the longest input asked of it
(:func:`length_problems`); and the one place a profile's missing-model policy is applied (:func:`or_skip`)."""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..params import MODEL_KEYS
from .folders import ROLES, folder_problems, model_folder
from .lookup import resolve
from .source import ModelMismatchError, ModelSource, ModelUnavailableError


@dataclass(frozen=True)
class Wanted:
    """A model a chapter names, in the role it gives it (a key of ``ROLES``)."""

    name: str
    role: str
    where: str = ""          # e.g. "incompatibility control", for the message
    required: bool = True    # False: the chapter skips it when it cannot be had (on_missing_model: skip)


def wanted_models(params: dict, where: str = "", required: bool = True) -> list[Wanted]:
    """Every model a chapter's parameters name, with the role each plays there: ``mlms``,
    ``models``, ``models_`` and ``model`` entries are masked LMs, ``control`` is the kind it says
    (``causal``, else a masked LM), an ``embedder: sentence:NAME`` is a sentence-transformers model,
    ``topic_scorer`` is ``nli:NAME`` (an NLI classifier) or ``embedding:NAME`` (a sentence model)."""
    out = []

    def add(name, role, key):
        out.append(Wanted(name, role, f"{where} {key}".strip(), required))

    def from_string(s: str, role: str, key: str):
        if s.startswith("nli:"):
            add(s[4:], "nli", key)
        elif s.startswith(("embedding:", "sentence:")):
            add(s.split(":", 1)[1], "sentence", key)
        elif s:
            add(s, role, key)

    for key, val in params.items():
        if key not in MODEL_KEYS:
            continue
        role = "classifier" if key == "classifier" else "mlm"
        for it in (val if isinstance(val, list) else [val]):
            if isinstance(it, dict) and "name" in it:
                add(it["name"], "causal" if it.get("kind") == "causal" else role, key)   # as rectangle.py reads kind
                emb = str(it.get("embedder", ""))
                if emb.startswith("sentence:"):
                    add(emb.split(":", 1)[1], "sentence", f"{key} embedder")
            elif isinstance(it, str):
                from_string(it, role, key)
    return out


def check_available(names: list[str]) -> None:
    """Resolve every name up front; one error that lists every missing model."""
    problems = []
    for n in names:
        try:
            resolve(n)
        except (ModelUnavailableError, ValueError) as exc:
            problems.append(str(exc))
    if problems:
        raise ModelUnavailableError("\n".join(problems))


def check_models(wanted: list[Wanted]) -> None:
    """Resolve every wanted model and check that its files are what its role needs (cheap: see
    :func:`folder_problems`). One line per problem: a model that cannot be had (only where it is
    ``required``), or one that is there but is not a model of that kind."""
    roles: dict[tuple[str, str], list[Wanted]] = {}
    for w in wanted:
        roles.setdefault((w.name, w.role), []).append(w)
    sources: dict[str, ModelSource | Exception] = {}
    problems, mismatched = [], False
    for (name, role), ws in roles.items():
        if name not in sources:
            try:
                sources[name] = resolve(name)
            except (ModelUnavailableError, ValueError) as exc:
                sources[name] = exc
                if any(v.required for v in wanted if v.name == name):
                    problems.append(str(exc))
        src = sources[name]
        if isinstance(src, Exception):
            continue
        found = folder_problems(src, role)
        if found:
            mismatched = True
            places = ", ".join(dict.fromkeys(w.where for w in ws if w.where))
            problems.append(f"model {name!r}{f' ({places})' if places else ''} should be {ROLES[role]}, "
                            f"but {'; '.join(found)}")
    if problems:
        raise (ModelMismatchError if mismatched else ModelUnavailableError)("\n".join(problems))


def config_positions(cfg: dict) -> int | None:
    """The longest input a config's model accepts, special tokens included (as :func:`_max_positions`
    reads it from a loaded model in :mod:`textglauber.models.loading`), or None when the config does not say."""
    mp = cfg.get("max_position_embeddings") or cfg.get("n_positions")
    if not isinstance(mp, int) or mp <= 0:
        return None
    return mp - 2 if cfg.get("model_type") in ("roberta", "xlm-roberta", "camembert", "longformer") else mp


def length_problems(wanted: list[Wanted], longest: int, label: str) -> list[str]:
    """One line per masked or causal LM among ``wanted`` whose config cannot take ``longest`` content
    tokens plus two special tokens (the frame of every model here is at most two); read from
    config.json alone. Models that cannot be resolved are left to :func:`check_models`."""
    out = []
    for name in dict.fromkeys(w.name for w in wanted if w.role in ("mlm", "causal")):
        try:
            folder = model_folder(resolve(name))
            cfg = json.loads((folder / "config.json").read_text()) if folder else None
        except (ModelUnavailableError, ValueError, OSError):
            continue
        mp = config_positions(cfg) if cfg else None
        if mp is not None and longest + 2 > mp:
            out.append(f"{label} = {longest}: model {name!r} takes at most {mp} positions, so at most {mp - 2} "
                       "tokens with its special tokens")
    return out


def or_skip(on_missing_model: str, notes: list[str], name: str, fn, *args, **kwargs):
    """Call ``fn``; if the model ``name`` cannot be had, either raise (``"fail"``) or append a note
    and return None (``"skip"``). The one place where a profile's missing-model policy is applied."""
    if on_missing_model not in ("skip", "fail"):
        raise ValueError("on_missing_model must be 'skip' or 'fail'")
    try:
        return fn(*args, **kwargs)
    except ModelUnavailableError as exc:
        if on_missing_model == "fail":
            raise
        notes.append(f"{name} skipped: {exc}")
        return None
