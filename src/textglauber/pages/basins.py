"""Chapter 4's page text (docs/science.md, chapter 4), apart from its computation in
:mod:`textglauber.topics` and :mod:`textglauber.basinnull`: the scorer's note, the crossing count
and the null chains' paragraph, the plots of the chains and of the topic map, the comparison with
the preprint, the sentences on the null that can fail both ways, and the chapter's row on the
findings page (:func:`headline`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import figures, reported
from ..basinnull import POWER_NEEDED, Special, special
from ..topics import LABELS, PREPRINT_PROTOCOL, null_verdict, preprint_max_starts_above
from . import Headline
from .reading import esc, manifest, nowrap, table


def _names(labels: list[str], most: int = 4) -> str:
    return ", ".join(labels[:most]) + (" and others" if len(labels) > most else "")


def _cannot_tell(v: Special, basin_label: str, alpha: float) -> str:
    """Why the label contrast cannot tell, as a clause."""
    if v.reason == "basin seeded":
        return f"{basin_label} itself seeded chains, so memory of the seed would lift it"
    if v.reason == "nothing to compare":
        return "every other label seeded some chain, so no label free of memory of the seed is left to compare with"
    if v.reason == "too few clusters":
        return (f"with {v.clusters} clusters the sign-flip test cannot give a p-value below {alpha:g} / {v.others} "
                f"(Holm's first step over {v.others} labels)")
    said = f"{basin_label} beats {v.beaten} of the {v.others} labels no chain was seeded from"
    if not v.power_runs:
        return said + ", and no stand-in run showed that this design can find a planted basin, so that is no evidence"
    return (said + f", but stand-in runs of the same design found a planted basin in only {v.power:.0%} of "
            f"{v.power_runs} runs (at least {POWER_NEEDED:.0%} asked), so that is no evidence against a basin")


def special_clause(contrast: pd.DataFrame, model: str, basin_label: str, *, alpha: float) -> str:
    """One clause: is the basin label special among the labels no chain was seeded from, for ``model``?"""
    v = special(contrast, model, alpha=alpha)
    if v.verdict is True:
        names = contrast[(contrast.model == model) & contrast.compared].label.tolist()
        return (f"{basin_label} beats every label no chain was seeded from ({v.others}: {_names(names)}) in late "
                "share above the baseline")
    if v.verdict is False:
        return (f"{basin_label} is not special: it beats {v.beaten} of the {v.others} labels no chain was seeded from "
                f"in late share above the baseline and ranks {v.rank} of {v.others + 1}, where stand-in runs of the "
                f"same design found a planted basin in {v.power:.0%} of {v.power_runs}")
    return f"it cannot be told whether {basin_label} is special: " + _cannot_tell(v, basin_label, alpha)


def special_paragraph(contrast: pd.DataFrame, model: str, basin_label: str, *, alpha: float) -> str:
    """The label contrast of one model, as the page says it: which labels are compared and which
    are left out for seeding chains (with their late shares), then the three-way verdict."""
    v: Special = special(contrast, model, alpha=alpha)
    C = contrast[contrast.model == model]
    S = C[~C.compared]
    text = (f"For {model}, over {v.clusters} clusters of chains (topic-seeded and null; the chains of one seed are one "
            f"cluster), the {basin_label} score is above the baseline in {C.basin.iloc[0]:.0%} of second-half records. ")
    if len(S):
        text += (f"{len(S)} labels seeded chains ({_names(S.label.tolist())}, shuffled seeds included) and are left "
                 f"out: their late shares ({S.other.min():.0%} to {S.other.max():.0%}) can be lifted by memory of the seed. ")
    if v.others:
        text += (f"Against each of the {v.others} labels no chain was seeded from (sign-flip test over clusters, "
                 f"Holm-adjusted at level {alpha:g}) {basin_label} ranks {v.rank} of {v.others + 1} and is ahead of "
                 f"{v.beaten}. ")
    text += _power_sentence(C, v, basin_label)
    if v.verdict is True:
        return text + (f"**{basin_label} is special among the labels**: the chains spend more of their late records "
                       f"above the baseline on it than on any label no chain was seeded from. The scorer's own leaning "
                       "towards a label would show the same way, so this speaks of the model and the scorer together.")
    if v.verdict is False:
        K = C[C.compared].sort_values("difference")
        top = K.iloc[0]
        return text + (f"**{basin_label} is not special among the labels**: it is not ahead of {_names(v.not_beaten)}. "
                       f"Its smallest difference in late share, against {top.label}, is {top.difference:+.2f} (95% "
                       f"interval {top.low:+.2f} to {top.high:+.2f}, adjusted {format_p(top['p holm'])}).")
    return text + f"The test **cannot tell** whether {basin_label} is special: {_cannot_tell(v, basin_label, alpha)}."


def _power_sentence(C: pd.DataFrame, v: Special, basin_label: str) -> str:
    if not v.power_runs:
        return ""
    r = C.iloc[0]
    return (f"In {v.power_runs} stand-in runs of the same design (same seeds, chains, steps and records; a model whose "
            f"words of each label attract words of the same label with coupling {r.coupling:g}, the coupling that "
            f"matches this run's memory of the seed best, and whose {basin_label} words get {r['planted bias']:g} "
            f"logits more), the test found {basin_label} special in {v.power:.0%}. ")


def memory_sentence(memory: pd.DataFrame, model: str) -> str:
    """How much the chains of ``model`` remember their seed's topic (:func:`basinnull.seed_memory`),
    topic-seeded and shuffled seeds against random ones on the same labels."""
    M = memory[memory.model == model]
    if not len(M):
        return ""
    parts = []
    for _, r in M.iterrows():
        ref = r["random on same labels"]
        parts.append(f"{r.kind} seeds are above the baseline on their own seed topic in {r['own topic']:.0%} of "
                     "second-half records" + ("" if not np.isfinite(ref) else
                                              f", against {ref:.0%} for random seeds on the same labels"))
    sh = M[M.kind == "shuffled"]
    tail = ""
    if len(sh) and np.isfinite(sh.difference.iloc[0]):
        d = sh.difference.iloc[0]
        how = (f"{abs(d) * 100:.0f} percentage points more often than" if d > 0 else
               f"{abs(d) * 100:.0f} percentage points less often than" if d < 0 else "as often as")
        tail = (f" Shuffled seeds are above the baseline on their source topic {how} random seeds are on "
                "the same labels; whatever they carry of it, the label contrast leaves every label a seed came from, "
                "shuffled seeds included, out of its comparison, so memory of the seed lifts none of the labels it "
                "compares.")
    return f"Memory of the seed, {model}: " + "; ".join(parts) + "." + tail


def matched_paragraph(matched: pd.DataFrame, model: str, basin_label: str, *, alpha: float) -> str:
    """Topic-seeded against null chains matched on the start score, as the page says it."""
    M = matched[matched.model == model].set_index("outcome")
    if not len(M):
        return (f"For {model}, no topic-seeded or no null chain started at or below the baseline, so no pair could "
                "be matched on its start.")
    c, l = M.loc["crossed"], M.loc["late"]
    reuse = " (too few null chains: some serve more than one pair)" if c.replacement else ""
    return (f"Matched on the {basin_label} score they start from, {int(c.pairs)} seeds of {model} are each paired with "
            f"one null chain{reuse}; the start scores differ by {c['mean start gap']:.3f} on average and "
            f"{c['largest start gap']:.3f} at most. The topic-seeded chains cross the baseline in {c.topic:.0%} of "
            f"cases against {c.null:.0%} for their partners ({format_p(c.p)}), and are above it in {l.topic:.0%} of "
            f"second-half records against {l.null:.0%} ({format_p(l.p)}). "
            + ("**At the same start, the seed's topic makes a difference** to where the chains go."
               if c.exceeds or l.exceeds else
               "**At the same start, the seed's topic makes no detectable difference**: this speaks to whether the "
               "seed matters, not to whether a basin exists, which is the label contrast's question."))


def format_p(p: float) -> str:
    """A p-value for a sentence: two significant digits, 'p < 0.001' below that, or 'not defined'."""
    return "p not defined" if not np.isfinite(p) else f"p = {p:.2g}" if p >= 1e-3 else "p < 0.001"


VERDICT_WORDS = {True: "exceeds", False: "does not exceed", None: "cannot be compared with"}


def protocol_differences(model: str, topic_scorer: str, labels: list[str], temperature: float, steps: int,
                         score_every: int, chains_per_topic: int) -> dict[str, str]:
    """How a basins run departs from the preprint's protocol: one phrase per differing element
    (keys: model, topic_scorer, labels, temperature, steps, score_every, chains_per_topic); empty
    when the run follows it. The seed sentences are always the package's own, so not listed."""
    ref, out = PREPRINT_PROTOCOL, {}
    if model.partition("@")[0] != ref["model"]:
        out["model"] = f"the masked LM is `{model}`, not {ref['model']}"
    if not topic_scorer.startswith("nli:"):
        out["topic_scorer"] = (f"the topic scorer is `{topic_scorer}`, which reads topics from embedding similarity "
                               f"to label prompts, not the NLI classifier `{ref['topic_scorer'][4:]}`, so its "
                               "probabilities sit on another scale")
    elif topic_scorer.partition("@")[0] != ref["topic_scorer"]:
        out["topic_scorer"] = f"the NLI scorer is `{topic_scorer[4:]}`, not `{ref['topic_scorer'][4:]}`"
    if list(labels) != list(ref["labels"]):
        out["labels"] = (f"{len(labels)} labels (baseline 1/{len(labels)} = {1 / len(labels):.3f}) instead of the "
                         f"appendix's {len(ref['labels'])} (1/{len(ref['labels'])} = {1 / len(ref['labels']):.3f})")
    if float(temperature) != ref["temperature"]:
        out["temperature"] = f"T = {temperature:g} instead of {ref['temperature']:g}"
    if int(steps) != ref["steps"]:
        out["steps"] = f"{steps:,} steps per chain instead of {ref['steps']:,}"
    if int(score_every) != ref["score_every"]:
        out["score_every"] = f"scores every {score_every:,} steps instead of every {ref['score_every']:,}"
    if int(chains_per_topic) != ref["chains_per_topic"]:
        out["chains_per_topic"] = f"{chains_per_topic} chains per seed topic instead of {ref['chains_per_topic']}"
    return out


