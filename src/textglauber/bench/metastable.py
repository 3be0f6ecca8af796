"""The metastable grid: the engine's modes ``plain``, ``memo``, ``jump`` and ``auto`` (see
:mod:`textglauber.engine`) on the same chains, from the same states and seed, in the slow regime.

It reports chain-steps per second, passes (scored rows) per chain-step and the no-op share (steps
that leave the state as it was) at each temperature, from states burned in at that temperature
and from perfect traps at T = 0.25: states whose every site is its argmax and that the chain
stays in (:func:`textglauber.traps.finder.deep_traps`, at least ``TRAP_HOLD`` steps expected). Its
targets are ratios to plain in one run (:func:`metastable_targets`); where most steps change
nothing it reports a ceiling instead (:func:`row_bounds`)."""
from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .. import models as M
from .. import provenance, vocabulary
from ..device import pick_device, pick_dtype
from ..engine import ChainSpec, run
from ..traps.finder import TRAP_TEMPERATURE, deep_traps
from . import cache
from .measure import SEED, paired_median, paired_quartiles, time_interleaved

METASTABLE_MODES = ("plain", "memo", "jump", "auto")
METASTABLE_MODELS = ("package:antiberty", "package:rxnfp-bert", "trained:english")
METASTABLE_TEMPERATURES = (0.25, 0.5, 0.7, 1.0, 2.0)
NEAR_ONE_TEMPERATURE = 2.0  # the temperature where auto's target (NEAR_ONE_TARGET) is a ratio near 1
NEAR_ONE_TARGET = 0.95
NEAR_ONE_ROUNDS = 7         # least rounds of such a cell, whose plain runs the full length too (see _Grid.protocol)
TRAP_STEPS = 10_000         # a trap cell's chain length for the modes other than plain: the preprint's chains
LOSING_ROWS = 2.0           # rows per chain-step (plain: 1) past which a mode's run is cut, and timed in one round
HIGH_NOOP_SHARE = 0.9       # where the retired 2x target applied (metastable_targets); row_bounds reports there


class RowBudgetSpent(Exception):
    """Raised by :class:`RowCount` instead of scoring a batch that would take it past its budget."""


class RowCount:
    """A scorer that counts the rows (masked sequences) it scores: the engine's passes. With a
    ``budget``, a call that would take the count past it scores nothing and raises
    :class:`RowBudgetSpent` (``spent`` is then true and ``wanted`` the count it asked for)."""

    def __init__(self, inner, budget: int | None = None):
        self.inner, self.vocab, self.rows, self.budget = inner, inner.vocab, 0, budget
        self.spent, self.wanted = False, 0
        self.lm = getattr(inner, "lm", None)

    @property
    def max_length(self) -> int:
        return self.inner.max_length

    def scores(self, states, sites):
        if self.budget is not None and self.rows + len(sites) > self.budget:
            self.spent, self.wanted = True, self.rows + len(sites)
            raise RowBudgetSpent(f"{self.wanted} rows asked for, {self.budget} allowed")
        self.rows += len(sites)
        return self.inner.scores(states, sites)


def _run_mode(scorer, x0: torch.Tensor, T: float, steps: int, seed: int, mode: str) -> dict:
    """One run of ``mode`` over ``steps`` steps, with its rows counted (and budgeted, but for plain):
    its passes per step, no-op share, auto's segments and whether it was cut."""
    chains = x0.shape[0]
    counted = RowCount(scorer, None if mode == "plain" else int(LOSING_ROWS * chains * steps))
    try:
        r = run(counted, x0, ChainSpec(temperature=T, steps=steps, record_every=1, checkpoint_every=steps,
                                       mode=mode), seed=seed)
    except RowBudgetSpent:
        return {"passes_per_step": counted.wanted / (chains * steps), "noop_share": np.nan, "auto_segments": "",
                "cut": True}
    moved = (r.states[1:] != r.states[:-1]).any(-1)
    return {"passes_per_step": counted.rows / moved.size, "noop_share": 1 - float(moved.mean()),
            "auto_segments": " ".join(f"{m}:{k}" for m, k in r.modes) if r.modes else "", "cut": False}


