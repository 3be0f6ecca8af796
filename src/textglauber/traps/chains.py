"""The traps chapter's chains (docs/science.md, chapter 5): B chains from the chapter's seed windows,
run in blocks of :data:`textglauber.scheduler.CHAIN_BLOCK` chains, one unit of work per block (:mod:`textglauber.scheduler`),
each block checkpointed in its own folder, then set side by side as one run.

A block's chains, its seed and its folder depend only on the chains' order and the run's seed, never
on the number of workers or on which block finishes first, so the run's records are the same serially
and on any cluster. A killed run resumes every block from its own last checkpoint
(:func:`textglauber.engine.run`)."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import torch

from ..engine import ChainRun, ChainSpec
from ..scheduler import chain_blocks, model_label, run_all
from ..seeding import child_seed


def block_unit(model, device, dtype, init: np.ndarray, spec: ChainSpec, seed: int, out_dir: str | None):
    """One block's chains from ``init`` with ``seed``, checkpointed in ``out_dir`` (None: nowhere). A unit
    of work that runs the same in this process or on a worker, which opens the model once
    (:func:`textglauber.models.kept_mlm`); ``model`` is a profile's model entry or a scorer (a test's)."""
    from ..engine import run

    from ..profile import is_model_entry

    if is_model_entry(model):
        from ..models import kept_mlm

        lm, scorer = kept_mlm(model, device=device, dtype=dtype)
        model_id = lm.name
    else:
        scorer, model_id = model, type(model).__name__
    return run(scorer, torch.as_tensor(init), spec, seed=seed, out_dir=out_dir, model_id=model_id)


def side_by_side(runs: list[ChainRun], seed: int) -> ChainRun:
    """The blocks' runs as one run of all their chains, in block order (their records share steps)."""
    first = runs[0]
    for r in runs[1:]:
        if not np.array_equal(r.steps, first.steps):
            raise ValueError("blocks recorded at different steps cannot be set side by side")

    def joined(name: str):
        parts = [getattr(r, name) for r in runs]
        return None if any(p is None for p in parts) else np.concatenate(parts, axis=1)

    return ChainRun(steps=first.steps, states=joined("states"), gaps=joined("gaps"), sites=joined("sites"),
                    spec=first.spec, seed=int(seed))


def _clear(folder: Path, count: int) -> None:
    """Leave in ``folder`` only what a run of ``count`` blocks resumes from: a run written there before
    blocks (its files at the top) is moved aside as the engine moves a run of other parameters, and
    block folders past ``count`` (a run of more chains) go."""
    from ..engine.store import resume_or_set_aside

    if (folder / "checkpoint.pt").exists():
        resume_or_set_aside(folder, ())
    if not folder.is_dir():
        return
    keep = {f"block-{k}" for k in range(count)}
    for entry in folder.iterdir():
        name = entry.name.split(".old-")[0]
        if name not in keep:
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def run_chains(model, init, spec: ChainSpec, seed: int, *, out_dir: str | Path | None = None, device="auto",
               dtype="auto", scheduler: str | None = None) -> ChainRun:
    """``init``'s chains (B, n) for ``spec``, block by block (:func:`textglauber.scheduler.chain_blocks`), each block a unit on
    ``scheduler`` (None: the setting from the environment, serial by default) with its seed drawn from
    ``seed`` before any unit runs and its checkpoints in ``out_dir/block-<k>``."""
    init = np.asarray(init)
    parts = chain_blocks(len(init))
    gen = torch.Generator().manual_seed(int(seed))
    seeds = [child_seed(gen) for _ in parts]
    folder = None if out_dir is None else Path(out_dir).resolve()
    if folder is not None:
        _clear(folder, len(parts))
    units = [(f"traps, chains, model {model_label(model)}, chains {b.start} to {b.stop - 1}", block_unit,
              (model, device, dtype, init[b.start:b.stop], spec, s, None if folder is None else str(folder / f"block-{k}")))
             for k, (b, s) in enumerate(zip(parts, seeds))]
    return side_by_side(run_all(units, scheduler), seed)
