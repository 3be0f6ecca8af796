"""The training loop of one start: learning-rate schedule, optimiser steps, checkpoints with
held-out metrics, resumable state written atomically, and the progress lines."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

import torch

from ..durations import duration
from .data import Data, batches, collate, mask_batch
from .model import build_model, evaluate, masked_logits, pseudo_perplexity
from .presets import RESUME_FORMAT, Preset, TrainingTimeGuard


def checkpoint_steps(total: int, count: int) -> list[int]:
    """The steps after which checkpoints are saved: evenly spaced, strictly increasing, the last ``total``."""
    return [total * (k + 1) // count for k in range(count)]


def learning_rate(preset: Preset, step: int, total: int) -> float:
    """Linear warm-up over ``preset.warmup`` of the steps, then linear decay to 5% of the peak."""
    f = step / total
    scale = min(1.0, f / preset.warmup) if preset.warmup > 0 else 1.0
    return preset.lr * scale * max(0.05, 1 - f)


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Write to a temporary name next to ``path``, then rename: a kill leaves the old file or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def write_json(path: Path, obj) -> None:
    write_atomic(path, lambda p: p.write_text(json.dumps(obj, indent=2, default=str)))


def _optimizer_step(model, opt, preset: Preset, lr: float, batch, tok, mask_gen: torch.Generator):
    """One masked-LM optimiser step on the stream's next ``(cursor, pieces)``: returns the stream's
    new cursor, the loss and the tokens the batch held."""
    cursor, pieces = batch
    for g in opt.param_groups:
        g["lr"] = lr
    ids, attn = collate(pieces, tok)
    inputs, pos, tgt = mask_batch(ids, attn, tok, preset.mask_prob, len(tok), mask_gen)
    loss = torch.nn.functional.cross_entropy(masked_logits(model, inputs, attn, pos), tgt)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return cursor, loss, int(attn.sum())


def _save_checkpoint(model, data: Data, path: Path) -> dict:
    """Save the model and tokenizer at ``path`` and return its held-out metrics."""
    model.save_pretrained(path)
    data.tok.save_pretrained(path)
    return evaluate(model, data.eval_set, data.tok)


def _progress(start: str, total: int, step: int):
    """``(bar, report)``: a tqdm bar on a terminal, else plain lines for a log file (where a bar
    would be carriage returns); the other one is None."""
    if sys.stderr.isatty():
        from tqdm.auto import tqdm

        return tqdm(total=total, initial=step, unit="step", desc=start), None
    return None, StepReport(start, total, step)


def _resume(state_file: Path, model, opt, mask_gen: torch.Generator, data: Data) -> tuple:
    """Restore a start's saved state into ``model``, ``opt``, ``mask_gen`` and torch's global
    generator (dropout draws from it), or evaluate the untrained model for a fresh start. Returns
    ``(step, tokens seen, stream cursor, initial metrics, checkpoints, seconds, CPU seconds, session)``."""
    if not state_file.exists():
        return 0, 0, (0, 0), evaluate(model, data.eval_set, data.tok), [], 0.0, 0.0, 1
    st = torch.load(state_file, weights_only=False)
    model.load_state_dict(st["model"])
    opt.load_state_dict(st["optimizer"])
    mask_gen.set_state(st["mask_gen"])
    torch.set_rng_state(st["torch_rng"])
    return (st["step"], st["tokens_seen"], tuple(st["cursor"]), st["initial"], st["checkpoints"], st["seconds"],
            st["cpu_seconds"], st["sessions"] + 1)


def train_start(start: str, preset: Preset, data: Data, out: Path, seed: int, progress: bool = False,
                on_step: Callable[[str, int], None] | None = None, deadline: float | None = None) -> dict:
    """Train one start for ``preset.steps_of(start)`` steps in ``out/start``, resuming from its saved
    state if there is one; a finished start (``run.json`` present) is returned as it is.

    ``on_step(start, step)`` is called after every step (tests interrupt a run by raising from it);
    ``deadline`` (a ``time.time()`` value) is the guard: past it the state is saved and
    ``TrainingTimeGuard`` raised."""
    folder = out / start
    folder.mkdir(parents=True, exist_ok=True)
    done, state_file = folder / "run.json", folder / "state.pt"
    if done.exists():
        return json.loads(done.read_text())
    tok, total = data.tok, preset.steps_of(start)
    marks = checkpoint_steps(total, preset.checkpoints)
    model = build_model(start, preset, tok, data.unigram, seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=preset.lr, weight_decay=0.01)
    mask_gen = torch.Generator().manual_seed(seed + 1)
    step, seen, cursor, initial, ckpts, seconds0, cpu0, sessions = _resume(state_file, model, opt, mask_gen, data)
    stream = batches(data.train_pieces, preset.batch, seed, *cursor)
    t0, c0 = time.time(), time.process_time()

    def seconds() -> float:
        return seconds0 + time.time() - t0

    def cpu_seconds() -> float:
        return cpu0 + time.process_time() - c0

    def save_state() -> None:
        state = {"format": RESUME_FORMAT, "start": start, "model": model.state_dict(), "optimizer": opt.state_dict(),
                 "mask_gen": mask_gen.get_state(), "torch_rng": torch.get_rng_state(), "step": step,
                 "tokens_seen": seen, "cursor": list(cursor), "initial": initial, "checkpoints": ckpts,
                 "seconds": seconds(), "cpu_seconds": cpu_seconds(), "sessions": sessions}
        write_atomic(state_file, lambda p: torch.save(state, p))
        write_json(folder / "progress.json", {"step": step, "total": total, "seconds": round(seconds(), 1)})

    bar, report = _progress(start, total, step) if progress else (None, None)
    while step < total:
        if deadline is not None and time.time() > deadline:
            save_state()
            raise TrainingTimeGuard(
                f"training start {start!r} is at step {step} of {total} after the {preset.max_hours} h guard; "
                f"this machine is far slower than the preset expects. The state is saved in {out}: run the same "
                "command again to continue, or raise max_hours.")
        cursor, loss, tokens = _optimizer_step(model, opt, preset, learning_rate(preset, step, total), next(stream),
                                               tok, mask_gen)
        step += 1
        seen += tokens
        if report is not None:
            report(step)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{float(loss.detach()):.3f}")
        if step in marks:
            k = marks.index(step) + 1
            metrics = _save_checkpoint(model, data, folder / f"ckpt-{k}")
            ckpts.append({"checkpoint": k, "path": f"{start}/ckpt-{k}", "step": step, "tokens_seen": seen,
                          "elapsed_s": round(seconds(), 1), "cpu_s": round(cpu_seconds(), 1),
                          "fraction": round(step / total, 4), "train_loss": float(loss.detach()), **metrics})
            if bar is not None:
                bar.write(f"[{start}] checkpoint {k}: step {step}, held-out top-1 {metrics['top1']:.3f}, "
                          f"top-5 {metrics['top5']:.3f}, loss {metrics['heldout_loss']:.3f}")
        if step in marks or step % preset.save_every == 0:
            save_state()
        if on_step is not None:
            on_step(start, step)
    if bar is not None:
        bar.close()
    ppl = pseudo_perplexity(model, data.ppl_pieces, tok)
    run = {"start": start, "steps": step, "tokens_seen": seen, "seconds": round(seconds(), 1),
           "cpu_seconds": round(cpu_seconds(), 1), "threads": torch.get_num_threads(), "sessions": sessions,
           "initial": initial, "checkpoints": ckpts, "final": ckpts[-1], "pseudo_perplexity": ppl,
           "parameters": int(sum(p.numel() for p in model.parameters()))}
    write_json(done, run)
    state_file.unlink(missing_ok=True)
    (folder / "progress.json").unlink(missing_ok=True)
    return run


class StepReport:
    """One line on standard error about every minute (the first after 30 s) while a start trains:
    the step, the time this session has run and the time left at its pace so far (the remaining
    checkpoint evaluations add a little). The build's log shows these where a terminal would show
    a progress bar."""

    def __init__(self, label: str, total: int, step: int, first: float = 30.0, every: float = 60.0, out=None):
        self.label, self.total, self.step0, self.every, self.out = label, total, step, every, out
        self.t0 = time.time()
        self.next = self.t0 + first

    def line(self, step: int, now: float) -> str:
        per_step = (now - self.t0) / max(1, step - self.step0)
        return (f"[train] {self.label}: step {step}/{self.total}, {duration(now - self.t0)} elapsed, "
                f"about {duration(per_step * (self.total - step))} left for this start")

    def __call__(self, step: int) -> None:
        now = time.time()
        if now >= self.next:
            self.next = now + self.every
            print(self.line(step, now), file=self.out or sys.stderr, flush=True)
