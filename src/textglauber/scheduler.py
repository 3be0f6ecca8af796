"""Where a chapter's independent units of work run: one place that turns a setting into a
:class:`concurrent.futures.Executor`.

- ``serial`` (the default): in this process, one unit after another, torch's threads as they are
  (BLAS at one thread, as on a worker: :data:`BLAS_THREADS`; torch's products round the same at any
  thread count: ``textglauber.MKL_CBWR``);
- ``local:N``: a Dask ``LocalCluster`` of N worker processes, one thread each, on this machine;
- ``tcp://HOST:PORT``: a client of a Dask scheduler that is already running (started with
  ``dask scheduler`` and ``dask worker``, by dask-jobqueue on SLURM or PBS, or by dask-cuda).

The setting is ``--scheduler`` on the build, which passes it to the chapters' kernels in
:data:`ENV`; a papermill run reads the same variable. It is not a science parameter: the same seed
gives the same tables on any setting, because a unit's seeds come from its key (drawn before any
unit runs), never from the order in which units finish or the number of workers, and a unit's
chunks depend only on its work. Units are functions importable from the package, run through
:func:`run_unit`, which sets torch's threads to one on a worker and names the unit when it fails.
"""
from __future__ import annotations

import os
import re
import socket
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlparse

ENV = "TEXTGLAUBER_SCHEDULER"
LOCAL_RE = re.compile(r"^local:([1-9][0-9]*)$")
MAX_LOCAL = 64
CONNECT_S = 5.0


BLAS_THREADS = 1
"""BLAS threads while a unit runs, in this process as on a worker. Dask's nanny starts workers with
BLAS at one thread; at two, OpenBLAS's LAPACK gave the serial run an eigenvalue of a nearly
decomposable kernel that differed from the workers' (t_rel by 0.2% at 8e11 steps, rxnfp n = 8).
Only BLAS is held: OpenMP's threads are torch's, which the serial default leaves at every core for
speed; its products still compute the same floats as a one-thread worker's, because MKL runs in its
strict mode (``textglauber.MKL_CBWR``)."""


CHAIN_BLOCK = 16
"""Chains one unit runs together where a chapter splits one batch of chains into blocks (the traps
chapter's chains): a fixed number, so that the blocks and their seeds never depend on the workers.
Smaller blocks cost the serial default: the offline traps chains (English MLM, n = 20, T = 0.7, 200
steps) took 7.5 s as one batch of 16, 9.5 s as two blocks of 8 and 12.4 s as four of 4 (2026-12-02,
one run each, twice). So the offline profile's 16 chains are one unit and the paper profile's 30 two."""


def chain_blocks(chains: int) -> list[range]:
    """The chains of each block of ``chains``, in order: :data:`CHAIN_BLOCK` each, the last what is left."""
    return [range(lo, min(lo + CHAIN_BLOCK, chains)) for lo in range(0, chains, CHAIN_BLOCK)]


@dataclass(frozen=True)
class RunSettings:
    """How a chapter runs its model units, apart from its science; every chapter's ``run_models``
    takes one (``run_models(specs, run, **protocol)``): the chapter's one generator (each unit's seed
    is drawn from it, in the order of the model entries, before any unit runs), the device and dtype
    as the profile names them (:mod:`textglauber.device` decides what they mean), what a model that
    cannot be had does (``skip``: a note; ``fail``: the run stops) and where the units run (None:
    :data:`ENV`'s setting, serial by default)."""

    gen: "torch.Generator"
    device: str
    dtype: str
    on_missing_model: str
    scheduler: str | None = None


class UnitFailed(RuntimeError):
    """A unit of work that failed, named (chapter, model, cell) with its error in one line."""


def setting(value: str | None = None) -> str:
    """The scheduler setting: ``value``, else :data:`ENV`, else ``serial``; a malformed one is one
    line naming the value and what is allowed."""
    s = (value if value is not None else os.environ.get(ENV, "")).strip() or "serial"
    n = local_workers(s)
    if s == "serial" or (n is not None and n <= MAX_LOCAL):
        return s
    if s.startswith("tcp://"):
        u = urlparse(s)
        if u.hostname and u.port:
            return s
    raise ValueError(f"scheduler = {s!r}: must be 'serial', 'local:N' (N workers, 1 to {MAX_LOCAL}) "
                     "or 'tcp://HOST:PORT' (a running Dask scheduler)")


def local_workers(value: str) -> int | None:
    """N of a ``local:N`` setting, else None."""
    m = LOCAL_RE.match(value)
    return int(m.group(1)) if m else None