def scorer_note(name: str, labels: list[str], basin_label: str, score) -> str:
    """The topic scorer, its labels, the basin label, the uniform baseline and, for an embedding
    scorer, its fitted softmax temperature."""
    return (f"Topic scorer: `{name}` over {len(labels)} labels ({', '.join(labels)}); basin label "
            f"{basin_label}; uniform baseline 1/{len(labels)} = {1.0 / len(labels):.3f}"
            + (f"; softmax temperature fitted on the calibration set: {score.temperature:.3f}." if hasattr(score, "temperature") else "."))


def crossing_sentence(model: str, counts: dict, *, basin_label: str, baseline: float, score_every: int,
                      steps: int) -> str:
    """How many chains crossed the baseline upward (:func:`textglauber.topics.crossing_counts`), and for politics what the
    preprint's own count allows."""
    n = counts["chains"]
    text = (f"**{counts['up']} of {n}** chains of {model} crossed the {basin_label} baseline ({baseline:.3f}) upward at least "
            f"once: a record at or below it followed by one above it, with records every {score_every:,} steps over "
            f"{steps:,} steps. {counts['start']} of {n} started above the baseline"
            + (f" ({counts['start_up']} of these fell back and crossed up again later)" if counts["start"] else "")
            + f", and {counts['never']} of {n} were never above it.")
    if basin_label == "politics":
        pre_up, pre_n = reported.BASINS_CROSSING
        room = preprint_max_starts_above(1 / len(LABELS))
        starts = [a for a, _ in reported.BASINS_POLITICS.values()]
        text += (f" The preprint reports {pre_up} of {pre_n} chains crossing its politics baseline at least once within "
                 f"{PREPRINT_PROTOCOL['steps']:,} steps. Its mean step-0 politics scores ({min(starts):.3f} to "
                 f"{max(starts):.3f} per seed topic, {PREPRINT_PROTOCOL['chains_per_topic']} chains each) leave room "
                 f"for at most {room} of its chains to have started above 1/{len(LABELS)}, so however it counted such "
                 f"chains, its count of upward crossings is at least {pre_up - room} of {pre_n}.")
    return text


