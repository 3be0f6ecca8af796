"""Real pretrained models that install as packages, loaded through the book's own code path."""
import torch

from textglauber import models, vocabulary

REACTION = "Brc1ccccc1.OB(O)c1ccccc1>>c1ccc(-c2ccccc2)cc1"


def test_smiles_tokenizer_keeps_multi_character_tokens():
    lm = models.load("package:rxnmapper-albert", device="cpu", dtype="float32")
    toks = lm.tokenizer.convert_ids_to_tokens(
        lm.tokenizer("O=[N+]([O-])c1ccc(Cl)cc1.BrCC>>X", add_special_tokens=False)["input_ids"])
    assert toks[:6] == ["O", "=", "[N+]", "(", "[O-]", ")"]
    assert "Cl" in toks and "Br" in toks and ">>" in toks
    assert lm.tokenizer("C")["input_ids"] == [lm.tokenizer.cls_token_id, lm.tokenizer.convert_tokens_to_ids("C"),
                                              lm.tokenizer.sep_token_id]


def test_rxnmapper_albert_fills_in_a_masked_reaction():
    """The smallest real MLM restores masked tokens of a Suzuki coupling, the arrow included."""
    lm = models.load("package:rxnmapper-albert", device="cpu", dtype="float32")
    scorer = models.MaskedLMScorer(lm, vocabulary.allowed_vocabulary(lm.tokenizer))
    ids = torch.tensor([lm.tokenizer(REACTION, add_special_tokens=False)["input_ids"]])
    arrow = ids[0].tolist().index(lm.tokenizer.convert_tokens_to_ids(">>"))
    s = scorer.scores(ids, torch.tensor([arrow]))
    assert lm.tokenizer.convert_ids_to_tokens(int(scorer.vocab.ids[s.argmax()])) == ">>"
    n = ids.shape[1]
    all_sites = scorer.scores(ids.repeat(n, 1), torch.arange(n))
    restored = (scorer.vocab.ids[all_sites.argmax(-1)] == ids[0]).float().mean()
    assert restored > 0.85           # a random 576-token model would restore almost none
