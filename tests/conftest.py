import os

import numpy as np
import pytest
import torch

os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
torch.set_num_threads(min(2, os.cpu_count() or 1))

from textglauber import models, vocabulary  # noqa: E402


@pytest.fixture(scope="session")
def tiny_mlm():
    return models.load("tiny-mlm", device="cpu", dtype="float32")


@pytest.fixture(scope="session")
def tiny_causal():
    return models.load("tiny-causal", kind="causal", device="cpu", dtype="float32")


@pytest.fixture(scope="session")
def full_scorer(tiny_mlm):
    return models.MaskedLMScorer(tiny_mlm, vocabulary.allowed_vocabulary(tiny_mlm.tokenizer))


@pytest.fixture(scope="session")
def small_scorer(tiny_mlm):
    """The tiny MLM restricted to three allowed tokens: 3^n states, enumerable."""
    v = vocabulary.allowed_vocabulary(tiny_mlm.tokenizer, tokens=["the", "dog", "ran"])
    return models.MaskedLMScorer(tiny_mlm, v)


class CountingScorer:
    """Wraps a scorer and counts model calls (to prove errors come before compute) and the rows
    they ask for (the engine's model work); the inner scorer's ``lm``, where it has one, stays visible."""

    def __init__(self, inner):
        self.inner, self.calls, self.rows = inner, 0, 0
        self.vocab = inner.vocab
        if hasattr(inner, "lm"):
            self.lm = inner.lm

    @property
    def max_length(self):
        return self.inner.max_length

    def scores(self, states, sites):
        self.calls += 1
        self.rows += len(sites)
        return self.inner.scores(states, sites)


@pytest.fixture
def counting(small_scorer):
    return CountingScorer(small_scorer)


def random_joint(k: int, n: int, seed: int, spread: float = 2.0):
    rng = np.random.default_rng(seed)
    return rng.normal(scale=spread, size=k ** n)


def normalised(log_mu):
    """The law exp(log_mu) / sum, computed stably."""
    mu = np.exp(log_mu - log_mu.max())
    return mu / mu.sum()


def joint_chain(k: int, n: int, seed: int):
    """An explicit random joint law on {0..k-1}^n, its scorer and its exact Glauber chain at T = 1."""
    from textglauber import exact

    log_mu = random_joint(k, n, seed=seed)
    sc = exact.JointScorer(np.arange(k), n, log_mu)
    return sc, normalised(log_mu), exact.glauber_kernel(sc, n, 1.0)


@pytest.fixture
def pdir(tmp_path, monkeypatch):
    """A params folder holding copies of the shipped profiles, which the code reads instead of params/."""
    import shutil
    from pathlib import Path

    from textglauber.profile import loader

    d = tmp_path / "params"
    d.mkdir()
    for f in (Path(__file__).resolve().parents[1] / "params").glob("*.yaml"):
        shutil.copy(f, d / f.name)
    monkeypatch.setattr(loader, "params_dir", lambda: d)
    return d