def verdict_clause(exceeds, cs) -> str:
    """The verdict on the crossing share, as a clause that follows the crossing count."""
    return (f"which {VERDICT_WORDS[exceeds]} what chains from seeds with no topic give (one-sided Fisher {format_p(cs.p)} "
            "among chains that started at or below the baseline)")


def null_paragraph(rec: pd.DataFrame, null_cmp: pd.DataFrame, model: str, others, *, counts: dict, null_kinds,
                   basin_label: str, alpha: float, temperature: float, rng) -> str:
    """What the null chains say about one model's crossing count (:func:`textglauber.topics.null_comparisons`): the
    crossing shares and their test, the time averages, each kind of null alone, the pooled
    second-half share (its bootstrap draws from ``rng``), and the verdicts of the ``others``."""
    pooled = " + ".join(null_kinds)
    exceeds, cs, C = null_verdict(null_cmp, model, pooled)
    text = _crossing_shares(rec[(rec.model == model) & (rec.kind != "topic")], cs, exceeds, model, counts=counts,
                            null_kinds=null_kinds, basin_label=basin_label, alpha=alpha)
    avg = []
    for stat, what in (("share above after start", "share of records above the baseline after the start"),
                       ("mean after start", f"mean {basin_label} score after the start"),
                       ("share above late", "share above the baseline in the second half")):
        r = C[C.statistic == stat].iloc[0]
        avg.append(f"{what} {r.topic:.3f} against {r.null:.3f} ({'above the null, ' if r.exceeds else ''}"
                   f"{format_p(r.p)})")
    text += " Time averages, topic-seeded against null: " + "; ".join(avg) + "."
    if len(null_kinds) > 1:
        each = []
        for k in null_kinds:
            r = null_cmp[(null_cmp.model == model) & (null_cmp.against == k) & (null_cmp.statistic == "crossing share")].iloc[0]
            each.append(f"{k} seeds {int(r['count null'])} of {int(r['n null'])} ({format_p(r.p)})")
        text += " Against each kind of null seed alone, crossings among chains starting at or below: " + ", ".join(each) + "."
    text += _late_share(rec[rec.model == model]["share above late"].to_numpy(float), C, model, basin_label=basin_label,
                        alpha=alpha, temperature=temperature, rng=rng)
    lines = []
    for m in others:
        ex, c, _ = null_verdict(null_cmp, m, pooled)
        if c is not None:
            lines.append(f"{m}: {int(c['count topic'])} of {int(c['n topic'])} against {int(c['count null'])} of "
                         f"{int(c['n null'])}, {format_p(c.p)}, "
                         + {True: "exceeds the null", False: "does not exceed it", None: "not comparable"}[ex])
    if lines:
        text += " The other models, crossings among chains starting at or below: " + "; ".join(lines) + "."
    return text


