"""The preprint's reported numbers (arXiv 2605.16378, as restated in SPEC.md), in one place,
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
