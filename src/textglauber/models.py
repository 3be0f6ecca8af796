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
with one message that names the model and the fix, before any compute. One that is there but is
not what it is used as (a folder with no model in it, a masked LM where the causal control is
wanted, a config.json whose sizes do not fit the weights) raises :class:`ModelMismatchError`,
found from config.json, the file names and the safetensors headers alone, without reading any
weights (:func:`folder_problems`; the build's pre-flight runs :func:`check_models` on every model a
profile names, in the role its chapter gives it).

The scorer (:class:`MaskedLMScorer`) follows mlm-scoring: one encoder pass over the
whole batch, then the LM head only on the rows being scored and only on the columns
of the allowed vocabulary, so the logits are B x |A|, never B x n x V.
"""
from __future__ import annotations

import functools
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from .paths import local_path
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


def _is_repo_id(repo: str) -> bool:
    """Whether ``repo`` is spelled as a hub id (``name`` or ``owner/name``), not a path."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo)
        return True
    except HFValidationError:
        return False


def resolve(name: str) -> ModelSource:
    """Find a model's files without loading it; raise one clear error if impossible."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a model name must be a non-empty string, got {name!r}")
    if name.startswith("tiny-"):
        from . import tiny

        return ModelSource(name=name, path=str(tiny.build(name)), is_hub=False)
    if name.startswith("trained:"):
        from .paths import models_root

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
    if not _is_repo_id(repo):
        from .paths import standins_root

        fix = (" Fix: python -m textglauber.standins  (./run_all.sh --profile standin builds them first)"
               if local.is_relative_to(standins_root()) else "")
        raise ModelUnavailableError(
            f"model {name!r}: no such local directory ({local}), and the name is not a Hugging Face hub id either.{fix}")
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


# --------------------------------------------------------------------------- what a folder holds
class ModelMismatchError(ModelUnavailableError):
    """The named model is there, but it is not what the profile uses it as (no model at all, the
    wrong kind of model, or a config.json that does not fit its weights)."""


ROLES = {"mlm": "a masked LM", "causal": "a causal LM", "sentence": "a sentence-transformers model",
         "nli": "an NLI classifier", "classifier": "a sequence classifier"}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.*", "merges.txt", "*.model", "*.spm",
                   "*.tiktoken")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
_LAYER_NAMES = ("layer", "layers", "h", "block", "blocks")
_EMBEDDING_NAMES = ("word_embeddings", "wte", "embed_tokens", "tok_embeddings")


@dataclass(frozen=True)
class Wanted:
    """A model a chapter names, in the role it gives it (a key of ``ROLES``)."""

    name: str
    role: str
    where: str = ""          # e.g. "incompatibility control", for the message
    required: bool = True    # False: the chapter skips it when it cannot be had (on_missing_model: skip)


def wanted_models(params: dict, where: str = "", required: bool = True) -> list[Wanted]:
    """Every model a chapter's parameters name, with the role each plays there: ``mlms``,
    ``models``, ``models_`` and ``model`` entries are masked LMs, ``control`` is the kind it says
    (``causal``, else a masked LM), an ``embedder: sentence:NAME`` is a sentence-transformers model,
    ``topic_scorer`` is ``nli:NAME`` (an NLI classifier) or ``embedding:NAME`` (a sentence model)."""
    from .params import MODEL_KEYS

    out = []

    def add(name, role, key):
        out.append(Wanted(name, role, f"{where} {key}".strip(), required))

    def from_string(s: str, role: str, key: str):
        if s.startswith("nli:"):
            add(s[4:], "nli", key)
        elif s.startswith(("embedding:", "sentence:")):
            add(s.split(":", 1)[1], "sentence", key)
        elif s:
            add(s, role, key)

    for key, val in params.items():
        if key not in MODEL_KEYS:
            continue
        role = "classifier" if key == "classifier" else "mlm"
        for it in (val if isinstance(val, list) else [val]):
            if isinstance(it, dict) and "name" in it:
                add(it["name"], "causal" if it.get("kind") == "causal" else role, key)   # as rectangle.py reads kind
                emb = str(it.get("embedder", ""))
                if emb.startswith("sentence:"):
                    add(emb.split(":", 1)[1], "sentence", f"{key} embedder")
            elif isinstance(it, str):
                from_string(it, role, key)
    return out


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


def _gguf_architecture(path: Path) -> str | None:
    """``general.architecture`` from a GGUF file's header (the key-value section only)."""
    import struct

    fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def string(f):
        (n,) = struct.unpack("<Q", f.read(8))
        return f.read(n).decode("utf-8", "replace")

    def skip(f, vtype):
        if vtype in fixed:
            f.seek(fixed[vtype], 1)
        elif vtype == 8:
            (n,) = struct.unpack("<Q", f.read(8))
            f.seek(n, 1)
        elif vtype == 9:
            itype, count = struct.unpack("<IQ", f.read(12))
            if itype in fixed:
                f.seek(fixed[itype] * count, 1)
            else:
                for _ in range(count):
                    skip(f, itype)
        else:
            raise ValueError(f"unknown GGUF value type {vtype}")

    try:
        with open(path, "rb") as f:
            magic, version = f.read(4), struct.unpack("<I", f.read(4))[0]
            if magic != b"GGUF" or version < 2:
                return None
            _, n_kv = struct.unpack("<QQ", f.read(16))
            for _ in range(min(n_kv, 256)):
                key = string(f)
                (vtype,) = struct.unpack("<I", f.read(4))
                if key == "general.architecture" and vtype == 8:
                    return string(f)
                skip(f, vtype)
    except (OSError, ValueError, struct.error):
        return None
    return None