def _modes_cell(scorer, x0: torch.Tensor, T: float, steps: int, seed: int, meta: dict, rounds: int,
                horizon: int | None = None, plain_steps: int | None = None) -> list[dict]:
    """One cell of the metastable grid: every mode from the same states and seed (so each call of
    a mode repeats the same work), timed in ``rounds`` interleaved rounds (median), after one
    short plain run that warms the model up.

    Lengths. ``memo``, ``jump`` and ``auto`` run ``horizon`` steps (default ``steps``): they pay
    once for a state's conditionals and then run free, so their rate depends on how long the chain
    stays, and a trap cell times them over the length of the chains that chapter 5 runs (the
    preprint's 10,000 steps). ``plain`` runs ``plain_steps`` (default ``steps``): it scores one row
    per chain at every step, a batch of the same shape whatever the state, so its rate per step does
    not depend on the length it is timed over, and a shorter plain call buys the grid's other
    cells. The cell's no-op share (``cell_noop_share``) is read off memo's trajectory, which is
    plain's chain (the same site and uniform at every step) over the full length.

    Losing modes are cut. A mode other than plain runs with a budget of :data:`LOSING_ROWS` rows
    per chain-step of its length (plain scores one). Where it needs more (jump on the fast side,
    where every move costs it the m rows of a new state), its run stops at the call that would
    pass the budget. The stopped run is a prefix of the full one (same starts and seed), so the
    full run takes at least its time: the row's ``speedup`` and ``chain_steps_per_s`` are upper
    bounds, its ``passes_per_step`` (the rows it asked for over the full length) a lower bound,
    and ``cut`` says so. The budget is a count, not a clock, so which modes are cut does not depend
    on the machine. A cut mode is not timed again (its ``rounds`` is 1, its quartiles those of its
    one paired ratio): on the fast side one full-length jump call cost ten to twenty plain ones
    (rxnfp n = 20 at T = 2: 10.8 rows per step), most of such a cell's time, to say only that it
    loses."""
    stats = {}
    chains = x0.shape[0]
    length = {m: (plain_steps or steps) if m == "plain" else (horizon or steps) for m in METASTABLE_MODES}

    def one(mode, k=None):
        stats[mode] = _run_mode(scorer, x0, T, k or length[mode], seed, mode)

    timed, _ = time_interleaved({m: (lambda m=m: one(m)) for m in METASTABLE_MODES}, min_rounds=rounds,
                                max_rounds=rounds, warmup=lambda: one("plain", min(5, length["plain"])),
                                once=lambda m: stats[m]["cut"])
    per_step = {m: np.asarray(v) / length[m] for m, v in timed.items()}      # seconds per step of each round
    rate = {m: chains / statistics.median(v) for m, v in per_step.items()}
    return [{**meta, "temperature": T, "mode": m, "steps": length[m], "chain_steps_per_s": rate[m],
             "speedup": paired_median(per_step["plain"], per_step[m]),
             **dict(zip(("speedup_q25", "speedup_q75"), paired_quartiles(per_step["plain"], per_step[m]))),
             "cell_noop_share": stats["memo"]["noop_share"], "rounds": len(timed[m]), **stats[m]}
            for m in METASTABLE_MODES]


def metastable_cell_key(record: dict) -> str:
    """What a measured cell depends on: its coordinates and lengths, the library code the
    benchmark can reach, the installed versions and the machine. A resumed grid re-uses a cell
    only when this matches (16 hex digits)."""
    return provenance.digest({**record, **_key_context(), "threads": torch.get_num_threads()})[:16]


@functools.lru_cache(maxsize=1)
def _key_context() -> dict:
    return {"code": cache.code(), "machine": provenance.machine(), "environment": provenance.versions()}


def _cell_seed(*coords) -> int:
    """A seed (below 2^31) that depends on :data:`SEED` and the given coordinates alone."""
    return int(provenance.digest([SEED, *coords])[:8], 16) >> 1


