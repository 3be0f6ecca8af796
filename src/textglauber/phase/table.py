"""The designs (which two tokens each site may hold) and the phase table: one row of exact
quantities per (n, T) cell, each length scored once (docs/science.md, chapter 3)."""
from __future__ import annotations

import numpy as np
import torch

from .. import exact
from .mixing import (TMIX_MAX_STATES, mixing_lower_bound, mixing_time, relaxation, stationary_sparse,
                     tmix_lower_from_trel)
from .product import marginals, product_tmix
from .states import Scores, dobrushin_alpha, kernel, score_table, site_bits


# ---------------------------------------------------------------------------------------- designs

def global_pairs(token_a_id: int, token_b_id: int, n: int) -> np.ndarray:
    """The "global" design: every one of the n sites may hold token a or token b."""
    if token_a_id == token_b_id:
        raise ValueError("the two tokens must differ")
    return np.tile(np.array([token_a_id, token_b_id], np.int64), (n, 1))


def passage_pairs(scorer, content_ids) -> np.ndarray:
    """The "passage" design on a real passage's content ids (the first n tokens, as given): site i
    may hold its own token or the model's top alternative there.

    The alternative is the highest-logit token of the scorer's allowed vocabulary other than the
    site's own token, with site i masked in the passage itself (one masked row per site, in the
    frame of exactly these ids). The scorer should therefore allow the model's whole usable
    vocabulary (e.g. ``vocabulary.allowed_vocabulary(tokenizer)``), the passage's own tokens
    included; an own token outside it is an error. Own and alternative differ by construction."""
    ids = torch.as_tensor(np.asarray(content_ids, np.int64))
    n = len(ids)
    own = scorer.vocab.index_of(ids)
    if (own < 0).any():
        raise ValueError(f"passage tokens {ids[own < 0].tolist()} are not in the scorer's allowed vocabulary")
    sc = scorer.scores(ids.expand(n, n).clone(), torch.arange(n)).double().cpu()
    sc[torch.arange(n), own] = -np.inf
    alt = scorer.vocab.ids[sc.argmax(1)]
    return np.stack([ids.numpy(), alt.numpy()], axis=1)


def design_scorer(lm, pairs_list):
    """A scorer for ``lm`` whose allowed vocabulary is the union of the tokens of all given pairs
    (logits do not depend on the allowed vocabulary; a small one keeps the head cheap)."""
    from .. import models, vocabulary

    ids = sorted({int(t) for pairs in pairs_list for t in np.asarray(pairs).ravel()})
    tokens = lm.tokenizer.convert_ids_to_tokens(ids)
    return models.MaskedLMScorer(lm, vocabulary.allowed_vocabulary(lm.tokenizer, tokens=tokens))


def design_tokens(scorer, design: str, pairs: np.ndarray) -> str:
    """The allowed tokens as text: "a|b" for the global design, "a/b c/d ..." per site for a passage
    (tokens from the scorer's tokenizer when it has one, else the ids)."""
    tok = getattr(getattr(getattr(scorer, "lm", None), "tokenizer", None), "convert_ids_to_tokens", None)
    name = (lambda i: str(tok(int(i)))) if tok is not None else (lambda i: str(int(i)))
    if design == "global":
        if not (pairs == pairs[0]).all():
            raise ValueError("a global design has one pair for every site")
        return f"{name(pairs[0, 0])}|{name(pairs[0, 1])}"
    if design.startswith("passage"):
        return " ".join(f"{name(a)}/{name(b)}" for a, b in pairs)
    raise ValueError(f"design must be 'global' or 'passage' (or 'passage K'), got {design!r}")


# ------------------------------------------------------------------------------------------ table

COLUMNS = ["model", "design", "tokens", "n", "temperature", "states", "t_rel", "lambda2", "resolved",
           "t_mix", "t_mix_product", "t_mix_lower", "alpha", "top_state", "top_mass", "rows_scored"]


