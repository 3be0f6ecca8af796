"""What every part of a profile's handling shares: the rule for a profile or chapter name, the
error a profile that must not run raises, how a message names a profile's file and how it shows a
value. Imports only :mod:`textglauber.paths`."""
from __future__ import annotations

from pathlib import Path

from ..paths import repo_root

NAME_RE = r"^[A-Za-z0-9_-]+$"     # a profile or chapter name: also a folder under results/ and _build/


class ProfileError(ValueError):
    """A profile that must not run; ``str()`` holds one line per problem."""


def where(path: Path) -> str:
    """A profile's path as messages name it: relative to the repository where it lies inside it."""
    try:
        return str(Path(path).resolve().relative_to(repo_root().resolve()))
    except ValueError:
        return str(path)


def show(value, limit: int = 80) -> str:
    """A value as the profile writes it (YAML flow style), shortened."""
    def fmt(v):
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return repr(v)
        if isinstance(v, str):
            return repr(v)
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {fmt(x)}" for k, x in v.items()) + "}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(fmt(x) for x in v) + "]"
        return repr(v)
    text = fmt(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
