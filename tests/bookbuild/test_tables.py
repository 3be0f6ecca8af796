"""The table helper: what a reader sees of a DataFrame (the browser test in test_sitecheck.py
checks that its tables fit the page)."""
import re
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from textglauber import tables


class Cells(HTMLParser):
    """The header row and body rows (as (tag, text) cells) of a table, and every div's attributes."""

    def __init__(self, text):
        super().__init__()
        self.head, self.rows, self.divs = [], [], []
        self._part, self._cell, self._row = None, None, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag == "div":
            self.divs.append(dict(attrs))
        elif tag in ("thead", "tbody"):
            self._part = tag
        elif tag == "tr":
            self._row = []
        elif tag in ("th", "td"):
            self._cell = [tag, ""]

    def handle_data(self, data):
        if self._cell:
            self._cell[1] += data

    def handle_endtag(self, tag):
        if tag in ("th", "td"):
            self._row.append(tuple(self._cell))
            self._cell = None
        elif tag == "tr":
            if self._part == "thead":
                self.head.append([t for _, t in self._row])
            else:
                self.rows.append(self._row)


@pytest.fixture(autouse=True)
def fresh_names():
    tables.reset()
    yield
    tables.reset()


def test_numbers_have_three_significant_digits():
    assert tables.number(3.14159) == "3.14"
    assert tables.number(0.0123456) == "0.0123"
    assert tables.number(0.99961) == "1.00"            # rounding up does not add a digit
    assert tables.number(123.456) == "123"
    assert tables.number(98765.4) == "98,765"          # large numbers keep their integer digits
    assert tables.number(0.000123456) == "1.23e-04"
    assert tables.number(2.5e7) == "2.50e+07"
    assert tables.number(0.0) == "0"
    assert tables.number(np.int64(120000)) == "120,000"
    assert tables.number(float("nan")) == tables.NA
    assert tables.number(float("inf")) == "∞"


def test_intervals_share_the_decimals_of_their_value():
    assert tables.interval(0.997, 0.889, 1.104) == "0.997 [0.889, 1.104]"
    assert tables.interval(12.3456, 10.01, 15.99) == "12.3 [10.0, 16.0]"
    assert tables.interval(2.5e-6, 1e-6, 4.2e-6) == "2.50e-06 [1.00e-06, 4.20e-06]"
    assert tables.interval(0.5, np.nan, np.nan) == "0.500"
    assert tables.interval(np.nan, 0.1, 0.2) == tables.NA


def test_names_are_shortened_the_same_way_everywhere():
    assert tables.short_name("tiny-mlm:seed=1,layers=3") == "tiny-mlm:s1,l3"
    assert tables.short_name("package:antiberty") == "antiberty"
    assert tables.short_name("sentence:package:all-MiniLM-L6-v2") == "all-MiniLM-L6-v2"
    assert tables.short_name("answerdotai/ModernBERT-base") == "ModernBERT-base"
    assert tables.short_name("bert-base shape (random weights)") == "bert-base shape"
    assert tables.short_name("trained:english") == "trained:english"
    long = tables.short_name("a-very-long-model-name-that-goes-on-and-on")
    assert len(long) <= tables.NAME_WIDTH and long.endswith("…") and long.startswith("a-very-long")
    # two full names that would share a short name: the second keeps its full name
    names = tables.Names()
    assert names("package:antiberty") == "antiberty"
    assert names("antiberty") == "antiberty"       # itself, unshortened: no clash with a different full name
    assert names("embedding:antiberty") == "embedding:antiberty"


def wide_frame():
    rng = np.random.default_rng(0)
    models = ["tiny-mlm", "tiny-mlm:seed=1,layers=3", "package:rxnmapper-albert"]
    rows = []
    for m in models:
        row = {"model": m, "kind": "mlm", "rectangles": 120, "mean R": 0.997, "95% CI low": 0.889,
               "95% CI high": 1.104}
        row.update({f"a long measured quantity number {k}": rng.random() for k in range(10)})
        rows.append(row)
    return pd.DataFrame(rows, index=[5, 7, 9])        # an index that must not be shown


