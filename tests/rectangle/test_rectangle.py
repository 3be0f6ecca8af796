"""The rectangle statistic against hand computation, explicit joints and a causal LM."""
import numpy as np
import pytest
import torch

from textglauber import corpus, models, rectangle

from textglauber.vocabulary import AllowedVocab

from conftest import JointScorer, random_joint


def _rects(scorer, tok, count=24, seed=0, n=10):
    passages = corpus.windows(tok, "tiny", n, 40, seed, vocab=getattr(scorer, "vocab", None))
    return rectangle.sample(scorer, passages, count, torch.Generator().manual_seed(seed), top_k=20)


def test_R_equals_hand_computation_from_direct_model_calls(tiny_mlm, full_scorer):
    rects = _rects(full_scorer, tiny_mlm.tokenizer, count=6)
    df = rectangle.score_mlm(full_scorer, rects)
    tok, A = tiny_mlm.tokenizer, full_scorer.vocab.ids

    def logcond(x, site):
        ids = torch.tensor([tiny_mlm.prefix_ids + x + tiny_mlm.suffix_ids])
        ids[0, site + 1] = tok.mask_token_id
        with torch.no_grad():
            logits = tiny_mlm.model(input_ids=ids).logits[0, site + 1][A].double()
        lp = torch.log_softmax(logits, -1)
        return {int(t): float(v) for t, v in zip(A, lp)}

    for r in range(len(rects)):
        x = rects.base[r].tolist()
        i, j = int(rects.i[r]), int(rects.j[r])
        a, b, a2, b2 = x[i], x[j], int(rects.a_prime[r]), int(rects.b_prime[r])
        assert a != a2 and b != b2 and i != j
        xb2 = list(x); xb2[j] = b2
        xa2 = list(x); xa2[i] = a2
        li_b, li_b2, lj_a, lj_a2 = logcond(x, i), logcond(xb2, i), logcond(x, j), logcond(xa2, j)
        path1 = (li_b[a2] - li_b[a]) + (lj_a2[b2] - lj_a2[b])
        path2 = (lj_a[b2] - lj_a[b]) + (li_b2[a2] - li_b2[a])
        assert df.R[r] == pytest.approx(abs(path1 - path2), abs=1e-4)
    assert df.R.mean() > 0.05      # the tiny MLM is incompatible: the test has teeth


def test_replacements_come_from_the_models_top_k(tiny_mlm, full_scorer):
    rects = _rects(full_scorer, tiny_mlm.tokenizer, count=10)
    s = full_scorer.scores(rects.base, rects.i)
    top = full_scorer.vocab.ids[s.topk(21).indices]
    assert all(int(a2) in row.tolist() for a2, row in zip(rects.a_prime, top))


def test_R_is_zero_for_conditionals_of_an_explicit_joint():
    k, n = 4, 4
    sc = JointScorer(np.arange(k), n, random_joint(k, n, seed=3))
    g = torch.Generator().manual_seed(0)
    passages = torch.randint(k, (30, n), generator=g)
    rects = rectangle.sample(sc, passages, 50, g, top_k=3)
    df = rectangle.score_mlm(sc, rects)
    assert df.R.max() < 1e-5
    assert (df.path1.abs() > 1e-3).any()       # the edges themselves are not trivial


def _control(tiny_causal, k=12, count=40, n=10, seed=0):
    vocab = rectangle.candidate_vocab(tiny_causal.tokenizer, "tiny", k)
    sc = rectangle.JointConditionals(models.CausalLMScorer(tiny_causal), vocab)
    passages = rectangle.control_passages(vocab, tiny_causal.tokenizer, "tiny", n, 30, seed)
    rects = rectangle.sample(sc, passages, count, torch.Generator().manual_seed(seed), top_k=50)
    return sc, rects


@pytest.fixture(scope="module")
def control(tiny_causal):
    """The tiny causal LM's joint conditionals over its 12 most frequent tokens, with 40 rectangles."""
    return _control(tiny_causal)


