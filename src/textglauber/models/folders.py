"""What a model's folder holds, found from config.json, the file names and the weights' headers, without
reading any weights: what it can be loaded as (:func:`model_kind`) and why it cannot serve in a role
(:func:`folder_problems`)."""
from __future__ import annotations

import functools
import json
from pathlib import Path

from .. import hub
from .headers import gguf_architecture, weight_shapes, weights_problem
from .source import ModelSource


ROLES = {"mlm": "a masked LM", "causal": "a causal LM", "sentence": "a sentence-transformers model",
         "nli": "an NLI classifier", "classifier": "a sequence classifier"}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.*", "merges.txt", "*.model", "*.spm",
                   "*.tiktoken")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
_LAYER_NAMES = ("layer", "layers", "h", "block", "blocks")
EMBEDDING_NAMES = ("word_embeddings", "wte", "embed_tokens", "tok_embeddings")
UNREADABLE = "its weights cannot be read: "     # begins a problem of the files themselves, whatever the role


def model_folder(src: ModelSource) -> Path | None:
    """The folder that holds a resolved model's files: a local one, or a hub model's snapshot in
    the local cache; None for a hub model that is not cached (it would be downloaded)."""
    if not src.is_hub:
        return Path(src.path)
    from huggingface_hub import try_to_load_from_cache

    hit = try_to_load_from_cache(src.path, "config.json", revision=src.revision)
    return Path(hit).parent if isinstance(hit, str) else None


def _listing(folder: Path, limit: int = 8) -> str:
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir()) if folder.is_dir() else []
    if not names:
        return "it is empty"
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return "it holds " + ", ".join(names[:limit]) + more


@functools.lru_cache(maxsize=1)
def _mapping_names():
    from transformers.models.auto import modeling_auto as ma

    def classes(m):
        return {c for v in m.values() for c in ((v,) if isinstance(v, str) else v)}

    return {"mlm": (ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES, classes(ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES)),
            "causal": (ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, classes(ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)),
            "classifier": (ma.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
                           classes(ma.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES)),
            "base": (ma.MODEL_MAPPING_NAMES, classes(ma.MODEL_MAPPING_NAMES))}


def _entailment(cfg: dict) -> bool:
    return "entailment" in {str(k).lower() for k in (cfg.get("label2id") or {})}


def model_kind(cfg: dict, model_class: str | None = None) -> tuple[set[str], str]:
    """What a config.json can be loaded as, from transformers' auto mappings: the set of roles
    (``mlm``, ``causal``, ``classifier``, ``nli``; ``base`` for a bare encoder without a head) and a
    few words that say what it is. The declared class (``architectures``, or ``model_class`` where a
    package names it) decides; a class transformers does not know falls back on ``model_type``."""
    maps = _mapping_names()
    archs = [model_class] if model_class else [a for a in (cfg.get("architectures") or []) if isinstance(a, str)]
    for arch in archs:
        caps = {role for role, (_, names) in maps.items() if arch in names}
        if caps:
            break
    else:
        arch, caps, mt = None, set(), cfg.get("model_type")
        in_mlm, in_causal = mt in maps["mlm"][0], mt in maps["causal"][0]
        if in_mlm and in_causal:
            caps.add("causal" if cfg.get("is_decoder") else "mlm")   # e.g. BERT: BertLMHeadModel needs is_decoder
        elif in_mlm or in_causal:
            caps.add("mlm" if in_mlm else "causal")
        if mt in maps["classifier"][0] and _entailment(cfg):
            caps.add("classifier")
        arch = f"{archs[0]}, model_type {mt!r}" if archs else f"model_type {mt!r}"
    if "classifier" in caps and _entailment(cfg):
        caps.add("nli")
    for role, words in (("mlm", "a masked LM"), ("causal", "a causal LM"), ("nli", "an NLI classifier"),
                        ("classifier", "a sequence classifier"), ("base", "a bare model without an LM head")):
        if role in caps:
            return caps, f"{words} ({arch})"
    return caps, f"a model transformers cannot load as a masked or causal LM ({arch})"