@dataclass
class _Grid:
    """A metastable grid's settings and its rows so far (those kept from ``done`` and the new ones)."""
    chains: int
    steps: int
    burn: int
    rounds: int
    near_one_rounds: int
    plain_steps: int
    trap_steps: int
    device: torch.device
    dtype: torch.dtype
    rows: list
    have: set               # the keys of the cells kept whole from ``done``
    commit: str
    on_cell: object = None

    def protocol(self, start, T) -> tuple[int, int]:
        """(rounds, plain's steps) of a cell: the one place that decides them, for its key and its run.

        Cells at :data:`NEAR_ONE_TEMPERATURE` are timed in at least ``near_one_rounds`` rounds, with
        plain over the full ``steps``: their target is a ratio within 5% of one, which a median of
        three rounds cannot resolve on a shared host. On rxnfp BERT at n = 64, T = 2, where auto runs
        plain's own path, three rounds (plain over 100 steps) read 0.933x [0.926, 1.018], while three
        interleaved pairs of 400-step calls on the same chains took 42.3, 42.4, 46.6 s (auto) and
        43.1, 43.1, 43.5 s (plain): one slow window in a short plain call, or in one of three auto
        calls, moves the median by the whole margin."""
        if start != "perfect trap" and float(T) == NEAR_ONE_TEMPERATURE:
            return max(self.rounds, self.near_one_rounds), self.steps
        return self.rounds, self.plain_steps

    def key(self, name, n, start, T, horizon) -> str:
        r, ps = self.protocol(start, T)
        return metastable_cell_key({"model": name, "n": n, "start": start, "temperature": T, "chains": self.chains,
                                    "steps": self.steps, "horizon": horizon, "plain_steps": ps, "burn": self.burn,
                                    "rounds": r, "device": str(self.device), "dtype": str(self.dtype), "seed": SEED})

    def cell(self, name, n, start, T, horizon, measure) -> None:
        """Measures a cell (``measure()``: its rows) unless it was kept, replacing older rows there."""
        k = self.key(name, n, start, T, horizon)
        if k in self.have:
            print(f"[bench] {name} n={n} {start} T={T}: measured before (cell {k})", flush=True)
            return
        new = [{**r, "cell_key": k, "commit": self.commit} for r in measure()]
        self.rows = [r for r in self.rows if (r["model"], r["n"], r["start"], r["temperature"]) != (name, n, start, T)] + new
        print(f"[bench] {name} n={n} {start} T={T} done", flush=True)
        if self.on_cell is not None:
            self.on_cell(pd.DataFrame(self.rows))

    def burned_in(self, scorer, x: torch.Tensor, T: float, seed: int, meta: dict) -> list[dict]:
        start = f"burned in {self.burn} steps"
        warm = run(scorer, x, ChainSpec(temperature=T, steps=self.burn, record_every=self.burn, mode="plain"), seed=seed)
        r, ps = self.protocol(start, T)
        return _modes_cell(scorer, torch.as_tensor(warm.states[-1]), T, self.steps, seed + 1,
                           {**meta, "start": start}, r, plain_steps=ps)

    def trapped(self, scorer, name: str, n: int, meta: dict) -> list[dict]:
        x_trap, found = deep_traps(scorer, n, self.chains, torch.Generator().manual_seed(_cell_seed(name, n, "trap")))
        r, ps = self.protocol("perfect trap", TRAP_TEMPERATURE)
        return _modes_cell(scorer, x_trap, TRAP_TEMPERATURE, self.steps, SEED,
                           {**meta, "start": "perfect trap", **found}, r, horizon=self.trap_steps, plain_steps=ps)

    def model(self, name: str, lengths, temperatures, trap: bool) -> None:
        """Every cell of one model: each length's temperatures, then (``trap``) its trap cell."""
        lm = M.load(name, device=str(self.device), dtype=str(self.dtype).split(".")[-1])
        scorer = M.MaskedLMScorer(lm, vocabulary.allowed_vocabulary(lm.tokenizer))
        for n in lengths:
            meta = {"model": name, "device": str(self.device), "n": n, "chains": self.chains,
                    "threads": torch.get_num_threads()}
            gen = torch.Generator().manual_seed(_cell_seed(name, n))
            x = scorer.vocab.ids[torch.randint(scorer.vocab.size, (self.chains, n), generator=gen)]
            for T in temperatures:
                seed = _cell_seed(name, n, float(T))
                self.cell(name, n, f"burned in {self.burn} steps", T, self.steps,
                          functools.partial(self.burned_in, scorer, x, T, seed, meta))
            if trap:
                self.cell(name, n, "perfect trap", TRAP_TEMPERATURE, self.trap_steps,
                          functools.partial(self.trapped, scorer, name, n, meta))


