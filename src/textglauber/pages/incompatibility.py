"""Chapter 1's page (docs/science.md, chapter 1): the rectangle test's sentences, views and plots
(the control's note, the float-error and precision floors, the spread of R, the curve along
training, the comparison with the preprint), apart from its computation in
:mod:`textglauber.rectangle`; and its headline on the findings page: mean R per masked LM, beside
the joint control's."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import reported
from ..tables import interval, number
from . import Headline
from .reading import nowrap, table


def headline(folder: Path, root: Path, profile: str) -> Headline | None:
    s = table(folder, "summary")
    if s is None:
        return None
    mlm, ctrl = s[s.kind == "mlm"], s[s.kind == "causal"]
    parts = [f"{nowrap(r.model)} {interval(r['mean R'], r['95% CI low'], r['95% CI high'])}" for _, r in mlm.iterrows()]
    details = "Mean R (95% interval) per masked LM: " + "; ".join(parts) + "." if parts else "No masked LM ran."
    if len(ctrl):
        c = ctrl.iloc[0]
        details += f" Joint control {nowrap(c.model)}: mean R {number(c['mean R'])}, largest {number(c['max R'])}."
    if not len(mlm):
        return Headline("No masked LM ran.", details)
    lo, hi = mlm.loc[mlm["mean R"].idxmin()], mlm.loc[mlm["mean R"].idxmax()]
    verdict = (f"Mean R {number(lo['mean R'])} ({nowrap(lo.model)}) to {number(hi['mean R'])} ({nowrap(hi.model)}) "
               f"over {len(mlm)} masked LM{'s' * (len(mlm) != 1)}")
    if len(ctrl):
        above = int((mlm["95% CI low"] > ctrl.iloc[0]["max R"]).sum())
        verdict += (f"; {above} of {len(mlm)} lie wholly above the joint control's largest R "
                    f"({number(ctrl.iloc[0]['max R'])})")
    return Headline(verdict + ".", details)


def preprint() -> str:
    mlm = "; ".join(f"{nowrap(m)} {v:.3f}" for m, v in reported.RECTANGLE_MEAN_R.items() if m != "gpt2")
    return (f"Mean R over {reported.RECTANGLE_PROTOCOL['rectangles_per_model']} MS MARCO rectangles: {mlm}. "
            f"Joint control {nowrap('gpt2')}: {reported.RECTANGLE_MEAN_R['gpt2']:.3f}.")


def control_note(info: dict | None) -> str:
    """What the control's candidate set and windows are, in Markdown (or that the profile has none)."""
    if info is None:
        return "This profile runs no joint-model control."
    shown = ", ".join(f"`{t}`" for t in info["candidate_tokens"])
    if info.get("texts_of") not in (None, "its own windows"):
        windows = (f"Its windows are cut from the texts that `{info['texts_of']}` reads on the same corpus: each of "
                   f"that model's {info['n']}-token windows is re-encoded with the control's tokenizer and its first "
                   f"{info['n']} tokens kept, ")
    else:
        windows = (f"No masked LM of this chapter reads `{info['corpus']}`, so its windows are its own "
                   f"{info['n']}-token passages of that corpus, ")
    noise = (f"The perturbed copy adds noise of standard deviation {info['noise']:g} to every log-score."
             if info.get("noise", 0) > 0 else "No perturbed copy was run (`noise` is 0).")
    return (f"**The control's candidate set** $C$ for `{info['name']}`: the {info['candidates']} most "
            f"frequent tokens of its corpus `{info['corpus']}` (in the model's own tokenization): {shown}. "
            + windows + "with at least two positions holding a candidate; only those positions are changed. " + noise)