def test_joint_conditionals_are_sequence_probability_ratios(tiny_causal, control):
    """Each row of the control's scores is log p(x with a at i) up to one constant per row,
    checked against full-sequence log-probabilities of every candidate sequence."""
    sc, rects = control
    causal = models.CausalLMScorer(tiny_causal)
    x = rects.base[:4]
    n, k = x.shape[1], sc.vocab.size
    for sites in (rects.i[:4], rects.j[:4], torch.zeros(4, dtype=torch.long), torch.full((4,), n - 1)):
        got = rectangle.JointConditionals(causal, sc.vocab, cache=False).scores(x, sites)
        variants = x.repeat_interleave(k, 0)
        variants[torch.arange(len(variants)), sites.repeat_interleave(k)] = sc.vocab.ids.repeat(len(x))
        want = causal.sequence_logprob(variants).view(len(x), k)
        d = got - want
        assert float((d.max(1).values - d.min(1).values).max()) < 1e-4


def test_control_edges_equal_sequence_log_probability_differences(tiny_causal, control):
    """The arithmetic of the control, checked directly: path1 and path2 both equal
    log p(x11) - log p(x00), where the corners' log-probabilities come from whole sequences."""
    sc, rects = control
    df = rectangle.score_mlm(sc, rects)
    causal = models.CausalLMScorer(tiny_causal)
    x11 = rectangle.statistic._with(rectangle.statistic._with(rects.base, rects.i, rects.a_prime), rects.j, rects.b_prime)
    direct = (causal.sequence_logprob(x11) - causal.sequence_logprob(rects.base)).numpy()
    np.testing.assert_allclose(df.path1, direct, atol=1e-4)
    np.testing.assert_allclose(df.path2, direct, atol=1e-4)


def test_R_is_zero_for_the_causal_control_through_the_mlm_code_path(control):
    sc, rects = control
    assert sc.vocab.contains(rects.a_prime).all() and sc.vocab.contains(rects.b_prime).all()
    assert (rects.a_prime != rects.a).all() and (rects.b_prime != rects.b).all()
    df = rectangle.score_mlm(sc, rects)
    assert df.R.max() < 1e-4
    assert (df.path1.abs() > 1e-2).mean() > 0.9                 # the edges themselves are not trivial
    assert (df.influence_ij > 1e-3).any()                        # and the two sites do interact
    hot = rectangle.score_mlm(sc, rects, temperature=0.5)        # p^2 is a joint too
    assert hot.R.max() < 1e-4


def test_perturbed_control_fails(control):
    """Noise on the conditionals breaks compatibility and the same code path sees it."""
    sc, rects = control
    scale = 0.2
    df = rectangle.score_mlm(rectangle.PerturbedScorer(sc, scale, seed=1), rects)
    # R is |N(0, 8 scale^2)| up to the control's float error: mean scale * sqrt(16 / pi)
    se = scale * np.sqrt(8 * (1 - 2 / np.pi) / len(df))
    assert abs(df.R.mean() - scale * np.sqrt(16 / np.pi)) < 4 * se
    assert (df.R > 1e-3).mean() > 0.9
    # noise on one site's conditional only: rectangles that touch that site fail, others do not
    site = int(rects.i[0])
    one = rectangle.score_mlm(rectangle.PerturbedScorer(sc, scale, seed=1, site=site), rects)
    touch = ((rects.i == site) | (rects.j == site)).numpy()
    assert touch.any() and (~touch).any()
    assert one.R[touch].min() > 1e-4
    assert one.R[~touch].max() < 1e-4


def test_perturbation_is_a_fixed_function_of_the_context(control):
    sc, rects = control
    pert = rectangle.PerturbedScorer(sc, 1.0, seed=2)
    x, s = rects.base[:5], rects.i[:5]
    y = rectangle.statistic._with(x, s, rects.a_prime[:5])                 # same context, other token at the site
    torch.testing.assert_close(pert.noise(x, s), pert.noise(y, s))
    assert not torch.allclose(pert.noise(x, s), pert.noise(x, rects.j[:5]))
    assert not torch.allclose(pert.noise(x, s), rectangle.PerturbedScorer(sc, 1.0, seed=3).noise(x, s))


