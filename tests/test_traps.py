"""Trap detection on planted trajectories, and trap classification by score margins."""
import numpy as np
import torch

from textglauber import exact, margins, traps
from textglauber.chain import ChainRun, ChainSpec


def _walk(rng, steps, d=16):
    return rng.normal(size=(steps, d))


def test_a_planted_trap_is_found_with_its_exact_span():
    rng = np.random.default_rng(0)
    emb = _walk(rng, 2001)
    emb[700:1450] = emb[700]                       # constant from record 700 to 1449
    steps = np.arange(2001)
    c = traps.consecutive_drift(emb[:, None, :])[:, 0]
    found = traps.detect(steps, c, window=300, threshold=0.12)
    assert found == [(700, 1449)]


def test_recording_every_k_steps_keeps_step_units():
    rng = np.random.default_rng(1)
    emb = _walk(rng, 401)
    emb[100:250] = emb[100]
    steps = np.arange(401) * 10
    c = traps.consecutive_drift(emb[:, None, :])[:, 0]
    assert traps.detect(steps, c, window=300, threshold=0.12) == [(1000, 2490)]


def test_no_flat_segment_no_trap():
    rng = np.random.default_rng(2)
    emb = _walk(rng, 3000)
    c = traps.consecutive_drift(emb[:, None, :])[:, 0]
    assert c[1:].min() > 0.12
    assert traps.detect(np.arange(3000), c, window=300, threshold=0.12) == []


def test_catalogue_classifies_an_all_argmax_state_as_perfect(small_scorer):
    states = torch.as_tensor(exact.enumerate_states(small_scorer.vocab.ids.numpy(), 3))
    gaps = margins.score_gaps(small_scorer, states)
    perfect = states[(gaps > 0).all(1)][0].numpy()
    other = states[(gaps <= 0).any(1)][0].numpy()
    rng = np.random.default_rng(3)
    # chain 0 sits in the perfect state, chain 1 in a non-argmax state, between random moves
    seq = rng.integers(0, 3, size=(900, 2, 3))
    for r in range(1, 900):                        # moves always change the state
        for b in range(2):
            while (seq[r, b] == seq[r - 1, b]).all():
                seq[r, b] = rng.integers(0, 3, size=3)
    ids = small_scorer.vocab.ids.numpy()[seq]
    ids[200:700, 0] = perfect
    ids[300:800, 1] = other
    run = ChainRun(steps=np.arange(900), states=ids, gaps=None, sites=None,
                   spec=ChainSpec(temperature=0.5, steps=899), seed=0)
    vocab_ids = np.sort(small_scorer.vocab.ids.numpy())
    index = exact.ExactChain(states=exact.enumerate_states(vocab_ids, 3), kernel=None, free=[0, 1, 2],
                             vocab_ids=vocab_ids).index(ids)
    emb = np.eye(27)[index]                        # one-hot state embedding: drift 1 for any move
    cat = traps.catalogue(run, emb, small_scorer, window=100, threshold=0.12).set_index("chain")
    assert cat.loc[0, "type"] == "perfect" and cat.loc[0, "state"] == perfect.tolist()
    assert cat.loc[1, "type"] == "approximate" and cat.loc[1, "state"] == other.tolist()
    assert (cat.loc[0, "start"], cat.loc[0, "end"]) == (200, 699)
    expected = 1 / margins.escape_bound(float(gaps[(gaps > 0).all(1)][0].min()), 3, 0.5)
    assert np.isclose(cat.loc[0, "predicted escape time (steps)"], expected)
