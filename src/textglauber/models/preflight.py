"""The build's checks before any compute: every model a chapter names, in the role it gives it, can be had
and is that kind of model (:func:`check_models`), takes the longest input asked of it
(:func:`length_problems`) and holds the tokens named for it (:func:`token_problems`); and the one place
a profile's missing-model policy is applied (:func:`or_skip`)."""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

from ..profile import model_refs, show
from .folders import ROLES, UNREADABLE, folder_problems, model_folder
from .lookup import resolve
from .source import ModelMismatchError, ModelSource, ModelUnavailableError


@dataclass(frozen=True)
class Wanted:
    """A model a chapter names, in the role it gives it (a key of ``ROLES``), with what the chapter
    asks of it: ``tokens`` ((dotted key, value as written, tokens) that must be in its vocabulary) and ``lengths``
    ((dotted key, value as written, longest) content lengths it must take)."""

    name: str
    role: str
    where: str = ""          # e.g. "incompatibility control", for the message
    required: bool = True    # False: the chapter skips it when it cannot be had (on_missing_model: skip)
    key: str = ""            # the dotted key that names it, e.g. "escape.exact_models[0]"
    tokens: tuple[tuple[str, object, tuple[str, ...]], ...] = ()
    lengths: tuple[tuple[str, object, int], ...] = ()


def wanted_models(params: dict, where: str = "", required: bool = True, notebook: str | None = None) -> list[Wanted]:
    """Every model a chapter's parameters name, at any depth, with the role each plays there, found by
    the schema's types (:func:`textglauber.profile.model_refs`): model entries are masked LMs, a
    control is the kind it says, an ``embedder: sentence:NAME`` is a sentence-transformers model, a
    ``topic_scorer`` ``nli:NAME`` an NLI classifier and ``embedding:NAME`` a sentence model. The
    training run a chapter describes is keyed (:func:`textglauber.bookbuild.stamps.models_read`) but
    not asked for here: it is an artifact the build makes."""
    return [Wanted(r.name, r.role, f"{where} {r.key}".strip(), required, r.key, r.tokens, r.lengths)
            for r in model_refs(notebook, params) if r.via != "trained"]


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
    ``required``, named with the keys that name it), one that is there but is not a model of that
    kind, or one whose weights cannot be read (a file cut short: its path and the fix)."""
    roles: dict[tuple[str, str], list[Wanted]] = {}
    for w in wanted:
        roles.setdefault((w.name, w.role), []).append(w)
    sources: dict[str, ModelSource | Exception] = {}
    problems, mismatched, said = [], False, set()
    for (name, role), ws in roles.items():
        if name not in sources:
            try:
                sources[name] = resolve(name)
            except (ModelUnavailableError, ValueError) as exc:
                sources[name] = exc
                asked = [v for v in wanted if v.name == name]
                if any(v.required for v in asked):
                    problems.append(f"{_named_at(asked)}{exc}")
        src = sources[name]
        if isinstance(src, Exception):
            continue
        found = folder_problems(src, role)
        if found:
            mismatched = True
            places = ", ".join(dict.fromkeys(w.where for w in ws if w.where))
            named = f"model {name!r}{f' ({places})' if places else ''}"
            unreadable = [f for f in found if f.startswith(UNREADABLE)]      # whatever the role: the files
            if len(unreadable) < len(found):
                problems.append(f"{named} should be {ROLES[role]}, but "
                                f"{'; '.join(f for f in found if f not in unreadable)}")
            problems += [f"{named}: {f}" for f in unreadable if (name, f) not in said]
            said.update((name, f) for f in unreadable)
    if problems:
        raise (ModelMismatchError if mismatched else ModelUnavailableError)("\n".join(problems))


def _named_at(asked: list[Wanted], most: int = 3) -> str:
    """'incompatibility models[0], bounds models[1]: ' (where a model is named) to put before a message,
    or '' where no place is known."""
    places = list(dict.fromkeys(w.where for w in asked if w.where))
    if not places:
        return ""
    more = f" and {len(places) - most} more" if len(places) > most else ""
    return f"{', '.join(places[:most])}{more}: "


def config_positions(cfg: dict) -> int | None:
    """The longest input a config's model accepts, special tokens included (as :func:`_max_positions`
    reads it from a loaded model in :mod:`textglauber.models.loading`), or None when the config does not say."""
    mp = cfg.get("max_position_embeddings") or cfg.get("n_positions")
    if not isinstance(mp, int) or mp <= 0:
        return None
    return mp - 2 if cfg.get("model_type") in ("roberta", "xlm-roberta", "camembert", "longformer") else mp


def length_problems(wanted: list[Wanted], longest: int | None = None, label: str = "") -> list[str]:
    """One line per masked or causal LM among ``wanted`` whose config cannot take a length asked of it
    plus two special tokens (the frame of every model here is at most two): each model's own
    ``lengths`` (the line names its dotted key and the key of the model), or ``longest`` under
    ``label`` for all of them where that is given. Read from config.json alone; models that cannot
    be resolved are left to :func:`check_models`."""
    out, seen = [], set()
    for w in wanted:
        if w.role not in ("mlm", "causal"):
            continue
        asked = [(label, longest, longest)] if longest is not None else list(w.lengths)
        for key, value, n in asked:
            if (w.name, key, n) in seen:
                continue
            seen.add((w.name, key, n))
            mp = _positions(w.name)
            if mp is not None and n + 2 > mp:
                what = f" ({w.key})" if w.key and longest is None else ""
                asks = f" (the longest asks {n})" if isinstance(value, list) else ""
                out.append(f"{key} = {show(value)}: model {w.name!r}{what} takes at most {mp} positions, so at most "
                           f"{mp - 2} tokens with its special tokens{asks}")
    return out


def _positions(name: str) -> int | None:
    """The positions a model's config.json says it takes, or None (not resolved, or not stated)."""
    try:
        folder = model_folder(resolve(name))
        cfg = json.loads((folder / "config.json").read_text()) if folder else None
    except (ModelUnavailableError, ValueError, OSError):
        return None
    return config_positions(cfg) if isinstance(cfg, dict) else None


