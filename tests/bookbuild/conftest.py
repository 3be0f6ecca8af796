"""Fixtures shared by the build's tests."""
import shutil
from pathlib import Path

import pytest

from textglauber.profile import loader

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def pdir(tmp_path, monkeypatch):
    """A params folder holding copies of the shipped profiles, which the code reads instead of params/."""
    d = tmp_path / "params"
    d.mkdir()
    for f in (ROOT / "params").glob("*.yaml"):
        shutil.copy(f, d / f.name)
    monkeypatch.setattr(loader, "params_dir", lambda: d)
    return d