def test_R_is_zero_for_an_explicit_joint_even_on_windows_with_disallowed_tokens():
    """Sites are drawn only among allowed positions; the other positions may hold anything."""
    k, n = 4, 4
    log_mu = random_joint(k + 2, n, seed=5)
    sc = JointScorer(np.arange(k + 2), n, log_mu)
    vocab = AllowedVocab(ids=torch.arange(k), tokens=tuple(map(str, range(k))), vocab_size=k + 2)

    class Restricted:                    # the joint's conditionals over the candidates 0..k-1 only
        def __init__(self):
            self.vocab, self.max_length = vocab, n

        def scores(self, states, sites):
            return sc.scores(states, sites)[:, :k]

    g = torch.Generator().manual_seed(0)
    passages = torch.randint(k + 2, (40, n), generator=g)
    passages = passages[vocab.contains(passages).sum(1) >= 2]
    rects = rectangle.sample(Restricted(), passages, 60, g, top_k=3)
    assert vocab.contains(rects.a).all() and vocab.contains(rects.b).all()
    df = rectangle.score_mlm(Restricted(), rects)
    assert df.R.max() < 1e-9 and (df.path1.abs() > 1e-3).any()


def test_R_scales_as_one_over_temperature(tiny_mlm, full_scorer):
    rects = _rects(full_scorer, tiny_mlm.tokenizer, count=12)
    r1 = rectangle.score_mlm(full_scorer, rects, temperature=1.0).R.to_numpy()
    r2 = rectangle.score_mlm(full_scorer, rects, temperature=2.5).R.to_numpy()
    np.testing.assert_allclose(r2, r1 / 2.5, rtol=1e-4, atol=1e-6)


def test_grid_reduces_to_rectangle_and_vanishes_on_a_joint(tiny_mlm, full_scorer):
    rects = _rects(full_scorer, tiny_mlm.tokenizer, count=3)
    df = rectangle.score_mlm(full_scorer, rects)
    x, i, j = rects.base[0], int(rects.i[0]), int(rects.j[0])
    g2 = rectangle.grid(full_scorer, x, i, j, [int(x[i]), int(rects.a_prime[0])], [int(x[j]), int(rects.b_prime[0])])
    assert g2["R"][0, 1, 0, 1] == pytest.approx(df.R[0], abs=1e-5)
    assert g2["mean_R"] == pytest.approx(df.R[0], abs=1e-5)
    k, n = 4, 3
    sc = JointScorer(np.arange(k), n, random_joint(k, n, seed=1))
    gj = rectangle.grid(sc, torch.tensor([0, 1, 2]), 0, 2, [0, 1, 2, 3], [2, 3, 0, 1])
    assert gj["mean_R"] < 1e-9 and gj["misfit"] < 1e-9
    gm = rectangle.grid(full_scorer, x, i, j, *[rectangle.runs._grid_tokens(full_scorer, x, s, 4, torch.Generator().manual_seed(0), 20) for s in (i, j)])
    assert gm["misfit"] > 1e-3


def _clustered(rng, clusters=30, per=10, between=1.0, within=0.1):
    """Balanced clusters: value = cluster effect (sd ``between``) + noise (sd ``within``).
    The standard error of the overall mean is sqrt(between^2 / G + within^2 / (G m))."""
    effect = rng.normal(scale=between, size=clusters)
    labels = np.repeat(np.arange(clusters), per)
    values = effect[labels] + rng.normal(scale=within, size=clusters * per)
    se = np.sqrt(between ** 2 / clusters + within ** 2 / (clusters * per))
    return values, labels, se


def test_cluster_bootstrap_width_matches_the_closed_form_where_the_naive_one_is_too_narrow():
    from textglauber.stats import bootstrap_ci, cluster_bootstrap_ci

    rng = np.random.default_rng(0)
    ratios_cluster, ratios_naive = [], []
    for rep in range(20):
        values, labels, se = _clustered(rng)
        lo, hi = cluster_bootstrap_ci(values, labels, seed=rep)
        nlo, nhi = bootstrap_ci(values, seed=rep)
        ratios_cluster.append((hi - lo) / (2 * 1.96 * se))
        ratios_naive.append((nhi - nlo) / (2 * 1.96 * se))
    # the percentile bootstrap over G = 30 clusters is narrow by about sqrt((G - 1) / G)
    assert 0.85 < np.mean(ratios_cluster) < 1.05
    assert np.mean(ratios_naive) < 0.4             # about 1 / sqrt(10): rectangles are not independent


