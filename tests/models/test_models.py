"""Loading, the split LM head, and clear errors for models that cannot be had."""
import time

import numpy as np
import pytest
import torch
from transformers import (AlbertConfig, AlbertForMaskedLM, BertConfig, BertForMaskedLM, DistilBertConfig,
                          DistilBertForMaskedLM, ElectraConfig, ElectraForMaskedLM, ModernBertConfig,
                          ModernBertForMaskedLM, RobertaConfig, RobertaForMaskedLM)

from textglauber import hub, models, vocabulary
from textglauber.models import ModelUnavailableError, scorers

KW = dict(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
ARCHS = {
    "bert": lambda: BertForMaskedLM(BertConfig(**KW)),
    "albert": lambda: AlbertForMaskedLM(AlbertConfig(**KW, embedding_size=16)),
    "roberta": lambda: RobertaForMaskedLM(RobertaConfig(**KW, pad_token_id=1, bos_token_id=0, eos_token_id=2)),
    "distilbert": lambda: DistilBertForMaskedLM(DistilBertConfig(vocab_size=60, dim=32, n_layers=2, n_heads=2, hidden_dim=64)),
    "modernbert": lambda: ModernBertForMaskedLM(ModernBertConfig(**KW, pad_token_id=0, eos_token_id=1, bos_token_id=2,
                                                                  cls_token_id=2, sep_token_id=1)),
    "electra": lambda: ElectraForMaskedLM(ElectraConfig(**KW, embedding_size=16)),
}


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_split_head_equals_full_model_logits(arch):
    torch.manual_seed(0)
    model = ARCHS[arch]().eval()
    enc, transform, decoder = models.head_parts(model)
    ids = torch.randint(5, 60, (3, 9))
    rows, pos = torch.arange(3), torch.tensor([1, 4, 7])
    with torch.no_grad():
        full = model(input_ids=ids).logits[rows, pos]
        hidden = enc(input_ids=ids)[0][rows, pos]
        mine = decoder(transform(hidden))
    torch.testing.assert_close(mine, full, rtol=1e-5, atol=1e-5)


def test_scorer_matches_direct_masked_call(tiny_mlm, full_scorer):
    x = torch.tensor([tiny_mlm.tokenizer("the small dog ran across the green field", add_special_tokens=False)["input_ids"]] * 2)
    sites = torch.tensor([2, 5])
    got = full_scorer.scores(x, sites)
    for b in range(2):
        ids = torch.tensor([tiny_mlm.prefix_ids + x[b].tolist() + tiny_mlm.suffix_ids])
        ids[0, sites[b] + 1] = tiny_mlm.tokenizer.mask_token_id
        with torch.no_grad():
            want = tiny_mlm.model(input_ids=ids).logits[0, sites[b] + 1][full_scorer.vocab.ids]
        torch.testing.assert_close(got[b], want, rtol=1e-5, atol=1e-5)


def test_head_runs_on_b_rows_only(full_scorer):
    """The LM head, and the last layer's feed-forward block, see one row per chain, never B x n
    rows (checked on the shapes through hooks); the layers before see every token."""
    seen = []
    emb, layers = full_scorer._pruned
    hooks = [emb.register_forward_hook(lambda m, i, o: seen.append(("embeddings", tuple(o.shape)))),
             layers[-1].intermediate.register_forward_hook(lambda m, i, o: seen.append(("last ffn", tuple(i[0].shape)))),
             full_scorer.transform.register_forward_hook(lambda m, i, o: seen.append(("head", tuple(i[0].shape))))]
    try:
        x = torch.randint(5, 60, (7, 10))
        out = full_scorer.scores(x, torch.zeros(7, dtype=torch.long))
    finally:
        for h in hooks:
            h.remove()
    hidden = full_scorer.lm.model.config.hidden_size
    assert seen == [("embeddings", (7, 12, hidden)), ("last ffn", (7, hidden)), ("head", (7, hidden))]
    assert out.shape == (7, full_scorer.vocab.size)


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_last_layer_on_masked_rows_equals_the_full_encoder(arch):
    """Where the encoder is BERT-style the pruned last layer gives the full model's logits at the
    masked rows; elsewhere the scorer falls back to the whole encoder."""
    torch.manual_seed(0)
    model = ARCHS[arch]().eval()
    pruned = scorers._row_pruned_layers(model)
    assert (pruned is not None) == (arch in ("bert", "roberta"))
    if pruned is None:
        return
    emb, layers = pruned
    ids = torch.randint(5, 60, (3, 9))
    rows, pos = torch.arange(3), torch.tensor([1, 4, 7])
    with torch.no_grad():
        h = emb(input_ids=ids)
        for layer in layers[:-1]:
            h = layer(h)
        mine = scorers._last_layer_rows(layers[-1], h, rows, pos)
        want = model.base_model(input_ids=ids)[0][rows, pos]
    torch.testing.assert_close(mine, want, rtol=1e-5, atol=1e-5)


class _FullLogitsScorer:
    """The plain way: full B x L x V logits from the model, then pick rows and allowed columns."""

    def __init__(self, inner):
        self.inner, self.vocab = inner, inner.vocab

    @property
    def max_length(self):
        return self.inner.max_length

    def scores(self, states, sites):
        ids = self.inner.frame(states).clone()
        rows = torch.arange(len(sites))
        ids[rows, sites + 1] = self.inner.mask_id
        with torch.no_grad():
            return self.inner.lm.model(input_ids=ids).logits[rows, sites + 1][:, self.vocab.ids]


def test_engine_samples_are_identical_with_and_without_the_optimisations(full_scorer):
    from textglauber.engine import ChainSpec, run

    init = full_scorer.vocab.ids[torch.randint(full_scorer.vocab.size, (6, 9), generator=torch.Generator().manual_seed(4))]
    spec = ChainSpec(temperature=1.0, steps=60, record_every=1)
    fast = run(full_scorer, init, spec, seed=9)
    plain = run(_FullLogitsScorer(full_scorer), init, spec, seed=9)
    assert np.array_equal(fast.states, plain.states)


def test_compiled_engine_agrees_with_the_eager_one(tiny_mlm, full_scorer):
    """torch.compile fuses the pass (not bit for bit): scores agree to float32 rounding and a
    chain with a fixed seed draws the same tokens."""
    from textglauber.engine import ChainSpec, run

    compiled = models.MaskedLMScorer(tiny_mlm, full_scorer.vocab, compile=True)
    g = torch.Generator().manual_seed(3)
    x = full_scorer.vocab.ids[torch.randint(full_scorer.vocab.size, (5, 9), generator=g)]
    sites = torch.randint(9, (5,), generator=g)
    torch.testing.assert_close(compiled.scores(x, sites), full_scorer.scores(x, sites), rtol=1e-5, atol=1e-5)
    spec = ChainSpec(temperature=1.0, steps=30, record_every=1)
    assert np.array_equal(run(compiled, x, spec, seed=2).states, run(full_scorer, x, spec, seed=2).states)
    with pytest.raises(ValueError, match="compile"):
        models.MaskedLMScorer(tiny_mlm, full_scorer.vocab, compile=3)


def test_bf16_weights_give_float32_scores_close_to_the_float32_model(full_scorer):
    """The GPU path's dtype policy, checked on the CPU: bf16 weights, float32 scores, SDPA
    attention, and scores within bf16 rounding of the float32 model's."""
    lm16 = models.load("tiny-mlm", device="cpu", dtype="bfloat16")
    assert lm16.model.dtype == torch.bfloat16 and lm16.model.config._attn_implementation == "sdpa"
    sc16 = models.MaskedLMScorer(lm16, full_scorer.vocab)
    g = torch.Generator().manual_seed(5)
    x = full_scorer.vocab.ids[torch.randint(full_scorer.vocab.size, (4, 10), generator=g)]
    sites = torch.randint(10, (4,), generator=g)
    a, b = sc16.scores(x, sites), full_scorer.scores(x, sites)
    assert a.dtype == torch.float32
    assert (a - b).abs().max() < 0.05 * b.abs().max()
    assert (a.argmax(-1) == b.argmax(-1)).float().mean() >= 0.75


def test_causal_logprob_matches_token_by_token(tiny_causal):
    sc = models.CausalLMScorer(tiny_causal)
    x = torch.tensor([tiny_causal.tokenizer("the cat slept on the wall", add_special_tokens=False)["input_ids"]])
    total = 0.0
    ids = tiny_causal.prefix_ids + x[0].tolist()
    with torch.no_grad():
        for t in range(1, len(ids)):
            logp = torch.log_softmax(tiny_causal.model(input_ids=torch.tensor([ids[:t]])).logits[0, -1], -1)
            total += float(logp[ids[t]])
    assert sc.sequence_logprob(x).item() == pytest.approx(total, abs=1e-4)


def test_tiny_models_are_deterministic(tmp_path, monkeypatch):
    from textglauber.models import tiny

    monkeypatch.setenv("TEXTGLAUBER_CACHE", str(tmp_path / "a"))
    a = models.load("tiny-mlm:steps=5,hidden=16,heads=2,layers=1")
    monkeypatch.setenv("TEXTGLAUBER_CACHE", str(tmp_path / "b"))
    b = models.load("tiny-mlm:steps=5,hidden=16,heads=2,layers=1")
    for (na, pa), (nb, pb) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert na == nb and torch.equal(pa, pb)
    with pytest.raises(ValueError, match="bad option"):
        tiny.parse("tiny-mlm:depth=3")


def test_unknown_model_offline_fails_fast_and_clearly(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.time()
    with pytest.raises(ModelUnavailableError, match="no-such-org/no-such-model.*not in the local"):
        models.load("no-such-org/no-such-model")
    assert time.time() - t0 < 5


def test_unreachable_hub_fails_with_one_message(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "reachable", lambda timeout=3.0: False)
    with pytest.raises(ModelUnavailableError) as exc:
        models.check_available(["bert-base-uncased", "tiny-mlm", "roberta-base"])
    msg = str(exc.value)
    assert "bert-base-uncased" in msg and "roberta-base" in msg and "tiny-mlm" not in msg


def test_missing_local_path_and_unknown_package():
    with pytest.raises(ModelUnavailableError, match="no such local directory"):
        models.resolve("./does/not/exist")
    with pytest.raises(ModelUnavailableError, match="unknown packaged model"):
        models.resolve("package:nothing-like-this")


def test_allowed_vocabulary_filters(tiny_mlm):
    tok = tiny_mlm.tokenizer
    v = vocabulary.allowed_vocabulary(tok)
    assert not set(tok.all_special_ids) & set(v.ids.tolist())
    assert v.size == len(tok) - len(tok.all_special_ids)
    alpha = vocabulary.allowed_vocabulary(tok, alphabetic=True)
    assert "." not in alpha.tokens and "the" in alpha.tokens
    assert v.index_of(torch.tensor(tok.all_special_ids)).eq(-1).all()
    with pytest.raises(ValueError, match="empty"):
        vocabulary.allowed_vocabulary(tok, tokens=[])
    with pytest.raises(ValueError, match="not in the vocabulary"):
        vocabulary.allowed_vocabulary(tok, tokens=["zzzz"])


def test_causal_next_token_logits_match_full_forward(tiny_causal):
    sc = models.CausalLMScorer(tiny_causal)
    x = torch.randint(5, 60, (3, 8))
    sites = torch.tensor([0, 3, 7])
    got = sc.next_token_logits(x, sites)
    ids = torch.cat([torch.tensor(tiny_causal.prefix_ids).expand(3, -1), x], 1)
    with torch.no_grad():
        full = tiny_causal.model(input_ids=ids).logits
    torch.testing.assert_close(got, full[torch.arange(3), sites + len(tiny_causal.prefix_ids) - 1], rtol=1e-5, atol=1e-5)
