"""The scorers every chapter calls: :class:`MaskedLMScorer` (the conditionals of a masked LM over the
allowed vocabulary) and :class:`CausalLMScorer` (sequence log-probabilities of the causal control).

The masked scorer follows mlm-scoring: one encoder pass over the whole batch, then the LM head only
on the rows being scored and only on the columns of the allowed vocabulary, so the logits are
B x |A|, never B x n x V."""
from __future__ import annotations

import json
from collections import OrderedDict
from typing import Callable

import torch
import torch.nn.functional as F

from ..device import SCORE_DTYPE
from ..profile import ModelSpec
from ..vocabulary import AllowedVocab, allowed_vocabulary
from .loading import LoadedModel, load


def head_parts(model) -> tuple[torch.nn.Module, Callable, torch.nn.Linear]:
    """(encoder, transform, decoder) of a masked-LM so the head runs on chosen rows only."""
    mt = model.config.model_type
    if mt in ("bert", "roformer", "megatron-bert"):
        p = model.cls.predictions
        return model.base_model, p.transform, p.decoder
    if mt == "albert":
        p = model.predictions
        return model.base_model, lambda h: p.LayerNorm(p.activation(p.dense(h))), p.decoder
    if mt in ("roberta", "xlm-roberta", "camembert", "data2vec-text"):
        p = model.lm_head
        return model.base_model, lambda h: p.layer_norm(F.gelu(p.dense(h))), p.decoder
    if mt == "distilbert":
        return (model.base_model,
                lambda h: model.vocab_layer_norm(model.activation(model.vocab_transform(h))),
                model.vocab_projector)
    if mt == "modernbert":
        return model.base_model, model.head, model.decoder
    if mt == "electra":
        return model.base_model, model.generator_predictions, model.generator_lm_head
    raise NotImplementedError(
        f"model type {mt!r} has no split head here; add it to textglauber.models.scorers.head_parts")


def _row_pruned_layers(model):
    """(embeddings, layers) when the encoder is a stack of BERT-style layers (query/key/value
    self-attention, a residual output block, an intermediate and an output block) with absolute
    positions; None otherwise. For those, the last layer can be run for the masked rows only."""
    if model.config.model_type not in ("bert", "roberta", "xlm-roberta", "camembert", "data2vec-text"):
        return None                 # others add steps between embeddings and layers (e.g. ELECTRA's projection)
    base = model.base_model
    emb, enc = getattr(base, "embeddings", None), getattr(base, "encoder", None)
    layers = getattr(enc, "layer", None)
    if emb is None or layers is None or len(layers) == 0:
        return None
    last = layers[-1]
    sa = getattr(getattr(last, "attention", None), "self", None)
    if not all(hasattr(sa, a) for a in ("query", "key", "value", "attention_head_size")):
        return None
    if not (hasattr(last.attention, "output") and hasattr(last, "intermediate") and hasattr(last, "output")):
        return None
    if getattr(model.config, "position_embedding_type", None) not in (None, "absolute"):
        return None
    if getattr(model.config, "is_decoder", False):
        return None
    return emb, layers


