"""The batched Glauber engine (SPEC section 1).

One step from a batch of states: every chain draws its own free site uniformly, that
site is masked, the scorer returns s_i(. | x_{-i}) over the allowed vocabulary (one
encoder pass for the batch, the head on B rows), and each chain writes a token drawn
from softmax(s / T).

Randomness: one ``torch.Generator`` on the CPU per run draws the sites and one uniform
per chain per step; sampling is by inverse CDF on those uniforms, so a CPU run is exactly
repeatable and the draws do not depend on the device the model runs on.

Long runs write their records in chunks under ``out_dir`` and a checkpoint (states,
generator state, step) after each chunk; a killed run resumes from the last checkpoint
and ends with exactly the records of an uninterrupted run.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Protocol

import numpy as np
import torch

from .vocabulary import AllowedVocab


class Scorer(Protocol):
    vocab: AllowedVocab

    @property
    def max_length(self) -> int: ...

    def scores(self, states: torch.Tensor, sites: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class ChainSpec:
    temperature: float
    steps: int
    record_every: int = 1
    prefix_len: int = 0          # the first prefix_len content positions are frozen
    record_gaps: bool = False    # score gap of the token written at each step
    checkpoint_every: int = 1000


@dataclass
class ChainRun:
    """What a run recorded. ``states[r, b]`` is chain b at step ``steps[r]``."""

    steps: np.ndarray            # (R,)
    states: np.ndarray           # (R, B, n) token ids
    gaps: np.ndarray | None      # (S, B) raw-score gap of the written token at steps 1..S
    sites: np.ndarray | None     # (S, B) the site each chain updated
    spec: ChainSpec
    seed: int


def validate(scorer: Scorer, init: torch.Tensor, spec: ChainSpec) -> None:
    """Every bad input gets one clear error here, before any model call."""
    if not (isinstance(spec.temperature, (int, float)) and np.isfinite(spec.temperature) and spec.temperature > 0):
        raise ValueError(f"temperature must be a positive number, got {spec.temperature!r}")
    if init.ndim != 2 or init.shape[0] < 1 or init.shape[1] < 1:
        raise ValueError(f"initial states must be a (chains, n) array with n >= 1, got shape {tuple(init.shape)}")
    n = init.shape[1]
    if n > scorer.max_length:
        raise ValueError(f"sequence length n={n} exceeds what the model accepts ({scorer.max_length} "
                         f"content tokens after its special tokens)")
    if not 0 <= spec.prefix_len < n:
        raise ValueError(f"a frozen prefix of {spec.prefix_len} tokens leaves no free site in n={n}")
    if scorer.vocab.size == 0:
        raise ValueError("the allowed vocabulary is empty")
    if spec.steps < 0 or spec.record_every < 1 or spec.checkpoint_every < 1:
        raise ValueError(f"steps >= 0, record_every >= 1 and checkpoint_every >= 1 are required: {spec}")


def sample_index(scores: torch.Tensor, temperature: float, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw from softmax(scores / T) row by row, with given uniforms u in [0, 1)."""
    p = torch.softmax(scores.float() / temperature, dim=-1)
    cdf = torch.cumsum(p.double(), dim=-1)
    idx = torch.searchsorted(cdf, (u.to(cdf.device) * cdf[:, -1]).unsqueeze(1), right=True).squeeze(1)
    return idx.clamp_(max=scores.shape[-1] - 1)


