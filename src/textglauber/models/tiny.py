"""Tiny deterministic models for the tests and the smoke profile.

``tiny-mlm`` is a 2-layer BERT and ``tiny-causal`` a 2-layer GPT-2, both over a
word-level vocabulary built from the small corpus shipped in ``data/tiny_corpus.txt``
(sentences written for this project). Each is trained for a few hundred steps from a
fixed seed so that its conditionals carry real context dependence, then saved with
``save_pretrained`` so that it loads through exactly the same code path as any Hugging
Face model. Builds take seconds and are cached on disk (``TEXTGLAUBER_CACHE``, default
``~/.cache/textglauber``), keyed by every option.

Options follow a colon: ``tiny-mlm:seed=1,layers=2,hidden=64,steps=300``.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from .. import corpus

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
DEFAULTS = {"seed": 0, "layers": 2, "hidden": 64, "heads": 4, "steps": 300, "lr": 3e-3, "positions": 64}
KINDS = ("mlm", "causal")


def cache_root() -> Path:
    return Path(os.environ.get("TEXTGLAUBER_CACHE", Path.home() / ".cache" / "textglauber"))


def corpus_lines() -> list[str]:
    return corpus.texts("tiny")


def parse(name: str) -> tuple[str, dict]:
    base, _, opts = name.partition(":")
    kind = base.removeprefix("tiny-")
    if kind not in KINDS:
        raise ValueError(f"unknown tiny model {name!r}; use tiny-mlm or tiny-causal")
    cfg = dict(DEFAULTS)
    for item in filter(None, opts.split(",")):
        k, sep, v = item.partition("=")
        if not sep or k not in DEFAULTS:
            raise ValueError(f"bad option {item!r} in {name!r}; options are {sorted(DEFAULTS)}")
        cfg[k] = type(DEFAULTS[k])(v)
    return kind, cfg


def build(name: str) -> Path:
    """Directory of the tiny model ``name``, built once and cached."""
    kind, cfg = parse(name)
    key = hashlib.sha1(json.dumps([kind, cfg, corpus_lines()], sort_keys=True).encode()).hexdigest()[:16]
    out = cache_root() / "tiny" / f"{kind}-{key}"
    if (out / "config.json").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".build-"))
    try:
        _train_and_save(kind, cfg, tmp)
        try:
            tmp.rename(out)
        except OSError:      # another process finished first
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def write_tokenizer(dirpath: Path):
    from transformers import BertTokenizer

    words = sorted({w for ln in corpus_lines() for w in ln.split()})
    (dirpath / "vocab.txt").write_text("\n".join(SPECIALS + words) + "\n", encoding="utf-8")
    # the path goes positionally: as a keyword it silently builds an empty vocabulary
    return BertTokenizer(str(dirpath / "vocab.txt"), do_lower_case=True)


def _train_and_save(kind: str, cfg: dict, dirpath: Path) -> None:
    import torch

    from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

    tok = write_tokenizer(dirpath)
    gen = torch.Generator().manual_seed(cfg["seed"])
    torch.manual_seed(cfg["seed"])
    vocab = len(tok)
    if kind == "mlm":
        model = BertForMaskedLM(BertConfig(
            vocab_size=vocab, hidden_size=cfg["hidden"], num_hidden_layers=cfg["layers"],
            num_attention_heads=cfg["heads"], intermediate_size=2 * cfg["hidden"],
            max_position_embeddings=cfg["positions"], pad_token_id=0,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    else:
        model = GPT2LMHeadModel(GPT2Config(
            vocab_size=vocab, n_embd=cfg["hidden"], n_layer=cfg["layers"], n_head=cfg["heads"],
            n_positions=cfg["positions"], bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id,
            pad_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    enc = tok(corpus_lines(), padding=True, return_tensors="pt")
    ids, attn = enc["input_ids"], enc["attention_mask"]
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=0.0)
    model.train()
    for _ in range(cfg["steps"]):
        if kind == "mlm":
            content = attn.bool() & (ids != tok.cls_token_id) & (ids != tok.sep_token_id)
            pick = (torch.rand(ids.shape, generator=gen) < 0.2) & content
            # at least one masked position per sentence
            first = torch.multinomial(content.float(), 1, generator=gen).squeeze(1)
            pick[torch.arange(ids.shape[0]), first] = True
            inputs = ids.masked_fill(pick, tok.mask_token_id)
            labels = ids.masked_fill(~pick, -100)
            loss = model(input_ids=inputs, attention_mask=attn, labels=labels).loss
        else:
            labels = ids.masked_fill(attn == 0, -100)
            loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.save_pretrained(dirpath)
    tok.save_pretrained(dirpath)
    (dirpath / "tiny.json").write_text(json.dumps({"kind": kind, **cfg, "final_loss": float(loss.detach())}, indent=1))
