"""What a build will do and how long it will take here: the plan printed at its start.

**The plan.** Before anything is built, ``python -m textglauber.bookbuild`` prints one line per
artifact (build, resume or reuse) and per chapter (run or skip, with the reason the build itself
gives: :func:`textglauber.bookbuild.stamps.status`, the same call that decides the skip), each with its
expected time on this machine and where that number comes from:

- ``last run: 790 s``: the chapter's last recorded wall time (its stamp, else
  ``results/<profile>/timings.json``), scaled by the work when its parameters have changed since;
- ``estimated from a 0.21 s probe: ~13 min``: no time recorded here, so the chapter's work,
  counted from its parameters, times the seconds per unit of work of the calibration machine,
  times this machine's speed relative to it read off a probe (:mod:`textglauber.bookbuild.estimates`).

Nothing the build computes reads these numbers: they are printed, and the progress lines use
them for the time left. The probe builds a random model in a forked random state, so even the
build process's generators are as they were.
"""
from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import profile as P
from .. import paths, scheduler
from ..bench import cache as bench_cache
from ..provenance import machine
from ..durations import duration   # one formatter for the plan, the progress lines and training
from . import stamps
from .artifacts import artifacts_needed
from .estimates import (BENCH_SECONDS, PROBE_BATCH, PROBE_TOKENS, REFERENCE_PROBE_ONE_S, REFERENCE_PROBE_S,
                        REFERENCE_TRAINING_STEPS, STANDINS_SECONDS, TRAINING_OVERHEAD_S, TRAINING_SECONDS, Probe,
                        estimate, probe, rescaled, training_done, training_work)

# --------------------------------------------------------------------------- last runs
def last_run(profile: str, chapter: str, staged: Path, results_root: Path) -> dict | None:
    """The last recorded execution: {'seconds', 'parameters' (or None), 'source'}. The stamp first
    (it holds the parameters that ran), then ``results/<profile>/timings.json``."""
    stamp = stamps.read_stamp(stamps.stamp_path(staged, chapter))
    if stamp and stamp.get("seconds"):
        return {"seconds": float(stamp["seconds"]), "parameters": stamp.get("inputs", {}).get("parameters"),
                "source": "stamp"}
    rec = stamps.read_timings(Path(results_root) / profile / "timings.json").get(chapter)
    if rec and rec["seconds"]:
        return {"seconds": float(rec["seconds"]), "parameters": None, "source": "timings.json"}
    return None


# --------------------------------------------------------------------------- the plan
@dataclass
class Line:
    kind: str                 # "artifact" or "chapter"
    name: str
    action: str               # build, resume, reuse / run, render, skip, maybe
    why: str
    seconds: float | None     # expected wall time here (0 for what is reused or skipped)
    basis: str                # where the number comes from

    def text(self) -> str:
        if self.action in ("skip", "reuse"):
            when = "-"
        elif self.action == "render":
            when = "no science runs"
        elif self.seconds is None:
            when = f"no estimate ({self.basis})" if self.basis else "no estimate"
        elif self.basis.startswith("last run"):
            when = f"{self.basis}: ~{duration(self.seconds)}" if "scaled" in self.basis else self.basis
        else:
            when = f"{self.basis}: ~{duration(self.seconds)}"
        label = f"{self.kind} {self.name}"
        return f"  {label:<27} {self.action:<7} {when}  [{self.why}]"


EXPECTED: dict[tuple[str, str], tuple[float, str]] = {}     # (profile, chapter) -> (seconds, basis), for watch()
PROBED: dict[str, tuple[float, float]] = {}                 # profile -> the plan's probe reading (one, many), for the timings


