"""Chapter 4's null that can fail both ways.

The null chains of :mod:`topics` start from seeds with no topic. A real attractor pulls them as
much as the topic-seeded chains, so "the topic-seeded chains do not exceed the null" says only
that the seed's topic does not matter, not that there is no basin. Two tests here can tell:

- :func:`label_contrast` asks whether the basin label is special among the labels: in the same
  chains, is its share of second-half records above the uniform baseline larger than every
  other label's? A planted attractor makes it so; a flat model does not.
- :func:`matched_starts` compares topic-seeded chains with null chains that start at the same
  basin score, so a difference in where the two groups start cannot pass for a difference in
  where they go.

Chains that share a start state (the chains of one seed) are one cluster: the unit of every
test is the cluster, never the chain. The tests are one-sided sign-flip randomization tests on
cluster means, exact when there are at most :data:`EXACT_FLIPS` clusters.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .topics import recurrence

EXACT_FLIPS = 16          # clusters up to which the sign-flip test enumerates every sign pattern
DRAWS = 20_000            # random sign patterns beyond that


def chain_table(allscores: pd.DataFrame, labels: list[str], basin_label: str, baseline: float) -> pd.DataFrame:
    """One row per (model, chain): kind, seed topic, ``cluster`` (chains of one model and kind
    that share their step-0 text share a cluster), the basin label's start score and whether it
    started above and crossed up (:func:`topics.recurrence`), and per label ``late <label>``:
    the share of records in the second half of the run above ``baseline``."""
    rows = []
    for (m, b), g in allscores.groupby(["model", "chain"], sort=False):
        g = g.sort_values("step")
        steps = g.step.to_numpy()
        r = recurrence(steps, g[basin_label].to_numpy(), baseline)
        late = steps > steps[-1] / 2
        rows.append({"model": m, "chain": b, "kind": g["kind"].iloc[0], "seed topic": g["seed topic"].iloc[0],
                     "start text": g.text.iloc[0], "start": r["start"], "starts_above": r["starts_above"],
                     "crossed_up": r["crossed_up"],
                     **{f"late {l}": float((g[l].to_numpy()[late] > baseline).mean()) if late.any() else np.nan
                        for l in labels}})
    out = pd.DataFrame(rows)
    out["cluster"] = out.groupby(["model", "kind", "start text"], sort=False).ngroup()
    return out.drop(columns="start text")


def sign_flip_p(d, rng=None) -> float:
    """One-sided p-value of mean(d) > 0 under sign symmetry of the cluster values ``d``: the share
    of sign patterns whose mean is at least the observed one, over all 2^m patterns when m <=
    :data:`EXACT_FLIPS`, else (1 + hits) / (1 + DRAWS) over random ones. NaN for no value."""
    d = np.asarray(d, float)
    d = d[np.isfinite(d)]
    m = len(d)
    if m == 0:
        return np.nan
    obs = d.mean() - 1e-12 * max(1.0, np.abs(d).max())
    if m <= EXACT_FLIPS:
        signs = 1 - 2 * ((np.arange(2 ** m)[:, None] >> np.arange(m)) & 1)
        return float(np.mean((signs * d).mean(1) >= obs))
    signs = np.where(np.random.default_rng(rng).random((DRAWS, m)) < 0.5, -1.0, 1.0)
    return float((1 + np.sum((signs * d).mean(1) >= obs)) / (1 + DRAWS))


def min_p(m: int) -> float:
    """The smallest p-value the sign-flip test can give with m clusters."""
    return 2.0 ** -m if m <= EXACT_FLIPS else 1 / (1 + DRAWS)


def holm(p) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise level over the family)."""
    p = np.asarray(p, float)
    order = np.argsort(p)
    adj = np.minimum(1.0, np.maximum.accumulate((len(p) - np.arange(len(p))) * p[order]))
    out = np.empty_like(adj)
    out[order] = adj
    return out


def _interval(d, rng, boot: int = 4000) -> tuple[float, float]:
    d = np.asarray(d, float)
    if len(d) < 2:
        return np.nan, np.nan
    means = d[np.random.default_rng(rng).integers(len(d), size=(boot, len(d)))].mean(1)
    return tuple(float(q) for q in np.quantile(means, [0.025, 0.975]))