def test_cluster_bootstrap_covers_the_true_mean():
    from textglauber.stats import bootstrap_ci, cluster_bootstrap_ci

    rng = np.random.default_rng(1)
    hit, naive_hit, reps = 0, 0, 200
    for rep in range(reps):
        values, labels, _ = _clustered(rng, clusters=40)
        lo, hi = cluster_bootstrap_ci(values, labels, n_boot=500, seed=rep)
        nlo, nhi = bootstrap_ci(values, n_boot=500, seed=rep)
        hit += lo <= 0.0 <= hi
        naive_hit += nlo <= 0.0 <= nhi
    assert hit / reps > 0.88              # nominal 0.95; sd of the estimate about 0.015
    assert naive_hit / reps < 0.6


def test_cluster_bootstrap_with_singleton_clusters_is_the_plain_bootstrap():
    from textglauber.stats import bootstrap_ci, cluster_bootstrap_ci

    v = np.random.default_rng(2).exponential(size=50)
    a = cluster_bootstrap_ci(v, np.arange(50), seed=3)
    b = bootstrap_ci(v, seed=3)
    assert a == pytest.approx(b, rel=1e-9)


def test_summary_interval_resamples_passages():
    """Rectangles from one passage share its R level: summary's interval has the width of a
    cluster mean, not of independent rectangles."""
    import pandas as pd

    rng = np.random.default_rng(4)
    widths, ses = [], []
    for rep in range(10):
        values, labels, se = _clustered(rng, between=0.5, within=0.05)
        df = pd.DataFrame({"model": "m", "kind": "mlm", "seq_id": labels, "base": [[int(l), 7] for l in labels],
                           "R": values + 2.0, "influence_ij": rng.random(len(values)),
                           "influence_ji": rng.random(len(values))})
        row = rectangle.summary(df, seed=rep).iloc[0]
        widths.append(row["95% CI high"] - row["95% CI low"])
        ses.append(se)
    assert 0.85 < np.mean(widths) / (2 * 1.96 * np.mean(ses)) < 1.05


@pytest.mark.slow
def test_control_windows_are_cut_from_the_masked_lms_texts():
    """Issue 19: the control must read the masked LMs' text, not its own windows of n of its tokens.
    With a WordPiece (uncased MiniLM) masked LM and a byte-level BPE control (SmolLM2), each control
    window decodes to the start of one of the masked LM's windows; the control's own cut (the old
    behaviour) keeps the corpus's capitals and so is not such a prefix."""
    from transformers import AutoTokenizer

    from textglauber import train_mlm, vocabulary

    mlm_tok = AutoTokenizer.from_pretrained(train_mlm.minilm_dir())
    ctl_tok = models.tokenizer("package:smollm2-135m")
    vocab = rectangle.candidate_vocab(ctl_tok, "lee", 16)
    n, count, seed = 12, 20, 3
    norm = lambda t: " ".join(t.split())
    mlm_texts = [norm(vocabulary.decode(mlm_tok, w)) for w in corpus.windows(mlm_tok, "lee", n, 2 * count, seed)]
    shared = rectangle.control_passages(vocab, ctl_tok, "lee", n, count, seed, text_from=mlm_tok)
    own = rectangle.control_passages(vocab, ctl_tok, "lee", n, count, seed)
    assert shared.shape == (count, n)

    def prefix_share(win):
        return np.mean([any(t.startswith(norm(vocabulary.decode(ctl_tok, w))) for t in mlm_texts) for w in win])

    assert prefix_share(shared) == 1.0
    assert prefix_share(own) < 0.5


# ------------------------------------------------------------------ the chapter's reading of the rectangles
import pandas as pd  # noqa: E402  (only these tests need it)

from textglauber import reported  # noqa: E402
from textglauber.pages import incompatibility as incompatibility_page  # noqa: E402
from textglauber.profile import IncompatibilityModel  # noqa: E402


def _rows(model, kind, R, path1=None):
    R = np.asarray(R, dtype=float)
    return pd.DataFrame({"model": model, "kind": kind, "R": R, "path1": np.ones_like(R) if path1 is None else path1})


