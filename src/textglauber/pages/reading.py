"""Reading a chapter's results for its headline: the manifest of its last finished run and the
tables that run listed (:func:`textglauber.results.vouched_table`), with HTML helpers for the
findings page's cells. A chapter folder that the build found unfinished is registered in
:data:`NOT_RUN` (by :func:`textglauber.bookbuild.findings.collect`) and reads as empty."""
from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from .. import results

NOT_RUN: dict[Path, str] = {}
"""Resolved chapter folders with no finished run in this build -> why (filled while a findings
page is collected)."""


def esc(text) -> str:
    """``text`` escaped for HTML."""
    return html.escape(str(text))


def nowrap(name) -> str:
    """A model name that never breaks across lines."""
    return f'<span style="white-space:nowrap">{esc(name)}</span>'


def manifest(folder: Path) -> dict | None:
    """A chapter's manifest, or None where it has none or its last run did not finish."""
    if Path(folder).resolve() in NOT_RUN:
        return None
    return results.read_manifest(folder)


def table(folder: Path, name: str) -> pd.DataFrame | None:
    """One of a chapter's tables, or None where its manifest does not list it: a table that the
    chapter's last finished run did not write is no result of it, whatever the folder holds. A
    listed table whose bytes are not the ones that run wrote raises
    :class:`textglauber.results.NotThisRun`, which the chapter's row shows in one line."""
    m = manifest(folder)
    if m is None or name not in (m.get("tables") or []):
        return None
    return results.vouched_table(folder, name)
