"""Results are build products: ``results/<profile>/<chapter>/`` holds parquet tables and a
``manifest.json`` that says how they were made (commit, parameters, models, seed, the tables and
their digests, versions).

A run never costs the last good result: :func:`start_chapter` takes the profile's lock (the build's,
or its own for a papermill run by hand) and opens a run on the chapter's folder, whose tables go to
a staging folder beside it; the manifest, written last, commits them in place of the folder's old
contents (:func:`commit`). A run that fails, however it fails, leaves the folder as it was, and
the next run clears what it left (:func:`recover`). Readers take a table only where its manifest
lists it with the digest of its bytes (:func:`vouched_table`). A file that cannot be written is one
line naming it and the fix (:class:`ResultsWriteError`). A re-render (:data:`REPLAY_ENV`) writes
nothing: its manifest checks that the run would have written what the folder holds."""
from __future__ import annotations

import errno
import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

from . import lockfile
from .provenance import file_digest, git_commit, versions

RESUMABLE = ("chains",)        # folders a chapter resumes from (engine.run's chunks and checkpoint)
_open: dict[Path, Path] = {}   # a chapter folder whose run is open -> the staging folder its tables go to
REPLAY_ENV = "TEXTGLAUBER_REPLAY"
"""Set (to 1) while the build re-renders a chapter from its last full run
(:mod:`textglauber.bookbuild.replay`): the run's manifest does not commit it, it compares it."""
VOLATILE_MANIFEST_FIELDS = ("created", "git", "versions")
"""Fields of a manifest that say when and where a run was made, not what it holds."""


class ReplayMismatch(RuntimeError):
    """A re-render would have written other results than its folder holds: the chapter runs in full."""


class ResultsWriteError(OSError):
    """A result file could not be written: one line naming the file, why and the fix."""


def resumable(name: str) -> bool:
    """Whether an entry of a chapter's results folder is kept from one run to the next: a resumable
    folder, or the one earlier run of it that :func:`textglauber.engine.run` moved aside."""
    return any(name == r or name.startswith(f"{r}.old-") for r in RESUMABLE)


def staging_dir(final: Path) -> Path:
    """Where an open run of the chapter folder ``final`` writes its tables: a hidden folder beside
    it, of this process."""
    return final.with_name(f".{final.name}.run-{os.getpid()}")


def _leftovers(final: Path, kind: str) -> list[Path]:
    return sorted(final.parent.glob(f".{final.name}.{kind}-*")) if final.parent.is_dir() else []


def recover(final: Path) -> None:
    """Put a chapter folder back as its last good run left it, after a run that failed or a commit
    that was killed: a failed run's staging folders go (they are no results), and where a commit
    was killed between its two renames the folder it had moved aside comes back (its stamp vouches
    for it); the resumable folders of a commit killed before it moved them come back too."""
    for old in _leftovers(final, "old"):
        if not final.exists():
            os.replace(old, final)
            continue
        for entry in old.iterdir():
            if resumable(entry.name) and not (final / entry.name).exists():
                os.replace(entry, final / entry.name)
        shutil.rmtree(old)
    for run in _leftovers(final, "run"):
        if run.resolve() not in {s.resolve() for s in _open.values()}:
            shutil.rmtree(run)


def chapter_dir(results_root: str | Path, profile: str, chapter: str) -> Path:
    """The chapter's results folder, with a run opened on it: until the run commits (its manifest,
    written last by :func:`write_manifest`), its tables go to a staging folder beside it
    (:func:`staging_dir`) and the folder keeps the last good run's tables and manifest untouched,
    so a run that fails costs nothing that was there. The commit replaces the folder's contents
    with exactly what this run wrote, keeping only what a run resumes from (:data:`RESUMABLE`, which
    a run writes in place, under the folder itself). Every chapter calls this first."""
    final = Path(results_root) / profile / chapter
    final.parent.mkdir(parents=True, exist_ok=True)
    recover(final)
    final.mkdir(exist_ok=True)
    staging = staging_dir(final)
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    _open[final.resolve()] = staging
    return final


