"""The traps chapter's chains in blocks (issue 64): blocks fixed by the chains alone, every block's
records those of the engine on that block with the block's seed, a killed run resumed block by block
to the records of an uninterrupted one, and nothing of an earlier layout or a larger run left behind."""
import numpy as np
import pytest
import torch

from textglauber import engine, scheduler
from textglauber.engine import ChainSpec
from textglauber.seeding import child_seed
from textglauber.traps import chains as tc

SPEC = ChainSpec(temperature=1.0, steps=60, record_every=5, checkpoint_every=20)


def _init(scorer, chains: int, n: int = 6) -> torch.Tensor:
    ids = scorer.vocab.ids
    return ids[torch.randint(len(ids), (chains, n), generator=torch.Generator().manual_seed(3))]


def test_blocks_depend_on_the_number_of_chains_alone():
    assert [list(b) for b in scheduler.chain_blocks(18)] == [list(range(16)), [16, 17]]
    assert [len(b) for b in scheduler.chain_blocks(50)] == [16, 16, 16, 2]
    assert scheduler.chain_blocks(0) == [] and len(scheduler.chain_blocks(16)) == 1


def test_each_block_is_the_engine_on_its_chains_with_its_own_seed(full_scorer):
    """Set side by side, the blocks give each chain the records a run of its block alone gives, with the
    block's seed drawn in order from the run's seed: not the records of one run of all the chains."""
    init = _init(full_scorer, 18)
    got = tc.run_chains(full_scorer, init, SPEC, seed=11, scheduler="serial")
    assert got.states.shape == (SPEC.steps // SPEC.record_every + 1, 18, 6) and got.seed == 11
    gen = torch.Generator().manual_seed(11)
    for b in scheduler.chain_blocks(18):
        alone = engine.run(full_scorer, init[b.start:b.stop], SPEC, seed=child_seed(gen))
        np.testing.assert_array_equal(got.states[:, b.start:b.stop], alone.states)
        np.testing.assert_array_equal(got.sites[:, b.start:b.stop], alone.sites)
    assert (got.states[-1] != got.states[0]).any()
    whole = engine.run(full_scorer, init, SPEC, seed=11)
    assert not np.array_equal(whole.states, got.states)


def test_a_killed_run_resumes_every_block_to_the_records_of_an_uninterrupted_one(full_scorer, tmp_path, monkeypatch):
    init = _init(full_scorer, 18)
    clean = tc.run_chains(full_scorer, init, SPEC, seed=5, out_dir=tmp_path / "clean", scheduler="serial")
    real = engine.run

    class Killed(Exception):
        pass

    def dying(scorer, init_, spec, seed, **kw):
        def kill(step):
            if len(init_) == 2 and step == 40:          # the second block, at its second checkpoint
                raise Killed
        return real(scorer, init_, spec, seed, on_checkpoint=kill, **kw)

    monkeypatch.setattr(engine, "run", dying)
    with pytest.raises(scheduler.UnitFailed, match="chains 16 to 17"):
        tc.run_chains(full_scorer, init, SPEC, seed=5, out_dir=tmp_path / "chains", scheduler="serial")
    monkeypatch.setattr(engine, "run", real)
    assert (tmp_path / "chains" / "block-1" / "checkpoint.pt").exists()
    resumed = tc.run_chains(full_scorer, init, SPEC, seed=5, out_dir=tmp_path / "chains", scheduler="serial")
    for field in ("steps", "states", "sites"):
        np.testing.assert_array_equal(getattr(resumed, field), getattr(clean, field))


def test_an_earlier_layout_and_a_larger_run_leave_nothing_behind(full_scorer, tmp_path):
    folder = tmp_path / "chains"
    init = _init(full_scorer, 40)
    engine.run(full_scorer, init, SPEC, seed=1, out_dir=folder)         # the chapter's one run, before blocks
    tc.run_chains(full_scorer, init, SPEC, seed=1, out_dir=folder, scheduler="serial")
    assert sorted(p.name for p in folder.iterdir()) == ["block-0", "block-1", "block-2"]
    assert len(list(tmp_path.glob("chains.old-*"))) == 1                 # moved aside, as the engine does
    again = tc.run_chains(full_scorer, init[:18], SPEC, seed=1, out_dir=folder, scheduler="serial")
    names = sorted(p.name for p in folder.iterdir())
    assert [m for m in names if ".old-" not in m] == ["block-0", "block-1"]     # block-2 is gone
    assert [m.split(".old-")[0] for m in names if ".old-" in m] == ["block-1"]  # its 16 chains, now 2: set aside
    assert again.states.shape[1] == 18


def test_blocks_recorded_at_other_steps_are_refused(full_scorer):
    init = _init(full_scorer, 2)
    a = engine.run(full_scorer, init, SPEC, seed=0)
    b = engine.run(full_scorer, init, ChainSpec(temperature=1.0, steps=60, record_every=10), seed=0)
    with pytest.raises(ValueError, match="different steps"):
        tc.side_by_side([a, b], seed=0)