def label_contrast(chains: pd.DataFrame, labels: list[str], basin_label: str, *, alpha: float = 0.05,
                   rng=None) -> pd.DataFrame:
    """Is the basin label's late share larger than each other label's, in the same chains?

    One row per (model, other label): the clusters, the mean late shares of both labels (means of
    cluster means), their difference with a cluster-bootstrap 95% interval, the sign-flip p-value
    over clusters, Holm's adjustment over the other labels, and ``beats`` (adjusted p below
    ``alpha``)."""
    rng = np.random.default_rng(rng)
    rows = []
    for m, C in chains.groupby("model", sort=False):
        means = C.groupby("cluster")[[f"late {l}" for l in labels]].mean()     # one row per cluster
        basin = means[f"late {basin_label}"].to_numpy(float)
        part = []
        for l in labels:
            if l == basin_label:
                continue
            other = means[f"late {l}"].to_numpy(float)
            d = basin - other                         # a cluster's mean difference: its chains are the same
            lo, hi = _interval(d, rng)
            part.append({"model": m, "label": l, "clusters": len(d), basin_label: float(basin.mean()),
                         "other": float(other.mean()), "difference": float(np.mean(d)),
                         "low": lo, "high": hi, "p": sign_flip_p(d, rng)})
        P = pd.DataFrame(part)
        P["p holm"] = holm(P.p.to_numpy())
        rows.append(P)
    out = pd.concat(rows, ignore_index=True)
    out["beats"] = out["p holm"] < alpha
    return out.rename(columns={basin_label: "basin"})


@dataclass
class Special:
    """The verdict of :func:`label_contrast` for one model."""

    verdict: bool | None     # True: beats every other label; False: not; None: too few clusters to tell
    beaten: int              # other labels it beats
    others: int              # other labels
    rank: int                # its rank by mean late share among all labels (1: highest)
    clusters: int
    not_beaten: list[str]    # the labels it does not beat, by mean late share, highest first


def special(contrast: pd.DataFrame, model: str, *, alpha: float = 0.05) -> Special:
    """Whether the basin label beats every other label for ``model``. Holm's first step asks for
    a p-value of at most alpha / (labels - 1); where the sign-flip test cannot reach that with
    so few clusters, the verdict is None."""
    C = contrast[contrast.model == model]
    k, m = len(C), int(C.clusters.max())
    rank = 1 + int((C.other > C.basin.iloc[0]).sum())
    missed = C[~C.beats].sort_values("other", ascending=False).label.tolist()
    verdict = True if not missed else (None if min_p(m) * k > alpha else False)
    return Special(verdict, k - len(missed), k, rank, m, missed)


def _pairs(topic: pd.DataFrame, null: pd.DataFrame) -> tuple[np.ndarray, bool]:
    """Each topic cluster's matched null chain: the assignment that minimises the total gap in
    start score (without replacement where there are enough null chains, else the nearest)."""
    from scipy.optimize import linear_sum_assignment

    gap = np.abs(topic.start.to_numpy()[:, None] - null.start.to_numpy()[None, :])
    if len(null) >= len(topic):
        r, c = linear_sum_assignment(gap)
        return c[np.argsort(r)], False
    return gap.argmin(1), True


def matched_starts(chains: pd.DataFrame, basin_label: str, *, alpha: float = 0.05, rng=None) -> pd.DataFrame:
    """Do topic-seeded chains cross the baseline, or sit above it late, more than null chains
    that start at the same basin score?

    Among chains that start at or below the baseline, each topic cluster (its crossing share and
    mean late share over its chains) is paired with one null chain by start score
    (:func:`_pairs`). One row per (model, outcome): pairs, the mean and largest start gap, the
    topic and null means, their difference with a bootstrap interval over pairs, the sign-flip
    p-value, ``exceeds`` and ``replacement`` (null chains reused: too few of them)."""
    rng = np.random.default_rng(rng)
    rows = []
    late = f"late {basin_label}"
    for m, C in chains.groupby("model", sort=False):
        low = C[~C.starts_above.astype(bool)]
        T = low[low.kind == "topic"].groupby("cluster").agg(start=("start", "first"), crossed=("crossed_up", "mean"),
                                                           late=(late, "mean"))
        N = low[low.kind != "topic"].rename(columns={"crossed_up": "crossed", late: "late"})
        if not len(T) or not len(N):
            continue
        j, reused = _pairs(T, N)
        gaps = np.abs(T.start.to_numpy() - N.start.to_numpy()[j])
        for outcome in ("crossed", "late"):
            d = T[outcome].to_numpy(float) - N[outcome].to_numpy(float)[j]
            lo, hi = _interval(d, rng)
            rows.append({"model": m, "outcome": outcome, "pairs": len(d), "mean start gap": float(gaps.mean()),
                         "largest start gap": float(gaps.max()), "topic": float(T[outcome].mean()),
                         "null": float(N[outcome].to_numpy(float)[j].mean()), "difference": float(d.mean()),
                         "low": lo, "high": hi, "p": sign_flip_p(d, rng), "replacement": reused})
    out = pd.DataFrame(rows, columns=["model", "outcome", "pairs", "mean start gap", "largest start gap", "topic",
                                      "null", "difference", "low", "high", "p", "replacement"])
    out["exceeds"] = out.p < alpha
    return out
