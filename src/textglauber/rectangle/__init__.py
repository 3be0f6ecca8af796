"""The rectangle test of incompatibility (docs/science.md, chapter 1).

A rectangle is a base sequence x, two positions i != j and replacements a -> a' at i and
b -> b' at j. With l_i(a -> a' | c) = log pi_i(a'|c) - log pi_i(a|c),

    path1 = l_i(a -> a' | b at j)  + l_j(b -> b' | a' at i)
    path2 = l_j(b -> b' | a at i)  + l_i(a -> a' | b' at j)
    R     = |path1 - path2|,

which is 0 for any family of conditionals that comes from one joint law. The four
conditionals of many rectangles (site i with b or b' at j, site j with a or a' at i) go
through a scorer as one batch. A masked LM's scorer gives its masked conditionals; the
joint-model control (:class:`JointConditionals`) gives conditionals derived from a causal
LM's sequence probabilities over a fixed candidate set, pi_i(a | x_-i) proportional to
p(x with a at i), and goes through exactly the same sampling and scoring code, so its R is
zero only because its conditionals are compatible, up to float error.

The package, by part: ``statistic`` (rectangles, their sampling, R, the K x K grid), ``controls``
(the joint-model control, its perturbed copy, its candidate set and windows) and ``runs`` (the
protocol on models, the summary, the curve along training, the precision floor). The chapter's
sentences, views and plots are in :mod:`textglauber.pages.incompatibility`.
"""
from __future__ import annotations

from .controls import JointConditionals, PerturbedScorer, candidate_vocab, control_info, control_passages
from .runs import RectangleRuns, along_training, dtype_floor, experiment, grid_summary, passage_key, run_models, summary
from .statistic import COLUMNS, Rectangles, grid, rectangles_of, sample, score_mlm

__all__ = ["COLUMNS", "JointConditionals", "PerturbedScorer", "RectangleRuns", "Rectangles", "along_training", "candidate_vocab",
           "control_info", "control_passages", "dtype_floor", "experiment", "grid", "grid_summary", "passage_key",
           "rectangles_of", "run_models", "sample", "score_mlm", "summary"]
