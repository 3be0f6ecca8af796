"""Training the offline English MLM: a few steps on a small corpus lower the held-out loss."""
import json

import torch

from textglauber import models, train_mlm, vocabulary
from textglauber.train_mlm import Preset


def test_few_steps_lower_heldout_loss_and_load_like_any_mlm(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTGLAUBER_MODELS", str(tmp_path))
    preset = Preset(corpus="lee", tokenizer="minilm", starts=("minilm",), minutes=None, max_steps=16,
                    max_len=48, batch=8, lr=5e-4, checkpoints=2, heldout_frac=0.1, eval_chunks=24, ppl_chunks=2)
    m = train_mlm.train(preset, out=tmp_path / "lee-mini", progress=False)
    run = m["runs"][0]
    assert run["steps"] == 16 and len(run["checkpoints"]) == 2
    # the eval set is fixed (same masks), so any drop is learning, not noise
    assert run["final"]["heldout_loss"] < run["initial"]["heldout_loss"] - 0.2
    assert run["final"]["top1"] > run["initial"]["top1"]
    saved = json.loads((tmp_path / "lee-mini" / "manifest.json").read_text())
    assert saved["chosen"] == "minilm" and saved["corpus"]["heldout_documents"] == 30
    # the trained model loads through the same loader as any Hugging Face MLM, checkpoints too
    lm = models.load("trained:lee-mini", device="cpu", dtype="float32")
    ck = models.load("trained:lee-mini@minilm/ckpt-1", device="cpu", dtype="float32")
    v = vocabulary.allowed_vocabulary(lm.tokenizer)
    x = torch.tensor([lm.tokenizer("the prime minister said on tuesday that the", add_special_tokens=False)["input_ids"]])
    a = models.MaskedLMScorer(lm, v).scores(x, torch.tensor([2]))
    b = models.MaskedLMScorer(ck, v).scores(x, torch.tensor([2]))
    assert a.shape == (1, v.size) and not torch.allclose(a, b)
