"""The exact phase diagram of two-token Glauber chains of real masked LMs (issue 51, part 1).

Each site i of an n-token text may hold one of two tokens, its pair (a_i, b_i), so a state is a
bit vector x in {0, 1}^n (site i holds pair_i[x_i]) and there are 2^n states: few enough to write
the chain's kernel down and read its relaxation time, its mixing time and its influence
coefficients off exactly, for a real model, over a grid of lengths and temperatures.

Conventions used everywhere below:

- a state is an integer s in [0, 2^n) whose bits are the sites, site 0 the most significant:
  x_i = (s >> (n - 1 - i)) & 1;
- a context of site i is the other n - 1 bits in site order, again most significant first: the
  integer left when bit i is cut out of s (:func:`context_of`);
- the conditional of site i is the softmax of the model's two logits over the pair at
  temperature T, i.e. p_i(1 | context) = 1 / (1 + exp(-(L_1 - L_0) / T)).

The conditional of site i does not read x_i, so a model is asked once per (site, context): n
2^(n-1) rows per length, and those logits serve every temperature (:func:`score_table`).

The package, by concept: ``states`` (states, the score table, the kernel, Dobrushin's alpha),
``mixing`` (relaxation and mixing times, the stationary law, the lower bounds on t_mix), ``verdicts``
(how a time grows with n), ``table`` (the designs and the phase table) and ``coupling`` (coupled
pairs on the exact chain).
"""
from __future__ import annotations

from .coupling import coupling_times_exact, worst_pair
from .covering import (COVERING_COLUMNS, Covering, ProductSpace, cover, covering_row, covering_table,
                       restricted_kernel, sets_text)
from .mixing import (DENSE_MAX, TMIX_MAX_STATES, MixingTime, Relaxation, TrapBound, exit_masses,
                     hamming_ball, mixing_lower_bound, mixing_time, relaxation, stationary_sparse,
                     tmix_lower_from_trel)
from .product import marginals, product_distance, product_tmix, ratio_verdict
from .states import Scores, context_of, dobrushin_alpha, kernel, score_table, site_bits, with_context
from .table import (COLUMNS, design_scorer, design_tokens, global_pairs, passage_pairs, phase_point, phase_table,
                    state_text)
from .transfer import Transfer, transfer_lower_bound
from .verdict_power import growth_power
from .verdicts import growth_verdict

__all__ = ["COLUMNS", "DENSE_MAX", "TMIX_MAX_STATES", "MixingTime", "Relaxation", "Scores",
           "TrapBound", "context_of", "coupling_times_exact", "design_scorer", "design_tokens", "dobrushin_alpha",
           "exit_masses", "global_pairs", "growth_verdict", "hamming_ball", "kernel", "mixing_lower_bound",
           "mixing_time", "passage_pairs", "phase_point", "phase_table", "relaxation", "score_table", "site_bits",
           "state_text", "stationary_sparse", "tmix_lower_from_trel", "with_context", "worst_pair"]
__all__ += ["growth_power"]
__all__ += ["marginals", "product_distance", "product_tmix", "ratio_verdict"]
__all__ += ["COVERING_COLUMNS", "Covering", "ProductSpace", "Transfer", "cover", "covering_row", "covering_table",
            "restricted_kernel", "sets_text", "transfer_lower_bound"]
