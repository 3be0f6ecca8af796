"""The coupling experiment of the crossover chapter (docs/science.md, chapter 3): coupling times of pairs over
a (T, n) grid, and what a longer budget bought against the plain engine's cost.

The coupled pairs themselves, the maximal coupling and :func:`~textglauber.engine.couple` live in
the engine (:mod:`textglauber.engine.pairs`).
"""
from __future__ import annotations

import numpy as np
import torch

from .engine import couple


def grid_experiment(model, passages_for, lengths, temperatures, *, pairs: int, budget,
                    gen: torch.Generator, device: str | None = "auto", dtype: str | None = "auto",
                    mode: str = "auto", scheduler: str | None = None):
    """Coupling times over a (T, n) grid: for each n one batched run serves every temperature, and
    each n is one unit of work (:func:`length_unit`) on ``scheduler`` (:mod:`textglauber.scheduler`;
    None: its setting from the environment, serial by default).

    ``model``: the chapter's model parameters (:func:`textglauber.models.open_mlm`), or a scorer
    itself (it must pickle to run on workers). ``budget``:
    steps, one number for every length or a mapping n -> steps (budgets in sweeps,
    :func:`textglauber.crossover.budgets`). Each pair starts from two different seed windows. Every
    length's starts (``passages_for(n, count)``) and seed are drawn from ``gen`` here, in the order
    of ``lengths``, before any unit runs, so the scheduler changes no row. Returns one row per pair
    with its length's ``budget``; ``run_rows`` is the encoder rows its length's batched run scored
    (the same on every row of that length)."""
    import pandas as pd

    from .scheduler import model_label, run_all
    from .seeding import child_seed

    temps = np.repeat(np.asarray(temperatures, float), pairs)
    units = []
    for n in lengths:
        b = int(budget[n]) if isinstance(budget, dict) else int(budget)
        starts = np.asarray(passages_for(n, 2 * pairs * len(temperatures)))
        units.append((f"crossover, coupling, model {model_label(model)}, n = {n}", length_unit,
                      (model, device, dtype, int(n), starts, temps, b, child_seed(gen), mode)))
    return pd.DataFrame([row for part in run_all(units, scheduler) for row in part])


def length_unit(model, device, dtype, n: int, starts: np.ndarray, temps: np.ndarray, budget: int,
                seed: int, mode: str) -> list[dict]:
    """One length's coupled pairs, the even rows of ``starts`` against the odd ones at ``temps``, from
    a generator seeded with ``seed``: a unit of work that runs the same in this process or on a
    worker, which loads the model once (:func:`textglauber.models.kept_mlm`)."""
    from . import models
    from .profile import is_model_entry

    scorer = models.kept_mlm(model, device=device, dtype=dtype)[1] if is_model_entry(model) else model
    x0, y0 = torch.as_tensor(starts[0::2]), torch.as_tensor(starts[1::2])
    r = couple(scorer, x0, y0, temps, budget, torch.Generator().manual_seed(int(seed)), mode=mode)
    return [{"n": n, "temperature": float(temps[p]), "pair": p, "tau": r.tau[p], "censored": bool(r.censored[p]),
             "budget": budget, "run_rows": r.rows} for p in range(len(temps))]


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