def test_a_wide_frame_becomes_a_scrolling_table_without_index():
    df = wide_frame()
    t = tables.show(df, intervals={"mean R [95% CI]": ("mean R", "95% CI low", "95% CI high")})
    parsed = Cells(t.html)
    # its own horizontally scrolling box around the table
    assert any("overflow-x:auto" in (d.get("style") or "").replace(" ", "") for d in parsed.divs)
    assert re.search(r'<div class="tg-box"[^>]*>\s*<table', t.html)
    # no index column: the header is exactly the frame's columns, less the interval's bounds, and
    # no body row starts with a header cell or with the old index labels
    header = parsed.head[0]
    expected = ["model", "kind", "rectangles", "mean R [95% CI]"] + [c for c in df.columns if c.startswith("a long")]
    assert header == expected
    assert all(all(k == "td" for k, _ in r) for r in parsed.rows)
    assert all(len(r) == len(header) for r in parsed.rows)
    body = [[v for _, v in r] for r in parsed.rows]
    assert [r[2] for r in body] == ["120"] * 3
    assert {r[3] for r in body} == {"0.997 [0.889, 1.104]"}
    # three significant digits everywhere else
    for r, (_, src) in zip(body, df.iterrows()):
        for c, v in zip(header[4:], r[4:]):
            assert v == tables.number(src[c]) and len(re.sub(r"\D", "", v).lstrip("0")) == 3
    # cells are padded and names do not wrap inside a word
    assert re.search(r"table\.tg-table td\{padding:\.3rem \.75rem;", t.html)
    assert "white-space:nowrap" in t.html


def test_names_are_shortened_with_one_legend_per_chapter():
    df = wide_frame()
    first = tables.show(df)
    models = [r[0][1] for r in Cells(first.html).rows]
    assert models == ["tiny-mlm", "tiny-mlm:s1,l3", "rxnmapper-albert"]
    assert first.legend == {"tiny-mlm:s1,l3": "tiny-mlm:seed=1,layers=3", "rxnmapper-albert": "package:rxnmapper-albert"}
    assert "tiny-mlm:seed=1,layers=3" in first.html and 'class="tg-legend"' in first.html
    second = tables.show(df[["model", "mean R"]])
    assert [r[0][1] for r in Cells(second.html).rows] == models      # the same short names
    assert second.legend == {} and "tg-legend" not in second.html.split("</style>")[1]


def test_pivot_puts_temperatures_in_rows():
    long = pd.DataFrame({"model": ["m1", "m1", "m1", "package:m2", "package:m2", "package:m2"],
                         "temperature": [0.25, 0.5, 1.0] * 2,
                         "alpha": [3.14159, 1.23456, 0.5, 2.0, 1.0, 0.25]})
    t = tables.show(long, pivot={"index": "temperature", "columns": "model", "values": "alpha"})
    assert list(t.frame.columns) == ["temperature", "m1", "m2"]
    assert t.frame.temperature.tolist() == ["0.25", "0.5", "1"]     # exact parameters as given
    assert t.frame["m1"].tolist() == ["3.14", "1.23", "0.500"]
    assert t.frame["m2"].tolist() == ["2.00", "1.00", "0.250"]


def test_a_named_index_becomes_a_column_and_long_text_may_wrap_between_words():
    df = pd.DataFrame({"score": [0.123456]}, index=pd.Index(["health"], name="seed topic"))
    t = tables.show(df)
    assert list(t.frame.columns) == ["seed topic", "score"] and t.frame.iloc[0].tolist() == ["health", "0.123"]
    text = pd.DataFrame({"text": ["the old teacher read a story to the children of the village"], "n": [3]})
    assert 'class="tg-text"' in tables.show(text).html
