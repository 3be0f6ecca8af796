"""Models that are not what the profile says are refused at pre-flight, one line each, before any
weights are read (issue 42, item 4): a folder that holds no model, a masked LM as the causal
control, a causal LM as a masked LM, a config.json whose sizes do not fit the weights; and the
loader's own error for a mismatch names the tensors instead of pointing at a log."""
import json
import struct

import pytest
import transformers
from transformers import (BertConfig, BertForMaskedLM, BertForSequenceClassification, BertTokenizer, GPT2Config,
                          GPT2LMHeadModel)

from textglauber import models
from textglauber.bookbuild import preflight as build_preflight
from textglauber.models import ModelMismatchError, ModelUnavailableError, Wanted, loading

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog", "ran", "a", "cat"]
BERT = dict(vocab_size=len(WORDS), hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
            max_position_embeddings=32)


def _tokenizer(tmp):
    (tmp / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    return BertTokenizer(str(tmp / "vocab.txt"))


def _save(model, tok, folder):
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _edit_config(folder, **changes):
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg))


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Tiny model folders, each saved with save_pretrained: good ones and bad ones."""
    root = tmp_path_factory.mktemp("bad_models")
    tok = _tokenizer(root)
    bert = BertForMaskedLM(BertConfig(**BERT))
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=len(WORDS), n_embd=16, n_layer=2, n_head=2, n_positions=32,
                                      bos_token_id=2, eos_token_id=3))
    out = {"empty": root / "empty", "bert": _save(bert, tok, root / "bert"), "gpt2": _save(gpt2, tok, root / "gpt2"),
           "wide": _save(bert, tok, root / "wide"), "deep": _save(bert, tok, root / "deep"),
           "classifier": _save(BertForSequenceClassification(BertConfig(**BERT, num_labels=2)), tok, root / "cls")}
    out["empty"].mkdir()
    (out["empty"] / "README.md").write_text("the weights will go here\n")
    _edit_config(out["wide"], hidden_size=32)          # the weights are 16 wide
    _edit_config(out["deep"], num_hidden_layers=3)     # the weights hold 2 layers
    return {k: str(v) for k, v in out.items()}


@pytest.fixture
def no_weights(monkeypatch):
    """Any attempt to load weights or a tokenizer fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("from_pretrained was called: weights were loaded before the check")

    for cls in (transformers.AutoModelForMaskedLM, transformers.AutoModelForCausalLM, transformers.AutoModel,
                transformers.AutoModelForSequenceClassification, transformers.AutoTokenizer,
                transformers.PreTrainedModel):
        monkeypatch.setattr(cls, "from_pretrained", refuse)


def _one_line(exc) -> str:
    msg = str(exc.value)
    assert "\n" not in msg, msg
    return msg


def test_a_folder_without_a_model_is_refused(folders, no_weights):
    with pytest.raises(ModelMismatchError) as exc:
        models.check_models([Wanted(folders["empty"], "mlm", "bounds models")])
    msg = _one_line(exc)
    assert "should be a masked LM" in msg and "not a model folder: no config.json" in msg
    assert "README.md" in msg and "bounds models" in msg


def test_a_masked_lm_as_the_causal_control_is_refused(folders, no_weights):
    with pytest.raises(ModelMismatchError) as exc:
        models.check_models([Wanted(folders["bert"], "causal", "incompatibility control")])
    msg = _one_line(exc)
    assert "should be a causal LM, but it is a masked LM (BertForMaskedLM)" in msg


def test_a_causal_lm_as_a_masked_lm_is_refused(folders, no_weights):
    with pytest.raises(ModelMismatchError) as exc:
        models.check_models([Wanted(folders["gpt2"], "mlm", "incompatibility models")])
    assert "should be a masked LM, but it is a causal LM (GPT2LMHeadModel)" in _one_line(exc)


def test_a_config_wider_than_its_weights_is_refused(folders, no_weights):
    with pytest.raises(ModelMismatchError) as exc:
        models.check_models([Wanted(folders["wide"], "mlm", "bounds models")])
    msg = _one_line(exc)
    assert "config.json does not match its weights" in msg
    assert "hidden_size is 32" in msg and "word_embeddings.weight in model.safetensors is 10 x 16" in msg


