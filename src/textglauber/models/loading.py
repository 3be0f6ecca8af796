"""Loading a model's tokenizer and weights in eval mode (:func:`load`, :func:`tokenizer`), refused with one
message before any weights are read where the files cannot serve, and after where the weights do not
fit their config."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import hub
from ..device import pick_device, pick_dtype
from .folders import EMBEDDING_NAMES, ROLES, folder_problems
from .lookup import resolve
from .source import ModelMismatchError, ModelSource, ModelUnavailableError


MLM_KINDS = ("mlm",)
CAUSAL_KINDS = ("causal",)


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


def special_frame(tokenizer, kind: str) -> tuple[list[int], list[int]]:
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
    if src.is_hub and hub.cached(src.path, src.revision):
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


def _key_groups(keys, limit: int = 3) -> str:
    """Parameter names, those of numbered layers folded: ``bert.encoder.layer.2.* (16)``."""
    groups: dict[str, int] = {}
    for k in keys:
        parts = k.split(".")
        cut = next((i for i, p in enumerate(parts) if p.isdigit()), None)
        g = k if cut is None or cut == len(parts) - 1 else ".".join(parts[:cut + 1]) + ".*"
        groups[g] = groups.get(g, 0) + 1
    shown = [g if n == 1 else f"{g} ({n})" for g, n in list(groups.items())[:limit]]
    return ", ".join(shown) + (f" and {len(groups) - limit} more" if len(groups) > limit else "")


def _shape(s) -> str:
    return " x ".join(str(int(d)) for d in s)


def loading_report(info: dict) -> str:
    """One line from transformers' loading info: the tensors whose shapes differ from what the
    config builds and the weights the checkpoint lacks (they would be random); empty if neither."""
    parts = []
    # the word embeddings first: their shape is (vocab_size, hidden_size), the sizes a config states
    mism = sorted(info.get("mismatched_keys") or [],
                  key=lambda m: (not any(f".{e}." in f".{m[0]}" for e in EMBEDDING_NAMES), m[0]))
    if mism:
        shown = "; ".join(f"{k}: checkpoint {_shape(a)}, config {_shape(b)}" for k, a, b in mism[:3])
        parts.append(f"{len(mism)} tensor(s) differ in shape ({shown}{'; ...' if len(mism) > 3 else ''})")
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        parts.append(f"{len(missing)} weight(s) the config asks for are not in the checkpoint and would be "
                     f"random ({_key_groups(missing)})")
    return "; ".join(parts)


def load(name: str, kind: str = "mlm", device: str | None = "auto", dtype: str | None = "auto") -> LoadedModel:
    """Load a masked (``kind="mlm"``) or causal (``kind="causal"``) LM in eval mode."""
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    if kind not in MLM_KINDS + CAUSAL_KINDS:
        raise ValueError(f"kind must be 'mlm' or 'causal', got {kind!r}")
    src = resolve(name)
    problems = folder_problems(src, kind)        # before any weights are read
    if problems:
        raise ModelMismatchError(f"model {name!r} should be {ROLES[kind]}, but {'; '.join(problems)}")
    dev = pick_device(device)
    dt = pick_dtype(dtype, dev)
    common = _load_options(src)
    cls = AutoModelForMaskedLM if kind == "mlm" else AutoModelForCausalLM
    if src.model_class:
        import transformers

        cls = getattr(transformers, src.model_class)
    try:
        tok = _tokenizer_of(src)
        # mismatched shapes come back in the loading info (and are refused below) instead of an
        # error that points at a report only the log holds
        model, info = cls.from_pretrained(src.path, dtype=dt, output_loading_info=True, ignore_mismatched_sizes=True,
                                          **common, **src.load_kwargs.get("model", {}))
    except OSError as exc:
        raise ModelUnavailableError(f"model {name!r} could not be loaded from {src.path!r}: {exc}") from exc
    except ValueError as exc:               # e.g. "Unrecognized configuration class ..."
        raise ModelMismatchError(f"model {name!r} from {src.path!r} cannot be loaded as {ROLES[kind]}: "
                                 f"{str(exc).strip().splitlines()[0]}") from exc
    report = loading_report(info)
    if report:
        raise ModelMismatchError(f"model {name!r} from {src.path!r} does not fit its config.json: {report}")
    model.to(dev).eval()
    if kind == "mlm" and tok.mask_token_id is None:
        raise ModelUnavailableError(f"model {name!r} has no mask token: it is not a masked LM")
    prefix, suffix = special_frame(tok, kind)
    return LoadedModel(name=name, kind=kind, model=model, tokenizer=tok, device=dev, dtype=dt,
                       source=src.path, revision=src.revision or getattr(model.config, "_commit_hash", None),
                       max_positions=_max_positions(model, tok), prefix_ids=prefix, suffix_ids=suffix)
