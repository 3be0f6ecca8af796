"""Chapter 3's sections as page blocks, in the order the page shows them (Markdown strings, tables
and figures for :func:`textglauber.pages.render`): what the notebook shows after each computing
cell, built from that cell's results and nothing else."""
from __future__ import annotations

from ... import tables
from .landscape import (check_sentence, covering_sentence, covering_view, gamma_sentences, hot_sentence,
                        landscape_view, plot_gamma, swing_sentences)
from .laws import boundary_interval_sentence, boundary_line, cells_view, plot_coupling_grid
from .phase import (calibration_sentence, calibration_view, cost_sentence, phase_headline, plot, spikes,
                    unresolved_sentence, verdict_sentences, verdict_view)


def phase_blocks(verdicts, run, rule_power) -> list:
    """The exact phase diagram: headline, verdicts, figure, swings, unresolved cells, the growth
    rule's power on known truths, and the section's cost."""
    out = [phase_headline(verdicts, run.table), " ".join(verdict_sentences(verdicts, run.table))]
    if len(run.table):
        out += [plot(run.table), tables.show(verdict_view(verdicts))]
        swings = spikes(verdicts, run.table)
        if len(swings):
            out += ["Where t_rel/n swings with n, the state holding the most stationary mass at the peak length "
                    "and its neighbours:", tables.show(swings)]
        out += [unresolved_sentence(run.table),
                tables.show(rule_power, caption="the growth rule on known truths over this table's lengths")]
    return out + [cost_sentence(run.cost, run.notes)]


def calibration_blocks(calibration) -> list:
    return ([tables.show(calibration_view(calibration))] if len(calibration) else []) + [calibration_sentence(calibration)]


def hot_blocks(hot) -> list:
    return [hot_sentence(hot)] + ([tables.show(hot.drop(columns="words"))] if len(hot) else [])


def landscape_blocks(run, land_verdicts, land_check, phase_verdicts) -> list:
    """Gamma against n, the table, the verdicts in words, the T ln t_rel check and the swings."""
    out = [plot_gamma(run.landscape), tables.show(landscape_view(run.landscape))] if len(run.landscape) else []
    out += [" ".join(gamma_sentences(run.landscape, land_verdicts)), check_sentence(land_check, run.landscape)]
    out += [tables.show(land_check)] if len(land_check) else []
    return out + [" ".join(swing_sentences(run.landscape, run.table, phase_verdicts))]


def covering_blocks(covering) -> list:
    return [covering_sentence(covering)] + ([tables.show(covering_view(covering))] if len(covering) else [])


def coupling_grid_blocks(cells, boundary, intervals, fast_within: float, budget_sweeps: float, pairs: int) -> list:
    """The coupling grid's figure and table, its boundary and the boundary's intervals."""
    import matplotlib.pyplot as plt

    from ... import figures

    fig, ax = plt.subplots(figsize=(figures.WIDTH_IN, 0.55 * cells.temperature.nunique() + 1.8))
    plot_coupling_grid(ax, cells)
    ax.set_title(f"Coupling time, budget {budget_sweeps:g} sweeps, {pairs} pairs per cell; * = fast")
    fig.tight_layout()
    return [fig, tables.show(cells_view(cells, fast_within), na=">budget",
                             intervals={"median coupling time [95% CI]": ("median coupling time", "95% CI low",
                                                                          "95% CI high")}),
            boundary_line(boundary, fast_within) + ".", tables.show(intervals, na="beyond the grid"),
            boundary_interval_sentence(intervals, fast_within)]