def chapter_lines(profile: str, spec: dict, chapters: list[str], staged: Path, results_root: Path,
                  forced: str | None, probe_: Probe, status=None) -> list[Line]:
    """One line per selected chapter in build order. Run, render or skip is the build's own decision
    (``status``: :func:`textglauber.bookbuild.stamps.action` over the chapter's inputs now); a chapter
    that would be skipped or re-rendered but reads one that runs is 'maybe': its key changes only if
    the upstream results do (and then its science runs, so its models are checked before any compute)."""
    if status is None:
        def status(ch):
            inputs = stamps.chapter_inputs(spec, profile, ch, results_root)
            return stamps.action(stamps.stamp_path(staged, ch), inputs, stamps.executed_notebook(staged, ch),
                                 Path(results_root) / profile / ch)
    lines, running = [], set()
    for ch in P.build_order(spec, chapters):
        prm = P.chapter_parameters(profile, ch, results_root, spec=spec)
        try:
            what, why = ("run", forced) if forced else status(ch)
        except Exception as exc:             # the build decides again when it gets there
            what, why = "run", f"could not tell now ({type(exc).__name__}: {exc})"
        ups = [u for u in spec["chapters"][ch].get("reads", []) if u in running]
        if what == "render" and not ups:     # the science is not run (a re-render stopped runs it in full)
            lines.append(Line("chapter", ch, "render", why, 0.0, ""))
            continue
        complete = what in (True, "skip", "render")
        if complete and not ups:
            lines.append(Line("chapter", ch, "skip", why, 0.0, ""))
            continue
        action = "run" if not complete else "maybe"
        if complete:
            kept = "re-rendered" if what == "render" else "skipped"
            why = f"{kept} unless the results of {', '.join(ups)} change"
        seconds, basis = expected(profile, ch, prm, staged, results_root, probe_)
        lines.append(Line("chapter", ch, action, why, seconds, basis))
        running.add(ch)
        if seconds is not None:
            EXPECTED[(profile, ch)] = (seconds, basis)
    return lines


def expected(profile: str, chapter: str, prm: dict, staged: Path, results_root: Path,
             probe_: Probe) -> tuple[float | None, str]:
    """(seconds, basis) of one chapter: the last recorded run, else the probe's estimate."""
    last = last_run(profile, chapter, staged, results_root)
    if last is not None:
        old = dict(last["parameters"] or {})
        now = {k: v for k, v in prm.items() if k != "results_root"}
        seconds, ratio = rescaled(last["seconds"], chapter, old or None, now)
        if ratio is None:
            return seconds, f"last run: {last['seconds']:.0f} s"
        return seconds, f"last run: {last['seconds']:.0f} s, scaled by {ratio:.2g}x the work"
    if probe_() is None:
        return None, f"probe failed: {probe_.error}"
    return estimate(chapter, prm, probe_), probe_.basis()


def _training_line(name: str, probe_: Probe) -> Line:
    from .. import train_mlm

    out = paths.models_root() / name
    if train_mlm.is_current(out, name):
        return Line("artifact", name, "reuse", f"trained before with these settings ({out})", 0.0, "")
    _, preset = train_mlm.resolve_preset(name)
    work, done = training_work(preset), 0.0
    partial = out.with_name(out.name + ".partial")
    trained_before = (out / "manifest.json").exists()
    action, why = "build", "trained under other settings" if trained_before else "not trained here yet"
    if partial.is_dir():
        done = training_done(preset, partial)
        if done:
            action, why = "resume", f"an interrupted training in {partial.name} (resumed if its settings match)"
    if _locked(out.with_name(out.name + ".lock")):
        why += "; another process is training it now, and the build waits for it"
    try:                                  # the last training here, under other settings
        old = json.loads((out / "manifest.json").read_text())
        last, last_work = float(old["seconds"]), training_work(type(preset)(**old["settings"]))
    except (OSError, ValueError, KeyError, TypeError):
        last, last_work = None, 0.0
    if last and last_work:
        return Line("artifact", name, action, why, last * max(work - done, 0.0) / last_work,
                    f"last run: {last:.0f} s" + ("" if math.isclose(work - done, last_work) else
                                                 f", scaled by {(work - done) / last_work:.2g}x the work"))
    if probe_() is None:
        return Line("artifact", name, action, why, None, f"probe failed: {probe_.error}")
    ref = TRAINING_SECONDS["english"]
    base = train_mlm.PRESETS["english"]
    ref_work = training_work(type(base)(**{**base.__dict__, "starts": tuple(REFERENCE_TRAINING_STEPS),
                                           "steps": dict(REFERENCE_TRAINING_STEPS)}))
    seconds = probe_.scale(TRAINING_OVERHEAD_S, (ref - TRAINING_OVERHEAD_S) * max(work - done, 0.0) / ref_work)
    return Line("artifact", name, action, why, seconds, probe_.basis())


