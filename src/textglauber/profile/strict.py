"""Reading a profile's YAML strictly: a bounded file, no anchors or aliases, no key given twice.

A profile is a small hand-written file, so none of these costs anything a real profile needs, and each
closes a way for one file to hang or silently change a build: an alias bomb (a few lines that expand
to billions of values), a file of any size, and ``seed: 0`` followed later by ``seed: 7`` (YAML itself
keeps the last). Imports only :mod:`textglauber.profile.errors`.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from .errors import ProfileError, where

MAX_BYTES = 256 * 1024
"""Largest profile file read (the largest real one is about 12 KB)."""


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses anchors, aliases and duplicate keys as it composes."""

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            kind = "alias" if isinstance(event, yaml.AliasEvent) else "anchor"
            raise _Refused(f"{kind} '{event.anchor}' at line {event.start_mark.line + 1}: anchors and aliases "
                           "are not allowed in a profile (write each value out, or use 'derive:')")
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first: dict = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue                      # a non-scalar key is refused by the schema's checks
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                if key in first:
                    raise _Refused(f"key {key!r} is given twice, at line {first[key]} and at line {line}; "
                                   "a key may appear once in a mapping")
                first[key] = line
        return super().construct_mapping(node, deep)


class _Refused(Exception):
    """What the strict loader refuses (turned into one :class:`ProfileError` line naming the file)."""


def read_profile_yaml(path: Path):
    """The YAML value of a profile file, read strictly (module docstring); one-line
    :class:`ProfileError` naming the file otherwise."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise ProfileError(f"{where(path)}: {size} bytes; a profile file is at most {MAX_BYTES} bytes")
    try:
        return yaml.load(path.read_text(), Loader=_StrictLoader)
    except _Refused as exc:
        raise ProfileError(f"{where(path)}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ProfileError(f"{where(path)}: not valid YAML{at}: {getattr(exc, 'problem', None) or exc}") from None
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{where(path)}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
