"""The phase section's verdicts and sentences (textglauber.phasegrid.verdicts, textglauber.pages.crossover)
on tables with a known answer: a linear, an exponential and a swinging temperature must each be named
as such (power), and a sentence must not claim what the rows do not show (safety)."""
import math

import numpy as np
import pandas as pd

from textglauber import phasegrid
from textglauber.pages import crossover as crossover_page


def table(ns, laws: dict, alpha: dict, model="m", design="global") -> pd.DataFrame:
    rows = []
    for T, f in laws.items():
        for n in ns:
            rows.append({"model": model, "design": design, "tokens": "a|b", "n": n, "temperature": T,
                         "states": 2 ** n, "t_rel": f(n), "lambda2": 1 - 1 / f(n), "resolved": True,
                         "t_mix": 2 * f(n), "t_mix_lower": f(n) - 1, "alpha": alpha[T], "top_state": "a " * n,
                         "top_mass": 0.5, "rows_scored": n * 2 ** (n - 1)})
    return pd.DataFrame(rows)


NS = list(range(3, 13))
LAWS = {0.25: lambda n: 5.0 * n * (40.0 if n == 12 else 10.0 if n == 6 else 1.0), 0.5: lambda n: math.exp(0.9 * n),
        2.0: lambda n: 1.5 * n, 8.0: lambda n: 1.1 * n}
ALPHA = {0.25: 9.0, 0.5: 4.0, 2.0: 1.7, 8.0: 0.4}


def test_verdicts_name_each_law_and_the_regimes_follow():
    t = table(NS, LAWS, ALPHA)
    v = phasegrid.verdicts(t, 3.0).set_index("temperature")
    assert v.loc[0.25, "t_rel growth"] == "non-monotone"
    assert v.loc[0.5, "t_rel growth"] == "exponential"
    assert v.loc[2.0, "t_rel growth"] == "linear" and v.loc[8.0, "t_rel growth"] == "linear"
    assert v.loc[8.0, "dobrushin at every n"] and not v.loc[2.0, "dobrushin at every n"]
    r = crossover_page.regimes(phasegrid.verdicts(t, 3.0)).iloc[0]
    assert r["linear from"] == 2.0 and r["alpha < 1 from"] == 8.0
    assert r["exponential"] == "0.5" and r["non-monotone"] == "0.25"


def test_sentences_say_what_the_rows_show_and_change_when_they_do():
    t = table(NS, LAWS, ALPHA)
    v = phasegrid.verdicts(t, 3.0)
    (line,) = crossover_page.verdict_sentences(v, t, 3.0)
    assert "linear (t_rel/n within 3x) at T = 2, 8" in line and "exponentially in n at T = 0.5" in line
    assert "t_rel grows linearly in n for T ≥ 2" in line and "α < 1 holds at every n for T ≥ 8" in line
    head = crossover_page.phase_headline(v, t, 3.0)
    assert "in 1 of 1 model-and-design cases" in head and "than linear growth of t_rel in 1 of them:" in head
    # the hottest temperature made exponential: no temperature is linear from the top any more
    hot = table(NS, {**LAWS, 8.0: lambda n: math.exp(0.9 * n)}, ALPHA)
    v2 = phasegrid.verdicts(hot, 3.0)
    (line2,) = crossover_page.verdict_sentences(v2, hot, 3.0)
    assert "t_rel grows linearly in n for no temperature of the grid" in line2
    assert "in 0 of 1 model-and-design cases" in crossover_page.phase_headline(v2, hot, 3.0)


def test_spikes_name_the_peak_length_and_its_heaviest_state():
    t = table(NS, LAWS, ALPHA)
    t.loc[(t.temperature == 0.25) & (t.n == 12), "top_state"] = "b b b"
    s = crossover_page.spikes(phasegrid.verdicts(t, 3.0), t)
    peak = s[s.peak].iloc[0]
    assert peak.n == 12 and peak["top state"] == "b b b" and set(s.n) == {11, 12}


def test_the_calibration_sentence_reports_the_factor_from_the_rows():
    cal = pd.DataFrame([
        {"model": "m", "design": "global", "n": 8, "temperature": 0.5, "starts": "random pairs", "pairs": 100,
         "t_mix": 1000.0, "median": 50.0, "q75": 100.0, "budget": 20000},
        {"model": "m", "design": "global", "n": 8, "temperature": 2.0, "starts": "random pairs", "pairs": 100,
         "t_mix": 40.0, "median": 30.0, "q75": 60.0, "budget": 800},
        {"model": "m", "design": "global", "n": 8, "temperature": 0.5, "starts": "worst pair", "pairs": 100,
         "t_mix": 1000.0, "median": 900.0, "q75": 1500.0, "budget": 20000},
        {"model": "m", "design": "global", "n": 8, "temperature": 2.0, "starts": "worst pair", "pairs": 100,
         "t_mix": 40.0, "median": 40.0, "q75": 80.0, "budget": 800}])
    s = crossover_page.calibration_sentence(cal)
    assert "0.1 to 1.5 times" in s and "below it in 1 of 2 cells" in s and "factor of up to 10" in s
    assert "chosen as the worst the ratio is 1.5 to 2" in s and "heuristic" not in s
    assert "in the 1 cell where its ratio is below 1" in crossover_page.calibration_sentence(
        cal.assign(q75=np.where(cal.starts == "worst pair", [0, 0, 500.0, 80.0], cal.q75)))
    none_under = cal.assign(q75=cal.t_mix * 2)
    assert "understates" not in crossover_page.calibration_sentence(none_under)


def test_the_band_sentence_says_whether_n_log_n_passes_as_linear():
    """The sentence's claim is checked against the verdict rule itself: n ln n is named linear
    exactly where the sentence says it passes, and not where it says it does not."""
    from textglauber import phase

    for n_lo, n_hi, factor in ((4, 12, 2.0), (2, 12, 2.0), (3, 12, 3.0), (2, 40, 3.0)):
        ns = np.arange(n_lo, n_hi + 1)
        passes = phase.growth_verdict(ns, ns * np.log(ns), factor=factor)[0] == "linear"
        said = crossover_page.band_sentence(n_lo, n_hi, factor)
        assert ("so n ln n passes as linear too" in said) == passes
        assert ("would not pass as linear" in said) == (not passes)
    assert crossover_page.band_sentence(1, 12, 2.0) == ""
