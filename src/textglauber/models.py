"""Loading masked and causal language models, and the scorer every chapter calls.

A model is named by one string:

- a Hugging Face hub id (``bert-base-uncased``), used from the local cache when
  offline and downloaded once when the hub is reachable;
- a local directory that ``from_pretrained`` understands;
- ``tiny-mlm`` / ``tiny-causal`` (optionally ``tiny-mlm:seed=1``): tiny deterministic
  models built on the fly (see :mod:`textglauber.tiny`);
- ``package:NAME``: a pretrained model that ships inside an installed Python package
  (see ``PACKAGED``).

Whatever the source, a model that cannot be had raises :class:`ModelUnavailableError`
with one message that names the model and the fix, before any compute.

The scorer (:class:`MaskedLMScorer`) follows mlm-scoring: one encoder pass over the
whole batch, then the LM head only on the rows being scored and only on the columns
of the allowed vocabulary, so the logits are B x |A|, never B x n x V.
"""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from .device import SCORE_DTYPE, pick_device, pick_dtype
from .vocabulary import AllowedVocab

MLM_KINDS = ("mlm",)
CAUSAL_KINDS = ("causal",)


class ModelUnavailableError(RuntimeError):
    """The named model is neither on disk nor reachable."""


# --------------------------------------------------------------------------- sources
@dataclass(frozen=True)
class ModelSource:
    """Where a named model's files are, resolved without loading weights."""

    name: str
    path: str            # local directory or hub id
    is_hub: bool
    revision: str | None = None
    tokenizer_factory: Callable | None = None   # for packages that ship a bare vocab
    load_kwargs: dict = field(default_factory=dict)
    model_class: str | None = None      # a transformers class name, for configs without model_type


def _packaged() -> dict[str, Callable[[], ModelSource]]:
    from . import packaged

    return packaged.REGISTRY


def _hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    host = endpoint.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0]
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _hub_cached(repo_id: str, revision: str | None = None) -> bool:
    from huggingface_hub import try_to_load_from_cache

    hit = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    return isinstance(hit, str)


def local_path(name: str) -> Path:
    """Where a local model or corpus path points. Relative paths are taken from the repository
    root, whatever the working directory (the chapters run from ``book/``, the CLI from anywhere)."""
    from .results import repo_root

    p = Path(name).expanduser()
    return (p if p.is_absolute() else repo_root() / p).resolve()


def resolve(name: str) -> ModelSource:
    """Find a model's files without loading it; raise one clear error if impossible."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a model name must be a non-empty string, got {name!r}")
    if name.startswith("tiny-"):
        from . import tiny

        return ModelSource(name=name, path=str(tiny.build(name)), is_hub=False)
    if name.startswith("trained:"):
        from .train_mlm import models_root

        run = name.split(":", 1)[1]
        run, _, sub = run.partition("@")          # trained:english@minilm/ckpt-2 names a checkpoint
        path = models_root() / run / (sub or "final")
        if not (path / "config.json").exists():
            raise ModelUnavailableError(
                f"model {name!r} has not been trained here ({path} is missing). Fix: "
                f"python -m textglauber.train_mlm --preset {run}  (./run_all.sh does this for the profiles that need it)")
        return ModelSource(name=name, path=str(path), is_hub=False, revision=_manifest_commit(path.parent))
    if name.startswith("package:"):
        registry = _packaged()
        key = name.split(":", 1)[1]
        if key not in registry:
            raise ModelUnavailableError(
                f"unknown packaged model {name!r}; known: {', '.join('package:' + k for k in sorted(registry))}")
        return registry[key]()
    local = local_path(name)
    if local.is_dir():
        return ModelSource(name=name, path=str(local), is_hub=False)
    if name.startswith((".", "/", "~")):
        raise ModelUnavailableError(f"model {name!r}: no such local directory ({local})")
    repo, _, revision = name.partition("@")
    if _hub_cached(repo, revision or None):
        return ModelSource(name=name, path=repo, is_hub=True, revision=revision or None)
    if _hub_reachable():
        return ModelSource(name=name, path=repo, is_hub=True, revision=revision or None)
    raise ModelUnavailableError(
        f"model {name!r} is not in the local Hugging Face cache and the hub cannot be reached "
        f"(no network, or HF_HUB_OFFLINE is set). Fix: run once with network access so it is "
        f"cached under HF_HOME, or pass a local directory that holds the model, or use a profile "
        f"whose models install as packages (params/offline.yaml).")


def _manifest_commit(folder: Path) -> str | None:
    import json

    for f in (folder / "manifest.json", folder.parent / "manifest.json"):
        if f.exists():
            return (json.loads(f.read_text()).get("git") or {}).get("commit")
    return None


def check_available(names: list[str]) -> None:
    """Resolve every name up front; one error that lists every missing model."""
    problems = []
    for n in names:
        try:
            resolve(n)
        except (ModelUnavailableError, ValueError) as exc:
            problems.append(str(exc))
    if problems:
        raise ModelUnavailableError("\n".join(problems))


# --------------------------------------------------------------------------- loading
@dataclass
class LoadedModel:
    name: str
    kind: str                      # "mlm" or "causal"
    model: torch.nn.Module
    tokenizer: object
    device: torch.device
    dtype: torch.dtype
    source: str
    revision: str | None
    max_positions: int             # longest input the model accepts, special tokens included
    prefix_ids: list[int]          # special tokens placed before the content
    suffix_ids: list[int]          # special tokens placed after the content

    @property
    def max_content_length(self) -> int:
        return self.max_positions - len(self.prefix_ids) - len(self.suffix_ids)

    def describe(self) -> dict:
        cfg = self.model.config
        return {"name": self.name, "kind": self.kind, "source": self.source, "revision": self.revision,
                "model_type": getattr(cfg, "model_type", None),
                "parameters": int(sum(p.numel() for p in self.model.parameters())),
                "vocab_size": int(cfg.vocab_size), "dtype": str(self.dtype).replace("torch.", ""),
                "device": str(self.device)}


def _special_frame(tokenizer, kind: str) -> tuple[list[int], list[int]]:
    """The special tokens the tokenizer wraps content in (e.g. [CLS] ... [SEP])."""
    probe = "a"
    inner = tokenizer(probe, add_special_tokens=False)["input_ids"]
    outer = tokenizer(probe, add_special_tokens=True)["input_ids"]
    prefix, suffix = [], []
    for start in range(len(outer) - len(inner) + 1):
        if outer[start:start + len(inner)] == inner:
            prefix, suffix = outer[:start], outer[start + len(inner):]
            break
    if kind == "causal":
        # a causal LM needs a start token so that the first content token has a conditional
        bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        if not prefix and bos is not None:
            prefix = [bos]
        suffix = []
    return list(prefix), list(suffix)


def _max_positions(model, tokenizer) -> int:
    cfg = model.config
    mp = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None) or 512
    if getattr(cfg, "model_type", "") in ("roberta", "xlm-roberta", "camembert", "longformer"):
        mp -= 2   # learned positions start after the padding index
    tml = getattr(tokenizer, "model_max_length", None)
    if isinstance(tml, int) and 0 < tml < 1_000_000:
        mp = min(mp, tml)
    return int(mp)


def _load_options(src: ModelSource) -> dict:
    common = dict(revision=src.revision, trust_remote_code=False)
    if src.is_hub and _hub_cached(src.path, src.revision):
        common["local_files_only"] = True
    return common


def _tokenizer_of(src: ModelSource):
    from transformers import AutoTokenizer

    if src.tokenizer_factory is not None:
        return src.tokenizer_factory()
    return AutoTokenizer.from_pretrained(src.path, **_load_options(src), **src.load_kwargs.get("tokenizer", {}))


def tokenizer(name: str):
    """A named model's tokenizer alone, without its weights (same resolution and errors as :func:`load`)."""
    src = resolve(name)
    try:
        return _tokenizer_of(src)
    except OSError as exc:
        raise ModelUnavailableError(f"the tokenizer of {name!r} could not be loaded from {src.path!r}: {exc}") from exc


