"""Whether the Hugging Face hub can be reached, whether a model is in its local cache, and whether
a name is spelled as a hub id.

This module imports nothing of the project, so that the corpora and the models both ask it."""
from __future__ import annotations

import os
import socket


def reachable(timeout: float = 3.0) -> bool:
    """False when HF_HUB_OFFLINE is set or the hub's host cannot be connected to on port 443."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    host = endpoint.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0]
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def cached(repo_id: str, revision: str | None = None) -> bool:
    """Whether the local cache holds the model's config.json."""
    from huggingface_hub import try_to_load_from_cache

    hit = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    return isinstance(hit, str)


def is_repo_id(repo: str) -> bool:
    """Whether ``repo`` is spelled as a hub id (``name`` or ``owner/name``), not a path."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo)
        return True
    except HFValidationError:
        return False
