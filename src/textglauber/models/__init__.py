"""Masked and causal language models: naming them, checking their files, loading them, and the
scorers every chapter calls.

A model is named by one string:

- a Hugging Face hub id (``bert-base-uncased``), used from the local cache when
  offline and downloaded once when the hub is reachable;
- a local directory that ``from_pretrained`` understands;
- ``tiny-mlm`` / ``tiny-causal`` (optionally ``tiny-mlm:seed=1``): tiny deterministic
  models built on the fly (:mod:`textglauber.models.tiny`);
- ``package:NAME``: a pretrained model that ships inside an installed Python package
  (:mod:`textglauber.models.packaged`);
- ``trained:RUN`` or ``trained:RUN@CHECKPOINT``: a model this project trained
  (:mod:`textglauber.train_mlm`).

Whatever the source, a model that cannot be had raises :class:`ModelUnavailableError`
with one message that names the model and the fix, before any compute. One that is there but is
not what it is used as (a folder with no model in it, a masked LM where the causal control is
wanted, a config.json whose sizes do not fit the weights) raises :class:`ModelMismatchError`,
found from config.json, the file names and the safetensors headers alone, without reading any
weights (:func:`folder_problems`; the build's pre-flight runs :func:`check_models` on every model a
profile names, at any depth of its parameters, in the role its chapter gives it, and
:func:`token_problems` on the tokens named for each, reading its tokenizer alone).

The parts, each importing only those above it:

- ``source``     :class:`ModelSource` and the two errors
- ``packaged``, ``tiny``  models from installed packages, and tiny ones built here
- ``lookup``     :func:`resolve`: from a name to its files
- ``headers``, ``folders``  what a model's files are, read without loading them
- ``loading``    :func:`load`, :func:`tokenizer`, :class:`LoadedModel`
- ``scorers``    :class:`MaskedLMScorer`, :class:`CausalLMScorer`, :func:`open_mlm`, :func:`kept_mlm`
- ``preflight``  :func:`check_models`, :func:`length_problems`, :func:`token_problems`, :func:`wanted_models`,
  :func:`or_skip`

``loading`` and ``scorers`` import torch; they load when one of their names is first asked of the
package, so what only names, finds and checks models imports no torch.
"""
from .folders import ROLES, folder_problems, model_folder, model_kind
from .lookup import resolve
from .preflight import (Wanted, check_available, check_models, config_positions, length_problems, or_skip,
                        token_problems, wanted_models)
from .source import ModelMismatchError, ModelSource, ModelUnavailableError

_WITH_TORCH = {"loading": ("CAUSAL_KINDS", "MLM_KINDS", "LoadedModel", "load", "loading_report", "special_frame",
                           "tokenizer"),
               "scorers": ("CausalLMScorer", "MaskedLMScorer", "head_parts", "kept_mlm", "open_mlm")}


def __getattr__(name: str):
    """``loading`` and ``scorers`` import torch, so they load on first use: naming, finding and
    checking models (what a build asks before it decides to run anything) imports none of it."""
    part = next((p for p, names in _WITH_TORCH.items() if name in names), None)
    if part is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import loading, scorers

    return getattr({"loading": loading, "scorers": scorers}[part], name)

__all__ = ["CAUSAL_KINDS", "MLM_KINDS", "ROLES", "CausalLMScorer", "LoadedModel", "MaskedLMScorer",
           "ModelMismatchError", "ModelSource", "ModelUnavailableError", "Wanted", "check_available",
           "check_models", "config_positions", "folder_problems", "head_parts", "length_problems", "load",
           "kept_mlm", "loading_report", "model_folder", "model_kind", "open_mlm", "or_skip", "resolve", "special_frame",
           "token_problems", "tokenizer", "wanted_models"]