def _target(folder: Path) -> Path:
    """Where a table of ``folder`` is written now: its open run's staging folder, else itself. A
    re-render (:data:`REPLAY_ENV`) always writes to a staging folder, one opened here if need be."""
    key = Path(folder).resolve()
    if key not in _open and os.environ.get(REPLAY_ENV):
        _open[key] = staging_dir(Path(folder))
        _open[key].mkdir(parents=True, exist_ok=True)
    return _open.get(key, Path(folder))


def commit(final: Path) -> None:
    """Replace the chapter folder ``final`` by its open run's staging folder: two renames (the old
    folder aside, the new one in its place), then the resumable folders moved over and the old
    folder removed. A kill between any two steps is mended by :func:`recover`."""
    final = Path(final)
    staging = _open.pop(final.resolve())
    old = final.with_name(f".{final.name}.old-{os.getpid()}")
    os.replace(final, old)
    os.replace(staging, final)
    for entry in old.iterdir():
        if resumable(entry.name):
            os.replace(entry, final / entry.name)
    shutil.rmtree(old)


def _fix(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "free space on that disk (or give the build another --results folder) and run the chapter again"
    return "make the folder writable and run the chapter again"


def _write(path: Path, write) -> Path:
    """``write(path)``, or one line naming the file, why and the fix; no part of a file stays."""
    try:
        write(path)
    except OSError as exc:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass
        raise ResultsWriteError(f"{path}: could not be written ({exc.strerror or exc}); {_fix(exc)}; "
                                "the chapter's last complete results are kept") from None
    return path


def manifest_parameters(checked: dict) -> dict:
    """The parameters a chapter's manifest records: its validated values as the kernel runs with them
    (:func:`textglauber.profile.check_chapter`), less ``results_root``, a path of this machine; its
    typed sections and entries as the mappings they were given as (:func:`plain`)."""
    return {k: plain(v) for k, v in checked.items() if k != "results_root"}


def plain(value):
    """``value`` with every typed parameter object in it (a profile section or model entry) as the
    mapping it was given as: the keys that were set, no default the schema filled in (what a
    manifest records)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_unset=True)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def write_manifest(folder: str | Path, *, parameters: dict, models: list, seed: int,
                   tables: list[str], notes: list[str] | None = None, name: str = "manifest.json",
                   extra: dict | None = None) -> Path:
    """The JSON record beside a run's tables: time, commit, parameters, models, seed, tables and
    their SHA-256 digests, versions, notes, and any ``extra`` fields (the benchmark adds its
    command and machine). Written last: where the folder's run is open (:func:`chapter_dir`), it
    commits the run, replacing the folder's last results with this run's (:func:`commit`)."""
    folder = Path(folder)
    target = _target(folder)
    digests = {t: file_digest(target / f"{t}.parquet") for t in tables if (target / f"{t}.parquet").is_file()}
    manifest = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "git": git_commit(), "parameters": parameters, "models": plain(models), "seed": seed,
                "tables": tables, "digests": digests, "versions": versions(), "notes": notes or [], **(extra or {})}
    if os.environ.get(REPLAY_ENV) and target != folder:
        return _compared(folder, manifest, name)
    tmp = target / f".{name}.tmp"            # whole or not at all: the manifest is what says a run finished
    _write(tmp, lambda p: p.write_text(json.dumps(manifest, indent=2, default=str)))
    os.replace(tmp, target / name)
    if target != folder:
        commit(folder)
    return folder / name


def _compared(folder: Path, manifest: dict, name: str) -> Path:
    """A re-render's end: its open run is dropped, and the folder, untouched, must hold what the run
    would have committed (the same tables with the same bytes, the same manifest but for when and
    where it was made); else :class:`ReplayMismatch`."""
    staging = _open.pop(folder.resolve())
    shutil.rmtree(staging, ignore_errors=True)
    held, now = lasting(read_manifest(folder, name) or {}), lasting(manifest)
    if held != now:
        differ = sorted(k for k in set(held) | set(now) if held.get(k) != now.get(k))
        raise ReplayMismatch(f"{folder}: a re-render would change {name} ({', '.join(differ)}); the chapter runs in full")
    return folder / name


def lasting(manifest: dict) -> dict:
    """A manifest as JSON holds it, without the fields that say when and where its run was made
    (:data:`VOLATILE_MANIFEST_FIELDS`): what two runs of the same work share."""
    return {k: v for k, v in json.loads(json.dumps(manifest, default=str)).items() if k not in VOLATILE_MANIFEST_FIELDS}


def read_manifest(folder: str | Path, name: str = "manifest.json") -> dict | None:
    """A chapter's manifest (``name``: another one of the folder's), or None where it has none that
    reads as a JSON mapping."""
    try:
        found = json.loads((Path(folder) / name).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def listed_tables(folder: str | Path) -> list[str] | None:
    """The tables a chapter's manifest lists (its run wrote them), or None without a readable
    manifest. A table in the folder that the manifest does not list is no result of that run."""
    manifest = read_manifest(folder)
    if manifest is None:
        return None
    tables = manifest.get("tables")
    return [str(t) for t in tables] if isinstance(tables, list) else []


class NotThisRun(ValueError):
    """A table that is not the one its chapter's last run wrote (one line: which and why)."""