def test_a_config_with_more_layers_than_its_weights_is_refused(folders, no_weights):
    with pytest.raises(ModelMismatchError) as exc:
        models.check_models([Wanted(folders["deep"], "mlm")])
    assert "num_hidden_layers is 3, but model.safetensors holds 2 layers" in _one_line(exc)


def test_good_folders_pass_in_their_roles(folders, no_weights):
    models.check_models([Wanted(folders["bert"], "mlm"), Wanted(folders["gpt2"], "causal"),
                         Wanted(folders["classifier"], "classifier")])


def test_sentence_and_nli_roles(folders, no_weights):
    with pytest.raises(ModelMismatchError) as exc:
        models.check_models([Wanted(folders["bert"], "sentence", "traps model embedder")])
    assert "not a sentence-transformers folder (no modules.json)" in _one_line(exc)
    with pytest.raises(ModelMismatchError) as exc:
        models.check_models([Wanted(folders["classifier"], "nli", "basins topic_scorer")])
    assert "have no 'entailment'" in _one_line(exc)


def test_roles_come_from_the_chapter_parameters():
    prm = {"models": [{"name": "a"}], "control": {"name": "b", "kind": "causal"},
           "model": {"name": "c", "embedder": "sentence:d"}, "topic_scorer": "nli:e", "seq_len": 4}
    got = {(w.name, w.role) for w in models.wanted_models(prm, "ch")}
    assert got == {("a", "mlm"), ("b", "causal"), ("c", "mlm"), ("d", "sentence"), ("e", "nli")}
    assert {(w.name, w.role) for w in models.wanted_models({"topic_scorer": "embedding:package:x"})} == {
        ("package:x", "sentence")}


def test_preflight_refuses_each_bad_model_with_one_line_before_any_load(folders, monkeypatch, no_weights):
    chapters = {
        "incompatibility": {"models": [{"name": folders["gpt2"]}, {"name": folders["bert"]}],
                            "control": {"name": folders["bert"], "kind": "causal"}},
        "bounds": {"models": [{"name": folders["empty"]}, {"name": folders["wide"]}]},
    }
    monkeypatch.setattr(build_preflight.P, "chapter_parameters", lambda profile, ch, *a, **k: dict(chapters[ch]))
    with pytest.raises(SystemExit) as exc:
        build_preflight.preflight("fake", list(chapters))
    lines = str(exc.value).splitlines()[1:]
    assert len(lines) == 4, lines
    assert any(folders["gpt2"] in ln and "should be a masked LM, but it is a causal LM" in ln for ln in lines)
    assert any(folders["bert"] in ln and "incompatibility control" in ln and "is a masked LM" in ln for ln in lines)
    assert any(folders["empty"] in ln and "no config.json" in ln for ln in lines)
    assert any(folders["wide"] in ln and "hidden_size is 32" in ln for ln in lines)


def test_skipped_chapters_ignore_missing_models_but_not_wrong_ones(folders, no_weights, tmp_path):
    models.check_models([Wanted(str(tmp_path / "not-there"), "mlm", required=False)])
    with pytest.raises(ModelUnavailableError, match="no such local directory"):
        models.check_models([Wanted(str(tmp_path / "not-there"), "mlm")])
    with pytest.raises(ModelMismatchError, match="is a causal LM"):
        models.check_models([Wanted(folders["gpt2"], "mlm", required=False)])


def test_load_refuses_before_reading_weights(folders, no_weights):
    with pytest.raises(ModelMismatchError, match="should be a causal LM, but it is a masked LM"):
        models.load(folders["bert"], kind="causal", device="cpu")
    with pytest.raises(ModelMismatchError, match="not a model folder"):
        models.load(folders["empty"], device="cpu")


