"""Tables that a reader can read on the page: one helper for every chapter.

``show(df, ...)`` turns a DataFrame into an HTML table that fits the content column: its own
horizontally scrolling box (so a wide table scrolls inside itself at 1280 px and at a phone's
390 px instead of being clipped by the page), no index column, numbers to three significant
digits (short exact numbers such as temperatures or counts as they are), intervals as one
``0.997 [0.889, 1.104]`` column, optionally pivoted so that temperatures are rows, padded cells
so that neighbouring numbers never run together, and names that never break inside a word.

Model names are shortened the same way everywhere (``package:antiberty`` -> ``antiberty``,
``tiny-mlm:seed=1,layers=3`` -> ``tiny-mlm:s1,l3``, ``answerdotai/ModernBERT-base`` ->
``ModernBERT-base``); the first table of a chapter that shortens a name says once, under it,
which full name each short one stands for. A chapter runs in its own kernel, so the record of
what was already explained is per chapter.
"""
from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

NAME_COLUMNS = ("model", "name", "models", "control", "embedder", "model name")
SOURCE_PREFIXES = ("package:", "sentence:", "embedding:")
NAME_WIDTH = 24                 # longer short names are cut at a word boundary
TEXT_WRAP = 28                  # string cells longer than this, with spaces, may wrap between words
NA = "–"

CSS = """
.tg-box{overflow-x:auto;max-width:100%;margin:.4rem 0 1rem 0}
.tg-box table.tg-table{border-collapse:collapse;width:auto;margin:0;font-size:.875rem;font-variant-numeric:tabular-nums;border:none}
.tg-box table.tg-table caption{caption-side:top;text-align:left;font-size:.875rem;padding:0 0 .3rem 0;color:inherit}
.tg-box table.tg-table th,.tg-box table.tg-table td{padding:.3rem .75rem;border:none;border-bottom:1px solid rgba(127,127,127,.3);text-align:left;vertical-align:top;white-space:nowrap;overflow-wrap:normal;word-break:normal;hyphens:none}
.tg-box table.tg-table thead th{white-space:normal;min-width:3.5rem;max-width:11rem;vertical-align:bottom;font-weight:600;border-bottom:1px solid rgba(127,127,127,.7)}
.tg-box table.tg-table td.tg-num{text-align:right}
.tg-box table.tg-table td.tg-text{white-space:normal;min-width:10rem;max-width:28rem}
.tg-box .tg-word{white-space:nowrap}
.tg-legend{font-size:.875rem;margin:-.6rem 0 1rem 0}
.tg-legend code{white-space:nowrap}
"""


# --------------------------------------------------------------------------- numbers
def decimals(value: float, digits: int = 3) -> int | None:
    """Decimal places that show ``value`` to ``digits`` significant digits in fixed notation
    (at least none: large numbers keep all their integer digits), or None where fixed notation
    would not do (below 1e-3 or from 1e6 on: scientific)."""
    v = abs(float(value))
    if v == 0:
        return 0
    if not 1e-3 <= v < 1e6:
        return None
    d = max(0, digits - 1 - math.floor(math.log10(v)))
    if d and abs(round(v, d)) >= 10 ** (digits - d):        # 0.9996 rounds to 1.000: one place fewer
        d -= 1
    return d


def _is_missing(v) -> bool:
    return v is None or v is pd.NA or v is pd.NaT or (isinstance(v, (float, np.floating)) and math.isnan(v))


def number(value, digits: int = 3, na: str = NA) -> str:
    """One number as a reader should see it: ``digits`` significant digits, integers whole,
    scientific notation outside [1e-3, 1e6)."""
    if _is_missing(value):
        return na
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    v = float(value)
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    d = decimals(v, digits)
    return f"{v:.{digits - 1}e}" if d is None else f"{v:,.{d}f}"


def _exact(v: float, digits: int) -> bool:
    """True when ``v`` has at most ``digits`` significant digits (a parameter such as T = 0.25)."""
    return v == 0 or (math.isfinite(v) and float(f"{v:.{digits - 1}e}") == v and 1e-4 <= abs(v) < 1e15)