def test_control_note_says_where_the_controls_windows_come_from():
    info = {"name": "tiny-causal", "kind": "causal", "candidates": 3, "corpus": "tiny", "candidate_tokens": ["a", "b", "c"],
            "n": 8, "noise": 0.0, "texts_of": "tiny-mlm"}
    assert rectangle.control_info([{"name": "m", "kind": "mlm"}, info]) is info
    assert rectangle.control_info([{"name": "m", "kind": "mlm"}]) is None
    text = incompatibility_page.control_note(info)
    assert "the 3 most frequent tokens of its corpus `tiny`" in text and "`a`, `b`, `c`" in text
    assert "the texts that `tiny-mlm` reads" in text and "No perturbed copy was run" in text
    own = incompatibility_page.control_note({**info, "texts_of": "its own windows", "noise": 0.05})
    assert "its windows are its own 8-token passages" in own and "standard deviation 0.05" in own
    assert incompatibility_page.control_note(None) == "This profile runs no joint-model control."


def test_floor_sentences_set_the_models_against_the_controls_largest_R():
    rects = pd.concat([_rows("c", "causal", [1e-7, 2e-7, 3e-7], path1=[0.5, -1.0, 2.0]),
                       _rows("a", "mlm", [1e-8, 5e-7, 1.0, 2.0]), _rows("b", "mlm", [1e-9, 1e-9]),
                       _rows("c + noise 0.05", "perturbed", [0.1, 0.3])], ignore_index=True)
    text = incompatibility_page.floor_sentences(rects, {"noise": 0.05})
    assert "mean 2.0e-07 and maximum 3.0e-07 over 3 rectangles" in text and "median size 1.00 (nats)" in text
    assert "largest value: a 75%; b 0%." in text                       # 3 of a's 4 and none of b's lie above 3e-7
    assert f"has mean R 0.200; for noise on every conditional the expected value is 0.05 x sqrt(16/pi) = " \
           f"{0.05 * 4 / np.sqrt(np.pi):.3f}" in text and "100% of its rectangles" in text
    assert incompatibility_page.floor_sentences(rects[rects.kind == "mlm"], None) == ""


def test_dtype_floor_sentence_weighs_the_difference_against_a_tenth_of_R():
    floor = pd.DataFrame([{"model": "m", "rectangles": 10, "mean R (float32)": 1.0, "mean |R difference|": 0.05,
                           "max |R difference|": 0.2}])
    small = incompatibility_page.dtype_floor_sentence(floor)
    assert small.startswith("With bf16 weights the same 10 rectangles of `m` move by 0.05 on average and by up to 0.2")
    assert small.endswith("a floor well below the effect measured here.")
    large = incompatibility_page.dtype_floor_sentence(floor.assign(**{"mean |R difference|": 0.1}))
    assert large.endswith("not small beside the effect, which is why the measuring chapters score in float32.")


def test_spread_sentence_gives_each_models_deciles_and_their_ratio():
    R = np.arange(1, 101, dtype=float)
    lo, hi = np.quantile(R, [0.1, 0.9])
    both = pd.concat([_rows("m", "mlm", R), _rows("z", "mlm", np.zeros(5))], ignore_index=True)
    assert incompatibility_page.spread_sentence(both) == (f"10th and 90th percentiles of R: m {lo:.3g} and {hi:.3g} "
                                               f"(ratio {hi / lo:.0f}); z 0 and 0.")
    assert incompatibility_page.spread_sentence(both.iloc[:0]) == ""


def test_grid_summary_counts_and_averages_each_models_grids():
    grids = pd.DataFrame({"model": ["b", "a", "a"], "grid": [0, 0, 1], "K": 3, "mean_R": [1.0, 2.0, 4.0],
                          "misfit": [0.1, 0.2, 0.4]})
    out = rectangle.grid_summary(grids)
    assert out.to_dict("list") == {"model": ["a", "b"], "grids": [2, 1], "K": [3, 3], "mean_R": [3.0, 1.0],
                                   "misfit": [pytest.approx(0.3), 0.1]}


