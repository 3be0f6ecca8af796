"""Where things live: the repository, local model and corpus paths, the models this project
builds, the stand-ins, and the data that ships inside the package.

This module imports nothing of the project, so that every other module may import it."""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
DATA_DIR = PACKAGE_DIR / "data"          # package data: corpora and word lists that ship with the code


def repo_root() -> Path:
    """The checkout this package runs from (the folder with ``params/`` and ``_toc.yml``), else the
    working directory (an installed copy)."""
    for p in PACKAGE_DIR.parents:
        if (p / "params").is_dir() and (p / "_toc.yml").exists():
            return p
    return Path.cwd()


def local_path(name: str) -> Path:
    """Where a local model or corpus path points. Relative paths are taken from the repository
    root, whatever the working directory (the chapters run from ``book/``, the CLI from anywhere)."""
    p = Path(name).expanduser()
    return (p if p.is_absolute() else repo_root() / p).resolve()


def models_root() -> Path:
    """The models this project trains (``trained:<run>``): ``$TEXTGLAUBER_MODELS`` or ``_build/models``."""
    return Path(os.environ.get("TEXTGLAUBER_MODELS", repo_root() / "_build" / "models"))


def standins_root() -> Path:
    """The standin profile's local models (``textglauber.standins``)."""
    return repo_root() / "_build" / "standins"


def gpu_data_root() -> Path:
    """GPU timings kept as data, one folder per session (``textglauber.bench.gpu_data``)."""
    return repo_root() / "data" / "gpu"
