"""A run's records on disk: chunks of records, a checkpoint after each, the manifest, and the
fingerprint that decides whether a folder's run is this one.

A long run writes its records in chunks under ``out_dir`` and, after each, a checkpoint (states,
generator state, step, the cache and the auto policy); a killed run resumes from the last
checkpoint and ends with exactly the records of an uninterrupted run. Only a run of the same
parameters, seed, model, starts and sampler resumes; another one found there is moved aside
(``<out_dir>.old-<fingerprint>``, one kept) and the chains start afresh. A checkpoint holds only
dicts, lists and tensors, so it does not depend on where the engine's classes live."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from .. import provenance
from .spec import ChainRun, ChainSpec, Scorer

# the precision of the sampling law, part of every checkpoint's fingerprint: the plain and memo
# draws were made from a float32 softmax until issue 41 (item 5), and a run checkpointed then does
# not resume into float64 draws (it starts afresh: other trajectories, the same law)
SAMPLER = "softmax-float64"


class Recorder:
    """One chunk's records: states at the grid, the site of every step (-1: held in a jump) and gaps."""

    def __init__(self, start: int, stop: int, every: int, chains: int, gaps: bool):
        self.start, self.every = start, every
        self.steps, self.states = [], []
        self.sites = np.full((stop - start, chains), -1, np.int32)
        self.gaps = np.full((stop - start, chains), np.nan, np.float32) if gaps else None

    def step(self, t: int, states: torch.Tensor, sites: torch.Tensor, gaps: torch.Tensor | None) -> None:
        self.sites[t - self.start - 1] = sites.numpy()
        if gaps is not None:
            self.gaps[t - self.start - 1] = gaps.numpy()
        if t % self.every == 0:
            self.steps.append(t)
            self.states.append(states.numpy().copy())

    def jumps(self, t0: int, t1: int, before: np.ndarray, ev: dict) -> None:
        """Steps t0 + 1 .. t1 from the moves ``ev`` (time, chain, site, token) of chains at ``before``."""
        order = np.argsort(ev["time"], kind="stable")
        time, chain, site, token = (ev[k][order] for k in ("time", "chain", "site", "token"))
        self.sites[time - self.start - 1, chain] = site
        state, k = before.copy(), 0
        for r in range((t0 // self.every + 1) * self.every, t1 + 1, self.every):
            while k < len(time) and time[k] <= r:
                state[chain[k], site[k]] = token[k]
                k += 1
            self.steps.append(r)
            self.states.append(state.copy())

    def drawn(self, t0: int, t1: int, before: np.ndarray, sites: torch.Tensor, gaps: torch.Tensor | None,
              ev: dict) -> None:
        """Steps t0 + 1 .. t1 run on the chains' own clocks with every site drawn (memo): the
        states at the grid from the moves, and every step's site and gap."""
        self.jumps(t0, t1, before, ev)
        self.sites[t0 - self.start:t1 - self.start] = sites.numpy()
        if gaps is not None:
            self.gaps[t0 - self.start:t1 - self.start] = gaps.numpy()

    def block(self, shape: tuple) -> dict:
        block = {"steps": np.array(self.steps, dtype=np.int64),
                 "states": np.stack(self.states) if self.states else np.zeros((0,) + shape, np.int64),
                 "sites": self.sites}
        if self.gaps is not None:
            block["gaps"] = self.gaps
        return block


def fingerprint(scorer: Scorer, init: torch.Tensor, spec: ChainSpec, seed: int, model_id: str,
                legacy: bool = False) -> str:
    """What a checkpoint must match to be resumed: parameters, seed, model, allowed vocabulary,
    sampler and starts (``legacy``: of a run begun before the engine had modes)."""
    params = asdict(spec)
    if legacy:
        params.pop("mode")
    h = hashlib.sha1()
    h.update(json.dumps([params, seed, model_id, scorer.vocab.key()], sort_keys=True).encode())
    h.update(SAMPLER.encode())          # a checkpoint of another sampler would continue another trajectory
    h.update(init.cpu().numpy().astype(np.int64).tobytes())
    return h.hexdigest()


def save_atomic(obj, path: Path) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


CHECKPOINT = "checkpoint.pt"
_CHECKPOINT_KEYS = ("fingerprint", "states", "step", "chunks", "generator")


def read_checkpoint(folder: Path) -> tuple[dict | None, str | None]:
    """``(checkpoint, None)`` for the run saved in ``folder``, ``(None, None)`` where there is none,
    ``(None, why)`` where there is one that cannot be read: a file torch cannot load (truncated,
    say), one without the entries a checkpoint holds, or a chunk it lists missing or damaged (each
    chunk's zip directory and CRCs are checked)."""
    import zipfile

    ckpt = Path(folder) / CHECKPOINT
    if not ckpt.is_file():
        return None, None
    try:
        saved = torch.load(ckpt, weights_only=False)
    except Exception as exc:                      # torch raises several kinds for a damaged file
        return None, f"torch cannot load it ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})"
    if not isinstance(saved, dict) or any(k not in saved for k in _CHECKPOINT_KEYS):
        return None, f"it lacks the entries of a checkpoint ({', '.join(_CHECKPOINT_KEYS)})"
    for c in saved["chunks"]:
        if c.get("file") is None:
            continue
        try:
            with zipfile.ZipFile(Path(folder) / c["file"]) as z:
                bad = z.testzip()
        except (OSError, zipfile.BadZipFile) as exc:
            return None, f"its chunk {c['file']} cannot be read ({exc})"
        if bad is not None:
            return None, f"its chunk {c['file']} is damaged ({bad})"
    return saved, None


def saved_run(folder: Path) -> dict | None:
    """The run saved in ``folder``, or None where there is none or it cannot be read."""
    return read_checkpoint(folder)[0]


def set_aside_unreadable(out_dir: Path, why: str) -> None:
    """Move a folder whose checkpoint cannot be read out of the way (``<out_dir>.old-unreadable``,
    one kept) with one line naming the file and why, so that its chains start afresh and no later
    run stumbles on it again."""
    aside = out_dir.with_name(f"{out_dir.name}.old-unreadable")
    if aside.exists():
        shutil.rmtree(aside) if aside.is_dir() else aside.unlink()
    os.replace(out_dir, aside)
    print(f"{out_dir / CHECKPOINT}: cannot be read: {why}; the folder is moved aside to {aside.name} and these "
          "chains start afresh", flush=True)


def resume_or_set_aside(out_dir: Path, wanted: tuple[str, ...]) -> dict | None:
    """The checkpoint to resume in ``out_dir`` if it is of this run (its fingerprint one of
    ``wanted``), else None, with ``out_dir`` ready for a fresh start.

    A run of other parameters, seed, model or starts is not resumed and not deleted: it is moved
    aside to ``<out_dir>.old-<its fingerprint>`` beside ``out_dir`` (one such folder is kept: the
    one moved before goes), and one line says so. A run moved aside earlier whose fingerprint is
    wanted comes back and resumes, so going back to the parameters of the run before costs
    nothing. A checkpoint that cannot be read is named and moved aside (:func:`set_aside_unreadable`).
    Chunks without a checkpoint (a run killed before its first) are dropped."""
    here, why = read_checkpoint(out_dir)
    if why is not None:
        set_aside_unreadable(out_dir, why)
    if here is not None and here["fingerprint"] in wanted:
        return here
    aside = sorted(out_dir.parent.glob(f"{out_dir.name}.old-*")) if out_dir.parent.is_dir() else []
    back = next((p for p in aside if p.is_dir() and (saved_run(p) or {}).get("fingerprint") in wanted), None)
    said = []
    if here is not None:
        for old in aside:
            if old != back:
                shutil.rmtree(old) if old.is_dir() else old.unlink()
        moved = out_dir.with_name(f"{out_dir.name}.old-{here['fingerprint'][:12]}")
        os.replace(out_dir, moved)
        said.append(f"{out_dir} held a run with other parameters, seed, model or starts (stopped at step "
                    f"{here['step']}); it is moved to {moved.name}")
    elif back is not None and out_dir.exists():
        shutil.rmtree(out_dir)
    if back is not None:
        os.replace(back, out_dir)
        said.append(f"resuming the run of these parameters moved aside before ({back.name})")
    elif said:
        said.append("these chains start afresh")
    if said:
        print("; ".join(said), flush=True)
    return saved_run(out_dir) if back is not None else None


def write_manifest(out_dir: Path, spec: ChainSpec, seed: int, model_id: str, scorer: Scorer,
                   init: torch.Tensor) -> None:
    lm = getattr(scorer, "lm", None)
    manifest = {"parameters": asdict(spec), "seed": seed, "model": model_id,
                "revision": getattr(lm, "revision", None), "allowed_vocabulary": scorer.vocab.key(),
                "chains": int(init.shape[0]), "n": int(init.shape[1]), "git": provenance.git_commit(),
                "versions": provenance.versions()}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))