def load(name: str, kind: str = "mlm", device: str | None = "auto", dtype: str | None = "auto") -> LoadedModel:
    """Load a masked (``kind="mlm"``) or causal (``kind="causal"``) LM in eval mode."""
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    if kind not in MLM_KINDS + CAUSAL_KINDS:
        raise ValueError(f"kind must be 'mlm' or 'causal', got {kind!r}")
    src = resolve(name)
    dev = pick_device(device)
    dt = pick_dtype(dtype, dev)
    common = _load_options(src)
    cls = AutoModelForMaskedLM if kind == "mlm" else AutoModelForCausalLM
    if src.model_class:
        import transformers

        cls = getattr(transformers, src.model_class)
    try:
        tok = _tokenizer_of(src)
        model = cls.from_pretrained(src.path, dtype=dt, **common, **src.load_kwargs.get("model", {}))
    except OSError as exc:
        raise ModelUnavailableError(f"model {name!r} could not be loaded from {src.path!r}: {exc}") from exc
    model.to(dev).eval()
    if kind == "mlm" and tok.mask_token_id is None:
        raise ModelUnavailableError(f"model {name!r} has no mask token: it is not a masked LM")
    prefix, suffix = _special_frame(tok, kind)
    return LoadedModel(name=name, kind=kind, model=model, tokenizer=tok, device=dev, dtype=dt,
                       source=src.path, revision=src.revision or getattr(model.config, "_commit_hash", None),
                       max_positions=_max_positions(model, tok), prefix_ids=prefix, suffix_ids=suffix)


# --------------------------------------------------------------------------- the MLM head, split
def _head_parts(model) -> tuple[torch.nn.Module, Callable, torch.nn.Linear]:
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
        f"model type {mt!r} has no split head here; add it to textglauber.models._head_parts")


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
        self.encoder, self.transform, decoder = _head_parts(lm.model)
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


def open_mlm(spec: dict, device: str | None = "auto", dtype: str | None = "auto"):
    """A chapter's masked LM from its parameter dict: (LoadedModel, MaskedLMScorer).

    ``spec`` holds ``name`` and optionally ``whole_words``, ``alphabetic`` or ``tokens`` for the
    allowed vocabulary."""
    from .vocabulary import allowed_vocabulary

    lm = load(spec["name"], kind="mlm", device=device, dtype=dtype)
    vocab = allowed_vocabulary(lm.tokenizer, whole_words=spec.get("whole_words", False),
                               alphabetic=spec.get("alphabetic", False), tokens=spec.get("tokens"))
    return lm, MaskedLMScorer(lm, vocab)


def or_skip(on_missing_model: str, notes: list[str], name: str, fn, *args, **kwargs):
    """Call ``fn``; if the model ``name`` cannot be had, either raise (``"fail"``) or append a note
    and return None (``"skip"``). The one place where a profile's missing-model policy is applied."""
    if on_missing_model not in ("skip", "fail"):
        raise ValueError("on_missing_model must be 'skip' or 'fail'")
    try:
        return fn(*args, **kwargs)
    except ModelUnavailableError as exc:
        if on_missing_model == "fail":
            raise
        notes.append(f"{name} skipped: {exc}")
        return None