def _config_object(cfg: dict, model_class: str | None):
    """The transformers config for a config.json (its attribute names: GPT-2's n_layer is read as
    num_hidden_layers), or None where none applies."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    mt = cfg.get("model_type")
    try:
        if mt in CONFIG_MAPPING:
            return CONFIG_MAPPING[mt].from_dict(dict(cfg))
        if model_class and hasattr(transformers, model_class):
            return getattr(transformers, model_class).config_class.from_dict(dict(cfg))
    except Exception:           # noqa: BLE001 - a config the class rejects shows up when it loads
        return None
    return None


def _shape_problems(cfg: dict, model_class: str | None, shapes: dict[str, tuple[int, ...]], where: str) -> list[str]:
    """Where config.json's sizes disagree with the weights': the word-embedding matrix against
    (vocab_size, hidden_size), and the layer indices against num_hidden_layers."""
    conf = _config_object(cfg, model_class)

    def num(attr):
        v = getattr(conf, attr, None) if conf is not None else cfg.get(attr)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    problems = []
    vocab, hidden = num("vocab_size"), num("hidden_size")
    widths = {w for w in (hidden, num("embedding_size"), num("d_model"), num("word_embed_proj_dim")) if w}
    for key, shape in sorted(shapes.items()):
        parts = key.split(".")
        if len(parts) < 2 or parts[-1] != "weight" or parts[-2] not in EMBEDDING_NAMES or len(shape) != 2:
            continue
        if vocab is not None and shape[0] != vocab:
            problems.append(f"vocab_size is {vocab}, but {key} in {where} has {shape[0]} rows")
        if hidden is not None and shape[1] not in widths:
            problems.append(f"hidden_size is {hidden}, but {key} in {where} is {shape[0]} x {shape[1]}")
        break
    layers = num("num_hidden_layers")
    stacks: dict[str, set[int]] = {}
    for key in shapes:
        parts = key.split(".")
        for i in range(len(parts) - 1):
            if parts[i] in _LAYER_NAMES and parts[i + 1].isdigit():
                stacks.setdefault(".".join(parts[:i + 1]), set()).add(int(parts[i + 1]))
                break
    if layers is not None and len(stacks) == 1:       # one stack of layers (not encoder + decoder)
        (prefix, idx), = stacks.items()
        if idx != set(range(layers)):
            problems.append(f"num_hidden_layers is {layers}, but {where} holds {len(idx)} layers under {prefix}")
    return problems


def _files_problems(folder: Path, src: ModelSource) -> list[str]:
    """Weights and tokenizer files that a config.json folder lacks."""
    problems = []
    if not any((folder / f).is_file() for f in WEIGHT_FILES):
        problems.append(f"{folder} has a config.json but no weights (none of {', '.join(WEIGHT_FILES)}; "
                        f"{_listing(folder)})")
    if src.tokenizer_factory is None and not any(p.is_file() for f in TOKENIZER_FILES for p in folder.glob(f)):
        problems.append(f"{folder} has no tokenizer files (none of {', '.join(TOKENIZER_FILES)}; {_listing(folder)})")
    return problems


def _sentence_folder(folder: Path) -> tuple[Path | None, str]:
    """The transformer module's folder inside a sentence-transformers folder, or None and why not."""
    modules = folder / "modules.json"
    if not modules.is_file():
        return None, "no modules.json"
    try:
        entries = json.loads(modules.read_text())
        path = next(e.get("path", "") for e in entries if str(e.get("type", "")).rsplit(".", 1)[-1] == "Transformer")
    except (ValueError, StopIteration, AttributeError, TypeError):
        return None, "its modules.json names no Transformer module"
    return folder / path, ""


def folder_problems(src: ModelSource, role: str) -> list[str]:
    """Why the files of a resolved model cannot serve as ``role`` (a key of ``ROLES``): cheap, from
    config.json, the file names, the safetensors headers and the PyTorch zips' directories
    (:func:`weights_problem`: a file cut short is named with the fix); no weights are read. Empty if
    nothing is wrong, or where the files are not here to look at (a hub model that is not cached)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {sorted(ROLES)}, got {role!r}")
    folder = model_folder(src)
    if folder is None:
        return []
    if not folder.is_dir():
        return [f"{folder} is not a folder"]
    gguf = (src.load_kwargs.get("model") or {}).get("gguf_file")
    if role == "sentence":
        inner, why = _sentence_folder(folder)
        if inner is None:
            what = "not a model folder"
            if (folder / "config.json").is_file():
                try:
                    what = model_kind(json.loads((folder / "config.json").read_text()), src.model_class)[1]
                except ValueError:
                    pass
            return [f"{folder} is {what}, not a sentence-transformers folder ({why})"]
        folder = inner
    config = folder / "config.json"
    if not config.is_file():
        if gguf and role != "sentence":
            return _gguf_problems(folder / gguf, role)
        return [f"{folder} is not a model folder: no config.json ({_listing(folder)})"]
    try:
        cfg = json.loads(config.read_text())
        if not isinstance(cfg, dict):
            raise ValueError("not a JSON object")
    except (ValueError, UnicodeDecodeError) as exc:
        return [f"{config} is not a readable config ({exc})"]
    problems = []
    if role != "sentence":
        if not (cfg.get("model_type") or cfg.get("architectures") or src.model_class):
            return [f"{config} names neither model_type nor architectures: it says no kind of model"]
        caps, what = model_kind(cfg, src.model_class)
        if role not in caps:
            if (folder / "modules.json").is_file():
                what += " in a sentence-transformers folder"
            if role == "nli" and "classifier" in caps:
                labels = ", ".join(map(str, (cfg.get("label2id") or {}))) or "none"
                what += f" whose labels ({labels}) have no 'entailment'"
            problems.append(f"it is {what}")
    missing = _files_problems(folder, src)
    if missing and not (src.is_hub and hub.reachable()):    # a hub model downloads what the cache lacks
        problems += missing
    broken = weights_problem(folder)
    if broken:
        return problems + [UNREADABLE + broken]
    try:
        found = weight_shapes(folder)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return problems + [UNREADABLE + str(exc)]
    if found is not None:
        mism = _shape_problems(cfg, src.model_class, *found)
        if mism:
            problems.append(f"its config.json does not match its weights: {'; '.join(mism)}")
    return problems


def _gguf_problems(path: Path, role: str) -> list[str]:
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    if not path.is_file():
        return [f"{path.parent} has no {path.name} ({_listing(path.parent)})"]
    arch = gguf_architecture(path)
    if arch is None:
        return [f"{path} is not a GGUF file that names its architecture"]
    causal = arch.replace("-", "_") in _mapping_names()["causal"][0] or (
        arch in GGUF_CONFIG_MAPPING and arch not in ("general", "tokenizer", "t5", "umt5"))
    if role == "causal" and causal:
        return []
    return [f"it is {'a causal LM' if causal else 'a model'} in GGUF ({arch}, {path.name})"]
