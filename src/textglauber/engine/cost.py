"""The cost model the auto mode weighs its choices with: what a scorer call ("round"), the memo's
and jump's work per row, and a memo chain-step cost, each in rows of the scorer.

Per device type: the FLOP/s of the encoder's rows, and in seconds the fixed time of a call, the
memo's and jump's Python and cache work per row scored ("row_extra") and a memo chain-step's own
work ("step"). CPU: measured on this project's 2-core machines (rxnfp BERT, AntiBERTy, trained
English MLM at n = 20 and 64: 140-180 GFLOP/s at batch 16-64; a call 9-16 ms at batch 1, 1-5 rows;
0.27-0.42 ms per memo row over what plain spends; 0.6 us a chain-step for 16 chains in a tabulated
trap). CUDA: estimates, not measured here. Only ratios of these constants reach the auto mode's
choice, which sees counts, never clocks."""
from __future__ import annotations

import torch

from .spec import Scorer

DEVICE_COSTS = {"cpu": {"flops": 1.5e11, "round": 1e-2, "row_extra": 3.5e-4, "step": 6e-7},
                "cuda": {"flops": 1e14, "round": 3e-3, "row_extra": 0.0, "step": 6e-7}}
TABLE_ROUND_COST = 64.0       # a round's fixed cost in rows for scorers without a model (tables)
TABLE_STEP_COST = 0.15        # a memo chain-step's own work (draws, cache reads) in rows of a table


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
    cost next to nothing, so a round is worth :data:`TABLE_ROUND_COST` of them."""
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