def check_reachable(value: str | None = None) -> str:
    """The setting, once a ``tcp://`` scheduler has answered a connection (before any compute):
    one line naming the address otherwise."""
    s = setting(value)
    if s.startswith("tcp://"):
        u = urlparse(s)
        try:
            socket.create_connection((u.hostname, u.port), timeout=CONNECT_S).close()
        except OSError as exc:
            raise ValueError(f"scheduler = {s!r}: cannot be reached ({exc.strerror or exc}); start one "
                             "(dask scheduler; dask worker ADDRESS) or use 'serial' or 'local:N'") from None
    return s


class SerialExecutor(Executor):
    """Each unit runs at once, in this process, when it is submitted."""

    def submit(self, fn, /, *args, **kwargs):
        f = Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as exc:            # the caller's result() raises it, as a pool's would
            f.set_exception(exc)
        return f


@contextmanager
def executor(value: str | None = None):
    """An executor for the setting (:func:`setting`), closed on exit. A ``local:N`` cluster is
    started here and stopped on exit; a ``tcp://`` client is checked first (:func:`check_reachable`)."""
    s = check_reachable(value)
    if s == "serial":
        yield SerialExecutor()
        return
    from distributed import Client, LocalCluster

    n = local_workers(s)
    if n is not None:
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=40) as cluster, Client(cluster) as client:
            yield client.get_executor(pure=False)
        return
    with Client(s, timeout=f"{int(CONNECT_S * 2)}s") as client:
        yield client.get_executor(pure=False)


def on_worker() -> bool:
    """Whether this code runs inside a Dask worker."""
    try:
        from distributed import get_worker

        get_worker()
        return True
    except (ImportError, ValueError):
        return False


def run_unit(unit: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` as one unit of work named ``unit`` (chapter, model, cell): on a worker,
    with torch at one thread; anywhere, with BLAS at one thread while it runs (:data:`BLAS_THREADS`);
    a failure is :class:`UnitFailed` naming the unit, and memory that ran out says so."""
    from threadpoolctl import threadpool_limits

    if on_worker():
        import torch

        torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=BLAS_THREADS, user_api="blas"):
            return fn(*args, **kwargs)
    except MemoryError:
        raise UnitFailed(f"{unit}: out of memory on this worker") from None
    except UnitFailed:
        raise
    except Exception as exc:
        text = " ".join(str(exc).split())[:300]
        raise UnitFailed(f"{unit}: {type(exc).__name__}: {text}") from exc


def model_label(model) -> str:
    """How a unit's name calls its model: the entry's ``name`` (a profile's model entry), or the class
    of a model object handed in directly (a test's scorer)."""
    from .profile import entry_name, is_model_entry

    return entry_name(model) if is_model_entry(model) else type(model).__name__


def run_all(units: list[tuple[str, object, tuple]], value: str | None = None) -> list:
    """The results of ``units`` (name, function, arguments), in their order, however they ran. A
    worker that dies has its units run again elsewhere by Dask; a unit that fails raises
    :class:`UnitFailed` naming it (the first in order)."""
    with executor(value) as ex:
        futures = [ex.submit(run_unit, name, fn, *args) for name, fn, args in units]
        out = []
        for (name, _, _), f in zip(units, futures):
            try:
                out.append(f.result())
            except UnitFailed:
                raise
            except Exception as exc:            # distributed.KilledWorker: the unit's workers kept dying
                if type(exc).__name__ == "KilledWorker":
                    raise UnitFailed(f"{name}: every worker that ran it died (killed, or out of memory: "
                                     "give each worker more memory or use fewer workers)") from None
                raise
        return out


def drill(key: int, die_once: str | None = None) -> tuple[int, int]:
    """A unit for checking a scheduler (``python -m textglauber.scheduler ADDRESS``) and its faults:
    returns ``(key * key, the process id that ran it)``. With ``die_once`` (a file path that does not
    exist yet), the first process to run it creates the file and dies at once, as a worker killed
    mid-unit would; the unit must then run again elsewhere."""
    if die_once is not None:
        try:
            fd = os.open(die_once, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            fd = None
        if fd is not None:
            os.close(fd)
            os._exit(1)
    return key * key, os.getpid()


def main(argv: list[str] | None = None) -> int:
    """``python -m textglauber.scheduler [SETTING]``: run 8 drill units on SETTING (default: the
    environment's) and say in how many processes they ran."""
    import sys

    argv = sys.argv[1:] if argv is None else argv
    try:
        s = check_reachable(argv[0] if argv else None)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    got = run_all([(f"drill {k}", drill, (k,)) for k in range(8)], s)
    if [v for v, _ in got] != [k * k for k in range(8)]:
        print(f"{s}: the drill units came back wrong: {got}", file=sys.stderr)
        return 1
    print(f"{s}: 8 units ran in {len({pid for _, pid in got})} process(es)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