def score_gap(scores: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """s(x_i) - max_{a != x_i} s(a) for the token at ``index`` of each row (negative if not argmax)."""
    rows = torch.arange(scores.shape[0], device=scores.device)
    own = scores[rows, index]
    other = scores.clone()
    other[rows, index] = -torch.inf
    return own - other.max(dim=-1).values


def step(scorer: Scorer, states: torch.Tensor, spec: ChainSpec, gen: torch.Generator):
    """One Glauber step for every chain, in place. Returns (sites, gaps or None)."""
    b, n = states.shape
    sites = torch.randint(spec.prefix_len, n, (b,), generator=gen)
    u = torch.rand(b, generator=gen, dtype=torch.float64)
    s = scorer.scores(states, sites)
    idx = sample_index(s, spec.temperature, u)
    states[torch.arange(b), sites] = scorer.vocab.ids.to(idx.device)[idx].to(states.device)
    gaps = score_gap(s, idx).float().cpu() if spec.record_gaps else None
    return sites, gaps


def _fingerprint(scorer: Scorer, init: torch.Tensor, spec: ChainSpec, seed: int, model_id: str) -> str:
    h = hashlib.sha1()
    h.update(json.dumps([asdict(spec), seed, model_id, scorer.vocab.key()], sort_keys=True).encode())
    h.update(init.cpu().numpy().astype(np.int64).tobytes())
    return h.hexdigest()


def _save_atomic(obj, path: Path) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def run(scorer: Scorer, init: torch.Tensor, spec: ChainSpec, seed: int, *, out_dir: str | Path | None = None,
        model_id: str = "", progress: bool = False,
        on_checkpoint: Callable[[int], None] | None = None) -> ChainRun:
    """Run ``init.shape[0]`` chains for ``spec.steps`` steps; resume from ``out_dir`` if it holds a checkpoint.

    ``on_checkpoint(step)`` is called after each checkpoint is written (the tests use it to
    simulate a kill).
    """
    init = torch.as_tensor(init, dtype=torch.long)
    validate(scorer, init, spec)
    fp = _fingerprint(scorer, init, spec, seed, model_id)
    gen = torch.Generator().manual_seed(int(seed))
    states = init.clone()
    done = 0
    chunks: list[dict] = []
    ckpt = None
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        ckpt = out_dir / "checkpoint.pt"
        if ckpt.exists():
            saved = torch.load(ckpt, weights_only=False)
            if saved["fingerprint"] != fp:
                raise ValueError(f"{out_dir} holds a run with other parameters, seed, model or starts; "
                                 f"use another folder or delete it")
            states, done, chunks = saved["states"], saved["step"], saved["chunks"]
            gen.set_state(saved["generator"])
        else:
            _write_manifest(out_dir, spec, seed, model_id, scorer, init)
        for stale in out_dir.glob("chunk-*.npz"):       # written after the last checkpoint
            if stale.name not in {c["file"] for c in chunks}:
                stale.unlink()
    if done == 0 and not chunks:
        chunks.append(_write_chunk(out_dir, 0, {"steps": np.array([0]), "states": states.numpy()[None].copy()}))

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=spec.steps, initial=done, unit="step", desc="glauber")
    while done < spec.steps:
        stop = min(done + spec.checkpoint_every, spec.steps)
        rec_steps, rec_states, gaps, sites = [], [], [], []
        for t in range(done + 1, stop + 1):
            site, gap = step(scorer, states, spec, gen)
            sites.append(site.numpy())
            if gap is not None:
                gaps.append(gap.numpy())
            if t % spec.record_every == 0:
                rec_steps.append(t)
                rec_states.append(states.numpy().copy())
            if bar is not None:
                bar.update(1)
        block = {"steps": np.array(rec_steps, dtype=np.int64),
                 "states": np.stack(rec_states) if rec_states else np.zeros((0,) + tuple(states.shape), np.int64),
                 "sites": np.stack(sites).astype(np.int32)}
        if spec.record_gaps:
            block["gaps"] = np.stack(gaps).astype(np.float32)
        chunks.append(_write_chunk(out_dir, done + 1, block))
        done = stop
        if ckpt is not None:
            _save_atomic({"fingerprint": fp, "states": states, "step": done, "chunks": chunks,
                          "generator": gen.get_state()}, ckpt)
            if on_checkpoint is not None:
                on_checkpoint(done)
    if bar is not None:
        bar.close()
    return _assemble(chunks, out_dir, spec, seed)


def _write_manifest(out_dir: Path, spec: ChainSpec, seed: int, model_id: str, scorer, init: torch.Tensor) -> None:
    from .results import git_commit, versions

    lm = getattr(scorer, "lm", None)
    manifest = {"parameters": asdict(spec), "seed": seed, "model": model_id,
                "revision": getattr(lm, "revision", None), "allowed_vocabulary": scorer.vocab.key(),
                "chains": int(init.shape[0]), "n": int(init.shape[1]), "git": git_commit(), "versions": versions()}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))


def _write_chunk(out_dir: Path | None, start: int, block: dict) -> dict:
    if out_dir is None:
        return {"file": None, "start": start, "data": block}
    name = f"chunk-{start:010d}.npz"
    tmp = out_dir / (name + ".tmp.npz")
    np.savez(tmp, **block)
    os.replace(tmp, out_dir / name)
    return {"file": name, "start": start}


def _assemble(chunks: list[dict], out_dir: Path | None, spec: ChainSpec, seed: int) -> ChainRun:
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
