"""Chapter 2's headline on the findings page: the estimated T* per model (a lower bound on T*),
set against the crossover chapter's lowest fast temperature at the same length."""
from __future__ import annotations

from pathlib import Path

from .. import crossover, reported
from ..tables import number
from . import Headline
from .reading import esc, manifest, nowrap, table


def coupling_boundary(root: Path, profile: str) -> tuple[str | None, list, float]:
    """The crossover chapter's model, the fast threshold per coupling length, and its criterion."""
    cross = root / profile / "crossover"
    m, summary = manifest(cross), table(cross, "summary")
    if m is None or summary is None or "fast" not in summary:
        return None, [], float("nan")
    cells = summary[summary.kind == "coupling"]
    return m["parameters"]["model"]["name"], crossover.fast_threshold(cells), float(m["parameters"]["fast_within"])


def headline(folder: Path, root: Path, profile: str) -> Headline | None:
    alpha = table(folder, "alpha")
    if alpha is None:
        return None
    t_star = alpha.groupby("model", sort=False).t_star.first()
    verdict = ("Estimated T* (a lower bound on T*): "
               + "; ".join(f"{nowrap(m)} {number(t)}" for m, t in t_star.items()) + ".")
    model, boundary, kappa = coupling_boundary(root, profile)
    if model is None:
        details = "The crossover chapter has not run, so there is no empirical fast temperature to set it against."
    elif model not in t_star:
        details = f"The crossover chapter ran {nowrap(model)}, which this chapter did not estimate."
    else:
        seq_len = int((manifest(folder) or {}).get("parameters", {}).get("seq_len", 0))
        cmp = crossover.tstar_comparison(float(t_star[model]), seq_len, boundary)
        details = esc(crossover.tstar_sentence(cmp, model, kappa)) + "."
    return Headline(verdict, details)


def preprint() -> str:
    return esc(reported.BOUNDS["t_star_vs_empirical"]) + " (one 14-token sentence)."