def interval(value, low, high, digits: int = 3, na: str = NA) -> str:
    """``value [low, high]``, all three with the decimal places that give ``value`` its
    ``digits`` significant digits: ``interval(0.997, 0.889, 1.104) == '0.997 [0.889, 1.104]'``."""
    if _is_missing(value):
        return na
    if _is_missing(low) or _is_missing(high):
        return number(value, digits, na)
    v, lo, hi = float(value), float(low), float(high)
    ref = v if v != 0 else max(abs(lo), abs(hi))
    d = decimals(ref, digits) if ref != 0 else 0
    if d is None:
        fmt = lambda x: f"{x:.{digits - 1}e}"          # noqa: E731
    else:
        fmt = lambda x: f"{x:,.{d}f}"                   # noqa: E731
    return f"{fmt(v)} [{fmt(lo)}, {fmt(hi)}]"


# --------------------------------------------------------------------------- names
def short_name(full: str, width: int = NAME_WIDTH) -> str:
    """The short form of a model name, the same wherever it appears."""
    s = str(full)
    changed = True
    while changed:
        changed = False
        for p in SOURCE_PREFIXES:
            if s.startswith(p) and len(s) > len(p):
                s, changed = s[len(p):], True
    if "/" in s and not s.startswith("trained:"):
        s = s.rsplit("/", 1)[-1]                                   # an organisation's prefix
    base, colon, opts = s.partition(":")
    if colon and "=" in opts:                                      # tiny-mlm:seed=1,layers=3 -> tiny-mlm:s1,l3
        pairs = [o.partition("=") for o in opts.split(",")]
        s = base + ":" + ",".join(k[:1] + v if eq else k for k, eq, v in pairs)
    s = re.sub(r"\s*\([^)]*\)$", "", s) or s                       # a trailing remark in brackets
    if len(s) > width:
        cut = max((m.start() for m in re.finditer(r"[\s:,/_-]", s[:width])), default=width - 1)
        s = s[:cut].rstrip() + "…"
    return s


class Names:
    """Short names handed out so far (full -> short, never two full names on one short name)
    and which of them a legend has already explained."""

    def __init__(self):
        self.short: dict[str, str] = {}
        self.explained: set[str] = set()

    def __call__(self, full) -> str:
        if _is_missing(full):
            return NA
        full = str(full)
        if full not in self.short:
            s = short_name(full)
            taken = {v for k, v in self.short.items() if k != full}
            self.short[full] = full if s in taken else s
        return self.short[full]

    def unexplained(self) -> dict[str, str]:
        """Shortened names no legend has given yet (short -> full); marks them explained."""
        new = {s: f for f, s in self.short.items() if s != f and f not in self.explained}
        self.explained |= set(new.values())
        return new


NAMES = Names()          # one per kernel, so one per chapter


def reset() -> None:
    """Forget the names handed out (a new chapter; tests)."""
    global NAMES
    NAMES = Names()


# --------------------------------------------------------------------------- the table
@dataclass
class Table:
    """A formatted table: ``frame`` holds the strings shown, ``html`` the page's markup."""
    frame: pd.DataFrame
    html: str
    legend: dict

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.frame.to_string(index=False)


def _label(c) -> str:
    if isinstance(c, tuple):
        return " ".join(_label(x) for x in c if str(x) != "")
    if isinstance(c, (float, np.floating)):
        return f"{float(c):g}"
    return str(c)


def _format_column(col: pd.Series, digits: int, na: str, fmt=None) -> tuple[list[str], str]:
    """The column's cells as text, and its kind: 'num', 'text' (long strings that may wrap
    between words) or 'word'."""
    if fmt is not None:
        f = fmt.format if isinstance(fmt, str) else fmt
        return [na if _is_missing(v) else f(v) for v in col], "num" if pd.api.types.is_numeric_dtype(col) else "word"
    if pd.api.types.is_bool_dtype(col):
        return [number(v, digits, na) for v in col], "word"
    if pd.api.types.is_numeric_dtype(col):
        vals = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float)
        finite = vals[np.isfinite(vals)]
        if pd.api.types.is_float_dtype(col) and len(finite) and all(_exact(v, digits) for v in finite):
            cells = [na if np.isnan(v) else number(v, digits, na) if np.isinf(v)          # parameters and counts as given
                     else f"{int(v):,}" if v == int(v) and abs(v) < 1e15 else f"{v:g}" for v in vals]
        else:
            cells = [number(v, digits, na) for v in col.tolist()]
        return cells, "num"
    cells = [na if _is_missing(v) else number(v, digits, na) if isinstance(v, (float, np.floating, int, np.integer))
             else str(v) for v in col]
    long = any(len(c) > TEXT_WRAP and " " in c for c in cells)
    return cells, "text" if long else "word"


