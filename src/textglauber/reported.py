"""The preprint's reported numbers (arXiv 2605.16378, as restated in docs/science.md), in one place,
so that every chapter can set them beside the numbers of its own run."""

RECTANGLE_MEAN_R = {          # section 2: mean R over 300 MS MARCO rectangles, T = 1
    "bert-base-uncased": 0.644,
    "bert-large-uncased": 0.798,
    "roberta-base": 0.705,
    "roberta-large": 0.735,
    "answerdotai/ModernBERT-base": 0.753,
    "gpt2": 0.000,
}
RECTANGLE_PROTOCOL = {"rectangles_per_model": 300, "top_k": 50, "temperature": 1.0, "corpus": "MS MARCO"}

# section 3: bounds
BOUNDS = {
    "sentence_tokens": 14,
    "t_star_vs_empirical": "T* is an order of magnitude above the temperature where mixing is empirically fast",
    "drift_states": 200,
    "drift_min_median": [(0.042, 0.080), (0.024, 0.066)],   # at the two temperatures reported
    "drift_fraction_positive": 1.0,
}

# section 5: recurrent semantic basins (bert-base-uncased, T = 1, 50 chains x 10,000 steps,
# zero-shot scores from facebook/bart-large-mnli every 200 steps)
BASINS_POLITICS = {"health": (0.008, 0.044), "sport": (0.011, 0.036), "science": (0.003, 0.056),
                   "food": (0.003, 0.174), "technology": (0.004, 0.038)}      # step 0 -> 10k
BASINS_SEED_TOPIC = {"health": (0.631, 0.116), "sport": (0.763, 0.204), "science": (0.682, 0.068),
                     "food": (0.834, 0.037), "technology": (0.846, 0.152)}
BASINS_CROSSING = (46, 50)          # chains crossing the politics baseline at least once
BASINS_ENDPOINT_POLITICS = {        # BERT / RoBERTa / ModernBERT
    "health": (0.044, 0.112, 0.026), "sport": (0.036, 0.042, 0.052), "science": (0.056, 0.062, 0.037),
    "food": (0.174, 0.052, 0.038), "technology": (0.038, 0.198, 0.033)}

# section 4: the crossover (a shape, not a table of numbers)
CROSSOVER = {"growth_law": "n log n", "fit": "a n log n + b at high temperature",
             "boundary": "near T of order 1 (secondary sources: 0.5-1 or 1.5-2), moving to higher T as n grows",
             "trials": 100, "seed_tokens": 20}

# section 6: traps on bert-base-uncased (30 chains x 10,000 steps)
TRAPS = {"chains": 30, "steps": 10_000, "traps": 17, "mean_duration": 671, "duration_range": (150, 4_950),
         "perfect": 4, "approximate": 13, "bound": "escape times below one step for every trap: valid but vacuous",
         # section 6 states no temperature; the preprint's chains run at T = 1 (sections 4 and 5), read so here
         "temperature": 1.0}