def _crossing_shares(null_rec: pd.DataFrame, cs, exceeds, model: str, *, counts: dict, null_kinds, basin_label: str,
                     alpha: float) -> str:
    """The null chains' starts and the crossing shares of both groups, with the test's verdict."""
    kinds_n = ", ".join(f"{int((null_rec.kind == k).sum())} {k}" for k in null_kinds)
    text = (f"{model} ran {len(null_rec)} null chains ({kinds_n} seeds); {int(null_rec.starts_above.sum())} of them started above "
            f"the {basin_label} baseline, against {counts['start']} of the {counts['chains']} topic-seeded chains. Among the chains "
            f"that started at or below it, **{int(cs['count topic'])} of {int(cs['n topic'])}** topic-seeded chains "
            f"crossed upward and **{int(cs['count null'])} of {int(cs['n null'])}** null chains did")
    if not np.isfinite(cs.p):
        return text + (". One group has no chain that started at or below the baseline, so the crossing shares **cannot "
                       "be compared** and the count is not tested against the null.")
    text += (f": a difference in share of {cs.difference:+.2f} (95% interval {cs.low:+.2f} to {cs.high:+.2f}), "
             f"one-sided Fisher {format_p(cs.p)}. **The topic-seeded chains' recurrence {VERDICT_WORDS[exceeds]} what the null "
             f"gives** at level {alpha:g}")
    return text + (": they cross the baseline more often than chains that start from no topic at all." if exceeds else
                   ": chains that start from no topic cross the baseline at least as often, so the crossing count is "
                   "no evidence of a basin by itself." if cs.difference <= 0 else
                   ": they cross it more often here, but by less than so few chains can tell apart from chance, so the "
                   "crossing count is no evidence of a basin by itself.")


