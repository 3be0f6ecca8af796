"""The training data: the corpus cut into pieces, the held-out split, batches grouped by length
in a seeded order, BERT masking, and the fixed held-out set every start is measured on."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .presets import Preset, minilm_dir


def _tokenizer(kind: str, workdir: Path):
    from transformers import AutoTokenizer

    if kind == "minilm":
        return AutoTokenizer.from_pretrained(str(minilm_dir()))
    from ..models import tiny

    workdir.mkdir(parents=True, exist_ok=True)
    return tiny.write_tokenizer(workdir)


def chunks(tokenizer, docs: list[str], max_len: int, min_len: int = 6) -> list[list[int]]:
    """Each document cut into pieces of at most max_len - 2 content tokens."""
    out = []
    enc = tokenizer(docs, add_special_tokens=False)["input_ids"]
    step = max_len - 2
    for ids in enc:
        for s in range(0, len(ids), step):
            piece = ids[s:s + step]
            if len(piece) >= min_len:
                out.append(piece)
    return out


def split_docs(docs: list[str], frac: float, seed: int) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(docs))
    k = max(1, int(round(frac * len(docs))))
    held = set(order[:k].tolist())
    return [d for i, d in enumerate(docs) if i not in held], [d for i, d in enumerate(docs) if i in held]


def collate(pieces: list[list[int]], tok) -> tuple[torch.Tensor, torch.Tensor]:
    L = max(len(p) for p in pieces) + 2
    ids = torch.full((len(pieces), L), tok.pad_token_id, dtype=torch.long)
    attn = torch.zeros((len(pieces), L), dtype=torch.long)
    for r, p in enumerate(pieces):
        row = [tok.cls_token_id] + p + [tok.sep_token_id]
        ids[r, :len(row)] = torch.tensor(row)
        attn[r, :len(row)] = 1
    return ids, attn


def mask_batch(ids: torch.Tensor, attn: torch.Tensor, tok, prob: float, vocab_size: int, gen: torch.Generator):
    """BERT masking on content tokens: of the chosen, 80% [MASK], 10% random, 10% kept.
    Returns (inputs, positions (R, 2), targets (R,)); at least one position per row."""
    content = attn.bool() & (ids != tok.cls_token_id) & (ids != tok.sep_token_id)
    pick = (torch.rand(ids.shape, generator=gen) < prob) & content
    first = torch.multinomial(content.float(), 1, generator=gen).squeeze(1)
    pick[torch.arange(len(ids)), first] = True
    u = torch.rand(ids.shape, generator=gen)
    inputs = ids.clone()
    inputs[pick & (u < 0.8)] = tok.mask_token_id
    rnd = pick & (u >= 0.8) & (u < 0.9)
    inputs[rnd] = torch.randint(len(tok.all_special_ids) + 1, vocab_size, (int(rnd.sum()),), generator=gen)
    pos = pick.nonzero()
    return inputs, pos, ids[pick]


def epoch_batches(lengths: list[int], batch: int, seed: int, epoch: int) -> list[list[int]]:
    """Epoch ``epoch``'s batches as lists of piece indices, length-grouped: shuffle, sort within
    mega-batches of 50 batches, shuffle the batches. A function of (seed, epoch) alone, so a
    resumed run finds its place from (epoch, position) without replaying earlier epochs."""
    key = int(np.random.SeedSequence([seed, epoch]).generate_state(1, dtype=np.uint64)[0] >> 1)
    gen = torch.Generator().manual_seed(key)
    order = torch.randperm(len(lengths), generator=gen).tolist()
    mega = batch * 50
    out = []
    for s in range(0, len(order), mega):
        group = sorted(order[s:s + mega], key=lambda k: lengths[k])
        out += [group[b:b + batch] for b in range(0, len(group), batch)]
    return [out[k] for k in torch.randperm(len(out), generator=gen).tolist()]


def batches(pieces: list[list[int]], batch: int, seed: int, epoch: int = 0, position: int = 0):
    """Endless batches from (epoch, position) on; yields ((epoch, next position), pieces)."""
    lengths = [len(p) for p in pieces]
    while True:
        order = epoch_batches(lengths, batch, seed, epoch)
        for k in range(position, len(order)):
            yield (epoch, k + 1), [pieces[i] for i in order[k]]
        epoch, position = epoch + 1, 0


@dataclass
class Data:
    """What every start trains and is measured on (built once per call of ``train``)."""
    tok: object
    train_pieces: list
    eval_set: list
    ppl_pieces: list
    unigram: torch.Tensor


def prepare(preset: Preset, seed: int, workdir: Path, docs: list[str]):
    """``(Data, sizes)``: what every start of one call of ``train`` reads, and the sizes its manifest records."""
    tok = _tokenizer(preset.tokenizer, workdir / "tokenizer")
    train_docs, held_docs = split_docs(docs, preset.heldout_frac, seed)
    train_pieces = chunks(tok, train_docs, preset.max_len)
    held_pieces = chunks(tok, held_docs, preset.max_len)
    counts = np.bincount([t for p in train_pieces for t in p], minlength=len(tok)).astype(np.float64)
    unigram = torch.tensor(np.log((counts + 0.1) / (counts + 0.1).sum()), dtype=torch.float32)
    egen = torch.Generator().manual_seed(seed + 7)
    eval_pieces = held_pieces[: preset.eval_chunks]
    eval_set = []
    for s in range(0, len(eval_pieces), 32):
        ids, attn = collate(eval_pieces[s:s + 32], tok)
        inputs, pos, tgt = mask_batch(ids, attn, tok, 0.15, len(tok), egen)
        eval_set.append((inputs, attn, pos, tgt))
    data = Data(tok, train_pieces, eval_set, held_pieces[: preset.ppl_chunks], unigram)
    sizes = {"train_documents": len(train_docs), "heldout_documents": len(held_docs),
             "train_tokens": int(sum(map(len, train_pieces))), "heldout_tokens": int(sum(map(len, held_pieces)))}
    return data, sizes