def _locked(lock: Path) -> bool:
    """Whether another process holds ``train_mlm``'s lock on a training (never creates the file)."""
    if not lock.exists():
        return False
    try:
        import fcntl

        with open(lock, "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(fh, fcntl.LOCK_UN)
    except (OSError, ImportError):
        return False
    return False



def artifact_lines(names: list[str], results_root: Path, probe_: Probe) -> list[Line]:
    lines = []
    for name in names:
        try:
            lines.append(_artifact_line(name, Path(results_root), probe_))
        except Exception as exc:                # a plan line never stops the build
            lines.append(Line("artifact", name, "build?", f"could not tell ({type(exc).__name__}: {exc})", None, ""))
    return lines


def _artifact_line(name: str, results_root: Path, probe_: Probe) -> Line:
    if name in bench_cache.PRESETS:
        csv, stamp = bench_cache.paths(name, results_root)
        try:
            record = json.loads(stamp.read_text())
        except (OSError, ValueError):
            record = {}
        if csv.exists() and record.get("key") == stamps.digest(bench_cache.key(name)):
            return Line("artifact", name, "reuse", f"measured before on this machine with the same code ({csv.name})",
                        0.0, "")
        if record.get("seconds"):
            return Line("artifact", name, "build", "the code, versions or machine changed since it was measured",
                        float(record["seconds"]), f"last run: {float(record['seconds']):.0f} s")
        if probe_() is None:
            return Line("artifact", name, "build", "not measured here with this code", None, f"probe failed: {probe_.error}")
        return Line("artifact", name, "build", "not measured here with this code",
                    probe_.scale(0.0, BENCH_SECONDS.get(name, 300.0)), probe_.basis())
    if name == "standins":
        from .. import standins          # imports torch: only where the stand-ins are asked for

        todo = [s for s in list(standins.STANDINS) + [standins.MSMARCO_DIR]
                if not standins.is_current(s)]
        if not todo:
            return Line("artifact", name, "reuse", "every stand-in built before", 0.0, "")
        share = len(todo) / (len(standins.STANDINS) + 1)
        if probe_() is None:
            return Line("artifact", name, "build", f"{len(todo)} stand-ins to build", None, f"probe failed: {probe_.error}")
        return Line("artifact", name, "build", f"{len(todo)} stand-ins to build",
                    probe_.scale(0.0, STANDINS_SECONDS * share), probe_.basis())
    from .. import train_mlm

    if name in train_mlm.PRESETS:
        return _training_line(name, probe_)
    return Line("artifact", name, "build?", "unknown artifact", None, "")


def artifacts_of(spec: dict, chapters: list[str]) -> list[str]:
    """The artifacts the build will build for ``chapters``: the build's own selection
    (:func:`textglauber.bookbuild.artifacts.artifacts_needed`, asked quietly)."""
    return list(artifacts_needed(spec, chapters, log=lambda *a, **k: None))


def format_plan(profile: str, lines: list[Line], probe_: Probe) -> str:
    out = [f"[{profile}] plan of this build ({machine()['cores']} cores; load average "
           f"{os.getloadavg()[0]:.1f} now):" if hasattr(os, "getloadavg") else f"[{profile}] plan of this build:"]
    out += [ln.text() for ln in lines]
    sure = sum(ln.seconds or 0.0 for ln in lines if ln.action in ("run", "build", "resume"))
    maybe = sum(ln.seconds or 0.0 for ln in lines if ln.action == "maybe")
    unknown = [ln.name for ln in lines if ln.seconds is None and ln.action not in ("skip", "reuse")]
    total = f"  expected in all: ~{duration(sure)}"
    if maybe:
        total += f", up to ~{duration(sure + maybe)} if the chapters marked 'maybe' run"
    if unknown:
        total += f"; no estimate for {', '.join(unknown)}"
    out.append(total + " (plus the site build).")
    if probe_.many is not None:
        out.append(f"  probe: a batch of {PROBE_BATCH} x {PROBE_TOKENS} tokens through a 6-layer, 384-wide BERT took "
                   f"{probe_.many:.3f} s a pass on {_threads()} threads and {probe_.one:.3f} s on one; the calibration "
                   f"machine (65 min for a first default build): about {REFERENCE_PROBE_S:.3f} s and "
                   f"{REFERENCE_PROBE_ONE_S:.3f} s, so this one runs at about {REFERENCE_PROBE_S / probe_.many:.2g}x "
                   "its speed now. Other jobs on these cores slow the build (torch's threads most); "
                   "the numbers only inform, nothing reads them.")
    return "\n".join(out)


def _workers(setting: str) -> tuple[int | None, int | None]:
    """(workers, the cores they share, None where each has its own) for a scheduler setting: N of
    ``local:N`` on this machine's cores, or the workers a ``tcp://`` scheduler has now."""
    n = scheduler.local_workers(setting)
    if n is not None:
        return n, machine()["cores"]
    from distributed import Client

    with Client(setting, timeout="10s") as client:
        return len(client.scheduler_info().get("workers", {})), None


def worker_lines(profile: str, spec: dict, lines: list[Line], probe_: Probe, setting: str) -> list[str]:
    """The plan's estimate on the scheduler's N workers for the chapters that run and hand out units
    (:mod:`textglauber.bookbuild.estimates.workers`); nothing on ``serial``."""
    from .estimates.workers import START_S, TASK_OVERHEAD_S, on_workers

    if setting == "serial":
        return []
    try:
        workers, cores = _workers(setting)
    except Exception as exc:
        return [f"  on {setting}: no estimate (the scheduler's workers could not be counted: {type(exc).__name__})"]
    if not workers:
        return [f"  on {setting}: no estimate (the scheduler has no workers now)"]
    out, saved = [], 0.0
    for ln in lines:
        if ln.kind != "chapter" or ln.action not in ("run", "maybe") or ln.seconds is None:
            continue
        prm = P.chapter_parameters(profile, ln.name, spec=spec)
        got = on_workers(ln.name, prm, ln.seconds, probe_, workers, cores)
        if got is not None:
            saved += ln.seconds - got.seconds
            out.append(f"    {ln.name}: ~{duration(got.seconds)} (serially ~{duration(got.serial)}; {got.units} unit{'s' if got.units != 1 else ''}, "
                       f"the longest ~{duration(got.largest)} on one worker)")
    if not out:
        return [f"  on {setting}: no chapter that runs hands out units; the times above stand"]
    where = f"on {cores} cores, one thread each" if cores else "one thread each"
    return ([f"  on {setting} ({workers} workers {where}; {START_S:g} s to start them, {TASK_OVERHEAD_S * 1e3:g} ms "
             "a unit, measured on 2 cores):"] + out +
            [f"    in all ~{duration(abs(saved))} {'less' if saved >= 0 else 'more'} than serially"])


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def announce(profile: str, spec: dict, chapters: list[str], staged: Path, results_root: Path,
             forced: str | None = None, artifacts: list[str] | None = None, out=None,
             measure=probe) -> list[Line]:
    """Print the plan (see the module docstring); return its lines. Never raises: a plan that
    cannot be computed is a line that says why."""
    out = out or sys.stdout
    probe_ = Probe(measure)
    try:
        lines = artifact_lines(artifacts_of(spec, chapters) if artifacts is None else list(artifacts),
                               results_root, probe_)
        lines += chapter_lines(profile, spec, chapters, Path(staged), Path(results_root), forced, probe_)
        print(format_plan(profile, lines, probe_), file=out, flush=True)
        more = worker_lines(profile, spec, lines, probe_, scheduler.setting())
        if more:
            print("\n".join(more), file=out, flush=True)
        if probe_.many is not None:
            PROBED[profile] = (probe_.one, probe_.many)
        return lines
    except Exception as exc:
        print(f"[{profile}] plan: could not be computed ({type(exc).__name__}: {exc}); building anyway",
              file=out, flush=True)
        return []


def computing(lines: list[Line], chapters: list[str]) -> list[str]:
    """The chapters whose science the plan's ``lines`` say may run (run, or maybe); all of
    ``chapters`` where the plan could not be computed (no lines)."""
    if not lines:
        return list(chapters)
    return [ln.name for ln in lines if ln.kind == "chapter" and ln.action in ("run", "maybe")]


MAX_HOURS = 24.0     # a chapter expected to take longer on this machine's CPU is refused unless --max-hours says more


def too_long(profile: str, spec: dict, lines: list[Line], max_hours: float) -> str | None:
    """Why the build must not start: a chapter or artifact to run whose expected time on this
    machine is over ``max_hours`` while it would run on the CPU (parameters asking for far more work
    than was meant, such as 10^7 chains), one line each with the estimate and the flag that allows
    it; or None. A chapter set to a GPU, or with no estimate, is not held back."""
    out = []
    for ln in lines:
        if ln.action not in ("run", "maybe", "build", "resume") or ln.seconds is None or ln.seconds <= max_hours * 3600:
            continue
        from ..device import pick_device          # torch: only for a line over the limit
        device = "auto"
        if ln.kind == "chapter":
            device = P.chapter_parameters(profile, ln.name, spec=spec).get("device", "auto")
        if pick_device(device).type != "cpu":
            continue
        out.append(f"[{profile}] {ln.kind} {ln.name} is expected to take ~{duration(ln.seconds)} on this machine's CPU "
                   f"({ln.basis}), over the limit of {max_hours:g} h: check its counts in params/{profile}.yaml, or "
                   f"pass --max-hours {math.ceil(ln.seconds / 3600)} to run it anyway; nothing was run")
    return "\n".join(out) or None