def _late_share(late: np.ndarray, C: pd.DataFrame, model: str, *, basin_label: str, alpha: float, temperature: float,
                rng) -> str:
    """Where the basin label sits once the start is forgotten: the share of second-half records above
    the baseline over all chains of the model (topic-seeded and null), with a bootstrap interval."""
    late = late[np.isfinite(late)]
    if not len(late):
        return ""
    rng = np.random.default_rng(rng)                  # a Generator is used as it is, its draws continuing
    bs = late[rng.integers(len(late), size=(4000, len(late)))].mean(1)
    lo, hi = np.quantile(bs, [0.025, 0.975])
    lr = C[C.statistic == "share above late"].iloc[0]
    text = (f" Over the second half of the run, all {len(late)} chains of {model} together (topic-seeded and null) "
            f"have the {basin_label} score above the baseline in {late.mean():.0%} of records (95% bootstrap "
            f"interval {lo:.0%} to {hi:.0%}). If the chains have forgotten their starts by then, this estimates "
            f"how much of the model's stationary law at T = {temperature:g} lies above the baseline; ")
    return text + ("the two groups differ there, so they have not, and the figure is only a pooled average."
                   if lr.exceeds or (np.isfinite(lr.p) and lr.p > 1 - alpha) else
                   "the two groups do not differ detectably there, which is consistent with that but does not prove it.")


def plot_null_curves(axes, scores: pd.DataFrame, basin_label: str, baseline: float, n_labels: int) -> None:
    """For one model's chains, by kind of seed: the share of chains above the baseline (first axes)
    and the mean basin-label score (second) at each record, the baseline dashed."""
    A = scores.assign(above=lambda d: d[basin_label] > baseline)
    for kind, g in A.groupby("kind", sort=False):
        per = g.groupby("step").agg(above=("above", "mean"), score=(basin_label, "mean"))
        n = g.chain.nunique()
        axes[0].plot(per.index, per.above, label=f"{kind} ({n})")
        axes[1].plot(per.index, per.score, label=f"{kind} ({n})")
    axes[1].axhline(baseline, color="k", ls="--", lw=1)
    axes[0].set_ylabel(f"share of chains above 1/{n_labels}")
    axes[1].set_ylabel(f"mean {basin_label} score")
    for ax in axes:
        ax.set_xlabel("step")
    axes[0].legend(title="seeds (chains)")


def plot_chain_scores(axes, scores: pd.DataFrame, chains, labels: list[str], basin_label: str, baseline: float) -> None:
    """One panel per chain: the scores of its seed topic, of the basin label and of the label that
    ends highest, against the step, the baseline dashed."""
    for ax, b in zip(axes, chains):
        g = scores[scores.chain == b]
        topic = g["seed topic"].iloc[0]
        top_end = g[labels].iloc[-1].idxmax()
        for label in dict.fromkeys([topic, basin_label, top_end]):
            ax.plot(g.step, g[label], label=label)
        ax.axhline(baseline, color="k", ls="--", lw=1)
        ax.set_title(f"chain {b} (seed: {topic})")
        ax.set_xlabel("step")
        ax.legend()


