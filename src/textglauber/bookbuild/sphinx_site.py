"""A Sphinx extension (listed in _config.yml) that fixes what a reader's browser trips on.

- sphinx-thebe, which Jupyter Book loads even with ``launch_buttons.thebe: false``, adds its
  inline configuration script twice on incremental builds (a JavaScript error on every page:
  ``THEBE_JS_URL`` declared twice) and names a CDN; the book runs no live code, so both of its
  scripts are left out of every page.
- The theme reads its colour mode from local storage and, when there is none (a reader's first
  visit), from ``default_mode``, which Jupyter Book leaves empty: the theme then logs an error.
  It is set to ``light``.
- The theme clips inline math at the column's edge (``span.math { overflow: hidden }``), which
  cuts long formulas on a phone; they scroll inside their own box instead.
"""
from __future__ import annotations

from pathlib import Path

CSS_NAME = "textglauber-site.css"
CSS = """/* textglauber: long inline formulas scroll (by touch or trackpad) inside their own box instead of
   being cut; no scroll bar, which would add height under every formula */
span.math { overflow-x: auto; overflow-y: hidden; scrollbar-width: none; }
"""


def _is_thebe(js) -> bool:
    name = str(getattr(js, "filename", "") or "")
    body = str(getattr(js, "attributes", {}).get("body", ""))
    return name.endswith("sphinx-thebe.js") or "THEBE_JS_URL" in body


def page_context(app, pagename, templatename, context, doctree) -> None:
    if "script_files" in context:
        context["script_files"] = [js for js in context["script_files"] if not _is_thebe(js)]
    if not context.get("default_mode"):
        context["default_mode"] = "light"


def write_css(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        static = Path(app.outdir) / "_static"
        static.mkdir(parents=True, exist_ok=True)
        (static / CSS_NAME).write_text(CSS)


def setup(app):
    app.connect("html-page-context", page_context, priority=900)
    app.connect("build-finished", write_css)
    app.add_css_file(CSS_NAME)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
