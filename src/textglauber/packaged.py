"""Pretrained models that ship inside installable Python packages (``package:NAME``).

Each entry returns a :class:`~textglauber.models.ModelSource` pointing at the files inside
the installed package, or raises ModelUnavailableError naming the pip command.
"""
from __future__ import annotations

from importlib.resources import files
from importlib.util import find_spec

REGISTRY: dict = {}
