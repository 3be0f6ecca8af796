"""Chapter 5's page text (docs/science.md, chapter 5): the words, views and plots of the trap
catalogue (:mod:`textglauber.traps.detection`) and of the escape section
(:mod:`textglauber.traps.escape_section`), the preprint's trap figures as the chapter's comparison
table shows them (:func:`preprint_row`, from :data:`textglauber.reported.TRAPS`), and the chapter's
row on the findings page (:func:`headline`): the catalogue of the long chains, escape from perfect
traps (:func:`summary`) and escape against length (:func:`growth_sentence`), as the chapter words them."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from .. import reported
from ..traps import MIN_MEDIANS, escape_counts, vacuous
from ..traps.escape_section import nontrivial_column
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
    """V_k against length (:func:`growth_sentence`) and escape against length by slopes
    (:func:`length_sentence`), as the chapter prints them."""
    gr, el = table(folder, "escape_growth"), table(folder, "escape_length")
    words = [growth_sentence(gr)] if gr is not None and len(gr) else []
    words += [length_sentence(el)] if el is not None and len(el) else []
    return "".join(" " + esc(w) for w in words)


def escape(folder: Path) -> str:
    """The escape section's words (:func:`summary`, as the chapter prints them)."""
    cells, fits = table(folder, "escape_cells"), table(folder, "escape_fits")
    if cells is None or fits is None or not len(cells):
        return ""
    h = escape_counts(cells, fits)
    return f" Escape from perfect traps by exact superbasin exits and jumps ({esc(', '.join(h['models']))}): " + esc(summary(h))


def preprint_row() -> dict:
    """The preprint's traps (:data:`textglauber.reported.TRAPS`) as a row of the chapter's comparison
    table, beside this run's: its margin bound is vacuous for every perfect trap."""
    t = reported.TRAPS
    lo, hi = t["duration_range"]
    return {"chains x steps": f"{t['chains']} x {t['steps']:,}", "traps": t["traps"],
            "mean duration": t["mean_duration"], "duration range": f"{lo:,} - {hi:,}", "perfect": t["perfect"],
            "approximate": t["approximate"],
            "perfect traps where the bound is vacuous": f"{t['perfect']} of {t['perfect']}"}


def preprint() -> str:
    t = reported.TRAPS
    lo, hi = t["duration_range"]
    return (f"{nowrap('bert-base-uncased')}, {t['chains']} chains x {t['steps']:,} steps: {t['traps']} traps, {t['perfect']} "
            f"perfect ({t['perfect'] / t['traps']:.0%}), mean duration {t['mean_duration']:,} steps ({lo:,} to {hi:,}). "
            f"The margin bound is vacuous (an escape time below one step) for all {t['perfect']} perfect traps.")


# ----------------------------------------------------------------------------- the trap catalogue
def recording_notes(run, *, record_every: int, threshold: float, window: int) -> list[str]:
    """What the recording interval means for the detector: the window and threshold in steps, the
    preprint's threshold in the same units and, when records are more than a step apart, how often
    an interval between records held two or more moves."""
    notes = [f"Recorded every {record_every} step{'s' if record_every > 1 else ''}; a window is quiet when its mean "
             f"drift per step is below {threshold:g} over {window} steps. The preprint's threshold of 0.12 comes "
             f"without the number of steps its drift spans; {threshold:g} per step is 0.12 per {0.12 / threshold:.3g} steps."]
    if record_every > 1:
        changed = (run.states[1:] != run.states[:-1]).sum(-1)          # positions changed between records
        notes.append(f"Between consecutive records, {(changed >= 2).mean():.0%} of the intervals changed two or more "
                     f"positions, so they held at least two moves and their per-step drift is estimated, not exact "
                     f"(intervals with one changed position may hold more moves too); trap edges are known to "
                     f"{record_every} steps.")
    return notes


def chains_to_show(cat: pd.DataFrame, chains: int, count: int = 4) -> list[int]:
    """The chains to draw: the two with the most traps, then those of chains 0 .. ``count`` - 1 not
    already among them, up to ``count`` in all."""
    shown = list(cat.chain.value_counts().index[:2]) if len(cat) else []
    return shown + [b for b in range(min(count, chains)) if b not in shown][: max(0, count - len(shown))]


