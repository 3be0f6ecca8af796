"""What a build prints while a chapter runs: a line with the cell it is at and the time left.

**Progress** (:func:`watch`). While papermill executes a chapter it saves the notebook after
every cell, with each cell's status and duration in its metadata. A thread of the build reads
that file every ``PROGRESS_EVERY`` seconds (the first time after ``PROGRESS_FIRST``) and prints
one line to the build's standard error, e.g. ``[offline] crossover: cell 9/21, 4 min elapsed,
about 9 min left (last run 13 min)``. The time left is the last run's durations of the cells
still to run (that run's executed notebook, when it has as many cells), scaled by how this run's
finished cells compare with the same cells then; without a last run, the plan's estimate less
the time elapsed. Progress bars stay out of the executed notebooks (``TQDM_DISABLE=1`` in the
kernels' environment).
"""
from __future__ import annotations

import json
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from ..durations import duration
from . import stamps
from .plan import EXPECTED, last_run

PROGRESS_FIRST, PROGRESS_EVERY = 30.0, 60.0


def cell_states(nb: dict) -> tuple[int, int, list[float], float | None]:
    """(current cell, 1-based; cells; durations of the finished cells by index (NaN where not
    finished); seconds the running cell has run, or None) from a notebook papermill is writing."""
    cells = nb.get("cells", [])
    durations, current, running = [], 0, None
    now = time.time()
    for k, c in enumerate(cells):
        pm = c.get("metadata", {}).get("papermill", {})
        status = pm.get("status")
        if status == "completed":
            durations.append(float(pm.get("duration") or 0.0))
            current = k + 1
        else:
            durations.append(float("nan"))
            if status == "running" and running is None:
                current = k + 1
                running = max(0.0, now - _parse_time(pm.get("start_time"), now))
    return current, len(cells), durations, running


def _parse_time(stamp: str | None, default: float) -> float:
    if not stamp:
        return default
    from datetime import datetime, timezone

    try:
        t = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return default
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


def cell_durations(nb: dict) -> list[float]:
    """Each cell's duration as papermill recorded it in an executed notebook (0 where missing)."""
    return [float(c.get("metadata", {}).get("papermill", {}).get("duration") or 0.0) for c in nb.get("cells", [])]


def time_left(elapsed: float, current: int, durations: list[float], running: float | None,
              last: list[float] | None = None, expected_s: float | None = None) -> float | None:
    """Seconds left: with ``last`` (the last run's per-cell durations, as many cells), the cells
    still to run at their last durations, scaled by this run's finished cells against the same
    cells then (between 0.5 and 4); otherwise ``expected_s`` less ``elapsed`` (negative past it);
    None without either."""
    if last and len(last) == len(durations):
        done = [k for k, d in enumerate(durations) if d == d]              # finished cells (not NaN)
        then = sum(last[k] for k in done)
        now = sum(durations[k] for k in done)
        pace = min(4.0, max(0.5, now / then)) if then > 5.0 else 1.0
        rest = [k for k in range(len(durations)) if k not in set(done)]
        left = 0.0
        for k in rest:
            if running is not None and k == current - 1:
                left += max(last[k] * pace - running, 0.0)
            else:
                left += last[k] * pace
        return left
    if expected_s is not None:
        return expected_s - elapsed
    return None


class _Watcher(threading.Thread):
    def __init__(self, label: str, notebook: Path, last: list[float] | None, expected_s: float | None,
                 basis: str | None, out, first: float, every: float):
        super().__init__(daemon=True, name=f"progress-{label}")
        self.label, self.notebook, self.last, self.expected_s, self.basis = label, Path(notebook), last, expected_s, basis
        self.out, self.first, self.every = out, first, every
        self.stop = threading.Event()
        self.t0 = time.time()

    def line(self) -> str | None:
        try:
            nb = json.loads(self.notebook.read_text())
        except (OSError, ValueError):
            return None                      # not written yet, or caught mid-write
        current, cells, durations, running = cell_states(nb)
        elapsed = time.time() - self.t0
        left = time_left(elapsed, current, durations, running, self.last, self.expected_s)
        return progress_line(self.label, current, cells, elapsed, left, self.basis)

    def run(self) -> None:
        wait = self.first
        while not self.stop.wait(wait):
            try:
                text = self.line()
                if text:
                    print(text, file=self.out or sys.stderr, flush=True)
            except Exception:                # progress only informs
                pass
            wait = self.every


@contextmanager
def watch(profile: str, chapter: str, partial: Path, staged: Path, results_root: Path, out=None,
          first: float = PROGRESS_FIRST, every: float = PROGRESS_EVERY):
    """Progress lines for a chapter while papermill writes ``partial`` (see the module docstring)."""
    last, basis, expected_s = None, None, None
    try:
        executed = stamps.executed_notebook(staged, chapter)
        if executed.is_file():
            last = cell_durations(json.loads(executed.read_text())) or None
        if (profile, chapter) in EXPECTED:
            expected_s, how = EXPECTED[(profile, chapter)]
            basis = (f"last run {duration(expected_s)}" if how.startswith("last run")
                     else f"estimated ~{duration(expected_s)}")
        else:
            rec = last_run(profile, chapter, staged, results_root)
            if rec is not None:
                expected_s, basis = rec["seconds"], f"last run {duration(rec['seconds'])}"
        if last is not None and sum(last) <= 0:
            last = None
    except Exception:
        pass
    w = _Watcher(f"[{profile}] {chapter}", partial, last, expected_s, basis, out, first, every)
    w.start()
    try:
        yield w
    finally:
        w.stop.set()
        w.join(timeout=5)


def progress_line(label: str, cell: int, cells: int, elapsed: float, left: float | None, basis: str | None) -> str:
    """``crossover: cell 9/21, 4 min elapsed, about 9 min left (last run 13 min)``. A negative
    ``left`` is the time past the estimate."""
    if left is None:
        rest = "no estimate of the time left"
    elif left < 0:
        rest = f"{duration(-left)} past the estimate"
    elif left < 60:
        rest = "less than a minute left"
    else:
        rest = f"about {duration(left)} left"
    return f"{label}: cell {cell}/{cells}, {duration(elapsed)} elapsed, {rest}" + (f" ({basis})" if basis else "")
