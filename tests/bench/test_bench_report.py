"""The cost appendix's sentences, on small tables whose answers are counted by hand."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from textglauber.bench import metastable, report  # noqa: E402


def _targets(q25, q75, needed=2.0):
    return pd.DataFrame({"model": ["bert-base"], "engine": ["engine"], "target": ["x over loop"], "measured": [1.9],
                         "q25": [q25], "q75": [q75], "needed": [needed]})


def test_close_sentence_names_only_targets_the_noise_straddles():
    assert report.close_sentence(_targets(1.8, 2.1)) == (
        "Within the host's noise (the per-round range straddles the target): bert-base, engine, x over loop "
        "(1.90 [1.80, 2.10] against 2.0).")
    assert report.close_sentence(_targets(1.5, 1.95)) == ""          # the whole range below: clearly not met
    assert report.close_sentence(_targets(2.05, 2.3)) == ""          # the whole range above: clearly met


def test_loop_sentence_reads_the_bert_base_loop_at_n_20_only():
    df = pd.DataFrame({"variant": ["fill_mask_loop", "fill_mask_loop", "fill_mask_loop", "engine"],
                       "model": ["bert-base (random)", "bert-base (random)", "package:antiberty", "bert-base (random)"],
                       "n": [20, 20, 20, 20], "fraction_of_bound": [0.5, 0.25, 0.01, 0.9]})
    text = report.loop_sentence(df)
    assert "reached 0.25 to 0.50 of the compute bound" in text and "only 2.0 to 4.0 times faster" in text
    assert report.loop_sentence(df[df.model != "bert-base (random)"]) == ""


def test_trap_sentence_mentions_old_and_shallow_cells_only_when_there_are_some():
    plain = report.trap_sentence(4, 0, 0)
    assert "measured before" not in plain and "no fixed point" not in plain
    both = report.trap_sentence(4, 1, 2)
    assert "1 of 4 trap cells were measured before" in both and "In 2 cell(s) no fixed point reached holds" in both


def test_targets_sentence_says_met_and_what_rows_rule_out():
    m = pd.DataFrame({"model": ["package:antiberty"] * 2, "n": [20, 20], "start": ["a", "b"], "temperature": [1.0, 2.0]})
    t = pd.DataFrame({"target": ["x (least cell)", "y"], "measured": [3.0, 1.2], "cells": [2, 2],
                      "least cell": ["T = 1", "T = 2"], "needed": [2.0, 2.0], "met": [True, False],
                      "row bound": [float("nan"), 1.5]})
    text = report.targets_sentence(m, t)
    per_block = len(metastable.METASTABLE_TEMPERATURES) + 1
    assert text.startswith(f"The table holds 2 of the {per_block * 2 * len(metastable.METASTABLE_MODELS)} cells")
    assert "auto x: 3.00 in the least of 2 cells (T = 1), against 2: met." in text
    assert "auto y: 1.20 in the least of 2 cells (T = 2), against 2: not met." in text
    assert "row bound is 1.50, below the 2 asked" in text
    higher = report.targets_sentence(m, t.assign(**{"row bound": [float("nan"), 2.5]}))
    assert "at least the 2 asked: rows alone do not rule the target out" in higher


def test_row_bound_sentence_spans_and_flags_ratios_above_the_ceiling():
    rb = pd.DataFrame({"memo rows per step": [0.7, 0.7], "row bound": [1.4, 2.0], "auto x plain": [1.5, 1.8]})
    text = report.row_bound_sentence(rb)
    assert "memo scored 0.70 rows per chain-step, a ceiling of 1.40 to 2.00 times plain" in text
    assert "auto reached 1.50 to 1.80 (above its cell's ceiling in 1 cell(s), by up to 1.07 times it" in text
    assert report.row_bound_sentence(rb.assign(**{"auto x plain": [1.0, 1.0]})).endswith("auto reached 1.00.")


def test_plot_speedups_marks_cut_runs():
    m = pd.DataFrame({"mode": ["plain", "memo", "jump"], "model": ["a"] * 3, "cell_noop_share": [0.9] * 3,
                      "speedup": [1.0, 3.0, 8.0], "cut": [False, False, True]})
    fig, ax = plt.subplots()
    report.plot_speedups(ax, m)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "jump (cut: upper bound)" in labels and "memo" in labels and "plain" not in labels
    plt.close(fig)
