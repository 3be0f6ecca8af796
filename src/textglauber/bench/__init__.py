"""The benchmark: how close the engine runs to the machine's limit, against the older ways.

    python -m textglauber.bench                      # CPU, the default grid
    python -m textglauber.bench --quick              # a small grid (minutes)
    python -m textglauber.bench --device cuda        # the GPU path (bf16 weights, float32 scores)
    python -m textglauber.bench --compile            # adds the engine through torch.compile
    python -m textglauber.bench --metastable         # the engine modes in the slow regime

The throughput grid (:mod:`.throughput`) times these variants on the same inputs:

- ``engine``: this library's step: B chains, each with its own site, one encoder pass whose
  last layer runs its query and feed-forward block on the B masked rows only (BERT-style
  encoders), the LM head on B rows and |A| columns, and one draw per chain;
- ``fill_mask_loop``: one chain per forward pass with full logits (a fill-mask style loop),
  then a draw from the softmax over the whole vocabulary;
- ``shared_site_full``: one forward pass for the batch, every chain masked at the same site,
  full B x n x V logits materialised (as earlier public Gibbs code does), then a draw per chain;
- ``coupled_pairs``: one coupled step for B/2 pairs (2 rows each);
- ``rectangles``: rectangles scored per second (4 masked rows each);
- ``engine_compiled`` (with ``--compile``): the engine's pass through ``torch.compile``.

Throughput is chain-steps (or rectangles) per second, the median over interleaved rounds. The
compute bound is the measured matrix-multiply rate divided by the model's FLOPs per chain-step.
Logit memory is read off the logit tensors each variant creates; peak memory is what one call
adds to the process (:mod:`.measure`). BERT-base shape uses random weights (throughput does not
depend on them); AntiBERTy and rxnfp BERT are the real packaged models.

The metastable grid (:mod:`.metastable`) runs the same chains through the engine's modes
``plain``, ``memo``, ``jump`` and ``auto``, from burned-in states and from perfect traps
(:mod:`textglauber.traps.finder`), and reads its targets as ratios to plain in one run.

Modules: :mod:`.measure` (memory, stolen CPU time, interleaved timing, paired ratios),
:mod:`.throughput`, :mod:`.metastable`, :mod:`.read` (the tables read back for the cost appendix
and its headline), :mod:`.cache` (the short benchmark as a cached build artifact) and
``__main__`` (the command line). This file imports none of them, so that the build can read the
artifact's key (:mod:`.cache`) without loading torch.
"""
