"""The label contrast when chains remember their seed (issue 63, item 4). A stand-in whose words
of one label attract words of the same label (coupling J) keeps a chain near its seeded topic for
the whole run, while politics, with a bias of its own, is the unique stationary attractor. The
contrast must find politics there (power), not find it in a flat model, and not find it where a
seeded topic is the attractor (safety): ten runs each, distinct seeds. Then the stand-in sampler
against the engine, the seed-memory table and the power check."""
import numpy as np
import pandas as pd
import pytest
import torch

from textglauber import basinnull
from textglauber.engine import ChainSpec, run

from test_basinnull import LABELS, WORDS, LabelBias

pytestmark = pytest.mark.slow          # minutes together: `pytest -m "not slow"` leaves them out

# Seed memory leaves the topic-seeded chains with nothing to say (politics and the never-seeded
# labels are both absent from them), so the power comes from the random null chains: many of them,
# long enough (n = 64) that the planted bias, not the start's fluctuation, decides where they settle.
DESIGN = basinnull.Design(labels=("politics", "sport", "food", "art", "music", "travel"), basin_label="politics",
                          seed_topics=("sport", "food", "art"), seeds_per_topic=2, chains_per_seed=2,
                          null_seeds=("shuffled", "random"), null_chains=96, seq_len=64, steps=640, score_every=32)
RUNS = 10


def special_runs(bias: dict, coupling: float, first_seed: int) -> int:
    """How many of RUNS stand-in runs (one generator each, seeds first_seed, first_seed + 1, ...)
    say politics is special."""
    found = 0
    for seed in range(first_seed, first_seed + RUNS):
        rng = np.random.default_rng(seed)
        chains = basinnull.standin_chains(DESIGN, bias, coupling, rng)
        c = basinnull.label_contrast(chains, list(DESIGN.labels), "politics", rng=rng)
        found += basinnull.special(c, "stand-in").verdict is True
    return found


@pytest.mark.parametrize("bias, coupling", [(0.6, 12.0), (2.0, 6.0)])
def test_politics_is_found_special_though_the_chains_remember_their_seed(bias, coupling):
    assert special_runs({"politics": bias}, coupling, 100) >= 9


def test_a_flat_model_with_seed_memory_is_rarely_found_special():
    assert special_runs({}, 12.0, 200) <= 1


def test_a_seeded_topic_as_the_attractor_does_not_make_politics_special():
    assert special_runs({"sport": 2.0}, 6.0, 300) <= 1


def test_the_stand_in_sampler_agrees_with_the_engine():
    """The library's stand-in (labels sampled, then a uniform word) and the engine running the
    test's LabelBias with the same coupling give the same law after a few sweeps."""
    n, chains, steps = 4, 600, 40
    design = basinnull.Design(tuple(LABELS), "politics", ("sport",), 1, 1, (), 0, n, steps, steps)
    bias = {"politics": 1.0, "food": 0.5}
    init = np.full((chains, n), LABELS.index("sport") * WORDS)
    b = np.array([bias.get(l, 0.0) for l in LABELS])
    _, mine = basinnull.standin_glauber(init, b, 3.0, design, np.random.default_rng(0))
    r = run(LabelBias(bias, n, coupling=3.0), torch.as_tensor(init), ChainSpec(temperature=1.0, steps=steps,
                                                                           record_every=steps), seed=0)
    for k in range(len(LABELS)):
        a, e = (mine[-1] // WORDS == k).mean(), (r.states[-1] // WORDS == k).mean()
        assert abs(a - e) < 4 * np.sqrt(max(a * (1 - a), 1e-3) / chains), (LABELS[k], a, e)


def test_seed_memory_shows_shuffled_seeds_carry_their_topic():
    chains = basinnull.standin_chains(DESIGN, {}, 12.0, 7)
    m = basinnull.seed_memory(chains).set_index("kind")
    assert m.loc["topic", "own topic"] > 0.9 and m.loc["shuffled", "difference"] > 0.5
    flat = basinnull.seed_memory(basinnull.standin_chains(DESIGN, {}, 0.0, 7)).set_index("kind")
    assert abs(flat.loc["shuffled", "difference"]) < 0.2


def test_power_counts_runs_and_the_verdict_needs_it():
    small = basinnull.Design(DESIGN.labels, "politics", DESIGN.seed_topics, 2, 2, ("random",), 24, 16, 160, 16)
    p = basinnull.power(small, bias=2.0, coupling=0.0, runs=3, rng=0)
    assert p.runs == 3 and 0 <= p.found <= 3 and p.rate == p.found / 3
    assert basinnull.power(small, bias=2.0, coupling=0.0, runs=3, rng=0) == p        # one seeded generator
    assert basinnull.match_coupling(small, np.nan, 0) == max(basinnull.COUPLINGS)
    assert basinnull.match_coupling(small, 0.0, 0) == 0.0


def test_the_memory_sentence_counts_from_the_table_and_reads_for_every_sign():
    from textglauber.pages import basins as page

    def memory(diff):
        return pd.DataFrame([{"model": "m", "kind": "topic", "chains": 6, "own topic": 0.5,
                              "random on same labels": 0.1, "difference": 0.4},
                             {"model": "m", "kind": "shuffled", "chains": 4, "own topic": 0.1 + diff,
                              "random on same labels": 0.1, "difference": diff}])
    text = page.memory_sentence(memory(0.2), "m")
    assert "topic seeds are above the baseline on their own seed topic in 50%" in text
    assert "against 10% for random seeds" in text
    assert "20 percentage points more often than random seeds" in text
    assert "less often than" in page.memory_sentence(memory(-0.05), "m")
    assert "as often as random seeds" in page.memory_sentence(memory(0.0), "m")
    assert page.memory_sentence(memory(0.2), "other") == ""
