"""The Glauber engine against exact answers: stationary laws, determinism, resume, bad input."""
import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from textglauber import engine, exact
from textglauber.engine import ChainSpec

from conftest import joint_chain, JointScorer


def _empirical(run, ex, burn):
    keep = run.states[run.steps >= burn].reshape(-1, run.states.shape[-1])
    counts = np.bincount(ex.index(keep), minlength=len(ex.states))
    return counts / counts.sum()


def test_engine_matches_exact_stationary_law_of_tiny_mlm(small_scorer):
    n, T = 3, 1.0
    ex = exact.glauber_kernel(small_scorer, n, T)
    P = ex.kernel
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-12)
    pi = exact.stationary(P)
    np.testing.assert_allclose(pi @ P, pi, atol=1e-12)
    assert (pi > 0).all()
    ids = small_scorer.vocab.ids
    init = ids[torch.randint(3, (300, n), generator=torch.Generator().manual_seed(1))]
    # the engine runs on the MLM's own scores, looked up from a table filled by the MLM scorer
    # (identical to calling it each step, as test_engine_samples_are_identical... checks, but fast)
    table = exact.TabulatedScorer(small_scorer, n)
    run = engine.run(table, init, ChainSpec(temperature=T, steps=600, record_every=10), seed=3)
    emp = _empirical(run, ex, burn=100)
    # 300 chains x 51 records, spaced 10 steps apart; sampling noise on 27 states is ~0.01
    assert exact.tv(emp, pi) < 0.04
    # and the law is not trivially uniform, so the check has teeth
    assert exact.tv(pi, np.full(len(pi), 1 / len(pi))) > 0.1


def test_engine_on_explicit_joint_samples_that_joint():
    n = 3
    sc, mu, ex = joint_chain(3, n, seed=0)
    np.testing.assert_allclose(exact.stationary(ex.kernel), mu, atol=1e-10)
    init = torch.zeros((400, n), dtype=torch.long)
    run = engine.run(sc, init, ChainSpec(temperature=1.0, steps=400, record_every=8), seed=0)
    assert exact.tv(_empirical(run, ex, burn=80), mu) < 0.04


def test_frozen_prefix_never_changes(full_scorer):
    init = full_scorer.vocab.ids[torch.randint(full_scorer.vocab.size, (8, 10), generator=torch.Generator().manual_seed(0))]
    run = engine.run(full_scorer, init, ChainSpec(temperature=1.0, steps=60, prefix_len=4), seed=0)
    assert (run.states[:, :, :4] == init[:, :4].numpy()[None]).all()
    assert (run.sites[run.sites >= 0] >= 4).all() and (run.sites >= 0).any()      # -1: a step held in a jump
    assert (run.states[-1, :, 4:] != init[:, 4:].numpy()).any()


def test_cpu_run_is_exactly_repeatable(full_scorer):
    init = full_scorer.vocab.ids[torch.randint(full_scorer.vocab.size, (5, 8), generator=torch.Generator().manual_seed(0))]
    spec = ChainSpec(temperature=0.7, steps=40, record_every=5, record_gaps=True)
    a = engine.run(full_scorer, init, spec, seed=11)
    b = engine.run(full_scorer, init, spec, seed=11)
    c = engine.run(full_scorer, init, spec, seed=12)
    assert np.array_equal(a.states, b.states) and np.array_equal(a.gaps, b.gaps)
    assert not np.array_equal(a.states, c.states)


def test_each_chain_draws_its_own_site(full_scorer):
    init = full_scorer.vocab.ids[torch.zeros((64, 12), dtype=torch.long)]
    run = engine.run(full_scorer, init, ChainSpec(temperature=1.0, steps=3), seed=0)
    assert all(len(set(row.tolist())) > 1 for row in run.sites)


def test_recorded_gap_is_the_written_tokens_margin(full_scorer):
    init = full_scorer.vocab.ids[torch.randint(full_scorer.vocab.size, (6, 8), generator=torch.Generator().manual_seed(2))]
    run = engine.run(full_scorer, init, ChainSpec(temperature=0.5, steps=1, record_gaps=True), seed=5)
    sites = torch.as_tensor(run.sites[0])
    s = full_scorer.scores(init, sites)
    written = torch.as_tensor(run.states[1])[torch.arange(6), sites]
    pos = full_scorer.vocab.index_of(written)
    for b in range(6):
        others = torch.cat([s[b, :pos[b]], s[b, pos[b] + 1:]])
        assert run.gaps[0, b] == pytest.approx(float(s[b, pos[b]] - others.max()), abs=1e-5)