def floor_sentences(rects: pd.DataFrame, info: dict | None) -> str:
    """The control's R as the float-error floor, the share of each masked LM's rectangles above
    it, and the perturbed copy against its expected R ('' when no control ran). ``info``: the
    control's description (:func:`textglauber.rectangle.control_info`), for its noise."""
    ctrl, pert, mlm = (rects[rects.kind == k] for k in ("causal", "perturbed", "mlm"))
    if not len(ctrl):
        return ""
    floor_max = ctrl.R.max()
    lines = [f"The control's R, its float-error floor, has mean {ctrl.R.mean():.1e} and maximum {floor_max:.1e} over "
             f"{len(ctrl)} rectangles, while its edges themselves have median size {ctrl.path1.abs().median():.2f} "
             f"(nats)."]
    if len(mlm):
        share = mlm.groupby("model", sort=False).R.apply(lambda r: (r > floor_max).mean())
        lines.append("Share of each masked LM's rectangles with R above the control's largest value: "
                     + "; ".join(f"{m} {s:.0%}" for m, s in share.items()) + ".")
    if len(pert):
        scale = float(info["noise"])
        lines.append(f"The perturbed control (noise {scale:g}) has mean R {pert.R.mean():.3f}; for noise on every "
                     f"conditional the expected value is {scale:g} x sqrt(16/pi) = {scale * np.sqrt(16 / np.pi):.3f} "
                     f"(eight independent noise terms enter each R), and "
                     f"{(pert.R > floor_max).mean():.0%} of its rectangles lie above the unperturbed control's "
                     f"largest R.")
    return " ".join(lines)


def dtype_floor_sentence(floor: pd.DataFrame) -> str:
    """How far lower-precision weights move R (a :func:`textglauber.rectangle.dtype_floor` table), beside the float32 mean."""
    f = floor.iloc[0]
    return (f"With bf16 weights the same {f['rectangles']} rectangles of `{f['model']}` move by {f['mean |R difference|']:.3g} "
            f"on average and by up to {f['max |R difference|']:.3g}, against a float32 mean R of {f['mean R (float32)']:.3g}: "
            + ("a floor well below the effect measured here." if f["mean |R difference|"] < 0.1 * f["mean R (float32)"]
               else "not small beside the effect, which is why the measuring chapters score in float32."))


def spread_sentence(mlm_rects: pd.DataFrame) -> str:
    """Each model's 10th and 90th percentiles of R and their ratio ('' without rectangles)."""
    spread = mlm_rects.groupby("model", sort=False).R.quantile([0.1, 0.9]).unstack()
    if not len(spread):
        return ""
    return "10th and 90th percentiles of R: " + "; ".join(
        f"{m} {r[0.1]:.3g} and {r[0.9]:.3g} (ratio {r[0.9] / r[0.1]:.0f})" if r[0.1] > 0 else f"{m} {r[0.1]:.3g} and {r[0.9]:.3g}"
        for m, r in spread.iterrows()) + "."


def plot_along_training(axes, along: pd.DataFrame) -> None:
    """Mean R of each checkpoint with its interval, against the share of the training budget (first
    axes) and the held-out top-1 accuracy (second), one line per start."""
    for start, g in along.groupby("start"):
        for ax, x in zip(axes, ("fraction", "top1")):
            ax.errorbar(g[x], g["mean R"], yerr=[g["mean R"] - g["95% CI low"], g["95% CI high"] - g["mean R"]],
                        marker="o", capsize=3, label=f"start: {start}")
    axes[0].set_xlabel("share of the training budget")
    axes[1].set_xlabel("held-out top-1 accuracy")
    axes[0].set_ylabel("mean R (fixed rectangles)")
    axes[0].legend()


def preprint_table(summary: pd.DataFrame, profile: str) -> pd.DataFrame:
    """The preprint's mean R per model above this run's (:func:`textglauber.rectangle.summary`), with its intervals."""
    proto = reported.RECTANGLE_PROTOCOL
    paper = pd.DataFrame([{"source": "preprint (arXiv 2605.16378)", "model": m, "rectangles": proto["rectangles_per_model"],
                           "mean R": r} for m, r in reported.RECTANGLE_MEAN_R.items()])
    ours = summary[["model", "rectangles", "mean R", "95% CI low", "95% CI high"]].assign(source=f"this run, profile '{profile}'")
    return pd.concat([paper, ours], ignore_index=True)[["source", "model", "rectangles", "mean R", "95% CI low",
                                                        "95% CI high"]]


