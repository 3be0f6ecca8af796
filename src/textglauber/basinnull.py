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
WORDS = 5                 # words per label in the stand-in model of the power check
POWER_BIAS = 0.5          # the planted effect of the power check: logits added to each basin-label word
POWER_RUNS = 10           # stand-in runs of the power check
POWER_NEEDED = 0.8        # share of them that must come out special before "not special" is said
COUPLINGS = (0.0, 3.0, 6.0, 12.0)   # topic couplings the stand-in's seed memory is matched over


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


def seeded_labels(chains: pd.DataFrame) -> list[str]:
    """The labels some chain was seeded from: the topic of a topic seed, or the source topic of
    a shuffled one (a shuffled seed keeps its words, so it keeps its topic for a word-reading
    scorer). In order of first appearance."""
    return list(dict.fromkeys(chains["seed topic"].dropna().tolist()))


def label_contrast(chains: pd.DataFrame, labels: list[str], basin_label: str, *, alpha: float = 0.05,
                   rng=None) -> pd.DataFrame:
    """Is the basin label's late share larger than that of each label no chain was seeded from?

    Why only the never-seeded labels: a chain that remembers its seed keeps its seed's label
    above the baseline long after the start, so a seeded label's late share is raised by memory
    whether or not the model pulls towards it, and the basin label (never seeded, as in the
    preprint) would lose to it in slowly mixing chains even where it is the only attractor. A
    label that seeded no chain starts, like the basin label, from no seed of its own: memory
    lifts neither, and with no attractor the two are exchangeable. Seeding every label, the basin
    label included, would also be symmetric, but it changes the preprint's protocol and needs
    seed sentences and chains for every label; the comparison here uses the chains already run.
    The symmetry is only as good as the scorer's: a seed topic whose memory lifts a never-seeded
    label (a neighbour in meaning) makes the test conservative, one that lifts the basin label
    makes it liberal.

    One row per (model, other label): ``compared`` (the label seeded no chain), the clusters,
    the mean late shares of both labels (means of cluster means), their difference with a
    cluster-bootstrap 95% interval, the sign-flip p-value over clusters, Holm's adjustment over
    the compared labels (NaN for the others) and ``beats`` (adjusted p below ``alpha``). Seeded
    labels keep a row, uncompared, so the table shows how far memory lifts them."""
    rng = np.random.default_rng(rng)
    rows = []
    for m, C in chains.groupby("model", sort=False):
        seeded = set(seeded_labels(C))
        means = C.groupby("cluster")[[f"late {l}" for l in labels]].mean()     # one row per cluster
        basin = means[f"late {basin_label}"].to_numpy(float)
        part = [_contrast_row(m, l, basin, means[f"late {l}"].to_numpy(float), l not in seeded, rng)
                for l in labels if l != basin_label]
        P = pd.DataFrame(part)
        P["basin seeded"] = basin_label in seeded
        P["p holm"] = np.nan
        if P.compared.any():
            P.loc[P.compared, "p holm"] = holm(P.p[P.compared].to_numpy())
        rows.append(P)
    out = pd.concat(rows, ignore_index=True)
    out["beats"] = out.compared & (out["p holm"] < alpha)
    return out


def _contrast_row(model, label: str, basin: np.ndarray, other: np.ndarray, compared: bool, rng) -> dict:
    d = basin - other                             # a cluster's mean difference: its chains are the same
    lo, hi = _interval(d, rng)
    return {"model": model, "label": label, "compared": compared, "clusters": len(d), "basin": float(basin.mean()),
            "other": float(other.mean()), "difference": float(np.mean(d)), "low": lo, "high": hi,
            "p": sign_flip_p(d, rng) if compared else np.nan}


@dataclass
class Special:
    """The verdict of :func:`label_contrast` for one model, three ways: ``verdict`` True (the
    basin label beats every never-seeded label: special), False (it does not, and the same
    design found a planted attractor often enough: not special) or None (cannot tell: too few
    clusters, no never-seeded label, the basin label itself seeded, or power not shown)."""

    verdict: bool | None
    reason: str              # special, not special, no power, too few clusters, nothing to compare, basin seeded
    beaten: int              # compared labels it beats
    others: int              # compared labels (never seeded)
    rank: int                # its rank by mean late share among itself and the compared labels (1: highest)
    clusters: int
    not_beaten: list[str]    # compared labels it does not beat, by mean late share, highest first
    seeded: list[str]        # labels left out because some chain was seeded from them
    power: float             # share of planted stand-in runs of the same design found special (NaN: none ran)
    power_runs: int


