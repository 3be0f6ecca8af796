"""Page text of the chapters, apart from the computation: one module per chapter, named after it.

Each chapter's module holds the sentences, views and plots its notebook shows, and
``headline(folder, root, profile)``: what the chapter found in one build, read from its results
folder, as a :class:`Headline` (one short verdict, and the details behind it). The findings page
(:mod:`textglauber.bookbuild.findings`) calls those headlines and re-derives nothing; each module's
``preprint()`` gives the preprint's figures for the same row. Results are read through
:mod:`textglauber.pages.reading`, which vouches that a table is the one the chapter's last
finished run wrote.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Headline:
    """A chapter's findings in one build, as HTML: ``verdict`` is one short sentence that opens the
    chapter's row on the findings page; ``details`` is the rest, shown a click away."""

    verdict: str
    details: str = ""

    def text(self) -> str:
        """Verdict and details as one paragraph."""
        return " ".join(p for p in (self.verdict, self.details) if p)


def render(*blocks) -> None:
    """Show a page's blocks in order: a string as Markdown, a matplotlib figure as its picture (then
    closed), anything else (a :func:`textglauber.tables.show` table) as it displays itself. Page
    modules return blocks; only the notebooks call this."""
    from IPython.display import Markdown, display

    for block in blocks:
        if isinstance(block, str):
            display(Markdown(block))
        elif hasattr(block, "savefig"):
            import matplotlib.pyplot as plt

            display(block)
            plt.close(block)
        elif block is not None:
            display(block)
