"""A chapter's time with its independent units on N workers (:mod:`textglauber.scheduler`): the
plan's N-worker line and the cost appendix's projections.

The model. A chapter's serial time splits into its units (:func:`.work.unit_batches`: the
crossover's drift cells, one per (length, temperature), its coupling lengths and its phase models;
the incompatibility chapter's models, then its control; the basins' models; the traps' blocks of
chains, then its escape models), priced as the
chapter is (its
fitted seconds per unit of work, the encoder at the probe's reading on torch's threads), and the
rest, which stays in the notebook's process and does not change. On a worker a unit runs on one
thread (the probe's one-thread reading for all its work) plus :data:`TASK_OVERHEAD_S`. Dask hands
the units out in the order they are submitted, each to the first worker free, so the units take
that schedule's makespan (:func:`makespan`); a batch waits for all of its units before the next
is handed out. Starting the workers costs :data:`START_S` once a batch (each starts its own
cluster). On one
machine the workers share its cores: past the cores, each of the min(N, units) workers busy at
once runs at cores/min(N, units) of a thread.

The constants were measured on this project's 2-core machine (``python -m
textglauber.bookbuild.estimates.workers``, which prints them again): a ``local:2`` cluster up and
its first unit back (the worker's imports of the package and torch included), and the round trip
of a unit that does nothing. Nothing the build computes reads these numbers.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from .probing import Probe
from .seconds import constants, estimate
from .work import unit_batches, unit_parts

START_S = 3.1
"""Seconds from asking for a ``local:2`` cluster to its first unit's result, the workers' imports of
the package and torch included: 3.06, 3.07 and 3.54 s in three runs on 2026-12-02 (quiet, 2 cores)."""

TASK_OVERHEAD_S = 0.0055
"""Seconds a unit costs on a worker beyond its work, sending it and its result: 4.6, 6.1 and 5.4 ms
a unit (64 units that do nothing, on each of 2 workers) in the same three runs."""


def makespan(seconds: list[float], workers: int) -> float:
    """When the last of ``seconds`` ends, each handed in order to the first of ``workers`` free."""
    if workers < 1:
        raise ValueError(f"workers = {workers}: must be at least 1")
    free = [0.0] * min(workers, max(1, len(seconds)))
    for s in seconds:
        heapq.heappush(free, heapq.heappop(free) + s)
    return max(free)


@dataclass
class OnWorkers:
    """A chapter on N workers: its expected ``seconds`` there, the ``serial`` seconds it was priced
    from, how many ``units`` it hands out and the ``largest`` of them on one worker (seconds)."""

    seconds: float
    serial: float
    units: int
    largest: float


def on_workers(chapter: str, prm: dict, serial_s: float, probe_: Probe, workers: int,
               cores: int | None = None) -> OnWorkers | None:
    """The chapter's time with its units on ``workers`` workers, from its serial time ``serial_s`` (the
    plan's number: a last run here, or the estimate) and the split of the work model; ``cores``: the
    cores they share when they run on one machine (None: each has its own). None for a chapter that
    hands out no units or has no fitted constants."""
    got, batches = constants().get(chapter), unit_batches(chapter, prm)
    modelled = estimate(chapter, prm, probe_) if got is not None and batches else None
    if not modelled:
        return None
    _, per_encoder, per_book = got
    in_units, spans, largest = 0.0, 0.0, 0.0
    for parts in batches:
        in_units += sum(probe_.scale(per_book * books, per_encoder * enc) for enc, books in parts)
        share = max(min(workers, len(parts)) / cores, 1.0) if cores else 1.0     # workers busy at once per core
        on_one = [probe_.scale(per_book * books + per_encoder * enc, 0.0) * share + TASK_OVERHEAD_S
                  for enc, books in parts]
        spans, largest = spans + makespan(on_one, workers), max(largest, max(on_one))
    rest = max(modelled - in_units, 0.0)
    scale = serial_s / modelled                  # a last run's own speed carries over to the parts
    seconds = (rest + spans) * scale + START_S * len(batches)
    return OnWorkers(seconds, serial_s, sum(map(len, batches)), largest * scale)


def projection(profile: str, counts: list[int]) -> "pd.DataFrame":
    """Per chapter of ``profile`` with fitted constants: its hours serially and on each count of
    workers, at the calibration machine's speed (its measured builds' fitted seconds per unit of
    work), each worker one thread on a core of its own, and how many units it hands out."""
    import pandas as pd

    from ... import profile as P
    from .calibration import REFERENCE_PROBE_ONE_S, REFERENCE_PROBE_S

    spec, probe_ = P.load_profile(profile), Probe(lambda: (REFERENCE_PROBE_ONE_S, REFERENCE_PROBE_S))
    rows = []
    for chapter in spec["chapters"]:
        prm = P.chapter_parameters(profile, chapter, spec=spec)
        serial = estimate(chapter, prm, probe_) if chapter in constants() else None
        if serial is None:
            continue
        row = {"chapter": chapter, "units": len(unit_parts(chapter, prm)), "hours serially": serial / 3600}
        for n in counts:
            got = on_workers(chapter, prm, serial, probe_, n)
            row[f"hours on {n} workers"] = (serial if got is None else got.seconds) / 3600
        rows.append(row)
    return pd.DataFrame(rows)


def _warm() -> int:
    """A unit that imports what the chapters' units import (the package's phase and traps sections,
    torch with them) and returns its process id."""
    import os

    from ... import phasegrid, traps  # noqa: F401

    return os.getpid()


def measure(setting: str = "local:2", units: int = 64) -> tuple[float, float]:
    """(:data:`START_S`, :data:`TASK_OVERHEAD_S`) measured on ``setting`` now: the cluster up and its
    first unit back, imports included; then ``units`` units that do nothing, per unit and worker."""
    import time

    from ... import scheduler

    workers = scheduler.local_workers(setting) or 1
    began = time.perf_counter()
    with scheduler.executor(setting) as ex:
        ex.submit(scheduler.run_unit, "warm", _warm).result()
        started = time.perf_counter() - began
        for _ in range(workers):
            ex.submit(scheduler.run_unit, "warm", _warm).result()
        t = time.perf_counter()
        futures = [ex.submit(scheduler.run_unit, f"drill {k}", scheduler.drill, k) for k in range(units)]
        for f in futures:
            f.result()
        per_task = (time.perf_counter() - t) * workers / units
    return started, per_task


if __name__ == "__main__":
    start, per_task = measure()
    print(f"local:2 here: {start:.2f} s to the first unit's result, {per_task * 1e3:.2f} ms a unit beyond its work "
          f"(START_S = {START_S}, TASK_OVERHEAD_S = {TASK_OVERHEAD_S} in the module)")
