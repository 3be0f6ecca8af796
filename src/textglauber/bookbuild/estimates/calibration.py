"""The calibration: the chapters' times on the calibration machine, the parameters they ran with,
the fixed times of the artifacts and the probe's inferred readings there (see
:mod:`textglauber.bookbuild.estimates`)."""
from __future__ import annotations

CALIBRATION_COMMIT = "f52a2ef"
# wall seconds of each chapter on the calibration machine (2026-11-24, 2 cores, profile offline)
CALIBRATION_SECONDS = {"incompatibility": 119.0, "bounds": 178.0, "crossover": 790.0, "traps": 345.0,
                       "basins": 341.0, "ground_truth": 92.0}
# the parameters those times ran with, as far as chapter_work() reads them: params/offline.yaml at
# CALIBRATION_COMMIT (tests/bookbuild/test_plan.py compares them with `git show f52a2ef:params/offline.yaml`
# where git has that commit); reference_work() is chapter_work() at them.
_MLMS = [{"name": "package:antiberty"}, {"name": "package:rxnfp-bert"}, {"name": "package:rxnmapper-albert"},
         {"name": "trained:english"}]
_ENGLISH = {"name": "trained:english", "embedder": "sentence:package:all-MiniLM-L6-v2"}
CALIBRATION_PARAMETERS = {
    "incompatibility": {"models": _MLMS, "seq_len": 20, "n_rectangles": 300, "grid_k": 4, "n_grids": 30,
                        "training_run": "english",
                        "control": {"name": "package:smollm2-135m", "rectangles": 20, "candidates": 16}},
    "bounds": {"models": _MLMS, "seq_len": 14, "n_contexts": 3, "top_k": 10, "extra": 5, "drift_states": 200,
               "drift_temperatures": [0.5, 1.0]},
    "crossover": {"model": _ENGLISH, "lengths": [6, 10, 16, 28, 48], "drift_temperatures": [0.5, 1.0, 2.0],
                  "trials": 20, "steps": 200, "record_every": 10, "coupling_lengths": [6, 10, 16, 24],
                  "coupling_temperatures": [0.25, 0.5, 1.0, 1.5, 2.0, 3.0], "pairs": 8, "budget": 1200},
    "traps": {"model": _ENGLISH, "seq_len": 20, "chains": 16, "steps": 10000, "record_every": 10},
    "basins": {"models": [{"name": "trained:english"}], "topic_scorer": "embedding:package:all-MiniLM-L6-v2",
               "seeds_per_topic": 4, "chains_per_seed": 2, "seq_len": 16, "steps": 3000, "score_every": 100,
               "prefix_chains": 8},
    "ground_truth": {"models": [{"name": "package:rxnmapper-albert", "tokens": ["C", "c", "O", "N"], "n": 5},
                                {"name": "package:antiberty", "tokens": ["G", "S", "Y", "A"], "n": 5},
                                {"name": "trained:english", "tokens": ["the", "a", "of", "and"], "n": 5}],
                     "temperatures": [0.25, 0.5, 1.0, 2.0, 4.0], "pairs": 300, "budget": 5000, "rectangles": 1000,
                     "chains": 32, "holding": {"temperatures": [0.1, 0.25], "deepest": 2, "chains": 200,
                                                                                      "steps": 10_000_000}},
}
OVERHEAD_S = 12.0               # per chapter at the reference speed: kernel, imports, models, figures
FIXED_S = {"cost": 30.0}        # chapters with no work count and no fit: seconds, whatever the probe reads
# the English training preset on the calibration machine (850 MiniLM and 360 scratch steps)
TRAINING_SECONDS = {"english": 28.5 * 60}
REFERENCE_TRAINING_STEPS = {"minilm": 850, "scratch": 360}
TRAINING_OVERHEAD_S = 20.0      # corpus, tokenizer, first evaluation
# the build's benchmark artifacts at the reference speed (textglauber.bench.cache.PRESETS)
BENCH_SECONDS = {"bench": 150.0, "bench-smoke": 60.0, "bench-metastable": 3600.0}
STANDINS_SECONDS = 240.0        # every stand-in of the standin profile (textglauber.standins)
REFERENCE_PROBE_S = 0.16        # the probe on torch's 2 threads on the calibration machine (inferred)
REFERENCE_PROBE_ONE_S = 0.26    # the probe on one thread there (inferred)
