"""Measured builds, the plan's evidence: per chapter, the wall seconds of a first run, the parameters
it ran with, and the probe read at the start of its build (:func:`collect`, from what a build
records), committed as JSON files under ``data/timings/`` (measurements, as the GPU sessions under
``data/gpu/`` are; outside the package, so that no chapter's stamp is keyed on them); and the
constants of each chapter fitted to them (:func:`fit`).

A record's ``role`` says what it is for: ``fit`` records set the constants, ``held_out`` records
only test them (``tests/bookbuild/test_plan_records.py``): a plan within 1.5x of a fit record is a
check of the code, within 1.5x of a held-out one is a finding. The calibration machine's build of
f52a2ef (:mod:`.calibration`, its probe inferred) is read only when asked (``load(calibration=True)``);
which measured builds are the fit is said under **The model** below.

**The model.** On a machine whose probe reads ``one`` s a pass on one thread and ``many`` s on
torch's threads, a chapter whose parameters ask for encoder work ``E`` and bookkeeping ``K``
(:func:`.work.work_parts`) takes ``A + C * K * one / REFERENCE_PROBE_ONE_S + B * E * many /
REFERENCE_PROBE_S`` seconds: ``A`` the fixed time of a chapter (kernel start, imports, reading the
profile, writing the page), ``B`` its seconds per unit of encoder work and ``C`` per unit of its own
work in Python and numpy (each row's floor, chain events, linear algebra), at the reference probe.
``A`` is seconds as they are, not scaled by the probe: it is process start-up, imports and files,
which a matrix-product probe does not read. Measured: the cost appendix (no work) took 6.0 to 9.0 s
in four builds whose one-thread probe read 0.116 to 0.203 s (a 1.75x spread), and the smoke build of
2026-12-02, whose probe read 1.7x faster than the smoke build of 2026-12-01, ran its chapters
0.77 to 0.98 times as long. :func:`fit` reads ``A`` off the chapter that counts no work (the cost
appendix) and chooses each chapter's ``B, C >= 0`` to minimise the squared relative errors over its
fit records (non-negative least squares). With two fit records per chapter (an offline build and a
smoke build) the fit is exact on them, so only held-out records test it.

The fit records are builds of the chapters' code as it is: every chapter moved onto the scheduler
on 2026-12-02 (one unit per model, the traps chains in blocks), so the builds of 2026-12-01 are held
out since, and the builds of 2026-12-02 (offline and smoke, both at e1dd2f9's code) are the fit.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...paths import repo_root
from .calibration import (CALIBRATION_COMMIT, CALIBRATION_PARAMETERS, CALIBRATION_SECONDS, OVERHEAD_S,
                          REFERENCE_PROBE_ONE_S, REFERENCE_PROBE_S)
from .work import work_parts

RECORDS = repo_root() / "data" / "timings"
ROLES = ("fit", "held_out")


@dataclass(frozen=True)
class Run:
    """One chapter's measured first run in one recorded build."""

    record: str
    role: str
    profile: str
    chapter: str
    seconds: float
    parameters: dict
    one: float                # the build's probe: seconds a pass on one thread
    many: float               # ... and on torch's threads

    def terms(self) -> tuple[float, float, float]:
        """The coefficients of (A, B, C) in this run's predicted seconds: the fixed time as it is, the
        encoder work at the reading on torch's threads, the bookkeeping at the one-thread reading."""
        encoder, books = work_parts(self.chapter, self.parameters) or (0.0, 0.0)
        return 1.0, encoder * self.many / REFERENCE_PROBE_S, books * self.one / REFERENCE_PROBE_ONE_S


def calibration_runs() -> list[Run]:
    """The calibration machine's build of f52a2ef as runs of a record (its probe inferred), for
    comparison: no longer in the fit (:func:`load`)."""
    return [Run(f"calibration-{CALIBRATION_COMMIT}", "held_out", "offline", ch, float(s), CALIBRATION_PARAMETERS[ch],
                REFERENCE_PROBE_ONE_S, REFERENCE_PROBE_S) for ch, s in CALIBRATION_SECONDS.items()]


