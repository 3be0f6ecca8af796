"""Every model and corpus a build's chapters need, checked before any compute: what is missing,
a model whose files do not fit the role its chapter gives it, a window longer than its corpus or
its model holds. One message each, with the fix."""
from __future__ import annotations

from .. import params as P


def preflight(profile: str, chapters: list[str]) -> None:
    """Every model and corpus the chapters need, resolved before any compute: one message each
    for what is missing, and the fix. Each model's files are also checked against the role its
    chapter gives it (masked LM, causal control, sentence model, NLI classifier), without loading
    weights; that holds in chapters that skip missing models too."""
    from .. import corpus
    from ..models import ModelUnavailableError, check_models, wanted_models

    names, corpora = [], []
    for ch in chapters:
        prm = P.chapter_parameters(profile, ch)
        required = prm.get("on_missing_model", "fail") == "fail"
        names += wanted_models(prm, ch, required)
        if required:
            corpora += P.corpus_names(prm)
    problems = []
    for check, items, error in ((check_models, names, ModelUnavailableError),
                                (corpus.check_available, sorted(set(corpora)), corpus.CorpusUnavailableError)):
        try:
            check(items)
        except error as exc:
            problems.append(str(exc))
    problems += P.window_problems(profile, chapters)       # a window longer than its corpus holds
    problems += _length_problems(profile, chapters)         # a window longer than its model takes
    if problems:
        raise SystemExit(f"profile {profile!r} cannot run:\n" + "\n".join(problems))


def _length_problems(profile: str, chapters: list[str]) -> list[str]:
    """Windows longer than a chapter's masked or causal LMs take (config.json alone, no weights)."""
    from ..models import length_problems, wanted_models

    out = []
    for ch in chapters:
        prm = P.chapter_parameters(profile, ch)
        longest = {k: max(v) if isinstance(v, list) else v for k, v in prm.items() if k in P.WINDOW_KEYS and v}
        for key, n in longest.items():
            out += [f"{P.where(P.profile_path(profile))}: chapter {ch!r}: {line}"
                    for line in length_problems(wanted_models(prm, ch), int(n), key)]
    return out
