"""The throughput grid: chain-steps per second of the engine and of the older ways on the same
inputs, for every (model, n, batch) cell, beside the compute bound measured in the same rounds.

Each cell is a :class:`Cell`, whose methods are the variants; :func:`run_grid` times them with
:func:`~textglauber.bench.measure.time_interleaved` and turns the rounds into one row per variant
(:func:`cell_rows`), with the engine's speed-ups over the older ways (:func:`with_speedups`)."""
from __future__ import annotations

import functools
import itertools
import statistics
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from .. import models as M
from ..models import tiny
from ..device import pick_device, pick_dtype
from ..engine import ChainSpec, couple, step
from ..rectangle import Rectangles, score_mlm
from ..vocabulary import AllowedVocab
from .measure import SEED, PeakMemory, cpu_times, paired_quartiles, steal_fraction, sync, time_interleaved

MATMUL_SIZE = 2048          # square fp32 multiply that reaches this CPU's rate
GPU_MATMUL_SIZE = 8192      # a GPU needs a larger one to reach its bf16 rate
OLDER = ("fill_mask_loop", "shared_site_full")          # the older ways the engine is compared with
SPEEDUP_COLUMNS = (("engine", "engine_speedup"), ("engine_compiled", "compiled_speedup"))


def flops_per_step(cfg, n_tokens: int, head_cols: int) -> float:
    """Forward FLOPs of one chain-step of a model with config ``cfg``: encoder over all tokens
    plus the head on one row."""
    h, layers = cfg.hidden_size, cfg.num_hidden_layers
    inter = getattr(cfg, "intermediate_size", 4 * h)
    per_token = layers * (2 * 4 * h * h + 2 * 2 * h * inter + 2 * 2 * n_tokens * h)
    head = 2 * h * h + 2 * h * head_cols
    return per_token * n_tokens + head


# the random-weight shapes the grid can time: (hidden size, layers, heads, feed-forward width) of
# Devlin et al.'s two BERTs, with their 30,522-token vocabulary and 512 positions
SHAPES = {"bert-base": (768, 12, 12, 3072), "bert-large": (1024, 24, 16, 4096)}


def shape_config(name: str):
    """The BertConfig of one of :data:`SHAPES`."""
    from transformers import BertConfig

    h, layers, heads, inter = SHAPES[name]
    return BertConfig(hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=inter)


def bert_random(name: str, device, dtype):
    """A BERT shape of :data:`SHAPES` with random weights (throughput does not depend on them)."""
    from transformers import BertForMaskedLM

    torch.manual_seed(0)
    model = BertForMaskedLM(shape_config(name)).to(device=device, dtype=dtype).eval()
    tok_dir = tiny.cache_root() / "bench-tok"
    tok_dir.mkdir(parents=True, exist_ok=True)
    tok = tiny.write_tokenizer(tok_dir)          # supplies the special ids; content ids are drawn at random
    return M.LoadedModel(name=f"{name} shape (random weights)", kind="mlm", model=model, tokenizer=tok,
                         device=device, dtype=dtype, source="random", revision=None, max_positions=512,
                         prefix_ids=[2], suffix_ids=[3])


@dataclass
class GridModel:
    """One model of the grid: its scorer over every non-special token (and a compiled one)."""
    lm: object
    ids: torch.Tensor
    scorer: object
    compiled: object | None

    @classmethod
    def load(cls, name: str, dev: torch.device, dt: torch.dtype, compile: bool | str) -> "GridModel":
        lm = bert_random(name, dev, dt) if name in SHAPES else M.load(name, device=str(dev), dtype=str(dt).split(".")[-1])
        V = int(lm.model.config.vocab_size)
        special = set(lm.tokenizer.all_special_ids) | set(range(5))
        ids = torch.tensor([i for i in range(V) if i not in special])
        vocab = AllowedVocab(ids=ids, tokens=tuple(str(i) for i in ids.tolist()), vocab_size=V)
        scorer = M.MaskedLMScorer(lm, vocab)
        compiled = M.MaskedLMScorer(lm, vocab, compile=compile) if compile else None
        return cls(lm=lm, ids=ids, scorer=scorer, compiled=compiled)


LOOP_CHAINS = 64     # the one-chain loop runs at most this many of a cell's chains (see Cell.loop_chains)


