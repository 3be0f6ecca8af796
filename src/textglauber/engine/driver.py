"""The driver: a run of B chains for ``spec.steps`` steps, resumed from its folder where it has
one, as checkpointed chunks of segments, each segment in the mode its policy picks."""
from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from . import jump, memo, plain
from .batch import Batch
from .cache import SiteCache, chain_cache
from .policy import Policy
from .spec import ChainRun, ChainSpec, Scorer, validate
from .store import (Recorder, assemble, drop_stale_chunks, fingerprint, resume_or_set_aside, save_atomic,
                    write_chunk, write_manifest)

SEGMENTS = {"plain": plain.segment, "memo": memo.segment, "jump": jump.segment}


@dataclass
class _Progress:
    """Where a run stands: its fingerprint and policy, the steps done, the chunks written and the
    checkpoint file (None: a run without a folder)."""

    fp: str
    policy: Policy
    done: int = 0
    chunks: list = field(default_factory=list)
    ckpt: Path | None = None


def _resume(batch: Batch, init: torch.Tensor, seed: int, model_id: str, out_dir: Path | None) -> _Progress:
    """A fresh start, or the run in ``out_dir`` resumed into ``batch`` (states, generator, cache
    and policy from its checkpoint). A checkpoint written before the engine had modes resumes in
    the plain mode."""
    spec, scorer, n = batch.spec, batch.scorer, batch.states.shape[1]
    p = _Progress(fingerprint(scorer, init, spec, seed, model_id), Policy.for_chains(scorer, n, spec, spec.mode))
    if out_dir is None:
        return p
    legacy = fingerprint(scorer, init, spec, seed, model_id, legacy=True)
    saved = resume_or_set_aside(out_dir, (p.fp, legacy))
    out_dir.mkdir(parents=True, exist_ok=True)
    p.ckpt = out_dir / "checkpoint.pt"
    if saved is None:
        write_manifest(out_dir, spec, seed, model_id, scorer, init)
    else:
        if saved["fingerprint"] == legacy:
            batch.spec, p.fp = dataclasses.replace(spec, mode="plain"), saved["fingerprint"]
            p.policy = Policy.for_chains(scorer, n, spec, "plain")
        batch.states, p.done, p.chunks = saved["states"], saved["step"], saved["chunks"]
        batch.gen.set_state(saved["generator"])
        if "cache" in saved:
            batch.cache = SiteCache.restore(saved["cache"])
            p.policy = Policy(**saved["policy"])
    drop_stale_chunks(out_dir, p.chunks)
    return p


def _chunk(batch: Batch, policy: Policy, t0: int, t1: int, bar) -> Recorder:
    """Steps t0 + 1 .. t1 as segments, each in the mode the policy picks, then told to it."""
    spec = batch.spec
    rec = Recorder(t0, t1, spec.record_every, len(batch.states), spec.record_gaps)
    t = t0
    while t < t1:
        mode, length = policy.next()
        end = min(t1, t + length)
        tally = SEGMENTS[mode](batch, rec, t, end)
        policy.observe(mode, end - t, tally.moves, tally.rows, tally.q_now, batch.cache.unscored(batch.free),
                       tally.calls)
        if bar is not None:
            bar.update(end - t)
        t = end
    return rec


def run(scorer: Scorer, init: torch.Tensor, spec: ChainSpec, seed: int, *, out_dir: str | Path | None = None,
        model_id: str = "", progress: bool = False,
        on_checkpoint: Callable[[int], None] | None = None, max_rows: int | None = None) -> ChainRun:
    """Run ``init.shape[0]`` chains for ``spec.steps`` steps; resume from ``out_dir`` if it holds a checkpoint.

    ``on_checkpoint(step)`` is called after each checkpoint is written (the tests use it to
    simulate a kill). A checkpoint written before the engine had modes resumes in the plain
    mode (the returned ``spec`` says so). ``max_rows`` bounds the rows of a jump's scorer calls.
    """
    init = torch.as_tensor(init, dtype=torch.long)
    validate(scorer, init, spec)
    states = init.clone()
    batch = Batch(scorer, states, spec, torch.Generator().manual_seed(int(seed)), chain_cache(states), max_rows)
    out_dir = None if out_dir is None else Path(out_dir)
    p = _resume(batch, init, seed, model_id, out_dir)
    if p.done == 0 and not p.chunks:
        p.chunks.append(write_chunk(out_dir, 0, {"steps": np.array([0]), "states": batch.states.numpy()[None].copy()}))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=spec.steps, initial=p.done, unit="step", desc="glauber")
    while p.done < spec.steps:
        stop = min(p.done + spec.checkpoint_every, spec.steps)
        rec = _chunk(batch, p.policy, p.done, stop, bar)
        p.chunks.append(write_chunk(out_dir, p.done + 1, rec.block(tuple(batch.states.shape))))
        p.done = stop
        if p.ckpt is not None:
            save_atomic({"fingerprint": p.fp, "states": batch.states, "step": p.done, "chunks": p.chunks,
                         "generator": batch.gen.get_state(), "cache": batch.cache.state(),
                         "policy": asdict(p.policy)}, p.ckpt)
            if on_checkpoint is not None:
                on_checkpoint(p.done)
    if bar is not None:
        bar.close()
    out = assemble(p.chunks, out_dir, batch.spec, seed)
    out.modes = p.policy.history if batch.spec.mode == "auto" else None
    return out
