"""What a model name resolves to (:class:`ModelSource`) and the two errors a model that cannot
serve raises. Imports nothing of the project."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


class ModelUnavailableError(RuntimeError):
    """The named model is neither on disk nor reachable."""


class ModelMismatchError(ModelUnavailableError):
    """The named model is there, but it is not what the profile uses it as (no model at all, the
    wrong kind of model, or a config.json that does not fit its weights)."""


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