def special(contrast: pd.DataFrame, model: str, *, alpha: float = 0.05, power: "Power | None" = None) -> Special:
    """The three-way verdict for ``model``. ``power`` (:func:`power`) defaults to the power
    columns of ``contrast`` (:func:`with_power`), if any. Holm's first step asks for a p-value of
    at most alpha / (compared labels); where the sign-flip test cannot reach that with so few
    clusters, or the other conditions of :class:`Special` fail, the verdict is None."""
    C = contrast[contrast.model == model]
    K = C[C.compared]
    rate, runs = _power_of(C, power)
    m = int(C.clusters.max())
    missed = K[~K.beats].sort_values("other", ascending=False).label.tolist()
    rank = 1 + int((K.other > C.basin.iloc[0]).sum())
    reason = ("basin seeded" if bool(C["basin seeded"].iloc[0]) else "nothing to compare" if not len(K) else
              "too few clusters" if min_p(m) * len(K) > alpha else "special" if not missed else
              "not special" if rate >= POWER_NEEDED else "no power")
    verdict = {"special": True, "not special": False}.get(reason)
    return Special(verdict, reason, len(K) - len(missed), len(K), rank, m, missed,
                   C[~C.compared].label.tolist(), rate, runs)


def _power_of(C: pd.DataFrame, power) -> tuple[float, int]:
    if power is not None:
        return power.rate, power.runs
    if "power" in C and C["power"].notna().any():
        return float(C["power"].iloc[0]), int(C["power runs"].iloc[0])
    return np.nan, 0


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


# ----------------------------------------------------------------- the stand-in of the power check
@dataclass(frozen=True)
class Design:
    """What a basins run is, as far as the label contrast sees it: labels, basin label, seed
    topics, seeds and chains, null seeds, length, steps, records and temperature."""

    labels: tuple
    basin_label: str
    seed_topics: tuple
    seeds_per_topic: int
    chains_per_seed: int
    null_seeds: tuple
    null_chains: int
    seq_len: int
    steps: int
    score_every: int
    temperature: float = 1.0


