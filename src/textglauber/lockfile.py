"""Lock files: one process at a time for a profile's results (the build, or a papermill run of one of
its chapters outside the build). A lock is a small JSON file holding the holder's pid, host and
process start time, created atomically (``O_EXCL``); a lock whose process is gone is taken over.

This module imports nothing of the project, so that :mod:`textglauber.results` (a chapter's first
step) and :mod:`textglauber.bookbuild.locks` (the build's) share it without an import circle."""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

BUILD_ENV = "TEXTGLAUBER_BUILD_LOCKS"   # the locks a build holds, passed to the kernels it starts
LOCK_NAME = "build.lock"                 # a lock's file name, beside a build's stamps and in a profile's results


class Busy(RuntimeError):
    """Another live process holds the lock."""


def process_start(pid: int) -> str | None:
    """The start time of a process in clock ticks since boot (/proc), which tells a reused pid
    from the process that wrote a lock; None where it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def holder(path: Path) -> dict | None:
    """What a lock file says of its holder, or None where it cannot be read."""
    try:
        found = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and isinstance(found.get("pid"), int) else None


def alive(found: dict) -> bool:
    """Whether the process that wrote a lock still runs (a lock from another host counts as held)."""
    if found.get("host") not in (None, socket.gethostname()):
        return True
    pid = found["pid"]
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if _zombie(pid):
        return False
    started = process_start(pid)
    return not (found.get("start") and started and started != found["start"])


def me() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "start": process_start(os.getpid())}


def acquire(path: Path, what: str, log=print) -> None:
    """Create the lock file ``path`` holding this process, atomically. Where it exists and its
    holder runs, raise :class:`Busy` with one line naming that pid; where that process is gone (a
    build killed by SIGKILL or a crash of the machine), take the lock over and say so."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mine = json.dumps(me())
    unreadable_since = None
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as fh:
                fh.write(mine)
            return
        found = holder(path)
        if found is None and path.exists():     # created an instant ago, pid not written yet
            unreadable_since = unreadable_since or time.monotonic()
            if time.monotonic() - unreadable_since < 2.0:
                time.sleep(0.05)
                continue
        if found is not None and alive(found):
            raise Busy(f"another build of {what} is running (pid {found['pid']}, lock {path}); "
                       "wait for it to end, or delete the lock if that process is no build")
        # stale: one taker at a time, so that a lock just taken by a third process is not removed
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            fcntl.flock(dfd, fcntl.LOCK_EX)
            if path.exists() and holder(path) == found:
                path.unlink()
                who = f"pid {found['pid']}, which no longer runs" if found else "no readable pid"
                log(f"{path}: taking over a stale lock ({who})", flush=True)
        finally:
            os.close(dfd)                          # closing releases the flock
        unreadable_since = None


def release(path: Path) -> None:
    """Remove the lock file if this process holds it (never another process's)."""
    found = holder(path)
    if found is not None and found["pid"] == os.getpid() and found.get("start") == process_start(os.getpid()):
        Path(path).unlink(missing_ok=True)


def held_by_parent_build(path: Path) -> bool:
    """Whether ``path`` is held by the live build that started this process (a chapter's kernel
    under ``python -m textglauber.bookbuild``): the build names its locks and itself in
    :data:`BUILD_ENV`, and the lock file must still name that same process."""
    try:
        passed = json.loads(os.environ.get(BUILD_ENV) or "null")
    except ValueError:
        return False
    if not isinstance(passed, dict) or str(Path(path).resolve()) not in (passed.get("locks") or []):
        return False
    found = holder(path)
    return (found is not None and alive(found) and found.get("pid") == passed.get("pid")
            and found.get("start") == passed.get("start"))