def plot_paths(axes, pc: np.ndarray, steps: np.ndarray, cat: pd.DataFrame, chains) -> None:
    """One panel per chain: its recorded states on two principal components (``pc``: (R, B, 2)),
    coloured by step, each of its traps as a heavy black segment."""
    for ax, b in zip(axes, chains):
        ax.scatter(pc[:, b, 0], pc[:, b, 1], c=steps, cmap="viridis", s=6)
        ax.plot(pc[:, b, 0], pc[:, b, 1], color="0.7", lw=0.4, zorder=0)
        for _, t in cat[cat.chain == b].iterrows():
            m = (steps >= t.start) & (steps <= t.end)
            ax.plot(pc[m, b, 0], pc[m, b, 1], color="k", lw=2.5)
        ax.set_title(f"chain {b}")
        ax.set_xlabel("PC 1"); ax.set_ylabel("PC 2")


CUT_MARKERS = {"inside the run": "o", "still trapped at the end": "^", "present at step 0": "s",
               "from step 0 to the end": "D"}


def cut_by_run(t) -> str:
    """How the run cut a trap's duration (a key of :data:`CUT_MARKERS`): a catalogue row's
    ``censored`` and ``present at step 0``."""
    end, start = bool(t["censored"]), bool(t["present at step 0"])
    return ("from step 0 to the end" if end and start else "still trapped at the end" if end
            else "present at step 0" if start else "inside the run")


def plot_durations(axes, plot: pd.DataFrame) -> list:
    """Left: each perfect trap's duration against the holding time its margin bound guarantees,
    the diagonal dashed. Right: every trap's duration against its mean gap, by type. Markers say
    how the run cut a trap (``plot``: the catalogue with a ``cut by the run`` column). Returns the
    legend's handles."""
    import seaborn as sns
    from matplotlib.lines import Line2D

    colours = dict(zip(["perfect", "approximate"], sns.color_palette(n_colors=2)))
    perf = plot[plot.type == "perfect"]
    if len(perf):
        sns.scatterplot(data=perf, x="predicted escape time (steps)", y="duration", style="cut by the run",
                        markers=CUT_MARKERS, color=colours["perfect"], ax=axes[0], legend=False)
        lim = [min(perf["predicted escape time (steps)"].min(), 1e-3), max(perf.duration.max(), 1)]
        axes[0].plot(lim, lim, "k--", lw=1)
        axes[0].set_xscale("log"); axes[0].set_yscale("log")
    else:
        axes[0].text(0.5, 0.5, "no perfect trap", ha="center", transform=axes[0].transAxes)
    axes[0].set_xlabel("one-state holding time the margin bound guarantees")
    axes[0].set_ylabel("basin duration (steps)")
    sns.scatterplot(data=plot, x="mean gap", y="duration", hue="type", palette=colours, style="cut by the run",
                    markers=CUT_MARKERS, ax=axes[1], legend=False)
    axes[1].set_yscale("log")
    axes[1].set_ylabel("basin duration (steps)")
    shown = [Line2D([], [], ls="", marker="o", color=colours[t], label=t) for t in colours if (plot.type == t).any()]
    return shown + [Line2D([], [], ls="", marker=CUT_MARKERS[k], color="0.35", label=k) for k in CUT_MARKERS
                    if (plot["cut by the run"] == k).any()]


def cut_sentence(plot: pd.DataFrame) -> str:
    """How many traps the run cut short, and how (``plot`` as for :func:`plot_durations`)."""
    cut = plot["cut by the run"] != "inside the run"
    return (f"{int(cut.sum())} of {len(plot)} traps were cut short by the run "
            f"({int(plot.censored.sum())} still trapped at the end, {int(plot['present at step 0'].sum())} "
            "present at step 0): their durations are lower bounds.")


