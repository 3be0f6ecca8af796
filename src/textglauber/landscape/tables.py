"""Chapter 3's landscape tables (docs/science.md, chapter 3: the landscape): per model, design and
length, the wells of the two-token chain and its exponent Gamma, exact where every state is listed
and searched beyond; and the check of Gamma against T ln t_rel on the listed chains."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..phase.states import Scores, site_bits
from . import check, enumerated, explore
from .growth import barrier_verdict

COLUMNS = ["model", "design", "tokens", "n", "wells", "gamma", "gamma low", "gamma high", "states opened", "complete",
           "finished",
           "ground well", "well sizes", "other wells"]
CHECK_COLUMNS = ["model", "design", "n", "measure", "temperature", "t_rel", "resolved", "T ln t_rel", "T ln hit", "gamma"]


def _decode(scorer):
    tok = getattr(getattr(getattr(scorer, "lm", None), "tokenizer", None), "convert_ids_to_tokens", None)
    return (lambda i: str(tok(int(i)))) if tok is not None else (lambda i: str(int(i)))


def well_text(scorer, tokens: np.ndarray) -> str:
    """A well as text: its state's tokens, or its first state and how many states it cycles through."""
    name = _decode(scorer)
    first = " ".join(name(t) for t in tokens[0])
    return first if len(tokens) == 1 else f"{first} (+{len(tokens) - 1} states of a zero-cost cycle)"


def _row(model, design, text, n, wells_tokens, gamma, ground, opened, complete, finished, scorer,
         bracket=None) -> dict:
    others = [well_text(scorer, w) for k, w in enumerate(wells_tokens) if k != ground]
    ground_text = well_text(scorer, wells_tokens[ground]) if wells_tokens else "none found"
    low, high = bracket if bracket is not None else (gamma, gamma)
    return {"model": model, "design": design, "tokens": text, "n": int(n), "wells": len(wells_tokens),
            "gamma": float(gamma), "gamma low": float(low), "gamma high": float(high), "states opened": int(opened),
            "complete": bool(complete),
            "finished": bool(finished), "ground well": ground_text,
            "well sizes": " ".join(str(len(w)) for w in wells_tokens), "other wells": "; ".join(others)}


def enumerated_rows(scorer, model: str, design: str, text: str, pairs_by_n: dict, scores_by_n: dict):
    """Landscape rows and check rows of the listed lengths (every state of 2^n)."""
    rows, checks = [], []
    for n in sorted(scores_by_n):
        scores: Scores = scores_by_n[n]
        pairs = np.asarray(pairs_by_n[n])
        L = enumerated.two_token_landscape(scores)
        tokens = [pairs[np.arange(n), site_bits(np.asarray(w), n)] for w in L.wells]
        rows.append(_row(model, design, text, n, tokens, L.gamma, L.ground, L.opened, True, True, scorer))
        c = check.cold_check(scores, L.gamma, ground=L.wells[L.ground])
        if len(c):
            checks.append(c.assign(model=model, design=design, n=int(n)))
    check_df = pd.concat(checks, ignore_index=True)[CHECK_COLUMNS] if checks else pd.DataFrame(columns=CHECK_COLUMNS)
    return pd.DataFrame(rows, columns=COLUMNS), check_df


def searched_rows(scorer, model: str, design: str, text: str, pairs_by_n: dict, *, starts: int, max_states: int,
                  settle_states: int, rng: np.random.Generator) -> pd.DataFrame:
    """Landscape rows of lengths past enumeration: wells from ``starts`` random states and both
    uniform states, by :func:`textglauber.landscape.explore.search` (not certified complete); where a
    search ran out of its budget with two wells found, Gamma's bracket over them (``gamma low``,
    ``gamma high``), closed with up to ``settle_states`` states more."""
    rows = []
    for n in sorted(pairs_by_n):
        pairs = np.asarray(pairs_by_n[n])
        picks = [np.zeros(n, int), np.ones(n, int)] + [rng.integers(2, size=n) for _ in range(starts)]
        begin = [tuple(int(t) for t in pairs[np.arange(n), b]) for b in picks]
        moves = explore.Moves(scorer, list(pairs))
        s = explore.search(moves, begin, max_states=max_states, settle_states=settle_states)
        tokens = [np.array(sorted(w)) for w in s.wells]
        rows.append(_row(model, design, text, n, tokens, s.gamma, s.ground, s.opened, False, s.finished, scorer,
                         (s.gamma_low, s.gamma_high)))
    return pd.DataFrame(rows, columns=COLUMNS)


SUMMARY_COLUMNS = ["model", "design", "n", "gamma", "temperatures", "resolved", "coldest T", "T ln t_rel there",
                   "off by", "line to T = 0", "line off by", "hit T", "T ln hit there", "hit off by"]


def check_summary(checks: pd.DataFrame) -> pd.DataFrame:
    """Per model, design and n: the coldest resolved T ln t_rel and the line through the two coldest,
    each with its relative distance from Gamma."""
    rows = []
    for (model, design, n), g in checks.groupby(["model", "design", "n"], sort=False):
        coldest, raw, line = check.limit(g)
        hit_T, hit = check.hit_limit(g)
        gamma = float(g.gamma.iloc[0])
        rows.append({"model": model, "design": design, "n": int(n), "gamma": gamma,
                     "temperatures": int((g.measure == "t_rel").sum()),
                     "resolved": check.resolved_count(g), "coldest T": coldest, "T ln t_rel there": raw,
                     "off by": check.agreement(raw, gamma), "line to T = 0": line,
                     "line off by": check.agreement(line, gamma), "hit T": hit_T, "T ln hit there": hit,
                     "hit off by": check.agreement(hit, gamma)})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def verdicts(table: pd.DataFrame) -> pd.DataFrame:
    """Per model and design: whether the barrier grows with n (:func:`barrier_verdict`). A search that
    found one well but did not finish has not shown that there is no second one: its Gamma counts as
    not settled (inf), not as "one well"."""
    rows = []
    for (model, design), g in table.groupby(["model", "design"], sort=False):
        g = g.sort_values("n")
        bounds = ((g["gamma low"].to_numpy(float), g["gamma high"].to_numpy(float)) if "gamma low" in g
                  else (None, None))
        unsure = ~g.complete.astype(bool).to_numpy() & ~g.finished.astype(bool).to_numpy()
        gamma = np.where(unsure & np.isnan(g.gamma.to_numpy(float)), np.inf, g.gamma.to_numpy(float))
        v, words = barrier_verdict(g.n.to_numpy(), gamma, *bounds)
        rows.append({"model": model, "design": design, "n from": int(g.n.min()), "n to": int(g.n.max()),
                     "listed to": int(g[g.complete].n.max()) if g.complete.any() else 0,
                     "barrier": v, "words": words})
    return pd.DataFrame(rows, columns=["model", "design", "n from", "n to", "listed to", "barrier", "words"])