def plot_topic_map(ax, scores: pd.DataFrame, labels: list[str]):
    """The topic-score vectors of one model's recorded states on their first two principal
    components, coloured by step, each seed topic's name at its starting states. Returns the
    scatter (for a colour bar)."""
    pc = figures.principal_components(scores[labels].to_numpy())
    sc = ax.scatter(pc[:, 0], pc[:, 1], c=scores.step, cmap="viridis", s=10)
    for topic, g in scores[scores.step == 0].groupby("seed topic"):
        ax.annotate(topic, pc[g.index - scores.index[0]].mean(0), weight="bold")
    ax.set_xlabel("PC 1 of topic scores"); ax.set_ylabel("PC 2")
    return sc


def attractor_sentence(attractors: pd.DataFrame, prefix: str) -> str:
    """How often each topic tops the final states of the prefix chains (:func:`textglauber.topics.prefix_attractors`)."""
    tops = attractors["top topic"].value_counts()
    return (f"Top topics of the {len(attractors)} final states after the prefix \"{prefix}\": "
            + ", ".join(f"{l} ({k})" for l, k in tops.items()) + ".")


def preprint_table(table: pd.DataFrame, seed_topics: list[str], basin_label: str, steps: int) -> pd.DataFrame:
    """Per seed topic: the preprint's politics and seed-topic scores at steps 0 and 10k beside this
    run's (:func:`textglauber.topics.start_end_table`) at 0 and at its last step."""
    cmp = []
    for topic in seed_topics:
        p0, p1 = reported.BASINS_POLITICS.get(topic, (np.nan, np.nan))
        s0, s1 = reported.BASINS_SEED_TOPIC.get(topic, (np.nan, np.nan))
        r = table[table["seed topic"] == topic]
        cmp.append({"seed topic": topic, "preprint politics 0 -> 10k": f"{p0:.3f} -> {p1:.3f}",
                    f"this run politics 0 -> {steps:,}": f"{r[f'{basin_label} at 0'].iloc[0]:.3f} -> {r[f'{basin_label} at end'].iloc[0]:.3f}",
                    "preprint seed topic 0 -> 10k": f"{s0:.3f} -> {s1:.3f}",
                    f"this run seed topic 0 -> {steps:,}": f"{r['seed topic at 0'].iloc[0]:.3f} -> {r['seed topic at end'].iloc[0]:.3f}"})
    return pd.DataFrame(cmp)


def run_sentence(model: str, table: pd.DataFrame, scores: pd.DataFrame, labels: list[str], basin_label: str,
                 counts: dict, verdict: str) -> str:
    """What this run shows for one model: seed topics fading, the basin label rising, the crossing
    count with its ``verdict``, and the most frequent top label at the last step."""
    fade = (table["seed topic at end"] < table["seed topic at 0"]).sum()
    rise = (table[f"{basin_label} at end"] > table[f"{basin_label} at 0"]).sum()
    last = scores.step.max()
    final = scores[scores.step == last]
    top_end = final[labels].idxmax(axis=1).value_counts()
    return (f"In this run ({model}) the seed-topic score falls for {fade} of {len(table)} seed topics and the {basin_label} "
            f"score rises for {rise} of {len(table)}; {counts['up']} of {counts['chains']} chains crossed the {basin_label} "
            f"baseline upward, {verdict}. At step {last:,} the most frequent top label is {top_end.index[0]} "
            f"({top_end.iloc[0]} of {len(final)} chains).")


def protocol_sentences(diffs: dict[str, str], basin_label: str) -> list[str]:
    """How far this run's values compare with the preprint's, from :func:`protocol_differences`."""
    lines = []
    if basin_label != "politics":
        lines.append(f"The preprint's columns are for politics, this run's for {basin_label}.")
    if basin_label == "politics":
        lines.append(f"The preprint gives no null model for its {reported.BASINS_CROSSING[0]} of "
                     f"{reported.BASINS_CROSSING[1]}, so it does not show that its chains cross more often than chains "
                     "from seeds with no topic would.")
    if diffs:
        lines.append("This run departs from the preprint's protocol: " + "; ".join(diffs.values())
                     + ". Its seed sentences are this package's own.")
    else:
        lines.append("This run follows the preprint's protocol except for the seed sentences, which are this package's own.")
    if {"model", "topic_scorer", "labels"} & set(diffs):
        what = [w for k, w in (("model", "another model"), ("topic_scorer", "another topic scorer"),
                               ("labels", "another label set")) if k in diffs]
        lines.append(f"With {' and '.join(what)}, the two sides compare in direction (does the seed topic fade, does the "
                     f"{basin_label} score rise) but not in value.")
    else:
        lines.append("Model, scorer and label set are the preprint's, so the values compare, up to the differences "
                     "listed, the choice of seed sentences and the sampling noise of a few chains per topic.")
    return lines


