"""The auto mode's rule: which mode, and how many steps, the next segment of a run or of a
coupling runs, from counts the segments before it showed."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from .cost import round_cost, step_cost, summary_cost
from .spec import MEMO_WINDOW, ChainSpec, Scorer

AUTO_FIRST = 4                # steps of the auto mode's first (memo) segment, which only looks
AUTO_SEGMENT = 16             # steps of a plain segment of the auto mode, and the first of a memo or jump stretch
AUTO_JUMP_MAX = 1 << 20       # longest jump segment of the auto mode (doubles from AUTO_SEGMENT)
# the fixed work of the modes, in scorer rounds: memo chains batch their rows across steps, a
# round for about 1.25 rows per chain-step (rxnfp BERT, AntiBERTy and the trained English MLM at
# n = 20, 16 chains: 1.05-1.5); memo pairs step together, PAIR_CALL rounds of a plain step per
# step that needs a row and PAIR_STEP per step (fitted to the tiny MLM on a CPU); a jump, a
# round per move of the busiest unit
MEMO_CALL, PAIR_CALL, PAIR_STEP, JUMP_ROUNDS = 1.25, 1.7, 0.4, 1.0
HYSTERESIS = 0.9              # auto leaves its current mode for one estimated at most this share of its cost


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

    @classmethod
    def for_chains(cls, scorer: Scorer, n: int, spec: ChainSpec, mode: str) -> "Policy":
        """The policy of a run of chains of length n (``mode``: the spec's, or plain for a legacy resume)."""
        return cls(mode=mode, m=n - spec.prefix_len, round_cost=round_cost(scorer, n),
                   row_extra=summary_cost(scorer, n), step_cost=step_cost(scorer, n), jump_ok=not spec.record_gaps)

    @classmethod
    def for_pairs(cls, scorer: Scorer, n: int, prefix_len: int, mode: str) -> "Policy":
        """The policy of coupled pairs, which score two rows per site and step together."""
        return cls(mode=mode, m=n - prefix_len, rows_per_site=2, round_cost=round_cost(scorer, n),
                   row_extra=summary_cost(scorer, n), stepwise=True)

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