def show(df: pd.DataFrame, *, intervals: dict | None = None, pivot: dict | None = None,
         names=NAME_COLUMNS, digits: int = 3, formats: dict | None = None, caption: str | None = None,
         na: str = NA, registry: Names | None = None, markup=()) -> Table:
    """The table a reader sees.

    - ``intervals``: ``{label: (value, low, high)}``: the three columns become one column
      ``label`` reading ``value [low, high]`` where ``value`` was;
    - ``pivot``: ``{"index": ..., "columns": ..., "values": ...}``: one row per ``index`` value
      (temperatures as rows), one column per ``columns`` value (e.g. per model);
    - ``names``: columns holding model names, shortened (see :func:`short_name`) with a legend
      of the full names the first time a name is shortened in this chapter;
    - ``formats``: per-column format strings or functions that override the defaults;
    - ``markup``: columns whose cells are HTML already (links), shown as they are.
    """
    registry = registry or NAMES
    f = df.copy()
    if any(n is not None for n in f.index.names) and not isinstance(f.index, pd.RangeIndex):
        f = f.reset_index()
    f = f.reset_index(drop=True)
    if isinstance(f.columns, pd.MultiIndex):
        f.columns = [_label(c) for c in f.columns]
    formats = dict(formats or {})
    kinds: dict[str, str] = {}
    out = pd.DataFrame(index=f.index)
    drop = set()
    placed = {}
    for label, (v, lo, hi) in (intervals or {}).items():
        placed[v] = label
        drop |= {lo, hi}
    for c in f.columns:
        if c in drop:
            continue
        if c in placed:
            v, lo, hi = intervals[placed[c]]
            out[placed[c]] = [interval(a, b, d, digits, na) for a, b, d in zip(f[v], f[lo], f[hi])]
            kinds[placed[c]] = "num"
        elif c in names and not pd.api.types.is_numeric_dtype(f[c]):
            out[c] = [registry(v) for v in f[c]]
            kinds[c] = "word"
        else:
            out[c], kinds[c] = _format_column(f[c], digits, na, formats.get(c))
    if pivot:
        idx, col, val = pivot["index"], pivot["columns"], pivot["values"]
        rows, cols = list(dict.fromkeys(out[idx])), list(dict.fromkeys(out[col]))
        cell = {(r, c): v for r, c, v in zip(out[idx], out[col], out[val])}
        wide = pd.DataFrame({idx: rows, **{c: [cell.get((r, c), na) for r in rows] for c in cols}})
        kinds = {idx: kinds[idx], **{c: kinds[val] for c in cols}}
        out = wide
    out.columns = [_label(c) for c in out.columns]
    kinds = {_label(k): v for k, v in kinds.items()}
    legend = registry.unexplained()
    return Table(frame=out, html=_html(out, kinds, caption, legend, {_label(c) for c in markup}), legend=legend)


def _words(text: str) -> str:
    """Escaped text that may wrap between words but never inside one (not even at a hyphen)."""
    return " ".join(f'<span class="tg-word">{html.escape(w)}</span>' if "-" in w else html.escape(w)
                    for w in str(text).split(" "))


def _html(frame: pd.DataFrame, kinds: dict, caption: str | None, legend: dict, markup=frozenset()) -> str:
    e = html.escape
    head = "".join(f"<th>{_words(c)}</th>" for c in frame.columns)
    body = []
    for row in frame.itertuples(index=False):
        tds = []
        for c, v in zip(frame.columns, row):
            k = kinds.get(c, "word")
            shown = str(v) if c in markup else _words(v) if k == "text" else e(str(v))
            tds.append(f'<td class="tg-{k}">{shown}</td>')
        body.append("<tr>" + "".join(tds) + "</tr>")
    cap = f"<caption>{e(caption)}</caption>" if caption else ""
    table = (f'<div class="tg-box" style="overflow-x:auto;max-width:100%">'
             f'<table class="tg-table">{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>')
    note = ""
    if legend:
        items = "; ".join(f"<code>{e(s)}</code> is <code>{e(full)}</code>" for s, full in legend.items())
        note = f'<p class="tg-legend">Short names in this chapter\'s tables: {items}.</p>'
    return f"<style>{CSS}</style>{table}{note}"
