"""The short benchmark as a cached build artifact, so that the cost appendix shows the engine's
speed measured on the machine that built the book.

A profile lists ``bench`` (the default profile: the BERT-base shape and the packaged models at
n = 20, batch 1 and 64, one step per timed call), ``bench-smoke`` (the BERT-base shape alone, one
step per timed call) or ``bench-metastable`` (the engine's modes on the quick metastable grid)
among its ``artifacts``. ``bench`` timed three steps per call until 2026-11-25, which took about
5 minutes on one 2-core machine and 12 on another in a fresh clone's first build; most of that
was the BERT-base shape at batch 64, whose older variants (one pass per chain with full logits,
and full B x n x V logits) pay for every step. One step a call keeps every cell and ratio the
cost appendix reads at about half the time; the full grid is ``python -m textglauber.bench``.
The build runs ``python -m textglauber.bench`` with the preset's arguments, writing
``results/bench/bench-cpu-<preset>.csv`` and its JSON record, and runs it again only when its key
changes: the arguments, the library code the benchmark can reach, the installed versions and the
machine (processor and core count).
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import provenance
from ..reach import code_inputs

PRESETS = {
    "bench": ["--models", "bert-base", "package:antiberty", "package:rxnfp-bert", "--lengths", "20",
              "--batches", "1", "64", "--steps", "1"],
    "bench-smoke": ["--models", "bert-base", "--lengths", "20", "--batches", "1", "64", "--steps", "1"],
    # the memoizing engine's modes on the metastable grid (n = 20, T = 0.25, 1, 2, a perfect trap)
    "bench-metastable": ["--metastable", "--quick"],
}
PROBE = "from textglauber.bench import __main__"      # what the key's code covers: the command and all it imports


def code() -> dict:
    """{file: SHA-256} of the library modules a benchmark run (``python -m textglauber.bench``) can reach."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.ipynb"
        probe.write_text(json.dumps({"cells": [{"cell_type": "code", "source": [PROBE],
                                                "metadata": {}, "outputs": []}], "metadata": {}, "nbformat": 4,
                                     "nbformat_minor": 5}))
        return code_inputs(probe)


def key(preset: str) -> dict:
    """What the artifact depends on."""
    return {"arguments": PRESETS[preset], "code": code(), "environment": provenance.versions(), "machine": provenance.machine()}


def paths(preset: str, results_root: Path) -> tuple[Path, Path]:
    """The table (named as the page looks for it: bench-* for throughput, metastable-* for the
    engine's modes) and the artifact's stamp (a name the page does not read)."""
    folder = Path(results_root) / "bench"
    kind = "metastable" if "--metastable" in PRESETS[preset] else "bench"
    return folder / f"{kind}-cpu-{preset}.csv", folder / f"artifact-{preset}.json"


def ensure(preset: str, results_root: str | Path) -> Path:
    """The preset's benchmark table, measured now if it is missing or its key changed."""
    if preset not in PRESETS:
        raise SystemExit(f"unknown benchmark artifact {preset!r}; known: {', '.join(PRESETS)}")
    csv, stamp = paths(preset, Path(results_root))
    wanted = provenance.digest(key(preset))
    if csv.exists() and stamp.exists() and json.loads(stamp.read_text()).get("key") == wanted:
        print(f"[bench] {preset}: measured before on this machine with the same code ({csv.name})", flush=True)
        return csv
    stamp.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "textglauber.bench", *PRESETS[preset], "--out", str(csv)]
    print(f"[bench] {preset}: measuring ({' '.join(cmd[1:])})", flush=True)
    t0 = time.time()
    subprocess.run(cmd, check=True)
    # the wall time is for the build's plan (textglauber.plan), which shows it when the key changes
    provenance.write_json_atomic(stamp, {"key": wanted, "preset": preset, "seconds": round(time.time() - t0, 1)})
    return csv