def _safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Tensor shapes from a safetensors file's header (8-byte length, then JSON); no tensor data is
    read. Raises ValueError for a file that is not safetensors or is cut short."""
    import json
    import struct

    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{path.name} is not a safetensors file (it has {size} bytes)")
        (n,) = struct.unpack("<Q", head)
        if n > min(size - 8, 100 * 2**20):
            raise ValueError(f"{path.name} is not a safetensors file (its header length is {n} bytes)")
        try:
            header = json.loads(f.read(n))
        except ValueError:
            raise ValueError(f"{path.name} is not a safetensors file (its header is not JSON)") from None
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    end = max((int(v["data_offsets"][1]) for v in tensors.values()), default=0)
    if 8 + n + end > size:
        raise ValueError(f"{path.name} is cut short: its header needs {8 + n + end} bytes, the file has {size}")
    return {k: tuple(int(d) for d in v["shape"]) for k, v in tensors.items()}


def _weight_shapes(folder: Path) -> tuple[dict[str, tuple[int, ...]], str] | None:
    """All tensor shapes of a folder's safetensors weights and the file(s) they come from, or None
    where its weights are not safetensors. Raises ValueError for a broken file or a missing shard."""
    import json

    index = folder / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(json.loads(index.read_text()).get("weight_map", {}).values()))
        missing = [f for f in files if not (folder / f).is_file()]
        if missing:
            raise ValueError(f"model.safetensors.index.json lists {len(missing)} shard(s) that are not there "
                             f"({', '.join(missing[:3])})")
        where = f"the {len(files)} shards of model.safetensors.index.json"
    elif (folder / "model.safetensors").is_file():
        files, where = ["model.safetensors"], "model.safetensors"
    else:
        return None
    shapes = {}
    for f in files:
        shapes.update(_safetensors_shapes(folder / f))
    return shapes, where


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
        if len(parts) < 2 or parts[-1] != "weight" or parts[-2] not in _EMBEDDING_NAMES or len(shape) != 2:
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
    import json

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
    config.json, the file names and the safetensors headers; no weights are read. Empty if nothing
    is wrong, or where the files are not here to look at (a hub model that is not cached)."""
    import json

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
    if missing and not (src.is_hub and _hub_reachable()):    # a hub model downloads what the cache lacks
        problems += missing
    try:
        found = _weight_shapes(folder)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return problems + [f"its weights cannot be read: {exc}"]
    if found is not None:
        mism = _shape_problems(cfg, src.model_class, *found)
        if mism:
            problems.append(f"its config.json does not match its weights: {'; '.join(mism)}")
    return problems


