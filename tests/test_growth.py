"""Growth-law verdicts on censored times (growth.py; its Kaplan-Meier medians are tested in
test_semantics): the comparison of n, n log n and n^2 with free offsets and a free power law, the
one-sided log-factor tests, and the design check that says which verdicts a design can deliver
(issue 41, item 2).

Tests marked 'fails on HEAD 9ac1f6f' were run against that commit's growth.py (the times are drawn
here, not with growth.simulate, so that the old compare_laws can take them); the counts in their
docstrings are from those runs."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from textglauber import growth
from textglauber.pages import crossover as crossover_page

REVIEW = [6, 10, 16, 28, 48]          # the outside review's design: 20 chains, budget 200 steps, cv 0.5


def _times(f, lengths, trials, budget, rng, cv=0.5, censor_top=0.2):
    """Log-normal times a f(n), whole steps, censored at each length's budget; a puts ``censor_top``
    of the chains beyond the budget at the length where most are. Independent of growth.simulate."""
    lengths = np.asarray(lengths, float)
    budgets = np.broadcast_to(np.asarray(budget, float), lengths.shape)
    sigma = np.sqrt(np.log1p(cv ** 2))
    a = np.min(budgets / f(lengths)) / np.exp(sigma * 0.8416212335729143)      # z of 1 - 0.2
    n = np.repeat(lengths, trials)
    t = np.ceil(a * f(n) * np.exp(sigma * rng.standard_normal(len(n))))
    cens = t > np.repeat(budgets, trials)
    return n.astype(int), np.where(cens, np.nan, t), cens


def _verdicts(f, reps, seed, budget=200, lengths=REVIEW, trials=20):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(reps):
        n, tau, c = _times(f, lengths, trials, budget, rng)
        per_obs = np.repeat(np.broadcast_to(np.asarray(budget, float), (len(lengths),)), trials)
        out.append(growth.compare_laws(n, tau, c, per_obs, n_boot=200, seed=int(rng.integers(2**31))))
    return out


def test_power_law_between_the_laws_is_not_called_n_log_n():
    """A true n^1.5 at the review's design: the old rule named n log n in 40 of 40 runs, 33 strong
    (fails on HEAD 9ac1f6f: 20 of 20 named n log n here, 18 strong). n log n must now beat the free
    power law, which fits n^1.5 exactly, by its chi^2 alone, so it is named rarely and never strongly
    (here: 20 of 20 'cannot tell')."""
    got = _verdicts(lambda n: n ** 1.5, 20, seed=1)
    verdicts = [c.verdict() for c in got]
    assert verdicts.count("n log n") <= 3
    assert not [c for c in got if c.verdict() != "cannot tell" and c.support == "strong"]
    assert verdicts.count("cannot tell") >= 16


def test_offset_n_log_n_is_not_called_n_strongly():
    """a n log n + b with b = 20 at the review's design: the old rule said 'n (strong)' in 33 of 40
    (fails on HEAD 9ac1f6f: 19 of 20 here). With offsets, n must beat n log n + b, which fits the
    truth, so the best it gets is a moderate verdict from parsimony (here: none)."""
    got = _verdicts(lambda n: n * np.log(n) + 20, 20, seed=2)
    assert sum(c.verdict() == "n" and c.support == "strong" for c in got) <= 1
    assert sum(c.verdict() == "n" for c in got) <= 8


def test_log_factor_tests_are_one_sided_and_keep_the_coefficient():
    """With a true law n + 5, the old no-offset test rejected c n in 27 of 40 runs through a negative
    log coefficient (fails on HEAD 9ac1f6f: 15 of 20 here, every one with a < 0). One-sided, a <= 0
    gives statistic 0 and p-value 1; the coefficient stays in the dict with its sign."""
    got = _verdicts(lambda n: n + 5.0, 20, seed=3)
    lf = [c.log_factor for c in got]
    assert all({"delta_chi2", "p_value", "a"} <= set(d) for d in lf + [c.log_factor_offset for c in got])
    assert sum(d["p_value"] < 0.05 for d in lf) <= 2
    negative = [d for d in lf if d["a"] < 0]
    assert len(negative) >= 10                     # the coefficient is kept, and is mostly negative here
    assert all(d["delta_chi2"] == 0 and d["p_value"] == 1 for d in negative)
    # a positive statistic has half the two-sided p-value (the boundary mixture)
    pos = [d for d in lf if d["delta_chi2"] > 0]
    from scipy import stats
    assert all(d["p_value"] == pytest.approx(stats.chi2.sf(d["delta_chi2"], 1) / 2) for d in pos)


def test_log_factor_with_offset_can_detect_n_log_n():
    """The one-sided test with an offset b >= 0 detects a pure n log n law at the review's design
    (the old two-sided test with a free-signed offset did so in 9 of 40; fails on HEAD 9ac1f6f: 4 of 20
    here; now 18 of 20); and it can fail: a true n + 5 is rejected rarely (1 of 20)."""
    nl = _verdicts(lambda n: n * np.log(n), 20, seed=4)
    assert sum(c.log_factor_offset["p_value"] < 0.05 for c in nl) >= 14
    lin = _verdicts(lambda n: n + 5.0, 20, seed=5)
    assert sum(c.log_factor_offset["p_value"] < 0.05 for c in lin) <= 3


def test_budgets_per_length_work_everywhere():
    """Budgets in sweeps (60 n steps): simulate censors each length at its own budget, and
    compare_laws and design_check take one budget per observation resp. per length (fails on HEAD
    9ac1f6f: its simulate divided a scalar by the budget array)."""
    budgets = [60 * n for n in REVIEW]
    n, tau, c = growth.simulate("n^2", REVIEW, 40, budgets, rng=np.random.default_rng(0))
    cap = np.repeat(budgets, 40)
    assert np.all(tau[~c] <= cap[~c]) and not np.any(np.isfinite(tau[c]))
    assert c[n == 48].mean() == pytest.approx(0.2, abs=0.12) and c[n == 6].mean() == 0
    r = growth.compare_laws(n, tau, c, cap, n_boot=200)
    assert list(r.cells.budget) == budgets
    check = growth.design_check(REVIEW, 20, budgets, replicates=3, n_boot=50, truths=["n^2"])
    assert check.replicates[0] == 3


def test_simulate_keeps_its_old_form_for_one_budget():
    """simulate(law, lengths, trials, budget) with one budget draws the same times as before (a from
    the longest length), so old seeds still give old samples."""
    rng = np.random.default_rng(9)
    n, tau, c = growth.simulate("n log n", [4, 8, 16], 10, 300, rng=np.random.default_rng(9))
    n2, tau2, c2 = _times(growth.LAWS["n log n"], [4, 8, 16], 10, 300, rng)
    assert np.array_equal(n, n2) and np.array_equal(c, c2) and np.allclose(tau, tau2, equal_nan=True)


def test_constrained_fits_and_the_power_law_profile():
    nn = np.array([6.0, 10, 16, 28, 48])
    var = np.ones(5)
    # a concave line through the origin region wants a negative offset: b is held at 0
    coef, chi2 = growth._wls(np.stack([nn, np.ones(5)], 1), 3 * nn - 10, var, nonneg=(0, 1))
    assert coef[1] == 0 and coef[0] > 0
    coef, _ = growth._wls(np.stack([nn, np.ones(5)], 1), 3 * nn + 10, var, nonneg=(0, 1))
    assert coef == pytest.approx([3, 10])
    p, c, chi2 = growth._power_profile(nn, np.stack([2 * nn ** 1.37, 5 * nn ** 0.5]), var)
    assert p == pytest.approx([1.37, 0.5], abs=0.002) and c == pytest.approx([2, 5], rel=0.01)


def test_named_laws_when_the_data_say_so():
    """The rule can still name each law: n^2 at the review's design; n and n log n with 100 chains over
    a factor of 128 (where the power law sees n log n's curvature: 35 of 40 in a needed_range run); an
    offset n^2 + b through its offset form; and 'none of the three' for n^2.5 with little noise."""
    got = _verdicts(lambda n: n ** 2, 10, seed=6)
    assert sum(c.verdict() == "n^2" and c.support == "strong" for c in got) >= 6
    wide = [6, 20, 68, 228, 768]
    budget = [60 * x for x in wide]
    got = [c.verdict() for c in _verdicts(lambda n: n * np.log(n), 10, seed=7, lengths=wide, trials=100, budget=budget)]
    assert got.count("n log n") >= 6 and "n" not in got
    got = [c.verdict() for c in _verdicts(lambda n: n, 6, seed=8, lengths=wide, trials=100, budget=budget)]
    assert got.count("n") >= 4 and "n log n" not in got
    r = _verdicts(lambda n: n ** 2 + 36.0, 1, seed=10)[0]
    assert r.best_model == "a n^2 + b" and r.p_high < 2 and r.verdict() == "n^2"
    rng = np.random.default_rng(11)
    n = np.repeat([6, 8, 12, 16, 24, 32, 48], 24)
    tau = np.ceil(0.05 * n ** 2.5 * np.exp(0.1 * rng.standard_normal(len(n))))
    r = growth.compare_laws(n, tau, np.zeros(len(n), bool), 1e6)
    assert r.verdict() == "none of the three" and r.p_low > 2
    assert crossover_page.law_sentence(r).startswith("none of the three laws") and "faster than n^2" in crossover_page.law_sentence(r)


def test_comparison_can_say_cannot_tell():
    rng = np.random.default_rng(0)
    # a range of n too short
    n, tau, c = growth.simulate("n log n", [10, 12, 14], 20, 400, rng=rng)
    r = growth.compare_laws(n, tau, c, 400)
    assert r.verdict() == "cannot tell" and "factor of 2" in r.reason
    # most lengths censored: too few medians
    n, tau, c = growth.simulate("n log n", [4, 8, 16, 32, 64], 20, 1000, rng=rng)
    cap = 1.05 * np.nanmedian(tau[n == 8])                      # a budget that leaves only n = 4 and 8
    c = c | (tau > cap)
    r = growth.compare_laws(n, np.where(c, np.nan, tau), c, cap)
    assert r.verdict() == "cannot tell" and "censored" in r.reason
    # little noise (10%) and an exponent between the laws' (n^1.5). The old rule named the nearest of the
    # three with a warning; now the free power law beats every law by far, and the verdict is 'cannot tell'
    n = np.repeat([6, 8, 12, 16, 24, 32, 48], 24)
    tau = np.ceil(2 * n ** 1.5 * np.exp(0.1 * rng.standard_normal(len(n))))
    r = growth.compare_laws(n, tau, np.zeros(len(n), bool), 1e6)
    assert 1 < r.p_low <= 1.5 <= r.p_high < 2
    assert r.verdict() == "cannot tell" and r.runner_up == "C n^p" and r.power_margin > STRONG_BY_FAR
    assert crossover_page.law_sentence(r).startswith("cannot tell: a power law fits the medians better than any of the three")


STRONG_BY_FAR = 20


def test_verdict_is_none_of_the_three_when_the_exponent_excludes_them():
    """Medians growing like n^0.5 (little noise) are fitted least badly by the n law, but the exponent's
    interval lies below 1: the verdict must not name the n law (the chapter's T = 1 row once did)."""
    rng = np.random.default_rng(4)
    n = np.repeat([6, 8, 12, 16, 24, 32, 48], 24)
    tau = np.ceil(20 * n ** 0.5 * np.exp(0.1 * rng.standard_normal(len(n))))
    r = growth.compare_laws(n, tau, np.zeros(len(n), bool), 1e6)
    assert r.best == "n" and r.p_high < 1 and r.gof_p < 0.01
    assert r.verdict() == "none of the three"
    assert crossover_page.law_sentence(r).startswith("none of the three laws") and "more slowly than n" in crossover_page.law_sentence(r)
    # and a true n law is still named, though whole-step times may pull its exponent's interval just below 1
    for seed in range(5):
        rng = np.random.default_rng(seed)
        tau = np.ceil(3 * n * np.exp(0.1 * rng.standard_normal(len(n))))
        assert growth.compare_laws(n, tau, np.zeros(len(n), bool), 1e6).verdict() == "n"


def test_truths_by_name_pair_and_triple():
    t = growth.truth("n log n + b", REVIEW)
    assert t.law == "n log n" and t.f(6.0) == pytest.approx(2 * 6 * np.log(6))
    assert growth.truth("n log n + 20", REVIEW).f(6.0) == pytest.approx(6 * np.log(6) + 20)
    assert growth.truth("n^1.5", REVIEW).law == "none of the three"
    assert growth.truth("n^2 + b", REVIEW).f(6.0) == 72
    assert growth.truth(("n + 5", lambda n: n + 5.0), REVIEW).law == "n"
    assert growth.truth(("wiggly", np.sqrt), REVIEW).law == "none of the three"
    assert growth.truth(("custom", np.sqrt, "n"), REVIEW).law == "n"
    with pytest.raises(ValueError):
        growth.truth("n log log n", REVIEW)


def test_design_check_columns_and_bookkeeping():
    truths = ["n^2", "n^1.5", ("n + 5", lambda n: n + 5.0)]
    check = growth.design_check(REVIEW, 20, 200, replicates=6, n_boot=100, seed=1, truths=truths)
    assert list(check.truth) == ["n^2", "n^1.5", "n + 5"] and list(check.law) == ["n^2", "none of the three", "n"]
    verdicts = ["n", "n log n", "n^2", "none of the three", "cannot tell"]
    assert (check[verdicts].sum(axis=1) == 6).all()
    for v in verdicts[:-1]:
        assert (check[f"{v} (strong)"] <= check[v]).all()
    row = check.set_index("truth").loc["n^1.5"]
    assert row["right"] == row["cannot tell"] + row["none of the three"]
    assert row["wrong"] == row["n"] + row["n log n"] + row["n^2"]
    row = check.set_index("truth").loc["n^2"]
    assert row["right"] == row["n^2"] and row["wrong"] == 6 - row["n^2"] - row["cannot tell"]
    assert (check["right, strong"] <= check["right"]).all() and (check["wrong, strong"] <= check["wrong"]).all()


def _fake_check(wrong=None):
    """A design check by hand: each law named for itself in 40 of 50 (all strong), plus ``wrong``:
    {truth: (verdict, strong count, any-support count)}."""
    rows = []
    for name, law in [("n", "n"), ("n log n", "n log n"), ("n^2", "n^2"), ("n^1.5", "none of the three")]:
        row = {"truth": name, "law": law, "replicates": 50, "cannot tell": 0}
        for v in ["n", "n log n", "n^2", "none of the three"]:
            row[v] = row[f"{v} (strong)"] = 0
        row[law] = row[f"{law} (strong)"] = 40 if law != "none of the three" else 0
        rows.append(row)
    check = pd.DataFrame(rows).set_index("truth")
    for truth, (verdict, strong, anysupport) in (wrong or {}).items():
        check.loc[truth, [f"{verdict} (strong)", verdict]] = [strong, anysupport]
    return check.reset_index()


def test_reliable_and_reported_downgrade_with_the_reason():
    check = _fake_check({"n^1.5": ("n log n", 12, 20)})          # n^1.5 named n log n: 12 strong, 20 in all
    assert not growth.reliable(check, "n log n", strong=True)
    assert growth.reliable(check, "n log n", strong=True, max_false=0.25)
    assert growth.reliable(check, "n^2") and growth.reliable(check, "cannot tell")
    assert not growth.reliable(check, "n log n", strong=False, max_false=0.3)
    r = _verdicts(lambda n: n * np.log(n), 1, seed=0, lengths=[6, 17, 48, 136, 384], trials=100,
                  budget=[60 * x for x in [6, 17, 48, 136, 384]])[0]
    r.support, r.best = "strong", "n log n"                # as if the medians had pointed there strongly
    r.p_low, r.p_high = 1.1, 1.3                           # (no 'none of the three')
    assert r.verdict() == "n log n" and r.reported(check) == "cannot tell" and r.reported(None) == "n log n"
    s = crossover_page.law_sentence(r, check)
    assert s.startswith("cannot tell at this design: the medians point to an n log n law")
    assert "n log n (strong) for a true n^1.5 in 12 of 50 replicates" in s and "95% interval 1.10 to 1.30" in s
    assert not s.endswith(".")
    assert r.reported(_fake_check()) == "n log n" and not crossover_page.law_sentence(r, _fake_check()).startswith("cannot tell")


def _design(profile):
    p = yaml.safe_load((Path(__file__).parents[1] / "params" / f"{profile}.yaml").read_text())
    c = p["chapters"]["crossover"]["parameters"] if "chapters" in p else p["crossover"]["parameters"]
    return c["lengths"], c["trials"], [c["sweeps"] * n for n in c["lengths"]]


@pytest.mark.parametrize("profile", ["smoke", "offline"])
def test_design_check_at_the_chapters_design(profile):
    """At the profile's lengths, chains and budgets in sweeps, every default truth (20 replicates):
    a wrong verdict with strong support in at most 3, n^2 named in at least 14, and n^1.5 never named.
    (This replaces test_semantics' 'each law named in 40 of 50': with free offsets and a power law to
    beat, a true n or n log n is often 'cannot tell' at a factor of 8 in n, which is what the design
    can say; the old rule's confident names were wrong for misspecified truths.)"""
    lengths, trials, budgets = _design(profile)
    check = growth.design_check(lengths, trials, budgets, replicates=20, seed=11, n_boot=150).set_index("truth")
    assert (check["wrong, strong"] <= 3).all(), check
    assert check.loc["n^2", "right"] >= 14
    assert check.loc["n^1.5", "wrong"] <= 3


def test_caveat_and_needed_range():
    text = crossover_page.caveat(REVIEW)
    assert "n = 6 and 48" in text and "1.56" in text and "1.26" in text and not text.endswith(".")
    table = growth.needed_range(20, factors=(8,), replicates=3, n_boot=50)
    assert list(table.columns) == ["factor", "lengths", "n named", "n log n named", "replicates", "n reliable",
                                   "n log n reliable", "tells them apart"]
    assert table.lengths[0] == [6, 10, 17, 29, 48]