# ----------------------------------------------------------------------------- the escape section
def plot_escape(axes, cells: pd.DataFrame, fits: pd.DataFrame) -> None:
    """Per model, log10 of the median escape time against 1/T: a colour per trap, a marker per
    distance k, the fitted line where there is one; a median the chains never reached is drawn as
    an open triangle at the chains' mean stopping step, a rough mark of where the censoring fell."""
    markers = dict(zip(sorted(cells.k.unique()), "os^Dv"))
    for ax, (model, c) in zip(axes, cells.groupby("model", sort=False)):
        for (j, k), g in c.groupby(["trap", "k"]):
            colour = f"C{j % 10}"
            fin = np.isfinite(g["median"])
            ax.plot(1 / g.temperature[fin], np.log10(g["median"][fin]), markers[k], color=colour,
                    label=f"trap {j}, k = {k}")
            ax.plot(1 / g.temperature[~fin], np.log10(g["steps simulated"][~fin] / g.chains[~fin]), "^",
                    mfc="none", color=colour)
            f = fits[(fits.model == model) & (fits.trap == j) & (fits.k == k)]
            if len(f) and np.isfinite(f.slope.iloc[0]) and f.medians.iloc[0] >= MIN_MEDIANS:
                x = 1 / g.temperature[fin]
                ax.plot(x, (f.slope.iloc[0] * x + np.log(g["median"][fin]).mean()
                            - f.slope.iloc[0] * x.mean()) / math.log(10), "-", color=colour, lw=0.8)
        ax.set(title=model, xlabel="1 / T", ylabel="log10 median escape time (steps)")
        ax.legend(fontsize=7, ncol=2)


def fit_table(fits: pd.DataFrame) -> pd.DataFrame:
    """The per-trap table of the page: margin, the exponent (V_k, or the wells' W-graph value where the
    ball holds another well) and whether it is non-trivial (differs from the margin), the fitted slope with its interval, or "too few" below
    :data:`MIN_MEDIANS` medians, the same fit over the coldest medians alone, and the cheapest path out."""
    t = fits.copy()
    ok = t.medians >= MIN_MEDIANS
    t["slope (95% interval)"] = [_interval(s, lo, hi) if good else f"too few ({m} medians)"
                                 for s, lo, hi, m, good in zip(t.slope, t.slope_low, t.slope_high, t.medians, ok)]
    t["slope / predicted"] = (t.slope / t.exponent).where(ok)
    t[f"{MIN_MEDIANS} coldest (95% interval)"] = [
        _interval(s, lo, hi) if good else ""
        for s, lo, hi, good in zip(t["cold slope"], t["cold slope_low"], t["cold slope_high"], ok)]
    t["nontrivial"] = nontrivial_column(t)
    return t[["model", "trap", "k", "margin", "exponent", "nontrivial", "exponent case", "slope (95% interval)",
              "slope / predicted", f"{MIN_MEDIANS} coldest (95% interval)", "one-state slope", "medians", "fit p",
              "line holds", "path"]]


def _interval(s: float, lo: float, hi: float) -> str:
    """A slope and its interval to three significant figures (margins run from 0.01 to 5)."""
    return f"{s:#.3g} [{lo:#.3g}, {hi:#.3g}]"


def summary(h: dict) -> str:
    """The escape section's findings in words, from
    :func:`textglauber.traps.escape_section.escape_counts` (true on any profile); the findings page
    prints the same words (:func:`escape`)."""
    if not h["finite"]:
        return "No cell's chains reached their median escape within the horizon and move budget."
    parts = [f"Median escape times from {h['traps']} perfect traps run from {h['lowest']:.3g} to {h['highest']:.3g} "
             f"steps ({math.log10(h['highest'] / h['lowest']):.1f} orders of magnitude) over the {h['finite']} of "
             f"{h['cells']} cells whose chains reached their median"]
    parts.append(f"of the {h['fits']} fits, {h['too_few']} have fewer than {MIN_MEDIANS} medians and enter no count "
                 f"below; a straight line in 1/T (the Arrhenius law) is consistent with the medians (goodness of fit "
                 f"p >= 0.01) in {h['holds']} of the other {h['tested']}")
    if h["k1_ratio"]:
        lo, hi = h["k1_ratio"]
        parts.append(f"for leaving the trap itself (k = 1) the slope is {lo:.2f} to {hi:.2f} times the margin"
                     + _against_words(h["k1_against"], "the margin")
                     + ", which checks the sampler and says nothing new about the model: that escape time is "
                       "geometric with the one-state holding time h(T) as its mean, the temperatures were set by "
                       "inverting that same h(T), and the slope of log h against 1/T tends to the smallest score "
                       "gap, the margin")
    if h["one_state_ratio"]:
        lo, hi = h["one_state_ratio"]
        parts.append(f"over the same temperatures the exact one-state holding time's own slope is {lo:.3f} to "
                     f"{hi:.3f} times the margin (it tends to 1 as T falls), "
                     + ("so these temperatures are not yet asymptotic: at k = 1 finite temperature alone puts the "
                        f"slope up to {100 * (hi - 1):.0f}% above its limit" if hi > 1.005 else
                        "so at these temperatures the slope is already close to its limit"))
    parts += _deeper_words(h)
    if h["unfinished"]:
        parts.append(f"in {h['unfinished']} fits no prediction is compared: the path search ran out of its budget "
                     "(V_k there is only a lower bound) or met more wells than the W-graph formula is run on")
    return "; ".join(parts) + "."