def standin_starts(design: Design, rng) -> tuple[np.ndarray, list[str], list]:
    """Start states of the stand-in, as :func:`topics.basin_chains` lays them out: (token ids
    (chains, n), kind per chain, seed topic per chain). Token ``label * WORDS + word`` is a word
    of that label; a topic seed is ``seq_len`` words of its topic, a shuffled seed a topic seed in
    another order (its source topic kept), a random seed uniform words."""
    L, n = len(design.labels), design.seq_len
    pick = lambda k: design.labels.index(k) * WORDS + rng.integers(WORDS, size=n)     # noqa: E731
    seeds = [(t, pick(t)) for t in design.seed_topics for _ in range(design.seeds_per_topic)]
    rows = [x for _, x in seeds for _ in range(design.chains_per_seed)]
    topic = [t for t, _ in seeds for _ in range(design.chains_per_seed)]
    kind = ["topic"] * len(rows)
    kinds = list(design.null_seeds)
    for k, what in enumerate(kinds):
        for j in range(design.null_chains // len(kinds) + (k < design.null_chains % len(kinds))):
            if what == "shuffled":
                t, x = seeds[rng.permutation(len(seeds))[0] if j >= len(seeds) else j]
                rows.append(rng.permutation(x)); topic.append(t)
            else:
                rows.append(rng.integers(L * WORDS, size=n)); topic.append(None)
            kind.append(what)
    return np.array(rows), kind, topic


def standin_glauber(init: np.ndarray, bias: np.ndarray, coupling: float, design: Design, rng) -> tuple:
    """Glauber dynamics of the stand-in masked LM: at a uniform site, every word of label l has
    raw score ``bias[l] + coupling * (other sites holding a word of l) / (n - 1)``, divided by
    the temperature. With ``coupling`` 0 it is a label bias; a large one keeps a chain on the
    label most of its words hold (memory of the seed), while the stationary law still favours
    the label with the largest bias. Returns (recorded steps, states (records, chains, n))."""
    x = init.copy()
    B, n = x.shape
    at = np.arange(B)
    counts = np.stack([np.bincount(r // WORDS, minlength=len(bias)) for r in x]).astype(float)
    steps, states = [0], [x.copy()]
    for t in range(1, design.steps + 1):
        i = rng.integers(n, size=B)
        counts[at, x[at, i] // WORDS] -= 1
        s = (bias + coupling * counts / max(n - 1, 1)) / design.temperature
        p = np.exp(s - s.max(1, keepdims=True))
        cum = np.cumsum(p / p.sum(1, keepdims=True), 1)
        label = np.minimum((rng.random((B, 1)) > cum).sum(1), len(bias) - 1)
        x[at, i] = label * WORDS + rng.integers(WORDS, size=B)
        counts[at, label] += 1
        if t % design.score_every == 0 or t == design.steps:
            steps.append(t); states.append(x.copy())
    return np.array(steps), np.stack(states)


def standin_chains(design: Design, bias: dict, coupling: float, rng) -> pd.DataFrame:
    """One stand-in run of ``design`` (:func:`chain_table`'s rows), scored by a bag-of-words
    scorer: the softmax over labels of how many words of each label a state holds."""
    rng = np.random.default_rng(rng)
    init, kind, topic = standin_starts(design, rng)
    b = np.array([float(bias.get(l, 0.0)) for l in design.labels])
    steps, states = standin_glauber(init, b, coupling, design, rng)
    counts = np.stack([(states // WORDS == k).sum(-1) for k in range(len(b))], -1).astype(float)
    probs = np.exp(counts - counts.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    R, B = states.shape[:2]
    frame = pd.DataFrame({"model": "stand-in", "chain": np.tile(np.arange(B), R), "kind": kind * R,
                          "seed topic": topic * R, "step": np.repeat(steps, B),
                          "text": [" ".join(map(str, s)) for s in states.reshape(R * B, -1)],
                          **{l: probs[..., k].ravel() for k, l in enumerate(design.labels)}})
    return chain_table(frame, list(design.labels), design.basin_label, 1 / len(design.labels))


def seed_memory(chains: pd.DataFrame) -> pd.DataFrame:
    """How much chains remember the topic they were seeded from. One row per (model, kind of
    seed with a topic: topic, shuffled): the chains, their mean late share above the baseline on
    their own seed topic, the random-seeded chains' mean late share on the same labels (the same
    mix of labels; NaN without random chains) and the difference."""
    rows = []
    for m, C in chains.groupby("model", sort=False):
        R = C[C.kind == "random"]
        for kind, G in C[C["seed topic"].notna()].groupby("kind", sort=False):
            own = np.array([r[f"late {r['seed topic']}"] for _, r in G.iterrows()], float)
            ref = np.array([R[f"late {t}"].mean() if len(R) else np.nan for t in G["seed topic"]], float)
            rows.append({"model": m, "kind": kind, "chains": len(G), "own topic": float(own.mean()),
                         "random on same labels": float(ref.mean()), "difference": float((own - ref).mean())})
    return pd.DataFrame(rows, columns=["model", "kind", "chains", "own topic", "random on same labels", "difference"])


def match_coupling(design: Design, memory: float, rng) -> float:
    """The coupling of :data:`COUPLINGS` whose flat stand-in run of ``design`` shows the topic
    seeds' memory (:func:`seed_memory`, topic row) closest to ``memory``; the largest coupling
    when ``memory`` is not a number (memory unknown: assume the most)."""
    if not np.isfinite(memory):
        return max(COUPLINGS)
    rng = np.random.default_rng(rng)
    seen = [seed_memory(standin_chains(design, {}, J, rng)).set_index("kind").loc["topic", "difference"]
            for J in COUPLINGS]
    return COUPLINGS[int(np.argmin(np.abs(np.array(seen) - memory)))]


@dataclass
class Power:
    """How often the label contrast finds a planted attractor in stand-in runs of one design."""

    runs: int
    found: int
    bias: float              # logits planted on each basin-label word
    coupling: float          # the stand-in's topic coupling (seed memory)

    @property
    def rate(self) -> float:
        return self.found / self.runs if self.runs else np.nan


def power(design: Design, *, bias: float = POWER_BIAS, coupling: float = 0.0, runs: int = POWER_RUNS,
          alpha: float = 0.05, rng=None) -> Power:
    """Run the stand-in ``runs`` times with ``design`` (same seeds, chains, steps and records),
    ``bias`` logits planted on the basin label's words and topic ``coupling``, and count the runs
    whose label contrast says special. One generator, seeded by ``rng``, drives every run."""
    rng = np.random.default_rng(rng)
    found = 0
    for _ in range(runs):
        c = label_contrast(standin_chains(design, {design.basin_label: bias}, coupling, rng), list(design.labels),
                           design.basin_label, alpha=alpha, rng=rng)
        found += special(c, "stand-in", alpha=alpha).verdict is True
    return Power(runs, found, bias, coupling)


def with_power(contrast: pd.DataFrame, powers: dict) -> pd.DataFrame:
    """``contrast`` with each model's power check (``powers[model]``, a :class:`Power`) in columns
    power, power runs, planted bias and coupling, so the table alone carries the verdict."""
    out = contrast.copy()
    for col, get in (("power", lambda p: p.rate), ("power runs", lambda p: p.runs),
                     ("planted bias", lambda p: p.bias), ("coupling", lambda p: p.coupling)):
        out[col] = out.model.map(lambda m: get(powers[m]) if m in powers else np.nan)
    return out


def power_by_model(chains: pd.DataFrame, design: Design, *, alpha: float = 0.05, runs: int = POWER_RUNS,
                   rng=None) -> dict:
    """Each model's power check: the stand-in's coupling matched to the model's seed memory
    (:func:`seed_memory`, :func:`match_coupling`), then :func:`power` at :data:`POWER_BIAS`."""
    rng = np.random.default_rng(rng)
    mem = seed_memory(chains)
    out = {}
    for m in chains.model.unique():
        row = mem[(mem.model == m) & (mem.kind == "topic")]
        J = match_coupling(design, float(row.difference.iloc[0]) if len(row) else np.nan, rng)
        out[m] = power(design, coupling=J, runs=runs, alpha=alpha, rng=rng)
    return out