def metastable_grid(models_wanted, lengths, temperatures, *, chains: int = 16, steps: int = 400, burn: int = 100,
                    device: str = "cpu", dtype: str = "auto", trap: bool = True, rounds: int = 3,
                    trap_steps: int = TRAP_STEPS, plain_steps: int | None = None, done: pd.DataFrame | None = None,
                    on_cell=None, near_one_rounds: int = NEAR_ONE_ROUNDS) -> pd.DataFrame:
    """chain-steps per second of each engine mode on each (model, n, T), from random states burned
    in for ``burn`` plain steps at that temperature, and (``trap``) from perfect traps at
    T = 0.25 (:func:`~textglauber.traps.finder.deep_traps`: argmax fixed points whose exact expected
    holding time is at least ``TRAP_HOLD`` steps, the window over which chapter 5 detects a trap;
    the rows say how many distinct traps the chains start from and how long they hold). An argmax
    fixed point need not trap: of the 14 that ascent reached from 16 random starts on the trained
    English MLM at n = 20, 13 hold 5 to 34 steps at T = 0.25 and one 5,894.

    ``cell_noop_share`` is the share of the chain's steps that changed nothing; ``speedup`` is the
    median of a mode's per-round rate over plain's in the same round, ``speedup_q25``/``_q75``
    their quartiles (so the median always lies between them; a ratio of the two median rates need
    not, and pairs a mode timed once with rounds it did not share).

    In a trap cell the modes other than plain run ``trap_steps`` steps (plain runs ``plain_steps``,
    default ``steps``; its rate does not depend on the length, see :func:`_modes_cell`): a chain
    that must first score all n sites of its state cannot beat plain by more than steps / n, so 400
    steps at n = 20 would cap any engine at 20x before it spends a single step. Cells at
    :data:`NEAR_ONE_TEMPERATURE` are timed in at least ``near_one_rounds`` rounds (see
    :meth:`_Grid.protocol`).

    ``done``: rows measured before (a stopped grid's partial table). A cell whose ``cell_key``
    (:func:`metastable_cell_key`) is there with all its modes is taken from it and not measured
    again. Each cell's starts and seed are drawn from a generator seeded by its own coordinates
    (:func:`_cell_seed`), so a resumed grid, or one asked for part of the models, lengths or
    temperatures, measures the same chains in a cell as the whole grid in one go. The result holds
    every row of ``done`` (other models' cells included) and the new ones; a cell measured now
    replaces any older row at the same coordinates (model, n, start, temperature). ``commit`` names
    the code of each cell."""
    dev = pick_device(device)
    dt = pick_dtype(dtype, dev)
    kept = pd.DataFrame() if done is None or "cell_key" not in done else done
    have = {k for k, g in kept.groupby("cell_key") if set(g["mode"]) >= set(METASTABLE_MODES)} if len(kept) else set()
    git = provenance.git_commit()       # a table measured in pieces says which code measured each cell
    grid = _Grid(chains=chains, steps=steps, burn=burn, rounds=rounds, near_one_rounds=near_one_rounds,
                 plain_steps=min(plain_steps or steps, steps), trap_steps=trap_steps, device=dev, dtype=dt,
                 rows=kept.to_dict("records"), have=have,
                 commit=(git["commit"] or "unknown")[:12] + ("+dirty" if git["dirty"] else ""), on_cell=on_cell)
    for name in models_wanted:
        grid.model(name, lengths, temperatures, trap)
    return pd.DataFrame(grid.rows)


