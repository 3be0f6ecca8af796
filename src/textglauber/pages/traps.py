"""Chapter 5's row on the findings page: the trap catalogue of the long chains, escape from
perfect traps (:func:`textglauber.arrhenius.summary`) and escape against length
(:func:`textglauber.arrhenius.growth_sentence`), as the chapter words them."""
from __future__ import annotations

from pathlib import Path

from .. import reported
from . import Headline
from .reading import esc, manifest, nowrap, table


def headline(folder: Path, root: Path, profile: str) -> Headline | None:
    m = manifest(folder)
    if m is None:
        return None
    p = m["parameters"]
    run = (f"{nowrap(p['model']['name'])} at T = {float(p['temperature']):g}, {int(p['chains'])} chains x "
           f"{int(p['steps']):,} steps")
    cat = table(folder, "traps")
    if cat is None or not len(cat):
        return Headline(f"{run}: no trap.", (escape(folder) + growth(folder)).lstrip())
    from ..traps import vacuous

    perfect = int((cat.type == "perfect").sum())
    counted = f"{run}: {len(cat)} traps, {perfect} perfect ({perfect / len(cat):.0%})"
    text = f"{counted}, mean duration {cat.duration.mean():,.0f} steps ({cat.duration.min():,} to {cat.duration.max():,})"
    cut = [f"{int(cat[c].sum())} {what}" for c, what in (("censored", "still trapped when the chain ended"),
                                                         ("present at step 0", "trapped from step 0"))
           if c in cat and cat[c].any()]
    if cut:
        text += f"; {' and '.join(cut)}, so those durations are lower bounds"
    vac, of = vacuous(cat) if "predicted escape time (steps)" in cat else (0, 0)
    if of:
        text += (f". The margin bound is vacuous (an escape time below one step) for {vac} of the {of} perfect "
                 "traps; approximate traps have no margin, so no bound")
    return Headline(counted + ".", text + "." + escape(folder) + growth(folder))


def growth(folder: Path) -> str:
    """Escape against length (:func:`textglauber.arrhenius.growth_sentence`, as the chapter prints it)."""
    gr = table(folder, "escape_growth")
    if gr is None or not len(gr):
        return ""
    from ..arrhenius import growth_sentence

    return " " + esc(growth_sentence(gr))


def escape(folder: Path) -> str:
    """The escape section's words (:func:`textglauber.arrhenius.summary`, as the chapter prints them)."""
    cells, fits = table(folder, "escape_cells"), table(folder, "escape_fits")
    if cells is None or fits is None or not len(cells):
        return ""
    from ..arrhenius import headline as escape_headline, summary

    h = escape_headline(cells, fits)
    return f" Escape from perfect traps by exact superbasin exits and jumps ({esc(', '.join(h['models']))}): " + esc(summary(h))


def preprint() -> str:
    t = reported.TRAPS
    lo, hi = t["duration_range"]
    return (f"{nowrap('bert-base-uncased')}, {t['chains']} chains x {t['steps']:,} steps: {t['traps']} traps, {t['perfect']} "
            f"perfect ({t['perfect'] / t['traps']:.0%}), mean duration {t['mean_duration']:,} steps ({lo:,} to {hi:,}). "
            f"The margin bound is vacuous (an escape time below one step) for all {t['perfect']} perfect traps.")
