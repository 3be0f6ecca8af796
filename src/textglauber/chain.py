"""The batched Glauber engine (SPEC section 1).

One step from a batch of states: every chain draws its own free site uniformly, that
site is masked, the scorer returns s_i(. | x_{-i}) over the allowed vocabulary (one
encoder pass for the batch, the head on B rows), and each chain writes a token drawn
from softmax(s / T).

Randomness: one ``torch.Generator`` on the CPU per run draws the sites and one uniform
per chain per step; sampling is by inverse CDF on those uniforms, so a CPU run is exactly
repeatable and the draws do not depend on the device the model runs on.

Long runs write their records in chunks under ``out_dir`` and a checkpoint (states,
generator state, step, what the chains know about their current states) after each chunk;
a killed run resumes from the last checkpoint and ends with exactly the records of an
uninterrupted run. Only a run of the same parameters, seed, model and starts resumes; another one
found there is moved aside (``<out_dir>.old-<fingerprint>``, one kept) and the chains start afresh.

Engine modes (``ChainSpec.mode``). The conditional pi_i(. | x_{-i}) does not depend on x_i,
so while a chain's state stays the same, every conditional computed for it stays valid, and
at low temperature most steps rewrite the token already there.

- ``plain``: every chain is scored at every step.
- ``memo``: the plain engine's draws (the same site and uniform per chain and step), but a
  chain remembers, for each site it has scored in its current state, the interval of uniforms
  that keeps its current token there. A step whose site is remembered and whose uniform falls
  in that interval changes nothing and needs no model call; only the other chains enter the
  step's batch. What is remembered belongs to the state, not to the chain: chains at one state
  share it (and one row per site), and it is kept after they leave, so a chain that comes back
  to a state, or reaches one another chain has scored, starts with those sites known (up to
  :data:`MEMO_STATES` states, the least recently entered given up first). A round scores the
  rows the waiting chains need now and, up to as many rows as there are chains, some of the
  next sites their new states will need (:func:`memo_segment`). The trajectory is
  the plain engine's: bit for bit on a scorer whose rows do not depend on the batch (a table),
  up to the float rounding of a row scored in another batch otherwise.
- ``jump``: rejection-free (the n-fold way of Bortz, Kalos and Lebowitz, 1975). Once the m
  free sites of a chain's state are scored (one batched pass), the number of steps until its
  state changes is geometric with leave probability q = (1/m) sum_i (1 - pi_i(x_i | x_{-i})),
  the changing site has probability proportional to 1 - pi_i(x_i | x_{-i}), and the new token
  is drawn from pi_i restricted to the other tokens. This is exact in law (not the plain
  engine's trajectory). Chains run on their own clocks inside a segment of steps; a draw that
  lands beyond the segment's end is discarded and drawn afresh in the next segment, which is
  exact because the holding time is memoryless.
- ``auto``: segments of ``memo``, ``plain`` or ``jump``, each chosen from the no-op share
  observed in the run so far (a deterministic rule, :class:`Policy`), so the run stays
  exactly repeatable and resumable. It never jumps when gaps are recorded.

What is remembered per state and site, whatever |A| is: the keep-interval (three float64
numbers), the leave probability 1 - pi_i(x_i | x_{-i}) and, with ``record_gaps``, the score
gap of the current token, and the same for the :data:`MOVE_TOKENS` most likely tokens of
the row (which token, its interval of uniforms, its gap and leave probability): O(states x n)
numbers (about :data:`STATE_MEMORY` bytes, or two states per chain where that is more), never a
row of |A| scores (64 chains x 64 sites x 30k tokens of rows would be 500 MB). A memo step at a
remembered site whose uniform falls in one of those tokens' intervals moves there without a
model call (:func:`cached_moves`): at low temperature nearly every move goes to one of the few
most likely tokens, so a chain that leaves a state and comes back (the usual path out of a
trap and into it again) needs no row for either move. The price: a step that moves at a
remembered site to a token not among them scores that row again (memo), and a jump scores the
row of the changing site once more when it was remembered rather than scored in the same round.
A move keeps the row it was drawn from: the new state differs from the old one only at that
site, whose conditional does not read the token there, so the new state starts with that site
known (:func:`carry`; chains and coupled pairs, in memo and jump; coupled pairs keep no
remembered tokens). Rows are held only inside a scorer call, at most :data:`ROW_BUDGET` scores
per call in a jump's batched pass.

Records in jump segments: ``states`` at the recording grid hold each chain's state at that
step (constant between its moves). ``sites[t - 1, b]`` is the site chain b changed at step t,
and -1 where the chain held (the sites of steps that change nothing are never drawn);
``gaps`` need the site of every step, so ``record_gaps`` refuses the jump mode and keeps
``auto`` on memo or plain.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Protocol

import numpy as np
import torch

from .vocabulary import AllowedVocab

MODES = ("plain", "memo", "jump", "auto")
ROW_BUDGET = 1 << 23          # scores (rows x |A|) per scorer call in a jump's batched pass
AUTO_FIRST = 4                # steps of the auto mode's first (memo) segment, which only looks
AUTO_SEGMENT = 16             # steps of a plain segment of the auto mode, and the first of a memo or jump stretch
AUTO_JUMP_MAX = 1 << 20       # longest jump segment of the auto mode (doubles from AUTO_SEGMENT)
# the fixed work of the modes, in scorer rounds: memo chains batch their rows across steps, a
# round for about 1.25 rows per chain-step (rxnfp BERT, AntiBERTy and the trained English MLM at
# n = 20, 16 chains: 1.05-1.5); memo pairs step together, PAIR_CALL rounds of a plain step per
# step that needs a row and PAIR_STEP per step (fitted to the tiny MLM on a CPU); a jump, a
# round per move of the busiest unit
MEMO_CALL, PAIR_CALL, PAIR_STEP, JUMP_ROUNDS = 1.25, 1.7, 0.4, 1.0
MEMO_WINDOW = 4096            # steps the memo mode's chains run on their own clocks before they meet again
MEMO_DRAWS = 1 << 22          # (step, chain) draws a memo window holds at most (a shorter window for many chains)
MEMO_SCAN = 16                # steps a memo chain first reads ahead for its next row (doubling while it finds none)
MEMO_AHEAD = 8                # rows a memo chain may score in a round beyond the one it waits for (its next unknown sites)
AHEAD_USE = 0.5               # ... each only where the chain is estimated at least this likely to still be in its state there
AHEAD_SCAN = 64               # steps a memo chain looks through for those sites
HYSTERESIS = 0.9              # auto leaves its current mode for one estimated at most this share of its cost
# what a model's rows and the engine's work cost, per device type: the FLOP/s of the encoder's
# rows, and in seconds the fixed time of a scorer call ("round"), the memo's and jump's Python and
# cache work per row scored ("row_extra") and a memo chain-step's own work ("step"). CPU: measured
# on this project's 2-core machines (rxnfp BERT, AntiBERTy, trained English MLM at n = 20 and 64:
# 140-180 GFLOP/s at batch 16-64; a call 9-16 ms at batch 1, 1-5 rows; 0.27-0.42 ms per memo row
# over what plain spends; 0.6 us a chain-step for 16 chains in a tabulated trap). CUDA: estimates,
# not measured here.
DEVICE_COSTS = {"cpu": {"flops": 1.5e11, "round": 1e-2, "row_extra": 3.5e-4, "step": 6e-7},
                "cuda": {"flops": 1e14, "round": 3e-3, "row_extra": 0.0, "step": 6e-7}}
TABLE_ROUND_COST = 64.0       # a round's fixed cost in rows for scorers without a model (tables)
TABLE_STEP_COST = 0.15        # a memo chain-step's own work (draws, cache reads) in rows of a table
MOVE_TOKENS = 4               # the most likely tokens of a row whose intervals a chain's cache keeps (moves without a row)
TOKEN_FIELDS = ("pos", "lo", "hi", "leave", "gap")
CHAIN_FIELDS = ("lo", "hi", "tot", "leave", "gap",
                *(f"{f}{k}" for k in range(MOVE_TOKENS) for f in TOKEN_FIELDS))
STATE_MEMORY = 16 << 20       # bytes of a chain cache's slots: the scored states it keeps (at most MEMO_STATES)
MEMO_STATES = 4096            # states a chain cache keeps at most (never fewer than two per chain)
# the precision of the sampling law, part of every checkpoint's fingerprint: the plain and memo
# draws were made from a float32 softmax until issue 41 (item 5), and a run checkpointed then does
# not resume into float64 draws (it starts afresh: other trajectories, the same law)
SAMPLER = "softmax-float64"


class Scorer(Protocol):
    vocab: AllowedVocab

    @property
    def max_length(self) -> int: ...

    def scores(self, states: torch.Tensor, sites: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class ChainSpec:
    temperature: float
    steps: int
    record_every: int = 1
    prefix_len: int = 0          # the first prefix_len content positions are frozen
    record_gaps: bool = False    # score gap of the token written at each step
    checkpoint_every: int = 1000
    mode: str = "auto"           # plain, memo, jump or auto (module docstring)


@dataclass
class ChainRun:
    """What a run recorded. ``states[r, b]`` is chain b at step ``steps[r]``."""

    steps: np.ndarray            # (R,)
    states: np.ndarray           # (R, B, n) token ids
    gaps: np.ndarray | None      # (S, B) raw-score gap of the written token at steps 1..S
    sites: np.ndarray | None     # (S, B) the site each chain updated (-1: held through a jump)
    spec: ChainSpec
    seed: int
    modes: list | None = None    # auto mode: the segments run, [mode, steps] each


def validate(scorer: Scorer, init: torch.Tensor, spec: ChainSpec) -> None:
    """Every bad input gets one clear error here, before any model call."""
    if not (isinstance(spec.temperature, (int, float)) and np.isfinite(spec.temperature) and spec.temperature > 0):
        raise ValueError(f"temperature must be a positive number, got {spec.temperature!r}")
    if init.ndim != 2 or init.shape[0] < 1 or init.shape[1] < 1:
        raise ValueError(f"initial states must be a (chains, n) array with n >= 1, got shape {tuple(init.shape)}")
    n = init.shape[1]
    if n > scorer.max_length:
        raise ValueError(f"sequence length n={n} exceeds what the model accepts ({scorer.max_length} "
                         f"content tokens after its special tokens)")
    if not 0 <= spec.prefix_len < n:
        raise ValueError(f"a frozen prefix of {spec.prefix_len} tokens leaves no free site in n={n}")
    if scorer.vocab.size == 0:
        raise ValueError("the allowed vocabulary is empty")
    if spec.steps < 0 or spec.record_every < 1 or spec.checkpoint_every < 1:
        raise ValueError(f"steps >= 0, record_every >= 1 and checkpoint_every >= 1 are required: {spec}")
    if spec.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {spec.mode!r}")
    if spec.mode == "jump" and spec.record_gaps:
        raise ValueError("record_gaps needs the site of every step, which the jump mode never draws for the "
                         "steps that change nothing: use mode='memo' (the plain trajectory) or 'auto'")


def _cdf(scores: torch.Tensor, temperature) -> torch.Tensor:
    """The inverse-CDF sampler's table: cumsum of softmax(scores / T) row by row, all in float64.

    The division by T and the softmax are float64 too, as in the jump mode's moves and leave
    probabilities (:func:`leave_probability`), the coupled pairs and the exact kernels, so every
    mode samples one conditional law (this table was a float32 softmax before; see
    :data:`SAMPLER`)."""
    p = torch.softmax(scores.double() / temperature, dim=-1)
    return torch.cumsum(p, dim=-1)


def _search(cdf: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    idx = torch.searchsorted(cdf, (u.to(cdf.device) * cdf[:, -1]).unsqueeze(1), right=True).squeeze(1)
    return idx.clamp_(max=cdf.shape[-1] - 1)


def sample_index(scores: torch.Tensor, temperature: float, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw from softmax(scores / T) row by row, with given uniforms u in [0, 1)."""
    return _search(_cdf(scores, temperature), u)


