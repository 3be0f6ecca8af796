"""Precision policy: the measuring chapters load float32 weights on every device, and the
incompatibility chapter's precision floor re-scores the very same rectangles in another dtype."""
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
