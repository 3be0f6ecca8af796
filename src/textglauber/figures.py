"""Figures sized for the book's page.

The site's content column is ``CONTENT_PX`` wide in a 1280 px window (sphinx-book-theme with its
sidebars; :mod:`textglauber.bookbuild.sitecheck` measures it), and a notebook figure is drawn at ``DPI``
pixels per inch. A figure wider than the column is shrunk to fit, and its text with it; so
multi-panel figures are drawn at the column's width and wrap into rows with at most
``columns(count)`` panels each, which keeps every panel at least ``MIN_PANEL_PX`` (about 350 px)
wide. :func:`setup` sets text sizes of 11 pt and more, which at 100 dpi and the figure's own
size are 15 px and more: above the body's small text (0.875 rem = 14 px).
"""
from __future__ import annotations

import math

CONTENT_PX = 688           # the theme's content column at a 1280 px window
DPI = 100
MIN_PANEL_PX = 340         # "about 350 px": two panels share the 688 px column
WIDTH_IN = (CONTENT_PX - 8) / DPI
SMALL_TEXT_PX = 14         # the body's small text (0.875 rem of a 16 px body)
RC = {"figure.dpi": DPI, "savefig.dpi": DPI, "font.size": 12, "axes.titlesize": 12, "axes.labelsize": 12,
      "xtick.labelsize": 11, "ytick.labelsize": 11, "legend.fontsize": 11, "legend.title_fontsize": 11,
      "figure.titlesize": 13}


def _plain(value: float, pos=None) -> str:
    return f"{value:g}"


def _log_scale():
    """A log scale whose labels do not collide in a 340 px panel: ticks at the powers of ten over
    more than two decades, at 1, 2 and 5 times them over fewer, more within one decade; minor ticks
    unlabelled."""
    import numpy as np
    from matplotlib.scale import LogScale
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    class PageLogLocator(LogLocator):
        def tick_values(self, vmin, vmax):
            if vmin > 0 and vmax > 0:
                span = abs(np.log10(vmax / vmin))
                self.set_params(subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0) if span < 0.8 else (1.0, 2.0, 5.0) if span <= 2
                                else (1.0,))
            return super().tick_values(vmin, vmax)

    class PageLogScale(LogScale):
        name = "log"

        def set_default_locators_and_formatters(self, axis):
            axis.set_major_locator(PageLogLocator(self.base))
            axis.set_major_formatter(FuncFormatter(_plain))
            axis.set_minor_locator(LogLocator(self.base, subs="auto"))
            axis.set_minor_formatter(NullFormatter())

    return PageLogScale


def setup() -> None:
    """The book's figure style: seaborn's white grid, text no smaller than the body's small text,
    and log axes whose tick labels do not run into each other."""
    import seaborn as sns
    from matplotlib.scale import register_scale

    sns.set_theme(style="whitegrid", context="notebook", rc=RC)
    register_scale(_log_scale())


def columns(count: int) -> int:
    """Panels per row for ``count`` panels: as many as fit at ``MIN_PANEL_PX`` each."""
    return max(1, min(count, CONTENT_PX // MIN_PANEL_PX))


def panels(count: int, aspect: float = 0.8, **subplots):
    """A figure of ``count`` panels at the column's width, wrapped into rows; returns the figure
    and the list of its ``count`` axes (unused cells of the last row are removed)."""
    import matplotlib.pyplot as plt

    cols = columns(count)
    rows = math.ceil(count / cols)
    panel_w = WIDTH_IN / cols
    fig, axes = plt.subplots(rows, cols, figsize=(WIDTH_IN, rows * panel_w * aspect), squeeze=False, **subplots)
    flat = list(axes.flat)
    for ax in flat[count:]:
        fig.delaxes(ax)
    return fig, flat[:count]


def principal_components(points, k: int = 2):
    """Points (..., d) projected on the first ``k`` principal components of all of them together
    (centred on their mean): (..., k), for a picture of where high-dimensional states lie."""
    import numpy as np

    flat = points.reshape(-1, points.shape[-1])
    mu = flat.mean(0)
    _, _, vt = np.linalg.svd(flat - mu, full_matrices=False)
    return (points - mu) @ vt[:k].T


def facets(count: int, aspect: float = 1.2) -> dict:
    """Keyword arguments for a seaborn figure-level plot (``col=...``) with ``count`` facets: the
    same wrapping and widths as :func:`panels`."""
    cols = columns(count)
    width = WIDTH_IN / cols
    return {"col_wrap": cols if count > cols else None, "height": width / aspect, "aspect": aspect}


def legend_above(grid, ncol: int = 3) -> None:
    """Move a seaborn figure-level plot's legend above its panels, so that it adds height, not width."""
    import seaborn as sns

    if getattr(grid, "legend", None) is not None:
        sns.move_legend(grid, "lower center", bbox_to_anchor=(0.5, 1.0), ncol=ncol, title=None, frameon=False)