def _deeper_words(h: dict) -> list[str]:
    """The fits with k > 1, the trivial ones (exponent equal to the margin) apart from the others."""
    out = []
    if h.get("trivial"):
        out.append(f"{h['trivial']} fits with k > 1 have an exponent equal to the margin (the first move off the trap "
                   "carries the whole cost of the way out), so they repeat the k = 1 check and are counted apart"
                   + _against_words(h["trivial_against"], "the margin"))
    by_model = h.get("nontrivial_by_model", {})
    counts = ", ".join(f"{n} for {m}" for m, n in by_model.items())
    total = sum(by_model.values())
    if not total:
        out.append("no fitted escape with k > 1 has an exponent other than the margin, so this run tests nothing "
                   "beyond k = 1")
        return out
    ratio = (f"; their slope is {h['deeper_ratio'][0]:.2f} to {h['deeper_ratio'][1]:.2f} times that exponent"
             if h["deeper_ratio"] else "")
    out.append(f"{total} fits with k > 1 have a non-trivial exponent, one that differs from the margin ({counts}): "
               "the least total cost of a path out of the ball, computed from the model's scores before any chain ran, "
               f"or, in the {h['several_wells']} of them with a second well on the way, the wells' W-graph value"
               + ratio + _against_words(h["deeper_against"], "the exponent"))
    return out


def _against_words(a: dict, what: str) -> str:
    if not a["fits"]:
        return ""
    text = (f" ({what} lies inside the slope's 95% interval in {a['inside']} of {a['fits']} fits, below it in "
            f"{a['slope above']}, above it in {a['slope below']})")
    out = a["fits"] - a["inside"]
    if not out:
        return text
    text += (f"; where it lies outside, a fit to the {MIN_MEDIANS} coldest medians alone holds it in "
             f"{a['cold inside']} of {out}")
    if a["cold inside"] == out:
        return text + (", so the miss comes from the hotter temperatures, which are not yet on the low-temperature "
                       "line (the coldest fit's interval is wider: this shows no miss where the law applies, "
                       "not a closer agreement)")
    return text + (f", and in {out - a['cold inside']} the miss remains at the coldest temperatures, which "
                   "this run does not explain (a prefactor that still changes with T, or temperatures not yet "
                   "cold enough)")


def exact_sentence(ex: pd.DataFrame) -> str:
    """The exactness check in words: how many cases pass (mean and distribution), at which level,
    and how many ran with the superbasin filled to its cap."""
    if not len(ex):
        return "No exactness case ran: the profile names no enumerated model, temperature and distance."
    deep = int((ex["one-state holding time"] > 2 ** 53).sum())
    capped = ex[ex["basin cap"] < ex["basin cap"].max()]
    text = (f"{int(ex.inside.sum())} of {len(ex)} cases pass: the exact mean lies inside the interval of the "
            f"simulated mean in {int(ex['mean inside'].sum())}, and the chi-square test of the whole distribution "
            f"against the exact law (bins at its deciles) passes in {int(ex['distribution passes'].sum())} (each at "
            f"level {ex.level.iloc[0]:.5f}, so {1 - (1 - ex.level.iloc[0]) * 2 * len(ex):.0%} for all {2 * len(ex)} tests "
            "together), "
            f"over exact means from {ex['exact mean'].min():.3g} to {ex['exact mean'].max():.3g} steps and exact "
            f"medians from {ex['exact median'].min():.3g} to {ex['exact median'].max():.3g}")
    if len(capped):
        text += (f"; {len(capped)} cases ran again with the superbasin capped at {int(capped['basin cap'].iloc[0])} "
                 f"states, which it reached in {int(capped['cap reached'].sum())} of them")
    if deep:
        text += (f"; in {deep} of them the trap's own holding time exceeds 2^53 steps, where 1 - P(x, x) computed "
                 "by subtraction loses every digit")
    return text + "."