def test_loader_names_the_mismatch_in_one_line(folders, monkeypatch):
    """Where a mismatch gets past the cheap check, transformers' report is in the error, not a log."""
    monkeypatch.setattr(loading, "folder_problems", lambda src, role: [])
    with pytest.raises(ModelMismatchError) as exc:
        models.load(folders["wide"], device="cpu", dtype="float32")
    msg = _one_line(exc)
    assert "tensor(s) differ in shape" in msg and "checkpoint 10 x 16, config 10 x 32" in msg
    assert "look at the above report" not in msg
    with pytest.raises(ModelMismatchError) as exc:
        models.load(folders["deep"], device="cpu", dtype="float32")
    assert "not in the checkpoint and would be random (bert.encoder.layer.2.* (16))" in _one_line(exc)
    with pytest.raises(ModelMismatchError) as exc:
        models.load(folders["gpt2"], device="cpu")
    assert "cannot be loaded as a masked LM: Unrecognized configuration class" in _one_line(exc)


def test_a_truncated_safetensors_file_is_refused(folders, tmp_path, no_weights):
    import shutil

    folder = tmp_path / "cut"
    shutil.copytree(folders["bert"], folder)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[:len(data) // 2])
    with pytest.raises(ModelMismatchError, match="model.safetensors is cut short"):
        models.check_models([Wanted(str(folder), "mlm")])


def _gguf(path, arch: str):
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b
    kv = s("general.type") + struct.pack("<I", 8) + s("model") + s("general.architecture") + struct.pack("<I", 8) + s(arch)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv)


def test_a_gguf_file_is_read_for_its_architecture(tmp_path, no_weights):
    _gguf(tmp_path / "m.gguf", "llama")
    src = models.ModelSource(name="x", path=str(tmp_path), is_hub=False,
                             load_kwargs={"model": {"gguf_file": "m.gguf"}})
    assert models.folder_problems(src, "causal") == []
    assert models.folder_problems(src, "mlm") == ["it is a causal LM in GGUF (llama, m.gguf)"]
    gone = models.ModelSource(name="y", path=str(tmp_path), is_hub=False, load_kwargs={"model": {"gguf_file": "n.gguf"}})
    assert "has no n.gguf" in models.folder_problems(gone, "causal")[0]


def test_a_path_that_is_no_hub_id_says_so():
    with pytest.raises(ModelUnavailableError, match="no such local directory .* not a Hugging Face hub id"):
        models.resolve("_build/no-such-folder/bert-base-uncased")


@pytest.mark.parametrize("name,role", [("package:antiberty", "mlm"), ("package:rxnfp-bert", "mlm"),
                                       ("package:rxnmapper-albert", "mlm"), ("package:smollm2-135m", "causal"),
                                       ("package:all-MiniLM-L6-v2", "sentence")])
def test_packaged_models_pass_in_their_roles(name, role, no_weights):
    try:
        src = models.resolve(name)
    except ModelUnavailableError as exc:
        pytest.skip(str(exc))
    assert models.folder_problems(src, role) == []


def test_a_cached_hub_model_is_checked_in_its_snapshot(folders, monkeypatch, tmp_path, no_weights):
    """A hub name found in the local cache is checked like a folder: its snapshot holds a GPT-2."""
    import shutil

    import huggingface_hub.constants as hc

    cache = tmp_path / "hub"
    repo = cache / "models--someone--tiny-gpt2"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(folders["gpt2"], repo / "snapshots" / commit)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(cache))
    models.check_models([Wanted("someone/tiny-gpt2", "causal")])
    with pytest.raises(ModelMismatchError, match="'someone/tiny-gpt2' .*should be a masked LM, but it is a causal LM"):
        models.check_models([Wanted("someone/tiny-gpt2", "mlm", "bounds models")])


def test_a_window_longer_than_the_model_takes_is_refused_from_its_config():
    """seq_len 1000 on the tiny MLM (64 positions) ran to the notebook and failed there with a
    traceback; the pre-flight reads max_position_embeddings from config.json and names the key."""
    from textglauber.models import Wanted, length_problems

    lines = length_problems([Wanted("tiny-mlm", "mlm")], 1000, "seq_len")
    assert len(lines) == 1 and "seq_len = 1000" in lines[0] and "at most 64 positions" in lines[0]
    assert length_problems([Wanted("tiny-mlm", "mlm")], 62, "seq_len") == []
    assert length_problems([Wanted("tiny-mlm", "mlm")], 63, "seq_len") != []
