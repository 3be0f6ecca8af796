"""Training the offline English MLM: it learns, it is reproducible (fixed steps, seeded), it resumes."""
import json
from dataclasses import asdict

import pytest
import torch
from safetensors.torch import load_file

from textglauber import models, train_mlm, vocabulary
from textglauber.train_mlm import PRESETS, Preset

pytestmark = pytest.mark.slow          # minutes together: `pytest -m "not slow"` leaves them out

# the tiny preset, shortened: 4 checkpoints (steps 6, 12, 18, 24) and a resumable state every 5 steps
TINY = Preset(**{**asdict(PRESETS["tiny"]), "steps": {"scratch": 24}, "save_every": 5})


def weights(folder):
    return load_file(str(folder / "final" / "model.safetensors"))


def same_weights(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


class Interrupt(Exception):
    pass


def interrupt_at(n):
    def hook(start, step):
        if step == n:
            raise Interrupt
    return hook


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """Three uninterrupted runs: seed 0 twice, seed 1 once."""
    root = tmp_path_factory.mktemp("fresh")
    runs = {}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        m = train_mlm.train(TINY, out=root / name, seed=seed, progress=False)
        runs[name] = (m, weights(root / name))
    return runs


def test_fixed_steps_and_same_seed_give_the_same_weights(fresh):
    (ma, wa), (mb, wb), (mc, wc) = fresh["a"], fresh["b"], fresh["c"]
    assert ma["steps"] == mb["steps"] == mc["steps"] == {"scratch": 24}
    assert [c["step"] for c in ma["runs"][0]["checkpoints"]] == [6, 12, 18, 24]
    assert same_weights(wa, wb)
    assert ma["final"] == mb["final"]
    assert [c["tokens_seen"] for c in ma["runs"][0]["checkpoints"]] == [c["tokens_seen"] for c in mb["runs"][0]["checkpoints"]]
    # another seed: other initial weights, batch order and masks
    assert not same_weights(wa, wc)


def test_killed_training_resumes_to_the_uninterrupted_weights(fresh, tmp_path):
    # stopped at step 17: the last saved state is step 15 (save_every), mid-epoch, not a checkpoint
    with pytest.raises(Interrupt):
        train_mlm.train(TINY, out=tmp_path / "r", seed=0, progress=False, on_step=interrupt_at(17))
    partial = tmp_path / "r.partial"
    assert torch.load(partial / "scratch" / "state.pt", weights_only=False)["step"] == 15
    assert not (tmp_path / "r").exists()
    m = train_mlm.train(TINY, out=tmp_path / "r", seed=0, progress=False)
    run, ref = m["runs"][0], fresh["a"][0]["runs"][0]
    assert run["sessions"] == 2 and run["steps"] == 24
    assert same_weights(weights(tmp_path / "r"), fresh["a"][1])
    assert m["final"] == fresh["a"][0]["final"]
    for mine, theirs in zip(run["checkpoints"], ref["checkpoints"]):
        assert {k: mine[k] for k in ("step", "tokens_seen", "top1", "heldout_loss")} == \
               {k: theirs[k] for k in ("step", "tokens_seen", "top1", "heldout_loss")}
    assert not partial.exists() and not (tmp_path / "r" / "scratch" / "state.pt").exists()


def test_a_partial_run_with_other_settings_is_not_resumed(fresh, tmp_path):
    with pytest.raises(Interrupt):
        train_mlm.train(TINY, out=tmp_path / "r", seed=0, progress=False, on_step=interrupt_at(13))
    m = train_mlm.train(TINY, out=tmp_path / "r", seed=1, progress=False)
    assert m["runs"][0]["sessions"] == 1
    assert same_weights(weights(tmp_path / "r"), fresh["c"][1])


def test_time_guard_is_an_error_that_keeps_the_state(fresh, tmp_path):
    with pytest.raises(train_mlm.TrainingTimeGuard, match="run the same command again"):
        train_mlm.train(TINY, out=tmp_path / "g", seed=0, progress=False, max_hours=1e-9)
    m = train_mlm.train(TINY, out=tmp_path / "g", seed=0, progress=False)
    assert m["runs"][0]["sessions"] == 2
    assert same_weights(weights(tmp_path / "g"), fresh["a"][1])


def test_ensure_resumes_a_partial_run_and_reuses_a_finished_one(fresh, tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTGLAUBER_MODELS", str(tmp_path))
    monkeypatch.setitem(PRESETS, "tiny", TINY)
    with pytest.raises(Interrupt):
        train_mlm.train("tiny", seed=0, progress=False, on_step=interrupt_at(8))
    out = train_mlm.ensure("tiny", progress=False)
    m = json.loads((out / "manifest.json").read_text())
    assert m["runs"][0]["sessions"] == 2 and m["preset"] == "tiny"
    assert same_weights(weights(out), fresh["a"][1])
    stamp = (out / "manifest.json").stat().st_mtime_ns
    assert train_mlm.ensure("tiny", progress=False) == out
    assert (out / "manifest.json").stat().st_mtime_ns == stamp
    # the preset changed (other step count): the old model is stale and is trained again
    monkeypatch.setitem(PRESETS, "tiny", Preset(**{**asdict(TINY), "steps": {"scratch": 8}}))
    train_mlm.ensure("tiny", progress=False)
    assert json.loads((out / "manifest.json").read_text())["steps"] == {"scratch": 8}


def test_batch_stream_resumes_at_its_cursor():
    pieces = [[1] * (3 + k % 7) for k in range(37)]
    full = train_mlm.batches(pieces, 4, seed=3)
    ref = [next(full) for _ in range(25)]        # 10 batches an epoch: crosses two epoch ends
    cursor = ref[12][0]
    tail = train_mlm.batches(pieces, 4, 3, *cursor)
    assert [next(tail) for _ in range(12)] == ref[13:]
    # every epoch uses every piece once, and epochs differ
    epoch0 = sorted(i for b in train_mlm.epoch_batches([len(p) for p in pieces], 4, 3, 0) for i in b)
    assert epoch0 == list(range(37))
    assert train_mlm.epoch_batches([len(p) for p in pieces], 4, 3, 0) != train_mlm.epoch_batches(
        [len(p) for p in pieces], 4, 3, 1)


def test_few_steps_lower_heldout_loss_and_load_like_any_mlm(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTGLAUBER_MODELS", str(tmp_path))
    preset = Preset(corpus="lee", tokenizer="minilm", starts=("minilm",), steps={"minilm": 16},
                    max_len=48, batch=8, lr=5e-4, checkpoints=2, heldout_frac=0.1, eval_chunks=24, ppl_chunks=2)
    m = train_mlm.train(preset, out=tmp_path / "lee-mini", progress=False)
    run = m["runs"][0]
    assert run["steps"] == 16 and len(run["checkpoints"]) == 2 and m["steps"] == {"minilm": 16}
    assert run["cpu_seconds"] > 0 and run["seconds"] > 0
    # the eval set is fixed (same masks), so any drop is learning, not noise
    assert run["final"]["heldout_loss"] < run["initial"]["heldout_loss"] - 0.2
    assert run["final"]["top1"] > run["initial"]["top1"]
    saved = json.loads((tmp_path / "lee-mini" / "manifest.json").read_text())
    assert saved["chosen"] == "minilm" and saved["corpus"]["heldout_documents"] == 30
    d = train_mlm.describe("lee-mini")
    assert d["steps"] == 16 and d["CPU minutes"] is not None
    # the trained model loads through the same loader as any Hugging Face MLM, checkpoints too
    lm = models.load("trained:lee-mini", device="cpu", dtype="float32")
    ck = models.load("trained:lee-mini@minilm/ckpt-1", device="cpu", dtype="float32")
    v = vocabulary.allowed_vocabulary(lm.tokenizer)
    x = torch.tensor([lm.tokenizer("the prime minister said on tuesday that the", add_special_tokens=False)["input_ids"]])
    a = models.MaskedLMScorer(lm, v).scores(x, torch.tensor([2]))
    b = models.MaskedLMScorer(ck, v).scores(x, torch.tensor([2]))
    assert a.shape == (1, v.size) and not torch.allclose(a, b)


def test_origin_note_says_what_text_a_model_of_this_project_read(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTGLAUBER_MODELS", str(tmp_path))
    from textglauber.models import tiny

    assert train_mlm.origin_note("tiny-mlm").startswith(f"`tiny-mlm` is a toy model trained for seconds on "
                                                        f"{len(tiny.corpus_lines())} sentences")
    assert train_mlm.origin_note("bert-base-uncased") == ""
    assert train_mlm.origin_note("trained:english") == "`trained:english` was trained by this project (its manifest could not be read)."
    run = {"start": "scratch", "parameters": 10, "steps": 1200, "seconds": 60, "final": {"top1": 0.5, "top5": 0.7}}
    (tmp_path / "english").mkdir()
    (tmp_path / "english" / "manifest.json").write_text(json.dumps({
        "chosen": "scratch", "runs": [run], "settings": {}, "final": {"top1": 0.5, "top5": 0.7, "pseudo_perplexity": 9.0},
        "corpus": {"train_documents": 3000, "train_tokens": 45000, "heldout_documents": 100}}))
    note = train_mlm.origin_note("trained:english@final")
    assert note.startswith("`trained:english@final` was trained by this project (1,200 steps from the scratch start) on "
                           "3,000 documents (45,000 tokens) of English text shipped with Python packages")
    assert note.endswith("not of English at large.")
