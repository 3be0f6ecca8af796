"""The rectangle statistic against hand computation, explicit joints and a causal LM."""
import numpy as np
import pytest
import torch

from textglauber import corpus, exact, models, rectangle

from conftest import random_joint


def _rects(scorer, tok, count=24, seed=0, n=10):
    passages = corpus.windows(tok, "tiny", n, 40, seed, vocab=getattr(scorer, "vocab", None))
    return rectangle.sample(scorer, passages, count, torch.Generator().manual_seed(seed), top_k=20)


def test_R_equals_hand_computation_from_direct_model_calls(tiny_mlm, full_scorer):
    rects = _rects(full_scorer, tiny_mlm.tokenizer, count=6)
    df = rectangle.score_mlm(full_scorer, rects)
    tok, A = tiny_mlm.tokenizer, full_scorer.vocab.ids

    def logcond(x, site):
        ids = torch.tensor([tiny_mlm.prefix_ids + x + tiny_mlm.suffix_ids])
        ids[0, site + 1] = tok.mask_token_id
        with torch.no_grad():
            logits = tiny_mlm.model(input_ids=ids).logits[0, site + 1][A].double()
        lp = torch.log_softmax(logits, -1)
        return {int(t): float(v) for t, v in zip(A, lp)}

    for r in range(len(rects)):
        x = rects.base[r].tolist()
        i, j = int(rects.i[r]), int(rects.j[r])
        a, b, a2, b2 = x[i], x[j], int(rects.a_prime[r]), int(rects.b_prime[r])
        assert a != a2 and b != b2 and i != j
        xb2 = list(x); xb2[j] = b2
        xa2 = list(x); xa2[i] = a2
        li_b, li_b2, lj_a, lj_a2 = logcond(x, i), logcond(xb2, i), logcond(x, j), logcond(xa2, j)
        path1 = (li_b[a2] - li_b[a]) + (lj_a2[b2] - lj_a2[b])
        path2 = (lj_a[b2] - lj_a[b]) + (li_b2[a2] - li_b2[a])
        assert df.R[r] == pytest.approx(abs(path1 - path2), abs=1e-4)
    assert df.R.mean() > 0.05      # the tiny MLM is incompatible: the test has teeth


def test_replacements_come_from_the_models_top_k(tiny_mlm, full_scorer):
    rects = _rects(full_scorer, tiny_mlm.tokenizer, count=10)
    s = full_scorer.scores(rects.base, rects.i)
    top = full_scorer.vocab.ids[s.topk(21).indices]
    assert all(int(a2) in row.tolist() for a2, row in zip(rects.a_prime, top))


def test_R_is_zero_for_conditionals_of_an_explicit_joint():
    k, n = 4, 4
    sc = exact.JointScorer(np.arange(k), n, random_joint(k, n, seed=3))
    g = torch.Generator().manual_seed(0)
    passages = torch.randint(k, (30, n), generator=g)
    rects = rectangle.sample(sc, passages, 50, g, top_k=3)
    df = rectangle.score_mlm(sc, rects)
    assert df.R.max() < 1e-5
    assert (df.path1.abs() > 1e-3).any()       # the edges themselves are not trivial


def test_R_is_zero_for_the_causal_control(tiny_causal):
    sc = models.CausalLMScorer(tiny_causal)
    passages = corpus.windows(tiny_causal.tokenizer, "tiny", 10, 40, 0)
    rects = rectangle.sample(sc, passages, 30, torch.Generator().manual_seed(0), top_k=20)
    df = rectangle.score_causal(sc, rects)
    assert df.R.max() < 1e-5
    assert (df.path1.abs() > 1e-2).all()


def test_R_scales_as_one_over_temperature(tiny_mlm, full_scorer):
    rects = _rects(full_scorer, tiny_mlm.tokenizer, count=12)
    r1 = rectangle.score_mlm(full_scorer, rects, temperature=1.0).R.to_numpy()
    r2 = rectangle.score_mlm(full_scorer, rects, temperature=2.5).R.to_numpy()
    np.testing.assert_allclose(r2, r1 / 2.5, rtol=1e-4, atol=1e-6)


def test_grid_reduces_to_rectangle_and_vanishes_on_a_joint(tiny_mlm, full_scorer):
    rects = _rects(full_scorer, tiny_mlm.tokenizer, count=3)
    df = rectangle.score_mlm(full_scorer, rects)
    x, i, j = rects.base[0], int(rects.i[0]), int(rects.j[0])
    g2 = rectangle.grid(full_scorer, x, i, j, [int(x[i]), int(rects.a_prime[0])], [int(x[j]), int(rects.b_prime[0])])
    assert g2["R"][0, 1, 0, 1] == pytest.approx(df.R[0], abs=1e-5)
    assert g2["mean_R"] == pytest.approx(df.R[0], abs=1e-5)
    k, n = 4, 3
    sc = exact.JointScorer(np.arange(k), n, random_joint(k, n, seed=1))
    gj = rectangle.grid(sc, torch.tensor([0, 1, 2]), 0, 2, [0, 1, 2, 3], [2, 3, 0, 1])
    assert gj["mean_R"] < 1e-9 and gj["misfit"] < 1e-9
    gm = rectangle.grid(full_scorer, x, i, j, *[rectangle._grid_tokens(full_scorer, x, s, 4, torch.Generator().manual_seed(0), 20) for s in (i, j)])
    assert gm["misfit"] > 1e-3