def _last_layer_rows(layer, h: torch.Tensor, rows: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """The last encoder layer's output at one position per sequence: keys and values over every
    token, but the query, attention output and feed-forward block only for the chosen row."""
    sa = layer.attention.self
    b, L, H = h.shape
    d = sa.attention_head_size
    heads = H // d
    x = h[rows, pos]                                                     # (B, H)
    q = sa.query(x).view(b, heads, 1, d)
    k = sa.key(h).view(b, L, heads, d).transpose(1, 2)
    v = sa.value(h).view(b, L, heads, d).transpose(1, 2)
    ctx = F.scaled_dot_product_attention(q, k, v, scale=getattr(sa, "scaling", d ** -0.5)).reshape(b, H)
    a = layer.attention.output(ctx, x)
    return layer.output(layer.intermediate(a), a)


class MaskedLMScorer:
    """Scores s_i(a | x_{-i}) over the allowed vocabulary for a batch of (state, site) pairs.

    ``states`` are content token ids (B, n) without special tokens; ``sites`` (B,) index
    into the content. One encoder pass serves the whole batch; for BERT-style encoders the last
    layer runs its query, attention output and feed-forward block on the B masked rows only
    (``prune_last_layer``), and the head runs on B rows and |A| columns. Scores are float32
    whatever the weights' dtype.

    ``compile`` (False, True or a ``torch.compile`` mode such as ``"max-autotune"``) compiles the
    pass from masked ids to scores. It fuses the small operations between the matrix multiplies
    and removes per-operation overhead (at n = 20 in the CPU benchmark: -8% to +50%, most at
    batch 1 of the small models; -5% to +16% for BERT-base) but costs tens of seconds per new
    input shape, so it pays only for long runs at one (batch, n) and is off by default; scores
    agree with the eager pass to float32 rounding, not bit for bit.
    """

    def __init__(self, lm: LoadedModel, vocab: AllowedVocab, prune_last_layer: bool = True,
                 compile: bool | str = False):
        if lm.kind != "mlm":
            raise ValueError(f"{lm.name} is a {lm.kind} model; the scorer needs a masked LM")
        if vocab.size == 0:
            raise ValueError("the allowed vocabulary is empty")
        self.lm, self.vocab = lm, vocab
        self.encoder, self.transform, decoder = head_parts(lm.model)
        ids = vocab.ids.to(lm.device)
        self._weight = decoder.weight.detach()[ids].to(SCORE_DTYPE)           # (|A|, H')
        bias = decoder.bias if decoder.bias is not None else None
        self._bias = None if bias is None else bias.detach()[ids].to(SCORE_DTYPE)
        self._prefix = torch.tensor(lm.prefix_ids, dtype=torch.long, device=lm.device)
        self._suffix = torch.tensor(lm.suffix_ids, dtype=torch.long, device=lm.device)
        self.mask_id = lm.tokenizer.mask_token_id
        self._pruned = _row_pruned_layers(lm.model) if prune_last_layer else None
        if compile not in (False, True) and not isinstance(compile, str):
            raise ValueError(f"compile must be False, True or a torch.compile mode name, got {compile!r}")
        self._forward = self._masked_scores
        if compile:
            self._forward = torch.compile(self._masked_scores, mode=None if compile is True else compile)

    @property
    def max_length(self) -> int:
        return self.lm.max_content_length

    def frame(self, states: torch.Tensor) -> torch.Tensor:
        """Content ids (B, n) -> model input ids (B, L) with the special tokens."""
        b = states.shape[0]
        parts = [self._prefix.expand(b, -1), states.to(self.lm.device), self._suffix.expand(b, -1)]
        return torch.cat(parts, dim=1)

    def _masked(self, states: torch.Tensor, sites: torch.Tensor):
        """Model input ids with each row's site masked, and the (row, position) of each mask."""
        ids = self.frame(states)
        rows = torch.arange(ids.shape[0], device=ids.device)
        pos = sites.to(ids.device) + len(self.lm.prefix_ids)
        ids[rows, pos] = self.mask_id
        return ids, rows, pos

    def _hidden(self, ids: torch.Tensor, rows: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Final hidden rows (B, H) at the masked positions: one encoder pass."""
        if self._pruned is not None:
            emb, layers = self._pruned
            h = emb(input_ids=ids)
            for layer in layers[:-1]:
                h = layer(h)
            return _last_layer_rows(layers[-1], h, rows, pos)
        out = self.encoder(input_ids=ids)
        return out[0][rows, pos]

    def head(self, rows: torch.Tensor) -> torch.Tensor:
        t = self.transform(rows).to(SCORE_DTYPE)
        return F.linear(t, self._weight, self._bias)

    def _masked_scores(self, ids: torch.Tensor, rows: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        return self.head(self._hidden(ids, rows, pos))

    @torch.no_grad()
    def scores(self, states: torch.Tensor, sites: torch.Tensor) -> torch.Tensor:
        return self._forward(*self._masked(states, sites))


class CausalLMScorer:
    """Sequence log-probabilities of a causal LM, the joint-model control."""

    def __init__(self, lm: LoadedModel):
        if lm.kind != "causal":
            raise ValueError(f"{lm.name} is a {lm.kind} model; the control needs a causal LM")
        if not lm.prefix_ids:
            raise ValueError(f"{lm.name} has neither a BOS nor an EOS token to start a sequence with")
        self.lm = lm
        self._prefix = torch.tensor(lm.prefix_ids, dtype=torch.long, device=lm.device)

    @property
    def max_length(self) -> int:
        return self.lm.max_content_length

    @torch.no_grad()
    def next_token_logits(self, states: torch.Tensor, sites: torch.Tensor) -> torch.Tensor:
        """Logits over the full vocabulary for the token at ``sites`` given what precedes it."""
        ids = torch.cat([self._prefix.expand(states.shape[0], -1), states.to(self.lm.device)], dim=1)
        hidden = self.lm.model.base_model(input_ids=ids)[0]          # final norm included
        rows = torch.arange(ids.shape[0], device=ids.device)
        picked = hidden[rows, sites.to(ids.device) + len(self.lm.prefix_ids) - 1]
        return self.lm.model.get_output_embeddings()(picked).to(SCORE_DTYPE).cpu()

    @torch.no_grad()
    def sequence_logprob(self, states: torch.Tensor) -> torch.Tensor:
        """log p(x_1..x_n | start) per row, float64 sums of float32 log-probabilities."""
        ids = torch.cat([self._prefix.expand(states.shape[0], -1), states.to(self.lm.device)], dim=1)
        logits = self.lm.model(input_ids=ids).logits[:, len(self.lm.prefix_ids) - 1:-1]
        logp = torch.log_softmax(logits.to(SCORE_DTYPE), dim=-1)
        tok = logp.gather(-1, states.to(ids.device).unsqueeze(-1)).squeeze(-1)
        return tok.double().sum(dim=1).cpu()

    @torch.no_grad()
    def candidate_logprobs(self, states: torch.Tensor, sites: torch.Tensor, candidates: torch.Tensor,
                           max_positions: int = 4096) -> torch.Tensor:
        """log p(x with a at the site) for every candidate a, less log p(tokens before the site).

        (B, K) float64. The left-out term is the same for every candidate of a row, so any ratio
        between candidates is that of the full sequence probabilities. The tokens before the
        site run once per row (their key/value cache is repeated for the K candidates); rows
        are grouped by site and chunked so that at most ``max_positions`` suffix positions
        (each with a full-vocabulary log-softmax) are held at once.
        """
        states, sites = states.cpu(), sites.cpu()
        b, n = states.shape
        cand = candidates.cpu().long()
        k = len(cand)
        out = torch.empty(b, k, dtype=torch.float64)
        dev = self.lm.device
        for site in sites.unique().tolist():
            rows = (sites == site).nonzero().squeeze(1)
            step = max(1, max_positions // (k * (n - site)))
            for lo in range(0, len(rows), step):
                r = rows[lo:lo + step]
                g = len(r)
                x = states[r].to(dev)
                prefix = torch.cat([self._prefix.expand(g, -1), x[:, :site]], dim=1)
                first = self.lm.model(input_ids=prefix, use_cache=site < n - 1)
                total = torch.log_softmax(first.logits[:, -1].to(SCORE_DTYPE), -1)[:, cand.to(dev)].double()
                if site < n - 1:
                    cache = first.past_key_values
                    cache.batch_repeat_interleave(k)
                    tail = x[:, site:].repeat_interleave(k, dim=0)
                    tail[:, 0] = cand.to(dev).repeat(g)
                    logits = self.lm.model(input_ids=tail, past_key_values=cache).logits[:, :-1]
                    logp = torch.log_softmax(logits.to(SCORE_DTYPE), -1)
                    rest = logp.gather(-1, tail[:, 1:].unsqueeze(-1)).squeeze(-1).double().sum(1)
                    total = total + rest.view(g, k)
                out[r] = total.cpu()
        return out


def open_mlm(spec, device: str | None = "auto", dtype: str | None = "auto"):
    """A chapter's masked LM from its model entry: (LoadedModel, MaskedLMScorer).

    ``spec`` (a :class:`textglauber.profile.ModelSpec`, or a mapping read as one) holds ``name`` and
    optionally ``whole_words``, ``alphabetic`` or ``tokens`` for the allowed vocabulary."""
    entry = ModelSpec.part_of(spec)
    lm = load(entry.name, kind="mlm", device=device, dtype=dtype)
    try:
        vocab = allowed_vocabulary(lm.tokenizer, whole_words=entry.whole_words, alphabetic=entry.alphabetic,
                                   tokens=entry.tokens)
    except ValueError as exc:          # name the model: a chapter may open several
        raise ValueError(f"model {entry.name!r}: {exc} (its allowed tokens must be tokens of its own vocabulary; "
                         "the build's pre-flight names the parameter that lists them)") from None
    return lm, MaskedLMScorer(lm, vocab)


KEPT_MODELS = 2
"""Models :func:`kept_mlm` holds in one process at once (the least recently used goes first)."""

_KEPT: OrderedDict = OrderedDict()


def kept_mlm(spec: dict, device: str | None = "auto", dtype: str | None = "auto"):
    """:func:`open_mlm`, loaded once per process for the same (spec, device, dtype): a worker that
    runs several units of one model loads it once, and a chapter that opens its model here shares
    it with the units it runs in its own process (:mod:`textglauber.scheduler`)."""
    entry = ModelSpec.part_of(spec)          # a mapping and the typed entry it validates to share one key
    key = (json.dumps({k: getattr(entry, k) for k in ModelSpec.model_fields}, sort_keys=True), device, dtype)
    if key in _KEPT:
        _KEPT.move_to_end(key)
        return _KEPT[key]
    opened = open_mlm(entry, device, dtype)
    _KEPT[key] = opened
    while len(_KEPT) > KEPT_MODELS:
        _KEPT.popitem(last=False)
    return opened
