import os

import numpy as np
import pytest
import torch

os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
torch.set_num_threads(min(2, os.cpu_count() or 1))

from textglauber import models, vocabulary  # noqa: E402
from textglauber.exact import ExactChain, enumerate_states  # noqa: E402


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
    sc = JointScorer(np.arange(k), n, log_mu)
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


class JointScorer:
    """Conditionals of an explicit joint law mu on A^n (given as log mu over the enumerated states).

    s_i(a | x_{-i}) = log mu(x^{i<-a}), which is compatible by construction.
    """

    def __init__(self, vocab_ids, n: int, log_mu: np.ndarray):
        ids = torch.as_tensor(np.sort(np.asarray(vocab_ids)), dtype=torch.long)
        self.vocab = vocabulary.AllowedVocab(ids=ids, tokens=tuple(str(int(i)) for i in ids), vocab_size=int(ids.max()) + 1)
        self.n = n
        self.log_mu = np.asarray(log_mu, np.float64)
        self.chain = ExactChain(states=enumerate_states(ids.numpy(), n), kernel=None, free=list(range(n)),
                                vocab_ids=ids.numpy())

    @property
    def max_length(self) -> int:
        return self.n

    def scores(self, states: torch.Tensor, sites: torch.Tensor) -> torch.Tensor:
        x = states.cpu().numpy()
        out = np.empty((len(x), self.vocab.size))
        for a_pos, a in enumerate(self.chain.vocab_ids):
            y = x.copy()
            y[np.arange(len(x)), sites.cpu().numpy()] = a
            out[:, a_pos] = self.log_mu[self.chain.index(y)]
        return torch.as_tensor(out, dtype=torch.float64)


def named_models(params: dict, notebook: str | None = None) -> list[str]:
    """The models a chapter's parameters name that the pre-flight resolves by name: every model
    entry's ``name``, an ``nli:`` scorer's model and a ``sentence:`` embedder's that is not an
    installed package (``sentence:package:``)."""
    from textglauber import profile as P

    return [r.name for r in P.model_refs(notebook, params)
            if r.via in ("", "nli") or (r.via == "sentence" and not r.name.startswith("package:"))]


class ContextTable:
    """Incompatible conditionals on {0..K-1}^n: an independent Gaussian score vector for every
    (site, context with that site blanked), so pi_i does not read x_i, the conditionals come from no
    joint law and the chain is a generic non-reversible one. ``chain`` enumerates the states."""

    def __init__(self, K, n, seed, spread=2.0):
        ids = torch.arange(K)
        self.vocab = vocabulary.AllowedVocab(ids=ids, tokens=tuple(str(i) for i in range(K)), vocab_size=K)
        self.n, self.K = n, K
        self.chain = ExactChain(states=enumerate_states(np.arange(K), n), kernel=None, free=list(range(n)),
                                vocab_ids=np.arange(K))
        self.R = np.random.default_rng(seed).normal(scale=spread, size=(K ** n, n, K))

    @property
    def max_length(self):
        return self.n

    def scores(self, states, sites):
        x, i = states.numpy().copy(), sites.numpy()
        x[np.arange(len(x)), i] = 0                        # the context: site i blanked
        return torch.as_tensor(self.R[self.chain.index(x), i])


def truth_settings(**given) -> dict:
    """Keywords for ``groundtruth.ground_truth`` (and its chapter's ``run_models``): ``given``, and the
    chapter schema's default for each of eps, rel_delta, trap_window and trap_threshold not given
    (the library states none of them)."""
    from textglauber.profile.chapters import GroundTruth

    return {**{k: GroundTruth.default_of(k) for k in ("eps", "rel_delta", "trap_window", "trap_threshold")}, **given}


def escape_section(**given):
    """Chapter 5's escape section as the chapter reads it (a typed
    :class:`textglauber.profile.Escape`): the smoke profile's, with ``given`` keys replaced, checked
    by the schema as a profile's would be."""
    from textglauber import profile as P

    return P.Escape.model_validate({**P.chapter_parameters("smoke", "traps")["escape"], **given})
