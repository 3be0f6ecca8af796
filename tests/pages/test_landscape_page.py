"""Chapter 3's landscape, covering and hot-end sentences, counted by hand on small synthetic tables."""
import math

import numpy as np
import pandas as pd

from textglauber.landscape import tables as land
from textglauber.pages import crossover as page


def summary(rows):
    return pd.DataFrame(rows, columns=land.SUMMARY_COLUMNS)


def test_check_sentence_counts_agreements_and_names_the_largest_miss():
    s = summary([
        {"model": "m", "design": "global", "n": 8, "gamma": 4.0, "temperatures": 6, "resolved": 5, "coldest T": 0.2,
         "T ln t_rel there": 4.4, "off by": 0.10, "line to T = 0": 4.02, "line off by": 0.005,
         "hit T": 0.04, "T ln hit there": 4.1, "hit off by": 0.025},
        {"model": "m", "design": "passage 1", "n": 9, "gamma": 2.0, "temperatures": 6, "resolved": 3,
         "coldest T": 0.1, "T ln t_rel there": 2.6, "off by": 0.30, "line to T = 0": 2.5, "line off by": 0.25,
         "hit T": 0.02, "T ln hit there": 2.4, "hit off by": 0.2},
        {"model": "m", "design": "global", "n": 12, "gamma": 1.0, "temperatures": 6, "resolved": 6,
         "coldest T": 0.05, "T ln t_rel there": 1.1, "off by": 0.1, "line to T = 0": 1.0, "line off by": 0.0,
         "hit T": math.nan, "T ln hit there": math.nan, "hit off by": math.nan}])
    text = page.check_sentence(s)
    assert "within 15% of Γ in 2 of 3" in text and "meets Γ at T = 0 within 15% in 2 of 3" in text
    assert "1 of them resolve fewer than 4" in text and "n = 9" in text and "2.6" in text
    assert "T = Γ/100" in text and "within 15% of Γ in 1 of the 2 chains small enough" in text
    assert "largest distance 20.0%" in text and "at T = 0.02 gives 2.4" in text
    assert "nothing to be checked" in page.check_sentence(summary([]))
    land_rows = pd.DataFrame({"n": [10, 11, 11, 12, 12], "complete": [True, True, True, True, False],
                              "gamma": [1.0, 0.5, np.nan, 2.0, 3.0], "wells": [2, 2, 1, 3, 2]})
    more = page.check_sentence(s, land_rows)
    assert "2 listed chains with a barrier (n = 11, 12) have more than 1,024 states and are not checked" in more
    assert "not checked" not in page.check_sentence(s, land_rows[land_rows.n <= 10])
    assert "1 listed chain with a barrier (n = 11) has more" in page.check_sentence(summary([]), land_rows.iloc[:3])


def test_covering_sentence_separates_transfers_from_cells_that_carry_nothing():
    cov = pd.DataFrame([
        {"model": "m", "n": 3, "temperature": 0.05, "epsilon": 0.05, "left_out": 5e-4, "step_left_out": 1.7e-3,
         "complete": True, "t_mix": 914196.0, "t_mix_full_lower": 146.0, "transfer": "holds"},
        {"model": "m", "n": 3, "temperature": 0.25, "epsilon": 0.05, "left_out": 0.9, "step_left_out": 0.6, "complete": False,
         "t_mix": np.nan, "t_mix_full_lower": np.nan, "transfer": "the sets outgrow max_states = 600"},
        {"model": "m", "n": 4, "temperature": 0.05, "epsilon": 0.05, "left_out": 0.01, "step_left_out": 0.01, "complete": True,
         "t_mix": 3.0, "t_mix_full_lower": np.nan, "transfer": "left-out mass too large"}])
    text = page.covering_sentence(cov)
    assert "Of 3 covering cells" in text and "2 closed" in text and "1 stopped before closing" in text
    assert "In 1 cell the coupling bound" in text and "at least 146 steps" in text
    assert "In 1 the bound sits at that ceiling" in text and "passes" not in text   # 146 is 0.99 of 1/(4 * 1.7e-3) = 147
    far = cov.assign(t_mix_full_lower=[20.0, np.nan, np.nan])          # far below its ceiling: no such words
    assert "sits at that ceiling" not in page.covering_sentence(far)
    past = page.covering_sentence(cov.assign(t_mix_full_lower=[900.0, 12.0, np.nan],
                                             transfer=["holds", "holds (open sets: ...)", "left-out mass too large"]))
    assert "In 2 of these the bound passes 1/(4ε*)" in past and "sits at that ceiling" not in past
    assert "In 2 cells" in past and "(1 of them on sets that did not close" in past
    assert "left-out mass too large (1)" in text and "the sets outgrow max_states = 600 (1)" in text


