"""How long a chapter or an artifact should take on this machine when no run of it is recorded
here: its work counted from its parameters, seconds per unit of that work fitted to measured builds,
and this machine's speed relative to the reference read off a short probe.

**The probe** times a fixed batch (32 sequences of 22 tokens, the size of a chapter's batched
chains) through a randomly initialised BERT of the shape of the offline profile's English MLM
(6 layers, 384 wide, 12 heads, 30,522 tokens), scoring one masked row per sequence as the chain
engine does: the median of 2 to 12 passes on one thread, then on torch's threads (the kernels'
setting), about 1.5 s each on a quiet 2-core machine (plus the imports, which the build makes
anyway). A chapter's own Python work is scaled by the one-thread reading, its encoder work by the
other; its fixed time (kernel start, imports, files) is not scaled (:mod:`.records`). It measures
the machine as it is at that moment, other jobs on the same cores included. On an oversubscribed
machine the two readings part: at a load average of 10 on 2 cores, torch's 2 threads ran the probe 2 to 7 times slower than one thread did, and a
training step 2 to 4 times (each thread waits for its descheduled partner at every operation), so
such a machine makes every chapter several times slower, the heavy ones most.

**Calibration.** Each chapter has three constants, its fixed time and its seconds per unit of
encoder work and of its own work at the reference probe, fitted to measured first builds
(:mod:`.records`): the committed records under ``data/timings/``, each a build's per-chapter
seconds, parameters and probe reading. A record is ``fit`` or ``held_out``; the test suite puts the
plan beside every record's chapters, and only the held-out ones are evidence that it prices work it
has not seen. The calibration machine's build below, whose probe reading is inferred, is no longer
in the fit (``records.load(calibration=True)`` still reads it); its readings remain the reference
units of the probe's scale.

*The calibration machine* (``CALIBRATION_SECONDS``). On 2026-11-24 a fresh clone's default build on a
2-core machine took, at commit f52a2ef (``params/offline.yaml`` of that commit): incompatibility 119 s,
bounds 178 s, crossover 790 s, traps 345 s, basins 341 s, ground truth 92 s (31 min of chapters),
the English training 28.5 min and the default benchmark about 5 min, about 65 min in all. The
same build on another 2-core machine on 2026-11-25 took over 3 hours (chapters about 119 min,
crossover 2,868 s and traps 1,944 s among them, training 59 min, benchmark 12 min): the factor
between the two, 2 to 3.6, is what the probe is meant to read off in advance. The probe was not
run on that machine; its readings there (``REFERENCE_PROBE_S``, ``REFERENCE_PROBE_ONE_S``) are
inferred from the English training, which it did run: on the machine this module was written on,
a MiniLM optimiser step (batch 32 x 52 tokens, masked head, AdamW) timed between probes took 9 to
13 probe passes on one thread (median 11) and 6 to 9.5 on two under load (about 9.5 expected
quiet, as the two workloads' multiplies are of a size), and the training's 28.5 min there come
to about 1.59 s a MiniLM step (1,066 step-equivalents: 850 steps, 360 scratch steps at 0.39 of
one, 14 evaluations and two pseudo-perplexities), so 0.16 s a probe pass on 2 threads, and 0.26 s
on one with the 1.8 speed-up of the second thread that the training's step counts assume. The
training, benchmark and stand-in lines of the plan still rest on that machine alone.

The work counts are only as good as their formulas (a run that stops early, as coupled pairs that
meet do, costs less than its upper bound, which the fit absorbs at the recorded parameters only):
read the estimates as the order of magnitude, and the records' ratios as how far they held.

The package: ``calibration`` (the calibration machine's times and parameters), ``costs`` (a
scored row of each model), ``work`` (each chapter's work count), ``seconds`` (a chapter's estimate,
a last run rescaled), ``records`` (measured builds and the fit of each chapter's constants),
``probing`` (this machine's speed: :func:`probe`), ``training`` (a training preset's work) and
``workers`` (a chapter's time with its units on N workers: the plan's N-worker line).
"""
from __future__ import annotations

from .calibration import (BENCH_SECONDS, CALIBRATION_COMMIT, CALIBRATION_PARAMETERS, CALIBRATION_SECONDS, FIXED_S,
                          OVERHEAD_S, REFERENCE_PROBE_ONE_S, REFERENCE_PROBE_S, REFERENCE_TRAINING_STEPS,
                          STANDINS_SECONDS, TRAINING_OVERHEAD_S, TRAINING_SECONDS)
from .costs import CHAIN_ROW_FLOOR, MINILM_SHAPE, REF_ROW, ROW_FLOOR, SHAPES, layer_cost, model_cost, step_cost
from .probing import PROBE_BATCH, PROBE_BUDGET_S, PROBE_PASSES, PROBE_TOKENS, Probe, probe
from .seconds import estimate, reference_work, rescaled
from .training import training_done, training_work
from .work import (COUPLING_SHARE, ESCAPE_CHAIN, ESCAPE_ROWS, EXACT_STEP, FIND_SWEEPS, PHASE_CELL, SEARCH_ROWS,
                   chapter_work, work_parts)

__all__ = ["BENCH_SECONDS", "CALIBRATION_COMMIT", "CALIBRATION_PARAMETERS", "CALIBRATION_SECONDS", "CHAIN_ROW_FLOOR",
           "COUPLING_SHARE", "ESCAPE_CHAIN", "ESCAPE_ROWS", "EXACT_STEP", "FIND_SWEEPS", "FIXED_S", "MINILM_SHAPE",
           "OVERHEAD_S", "PHASE_CELL", "PROBE_BATCH", "PROBE_BUDGET_S", "PROBE_PASSES", "PROBE_TOKENS", "Probe",
           "REFERENCE_PROBE_ONE_S", "REFERENCE_PROBE_S", "REFERENCE_TRAINING_STEPS", "REF_ROW", "ROW_FLOOR",
           "SEARCH_ROWS", "SHAPES", "STANDINS_SECONDS", "TRAINING_OVERHEAD_S", "TRAINING_SECONDS", "chapter_work", "estimate",
           "layer_cost", "model_cost", "probe", "reference_work", "rescaled", "step_cost",
           "training_done", "training_work", "work_parts"]
