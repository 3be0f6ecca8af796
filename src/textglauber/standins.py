"""Local stand-ins for every hub model and data set of the ``paper`` profile.

    python -m textglauber.standins            # build what is missing under _build/standins/
    python -m textglauber.standins --force    # rebuild all

No machine of this project reaches a model hub, yet the ``paper`` profile's code path (its
architectures, tokenizer families, special-token layouts, the NLI label map, the
sentence-transformers embedder and the MS MARCO schema) has to run somewhere. Each stand-in
has the architecture and tokenizer family of the model it replaces and random, small weights:

| stand-in for | architecture | tokenizer |
|---|---|---|
| bert-base-uncased, bert-large-uncased | BertForMaskedLM | bert-base-uncased's own WordPiece vocabulary (shipped with all-MiniLM-L6-v2) |
| roberta-base, roberta-large | RobertaForMaskedLM | byte-level BPE, RoBERTa's specials ``<s> <pad> </s> <unk> <mask>`` at ids 0-4 |
| answerdotai/ModernBERT-base | ModernBertForMaskedLM | byte-level BPE with ModernBERT's added specials (``<|endoftext|>``, ``<|padding|>``, ``|||IP_ADDRESS|||``, ``[UNK] [CLS] [SEP] [PAD] [MASK]``) |
| gpt2 | GPT2LMHeadModel | byte-level BPE, ``<|endoftext|>`` |
| facebook/bart-large-mnli | BartForSequenceClassification, MNLI labels (0 contradiction, 1 neutral, 2 entailment) | byte-level BPE, RoBERTa layout |
| sentence-transformers/all-mpnet-base-v2 | MPNet + mean pooling + normalisation, saved as a sentence-transformers model | WordPiece with MPNet's specials |
| MS MARCO v1.1 validation | ``datasets`` folder with the real columns (query, query_id, query_type, answers, passages{is_selected, passage_text, url}, wellFormedAnswers) | passages are English package texts |

The BPE vocabularies are learnt from the project's English corpus (package data). The masked
and causal LMs then train for a few hundred steps on that corpus, so that their conditionals are
far from uniform; the NLI head and the embedder keep their random weights. Everything is
deterministic from the seed and cached, keyed by the recipe. The numbers these models give mean
nothing: they prove that the code runs, not what BERT does.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from .paths import standins_root

SEED = 0
BPE_VOCAB = 4000
MAX_POSITIONS = 512
TRAIN_STEPS = 300
TRAIN_BATCH = 16
TRAIN_LEN = 48
RECIPE_VERSION = 1


@dataclass(frozen=True)
class Recipe:
    stands_for: str
    arch: str                 # bert, roberta, modernbert, gpt2, bart-nli, mpnet-sentence
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    steps: int = TRAIN_STEPS


STANDINS = {
    "bert-base-uncased": Recipe("bert-base-uncased", "bert", hidden=64, layers=2),
    "bert-large-uncased": Recipe("bert-large-uncased", "bert", hidden=96, layers=3),
    "roberta-base": Recipe("roberta-base", "roberta", hidden=64, layers=2),
    "roberta-large": Recipe("roberta-large", "roberta", hidden=96, layers=3),
    "ModernBERT-base": Recipe("answerdotai/ModernBERT-base", "modernbert", hidden=64, layers=2),
    "gpt2": Recipe("gpt2", "gpt2", hidden=64, layers=2),
    "bart-large-mnli": Recipe("facebook/bart-large-mnli", "bart-nli", hidden=64, layers=1, steps=0),
    "all-mpnet-base-v2": Recipe("sentence-transformers/all-mpnet-base-v2", "mpnet-sentence", hidden=64, steps=0),
}
MSMARCO_DIR = "msmarco"
MSMARCO_ROWS = 600


def _key(obj) -> str:
    return hashlib.sha1(json.dumps([RECIPE_VERSION, SEED, obj], sort_keys=True).encode()).hexdigest()[:12]


def _wanted(name: str) -> str:
    """The cache key a stand-in (or the MS MARCO folder) must carry to count as built."""
    return _key(["msmarco", MSMARCO_ROWS]) if name == MSMARCO_DIR else _key(asdict(STANDINS[name]))


def _done(folder: Path, key: str) -> bool:
    stamp = folder / "standin.json"
    return stamp.exists() and json.loads(stamp.read_text()).get("key") == key


def is_current(name: str) -> bool:
    """Whether the stand-in ``name`` (a model or the MS MARCO stand-in) is built and matches its recipe."""
    return _done(standins_root() / name, _wanted(name))


def _publish(tmp: Path, folder: Path, key: str, info: dict) -> None:
    """Write the stamp last and move the folder into place, so a killed build leaves nothing
    that a later run could take for complete."""
    (tmp / "standin.json").write_text(json.dumps({"key": key, **info}, indent=1))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


# ----------------------------------------------------------------------------- text
def _english_texts(limit: int = 20000) -> list[str]:
    from . import corpus

    docs = corpus.texts("english")
    rng = np.random.default_rng(SEED)
    return [docs[i] for i in rng.permutation(len(docs))[:limit]]


def _bpe(specials: list[str], texts: list[str]):
    """A byte-level BPE learnt on ``texts`` with ``specials`` first (ids 0..)."""
    from tokenizers import ByteLevelBPETokenizer

    tok = ByteLevelBPETokenizer(add_prefix_space=False)
    tok.train_from_iterator(texts, vocab_size=BPE_VOCAB, min_frequency=2, special_tokens=specials,
                            show_progress=False)
    return tok


def _bpe_files(tok, folder: Path) -> tuple[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    vocab, merges = tok.save_model(str(folder))
    return vocab, merges


def _wordpiece_vocab() -> Path:
    from .train_mlm import minilm_dir

    return minilm_dir() / "vocab.txt"


def train_tokenizer(arch: str, texts: list[str], work: Path):
    from transformers import (BartTokenizerFast, BertTokenizerFast, GPT2TokenizerFast, MPNetTokenizerFast,
                              PreTrainedTokenizerFast, RobertaTokenizerFast)

    if arch == "bert":
        return BertTokenizerFast(str(_wordpiece_vocab()), do_lower_case=True)
    if arch == "mpnet-sentence":
        words = _wordpiece_vocab().read_text(encoding="utf-8").splitlines()
        words = ["<s>", "<pad>", "</s>", "<unk>"] + [w for w in words if w not in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")]
        work.mkdir(parents=True, exist_ok=True)
        path = work / "mpnet-vocab.txt"
        path.write_text("\n".join(words + ["<mask>"]) + "\n", encoding="utf-8")
        return MPNetTokenizerFast(str(path), do_lower_case=True)
    if arch in ("roberta", "bart-nli"):
        vocab, merges = _bpe_files(_bpe(["<s>", "<pad>", "</s>", "<unk>", "<mask>"], texts), work / "bpe-roberta")
        cls = RobertaTokenizerFast if arch == "roberta" else BartTokenizerFast
        return cls(vocab, merges)
    if arch == "gpt2":
        vocab, merges = _bpe_files(_bpe(["<|endoftext|>"], texts), work / "bpe-gpt2")
        return GPT2TokenizerFast(vocab, merges)
    if arch == "modernbert":
        from tokenizers import AddedToken
        from tokenizers.processors import TemplateProcessing

        bpe = _bpe(["<|endoftext|>", "<|padding|>"], texts)
        extra = ["|||IP_ADDRESS|||", "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
        bpe.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in extra])
        inner = bpe._tokenizer
        cls_id, sep_id = inner.token_to_id("[CLS]"), inner.token_to_id("[SEP]")
        inner.post_processor = TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
                                                  special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
        return PreTrainedTokenizerFast(tokenizer_object=inner, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                                       pad_token="[PAD]", mask_token="[MASK]", model_max_length=8192)
    raise ValueError(f"unknown stand-in architecture {arch!r}")


# ----------------------------------------------------------------------------- models
def _model(recipe: Recipe, tok):
    import transformers as tf

    v, h, L, a = len(tok), recipe.hidden, recipe.layers, recipe.heads
    common = dict(vocab_size=v, hidden_size=h, num_hidden_layers=L, num_attention_heads=a, intermediate_size=4 * h)
    if recipe.arch == "bert":
        return tf.BertForMaskedLM(tf.BertConfig(max_position_embeddings=MAX_POSITIONS, pad_token_id=tok.pad_token_id,
                                                **common))
    if recipe.arch == "roberta":
        return tf.RobertaForMaskedLM(tf.RobertaConfig(max_position_embeddings=MAX_POSITIONS + 2, pad_token_id=1,
                                                      bos_token_id=0, eos_token_id=2, type_vocab_size=1, **common))
    if recipe.arch == "modernbert":
        cfg = tf.ModernBertConfig(max_position_embeddings=MAX_POSITIONS, pad_token_id=tok.pad_token_id,
                                  bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id,
                                  cls_token_id=tok.cls_token_id, sep_token_id=tok.sep_token_id,
                                  global_attn_every_n_layers=2, local_attention=64, **common)
        return tf.ModernBertForMaskedLM(cfg)
    if recipe.arch == "gpt2":
        return tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=v, n_embd=h, n_layer=L, n_head=a, n_positions=MAX_POSITIONS,
                                                bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id))
    if recipe.arch == "bart-nli":
        cfg = tf.BartConfig(vocab_size=v, d_model=h, encoder_layers=L, decoder_layers=L, encoder_attention_heads=a,
                            decoder_attention_heads=a, encoder_ffn_dim=4 * h, decoder_ffn_dim=4 * h,
                            max_position_embeddings=MAX_POSITIONS, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                            decoder_start_token_id=2, num_labels=3,
                            id2label={0: "contradiction", 1: "neutral", 2: "entailment"},
                            label2id={"contradiction": 0, "neutral": 1, "entailment": 2})
        return tf.BartForSequenceClassification(cfg)
    if recipe.arch == "mpnet-sentence":
        return tf.MPNetModel(tf.MPNetConfig(max_position_embeddings=MAX_POSITIONS + 2, pad_token_id=tok.pad_token_id,
                                            **common))
    raise ValueError(recipe.arch)


def _train(model, tok, recipe: Recipe, texts: list[str], gen: torch.Generator) -> list[float]:
    """A few hundred steps of the model's own objective on English windows: masked tokens for the
    MLMs (15%, loss on the masked rows), next tokens for GPT-2."""
    if recipe.steps == 0:
        return []
    ids = [t for t in tok(texts[:4000], add_special_tokens=False)["input_ids"] if len(t) >= TRAIN_LEN]
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    causal = recipe.arch == "gpt2"
    if not causal:
        from .models import head_parts, special_frame

        prefix, suffix = special_frame(tok, "mlm")
        encoder, transform, decoder = head_parts(model)      # the head on the masked rows only
    specials = torch.tensor(sorted(set(tok.all_special_ids)))
    losses = []
    model.train()
    for _ in range(recipe.steps):
        pick = torch.randint(len(ids), (TRAIN_BATCH,), generator=gen)
        x = torch.tensor([ids[int(k)][:TRAIN_LEN] for k in pick])
        if causal:
            loss = model(input_ids=x, labels=x).loss
        else:
            framed = torch.cat([torch.tensor(prefix).expand(len(x), -1), x, torch.tensor(suffix).expand(len(x), -1)], 1)
            mask = (torch.rand(framed.shape, generator=gen) < 0.15) & ~torch.isin(framed, specials)
            mask[:, 1] |= ~mask.any(1)            # at least one masked row per sequence
            inputs = torch.where(mask, torch.full_like(framed, tok.mask_token_id), framed)
            hidden = encoder(input_ids=inputs, attention_mask=torch.ones_like(inputs))[0][mask]
            loss = torch.nn.functional.cross_entropy(decoder(transform(hidden)), framed[mask])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def _save(recipe: Recipe, model, tok, out: Path) -> None:
    if recipe.arch == "mpnet-sentence":
        from sentence_transformers import SentenceTransformer, models as st

        inner = out / "transformer"
        model.save_pretrained(inner)
        tok.save_pretrained(inner)
        word = st.Transformer(str(inner), max_seq_length=MAX_POSITIONS - 2)
        pool = st.Pooling(word.get_word_embedding_dimension(), pooling_mode="mean")
        SentenceTransformer(modules=[word, pool, st.Normalize()], device="cpu").save(str(out))
        shutil.rmtree(inner)
        return
    model.save_pretrained(out)
    tok.save_pretrained(out)


def build_model(name: str, texts: list[str] | None = None, force: bool = False) -> Path:
    recipe = STANDINS[name]
    folder = standins_root() / name
    key = _wanted(name)
    if _done(folder, key) and not force:
        return folder
    texts = _english_texts() if texts is None else texts
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    tok = train_tokenizer(recipe.arch, texts, tmp / "_work")
    model = _model(recipe, tok)
    losses = _train(model, tok, recipe, texts, gen)
    shutil.rmtree(tmp / "_work", ignore_errors=True)
    _save(recipe, model, tok, tmp)
    _publish(tmp, folder, key, {"stands_for": recipe.stands_for, "recipe": asdict(recipe), "vocab": len(tok),
                                "parameters": int(sum(p.numel() for p in model.parameters())),
                                "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
                                "note": "random small weights; its numbers mean nothing"})
    return folder


# ----------------------------------------------------------------------------- data
def build_msmarco(texts: list[str] | None = None, force: bool = False) -> Path:
    """An MS MARCO-shaped ``datasets`` folder (the v1.1 columns) of English package passages."""
    from datasets import Dataset

    folder = standins_root() / MSMARCO_DIR
    key = _wanted(MSMARCO_DIR)
    if _done(folder, key) and not force:
        return folder
    texts = _english_texts() if texts is None else texts
    passages = [t for t in texts if len(t.split()) >= 40]
    rng = np.random.default_rng(SEED)
    rows = []
    for q in range(MSMARCO_ROWS):
        k = int(rng.integers(3, 8))
        chosen = [passages[int(i)] for i in rng.choice(len(passages), size=k, replace=False)]
        sel = [0] * k
        sel[int(rng.integers(k))] = 1
        rows.append({"answers": [chosen[sel.index(1)].split(".")[0]], "passages": {
            "is_selected": sel, "passage_text": chosen, "url": [f"local://standin/{q}/{j}" for j in range(k)]},
            "query": " ".join(chosen[0].split()[:6]).lower(), "query_id": 900000 + q,
            "query_type": "description", "wellFormedAnswers": []})
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    Dataset.from_list(rows).save_to_disk(str(tmp))
    _publish(tmp, folder, key, {"stands_for": "microsoft/ms_marco v1.1 validation", "rows": len(rows),
                                "note": "English package passages in the MS MARCO schema"})
    return folder


def ensure(force: bool = False, progress: bool = True) -> Path:
    """Every stand-in, built once (a few minutes on 2 cores) and cached under _build/standins/."""
    texts = None
    for name in list(STANDINS) + [MSMARCO_DIR]:
        if _done(standins_root() / name, _wanted(name)) and not force:
            continue
        if texts is None:
            texts = _english_texts()
        if progress:
            print(f"[standins] building {name} ...", flush=True)
        if name == MSMARCO_DIR:
            build_msmarco(texts, force)
        else:
            build_model(name, texts, force)
    return standins_root()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m textglauber.standins", description=__doc__.split("\n")[0])
    ap.add_argument("--force", action="store_true", help="rebuild every stand-in")
    a = ap.parse_args(argv)
    out = ensure(force=a.force)
    for f in sorted(out.glob("*/standin.json")):
        info = json.loads(f.read_text())
        print(f"{f.parent.name:20s} stands for {info['stands_for']}: {info.get('parameters', info.get('rows'))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