def growth_sentence(gr: pd.DataFrame) -> str:
    """V_k against length in words: per model, V_k at k = ceil(n/4) over the lengths (lower bounds
    named), the rows the searches scored, and how the exponent changes between the first and last
    length. Escape times against length are :func:`length_sentence`'s, by slopes."""
    if not len(gr):
        return "No model ran the growth section."
    parts = []
    for model, g in gr.groupby("model", sort=False):
        done = g[g["exponent case"].isin(["one well", "several wells"])]   # exponents known
        text = f"{model}: " + ", ".join(
            f"n = {r.n}: {'at least ' if r['exponent case'] == 'unfinished' else ''}{r.predicted_exponent:.3g}"
            for _, r in g.iterrows() if r["exponent case"] != "no trap")
        text += (f" (V_k at k = n/4 rounded up; the searches scored {int(g.rows_scored.min())} to "
                 f"{int(g.rows_scored.max())} rows)") if "rows_scored" in g and g.rows_scored.notna().any() else ""
        if len(done) >= 2:
            a, b = done.iloc[0], done.iloc[-1]
            text += (f"; from n = {a.n} to {b.n} the exponent goes from {a.exponent:.3g} to {b.exponent:.3g}, "
                     f"a factor of {b.exponent / a.exponent:.2f} against {b.n / a.n:.1f} in n")
        parts.append(text)
    return "V_k against length. " + "; ".join(parts) + "."


def length_sentence(el: pd.DataFrame) -> str:
    """Escape against length by slopes (:func:`textglauber.traps.escape_length`'s table) in words:
    how each model's family of traps was chosen, and at each length the exponent beside the fitted
    Arrhenius slope and its interval (and the exact slope where the chain was enumerated)."""
    if not len(el):
        return "No model ran escape against length: the finder reached no trap at the shortest length."
    parts = []
    for model, g in el.groupby("model", sort=False):
        grown = g[g.chosen == "grown"]
        nested = int((grown.kept == g.n.shift(1)[grown.index]).sum())
        text = (f"{model}: the trap at n = {g.n.iloc[0]} is the deepest the finder reached; of the "
                f"{len(g) - 1} longer ones, {len(grown)} grew from the shorter trap by coordinate ascent, and "
                f"{nested} of those keep all of its sites as their prefix. ")
        text += "; ".join(_length_words(r) for _, r in g.iterrows())
        fitted = g[g.temperatures >= 3]
        text += (f". The exponent lies inside the slope's 95% interval at {int(fitted['exponent inside'].sum())} of "
                 f"{len(fitted)} lengths fitted over 3 temperatures or more, and {int(g.nontrivial.sum())} of the "
                 f"{len(g)} exponents differ from their trap's margin")
        parts.append(text)
    return ("Escape against length, by slopes. " + ". ".join(parts) + ". At each length the slope and the exponent "
            "belong to the same trap, so how the family was chosen decides which exponents are tested, not whether "
            "a slope agrees with its own; how the exponent changes with n is this family's.")


def _length_words(r) -> str:
    ex = "" if not np.isfinite(r["exact slope"]) else f", exact slope {r['exact slope']:.3g}"
    slope = (_interval(r.slope, r.slope_low, r.slope_high) if np.isfinite(r.slope)
             else f"no slope ({int(r.temperatures)} medians reached)")
    return f"n = {r.n} (k = {r.k}): exponent {r.exponent:.3g} ({r['exponent case']}), slope {slope}{ex}"


def cost_sentence(cells: pd.DataFrame, seconds: float) -> str:
    """What the section's cells cost, counted (rows, moves, states), and its wall time (information)."""
    steps, rows = cells["steps simulated"].sum(), cells["rows scored"].sum()
    return (f"The cells simulated {steps:.3g} chain steps in {int(cells.moves.sum()):,} events, of which "
            f"{int(cells['superbasin exits'].sum()):,} superbasin exits; the models scored {int(rows):,} rows for them "
            f"({rows / steps:.2g} rows per simulated step; at most {int(cells['distinct states'].max()):,} distinct "
            f"states and {int(cells['basin states'].max()):,} superbasin states in one cell). "
            f"The section took {seconds / 60:.1f} min ({seconds:.0f} s) on this machine (information only: nothing "
            "depends on it).")