def token_problems(wanted: list[Wanted]) -> list[str]:
    """One line per token list among ``wanted`` that its model's vocabulary lacks a token of (or holds
    as a special token, which the allowed vocabulary leaves out). Only the tokenizer is loaded,
    never the weights; a model whose tokenizer cannot be had is left to :func:`check_models`."""
    from .loading import tokenizer

    tokenizers: dict[str, object] = {}
    out, seen = [], set()
    for w in wanted:
        for key, value, tokens in w.tokens:
            if (w.name, key) in seen:
                continue
            seen.add((w.name, key))
            if w.name not in tokenizers:
                try:
                    tokenizers[w.name] = tokenizer(w.name)
                except (ModelUnavailableError, ModelMismatchError, ValueError, OSError):
                    tokenizers[w.name] = None
            tok = tokenizers[w.name]
            if tok is not None:
                line = _token_line(tok, w, key, value, tokens)
                if line:
                    out.append(line)
    return out


def _token_line(tok, w: Wanted, key: str, value, tokens: tuple[str, ...]) -> str | None:
    from ..vocabulary import special_ids

    vocab = tok.get_vocab()
    special = special_ids(tok)
    missing = [t for t in tokens if t not in vocab]
    specials = [t for t in tokens if t in vocab and vocab[t] in special]
    if not missing and not specials:
        return None
    said = []
    if missing:
        close = {t: difflib.get_close_matches(t, list(vocab), n=1) for t in missing}
        hints = [f"{t!r}: did you mean {c[0]!r}?" for t, c in close.items() if c]
        said.append(f"{show(missing)} not in the vocabulary of model {w.name!r} ({len(vocab)} entries; a token "
                    f"is one entry as written mid-text" + (f"; {'; '.join(hints[:3])}" if hints else "") + ")")
    if specials:
        said.append(f"{show(specials)} {'is a special token' if len(specials) == 1 else 'are special tokens'} of "
                    f"model {w.name!r}, which no chain writes")
    return f"{key} = {show(value)}: " + "; ".join(said)


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