@dataclass
class Cell:
    """One (model, n, batch) cell: the starting states ``x`` and the generator every variant draws
    from. Each variant method runs ``steps`` steps of every chain from a copy of ``x``, except the
    one-chain loop, which runs the first ``loop_chains`` of them: it does one pass per chain, so
    its rate per chain-step does not depend on how many chains it loops over, and at batch 512
    on a GPU looping over them all took minutes a round."""
    model: GridModel
    x: torch.Tensor
    steps: int
    gen: torch.Generator
    device: torch.device
    loop_chains: int = LOOP_CHAINS
    spec: ChainSpec = field(init=False)

    def __post_init__(self):
        self.spec = ChainSpec(temperature=1.0, steps=self.steps)

    def engine(self, scorer=None):
        """This library's step (``scorer``: another scorer of the same model, e.g. compiled)."""
        s = self.x.clone()
        for _ in range(self.steps):
            step(self.model.scorer if scorer is None else scorer, s, self.spec, self.gen)
        sync(self.device)

    def fill_mask_loop(self):
        """One chain per forward pass with full logits, a draw from the softmax over the vocabulary
        (over the first ``loop_chains`` chains)."""
        lm, scorer, n = self.model.lm, self.model.scorer, self.x.shape[1]
        B = min(self.x.shape[0], self.loop_chains)
        s = self.x[:B].clone()
        with torch.no_grad():
            for _ in range(self.steps):
                for b in range(B):
                    site = int(torch.randint(n, (1,), generator=self.gen))
                    inp = scorer.frame(s[b:b + 1])
                    inp[0, 1 + site] = lm.tokenizer.mask_token_id
                    logits = lm.model(input_ids=inp).logits[0, 1 + site]
                    p = torch.softmax(logits.float(), -1)
                    s[b, site] = torch.multinomial(p.cpu(), 1, generator=self.gen)[0]
        sync(self.device)

    def shared_site_full(self):
        """One pass for the batch, every chain masked at the same site, full B x n x V logits."""
        lm, scorer, n = self.model.lm, self.model.scorer, self.x.shape[1]
        s = self.x.clone()
        with torch.no_grad():
            for _ in range(self.steps):
                site = int(torch.randint(n, (1,), generator=self.gen))
                inp = scorer.frame(s)
                inp[:, 1 + site] = lm.tokenizer.mask_token_id
                logits = lm.model(input_ids=inp).logits[:, 1 + site]
                p = torch.softmax(logits.float(), -1)
                s[:, site] = torch.multinomial(p.cpu(), 1, generator=self.gen)[:, 0]
        sync(self.device)

    def coupled_pairs(self):
        """One coupled run of the first B/2 chains against the next B/2."""
        half = self.x.shape[0] // 2
        couple(self.model.scorer, self.x[:half], self.x[half:2 * half], 1.0, self.steps, self.gen, mode="plain")

    def rectangles(self) -> tuple[int, object]:
        """(R, a call that scores R rectangles of the first R states, 4 masked rows each)."""
        R = max(1, self.x.shape[0] // 4)
        x = self.x
        rects = Rectangles(seq_id=np.zeros(R, int), base=x[:R], i=torch.zeros(R, dtype=torch.long),
                           j=torch.ones(R, dtype=torch.long), a_prime=x[:R, 1].clone(), b_prime=x[:R, 0].clone())
        return R, functools.partial(score_mlm, self.model.scorer, rects)

    def variants(self) -> dict:
        """{variant: (call, chain-steps per call, logit bytes per step)} for this cell."""
        (B, n), steps, a_size = self.x.shape, self.steps, self.model.scorer.vocab.size
        V = int(self.model.lm.model.config.vocab_size)
        out = {"engine": (self.engine, B * steps, B * a_size * 4),
               "fill_mask_loop": (self.fill_mask_loop, min(B, self.loop_chains) * steps, (n + 2) * V * 4),
               "shared_site_full": (self.shared_site_full, B * steps, B * (n + 2) * V * 4)}
        if self.model.compiled is not None:
            out["engine_compiled"] = (functools.partial(self.engine, self.model.compiled), B * steps, B * a_size * 4)
        if self.loop_chains < 1:
            out.pop("fill_mask_loop")
        if B >= 2:
            half = B // 2
            out["coupled_pairs"] = (self.coupled_pairs, 2 * half * steps, 2 * half * a_size * 4)
        return out


def _matmul(a: torch.Tensor, device) -> None:
    a @ a
    sync(device)


def run_grid(models_wanted, lengths, batches, device: str = "cpu", steps: int = 3, min_rounds: int = 3,
             on_cell=None, dtype: str = "auto", compile: bool | str = False,
             loop_chains: int = LOOP_CHAINS) -> pd.DataFrame:
    """Every (model, n, batch) cell of the grid; ``on_cell(table so far)`` is called after each,
    so that a long run can write what it has measured as it goes. ``compile`` adds the variant
    ``engine_compiled`` (the same step through ``torch.compile``; its compilation is in the
    warm-up call, outside the timings). ``loop_chains`` caps the chains the one-chain loop runs
    (0: the loop is not timed)."""
    dev = pick_device(device)
    dt = pick_dtype(dtype, dev)
    memory = PeakMemory(dev)
    size = GPU_MATMUL_SIZE if dev.type == "cuda" else MATMUL_SIZE
    matmul = functools.partial(_matmul, torch.randn(size, size, device=dev, dtype=dt), dev)
    rows = []
    for name in models_wanted:
        model = GridModel.load(name, dev, dt, compile)
        gen = torch.Generator().manual_seed(SEED)
        for n in lengths:
            fl = flops_per_step(model.lm.model.config, n + 2, model.scorer.vocab.size)
            for B in batches:
                cell = Cell(model, model.ids[torch.randint(len(model.ids), (B, n), generator=gen)], steps, gen, dev,
                            loop_chains=loop_chains)
                rows += cell_rows(cell, matmul, size, fl, min_rounds, memory, dt)
                if on_cell is not None:
                    on_cell(with_speedups(rows))
    return with_speedups(rows)


def cell_rows(cell: Cell, matmul, size: int, fl: float, min_rounds: int, memory: PeakMemory, dt) -> list[dict]:
    """Times a cell's variants, its rectangles and the matrix multiply in the same rounds (so the
    bound follows the machine's speed at the moment the variants ran: a shared host drifts), and
    returns one row per variant and one for the rectangles."""
    variants = cell.variants()
    R, rectangles = cell.rectangles()
    ticks = cpu_times()
    rounds, peaks = time_interleaved({**{v: f for v, (f, _, _) in variants.items()},
                                      "rectangles": rectangles, "matmul": matmul}, min_rounds=min_rounds, memory=memory)
    stolen = steal_fraction(ticks, cpu_times())
    timed = {k: statistics.median(v) for k, v in rounds.items()}
    rate = 2 * size**3 / timed["matmul"]
    bound = rate / fl
    works = {v: work for v, (_, work, _) in variants.items()} | {"rectangles": 4 * R}  # in chain-steps
    spread = _spread(rounds, works, variants, np.asarray(rounds["matmul"]) * fl / (2 * size**3))
    lm, n, B = cell.model.lm, cell.x.shape[1], cell.x.shape[0]
    meta = {"model": lm.name, "device": str(cell.device), "dtype": str(dt).replace("torch.", ""), "n": n,
            "attention": getattr(lm.model.config, "_attn_implementation", None), "threads": torch.get_num_threads(),
            "matmul_gflops": rate / 1e9, "steal_fraction": stolen, "rounds": len(rounds["matmul"])}
    rows = []
    for v, (fn, work, logit_bytes) in variants.items():
        sec = timed[v]
        rows.append({**meta, "batch": B, "variant": v, "chain_steps_per_s": work / sec,
                     "compute_bound_steps_per_s": bound, "fraction_of_bound": work / sec / bound,
                     "chains_timed": work // cell.steps, "logit_bytes": logit_bytes,
                     "peak_memory_bytes": peaks.get(v, np.nan), **spread[v]})
    sec = timed["rectangles"]
    rows.append({**meta, "batch": 4 * R, "variant": "rectangles", "chain_steps_per_s": R / sec,
                 "compute_bound_steps_per_s": bound / 4, "fraction_of_bound": R / sec / (bound / 4), "chains_timed": R,
                 "logit_bytes": 4 * R * cell.model.scorer.vocab.size * 4,
                 "peak_memory_bytes": peaks.get("rectangles", np.nan), **spread["rectangles"]})
    return rows


def _spread(rounds: dict, works: dict, variants: dict, mm_work: np.ndarray) -> dict:
    """Per round: a variant's fraction of that round's bound (``mm_work``: seconds per chain-step at
    the bound), and each engine's speed-up over each older way (their time over the engine's), as
    quartiles across rounds."""
    spread = {v: dict(zip(("fraction_q25", "fraction_q75"), paired_quartiles(mm_work * work, rounds[v])))
              for v, work in works.items()}
    for (eng, col), v in itertools.product(SPEEDUP_COLUMNS, OLDER):
        if eng in variants and v in variants:
            spread[v].update(zip((col + "_q25", col + "_q75"), paired_quartiles(rounds[v], rounds[eng])))
    return spread


def with_speedups(rows) -> pd.DataFrame:
    """The engine's rate over each older way's at the same model, n and batch (a ratio of the
    median rates; the ``*_q25``/``*_q75`` columns hold the spread of the per-round ratios)."""
    df = pd.DataFrame(rows)
    for engine, col in SPEEDUP_COLUMNS:
        if engine not in set(df.variant):
            continue
        eng = df[df.variant == engine].set_index(["model", "n", "batch"]).chain_steps_per_s
        df[col] = [eng.get((m, n, b), np.nan) / s if v in OLDER else np.nan
                   for m, n, b, v, s in zip(df.model, df.n, df.batch, df.variant, df.chain_steps_per_s)]
    return df