def drop_stale_chunks(out_dir: Path, chunks: list[dict]) -> None:
    """Remove the chunk files written after the last checkpoint (not among ``chunks``)."""
    for stale in out_dir.glob("chunk-*.npz"):
        if stale.name not in {c["file"] for c in chunks}:
            stale.unlink()


def write_chunk(out_dir: Path | None, start: int, block: dict) -> dict:
    """A chunk of records: a file under ``out_dir``, or kept in memory without one."""
    if out_dir is None:
        return {"file": None, "start": start, "data": block}
    name = f"chunk-{start:010d}.npz"
    tmp = out_dir / (name + ".tmp.npz")
    np.savez(tmp, **block)
    os.replace(tmp, out_dir / name)
    return {"file": name, "start": start}


def assemble(chunks: list[dict], out_dir: Path | None, spec: ChainSpec, seed: int) -> ChainRun:
    """The run's records, from its chunks in order of their first step."""
    blocks = []
    for c in sorted(chunks, key=lambda c: c["start"]):
        if c["file"] is None:
            blocks.append(c["data"])
        else:
            with np.load(out_dir / c["file"]) as z:
                blocks.append({k: z[k] for k in z.files})
    steps = np.concatenate([b["steps"] for b in blocks])
    states = np.concatenate([b["states"] for b in blocks])
    site_blocks = [b["sites"] for b in blocks if "sites" in b]
    gap_blocks = [b["gaps"] for b in blocks if "gaps" in b]
    return ChainRun(steps=steps, states=states,
                    sites=np.concatenate(site_blocks) if site_blocks else None,
                    gaps=np.concatenate(gap_blocks) if gap_blocks else None, spec=spec, seed=seed)
