"""Tokenizer families of the paper profile (WordPiece, byte-level BPE in RoBERTa, GPT-2 and
ModernBERT layouts), built offline as the stand-ins build them: allowed vocabularies, text as it
sits inside a text, display text and planted drift states."""
import pytest
import torch

from textglauber import corpus, margins, standins, topics, vocabulary

TEXTS = corpus.texts("tiny") * 3 + [
    "Café au lait — naïve résumé, “quoted” façade and piñata.", "Zoë's über-cool jalapeño crème brûlée.",
    "It's a dog's life; isn't it? The dog ran!", "Running, jumping and swimming are sports people enjoy."] * 5


@pytest.fixture(scope="module")
def toks(tmp_path_factory):
    work = tmp_path_factory.mktemp("tok")
    return {arch: standins.train_tokenizer(arch, TEXTS, work / arch) for arch in ("bert", "roberta", "modernbert", "gpt2")}


def test_every_added_special_token_is_excluded(toks):
    tok = toks["modernbert"]
    v = vocabulary.allowed_vocabulary(tok)
    for t in ("|||IP_ADDRESS|||", "<|padding|>", "<|endoftext|>", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"):
        assert t not in v.tokens, t
        assert tok.convert_tokens_to_ids(t) in vocabulary.special_ids(tok)
    # ordinary words stay
    assert "Ġthe" in v.tokens


def test_byte_level_pieces_that_are_not_text_are_excluded(toks):
    for arch in ("roberta", "modernbert", "gpt2"):
        tok = toks[arch]
        partial = [i for i in range(len(tok)) if "\ufffd" in tok.decode([i])]
        assert partial, arch                       # the byte alphabet has them: the check can fail
        v = vocabulary.allowed_vocabulary(tok)
        assert not set(partial) & set(v.ids.tolist()), arch
        assert all("\ufffd" not in tok.decode([int(i)]) for i in v.ids)


def test_whole_words_work_for_every_family(toks):
    for arch, tok in toks.items():
        v = vocabulary.allowed_vocabulary(tok, whole_words=True)
        ids = vocabulary.encode(tok, "The dog ran to the park")
        assert bool(v.contains(torch.tensor(ids)).all()), arch     # a text's first word counts as whole
        w = corpus.windows(tok, "tiny", 4, 10, seed=0, vocab=v)
        assert w.shape == (10, 4)
    bpe = toks["roberta"]
    assert bpe.convert_ids_to_tokens(vocabulary.encode(bpe, "The dog"))[0] == "ĠThe"


def test_seeds_are_natural_text_joined_as_text(toks):
    texts = topics.seed_texts()
    assert all(t[0].isupper() and " ." not in t for t in texts.text)         # natural, cased text
    for arch, tok in toks.items():
        ids, _, raw = topics.seed_states(tok, ["health"], 2, 40)
        for row, text in zip(ids, raw):
            shown = vocabulary.decode(tok, row)
            assert (" ".join([text] * 4)).lower().startswith(shown.lower()[:len(shown) - 8]), (arch, shown)
            assert ".The" not in shown and ".the" not in shown, (arch, shown)


def test_display_text_cleans_wordpiece_spacing(toks):
    tok = toks["bert"]
    ids = vocabulary.encode(tok, "It's a dog's life, isn't it?")
    assert vocabulary.decode(tok, ids) == "it's a dog's life, isn't it?"
    assert tok.decode(ids) != vocabulary.decode(tok, ids)          # the raw decode is what the pages showed


def test_drift_token_is_one_token_and_planted_states_round_trip(toks):
    tok = toks["bert"]
    bang = vocabulary.single_token(tok, "!")
    with pytest.raises(ValueError, match="not a token"):
        vocabulary.single_token(tok, "!!")
    with pytest.raises(ValueError, match="special"):
        vocabulary.single_token(tok, "[MASK]")
    passages = torch.tensor([vocabulary.encode(tok, "the electroencephalography results were unbelievably surprising")] * 4)
    assert any(t.startswith("##") for t in tok.convert_ids_to_tokens(passages[0].tolist()))
    gen = torch.Generator().manual_seed(0)
    planted = margins.states_with_k(passages, bang, 3, 50, gen, tokenizer=tok)
    assert all(vocabulary.round_trips(tok, x) for x in planted)
    assert ((planted == bang).sum(1) == 3).all()
    # without the tokenizer some planted states are not what the tokenizer would produce
    loose = margins.states_with_k(passages, bang, 3, 50, torch.Generator().manual_seed(0))
    assert not all(vocabulary.round_trips(tok, x) for x in loose)
    # a token that cannot sit anywhere in these passages is refused
    every = torch.tensor([vocabulary.encode(tok, "electroencephalography overcommercialization")] * 2)
    with pytest.raises(ValueError, match="would produce"):
        margins.states_with_k(every, bang, 8, 5, gen, tokenizer=tok, tries=20)


def test_batched_encoding_matches_one_by_one(toks):
    texts = ["The dog ran.", " Already spaced.", "Zoë's crème brûlée!"]
    for arch, tok in toks.items():
        assert vocabulary.encode_many(tok, texts) == [vocabulary.encode(tok, t) for t in texts], arch