def protocol_sentence(models: list, summary: pd.DataFrame, *, seq_len: int, n_rectangles: int, top_k: int,
                      temperature: float) -> str:
    """Where this run's protocol agrees with the preprint's and where it differs: corpus,
    rectangles per masked LM, top-k, temperature. ``models``: the chapter's typed model entries
    (:class:`textglauber.profile.IncompatibilityModel`)."""
    proto = reported.RECTANGLE_PROTOCOL
    corpora = sorted({m.corpus for m in models})
    differs, agrees = [], []
    (agrees if corpora == ["msmarco"] else differs).append(
        f"passages from {', '.join(corpora)}" + ("" if corpora == ["msmarco"] else f" (the preprint: {proto['corpus']})"))
    counts = sorted(set(summary[summary.kind == "mlm"].rectangles)) or [n_rectangles]
    per_lm = " to ".join(str(c) for c in (counts[0], counts[-1])[: 1 if len(counts) == 1 else 2])
    (agrees if counts == [proto["rectangles_per_model"]] else differs).append(
        f"{per_lm} rectangles per masked LM" + ("" if counts == [proto["rectangles_per_model"]]
                                                else f" (the preprint: {proto['rectangles_per_model']})"))
    (agrees if top_k == proto["top_k"] else differs).append(
        f"replacements from the top-{top_k}" + ("" if top_k == proto["top_k"] else f" (the preprint: top-{proto['top_k']})"))
    (agrees if temperature == proto["temperature"] else differs).append(
        f"T = {temperature:g}" + ("" if temperature == proto["temperature"] else f" (the preprint: T = {proto['temperature']:g})"))
    return (f"Protocol of this run: windows of n = {seq_len} tokens; "
            + (f"as in the preprint, {', '.join(agrees)}" if agrees else "")
            + (("; " if agrees else "") + f"unlike the preprint, {', '.join(differs)}" if differs else "") + ".")


def preprint_sentences(summary: pd.DataFrame, info: dict | None, profile: str) -> list[str]:
    """What this run's summary says beside the preprint: the control, the masked LMs' range of mean R,
    whether it clears the control's floor, its link to influence, and which models are shared."""
    mlm_rows, ctrl_rows = summary[summary.kind == "mlm"], summary[summary.kind == "causal"]
    lines = []
    if len(ctrl_rows):
        c = ctrl_rows.iloc[0]
        lines.append(f"The control here is `{c.model}` with conditionals over {info['candidates']} candidate tokens "
                     f"({c.rectangles} rectangles), passed through the masked-LM code; the preprint's GPT-2 control "
                     "computes each edge from two sequence probabilities directly.")
    if len(mlm_rows):
        lines.append(f"This run's masked LMs have mean R from {mlm_rows['mean R'].min():.3g} to {mlm_rows['mean R'].max():.3g}; "
                     f"the preprint's five English MLMs range from {min(v for m, v in reported.RECTANGLE_MEAN_R.items() if m != 'gpt2'):.3f} "
                     f"to {max(reported.RECTANGLE_MEAN_R.values()):.3f}.")
        if len(ctrl_rows):
            floor = ctrl_rows["max R"].iloc[0]
            above = mlm_rows[mlm_rows["95% CI low"] > floor]
            lines.append(f"For {len(above)} of {len(mlm_rows)} masked LMs the lower end of the 95% interval of mean R lies "
                         f"above the largest R of the compatible control ({floor:.1e}), so their incompatibility is not "
                         "an artefact of the pipeline's float error" + ("." if len(above) == len(mlm_rows) else
                         "; for the others it cannot be told apart from it."))
        rising = mlm_rows[mlm_rows["Spearman(R, influence)"] > 0]
        lines.append(f"R rises with the cross-influence of the two positions (positive rank correlation) for "
                     f"{len(rising)} of {len(mlm_rows)} masked LMs; the preprint reports that it does for its models.")
    if len(ctrl_rows):
        mx = ctrl_rows["max R"].iloc[0]
        lines.append(f"The control ({ctrl_rows.model.iloc[0]}) gives a largest R of {mx:.1e}, "
                     + ("zero up to float error, as GPT-2's is in the preprint." if mx < 1e-3 else
                        "which is not zero up to float error: the control has failed and the pipeline needs checking."))
    same = sorted(set(summary.model) & set(reported.RECTANGLE_MEAN_R))
    if same:
        lines.append(f"Models shared with the preprint: {', '.join(same)}; their numbers can be compared directly.")
    else:
        lines.append(f"No model of profile '{profile}' is one of the preprint's, so only the qualitative findings "
                     "(whether R > 0 for masked LMs and R = 0 for the joint control, the spread of R, its link to influence) "
                     "can be compared; the magnitudes belong to these models, not to BERT or any other English MLM. "
                     "The `paper` profile runs the preprint's models.")
    return lines