def test_gamma_sentences_say_listed_and_searched_apart():
    t = pd.DataFrame([
        {"model": "m", "design": "global", "n": n, "gamma": g, "complete": n <= 4, "finished": n != 6,
         "wells": 1 if math.isnan(g) else 2, "states opened": 2 ** n if n <= 4 else 50}
        for n, g in [(3, np.nan), (4, 1.0), (5, 1.5), (6, 2.5)]])
    v = land.verdicts(t.assign(**{"tokens": "a|b", "ground well": "", "well sizes": "", "other wells": ""}))
    [text] = page.gamma_sentences(t, v)
    assert "3: one well" in text and "4: 1" in text and "every state listed up to n = 4" in text
    assert "n = 5 to 6 searched (4 wells found over 2 lengths, 100 states opened, 1 search stopped at its budget" in text
    both = t.assign(finished=t.n <= 4)
    [text] = page.gamma_sentences(both, land.verdicts(both.assign(**{"tokens": "a|b", "ground well": "", "well sizes": "",
                                                                     "other wells": ""})))
    assert "2 searches stopped at their budget" in text
    assert "not certified complete" in text


def test_gamma_sentences_give_the_bracket_of_an_unfinished_search():
    t = pd.DataFrame([
        {"model": "m", "design": "global", "n": n, "gamma": g, "gamma low": lo, "gamma high": hi, "complete": n <= 4,
         "finished": n <= 5, "wells": w, "states opened": 2 ** n if n <= 4 else 50}
        for n, g, lo, hi, w in [(4, 1.0, 1.0, 1.0, 2), (5, 1.5, 1.5, 1.5, 2), (7, math.inf, 1.2, 3.4, 2),
                                (8, math.inf, np.nan, np.nan, 3), (9, np.nan, np.nan, np.nan, 1)]])
    v = land.verdicts(t.assign(**{"tokens": "a|b", "ground well": "", "well sizes": "", "other wells": ""}))
    [text] = page.gamma_sentences(t, v)
    assert "7: between 1.2 and 3.4" in text and "8: no cost between its wells settled" in text
    assert "9: one well found before the search ran out" in text
    assert "5: 1.5" in text and "inf" not in text


def test_the_gamma_figure_draws_a_bracket_where_gamma_is_not_settled():
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.collections import LineCollection
    t = pd.DataFrame({"model": "m", "design": "global", "n": [4, 5, 7], "gamma": [1.0, np.nan, math.inf],
                      "gamma low": [1.0, np.nan, 1.2], "gamma high": [1.0, np.nan, 3.4], "complete": [True, True, False]})
    fig = page.plot_gamma(t)
    [bars] = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
    [[(x0, y0), (x1, y1)]] = [seg.tolist() for seg in bars.get_segments()]
    assert (x0, y0, x1, y1) == (7, 1.2, 7, 3.4)


def test_the_gamma_figure_fits_the_page_with_three_long_model_names():
    """Saved as the notebook saves it (tight box, the figures' DPI), the figure is no wider than the
    page's content (the site check's 'figure shrunk to fit': panel titles that outgrew a third of
    the page had widened it to 769 px)."""
    import io

    import matplotlib
    matplotlib.use("Agg")
    from PIL import Image

    from textglauber import figures
    names = ["package:rxnfp-bert", "package:antiberty", "trained:english"]
    t = pd.DataFrame([{"model": m, "design": d, "n": n, "gamma": 0.5 * n, "gamma low": 0.5 * n, "gamma high": 0.5 * n,
                       "complete": n < 10} for m in names for d in ("global", "passage 1") for n in (3, 6, 9, 14, 20)])
    buf = io.BytesIO()
    page.plot_gamma(t).savefig(buf, format="png", bbox_inches="tight", dpi=figures.DPI)
    buf.seek(0)
    assert Image.open(buf).size[0] <= figures.CONTENT_PX
