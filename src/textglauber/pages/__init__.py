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
