"""Precision policy: the measuring chapters load float32 weights on every device, every engine
mode samples from one float64 softmax, and the incompatibility chapter's precision floor re-scores
the very same rectangles in another dtype."""
import numpy as np
import torch

from textglauber import corpus, models, rectangle
from textglauber.device import measurement_dtype


def test_measuring_chapters_use_float32_unless_told():
    assert measurement_dtype("auto") == "float32" and measurement_dtype(None) == "float32"
    assert measurement_dtype("bfloat16") == "bfloat16"


def test_dtype_floor_rescores_the_same_rectangles():
    spec = {"name": "tiny-mlm", "corpus": "tiny"}
    lm, scorer = models.open_mlm(spec, device="cpu", dtype="float32")
    gen = torch.Generator().manual_seed(0)
    passages = corpus.windows(lm.tokenizer, "tiny", 8, 20, seed=0, vocab=scorer.vocab)
    rects = rectangle.sample(scorer, passages, 30, gen, top_k=20)
    scored = rectangle.score_mlm(scorer, rects).assign(model="tiny-mlm")
    # the round trip through the frame loses nothing: float32 again gives the same R exactly
    same = rectangle.dtype_floor(spec, scored, dtype="float32", device="cpu").iloc[0]
    assert same["max |R difference|"] == 0.0
    again = rectangle.score_mlm(scorer, rectangle.rectangles_of(scored))
    np.testing.assert_array_equal(again.R.to_numpy(), scored.R.to_numpy())
    # bf16 weights move R: the floor is measured, not assumed
    low = rectangle.dtype_floor(spec, scored, dtype="bfloat16", device="cpu").iloc[0]
    assert low["max |R difference|"] > 1e-4
    assert abs(low["mean R (float32)"] - scored.R.mean()) < 1e-12


def test_every_mode_samples_one_float64_conditional(full_scorer):
    """Plain and memo draw by inverse CDF from engine.sampling.cdf_of; jump moves and leave probabilities,
    coupled pairs and the exact kernels use softmax(s / T) in float64. On tiny-MLM rows at the
    profiles' temperatures down to 0.1, the sampler's table is exactly the float64 softmax's
    cumsum (it was a float32 softmax, 1e-8 to 1e-6 away in TV), the chance that a plain step
    keeps the current token is one minus the jump mode's leave probability to 1e-14, and a
    plain chain's first step is the float64 inverse-CDF draw from its row."""
    from textglauber import engine

    gen = torch.Generator().manual_seed(0)
    v = full_scorer.vocab
    x = v.ids[torch.randint(v.size, (64, 12), generator=gen)]
    sites = torch.randint(12, (64,), generator=gen)
    s = full_scorer.scores(x, sites)
    pos = v.index_of(x[torch.arange(64), sites])
    for T in (1.0, 0.5, 0.25, 0.1):
        want = torch.cumsum(torch.softmax(s.double() / T, -1), -1)
        old = torch.cumsum(torch.softmax(s.float() / T, -1).double(), -1)
        assert (old - want).abs().max() > 1e-10                    # the check can fail: float32 differs
        cdf = engine.sampling.cdf_of(s, T)
        assert torch.equal(cdf, want)
        lo, hi, tot = engine.keep_interval(cdf, pos)
        keep = (torch.minimum(hi, tot) - lo.clamp(min=0.0)) / tot
        np.testing.assert_allclose(1 - keep.numpy(), engine.leave_probability(s, pos, T).numpy(), atol=1e-14)
        run = engine.run(full_scorer, x, engine.ChainSpec(temperature=T, steps=1, mode="plain"), seed=5)
        g = torch.Generator().manual_seed(5)
        site, u = torch.randint(0, 12, (64,), generator=g), torch.rand(64, generator=g, dtype=torch.float64)
        row = full_scorer.scores(x, site)
        table = torch.cumsum(torch.softmax(row.double() / T, -1), -1)
        drawn = torch.searchsorted(table, (u * table[:, -1]).unsqueeze(1), right=True).squeeze(1).clamp(max=v.size - 1)
        np.testing.assert_array_equal(run.states[-1][np.arange(64), site.numpy()], v.ids[drawn].numpy())