def keep_interval(cdf: torch.Tensor, pos: torch.Tensor):
    """(lo, hi, tot) on the CPU with ``_search(cdf, u) == pos`` exactly when lo <= u * tot < hi
    (the same float64 product the sampler forms); an empty interval where pos is -1."""
    r, k = cdf.shape
    pos = pos.to(cdf.device)
    pc = pos.clamp(0, k - 1)
    rows = torch.arange(r, device=cdf.device)
    inf = torch.full((r,), math.inf, dtype=cdf.dtype, device=cdf.device)
    lo = torch.where(pc > 0, cdf[rows, (pc - 1).clamp(min=0)], -inf)
    hi = torch.where(pc < k - 1, cdf[rows, pc], inf)
    lo = torch.where(pos >= 0, lo, inf)
    return lo.cpu(), hi.cpu(), cdf[:, -1].cpu()


def without(p: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """A copy of the rows p with column pos of each row set to zero (nothing where pos is -1)."""
    out = p.clone()
    pos = pos.to(p.device)
    rows = (pos >= 0).nonzero().flatten()
    out[rows, pos[rows]] = 0
    return out


def leave_probability(scores: torch.Tensor, pos: torch.Tensor, temperature) -> torch.Tensor:
    """1 - pi(x | .) per row at temperature T for the token at ``pos`` ((rows,), or (rows, k) for
    k tokens of each row from one softmax); the sum of the row where the token is not in A (-1).
    No cancellation when pi(x) is close to 1, as in a trap: only a row's most likely token can
    hold more than half, and its value is the sum over the other tokens; for any other token,
    the total less its probability (at least a half) loses no relative precision.

    The softmax is a temporary of this call, so the most likely token's column is zeroed in it in
    place (after the other tokens' probabilities are read) rather than in a copy, which saves a
    pass over the row: the memo segments of an ``auto`` run summarise every row they score this
    way, with |A| about 30,000 on the English MLM."""
    p = torch.softmax(scores.double() / temperature, dim=-1)
    cols = pos.to(p.device)[:, None] if pos.dim() == 1 else pos.to(p.device)
    big = p.argmax(-1, keepdim=True)
    total = p.sum(-1, keepdim=True)
    own = p.gather(1, cols.clamp(min=0))
    rest = p.scatter_(1, big, 0.0).sum(-1, keepdim=True)      # the sum over all but the most likely token
    out = torch.where(cols == big, rest, total - own)
    out = torch.where(cols >= 0, out, total)
    return out.reshape(pos.shape)


def restricted(p: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """The weights a jump draws its new token from: pi_i without the current token."""
    return without(p, pos)


def draw_from(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF index per row of nonnegative weights with uniforms u; never an index of weight 0."""
    cdf = torch.cumsum(weights, -1)
    idx = torch.searchsorted(cdf, (u.to(cdf.device) * cdf[:, -1]).unsqueeze(1), right=True).squeeze(1)
    last = weights.shape[-1] - 1 - torch.argmax(torch.flip(weights > 0, [-1]).to(torch.int8), dim=-1)
    return torch.minimum(idx, last)


def holding_time(q: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Steps up to and including the first change (>= 1), geometric with leave probability q,
    from uniforms u in [0, 1): P(H > k) = (1 - q)^k. Float64, inf where q is 0."""
    rate = -torch.log1p(-q.clamp(0.0, 1.0))
    h = torch.floor(-torch.log1p(-u) / rate) + 1
    return torch.where(q > 0, h, torch.full_like(h, math.inf))


def score_gap(scores: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """s(x_i) - max_{a != x_i} s(a) for the token at ``index`` of each row (negative if not argmax)."""
    rows = torch.arange(scores.shape[0], device=scores.device)
    own = scores[rows, index]
    other = scores.clone()
    other[rows, index] = -torch.inf
    return own - other.max(dim=-1).values


class SiteCache:
    """What is known about the units' (chains' or pairs') current states, per site: named float64
    fields packed in one (slots, n, fields) tensor on the CPU, valid where ``slot_valid`` is set;
    each unit reads and writes the slot of its current state.

    Without ``capacity`` every unit has a slot of its own, and a change of its state must
    ``clear`` it. With ``capacity``, a slot belongs to a state (its token ids) rather than to a
    unit: units at the same state share it, and it outlives the visit. A unit whose state changes
    must ``enter`` the new state, which points it at that state's slot, holding whatever any unit
    scored there before (a chain back in a state it, or another chain, has scored finds those
    sites known; the conditional at a site is a function of the state alone). Slots that no unit
    holds are reused, the least recently entered first, once ``capacity`` of them are taken."""

    def __init__(self, units: int, n: int, fields: tuple[str, ...], capacity: int | None = None):
        self.fields = tuple(fields)
        self.col = {f: j for j, f in enumerate(self.fields)}
        self.keyed = capacity is not None
        size = max(int(capacity), 2 * units) if self.keyed else units
        self.slot_valid = torch.zeros((size, n), dtype=torch.bool)
        self.slot_values = torch.zeros((size, n, len(self.fields)), dtype=torch.float64)
        self.slot = torch.arange(units)                  # each unit's slot
        self.used = torch.full((size,), -1, dtype=torch.long)   # when each slot was last entered
        self.key_of: list = [None] * size                 # the state a slot belongs to (None: a unit's own)
        self.index: dict = {}                             # state -> slot
        self.tick = 0

    @property
    def valid(self) -> torch.Tensor:
        """(units, n): which sites of each unit's current state are known."""
        return self.slot_valid[self.slot]

    def _fresh(self, k: int, keep: torch.Tensor) -> torch.Tensor:
        """k empty slots that no unit holds and not in ``keep``, the least recently entered first."""
        free = torch.ones(len(self.used), dtype=torch.bool)
        free[self.slot] = False
        free[keep] = False
        order = torch.argsort(torch.where(free, self.used, torch.full_like(self.used, 1 << 62)), stable=True)[:k]
        for s in order.tolist():
            if self.key_of[s] is not None:
                del self.index[self.key_of[s]]
                self.key_of[s] = None
        self.slot_valid[order] = False
        return order

    def clear(self, units: torch.Tensor) -> None:
        """Forget what is known about the units' states (with capacity, each gets an empty slot of its own)."""
        units = torch.as_tensor(units, dtype=torch.long).flatten()
        if not self.keyed:
            self.slot_valid[self.slot[units]] = False
            return
        self.slot[units] = self._fresh(len(units), self.slot[:0])

    def enter(self, units: torch.Tensor, states: torch.Tensor) -> None:
        """Units now at ``states`` (rows of token ids): point each at its state's slot (a new one for
        a state not seen, or no longer kept). Without capacity, this is ``clear``."""
        units = torch.as_tensor(units, dtype=torch.long).flatten()
        if not self.keyed:
            self.clear(units)
            return
        if len(units) == 0:
            return
        self.tick += 1
        keys = [r.tobytes() for r in states.detach().cpu().numpy()]
        found = [self.index.get(k, -1) for k in keys]
        new = list(dict.fromkeys(k for k, s in zip(keys, found) if s < 0))
        known = torch.as_tensor([s for s in found if s >= 0], dtype=torch.long)
        for k, s in zip(new, self._fresh(len(new), known).tolist()):
            self.index[k], self.key_of[s] = s, k
        slots = torch.as_tensor([self.index[k] for k in keys], dtype=torch.long)
        self.slot[units] = slots
        self.used[slots] = self.tick

    def store(self, units: torch.Tensor, sites: torch.Tensor, values: dict) -> None:
        row = torch.zeros((len(units), len(self.fields)), dtype=torch.float64)
        for f, v in values.items():
            row[:, self.col[f]] = v.to(torch.float64).cpu()
        slots = self.slot[units]
        self.slot_values[slots, sites] = row
        self.slot_valid[slots, sites] = True

    def fill(self, units: torch.Tensor, sites: torch.Tensor, values: dict) -> None:
        """``store`` at the (unit, site) pairs whose site is not known yet; known ones keep their fields."""
        fresh = ~self.valid[units, sites]
        self.store(units[fresh], sites[fresh], {f: v[fresh.to(v.device)] for f, v in values.items()})

    def at(self, units: torch.Tensor, sites: torch.Tensor, fields: tuple[str, ...] | None = None) -> dict:
        """The fields (all, or those named) at the (unit, site) pairs (index tensors of any one
        shape), one gather for all of them."""
        slots = self.slot[units]
        if fields is None:
            got = self.slot_values[slots, sites]
            return {f: got[..., j] for f, j in self.col.items()}
        return {f: self.slot_values[slots, sites, self.col[f]] for f in fields}

    def leave(self, units: torch.Tensor, free: torch.Tensor) -> torch.Tensor:
        return self.slot_values[self.slot[units]][:, free, self.col["leave"]]

    def mean_leave(self, free: torch.Tensor) -> torch.Tensor:
        """Each unit's leave probability q where every free site is known, NaN elsewhere."""
        q = self.slot_values[self.slot][:, free, self.col["leave"]].mean(1)
        return torch.where(self.valid[:, free].all(1), q, torch.full_like(q, math.nan))

    def unscored(self, free: torch.Tensor) -> torch.Tensor:
        """How many of the free sites of each unit's current state are not known yet."""
        return (~self.valid[:, free]).sum(1)

    def state(self) -> dict:
        return {"fields": self.fields, "keyed": self.keyed, "slot_valid": self.slot_valid,
                "slot_values": self.slot_values, "slot": self.slot, "used": self.used, "key_of": self.key_of,
                "tick": self.tick}

    @classmethod
    def restore(cls, saved: dict) -> "SiteCache":
        if "slot" not in saved:                        # a checkpoint from before slots: one per chain
            out = cls(*saved["valid"].shape, saved["fields"])
            out.slot_valid, out.slot_values = saved["valid"], saved["values"]
            return out
        out = cls(0, saved["slot_valid"].shape[1], saved["fields"])
        out.keyed = saved["keyed"]
        out.slot_valid, out.slot_values = saved["slot_valid"], saved["slot_values"]
        out.slot, out.used, out.key_of, out.tick = saved["slot"], saved["used"], list(saved["key_of"]), saved["tick"]
        out.index = {k: s for s, k in enumerate(out.key_of) if k is not None}
        return out


def chain_cache(states: torch.Tensor) -> SiteCache:
    """The cache of a batch of chains: a slot per state, shared by the chains at it and kept after
    they leave (as many states as fit in :data:`STATE_MEMORY`, up to :data:`MEMO_STATES`)."""
    b, n = states.shape
    per_state = n * (8 * len(CHAIN_FIELDS) + 1)
    cache = SiteCache(b, n, CHAIN_FIELDS, capacity=min(MEMO_STATES, max(1, STATE_MEMORY // per_state)))
    cache.enter(torch.arange(b), states)
    return cache


def row_flops(lm, n: int) -> float:
    """FLOPs of one row of the encoder at content length n: 2 per weight outside the embedding
    tables (a lookup costs nothing) per position, with the special tokens."""
    tables = {id(p) for mod in lm.model.modules() if isinstance(mod, torch.nn.Embedding) for p in mod.parameters()}
    body = sum(p.numel() for p in lm.model.parameters() if id(p) not in tables)
    return 2.0 * body * (n + len(lm.prefix_ids) + len(lm.suffix_ids))


def _in_rows(scorer: Scorer, n: int, override: str, table: float, work: str) -> float:
    """A cost in rows of the scorer: its own ``override`` attribute if it states one, ``table``
    for a scorer without a model, else the device's time for ``work`` (:data:`DEVICE_COSTS`)
    over a row's time."""
    given = getattr(scorer, override, None)
    if given is not None:
        return float(given)
    lm = getattr(scorer, "lm", None)
    if lm is None:
        return table
    costs = DEVICE_COSTS["cuda" if getattr(lm.device, "type", str(lm.device)) == "cuda" else "cpu"]
    return costs[work] * costs["flops"] / row_flops(lm, n)


def round_cost(scorer: Scorer, n: int) -> float:
    """The fixed cost of one round of the engine (a scorer call), in rows of the scorer: what the
    auto mode weighs against the rows it saves (``round_cost_rows`` overrides). For a model on a
    CPU about 5 rows for rxnfp BERT at n = 20 and 2 at n = 64 (measured: 5 and 1), 3 for the
    trained English MLM at n = 20 (measured: 5), 1.3 for AntiBERTy (measured: 2); a table's rows
    cost next to nothing, so a round is worth :data:`TABLE_ROUND_COST` of them. Only ratios of
    these constants reach the auto mode's choice, which sees counts, never clocks."""
    return _in_rows(scorer, n, "round_cost_rows", TABLE_ROUND_COST, "round")


def summary_cost(scorer: Scorer, n: int) -> float:
    """What the memo and jump modes spend per row they score beyond the pass itself (the cache's
    summaries of the row and the Python work of their rounds), in rows (``summary_cost_rows``
    overrides): for a model on a CPU 0.19 for rxnfp BERT at n = 20 (measured about 0.1), 0.11 for
    the trained English MLM (measured 0.1); about a row of a table."""
    return _in_rows(scorer, n, "summary_cost_rows", 1.0, "row_extra")


def step_cost(scorer: Scorer, n: int) -> float:
    """What a memo chain-step costs beyond its rows and rounds (its draws and cache reads), in rows
    (``step_cost_rows`` overrides): next to nothing for a model (3e-4 rows for rxnfp BERT at
    n = 20), :data:`TABLE_STEP_COST` of a table, whose rows are as cheap as the step. It is what
    makes a jump, which spends nothing on a step that changes nothing, beat a memo whose cache
    answers every step."""
    return _in_rows(scorer, n, "step_cost_rows", TABLE_STEP_COST, "step")


@dataclass
class Policy:
    """Which engine mode the next segment of a run (or of a coupling) uses.

    A fixed mode runs as one segment. ``auto`` starts with a short memo segment (a look of
    :data:`AUTO_FIRST` steps) and then, after every segment, estimates the cost per unit-step
    (chain or pair) of each mode from what the segment showed, in rows of the scorer plus the
    fixed cost K of a round (``round_cost``) over the k live units, and picks the cheapest. With
    q_b each unit's observed move rate (after a jump segment, its exact leave probability where
    its current state is fully scored) and m free sites:

    - plain: r + K/k (k rows and one round a step);
    - memo: r rho (1 + c) + e + (K/k) R, with rho the memo's rows per unit-step (observed, or
      m q / (1 + (m - 1) q), the expected number of distinct sites scored per visit over the
      expected holding time, for a unit that finds nothing of its state remembered; for the
      look itself, the lesser of the two, since its rows are mostly the warm-up of a cache that
      starts empty unless units share states), e its own work per unit-step (``step_cost``) and
      R its rounds per step: for chains, which batch their rows across steps, observed (with
      the observed rho), or min(1, MEMO_CALL rho); for pairs, which step together
      (``stepwise``), PAIR_CALL (1 - exp(-k rho)) + PAIR_STEP;
    - jump: r (m mean(q) + u/L') (1 + c) + (K/k)(JUMP_ROUNDS max(q) + S) (a round per move of
      the busiest unit; u the mean number of free sites of the units' current states not yet
      scored, which a jump must score before its first move, spread over the L' steps of the
      jump segment it would run; and a round per segment, S = log2(W/L' + 1)/W per step for
      segments doubling from L' over a memo window of W steps: priced over the same stretch
      whether the run is in jump or not, so a trap where a jump pays only over long segments
      does not send the run back and forth between jump and memo);

    r rows per site (1 for chains, 2 for pairs), c what the memo and jump modes spend per row
    beyond the pass (``summary_cost``). Past the look it leaves the mode it ran only for one
    estimated at most HYSTERESIS of its cost (estimates of q are noisy); the look itself commits
    to nothing, so a run whose rows memo cannot save (rho near 1, where memo's extra work per row
    makes it slower than plain) goes to plain at once. The rule only sees counts, never clocks,
    so a run stays exactly repeatable. A jump chosen again runs twice as long a segment as before
    (up to :data:`AUTO_JUMP_MAX`); memo chosen again runs a whole :data:`MEMO_WINDOW`. A memo
    segment ends with its chains in step, and each segment costs as many rounds as its busiest
    chain has steps that need a row, so segments that doubled from the first look (4, 8, 16, ...
    steps) cost more rounds than one stretch: on rxnfp BERT at n = 20, T = 0.25 (16 burned-in
    chains, 400 steps) auto made 182 scorer calls where memo made 126, for the same 879 rows;
    with a whole window after the look, 126."""

    mode: str
    m: int
    rows_per_site: int = 1
    round_cost: float = 1.0
    row_extra: float = 0.0
    jump_ok: bool = True
    step_cost: float = 0.0
    stepwise: bool = False
    current: str = "memo"
    length: int = AUTO_FIRST
    history: list = dataclasses.field(default_factory=list)   # (mode, steps) of each auto segment

    def next(self) -> tuple[str, int]:
        if self.mode != "auto":
            return self.mode, 1 << 62
        return self.current, self.length

    def observe(self, mode: str, steps: int, moves: torch.Tensor, rows: int, q_now: torch.Tensor | None,
                unknown: torch.Tensor | None = None, calls: int | None = None) -> None:
        """Take what a segment of ``steps`` steps in ``mode`` showed (each unit's moves, the rows
        and scorer ``calls`` it made, exact leave probabilities and unscored sites where known)
        and choose the next segment's mode and length. ``calls`` is read only for memo chains;
        pairs step together and their rounds follow from rho."""
        if self.mode != "auto":
            return
        look = not self.history
        if self.history and self.history[-1][0] == mode:
            self.history[-1][1] += steps
        else:
            self.history.append([mode, steps])
        k = len(moves)
        if k == 0 or steps == 0:
            return
        q = moves.double() / steps
        if q_now is not None:                 # exact where a unit's current state is fully scored
            q = torch.where(torch.isnan(q_now), q, q_now.double())
        m, r, K, c = self.m, self.rows_per_site, self.round_cost, self.row_extra
        cold = float((m * q / (1 + (m - 1) * q)).mean())
        seen = rows / (r * k * steps) if mode == "memo" else math.inf
        observed = mode == "memo" and not (look and seen > cold)   # the look's rows: mostly warm-up
        rho = seen if observed else cold
        if self.stepwise:
            rounds = PAIR_CALL * (1 - math.exp(-k * rho)) + PAIR_STEP
        elif observed and calls is not None:
            rounds = calls / steps
        else:
            rounds = min(1.0, MEMO_CALL * rho)
        cost = {"plain": r + K / k, "memo": r * rho * (1 + c) + self.step_cost + K / k * rounds}
        if self.jump_ok:
            span = min(2 * self.length, AUTO_JUMP_MAX) if self.current == "jump" else AUTO_SEGMENT
            fill = 0.0 if unknown is None else float(unknown.double().mean()) / span
            segments = math.log2(MEMO_WINDOW / span + 1) / MEMO_WINDOW   # doubling from span, over a window
            cost["jump"] = (r * (m * float(q.mean()) + fill) * (1 + c)
                            + K / k * (JUMP_ROUNDS * min(1.0, float(q.max())) + segments))
        best = min(cost, key=cost.get)
        if not look and mode in cost and cost[best] > HYSTERESIS * cost[mode]:
            best = mode                       # not worth a switch: estimates of q are noisy
        if best == self.current and best in ("jump", "memo"):  # longer memo windows batch more rows per round
            self.length = min(2 * self.length, AUTO_JUMP_MAX) if best == "jump" else MEMO_WINDOW
        else:
            self.length = AUTO_SEGMENT
        self.current = best


def _take(material: tuple, j: torch.Tensor) -> tuple:
    return tuple(t[j.to(t.device)] for t in material)


def _groups(idx: torch.Tensor, sizes: torch.Tensor, budget: int):
    """Consecutive runs of ``idx`` whose sizes add up to at most ``budget`` (one at least)."""
    start, total = 0, 0
    sizes = sizes.tolist()
    for i, s in enumerate(sizes):
        if i > start and total + s > budget:
            yield idx[start:i]
            start, total = i, 0
        total += s
    if start < len(sizes):
        yield idx[start:]


def jump_round(act: torch.Tensor, clock: torch.Tensor, t_end: int, u: torch.Tensor, cache: SiteCache,
               free: torch.Tensor, material: Callable, summarize: Callable, move: Callable, *, outputs: int,
               rows_per_site: int, max_rows: int, carry: Callable | None = None):
    """One jump for every unit in ``act``: fill its unknown free sites (batched passes of whole
    units, at most ``max_rows`` rows each unless one unit needs more), draw its holding time,
    and, where the move falls at or before ``t_end``, the site and the new token(s).

    ``material(units, sites)`` scores (unit, site) pairs; ``summarize(material)`` gives the
    cache's fields (with ``leave``); ``move(material, u)`` draws the new token(s) given that the
    unit leaves its current tokens at that site. ``u`` holds the round's uniforms (hold, site,
    then those of ``move``), drawn before any pass so that the grouping changes nothing.
    ``carry(material, new)``, where given, gives the cache's fields of the moving site read at the
    new token(s) (:func:`carry`): the row a unit moves by is the conditional at that site of the
    state it moves to.
    Returns (positions in act that move, their step, site, tuple of new token positions, rows,
    and the carried fields of the movers: a dict of tensors, or None without ``carry``)."""
    k, n = len(act), cache.valid.shape[1]
    known = cache.valid[act][:, free]
    t_next = torch.full((k,), math.inf, dtype=torch.float64)
    site = torch.full((k,), -1, dtype=torch.long)
    moved = torch.zeros(k, dtype=torch.bool)
    new = [torch.full((k,), -1, dtype=torch.long) for _ in range(outputs)]
    kept = {f: torch.zeros(k, dtype=torch.float64) for f in cache.fields} if carry is not None else None
    rows = 0

    def resolve(g):
        leave = cache.leave(act[g], free)
        t = clock[act[g]] + holding_time(leave.mean(1), u[g, 0])
        go = t <= t_end
        t_next[g], moved[g] = t, go
        site[g[go]] = free[draw_from(leave[go], u[g[go], 1])]
        return g[go]

    def write(g, material_g):
        if len(g) == 0:
            return
        toks = move(material_g, u[g, 2:])
        for out, tok in zip(new, toks):
            out[g] = tok.cpu()
        if carry is not None:
            for f, v in carry(material_g, toks).items():
                kept[f][g] = v.to(torch.float64).cpu()

    later = []
    fill = (~known).any(1).nonzero().flatten()
    first, group = _first_of_each(cache.slot[act[fill]])   # units at one state share its slot: score it once
    lead = first[group] == torch.arange(len(fill))
    fill, follow = fill[lead], fill[~lead]
    for g in _groups(fill, (~known[fill]).sum(1) * rows_per_site, max_rows):
        gi, gs = (~known[g]).nonzero(as_tuple=True)
        units, sites = act[g][gi], free[gs]
        mat = material(units, sites)
        rows += len(units) * rows_per_site
        cache.store(units, sites, summarize(mat))
        go = resolve(g)
        where = torch.full((k, n), -1, dtype=torch.long)
        where[g[gi], sites] = torch.arange(len(units))
        j = where[go, site[go]]
        write(go[j >= 0], _take(mat, j[j >= 0]))
        later.append(go[j < 0])
    full = torch.cat([known.all(1).nonzero().flatten(), follow])
    if len(full):
        later.append(resolve(full))
    later = torch.cat(later) if later else torch.zeros(0, dtype=torch.long)
    for g in _groups(later, torch.full((len(later),), rows_per_site), max_rows):
        write(g, material(act[g], site[g]))
        rows += len(g) * rows_per_site
    mv = moved.nonzero().flatten()
    return (mv, t_next[mv], site[mv], tuple(out[mv] for out in new), rows,
            None if kept is None else {f: v[mv] for f, v in kept.items()})


def _chain_summaries(s: torch.Tensor, cdf: torch.Tensor, pos: torch.Tensor, spec: ChainSpec) -> dict:
    """What a chain's cache keeps of a row: the total of the cdf, and at the current token
    (``pos``; -1: not in A) and at each of the row's :data:`MOVE_TOKENS` highest-scoring tokens
    (``pos0``, ...) the keep-interval (lo, hi) and, where the run reads them, the leave
    probability (all from one softmax) and the score gap."""
    k = min(MOVE_TOKENS, s.shape[-1]) if len(s) else 0
    cols = pos.to(s.device)[:, None]
    if k:
        cols = torch.cat([cols, torch.topk(s, k, dim=-1).indices], 1)
    leave = leave_probability(s, cols, spec.temperature).cpu() if _reads_leave(spec) else None
    out = {"tot": cdf[:, -1].cpu()}
    for j in range(cols.shape[1]):
        tag = "" if j == 0 else str(j - 1)
        out[f"lo{tag}"], out[f"hi{tag}"], _ = keep_interval(cdf, cols[:, j])
        if j:
            out[f"pos{tag}"] = cols[:, j].cpu()
        if leave is not None:
            out[f"leave{tag}"] = leave[:, j]
        if spec.record_gaps:
            out[f"gap{tag}"] = score_gap(s, cols[:, j].clamp(min=0)).float().cpu()
    return out


def _reads_leave(spec: ChainSpec) -> bool:
    """Whether a run can jump, the only reader of the leave probabilities a cache keeps."""
    return spec.mode in ("jump", "auto") and not spec.record_gaps


def _moved_summaries(rec: dict, j: torch.Tensor) -> tuple[dict, torch.Tensor]:
    """A row's cached fields (``rec``: :meth:`SiteCache.at`, all fields) read at its ``j``-th most
    likely token instead of the current one (the carry of a move drawn from the cache), and that
    token's position in A."""
    rows = torch.arange(len(j))
    out = dict(rec)
    for f in ("lo", "hi", "leave", "gap"):
        out[f] = torch.stack([rec[f"{f}{k}"] for k in range(MOVE_TOKENS)], 1)[rows, j]
    return out, torch.stack([rec[f"pos{k}"] for k in range(MOVE_TOKENS)], 1)[rows, j].long()


def cached_moves(cache: SiteCache, units: torch.Tensor, sites: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """For steps (unit, site, uniform) whose row is not at hand: the rank (0 .. MOVE_TOKENS - 1)
    of the remembered token whose interval holds the uniform (the token the sampler would draw
    from the row), or -1 where the site is not known or the uniform falls elsewhere."""
    if MOVE_TOKENS == 0:
        return torch.full_like(units, -1)
    rec = cache.at(units, sites, ("tot", *(f"{f}{k}" for k in range(MOVE_TOKENS) for f in ("lo", "hi"))))
    v = u * rec["tot"]
    hit = torch.stack([(rec[f"lo{k}"] <= v) & (v < rec[f"hi{k}"]) for k in range(MOVE_TOKENS)], 1)
    hit &= cache.valid[units, sites][:, None]
    return torch.where(hit.any(1), hit.float().argmax(1), torch.full_like(units, -1))


def carry(cache: SiteCache, units: torch.Tensor, sites: torch.Tensor, s: torch.Tensor, cdf: torch.Tensor,
          idx: torch.Tensor, rows: torch.Tensor, spec: ChainSpec) -> None:
    """Units that just moved at ``sites`` (now in their new states' slots) keep the row they moved by.

    The conditional at site i does not depend on x_i, so the row scored at site i of the old
    state is the conditional at site i of the new one, which differs from it only there: its
    fields are those of that row read at the new token (position ``idx``). ``rows`` picks the
    movers' rows out of ``s``, ``cdf`` and ``idx``. Sites the new state already knows (a state
    scored before) are left as they are (:meth:`SiteCache.fill`)."""
    j = rows.nonzero().flatten().to(s.device)
    cache.fill(units, sites, _chain_summaries(s[j], cdf[j], idx[j], spec))


def _draws(b: int, n: int, spec: ChainSpec, gen: torch.Generator):
    sites = torch.randint(spec.prefix_len, n, (b,), generator=gen)
    return sites, torch.rand(b, generator=gen, dtype=torch.float64)


def _plain_step(scorer: Scorer, states: torch.Tensor, spec: ChainSpec, gen: torch.Generator):
    b, n = states.shape
    sites, u = _draws(b, n, spec, gen)
    s = scorer.scores(states, sites)
    idx = sample_index(s, spec.temperature, u)
    rows = torch.arange(b)
    old = states[rows, sites]
    states[rows, sites] = scorer.vocab.ids.to(idx.device)[idx].to(states.device)
    gaps = score_gap(s, idx).float().cpu() if spec.record_gaps else None
    return sites, gaps, states[rows, sites] != old


def step(scorer: Scorer, states: torch.Tensor, spec: ChainSpec, gen: torch.Generator):
    """One Glauber step for every chain, in place. Returns (sites, gaps or None)."""
    sites, gaps, _ = _plain_step(scorer, states, spec, gen)
    return sites, gaps


def _first_of_each(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the position of each distinct label's first entry, each entry's index into those)."""
    _, group = torch.unique(labels, return_inverse=True)
    first = torch.full((int(group.max()) + 1 if len(group) else 0,), len(labels), dtype=torch.long)
    return first.scatter_reduce(0, group, torch.arange(len(labels)), reduce="amin"), group


def _unique_rows(scorer: Scorer, states: torch.Tensor, cache: SiteCache, units: torch.Tensor, sites: torch.Tensor):
    """The scores at the (unit, site) pairs, with one row per distinct (state, site): units that
    share a state's slot share its rows. Returns (scores, rows scored)."""
    first, group = _first_of_each(cache.slot[units] * states.shape[1] + sites)
    if len(first) == len(units):
        return scorer.scores(states[units], sites), len(units)
    s = scorer.scores(states[units[first]], sites[first])
    return s[group.to(s.device)], len(first)


def memo_segment(scorer: Scorer, states: torch.Tensor, spec: ChainSpec, gen: torch.Generator, cache: SiteCache,
                 t0: int, t1: int):
    """Steps t0 + 1 .. t1 of the memo mode, with each chain on its own clock (``states`` in place).

    The plain engine's draws for the whole stretch come first, in its order (a site, then a
    uniform, per step), so the generator ends where ``t1 - t0`` plain steps leave it. A chain's
    steps depend only on its own draws and state, so it can run ahead through every step its
    cache answers (site remembered, uniform in the keep-interval) and wait at the first step that
    needs its row; each round scores the rows of every waiting chain in one call. A step needs a
    row where the site is not remembered or the uniform leaves the keep-interval (the chain
    moves), so the rows, the moves and the trajectory are those of the plain engine, which scores
    every chain at every step; the rounds hold up to B rows each, where a step-by-step memo would
    make one small call per step, and the Python work is per round rather than per step.

    A round takes each waiting chain's next step that needs a row, wherever it lies in the
    stretch, so the stretch costs as many rounds as its busiest chain has such steps. In a trap
    the needs come in bursts (a chain that has just moved needs a row at most of its next steps,
    the others at few), and a longer stretch evens them out over the chains: on rxnfp BERT's
    perfect traps at n = 20 (16 chains, 4000 steps, T = 0.25), 643 calls of 2.92 rows each with
    stretches of 256 steps, 332 calls of 5.66 rows with 4096, for the same rows.

    A round also scores, for the chains that wait at a site their state does not know, some of
    the next sites they will need in that state (:func:`ahead` inside, up to :data:`MEMO_AHEAD`
    each and as many rows in all as there are chains): rows that are functions of the state, so
    the trajectory is unchanged; a chain that moves before it reaches them leaves them to its old
    state, for any later visit. On a CPU a call costs a fixed time of a few rows (rxnfp BERT at
    n = 20: about 7.6 ms a call and 1.75 ms a row), so rounds of a few rows each cost up to twice
    as much per row as a plain step's.

    Returns (sites (S, B) long, gaps (S, B) or None, moves: dict of arrays time, chain, site and
    token in the order made, rows scored, scorer calls made)."""
    b, n = states.shape
    S = t1 - t0
    drawn = [_draws(b, n, spec, gen) for _ in range(S)]
    sites = torch.stack([d[0] for d in drawn]) if S else torch.zeros((0, b), dtype=torch.long)
    u = torch.stack([d[1] for d in drawn]) if S else torch.zeros((0, b), dtype=torch.float64)
    gaps = torch.full((S, b), math.nan, dtype=torch.float32) if spec.record_gaps else None
    ptr = torch.zeros(b, dtype=torch.long)              # the next step (0-based in the stretch) of each chain
    events, rows, calls = [], 0, 0
    fresh_steps, fresh_moves = 0, 0                     # steps at sites not known yet, and how many of them moved
    nothing = (torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long))

    def read(chains: torch.Tensor, first: torch.Tensor, width: int, fields: tuple[str, ...]):
        """Each chain's steps first, first + 1, ... (``width`` of them, (k, width), clamped to the
        stretch): the steps, whether each lies inside the stretch, its site, whether that site is
        known in the chain's current state, whether the cache says it keeps the token there, and
        the named cached fields."""
        at = first[:, None] + torch.arange(width)[None, :]
        inside = at < S
        at = at.clamp(max=S - 1)
        col = chains[:, None].expand_as(at)
        st = sites[at, col]
        known = cache.valid[col, st]
        c = cache.at(col, st, ("lo", "hi", "tot", *fields))
        v = u[at, col] * c["tot"]
        return at, inside, st, known, known & (c["lo"] <= v) & (v < c["hi"]), c

    def ahead(chains: torch.Tensor, at: torch.Tensor, budget: int):
        """(chain, site) pairs to score with this round's needs, at most ``budget``: each chain's
        next sites that its current state does not know, in step order up to the first step its
        cache says moves, and only as deep as the chain is likely still to be in this state there
        ((1 - m)^depth >= AHEAD_USE, with m the share of the steps at unknown sites that moved so
        far); the shallowest first across chains. A round then holds at most as many rows as a
        plain step, and a chain in a state it has just reached scores the sites it will visit
        there in a few rounds rather than one round per site."""
        m = (fresh_moves + 1) / (fresh_steps + 2)
        depth = min(MEMO_AHEAD, int(math.log(AHEAD_USE) / math.log1p(-m)))
        if budget <= 0 or depth < 1 or len(chains) == 0:
            return nothing
        _, inside, st, known, kept, _ = read(chains, at + 1, AHEAD_SCAN, ())
        stop = ((known & ~kept) | ~inside).cumsum(1) > 0
        cand = ~known & ~stop & (st != sites[at, chains][:, None])
        w = torch.arange(AHEAD_SCAN)
        cand &= ~((st[:, :, None] == st[:, None, :]) & (w[None, :] < w[:, None])[None] & cand[:, None, :]).any(2)
        level = cand.cumsum(1)
        cand &= level <= depth
        k_i, j_i = cand.nonzero(as_tuple=True)
        pick = torch.argsort(level[k_i, j_i] * len(chains) + k_i, stable=True)[:budget]
        return chains[k_i[pick]], st[k_i[pick], j_i[pick]]

    def advance(chains: torch.Tensor) -> None:
        """Move each chain's pointer past the steps its cache answers, to its next step that needs a row.

        It reads each chain's steps from its pointer on, in blocks that double while the chain
        finds nothing to score (16 steps, then 32, ...): a round costs about the steps the
        chains skip, not the window's length, so a long window costs no more per step."""
        width = MEMO_SCAN
        while len(chains):
            at, inside, _, _, hit, c = read(chains, ptr[chains], width, ("gap",))   # (k, width) steps
            hit &= inside
            found = (~hit & inside).any(1)
            first = torch.where(found, (~hit).float().argmax(1), inside.sum(1))   # skipped steps in the block
            if gaps is not None:                                     # the remembered gaps of the skipped steps
                k_i, j_i = (hit & (torch.arange(width)[None, :] < first[:, None])).nonzero(as_tuple=True)
                gaps[at[k_i, j_i], chains[k_i]] = c["gap"][k_i, j_i].float()
            ptr[chains] += first
            chains = chains[~found & (ptr[chains] < S)]
            width *= 2

    advance(torch.arange(b))
    while True:
        wait = (ptr < S).nonzero().flatten()
        if len(wait) == 0:
            break
        at = ptr[wait]
        # a step at a known site whose uniform falls in a remembered token's interval moves there
        # without its row (the sampler would draw that token from it)
        rank = cached_moves(cache, wait, sites[at, wait], u[at, wait])
        if (rank >= 0).any():
            c, ci = wait[rank >= 0], at[rank >= 0]
            sc = sites[ci, c]
            rec, new = _moved_summaries(cache.at(c, sc), rank[rank >= 0])
            tok = scorer.vocab.ids[new].to(states.device)
            if gaps is not None:
                gaps[ci, c] = rec["gap"].float()
            states[c, sc] = tok
            cache.enter(c, states[c])
            cache.fill(c, sc, rec)
            events.append(torch.stack([t0 + ci + 1, c, sc, tok.cpu()]))
            ptr[c] += 1
            advance(c)
            wait, at = wait[rank < 0], at[rank < 0]
            if len(wait) == 0:
                continue
        sn, uw = sites[at, wait], u[at, wait]
        fresh = ~cache.valid[wait, sn]
        more_c, more_s = ahead(wait[fresh], at[fresh], b - len(wait))
        units, where = torch.cat([wait, more_c]), torch.cat([sn, more_s])
        s_all, r = _unique_rows(scorer, states, cache, units, where)
        rows, calls = rows + r, calls + 1
        cdf_all = _cdf(s_all, spec.temperature)
        # every row scored is the conditional of the chain's state before this step: remember it
        pos_all = scorer.vocab.index_of(states[units, where])
        cache.store(units, where, _chain_summaries(s_all, cdf_all, pos_all, spec))
        s, cdf, pos = s_all[:len(wait)], cdf_all[:len(wait)], pos_all[:len(wait)]
        idx = _search(cdf, uw)
        kept = idx.cpu() == pos
        fresh_steps += int(fresh.sum())
        fresh_moves += int((fresh & ~kept).sum())
        if gaps is not None:
            gaps[at, wait] = score_gap(s, idx).float().cpu()
        go = ~kept
        if go.any():
            mv = wait[go]
            tok = scorer.vocab.ids.to(idx.device)[idx[go.to(idx.device)]].to(states.device)
            states[mv, sn[go]] = tok
            cache.enter(mv, states[mv])
            carry(cache, mv, sn[go], s, cdf, idx, go, spec)
            events.append(torch.stack([t0 + at[go] + 1, mv, sn[go], tok.cpu()]))
        ptr[wait] += 1
        advance(wait)
    ev = torch.cat(events, 1) if events else torch.zeros((4, 0), dtype=torch.long)
    order = torch.argsort(ev[0], stable=True)
    ev = ev[:, order].numpy()
    return sites, gaps, dict(zip(("time", "chain", "site", "token"), ev)), rows, calls


def jump_segment(scorer: Scorer, states: torch.Tensor, cache: SiteCache, spec: ChainSpec, gen: torch.Generator,
                 t0: int, t1: int, max_rows: int | None = None, rounds: int | None = None):
    """Every chain from its state at step t0 to its state at step t1, by jumps on its own clock
    (``states`` in place). Returns the moves, a dict of arrays time, chain, site, token in the
    order drawn, and the rows scored. With ``rounds``, it stops after that many rounds of jumps:
    ``rounds=1`` gives each chain's first move up to t1 and nothing after it."""
    b, n = states.shape
    free = torch.arange(spec.prefix_len, n)
    T = spec.temperature
    ids = scorer.vocab.ids
    max_rows = max_rows or max(1, ROW_BUDGET // scorer.vocab.size)

    def material(chains, sites):
        return scorer.scores(states[chains], sites), scorer.vocab.index_of(states[chains, sites])

    def summarize(mat):
        s, pos = mat
        return _chain_summaries(s, _cdf(s, T), pos, spec)

    def move(mat, u):
        s, pos = mat
        return (draw_from(restricted(torch.softmax(s.double() / T, -1), pos), u[:, 0]),)

    def moved_to(mat, new):
        return summarize((mat[0], new[0]))

    clock = torch.full((b,), float(t0), dtype=torch.float64)
    events, rows = [], 0
    while rounds is None or len(events) < rounds:
        act = (clock < t1).nonzero().flatten()
        if len(act) == 0:
            break
        u = torch.rand((len(act), 3), generator=gen, dtype=torch.float64)
        mv, t_next, site, (tok,), r, carried = jump_round(act, clock, t1, u, cache, free, material, summarize,
                                                          move, outputs=1, rows_per_site=1, max_rows=max_rows,
                                                          carry=moved_to)
        rows += r
        chains = act[mv]
        states[chains, site] = ids[tok].to(states.device)
        cache.enter(chains, states[chains])
        cache.fill(chains, site, carried)
        clock[act] = float(t1)
        clock[chains] = t_next
        events.append(torch.stack([t_next.long(), chains, site, ids[tok]]))
    ev = torch.cat(events, 1).numpy() if events else np.zeros((4, 0), np.int64)
    return dict(zip(("time", "chain", "site", "token"), ev)), rows


@dataclass
class FirstChanges:
    """Each chain's first change of state (:func:`first_changes`)."""

    steps: np.ndarray            # (B,) the step at which chain b first changed; 0 where censored
    censored: np.ndarray         # (B,) bool: no change within the budget
    states: np.ndarray           # (B, n) the state each chain moved to (its start where censored)
    rows: int                    # rows scored (one masked sequence each)


def first_changes(scorer: Scorer, init: torch.Tensor, spec: ChainSpec, seed: int, *,
                  max_rows: int | None = None) -> FirstChanges:
    """The step at which each chain first leaves its start, within ``spec.steps`` steps, by the jump
    engine: each chain's free sites are scored once (batched passes), its holding time is drawn
    from the geometric law with its leave probability, and its move is drawn where that time is
    within the budget. A hold of millions of steps costs m rows, where the plain engine scores a
    row per step (chains that start at one state share its m rows, and a chain that moves scores
    the row it draws its new token from); a chain whose holding time exceeds the budget is censored.

    The mode in ``spec`` is not read (this is the jump engine). Same seed: the first moves of
    ``run(scorer, init, spec, seed)`` in mode ``jump`` with ``checkpoint_every >= spec.steps``,
    whose ``sites[t - 1, b]`` is the first entry >= 0 of chain b at t = its first step of change."""
    init = torch.as_tensor(init, dtype=torch.long)
    spec = dataclasses.replace(spec, mode="jump")
    validate(scorer, init, spec)
    gen = torch.Generator().manual_seed(int(seed))
    states = init.clone()
    cache = chain_cache(states)
    ev, rows = jump_segment(scorer, states, cache, spec, gen, 0, spec.steps, max_rows, rounds=1)
    at = np.zeros(len(states), np.int64)
    at[ev["chain"]] = ev["time"]
    return FirstChanges(steps=at, censored=at == 0, states=states.numpy(), rows=int(rows))


class _Recorder:
    """One chunk's records: states at the grid, the site of every step (-1: held in a jump) and gaps."""

    def __init__(self, start: int, stop: int, every: int, chains: int, gaps: bool):
        self.start, self.every = start, every
        self.steps, self.states = [], []
        self.sites = np.full((stop - start, chains), -1, np.int32)
        self.gaps = np.full((stop - start, chains), np.nan, np.float32) if gaps else None

    def step(self, t: int, states: torch.Tensor, sites: torch.Tensor, gaps: torch.Tensor | None) -> None:
        self.sites[t - self.start - 1] = sites.numpy()
        if gaps is not None:
            self.gaps[t - self.start - 1] = gaps.numpy()
        if t % self.every == 0:
            self.steps.append(t)
            self.states.append(states.numpy().copy())

    def jumps(self, t0: int, t1: int, before: np.ndarray, ev: dict) -> None:
        order = np.argsort(ev["time"], kind="stable")
        time, chain, site, token = (ev[k][order] for k in ("time", "chain", "site", "token"))
        self.sites[time - self.start - 1, chain] = site
        state, k = before.copy(), 0
        for r in range((t0 // self.every + 1) * self.every, t1 + 1, self.every):
            while k < len(time) and time[k] <= r:
                state[chain[k], site[k]] = token[k]
                k += 1
            self.steps.append(r)
            self.states.append(state.copy())

    def drawn(self, t0: int, t1: int, before: np.ndarray, sites: torch.Tensor, gaps: torch.Tensor | None,
              ev: dict) -> None:
        """Steps t0 + 1 .. t1 run on the chains' own clocks with every site drawn (memo): the
        states at the grid from the moves, and every step's site and gap."""
        self.jumps(t0, t1, before, ev)
        self.sites[t0 - self.start:t1 - self.start] = sites.numpy()
        if gaps is not None:
            self.gaps[t0 - self.start:t1 - self.start] = gaps.numpy()

    def block(self, shape: tuple) -> dict:
        block = {"steps": np.array(self.steps, dtype=np.int64),
                 "states": np.stack(self.states) if self.states else np.zeros((0,) + shape, np.int64),
                 "sites": self.sites}
        if self.gaps is not None:
            block["gaps"] = self.gaps
        return block


def _fingerprint(scorer: Scorer, init: torch.Tensor, spec: ChainSpec, seed: int, model_id: str,
                 legacy: bool = False) -> str:
    params = asdict(spec)
    if legacy:                          # a run begun before the engine had modes
        params.pop("mode")
    h = hashlib.sha1()
    h.update(json.dumps([params, seed, model_id, scorer.vocab.key()], sort_keys=True).encode())
    h.update(SAMPLER.encode())          # a checkpoint of another sampler would continue another trajectory
    h.update(init.cpu().numpy().astype(np.int64).tobytes())
    return h.hexdigest()


def _save_atomic(obj, path: Path) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def _saved_run(folder: Path) -> dict | None:
    ckpt = Path(folder) / "checkpoint.pt"
    return torch.load(ckpt, weights_only=False) if ckpt.is_file() else None


def _resume_or_set_aside(out_dir: Path, wanted: tuple[str, ...]) -> dict | None:
    """The checkpoint to resume in ``out_dir`` if it is of this run (its fingerprint one of
    ``wanted``), else None, with ``out_dir`` ready for a fresh start.

    A run of other parameters, seed, model or starts is not resumed and not deleted: it is moved
    aside to ``<out_dir>.old-<its fingerprint>`` beside ``out_dir`` (one such folder is kept: the
    one moved before goes), and one line says so. A run moved aside earlier whose fingerprint is
    wanted comes back and resumes, so going back to the parameters of the run before costs
    nothing. Chunks without a checkpoint (a run killed before its first) are dropped."""
    here = _saved_run(out_dir)
    if here is not None and here["fingerprint"] in wanted:
        return here
    aside = sorted(out_dir.parent.glob(f"{out_dir.name}.old-*")) if out_dir.parent.is_dir() else []
    back = next((p for p in aside if p.is_dir() and (_saved_run(p) or {}).get("fingerprint") in wanted), None)
    said = []
    if here is not None:
        for old in aside:
            if old != back:
                shutil.rmtree(old) if old.is_dir() else old.unlink()
        moved = out_dir.with_name(f"{out_dir.name}.old-{here['fingerprint'][:12]}")
        os.replace(out_dir, moved)
        said.append(f"{out_dir} held a run with other parameters, seed, model or starts (stopped at step "
                    f"{here['step']}); it is moved to {moved.name}")
    elif back is not None and out_dir.exists():
        shutil.rmtree(out_dir)
    if back is not None:
        os.replace(back, out_dir)
        said.append(f"resuming the run of these parameters moved aside before ({back.name})")
    elif said:
        said.append("these chains start afresh")
    if said:
        print("; ".join(said), flush=True)
    return _saved_run(out_dir) if back is not None else None


def run(scorer: Scorer, init: torch.Tensor, spec: ChainSpec, seed: int, *, out_dir: str | Path | None = None,
        model_id: str = "", progress: bool = False,
        on_checkpoint: Callable[[int], None] | None = None, max_rows: int | None = None) -> ChainRun:
    """Run ``init.shape[0]`` chains for ``spec.steps`` steps; resume from ``out_dir`` if it holds a checkpoint.

    ``on_checkpoint(step)`` is called after each checkpoint is written (the tests use it to
    simulate a kill). A checkpoint written before the engine had modes resumes in the plain
    mode (the returned ``spec`` says so). ``max_rows`` bounds the rows of a jump's scorer calls.
    """
    init = torch.as_tensor(init, dtype=torch.long)
    validate(scorer, init, spec)
    fp = _fingerprint(scorer, init, spec, seed, model_id)
    gen = torch.Generator().manual_seed(int(seed))
    states = init.clone()
    b, n = states.shape
    free = torch.arange(spec.prefix_len, n)
    done = 0
    chunks: list[dict] = []
    ckpt = None
    cache = chain_cache(states)

    def policy_for(mode):
        return Policy(mode=mode, m=len(free), round_cost=round_cost(scorer, n), row_extra=summary_cost(scorer, n),
                      step_cost=step_cost(scorer, n),
                      jump_ok=not spec.record_gaps)

    policy = policy_for(spec.mode)
    if out_dir is not None:
        out_dir = Path(out_dir)
        legacy = _fingerprint(scorer, init, spec, seed, model_id, legacy=True)
        saved = _resume_or_set_aside(out_dir, (fp, legacy))
        out_dir.mkdir(parents=True, exist_ok=True)
        ckpt = out_dir / "checkpoint.pt"
        if saved is not None:
            if saved["fingerprint"] == legacy:
                spec, fp = dataclasses.replace(spec, mode="plain"), saved["fingerprint"]
                policy = policy_for("plain")
            states, done, chunks = saved["states"], saved["step"], saved["chunks"]
            gen.set_state(saved["generator"])
            if "cache" in saved:
                cache = SiteCache.restore(saved["cache"])
                policy = Policy(**saved["policy"])
        else:
            _write_manifest(out_dir, spec, seed, model_id, scorer, init)
        for stale in out_dir.glob("chunk-*.npz"):       # written after the last checkpoint
            if stale.name not in {c["file"] for c in chunks}:
                stale.unlink()
    if done == 0 and not chunks:
        chunks.append(_write_chunk(out_dir, 0, {"steps": np.array([0]), "states": states.numpy()[None].copy()}))

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=spec.steps, initial=done, unit="step", desc="glauber")
    while done < spec.steps:
        stop = min(done + spec.checkpoint_every, spec.steps)
        rec = _Recorder(done, stop, spec.record_every, b, spec.record_gaps)
        t = done
        while t < stop:
            mode, length = policy.next()
            end = min(stop, t + length)
            moves, rows, q_now, calls = torch.zeros(b, dtype=torch.long), 0, None, 0
            if mode == "jump":
                before = states.numpy().copy()
                ev, rows = jump_segment(scorer, states, cache, spec, gen, t, end, max_rows)
                rec.jumps(t, end, before, ev)
                moves += torch.bincount(torch.as_tensor(ev["chain"]), minlength=b)
                q_now = cache.mean_leave(free)
            elif mode == "memo":
                window = max(1, min(MEMO_WINDOW, MEMO_DRAWS // b))
                for a in range(t, end, window):
                    z = min(end, a + window)
                    before = states.numpy().copy()
                    sites, gaps, ev, r, nc = memo_segment(scorer, states, spec, gen, cache, a, z)
                    rec.drawn(a, z, before, sites, gaps, ev)
                    moves += torch.bincount(torch.as_tensor(ev["chain"]), minlength=b)
                    rows, calls = rows + r, calls + nc
            else:
                for s in range(t + 1, end + 1):
                    (sites, gaps, moved), r = _plain_step(scorer, states, spec, gen), b
                    mv = moved.nonzero().flatten()
                    cache.enter(mv, states[mv])
                    moves += moved
                    rows += r
                    rec.step(s, states, sites, gaps)
            policy.observe(mode, end - t, moves, rows, q_now, cache.unscored(free), calls)
            if bar is not None:
                bar.update(end - t)
            t = end
        chunks.append(_write_chunk(out_dir, done + 1, rec.block(tuple(states.shape))))
        done = stop
        if ckpt is not None:
            _save_atomic({"fingerprint": fp, "states": states, "step": done, "chunks": chunks,
                          "generator": gen.get_state(), "cache": cache.state(), "policy": asdict(policy)}, ckpt)
            if on_checkpoint is not None:
                on_checkpoint(done)
    if bar is not None:
        bar.close()
    out = _assemble(chunks, out_dir, spec, seed)
    out.modes = policy.history if spec.mode == "auto" else None
    return out


def _write_manifest(out_dir: Path, spec: ChainSpec, seed: int, model_id: str, scorer, init: torch.Tensor) -> None:
    from .provenance import git_commit, versions

    lm = getattr(scorer, "lm", None)
    manifest = {"parameters": asdict(spec), "seed": seed, "model": model_id,
                "revision": getattr(lm, "revision", None), "allowed_vocabulary": scorer.vocab.key(),
                "chains": int(init.shape[0]), "n": int(init.shape[1]), "git": git_commit(), "versions": versions()}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))


def _write_chunk(out_dir: Path | None, start: int, block: dict) -> dict:
    if out_dir is None:
        return {"file": None, "start": start, "data": block}
    name = f"chunk-{start:010d}.npz"
    tmp = out_dir / (name + ".tmp.npz")
    np.savez(tmp, **block)
    os.replace(tmp, out_dir / name)
    return {"file": name, "start": start}


def _assemble(chunks: list[dict], out_dir: Path | None, spec: ChainSpec, seed: int) -> ChainRun:
    blocks = []
    for c in sorted(chunks, key=lambda c: c["start"]):
        if c["file"] is None:
            blocks.append(c["data"])
        else:
            with np.load(out_dir / c["file"]) as z:
                blocks.append({k: z[k] for k in z.files})
    steps = np.concatenate([b["steps"] for b in blocks])
    states = np.concatenate([b["states"] for b in blocks])
    site_blocks = [b["sites"] for b in blocks if "sites" in b]
    gap_blocks = [b["gaps"] for b in blocks if "gaps" in b]
    return ChainRun(steps=steps, states=states,
                    sites=np.concatenate(site_blocks) if site_blocks else None,
                    gaps=np.concatenate(gap_blocks) if gap_blocks else None, spec=spec, seed=seed)
