"""The coupling experiment of the crossover chapter (docs/science.md, chapter 3): coupling times of pairs over
a (T, n) grid, and what a longer budget bought against the plain engine's cost.

The coupled pairs themselves, the maximal coupling and :func:`~textglauber.engine.couple` live in
the engine (:mod:`textglauber.engine.pairs`).
"""
from __future__ import annotations

import numpy as np
import torch

from .engine import couple


def grid_experiment(scorer, passages_for, lengths, temperatures, *, pairs: int, budget,
                    gen: torch.Generator, mode: str = "auto"):
    """Coupling times over a (T, n) grid: for each n one batched run serves every temperature.

    ``budget``: steps, one number for every length or a mapping n -> steps (budgets in sweeps,
    :func:`textglauber.crossover.budgets`). Each pair starts from two different seed windows.
    Returns one row per pair with its length's ``budget``; ``run_rows`` is the encoder rows its
    length's batched run scored (the same on every row of that length)."""
    import pandas as pd

    rows = []
    temps = np.repeat(np.asarray(temperatures, float), pairs)
    for n in lengths:
        b = int(budget[n]) if isinstance(budget, dict) else int(budget)
        starts = passages_for(n, 2 * pairs * len(temperatures))
        x0, y0 = starts[0::2], starts[1::2]
        r = couple(scorer, x0, y0, temps, b, gen, mode=mode)
        for p in range(len(temps)):
            rows.append({"n": n, "temperature": float(temps[p]), "pair": p, "tau": r.tau[p],
                         "censored": bool(r.censored[p]), "budget": b, "run_rows": r.rows})
    return pd.DataFrame(rows)


def plain_rows(tau, censored, budget: int) -> int:
    """Encoder rows the plain engine scores for these pairs run to ``budget`` steps: both members of
    a pair at every step until it coalesces, so 2 * sum(min(tau, budget)), a censored pair counting
    the whole budget. (A pair whose coupling time is beyond ``budget`` costs the budget whatever its
    time, so coupling times from a longer run give the plain cost of a shorter budget exactly.)"""
    tau, censored = np.asarray(tau, float), np.asarray(censored, bool)
    steps = np.where(censored | ~(tau <= budget), budget, np.minimum(tau, budget))
    return int(2 * steps.sum())


def budget_comparison(pair_times, reference_sweeps: float):
    """Per length and in all: what the run's budget (``budget`` column, steps) bought and cost
    against a shorter reference budget of ``reference_sweeps`` sweeps (round(sweeps * n) steps).

    The censored share at the reference budget is read from the same pairs (a pair is censored at
    a budget exactly when its coupling time exceeds it, and the first steps of a longer run are a
    run with the shorter budget). Costs are encoder rows: the plain engine's at both budgets
    (:func:`plain_rows`, exact from the coupling times) and the rows the run's own engine scored
    (``run_rows``, measured)."""
    import pandas as pd

    ref = {int(n): max(1, int(round(reference_sweeps * int(n)))) for n in pair_times.n.unique()}
    if reference_sweeps <= 0 or any(ref[int(n)] > b for n, b in zip(pair_times.n, pair_times.budget)):
        raise ValueError(f"reference_sweeps={reference_sweeps:g} must lie in (0, the run's budget in sweeps]")
    out = []
    for n, g in list(pair_times.groupby("n")) + [("all", pair_times)]:
        r = g.n.map(ref).to_numpy()
        late = g.censored.to_numpy() | ~(g.tau.to_numpy() <= r)
        engine = int(g.groupby("n").run_rows.first().sum())
        plain_ref = sum(plain_rows(h.tau, h.censored, ref[int(m)]) for m, h in g.groupby("n"))
        plain_run = sum(plain_rows(h.tau, h.censored, int(h.budget.iloc[0])) for _, h in g.groupby("n"))
        out.append({"n": n, "pairs": len(g), "censored at reference": float(late.mean()),
                    "censored at budget": float(g.censored.mean()), "plain rows at reference": plain_ref,
                    "plain rows at budget": plain_run, "engine rows at budget": engine,
                    "engine / plain at reference": engine / plain_ref})
    return pd.DataFrame(out)
