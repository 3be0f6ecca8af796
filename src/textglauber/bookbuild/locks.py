"""Before a build writes anything: one build of a profile at a time (a lock file holding the
build's pid beside its stamps and one in its results folder), and every folder it will write
probed first, so that it stops before any compute and before any stamp is deleted."""
from __future__ import annotations

import json
import os
from pathlib import Path

from .. import lockfile
from ..results import resumable
from .stamps import stamps_dir


# --------------------------------------------------------------------------- folders the build writes
def written_folders(staged: Path, results_root: Path, profile: str, chapters: list[str]) -> list[Path]:
    """What a build of ``chapters`` writes into: the staging folder (the book, the stamps), the
    profile's results folder (wall times) and each chapter's, with the resumable folders it holds."""
    staged, profile_results = Path(staged), Path(results_root) / profile
    folders = [staged, staged / "book", stamps_dir(staged)]
    if chapters:
        folders.append(profile_results)
    for ch in chapters:
        folder = profile_results / ch
        folders.append(folder)
        if folder.is_dir():
            folders += sorted(p for p in folder.iterdir() if p.is_dir() and resumable(p.name))
    return folders


def unwritable(folders: list[Path]) -> str | None:
    """Why one of ``folders`` cannot be written (a probe file created and deleted in each; a folder
    not there yet is created for the probe and removed again), or None."""
    for folder in folders:
        folder = Path(folder)
        made = []
        try:
            missing = [p for p in [folder, *folder.parents] if not p.exists()]
            for p in reversed(missing):
                p.mkdir()
                made.append(p)
            probe = folder / f".write-probe-{os.getpid()}"
            fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            try:
                os.write(fd, b"probe")
            finally:
                os.close(fd)
            probe.unlink()
        except OSError as exc:
            return f"{folder}: {exc.strerror or exc}"
        finally:
            for p in reversed(made):
                try:
                    p.rmdir()
                except OSError:
                    pass
    return None


def check_writable(folders: list[Path]) -> None:
    """Stop, in one line and before any compute or any stamp is deleted, where the build could not
    write what it will write: a run that fails at its last cell after all its compute, having
    already deleted a valid stamp, is what this prevents."""
    problem = unwritable(folders)
    if problem:
        raise SystemExit(f"the build cannot write to {problem}; nothing was run or deleted")


# --------------------------------------------------------------------------- one build of a profile at a time
_lock_scopes: list = []


def lock_paths(staged: Path, results_root: Path, profile: str) -> list[Path]:
    """The locks a build of ``profile`` takes: one beside its stamps (the staged book, the partial
    notebooks) and one in its results folder (the chains' checkpoints), which another build folder
    may share."""
    return [stamps_dir(staged).parent / lockfile.LOCK_NAME, Path(results_root) / profile / lockfile.LOCK_NAME]


def acquire_lock(path: Path, what: str, log=print) -> None:
    """:func:`textglauber.lockfile.acquire`, for a command line: a lock held by a live process stops
    it at once with one line naming that pid."""
    try:
        lockfile.acquire(path, what, log)
    except lockfile.Busy as exc:
        raise SystemExit(str(exc)) from None


release_lock = lockfile.release


def announce_to_kernels(paths: list[Path]) -> None:
    """Name the locks this build holds, and the build itself, in the environment that the chapters'
    kernels inherit, so that a chapter run by this build knows its profile is locked by its own
    build (:func:`textglauber.results.start_chapter`) while a papermill run beside it is refused."""
    os.environ[lockfile.BUILD_ENV] = json.dumps({**lockfile.me(), "locks": [str(Path(p).resolve()) for p in paths]})


def lock_build(paths: list[Path], what: str) -> None:
    """Take every lock in ``paths`` (:func:`acquire_lock`), each released when the call of the
    function decorated with :func:`holding_locks` ends, however it ends (an exception, SIGTERM),
    or at the interpreter's exit outside such a call."""
    import atexit

    for path in paths:
        try:
            acquire_lock(path, what)
        except BaseException:
            if not _lock_scopes:                   # what this call took so far goes with it
                for taken in paths[:paths.index(path)]:
                    release_lock(taken)
            raise
        if _lock_scopes:
            _lock_scopes[-1].callback(release_lock, path)
        else:
            atexit.register(release_lock, path)
    announce_to_kernels(paths)


def holding_locks(fn):
    """Run ``fn`` with the locks :func:`lock_build` takes inside it released when it returns or
    raises; SIGTERM (the default way to stop a process) raises SystemExit meanwhile, so a build
    stopped that way lets its locks go too."""
    import contextlib
    import functools
    import signal
    import threading

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with contextlib.ExitStack() as stack:
            _lock_scopes.append(stack)
            old = None
            if threading.current_thread() is threading.main_thread() \
                    and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                def stop(signum, frame):
                    raise SystemExit(128 + signum)

                old = signal.signal(signal.SIGTERM, stop)
            try:
                return fn(*args, **kwargs)
            finally:
                _lock_scopes.pop()
                if old is not None:
                    signal.signal(signal.SIGTERM, old)
    return wrapper
