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


def _pieces(v):
    """The YAML flow text of ``v``, piece by piece (lazily, so that a caller can stop early)."""
    if v is None:
        yield "null"
    elif isinstance(v, bool):
        yield "true" if v else "false"
    elif isinstance(v, (float, str)):
        yield repr(v)
    elif isinstance(v, dict):
        yield "{"
        for i, (k, x) in enumerate(v.items()):
            yield (", " if i else "") + f"{k}: "
            yield from _pieces(x)
        yield "}"
    elif isinstance(v, (list, tuple)):
        yield "["
        for i, x in enumerate(v):
            if i:
                yield ", "
            yield from _pieces(x)
        yield "]"
    else:
        yield repr(v)


def show(value, limit: int = 80) -> str:
    """A value as the profile writes it (YAML flow style), shortened to ``limit`` characters. The
    text is built only up to the limit, so a huge value (a long list, a deeply shared one) costs
    no more to show than a small one."""
    out, size = [], 0
    for piece in _pieces(value):
        out.append(piece[:limit + 1])
        size += len(out[-1])
        if size > limit:
            break
    text = "".join(out)
    return text if len(text) <= limit else text[:limit - 3] + "..."
