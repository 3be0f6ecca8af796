"""Topic scoring and recurrence statistics."""
import numpy as np
import pytest
import torch

from textglauber import chain, topics

LABELLED = [  # written for this test, disjoint from the calibration set
    ("the goalkeeper saved a penalty and his club won the football league", "sport"),
    ("parliament voted on the new law after the prime minister's speech", "politics"),
    ("shares fell on the stock exchange as the central bank raised rates", "finance"),
    ("add the onions to the pan and fry them with garlic and pepper", "food"),
    ("the vaccine protects patients against the virus, the doctors said", "health"),
    ("the telescope detected light from a galaxy billions of years old", "science"),
]


@pytest.fixture(scope="module")
def minilm_scorer():
    return topics.scorer("embedding:package:all-MiniLM-L6-v2")


def test_embedding_scorer_ranks_the_right_label_first(minilm_scorer):
    p = minilm_scorer([t for t, _ in LABELLED])
    assert p.shape == (len(LABELLED), len(topics.LABELS))
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-9)
    predicted = [topics.LABELS[k] for k in p.argmax(1)]
    assert predicted == [l for _, l in LABELLED]


def test_calibrated_temperature_beats_the_extremes(minilm_scorer):
    cal = topics.calibration_set()
    y = np.array([topics.LABELS.index(l) for l in cal.label])
    cos = minilm_scorer.cosines(cal.text.tolist())

    def nll(t):
        return -np.log(topics._softmax(cos / t)[np.arange(len(y)), y]).mean()
    t = minilm_scorer.temperature
    assert 0.005 < t < 1.0                      # an interior optimum: the set is not separable
    assert nll(t) <= nll(t * 3) and nll(t) <= nll(t / 3)


def test_recurrence_statistics_on_a_known_series():
    steps = np.arange(0, 1000, 100)
    score = np.array([0.05, 0.2, 0.3, 0.05, 0.01, 0.15, 0.02, 0.02, 0.5, 0.4])
    r = topics.recurrence(steps, score, baseline=0.1)
    assert r["crossings"] == 3 and r["crossed"]
    assert (r["first crossing"], r["last crossing"]) == (100.0, 800.0)
    assert r["peak"] == 0.5 and r["end"] == 0.4 and r["share above"] == pytest.approx(0.5)
    flat = topics.recurrence(steps, np.full(10, 0.05), 0.1)
    assert not flat["crossed"] and np.isnan(flat["first crossing"])
    start_above = topics.recurrence(steps[:3], np.array([0.3, 0.3, 0.05]), 0.1)
    assert start_above["crossings"] == 1 and start_above["first crossing"] == 0.0


def test_prefix_conditioned_chain_keeps_its_prefix(tiny_mlm, full_scorer):
    prefix = tiny_mlm.tokenizer("the old teacher said that", add_special_tokens=False)["input_ids"]
    free = full_scorer.vocab.ids[torch.randint(full_scorer.vocab.size, (6, 7), generator=torch.Generator().manual_seed(0))]
    init = torch.cat([torch.tensor(prefix).expand(6, -1), free], 1)
    run = chain.run(full_scorer, init, chain.ChainSpec(temperature=1.0, steps=80, record_every=4,
                                                       prefix_len=len(prefix)), seed=0)
    assert (run.states[:, :, :len(prefix)] == np.array(prefix)).all()
