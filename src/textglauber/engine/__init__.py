"""The batched Glauber engine (docs/science.md, chapter 0) and its coupled pairs (docs/science.md, chapter 3).

A step, for a batch of chains: each chain draws one of its free sites uniformly, the scorer gives
the raw scores s_i(. | x_{-i}) at that masked site over the allowed vocabulary A (one encoder pass
for the batch), and each chain writes a token drawn from softmax(s / T). A single CPU
``torch.Generator`` per run draws the sites and one uniform per chain and step, and tokens are
drawn by inverse CDF from those uniforms in float64, so a run on the CPU repeats exactly and the
draws do not depend on the device the model runs on.

Modes (``ChainSpec.mode``). The conditional pi_i(. | x_{-i}) does not read x_i, so every row
scored in a state stays valid while the state lasts, and at low temperature most steps write back
the token already there. The modes differ in how much of that work they skip:

- ``plain`` (:mod:`.plain`): every chain is scored at every step.
- ``memo`` (:mod:`.memo`): the plain draws and the plain trajectory, but a step is scored only
  where the cache cannot answer it. The cache (:mod:`.cache`) remembers, per state and site, the
  interval of uniforms that keeps the current token and those of the row's few most likely tokens;
  it belongs to the state, so chains at one state share it and a chain that comes back finds it.
  A move keeps the row it was drawn from for its new state, which differs only at that site, and
  a move to a remembered token needs no row at all. Chains run ahead on their own clocks and wait
  only for the rows they need; a round scores the rows of all waiting chains, and a few sites
  ahead for chains in states just reached. Bit for bit the plain trajectory on a scorer whose
  rows do not depend on the batch (a table).
- ``jump`` (:mod:`.jump`): rejection-free, the n-fold way of Bortz, Kalos and Lebowitz (1975):
  a geometric holding time from the state's leave probability, then the site and the new token
  conditioned on a change. Exact in law (not the plain trajectory); each chain on its own clock.
  It never draws the sites of steps that change nothing, so it refuses ``record_gaps``.
- ``auto`` (the default, :mod:`.policy`): segments of the three, each chosen from counts the run
  has seen (the share of steps that change nothing, the rows and scorer calls each mode would
  make, a jump's cost of scoring the sites of its states not yet known), priced by fixed constants
  per device for a call and for memo's work per row, against a row (:mod:`.cost`). It never reads
  a clock, so a run stays exactly repeatable and resumable; where memo would score nearly every
  row anyway, as at high temperature, it runs ``plain``; with ``record_gaps`` it never jumps.

The superbasin move (:mod:`.superbasin`) is the jump's counterpart for a set of states: the exact
first exit from a set S in one draw, by doubling the chain restricted to S; chapter 5's escape
times (:mod:`textglauber.traps.escape`) use it where chains flicker among a trap and its neighbours.

Coupled pairs (:mod:`.pairs`, :func:`couple`) run the same modes: both members update the same
site from a maximal coupling of their two conditionals, and a pair is a unit of the same jump
engine as a chain.

Records and resuming (:mod:`.store`): ``states`` at every ``record_every`` steps and the site of
every step (-1 where a jump held the chain), written in chunks with a checkpoint after each; a
killed run resumes to exactly the records of an uninterrupted one, and a folder holding a run of
other parameters is moved aside rather than resumed. ``python -m textglauber.bench --metastable``
measures the modes side by side.

Inside the package, each module imports only those listed before it: ``spec``, ``sampling``,
``cache``, ``cost``, ``policy``, ``batch``, ``plain``, ``memo``, ``jump``, ``pairs``, ``store``,
``driver`` (:func:`run`); ``superbasin`` imports nothing of the package.
"""
from .cache import SiteCache, chain_cache
from .cost import round_cost, row_flops, step_cost, summary_cost
from .jump import FirstChanges, first_changes
from .pairs import CouplingRun, couple, maximal_coupling
from .plain import step
from .policy import Policy
from .driver import run
from .sampling import draw_from, holding_time, keep_interval, leave_probability, sample_index, score_gap, without
from .spec import MODES, ChainRun, ChainSpec, Scorer, validate

__all__ = ["MODES", "ChainRun", "ChainSpec", "CouplingRun", "FirstChanges", "Policy", "Scorer", "SiteCache",
           "chain_cache", "couple", "draw_from", "first_changes", "holding_time", "keep_interval",
           "leave_probability", "maximal_coupling", "round_cost", "row_flops", "run", "sample_index", "score_gap",
           "step", "step_cost", "summary_cost", "validate", "without"]
