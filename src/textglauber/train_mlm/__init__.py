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

The package, one module per part: ``presets`` (the presets, their overrides, the MiniLM start's
weights), ``data`` (pieces, batches, masking, the held-out set), ``model`` (the starts' networks and
their held-out metrics), ``loop`` (one start's training, its resumable state and progress lines),
``run`` (``train`` over the starts under the resume key and the lock), ``current`` (``is_current``,
``ensure``), ``notes`` (what the pages say about a trained run) and ``cli`` (``python -m
textglauber.train_mlm``). The modules that import torch (``cli``, ``data``, ``loop``, ``model``, ``run``)
load when one of their names is first asked of the package.
"""
from __future__ import annotations

from .current import ensure, is_current
from .notes import CORPUS_WORDS, MINILM_NAMES, describe, origin_note, shared_encoder_note
from .presets import PRESETS, RESUME_FORMAT, Preset, TrainingTimeGuard, minilm_dir, resolve_preset

_WITH_TORCH = {"cli": ("main",),
               "data": ("Data", "batches", "chunks", "collate", "epoch_batches", "mask_batch", "prepare", "split_docs"),
               "loop": ("StepReport", "checkpoint_steps", "learning_rate", "train_start"),
               "model": ("build_model", "evaluate", "masked_logits", "pseudo_perplexity"),
               "run": ("resume_key", "train")}


def __getattr__(name: str):
    """The parts that import torch load on first use: a build that only asks whether its models
    are current, or a page that reads the notes, imports none of them."""
    part = next((p for p, names in _WITH_TORCH.items() if name in names), None)
    if part is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import cli, data, loop, model, run

    return getattr({"cli": cli, "data": data, "loop": loop, "model": model, "run": run}[part], name)


__all__ = ["CORPUS_WORDS", "MINILM_NAMES", "PRESETS", "RESUME_FORMAT", "Data", "Preset", "StepReport",
           "TrainingTimeGuard", "batches", "build_model", "checkpoint_steps", "chunks", "collate", "describe",
           "ensure", "epoch_batches", "evaluate", "is_current", "learning_rate", "main", "mask_batch",
           "masked_logits", "minilm_dir", "origin_note", "prepare", "pseudo_perplexity", "resolve_preset",
           "resume_key", "shared_encoder_note", "split_docs", "train", "train_start"]