# ------------------------------------------------------------------------- the findings page's row
def headline(folder: Path, root: Path, profile: str) -> Headline | None:
    """The first model's topic-seeded chains: how many crossed the basin label's baseline, against
    the null chains' share, and whether the label is special among the labels."""
    m, summ, rec = manifest(folder), table(folder, "summary"), table(folder, "recurrence")
    if m is None or summ is None or rec is None:
        return None
    p = m["parameters"]
    label, labels, steps = p["basin_label"], p["labels"], int(p["steps"])
    first = rec.model.iloc[0]
    r0 = rec[rec.model == first]
    if "kind" in r0:                                  # null chains ran beside the topic-seeded ones
        r0 = r0[r0.kind == "topic"]
    crossed = (f"{int(r0.crossed_up.sum())} of {len(r0)} chains crossed the {esc(label)} baseline (1/{len(labels)}) "
               "upward")
    text = (f"{nowrap(first)}: mean {esc(label)} score over the {len(summ)} seed topics "
            f"{summ[f'{label} at 0'].mean():.3f} at step 0 and {summ[f'{label} at end'].mean():.3f} at step {steps:,}; "
            + crossed)
    verdict = f"{nowrap(first)}: {crossed}"
    null = table(folder, "recurrence_null")
    c = None if null is None else null[(null.model == first) & (null.statistic == "crossing share")].reset_index(drop=True)
    special_text = special_sentence(folder, first, label, p)
    if c is None or not len(c):
        return Headline(verdict + "; no null model ran.", text + "; no null model ran." + special_text)
    c = c.loc[c.against.str.count(" \\+ ").idxmax()]         # the pooled null: every kind of null seed
    kinds = c.against.split(" + ")
    share = (f"{int(c['count topic'])} of {int(c['n topic'])} topic-seeded chains against {int(c['count null'])} of "
             f"{int(c['n null'])} chains from seeds with no topic ({esc(' and '.join(kinds))})")
    if not np.isfinite(c.p):
        return Headline(verdict + "; not comparable with the null.",
                        text + f". Among chains starting at or below the baseline, {share}: not comparable." + special_text)
    word = "exceeds" if c.exceeds else "does not exceed"
    return Headline(f"{verdict}; the recurrence {word} the null model's (Fisher p = {c.p:.2g}).",
                    text + f". Among chains starting at or below the baseline, {share} crossed (one-sided Fisher "
                    f"p = {c.p:.2g}): the recurrence {word} the null model's." + special_text)


def special_sentence(folder: Path, model: str, label: str, p: dict) -> str:
    """Whether the basin label leads every other label (the null that can fail both ways)."""
    contrast = table(folder, "basin_contrast")
    if contrast is None or not (contrast.model == model).any():
        return ""
    return " Among the labels, " + esc(special_clause(contrast, model, label, alpha=float(p["null_alpha"]))) + "."


def preprint() -> str:
    start = np.mean([a for a, _ in reported.BASINS_POLITICS.values()])
    end = np.mean([b for _, b in reported.BASINS_POLITICS.values()])
    up, n = reported.BASINS_CROSSING
    return (f"{nowrap('bert-base-uncased')}: mean politics score over the {len(reported.BASINS_POLITICS)} seed topics "
            f"{start:.3f} at step 0 and {end:.3f} at step 10,000; {up} of {n} chains crossed the politics baseline; "
            "no null model is given for this count.")
