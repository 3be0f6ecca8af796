"""textglauber: Glauber dynamics on masked language models.

The library behind the reproducible book of *Mixing Times of Glauber Dynamics on Masked
Language Models* (arXiv 2605.16378). Importing it sets MKL's strict reproducible mode
(:data:`MKL_CBWR`), so that torch's products round the same at any thread count. A map, from the
bottom up:

Foundations (import little or nothing of the project)
- ``paths``        where things live: repository, local paths, trained models, stand-ins
- ``provenance``   commit, package versions, machine, digests, atomic JSON
- ``reach``        the library files a notebook can reach (what a chapter's results depend on)
- ``device``       the one place where device and dtype are decided
- ``lockfile``     one process at a time for a profile's results (the build, or papermill by hand)
- ``results``      a chapter's results folder, its tables and manifest, replaced only by a run that
                   succeeds; ``start_chapter``
- ``seeding``      a unit's seed drawn from its run's generator (the one home of that draw)
- ``durations``    one formatter of durations, for the plan, progress lines and training
- ``scheduler``    where independent units run: serially, or on a Dask cluster (``local:N``, ``tcp://``)
                   and ``RunSettings``, how a chapter runs its model units (every ``run_models`` takes one)
- ``profile``      profiles: their schema, loading one, the parameters a chapter runs with
- ``hub``, ``corpus``, ``vocabulary``         hub checks, seed passages, the allowed vocabulary A
- ``stats``, ``tables``, ``figures``, ``reported``   intervals, page tables, page figures, the preprint's numbers

Packages (a concept with parts)
- ``models``       naming, checking, loading and scoring masked and causal LMs
- ``engine``       the Glauber chain engine: one module per mode (plain, memo, jump; auto's policy),
                   the site cache, storage and checkpoints, coupled pairs (read its docstring first)
- ``bench``        the benchmark: timing, throughput, the metastable grid, the cost appendix's readers
- ``bookbuild``    the book build: stamps, plan, execution, site, findings, results comparison
- ``traps`` (5)    the traps chapter, one module per concept: the catalogue of recorded chains, the
                   one trap finder, the escape engine, the quasi-potential, the fits, the escape section
- ``phase`` (3)    two-token chains listed exactly: states and kernel, relaxation and mixing times,
                   growth verdicts and their power, the product-chain yardstick, covering chains and
                   the bound they transfer to the model's own chain
- ``landscape`` (3) the low-temperature landscape from the scores: wells, W-graphs, Gamma, listed and
                   searched; ``phasegrid`` runs the phase section for a profile
- ``pages``        each chapter's page text (sentences, views, figures), apart from its computation

One module per concept of the preprint (chapter)
- ``rectangle`` (1)                                   the rectangle incompatibility test
- ``influence``, ``margins`` (2)                      influence, T*, score margins, drift
- ``semantics``, ``coupling``, ``growth``, ``crossover`` (3)   hitting and coupling times, growth laws
- ``topics``, ``basinnull`` (4)                       topic scores and recurrent basins; the basins null and its power
- ``exact``, ``groundtruth``, ``ising`` (6)           exact chains by enumeration, diagnostics beside them, Li et al.'s Ising
- ``train_mlm``, ``standins``                         the offline English MLM; the paper profile's local stand-ins
"""

import os as _os

__version__ = "0.1.0"

MKL_CBWR = "AUTO,STRICT"
"""Intel MKL's strict conditional numerical reproducibility, set for this process and every process it
starts (the build's kernels, Dask's local workers) before the first MKL call, which is when MKL reads it.
torch's float32 and float64 matrix products go through MKL, and by default MKL splits them differently
at one and at two threads: the same AntiBERTy batch (16 x 14 tokens) gave logits 3e-5 apart at one and
two torch threads, and the trained English model's one-sequence batch 6e-6 apart. In strict mode the
products are bitwise the same at any thread count (20 of 20 model and batch shapes, 2026-12-02), so a
unit computes the same floats serially with torch on every core as on a one-thread worker. It is set
here, on importing the package, because nothing earlier is sure to run before the first product; a
value the environment already had is replaced, since any other would bring the difference back."""
_os.environ["MKL_CBWR"] = MKL_CBWR
