"""What the engine remembers of the rows it scored: a few numbers per (state, site), never a row.

The conditional pi_i(. | x_{-i}) is a function of the state alone, and of every site but i, so a
row scored for one chain serves every chain at that state, on every visit, and a chain that moves
at site i keeps the row it moved by as its new state's row at i (:func:`carry`).

Per state and site a chain's cache keeps the keep-interval of uniforms of the current token, its
leave probability 1 - pi_i(x_i | x_{-i}) and (with ``record_gaps``) its score gap, and the same
for the :data:`MOVE_TOKENS` most likely tokens of the row, so that a move to one of them needs no
row (:func:`cached_moves`): :data:`CHAIN_FIELDS`, float64, O(states x n) numbers in all."""
from __future__ import annotations

import math

import torch

from .sampling import keep_interval, leave_probability, score_gap
from .spec import ChainSpec

MOVE_TOKENS = 4               # the most likely tokens of a row whose intervals the cache keeps (moves without a row)
TOKEN_FIELDS = ("pos", "lo", "hi", "leave", "gap")
CHAIN_FIELDS = ("lo", "hi", "tot", "leave", "gap",
                *(f"{f}{k}" for k in range(MOVE_TOKENS) for f in TOKEN_FIELDS))
STATE_MEMORY = 16 << 20       # bytes of a chain cache's slots: the scored states it keeps (at most MEMO_STATES)
MEMO_STATES = 4096            # states a chain cache keeps at most (never fewer than two per chain)


class SiteCache:
    """What is known about the units' (chains' or pairs') current states, per site: named float64
    fields packed in one (slots, n, fields) tensor on the CPU, valid where ``slot_valid`` is set;
    each unit reads and writes the slot of its current state.

    Without ``capacity`` every unit has a slot of its own, and a change of its state must
    ``clear`` it. With ``capacity``, a slot belongs to a state (its token ids) rather than to a
    unit: units at the same state share it, and it outlives the visit. A unit whose state changes
    must ``enter`` the new state, which points it at that state's slot, holding whatever any unit
    scored there before. Slots that no unit holds are reused, the least recently entered first,
    once ``capacity`` of them are taken."""

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


def first_of_each(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the position of each distinct label's first entry, each entry's index into those): units
    whose labels (slots, or slot and site) agree share one row."""
    _, group = torch.unique(labels, return_inverse=True)
    first = torch.full((int(group.max()) + 1 if len(group) else 0,), len(labels), dtype=torch.long)
    return first.scatter_reduce(0, group, torch.arange(len(labels)), reduce="amin"), group


def reads_leave(spec: ChainSpec) -> bool:
    """Whether a run can jump, the only reader of the leave probabilities a cache keeps."""
    return spec.mode in ("jump", "auto") and not spec.record_gaps


def chain_summaries(s: torch.Tensor, cdf: torch.Tensor, pos: torch.Tensor, spec: ChainSpec) -> dict:
    """What a chain's cache keeps of a row: the total of the cdf, and at the current token
    (``pos``; -1: not in A) and at each of the row's :data:`MOVE_TOKENS` highest-scoring tokens
    (``pos0``, ...) the keep-interval (lo, hi) and, where the run reads them, the leave
    probability (all from one softmax) and the score gap."""
    k = min(MOVE_TOKENS, s.shape[-1]) if len(s) else 0
    cols = pos.to(s.device)[:, None]
    if k:
        cols = torch.cat([cols, torch.topk(s, k, dim=-1).indices], 1)
    leave = leave_probability(s, cols, spec.temperature).cpu() if reads_leave(spec) else None
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


def moved_summaries(rec: dict, j: torch.Tensor) -> tuple[dict, torch.Tensor]:
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
    cache.fill(units, sites, chain_summaries(s[j], cdf[j], idx[j], spec))