def metastable_targets(df: pd.DataFrame) -> pd.DataFrame:
    """The issue's targets for auto, as ratios to plain in one run (the least cell that each
    target covers): at least 20x on a perfect trap at T = 0.25, never below 0.95x at T = 2.

    ``row bound``: in the least cell, plain's rows per chain-step (one) over the fewest that memo
    or jump scored. A mode that spends as much per row as plain cannot beat plain by more than
    this, whatever its bookkeeping costs: a count, not a clock.

    Retired: "at least 2x wherever plain's no-op share is 0.9 or more". The no-op share does not
    fix the rows an exact mode must score. Memo scores one row for each (state, site) pair the
    chains need for the first time (and one for a move to a token beyond the few it remembers);
    a chain that never came back to a state would need about m q / (1 + (m - 1) q) of them per
    step at move rate q on m sites (the distinct sites it visits while it holds): 0.69 at a
    no-op share of 0.9 on 20 sites, a row bound of 1.45, short of 2x on a CPU, where a row costs
    every mode about the same. Chains that return to states, or share them, need fewer, so the
    count can allow 2x in one cell and rule it out in the next at the same share: it is a
    ceiling to report (:func:`row_bounds`), not a target to ask for.

    A cut auto row (``cut``, see :func:`_modes_cell`) holds an upper bound, which cannot show a
    target met: its ``met`` is false."""
    auto = df[df["mode"] == "auto"]
    cases = ((f"x plain on a perfect trap at T = {TRAP_TEMPERATURE} (least cell)", auto[auto.start == "perfect trap"], 20.0),
             (f"x plain at T = {NEAR_ONE_TEMPERATURE:g} (least cell)",
              auto[(auto.temperature == NEAR_ONE_TEMPERATURE) & (auto.start != "perfect trap")], NEAR_ONE_TARGET))

    coords = [k for k in ("model", "n", "start", "temperature") if k in df]
    fewest = df[df["mode"].isin(("memo", "jump"))].groupby(coords)["passes_per_step"].min() if "passes_per_step" in df else None

    def least(label, cells, needed):
        c = cells.loc[cells.speedup.idxmin()]
        where = ", ".join(f"{k} {c[k]:g}" if k != "model" else str(c[k]) for k in ("model", "n", "temperature") if k in c)
        bound = np.nan if fewest is None else 1 / float(fewest.get(tuple(c[k] for k in coords), np.nan))
        return {"target": label, "measured": float(c.speedup), "q25": float(c.get("speedup_q25", np.nan)),
                "q75": float(c.get("speedup_q75", np.nan)), "needed": needed, "cells": len(cells),
                "met": bool(c.speedup >= needed and not _is_cut(c)), "least cell": where, "row bound": bound}

    rows = [least(*case) for case in cases if len(case[1])]
    return pd.DataFrame(rows, columns=["target", "measured", "q25", "q75", "needed", "cells", "met", "least cell",
                                       "row bound"])


def row_bounds(df: pd.DataFrame, share: float = HIGH_NOOP_SHARE) -> pd.DataFrame:
    """What holds where plain's no-op share is at least ``share`` (burned-in cells): auto's ratio
    to plain beside the cell's row bound, plain's rows per chain-step (one) over memo's. Memo's rows
    are the (state, site) pairs the chains needed, each scored once, and a move now and then to a
    token it did not remember, so no exact mode that scores those rows at plain's cost per row (a
    CPU at the compute bound) beats plain by much more than this ratio. One row per cell, the
    lowest bound first; empty where no such cell was measured (or memo's rows were not recorded)."""
    cols = ["model", "n", "temperature", "no-op share", "memo rows per step", "row bound", "auto x plain", "auto cut"]
    if "passes_per_step" not in df or "cell_noop_share" not in df:
        return pd.DataFrame(columns=cols)
    keys = [k for k in ("model", "n", "start", "temperature") if k in df]
    high = df[(df.start != "perfect trap") & (df.cell_noop_share >= share)]
    memo = high[high["mode"] == "memo"].set_index(keys)
    auto = high[high["mode"] == "auto"].set_index(keys).reindex(memo.index)
    out = pd.DataFrame({"no-op share": memo.cell_noop_share, "memo rows per step": memo.passes_per_step,
                        "row bound": 1 / memo.passes_per_step, "auto x plain": auto.speedup,
                        "auto cut": [_is_cut(r) for _, r in auto.iterrows()]}, index=memo.index)
    return out.reset_index()[cols].sort_values("row bound", ignore_index=True)


def _is_cut(row) -> bool:
    """Whether a metastable row's mode was cut (tables from before the ``cut`` column: never)."""
    v = row.get("cut", False)
    return bool(v) if pd.notna(v) else False