def _gguf_problems(path: Path, role: str) -> list[str]:
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    if not path.is_file():
        return [f"{path.parent} has no {path.name} ({_listing(path.parent)})"]
    arch = _gguf_architecture(path)
    if arch is None:
        return [f"{path} is not a GGUF file that names its architecture"]
    causal = arch.replace("-", "_") in _mapping_names()["causal"][0] or (
        arch in GGUF_CONFIG_MAPPING and arch not in ("general", "tokenizer", "t5", "umt5"))
    if role == "causal" and causal:
        return []
    return [f"it is {'a causal LM' if causal else 'a model'} in GGUF ({arch}, {path.name})"]


def check_models(wanted: list[Wanted]) -> None:
    """Resolve every wanted model and check that its files are what its role needs (cheap: see
    :func:`folder_problems`). One line per problem: a model that cannot be had (only where it is
    ``required``), or one that is there but is not a model of that kind."""
    roles: dict[tuple[str, str], list[Wanted]] = {}
    for w in wanted:
        roles.setdefault((w.name, w.role), []).append(w)
    sources: dict[str, ModelSource | Exception] = {}
    problems, mismatched = [], False
    for (name, role), ws in roles.items():
        if name not in sources:
            try:
                sources[name] = resolve(name)
            except (ModelUnavailableError, ValueError) as exc:
                sources[name] = exc
                if any(v.required for v in wanted if v.name == name):
                    problems.append(str(exc))
        src = sources[name]
        if isinstance(src, Exception):
            continue
        found = folder_problems(src, role)
        if found:
            mismatched = True
            places = ", ".join(dict.fromkeys(w.where for w in ws if w.where))
            problems.append(f"model {name!r}{f' ({places})' if places else ''} should be {ROLES[role]}, "
                            f"but {'; '.join(found)}")
    if problems:
        raise (ModelMismatchError if mismatched else ModelUnavailableError)("\n".join(problems))


def config_positions(cfg: dict) -> int | None:
    """The longest input a config's model accepts, special tokens included (as :func:`_max_positions`
    reads it from a loaded model), or None when the config does not say."""
    mp = cfg.get("max_position_embeddings") or cfg.get("n_positions")
    if not isinstance(mp, int) or mp <= 0:
        return None
    return mp - 2 if cfg.get("model_type") in ("roberta", "xlm-roberta", "camembert", "longformer") else mp


def length_problems(wanted: list[Wanted], longest: int, label: str) -> list[str]:
    """One line per masked or causal LM among ``wanted`` whose config cannot take ``longest`` content
    tokens plus two special tokens (the frame of every model here is at most two); read from
    config.json alone. Models that cannot be resolved are left to :func:`check_models`."""
    import json

    out = []
    for name in dict.fromkeys(w.name for w in wanted if w.role in ("mlm", "causal")):
        try:
            folder = model_folder(resolve(name))
            cfg = json.loads((folder / "config.json").read_text()) if folder else None
        except (ModelUnavailableError, ValueError, OSError):
            continue
        mp = config_positions(cfg) if cfg else None
        if mp is not None and longest + 2 > mp:
            out.append(f"{label} = {longest}: model {name!r} takes at most {mp} positions, so at most {mp - 2} "
                       "tokens with its special tokens")
    return out


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
                  key=lambda m: (not any(f".{e}." in f".{m[0]}" for e in _EMBEDDING_NAMES), m[0]))
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
