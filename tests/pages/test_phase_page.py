"""The phase section's verdicts and sentences (textglauber.phasegrid.verdicts, textglauber.pages.crossover)
on tables with a known answer: a linear and an exponential temperature must each be named as such
(power), a swinging one must be left undecided, and a sentence must not claim what the rows do not
show (safety): slow mixing is counted only where t_rel is named exponential."""
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
    v = phasegrid.verdicts(t).set_index("temperature")
    assert v.loc[0.25, "t_rel growth"] == "cannot tell"
    assert v.loc[0.5, "t_rel growth"] == "exponential"
    assert v.loc[2.0, "t_rel growth"] == "polynomial" and v.loc[8.0, "t_rel growth"] == "polynomial"
    assert v.loc[8.0, "dobrushin at every n"] and not v.loc[2.0, "dobrushin at every n"]
    r = crossover_page.regimes(phasegrid.verdicts(t)).iloc[0]
    assert r["polynomial from"] == 2.0 and r["alpha < 1 from"] == 8.0
    assert r["exponential"] == "0.5" and r["cannot tell"] == "0.25" and r["unresolved"] == "none"


def test_sentences_say_what_the_rows_show_and_change_when_they_do():
    t = table(NS, LAWS, ALPHA)
    v = phasegrid.verdicts(t)
    (line,) = crossover_page.verdict_sentences(v, t)
    assert "grows at most polynomially in n at T = 2, 8" in line and "exponentially in n (a rate of at least" in line
    assert "cannot tell at T = 0.25" in line
    assert "named polynomial for T ≥ 2" in line and "α < 1 holds at every n for T ≥ 8" in line
    head = crossover_page.phase_headline(v, t)
    assert "hottest temperatures in 1 of 1 model-and-design cases" in head
    assert "exponentially at some temperature in 1 of 1." in head
    assert "In 1 of 1 its growth cannot be told" in head and "cannot tell at T = 0.25" in head
    assert "than that polynomial growth in 1 of them:" in head
    # the hottest temperature made exponential: no temperature is polynomial from the top any more
    hot = table(NS, {**LAWS, 8.0: lambda n: math.exp(0.9 * n)}, ALPHA)
    v2 = phasegrid.verdicts(hot)
    (line2,) = crossover_page.verdict_sentences(v2, hot)
    assert "t_rel is named polynomial for no temperature of the grid" in line2
    assert "hottest temperatures in 0 of 1 model-and-design cases" in crossover_page.phase_headline(v2, hot)


def test_undecided_temperatures_are_never_counted_as_slow_mixing():
    """A grid with no exponential temperature, only polynomial and undecided ones, counts 0 cases
    of slow mixing and lists the undecided ones apart; an unresolved cell is listed too."""
    laws = {0.25: LAWS[0.25], 2.0: LAWS[2.0], 8.0: LAWS[8.0]}
    t = table(NS, laws, ALPHA)
    t.loc[(t.temperature == 0.25) & (t.n == 7), "t_rel"] = np.nan
    v = phasegrid.verdicts(t)
    assert v.set_index("temperature").loc[0.25, "t_rel growth"] == "unresolved"
    reg, hot, cold, undecided = crossover_page.hot_and_cold(v)
    assert len(cold) == 0 and len(hot) == 1 and len(undecided) == 1
    said = crossover_page.phase_verdict(v, t)
    assert "exponential at some temperature in 0 of 1" in said and "at some temperature in 1 of 1" in said
    assert "unresolved at T = 0.25" in crossover_page.phase_headline(v, t)


def test_spikes_name_the_peak_length_and_its_heaviest_state():
    t = table(NS, LAWS, ALPHA)
    t.loc[(t.temperature == 0.25) & (t.n == 12), "top_state"] = "b b b"
    s = crossover_page.spikes(phasegrid.verdicts(t), t)
    peak = s[s.peak].iloc[0]
    assert peak.n == 12 and peak["top state"] == "b b b" and set(s.n) == {11, 12}
    assert set(s.temperature) == {0.25}                    # the named laws are not listed


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


def test_the_rule_sentence_reads_its_numbers_from_the_rule_and_the_range():
    """The sentence names the rule's own thresholds and the rise of e^{R_MIN n} over the range run."""
    from textglauber.phase import verdicts as rule

    said = crossover_page.rule_sentence(3, 12)
    assert f"at most {rule.FIT_MAX:g})" in said and f"at least {rule.DECISIVE:g} times" in said
    assert f"grows only {math.exp(rule.R_MIN * 9):.2g}x" in said and "n = 3 to 12" in said
    assert crossover_page.rule_sentence(5, 5) == ""
