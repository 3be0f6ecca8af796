"""The rectangle test's controls (docs/science.md, chapter 1): the joint-model control, whose
conditionals come from a causal LM's sequence probabilities over a fixed candidate set and so are
compatible, the perturbed copy that must fail, and the control's candidate set and windows."""
from __future__ import annotations

import hashlib
from collections import Counter

import numpy as np
import torch

from ..models import CausalLMScorer
from .. import vocabulary
from ..vocabulary import AllowedVocab

class JointConditionals:
    """The conditionals of a causal LM's joint law over a fixed candidate set C (the vocab).

    scores(x, i)[a] = log p(x with a at i) up to a per-row constant, so after the softmax
    pi_i(a | x_-i) = p(x^{i<-a}) / sum over c in C of p(x^{i<-c}): a compatible family (the
    conditionals of p restricted to C at the scored site). Each conditional costs |C| sequence
    probabilities; rows already computed are kept (``cache``), because the rectangle sampler
    and the scorer ask for the conditional at i given the base window twice.
    """

    def __init__(self, causal: CausalLMScorer, vocab: AllowedVocab, cache: bool = True):
        if vocab.size < 2:
            raise ValueError("the candidate set needs at least two tokens")
        self.causal, self.vocab = causal, vocab
        self._cache: dict | None = {} if cache else None

    @property
    def max_length(self) -> int:
        return self.causal.max_length

    def scores(self, states: torch.Tensor, sites: torch.Tensor) -> torch.Tensor:
        states, sites = states.cpu(), sites.cpu()
        if self._cache is None:
            return self.causal.candidate_logprobs(states, sites, self.vocab.ids)
        keys = [(x.numpy().tobytes(), int(s)) for x, s in zip(states, sites)]
        todo = sorted({k: r for r, k in enumerate(keys) if k not in self._cache}.values())
        if todo:
            idx = torch.tensor(todo)
            rows = self.causal.candidate_logprobs(states[idx], sites[idx], self.vocab.ids)
            for r, row in zip(todo, rows):
                self._cache[keys[r]] = row
        return torch.stack([self._cache[k] for k in keys])


class PerturbedScorer:
    """A scorer with fixed random noise added to its log-scores: a control that must fail.

    The noise is a standard normal per (context x_-i, site, candidate) times ``scale``, drawn
    from a hash of the context, so the same conditional always gets the same noise. With
    ``site`` given, only that site's conditional is perturbed. Each rectangle's R then adds
    eight independent noise terms with signs +-1, so on a compatible family
    E[R] = scale * sqrt(16 / pi) when every site is perturbed.
    """

    def __init__(self, inner, scale: float, seed: int = 0, site: int | None = None):
        if scale < 0:
            raise ValueError("scale must be non-negative")
        self.inner, self.scale, self.seed, self.site = inner, float(scale), int(seed), site
        self.vocab = inner.vocab

    @property
    def max_length(self) -> int:
        return self.inner.max_length

    def noise(self, states: torch.Tensor, sites: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(len(sites), self.vocab.size, dtype=torch.float64)
        for r, (x, s) in enumerate(zip(states.cpu(), sites.cpu().tolist())):
            if self.site is not None and s != self.site:
                continue
            ctx = x.clone()
            ctx[s] = -1                                    # the conditional does not see x_i
            h = hashlib.blake2b(ctx.numpy().tobytes(), digest_size=8,
                                key=f"{self.seed}:{s}".encode())
            rng = np.random.default_rng(int.from_bytes(h.digest(), "little"))
            out[r] = torch.from_numpy(rng.standard_normal(self.vocab.size))
        return self.scale * out

    def scores(self, states: torch.Tensor, sites: torch.Tensor) -> torch.Tensor:
        return self.inner.scores(states, sites).double().cpu() + self.noise(states, sites)


def candidate_vocab(tokenizer, source: str, k: int) -> AllowedVocab:
    """The k most frequent tokens of a corpus (special tokens excluded; ties by token id)."""
    from .. import corpus

    if k < 2:
        raise ValueError("the candidate set needs at least two tokens")
    special = set(tokenizer.all_special_ids)
    counts = Counter(t for text in corpus.texts(source)
                     for t in tokenizer(text, add_special_tokens=False)["input_ids"] if t not in special)
    top = sorted(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k])
    ids = [t for t, _ in top]
    return AllowedVocab(ids=torch.tensor(ids, dtype=torch.long),
                        tokens=tuple(tokenizer.convert_ids_to_tokens(ids)),
                        vocab_size=max(len(tokenizer), max(ids) + 1))


def control_passages(vocab: AllowedVocab, tokenizer, source: str, n: int, count: int, seed: int,
                     text_from=None) -> torch.Tensor:
    """``count`` windows of n control tokens with at least two positions holding candidates.

    With ``text_from`` (a masked LM's tokenizer) the windows are cut from the texts that masked LM
    reads: its windows of n tokens (the same cut as :func:`corpus.windows` gives it for this seed)
    are decoded and re-encoded with the control's ``tokenizer``, and the first n control tokens
    of each are kept (a window that re-encodes to fewer than n tokens is dropped). So the control
    sees the masked LMs' text, up to the last words where its tokenizer splits more finely.
    Without it, the control cuts its own windows of n of its tokens from the corpus."""
    from .. import corpus

    if text_from is None:
        win = corpus.windows(tokenizer, source, n, 2 * count, seed)
    else:
        texts = [vocabulary.decode(text_from, w) for w in corpus.windows(text_from, source, n, 2 * count, seed)]
        enc = [e[:n] for e in vocabulary.encode_many(tokenizer, texts) if len(e) >= n]
        if not enc:
            raise ValueError(f"no window of corpus {source!r} re-encodes to {n} tokens of the control")
        win = torch.tensor(enc, dtype=torch.long)
    win = torch.unique(win, dim=0)                          # sorted, no repeats
    keep = win[vocab.contains(win).sum(1) >= 2]
    keep = keep[torch.randperm(len(keep), generator=torch.Generator().manual_seed(seed))[:count]]
    if len(keep) == 0:
        raise ValueError(f"no window of corpus {source!r} holds two candidate tokens")
    return keep


def control_info(described: list[dict]) -> dict | None:
    """The description of the joint-model control among the models that ran, or None."""
    return next((d for d in described if d.get("kind") == "causal"), None)
