"""Every model and corpus a build's chapters need, checked before any compute: what is missing,
a model whose files do not fit the role its chapter gives it or cannot be read, a window longer
than its corpus or its model holds, a token its model's vocabulary lacks. One message each, with
the fix. The models are those :func:`textglauber.profile.model_refs` finds by type, at any depth of
a chapter's parameters (``escape.models`` as well as ``models``)."""
from __future__ import annotations

from .. import profile as P


def preflight(profile: str, chapters: list[str]) -> None:
    """Every model and corpus the chapters need, resolved before any compute: one message each
    for what is missing, and the fix. Each model's files are also checked against the role its
    chapter gives it (masked LM, causal control, sentence model, NLI classifier) and for weights
    that cannot be read, without loading weights; that holds in chapters that skip missing models
    too. Then the lengths asked of each model (config.json) and the tokens named for it (its
    tokenizer alone)."""
    if not chapters:
        return
    from .. import corpus
    from ..models import ModelUnavailableError, check_models, wanted_models

    notebooks = P.chapter_notebooks(profile)
    names, corpora, wanted = [], [], {}
    params = {ch: P.chapter_parameters(profile, ch) for ch in chapters}
    for ch, prm in params.items():
        required = prm.get("on_missing_model", "fail") == "fail"
        wanted[ch] = wanted_models(prm, ch, required, notebook=notebooks.get(ch))
        names += wanted[ch]
        if required:
            corpora += P.corpus_names(prm, notebooks.get(ch))
    problems = []
    for check, items, error in ((check_models, names, ModelUnavailableError),
                                (corpus.check_available, sorted(set(corpora)), corpus.CorpusUnavailableError)):
        try:
            check(items)
        except error as exc:
            problems.append(str(exc))
    problems += device_problems(profile, params)         # a device this machine does not have
    problems += window_problems(profile, params)         # a window longer than its corpus holds
    problems += _asked_problems(profile, wanted)            # a length its model cannot take, a token it lacks
    if problems:
        raise SystemExit(f"profile {profile!r} cannot run:\n" + "\n".join(problems))


def device_problems(profile: str, params: dict[str, dict]) -> list[str]:
    """A chapter (``params``: chapter -> its parameters) whose ``device`` or ``dtype`` this machine
    cannot give (``cuda`` where CUDA is not available, say): one line each, naming the profile file,
    the chapter and the key at fault with its value, before any model loads
    (:mod:`textglauber.device` decides both, and its refusal is the line)."""
    from ..device import pick_device, pick_dtype

    out = []
    for ch, prm in params.items():
        key = "device"
        try:
            device = pick_device(prm.get("device"))
            key = "dtype"
            pick_dtype(prm.get("dtype"), device)
        except (ValueError, RuntimeError) as exc:
            out.append(f"{P.where(P.profile_path(profile))}: chapter {ch!r}: {key} = {prm.get(key)!r}: {exc}")
    return out


def _asked_problems(profile: str, wanted: dict) -> list[str]:
    """Per chapter, the lengths its masked and causal LMs cannot take (config.json alone) and the
    tokens their vocabularies lack (the tokenizer alone, no weights), each line naming the profile
    file, the chapter and the dotted key."""
    from ..models import length_problems, token_problems

    out = []
    for ch, ws in wanted.items():
        at = f"{P.where(P.profile_path(profile))}: chapter {ch!r}: "
        out += [at + line for line in length_problems(ws) + token_problems(ws)]
    return out


def window_problems(profile: str, params: dict[str, dict]) -> list[str]:
    """For the pre-flight: windows longer than a chapter's corpus can give, one line each.

    Every length asked of a model that names a corpus (:func:`textglauber.profile.model_refs`: the
    window-length keys beside it, at any depth) is set against that corpus; the corpora are read
    (no model is): a window of n tokens needs n tokens in the corpus (texts shorter than n are
    joined, :func:`textglauber.corpus.windows`), and no tokenizer cuts more tokens from a text than
    it has UTF-8 bytes, plus one (the space byte-level BPE puts in front). A corpus that cannot be
    read is left to the availability check."""
    from .. import corpus

    held: dict[str, tuple[int, int] | None] = {}
    notebooks = P.chapter_notebooks(profile)
    out = []
    for ch, prm in params.items():
        asked = {}
        for ref in P.model_refs(notebooks.get(ch), prm):
            for key, value, n in (ref.lengths if ref.corpus else ()):
                asked.setdefault((ref.corpus, key), (value, n))
        for (src, key), (value, n) in asked.items():
            if src not in held:
                try:
                    texts = corpus.texts(src)
                    held[src] = (sum(len(t.encode("utf-8")) + 1 for t in texts), len(texts))
                except Exception:       # missing or unreadable: the availability check names it
                    held[src] = None
            if held[src] is not None and n > held[src][0]:
                out.append(f"{P.where(P.profile_path(profile))}: chapter {ch!r}: {key} = {value}: a window of {n} "
                           f"tokens is longer than corpus {src!r} holds (at most {held[src][0]} tokens in its "
                           f"{held[src][1]} texts)")
    return out
