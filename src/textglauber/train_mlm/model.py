"""The two starts' networks (the MiniLM encoder, a small BERT from scratch) under a masked-LM head
tied to the input embeddings, and their held-out metrics (masked loss, top-1 and top-5, pseudo-perplexity)."""
from __future__ import annotations

import math

import torch

from .data import collate
from .presets import Preset, minilm_dir


def build_model(start: str, preset: Preset, tok, unigram_logp: torch.Tensor, seed: int):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    if start == "minilm":
        from safetensors.torch import load_file

        src = minilm_dir()
        cfg = BertConfig.from_pretrained(str(src))
        cfg.tie_word_embeddings = True
        model = BertForMaskedLM(cfg)
        state = load_file(str(src / "model.safetensors"))
        state = {k.removeprefix("bert.").removeprefix("model."): v for k, v in state.items()}
        missing, unexpected = model.bert.load_state_dict(state, strict=False)
        bad = [m for m in missing if not m.startswith("pooler")]
        if bad:
            raise RuntimeError(f"MiniLM weights did not fit: missing {bad[:5]}")
    elif start == "scratch":
        h = preset.scratch
        model = BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=h["hidden"],
                                           num_hidden_layers=h["layers"], num_attention_heads=h["heads"],
                                           intermediate_size=4 * h["hidden"],
                                           max_position_embeddings=max(preset.max_len, 64), pad_token_id=0))
    else:
        raise ValueError(f"unknown start {start!r}")
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    with torch.no_grad():
        model.cls.predictions.decoder.bias.copy_(unigram_logp[: model.config.vocab_size])
    return model


def masked_logits(model, inputs, attn, pos):
    hidden = model.bert(input_ids=inputs, attention_mask=attn)[0]
    return model.cls(hidden[pos[:, 0], pos[:, 1]])


@torch.no_grad()
def evaluate(model, eval_set, tok) -> dict:
    model.eval()
    loss_sum, n, top1, top5 = 0.0, 0, 0, 0
    for inputs, attn, pos, tgt in eval_set:
        logits = masked_logits(model, inputs, attn, pos).float()
        loss_sum += float(torch.nn.functional.cross_entropy(logits, tgt, reduction="sum"))
        n += len(tgt)
        top = logits.topk(5, dim=-1).indices
        top1 += int((top[:, 0] == tgt).sum())
        top5 += int((top == tgt[:, None]).any(-1).sum())
    model.train()
    return {"heldout_loss": loss_sum / n, "top1": top1 / n, "top5": top5 / n, "masked_tokens": n}


@torch.no_grad()
def pseudo_perplexity(model, pieces: list[list[int]], tok, max_tokens: int = 32) -> float:
    """exp of the mean of -log p(x_i | x_{-i}) with every position masked in turn."""
    model.eval()
    nll, n = 0.0, 0
    for p in pieces:
        p = p[:max_tokens]
        ids, attn = collate([p] * len(p), tok)
        rows = torch.arange(len(p))
        ids[rows, rows + 1] = tok.mask_token_id
        logits = masked_logits(model, ids, attn, torch.stack([rows, rows + 1], 1)).float()
        nll -= float(torch.log_softmax(logits, -1)[rows, torch.tensor(p)].sum())
        n += len(p)
    model.train()
    return math.exp(nll / n)