def phase_point(scores: Scores, temperature: float, *, eps: float = 0.25,
                tmix_max_states: int = TMIX_MAX_STATES, t_max: int = 2 ** 50) -> dict:
    """The exact quantities of one (n, T) cell from a score table: relaxation, mixing time (where
    the state space allows), the best rigorous lower bound on t_mix, Dobrushin's alpha, and the
    state of largest stationary mass (``top_state``, an index; its mass ``top_mass``), and the exact
    t_mix of the product chain with the same single-site stationary marginals (``t_mix_product``,
    :func:`textglauber.phase.product.product_tmix`), the yardstick for t_mix at high temperature.

    The stationary law is exact (GTH elimination) up to ``tmix_max_states`` states (and
    ``exact.GTH_MAX``) and only then feeds t_mix and the trap bound; beyond, it comes from a sparse
    solve (:func:`stationary_sparse`) and is used for ``top_state`` and the marginals of
    ``t_mix_product`` alone (the pi-free bound of :func:`mixing_lower_bound` is used instead)."""
    P = kernel(scores, temperature)
    rel = relaxation(P)
    exact_pi = exact.stationary(P) if P.shape[0] <= min(tmix_max_states, exact.GTH_MAX) else None
    pi = exact_pi if exact_pi is not None else stationary_sparse(P)
    mix = mixing_time(P, eps, max_states=tmix_max_states, t_max=t_max, pi=exact_pi)
    lower = np.nanmax([mixing_lower_bound(P, exact_pi, eps).t_lower, tmix_lower_from_trel(rel.t_rel, eps)])
    top = int(np.argmax(pi))
    mu = marginals(pi, scores.n)
    t_product = float(product_tmix(mu, eps)) if np.isfinite(mu).all() else np.nan
    return {"states": P.shape[0], "t_rel": rel.t_rel, "lambda2": rel.lambda2_abs, "resolved": rel.resolved,
            "t_mix": mix.t_mix, "t_mix_product": t_product,
            "t_mix_lower": float(lower), "alpha": dobrushin_alpha(scores, temperature)[0],
            "top_state": top, "top_mass": float(pi[top])}


def state_text(scorer, pairs: np.ndarray, state: int) -> str:
    """A state of the chain on ``pairs`` as its tokens, space-separated."""
    tok = getattr(getattr(getattr(scorer, "lm", None), "tokenizer", None), "convert_ids_to_tokens", None)
    ids = pairs[np.arange(len(pairs)), site_bits(state, len(pairs))]
    return " ".join(str(tok(int(i))) if tok is not None else str(int(i)) for i in ids)


def phase_table(scorer, model_name: str, design: str, pairs_by_n: dict, temperatures, *,
                eps: float = 0.25, tmix_max_states: int = TMIX_MAX_STATES, t_max: int = 2 ** 50,
                scores_by_n: dict | None = None):
    """One row per (n, temperature) with the columns of :data:`COLUMNS`; each n is scored once
    (:func:`score_table`, or taken from ``scores_by_n``) and that table serves every temperature."""
    import pandas as pd

    rows = []
    for n in sorted(pairs_by_n):
        pairs = np.asarray(pairs_by_n[n], np.int64)
        if len(pairs) != n:
            raise ValueError(f"pairs_by_n[{n}] has {len(pairs)} sites")
        text = design_tokens(scorer, design, pairs)
        scores = scores_by_n[n] if scores_by_n is not None else score_table(scorer, pairs)
        for T in temperatures:
            cell = phase_point(scores, float(T), eps=eps, tmix_max_states=tmix_max_states, t_max=t_max)
            cell["top_state"] = state_text(scorer, pairs, cell["top_state"])
            rows.append({"model": model_name, "design": design, "tokens": text, "n": n,
                         "temperature": float(T), **cell, "rows_scored": scores.rows_scored})
    return pd.DataFrame(rows, columns=COLUMNS)