def read(path: Path) -> list[Run]:
    """The runs of one record file (``collect``'s shape). Raises ValueError naming the file and the
    field at fault."""
    path = Path(path)
    data = json.loads(path.read_text())
    role = data.get("role")
    if role not in ROLES:
        raise ValueError(f"{path}: role = {role!r}; allowed: {', '.join(ROLES)}")
    runs = []
    for ch, v in sorted(data.get("chapters", {}).items()):
        one, many = v.get("probe") or (None, None)
        if not (isinstance(v.get("seconds"), (int, float)) and one and many):
            raise ValueError(f"{path}: chapter {ch!r} needs seconds and a probe reading")
        runs.append(Run(path.stem, role, str(data["profile"]), ch, float(v["seconds"]), dict(v["parameters"]),
                        float(one), float(many)))
    return runs


def load(folder: Path = RECORDS, *, calibration: bool = False) -> list[Run]:
    """Every run of every record under ``folder`` (and the calibration machine's, when asked)."""
    runs = calibration_runs() if calibration else []
    for path in sorted(Path(folder).glob("*.json")):
        runs += read(path)
    return runs


def fit(runs: list[Run]) -> dict[str, tuple[float, float, float]]:
    """{chapter: (A, B, C)} from the ``fit`` runs. ``A`` is one fixed time for every chapter, read
    off the fit runs of the chapters that count no work (the cost appendix: a kernel, its imports
    and a page), as the median of their seconds; ``B`` and ``C`` of each
    chapter are then non-negative least squares on the relative errors of what is left."""
    from scipy.optimize import nnls

    mine = [r for r in runs if r.role == "fit"]
    bare = [r.seconds for r in mine if work_parts(r.chapter, r.parameters) is None]
    a = float(np.median(bare)) if bare else OVERHEAD_S
    out = {}
    for ch in sorted({r.chapter for r in mine}):
        these = [r for r in mine if r.chapter == ch]
        if work_parts(ch, these[0].parameters) is None:
            out[ch] = (a, 0.0, 0.0)
            continue
        X = np.array([r.terms() for r in these])
        coef, _ = nnls(X[:, 1:] / np.array([[r.seconds] for r in these]),
                       np.array([max(r.seconds - a * x[0], 0.0) / r.seconds for r, x in zip(these, X)]))
        out[ch] = (a, float(coef[0]), float(coef[1]))
    return out


def predicted(run: Run, constants: dict[str, tuple[float, float, float]]) -> float | None:
    """The plan's seconds for this run's chapter, parameters and probe (None: no constants)."""
    if run.chapter not in constants:
        return None
    return float(np.dot(constants[run.chapter], run.terms()))


def collect(profile: str, staged: Path, results_root: Path, role: str, note: str = "") -> dict:
    """A record of a finished build: each chapter's recorded seconds and probe (its profile's
    ``timings.json``) and the parameters that ran (its stamp). Chapters recorded without a probe
    (their plan read a last run, so no probe was taken) are left out."""
    from .. import stamps

    if role not in ROLES:
        raise ValueError(f"role = {role!r}; allowed: {', '.join(ROLES)}")
    chapters = {}
    for ch, v in sorted(stamps.read_timings(Path(results_root) / profile / "timings.json").items()):
        stamp = stamps.read_stamp(stamps.stamp_path(Path(staged), ch))
        if not v.get("probe") or not stamp:
            continue
        prm = {k: x for k, x in stamp["inputs"]["parameters"].items() if k != "results_root"}
        chapters[ch] = {"seconds": v["seconds"], "probe": v["probe"], "when": v.get("when"),
                        "machine": v.get("machine"), "parameters": prm}
    return {"profile": profile, "role": role, "note": note, "chapters": chapters}


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m textglauber.bookbuild.estimates.records",
                                 description="write a finished build's record for the plan's calibration")
    ap.add_argument("--profile", required=True)
    ap.add_argument("--build-dir", default="_build")
    ap.add_argument("--results", default="results")
    ap.add_argument("--role", choices=ROLES, required=True)
    ap.add_argument("--note", default="")
    ap.add_argument("--out", required=True, help="the record file (data/timings/<name>.json)")
    a = ap.parse_args(argv)
    rec = collect(a.profile, Path(a.build_dir) / a.profile, Path(a.results), a.role, a.note)
    Path(a.out).write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")
    print(f"{a.out}: {len(rec['chapters'])} chapters ({', '.join(rec['chapters'])})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
