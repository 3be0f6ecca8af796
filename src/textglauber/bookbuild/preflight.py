"""Every model and corpus a build's chapters need, checked before any compute: what is missing,
a model whose files do not fit the role its chapter gives it or cannot be read, a window longer
than its corpus or its model holds, a token its model's vocabulary lacks. One message each, with
the fix. The models are those :func:`textglauber.schema.model_refs` finds by type, at any depth of
a chapter's parameters (``escape.models`` as well as ``mlms``)."""
from __future__ import annotations

from .. import params as P


def preflight(profile: str, chapters: list[str]) -> None:
    """Every model and corpus the chapters need, resolved before any compute: one message each
    for what is missing, and the fix. Each model's files are also checked against the role its
    chapter gives it (masked LM, causal control, sentence model, NLI classifier) and for weights
    that cannot be read, without loading weights; that holds in chapters that skip missing models
    too. Then the lengths asked of each model (config.json) and the tokens named for it (its
    tokenizer alone)."""
    from .. import corpus
    from ..models import ModelUnavailableError, check_models, wanted_models

    notebooks = P.chapter_notebooks(profile)
    names, corpora, wanted = [], [], {}
    for ch in chapters:
        prm = P.chapter_parameters(profile, ch)
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
    problems += P.window_problems(profile, chapters)       # a window longer than its corpus holds
    problems += _asked_problems(profile, wanted)            # a length its model cannot take, a token it lacks
    if problems:
        raise SystemExit(f"profile {profile!r} cannot run:\n" + "\n".join(problems))


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