def test_along_training_plot_draws_one_line_per_start_on_each_axis():
    import matplotlib.pyplot as plt

    along = pd.DataFrame({"start": ["scratch", "scratch", "minilm"], "fraction": [0.5, 1.0, 1.0], "top1": [0.2, 0.3, 0.25],
                          "mean R": [1.0, 2.0, 3.0], "95% CI low": [0.5, 1.5, 2.5], "95% CI high": [1.5, 2.5, 3.5]})
    fig, axes = plt.subplots(1, 2)
    incompatibility_page.plot_along_training(axes, along)
    for ax, x in zip(axes, ("fraction", "top1")):
        assert [c.get_label() for c in ax.containers] == ["start: minilm", "start: scratch"]
        assert list(ax.containers[1].lines[0].get_xdata()) == list(along[x][:2])
    plt.close(fig)


def _summary(rows):
    cols = ["model", "kind", "rectangles", "mean R", "95% CI low", "95% CI high", "max R", "Spearman(R, influence)"]
    return pd.DataFrame(rows, columns=cols)


def test_preprint_table_puts_the_papers_means_above_this_runs():
    summary = _summary([["m", "mlm", 20, 0.5, 0.4, 0.6, 1.0, 0.3]])
    table = incompatibility_page.preprint_table(summary, "smoke")
    assert list(table.columns) == ["source", "model", "rectangles", "mean R", "95% CI low", "95% CI high"]
    paper = table.iloc[:-1]
    assert dict(zip(paper.model, paper["mean R"])) == reported.RECTANGLE_MEAN_R
    assert (paper.rectangles == reported.RECTANGLE_PROTOCOL["rectangles_per_model"]).all()
    assert table.iloc[-1][["source", "model", "mean R"]].tolist() == ["this run, profile 'smoke'", "m", 0.5]


def test_protocol_sentence_sorts_each_choice_into_agrees_or_differs():
    proto = reported.RECTANGLE_PROTOCOL
    paper = _summary([["m", "mlm", proto["rectangles_per_model"], 0.5, 0.4, 0.6, 1.0, 0.3]])
    same = incompatibility_page.protocol_sentence([IncompatibilityModel(name="m", corpus="msmarco")], paper, seq_len=12, n_rectangles=300,
                                       top_k=proto["top_k"], temperature=proto["temperature"])
    assert same == ("Protocol of this run: windows of n = 12 tokens; as in the preprint, passages from msmarco, "
                    "300 rectangles per masked LM, replacements from the top-50, T = 1.")
    other = incompatibility_page.protocol_sentence([IncompatibilityModel(name="m", corpus="tiny")], paper.assign(rectangles=[20]), seq_len=12, n_rectangles=20,
                                        top_k=proto["top_k"], temperature=2.0)
    assert other == ("Protocol of this run: windows of n = 12 tokens; as in the preprint, replacements from the top-50; "
                     "unlike the preprint, passages from tiny (the preprint: MS MARCO), 20 rectangles per masked LM "
                     "(the preprint: 300), T = 2 (the preprint: T = 1).")


def test_preprint_sentences_count_the_models_that_clear_the_controls_floor():
    summary = _summary([["a", "mlm", 20, 0.5, 0.4, 0.6, 1.0, 0.3], ["b", "mlm", 20, 0.1, 1e-9, 0.2, 1.0, -0.1],
                        ["c", "causal", 20, 1e-7, 1e-8, 2e-7, 3e-7, 0.0]])
    text = " ".join(incompatibility_page.preprint_sentences(summary, {"candidates": 16}, "smoke"))
    assert "The control here is `c` with conditionals over 16 candidate tokens (20 rectangles)" in text
    assert "mean R from 0.1 to 0.5" in text
    assert "For 1 of 2 masked LMs the lower end" in text and "for the others it cannot be told apart from it." in text
    assert "for 1 of 2 masked LMs; the preprint reports" in text
    assert "gives a largest R of 3.0e-07, zero up to float error" in text
    assert "No model of profile 'smoke' is one of the preprint's" in text
    shared = incompatibility_page.preprint_sentences(summary.assign(model=["roberta-base", "b", "c"]), {"candidates": 16}, "paper")
    assert shared[-1] == "Models shared with the preprint: roberta-base; their numbers can be compared directly."