def preprint_sentence(cells: pd.DataFrame, preprint: pd.DataFrame) -> str:
    """The escape times set beside the preprint's 10,000-step chains, without the design's help: the
    temperatures above were chosen per trap to put the one-state holding time at 10^3 steps and
    more, so medians beyond 10,000 steps follow from that choice. What compares is each trap at the
    preprint's temperature (:func:`textglauber.traps.escape_section.at_preprint_temperature`)."""
    T, steps = reported.TRAPS["temperature"], reported.TRAPS["steps"]
    fin = cells[np.isfinite(cells["median"])]
    text = (f"The temperatures above were set per trap to put its one-state holding time at 10^3 steps and more "
            f"(down to T = {cells.temperature.min():.3g}), so that {int((fin['median'] > steps).sum())} of the "
            f"{len(fin)} medians exceed the preprint's {steps:,}-step chains follows from the design, not from the "
            "model. ") if len(cells) else ""
    if not len(preprint):
        return text + f"No trap was run at the preprint's temperature T = {T:g}."
    reached = preprint[np.isfinite(preprint["median"])]
    longer = int((preprint["one-state holding time"] > steps).sum())
    text += (f"At the preprint's temperature, T = {T:g}, the {len(preprint)} traps hold their own state for "
             f"{preprint['one-state holding time'].min():.3g} to {preprint['one-state holding time'].max():.3g} "
             f"steps ({longer} beyond {steps:,})")
    if len(reached):
        text += (f", and the median escape to distance 2 is {reached['median'].min():.3g} to "
                 f"{reached['median'].max():.3g} steps in the {len(reached)} traps whose chains reached it")
    if len(reached) < len(preprint):
        text += f"; in {len(preprint) - len(reached)} the chains did not reach it within the horizon and event budget"
    return text + "."


def closing_blocks(cat: pd.DataFrame, cells: pd.DataFrame, preprint_cells: pd.DataFrame, *, chains: int, steps: int,
                   profile: str, model: str, temperature: float, window: int, threshold: float) -> list:
    """The chapter's end as page blocks (:func:`textglauber.pages.render`): the preprint's trap
    figures beside this run's, what differs and why, and the escape rows at the preprint's
    temperature."""
    from .. import tables

    vac, n_perfect = vacuous(cat)
    ours = {"chains x steps": f"{chains} x {steps:,}", "traps": len(cat)}
    if len(cat):
        ours.update({"mean duration": round(cat.duration.mean()),
                     "duration range": f"{cat.duration.min():,} - {cat.duration.max():,}", "perfect": n_perfect,
                     "approximate": int((cat.type == "approximate").sum()),
                     "perfect traps where the bound is vacuous": f"{vac} of {n_perfect}"})
    rows = [{"source": "preprint (arXiv 2605.16378), BERT", **preprint_row()},
            {"source": f"this run, profile '{profile}', {model}, T = {temperature:g}", **ours}]
    lines = [f"This run used {model} at T = {temperature:g} with a {window}-step window and a threshold of "
             f"{threshold:g} drift per step; trap counts and durations depend on the model, the temperature and the "
             "chain length, so they are comparable with the preprint's only in kind."]
    if n_perfect:
        lines.append(f"The margin bound is vacuous (an escape time below one step) for {vac} of the {n_perfect} perfect "
                     "traps here; the approximate ones have no margin and so no bound to count.")
    elif len(cat):
        lines.append("No trap here is perfect, so the margin bound applies to none of them.")
    if len(cells):
        lines.append(preprint_sentence(cells, preprint_cells))
    cut = cat.censored | cat["present at step 0"] if len(cat) else pd.Series(dtype=bool)
    if cut.any():
        lines.append(f"The mean duration includes {int(cut.sum())} trap(s) cut short by the run, whose durations are "
                     "lower bounds, so it is one too.")
    out = [tables.show(pd.DataFrame(rows)), " ".join(lines)]
    if len(preprint_cells):
        out.append(tables.show(preprint_cells[["model", "trap", "margin", "temperature", "one-state holding time", "k",
                                               "median", "median_low", "median_high", "censored"]]))
    return out
