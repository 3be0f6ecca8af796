"""Results are build products: ``results/<profile>/<chapter>/`` holds parquet tables and a
``manifest.json`` that says how they were made (commit, parameters, models, seed, versions)."""
from __future__ import annotations

import json
import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import pandas as pd

PACKAGES = ("textglauber", "torch", "transformers", "tokenizers", "numpy", "pandas", "pyarrow",
            "sentence-transformers", "papermill", "jupyter-book")


def repo_root() -> Path:
    here = Path(__file__).resolve()
    for p in here.parents:
        if (p / "params").is_dir() and (p / "_toc.yml").exists():
            return p
    return Path.cwd()


def chapter_dir(results_root: str | Path, profile: str, chapter: str) -> Path:
    d = Path(results_root) / profile / chapter
    d.mkdir(parents=True, exist_ok=True)
    return d


def git_commit() -> dict:
    def git(*args):
        return subprocess.run(["git", *args], cwd=repo_root(), capture_output=True, text=True, timeout=10)

    try:
        head = git("rev-parse", "HEAD").stdout.strip() or None
        dirty = bool(git("status", "--porcelain", "--untracked-files=no").stdout.strip())
    except (OSError, subprocess.SubprocessError):
        head, dirty = None, None
    return {"commit": head, "dirty": dirty}


def versions() -> dict:
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def write_manifest(folder: str | Path, *, parameters: dict, models: list[dict], seed: int,
                   tables: list[str], notes: list[str] | None = None, name: str = "manifest.json",
                   extra: dict | None = None) -> Path:
    """The JSON record beside a run's tables: time, commit, parameters, models, seed, tables,
    versions, notes, and any ``extra`` fields (the benchmark adds its command and machine)."""
    folder = Path(folder)
    manifest = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "git": git_commit(), "parameters": parameters, "models": models, "seed": seed,
                "tables": tables, "versions": versions(), "notes": notes or [], **(extra or {})}
    path = folder / name
    path.write_text(json.dumps(manifest, indent=2, default=str))
    return path


def write_table(df: pd.DataFrame, folder: str | Path, name: str) -> Path:
    path = Path(folder) / f"{name}.parquet"
    df.to_parquet(path, index=False)
    return path
