"""The real-browser check on a tiny site written here: each kind of fault a reader would meet is
found, and a page without them (including the table helper's widest table) passes."""
import numpy as np
import pandas as pd
import pytest

from textglauber import tables
from textglauber.bookbuild import sitecheck

pytestmark = pytest.mark.skipif(sitecheck.find_chromium() is None,
                                reason="no chromium program: install Debian's `chromium` to run the browser check")

PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>t</title>
<style>body{{margin:0;font:16px sans-serif}} article.bd-article{{max-width:600px;margin:0 auto;padding:0 16px}}</style>
</head><body><main><article class="bd-article"><h1>A page</h1>{body}</article></main></body></html>"""

WIDE = "<table><tr>" + "".join(f"<td style='padding:0 .5em'>value&nbsp;number&nbsp;{k}</td>" for k in range(30)) + "</tr></table>"


def wide_frame():
    rng = np.random.default_rng(1)
    return pd.DataFrame({"model": ["tiny-mlm:seed=1,layers=3", "package:rxnmapper-albert"],
                         **{f"a long measured quantity {k}": rng.random(2) for k in range(16)},
                         "mean": [0.997, 0.5], "low": [0.889, 0.4], "high": [1.104, 0.6]})


@pytest.fixture(scope="module")
def browser():
    with sitecheck.Browser() as b:
        yield b


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    d = tmp_path_factory.mktemp("site")
    pages = {
        "fine": "<p>Plain text.</p><div style='overflow-x:auto'>" + WIDE + "</div>"
                + tables.show(wide_frame(), intervals={"mean [low, high]": ("mean", "low", "high")}).html,
        "clipped": "<p>A wide table straight in the column.</p>" + WIDE,
        "cut": "<div style='overflow:hidden'>" + WIDE + "</div>",
        "unpadded": "<table style='border-collapse:collapse'><tr><td style='padding:0'>0.997</td>"
                    "<td style='padding:0'>0.889</td></tr></table>",
        "broken_image": "<img src='missing.png' alt=''>",
        "network": "<img src='http://localhost:9/x.png' alt=''>",
        "js_error": "<script>throw new Error('boom')</script>",
        "raw_tex": r"<p>The law \(\pi_i(a \mid x)\) at $T = 1$.</p>",
        "machine_path": "<p>results written to /home/builder/repo/results/smoke</p>",
    }
    for name, body in pages.items():
        (d / f"{name}.html").write_text(PAGE.format(body=body))
    (d / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=fine.html" />')
    return d


def check(browser, site, name, width=1280, tmp_path=None):
    shot = tmp_path / f"{name}-{width}.png" if tmp_path else None
    return sitecheck.check_page(browser, site / f"{name}.html", width, shot, machine_paths=("/home/builder/repo",))


@pytest.mark.parametrize("width", [1280, 390])
def test_a_page_whose_wide_tables_scroll_in_their_own_box_passes(browser, site, tmp_path, width):
    assert check(browser, site, "fine", width, tmp_path) == []
    png = (tmp_path / f"fine-{width}.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(png[16:20], "big") == width         # a full-page shot at the window's width


@pytest.mark.parametrize("name, expected", [
    ("clipped", "too wide: table"),
    ("cut", "cut by a container that hides overflow"),
    ("unpadded", "table cells without padding"),
    ("broken_image", "image did not load: missing.png"),
    ("network", "network request: http://localhost:9/x.png"),
    ("js_error", "JavaScript error: Error: boom"),
    ("raw_tex", "raw TeX"),
    ("machine_path", "a path of the build machine"),
])
def test_each_fault_is_found(browser, site, name, expected):
    problems = check(browser, site, name)
    assert any(expected in p for p in problems), problems


@pytest.mark.slow
def test_a_clipped_table_fails_at_phone_width_too_and_the_site_check_covers_every_page(site, tmp_path):
    problems = sitecheck.check_site(site, tmp_path / "shots", widths=(390,), machine_paths=("/home/builder/repo",))
    pages_with_problems = {p.split(" @ ")[0] for p in problems}
    assert pages_with_problems == {f"{n}.html" for n in ("clipped", "cut", "unpadded", "broken_image", "network",
                                                        "js_error", "raw_tex", "machine_path")}
    assert not any(p.startswith("index.html") for p in problems)            # a redirect to a page that exists
    assert sorted(p.name for p in (tmp_path / "shots" / "390").glob("*.png")) == sorted(
        f"{n}.png" for n in ("fine", "clipped", "cut", "unpadded", "broken_image", "network", "js_error", "raw_tex",
                             "machine_path"))