def vouched_table(folder: str | Path, name: str) -> pd.DataFrame:
    """The table ``name`` of a chapter's results folder, read only where its manifest lists it and
    its bytes are the ones that run wrote (the manifest's digest); else :class:`NotThisRun`. A
    table copied in from another run, or left by a run that failed, is read by no one."""
    folder = Path(folder)
    path = folder / f"{name}.parquet"
    manifest = read_manifest(folder)
    if manifest is None:
        raise NotThisRun(f"{path}: not read: its folder has no readable manifest.json (no finished run wrote it)")
    if name not in (manifest.get("tables") or []) or not path.is_file():
        raise NotThisRun(f"{path}: not read: the manifest of its folder's last run does not list it")
    wanted = (manifest.get("digests") or {}).get(name)
    if wanted is not None and file_digest(path) != wanted:
        raise NotThisRun(f"{path}: not read: its bytes are not those its folder's last run wrote (the digest "
                         "differs from its manifest's); run the chapter again")
    import pandas as pd           # here: the build reads manifests and digests, never a table

    return pd.read_parquet(path)


def write_table(df: pd.DataFrame, folder: str | Path, name: str) -> Path:
    """One table as parquet, into the folder's open run (:func:`chapter_dir`) where it has one. The
    frame's ``attrs`` are not written (pandas would put them in the file's metadata): a table's bytes
    are its values, so the same run writes the same file."""
    df = df.copy(deep=False)
    df.attrs = {}
    return _write(_target(Path(folder)) / f"{name}.parquet", lambda p: df.to_parquet(p, index=False))


def write_tables(folder: str | Path, frames: dict) -> list[str]:
    """Each table of ``frames`` (name -> DataFrame, in order) that is not None, written with
    :func:`write_table`; returns the names written, for the manifest."""
    written = []
    for name, df in frames.items():
        if df is not None:
            write_table(df, folder, name)
            written.append(name)
    return written


def claim_profile(results_root: str | Path, profile: str) -> None:
    """One run of a profile at a time, inside the build or outside it: a chapter whose kernel the
    build started runs under the build's lock (:func:`textglauber.lockfile.held_by_parent_build`);
    any other run (papermill by hand) takes the same lock for as long as its kernel lives, and is
    refused in one line while a build or another run holds it."""
    import atexit

    lock = Path(results_root) / profile / lockfile.LOCK_NAME
    if lockfile.held_by_parent_build(lock):
        return
    found = lockfile.holder(lock)
    if found is not None and found.get("pid") == os.getpid() and found.get("start") == lockfile.process_start(os.getpid()):
        return                                    # taken already by this kernel's earlier chapter
    try:
        lockfile.acquire(lock, f"profile {profile!r}")
    except lockfile.Busy as exc:
        raise lockfile.Busy(f"{exc}; this chapter would overwrite that run's results, so nothing was run") from None
    atexit.register(lockfile.release, lock)


def start_chapter(results_root: str | Path, profile: str, chapter: str, seed: int):
    """What every chapter does first: quiet warnings, the book's figure style, the profile's lock
    (:func:`claim_profile`), the chapter's results folder with a run opened on it
    (:func:`chapter_dir`) and the run's one seeded generator. Returns ``(out, gen)``."""
    import warnings

    import torch

    from . import figures

    warnings.filterwarnings("ignore")
    figures.setup()                                # text no smaller than the page's small text
    claim_profile(results_root, profile)
    out = chapter_dir(results_root, profile, chapter)
    return out, torch.Generator().manual_seed(int(seed))
