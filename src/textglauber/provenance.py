"""How a result was made: the commit, the installed versions, the machine, and content digests
(of an object, a file, a folder, a notebook's source).

One list of packages and one description of the machine serve the chapters' manifests, the build's
stamps, the benchmark's records and the recorded chapter timings."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path

from .paths import repo_root

# the packages whose versions a result records and a build stamp keys on
PACKAGES = ("textglauber", "torch", "transformers", "tokenizers", "numpy", "pandas", "pyarrow", "scipy",
            "sentence-transformers", "matplotlib", "seaborn", "papermill", "nbclient", "ipykernel", "jupyter-book")


def git_commit() -> dict:
    """{"commit": HEAD or None, "dirty": whether tracked files differ from it (None without git)}."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=repo_root(), capture_output=True, text=True, timeout=10)

    try:
        head = git("rev-parse", "HEAD").stdout.strip() or None
        dirty = bool(git("status", "--porcelain", "--untracked-files=no").stdout.strip())
    except (OSError, subprocess.SubprocessError):
        head, dirty = None, None
    return {"commit": head, "dirty": dirty}


def installed_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict:
    """{"python": version, package: version or None} over :data:`PACKAGES`."""
    return {"python": platform.python_version(), **{name: installed_version(name) for name in PACKAGES}}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """The machine, as a build key: architecture, processor and core count (what changes speed,
    not what changes from boot to boot)."""
    return {"machine": platform.machine(), "processor": _cpu_name(), "cores": os.cpu_count()}


def machine_line(device=None, threads: int | None = None) -> str:
    """The machine in words: the GPU's name on a CUDA device, else processor, cores and threads."""
    if device is not None and getattr(device, "type", str(device)) == "cuda":
        import torch

        return torch.cuda.get_device_name(device)
    m = machine()
    line = f"{m['processor']}, {m['cores']} cores"
    return line + (f", {threads} threads" if threads else "")


def digest(obj) -> str:
    """SHA-256 of an object's canonical JSON (sorted keys; what JSON cannot hold, as its str)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


_LARGE = 1 << 20
_large_digests: dict[tuple, str] = {}


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes (large files once per process, keyed by size and mtime)."""
    st = path.stat()
    memo = (str(path), st.st_size, st.st_mtime_ns) if st.st_size > _LARGE else None
    if memo in _large_digests:
        return _large_digests[memo]
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_LARGE), b""):
            h.update(block)
    if memo:
        _large_digests[memo] = h.hexdigest()
    return h.hexdigest()


def tree_digests(path: Path) -> dict[str, str]:
    """{path relative to ``path``: SHA-256} of every file under ``path`` (or of ``path`` itself)."""
    path = Path(path)
    if path.is_file():
        return {path.name: file_digest(path)}
    if not path.is_dir():
        return {}
    return {p.relative_to(path).as_posix(): file_digest(p) for p in sorted(path.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def notebook_code_digest(path: Path) -> str:
    """What of a notebook can change what it computes: its code cells in order (source and tags) and
    its kernel. Markdown cells, outputs, execution counts and cell ids are left out: prose is merged
    into the executed notebook when its page is rendered (``bookbuild.execute.with_current_prose``)."""
    nb = json.loads(Path(path).read_text())
    code = [{"source": "".join(c.get("source", "")), "tags": c.get("metadata", {}).get("tags", [])}
            for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    return digest({"code cells": code, "kernelspec": nb.get("metadata", {}).get("kernelspec", {})})


def write_json_atomic(path: Path, data) -> None:
    """Write JSON so that a reader sees the old file or the new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o644)                      # mkstemp makes it private; results are shared files
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True, default=str)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:                        # a full disk fails in write or fsync, naming no file
        Path(tmp).unlink(missing_ok=True)
        if exc.filename:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