def test_sampler_follows_softmax():
    scores = torch.tensor([[0.0, 1.0, 2.0, -1.0]]).repeat(40000, 1)
    u = torch.rand(40000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    idx = engine.sample_index(scores, 0.8, u)
    freq = torch.bincount(idx, minlength=4).double() / 40000
    torch.testing.assert_close(freq, torch.softmax(scores[0].double() / 0.8, -1), atol=0.01, rtol=0)


class _Killed(Exception):
    pass


def test_resume_after_kill_equals_uninterrupted_run(full_scorer, tmp_path):
    init = full_scorer.vocab.ids[torch.randint(full_scorer.vocab.size, (4, 9), generator=torch.Generator().manual_seed(0))]
    spec = ChainSpec(temperature=1.0, steps=50, record_every=3, record_gaps=True, checkpoint_every=10)
    whole = engine.run(full_scorer, init, spec, seed=7)

    def kill(step):
        if step == 30:
            raise _Killed
    with pytest.raises(_Killed):
        engine.run(full_scorer, init, spec, seed=7, out_dir=tmp_path, on_checkpoint=kill)
    # a chunk written after the last checkpoint (the run died between the two writes)
    np.savez(tmp_path / "chunk-0000000031.npz", steps=np.array([999]), states=np.zeros((1, 4, 9)), sites=np.zeros((1, 4)))
    resumed = engine.run(full_scorer, init, spec, seed=7, out_dir=tmp_path)
    for field in ("steps", "states", "gaps", "sites"):
        assert np.array_equal(getattr(whole, field), getattr(resumed, field)), field
    # other parameters are not resumed: that run is moved aside and these chains start afresh
    other = ChainSpec(temperature=2.0, steps=50)
    fresh = engine.run(full_scorer, init, other, seed=7)
    aside = engine.run(full_scorer, init, other, seed=7, out_dir=tmp_path)
    assert np.array_equal(aside.states, fresh.states)
    assert len(list(tmp_path.parent.glob(f"{tmp_path.name}.old-*"))) == 1


def test_a_run_interrupted_by_the_old_engine_resumes(tmp_path):
    """A run folder (chunks and checkpoint at step 300 of 600, auto mode: memo, then jumps) written by
    the engine before it became a package (tests/data/interrupted_run/README.md) resumes: its
    fingerprint is still this run's, its cache and policy load, and the resumed run ends with the
    records of an uninterrupted run of the same seed."""
    log_mu = np.random.default_rng(0).normal(size=3 ** 4)
    log_mu[40] += 6.0
    sc = exact.TabulatedScorer(JointScorer(np.arange(3), 4, log_mu), 4)
    init = torch.as_tensor(sc.chain.states[[40, 40, 0, 1]])
    spec = ChainSpec(temperature=0.25, steps=600, record_every=10, checkpoint_every=150)
    folder = tmp_path / "run"
    shutil.copytree(Path(__file__).parents[1] / "data" / "interrupted_run", folder)
    with gzip.open(folder / "checkpoint.pt.gz") as z:
        (folder / "checkpoint.pt").write_bytes(z.read())
    saved = torch.load(folder / "checkpoint.pt", weights_only=False)
    assert saved["step"] == 300 and saved["fingerprint"] == engine.store.fingerprint(sc, init, spec, 3, "trap-joint")
    old_chunks = {p.name: p.read_bytes() for p in folder.glob("chunk-*.npz")}
    resumed = engine.run(sc, init, spec, seed=3, out_dir=folder, model_id="trap-joint")
    assert not list(tmp_path.glob("run.old-*"))                     # resumed, not set aside
    assert all((folder / name).read_bytes() == data for name, data in old_chunks.items())
    whole = engine.run(sc, init, spec, seed=3)
    assert whole.modes == resumed.modes == [["memo", 450], ["jump", 150]]
    for field in ("steps", "states", "sites"):
        assert np.array_equal(getattr(whole, field), getattr(resumed, field)), field


@pytest.mark.parametrize("spec, n, why", [
    (ChainSpec(temperature=0.0, steps=5), 3, "temperature"),
    (ChainSpec(temperature=-1.0, steps=5), 3, "temperature"),
    (ChainSpec(temperature=float("nan"), steps=5), 3, "temperature"),
    (ChainSpec(temperature=1.0, steps=5), 200, "exceeds"),
    (ChainSpec(temperature=1.0, steps=5, prefix_len=3), 3, "prefix"),
    (ChainSpec(temperature=1.0, steps=-1), 3, "steps"),
])
def test_bad_input_is_refused_before_any_compute(counting, spec, n, why):
    init = counting.vocab.ids[torch.zeros((2, n), dtype=torch.long)]
    with pytest.raises(ValueError, match=why):
        engine.run(counting, init, spec, seed=0)
    assert counting.calls == 0
