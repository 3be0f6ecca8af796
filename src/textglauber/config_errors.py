"""What the profile loader (:mod:`textglauber.params`) and the schema (:mod:`textglauber.schema`) share:
the rule for a profile or chapter name, the error a profile that must not run raises, and how a
message names a profile's file. Imports only :mod:`textglauber.paths`."""
from __future__ import annotations

from pathlib import Path

from .paths import repo_root

NAME_RE = r"^[A-Za-z0-9_-]+$"     # a profile or chapter name: also a folder under results/ and _build/


class ProfileError(ValueError):
    """A profile that must not run; ``str()`` holds one line per problem."""


def where(path: Path) -> str:
    """A profile's path as messages name it: relative to the repository where it lies inside it."""
    try:
        return str(Path(path).resolve().relative_to(repo_root().resolve()))
    except ValueError:
        return str(path)
