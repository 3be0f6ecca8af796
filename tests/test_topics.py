"""Topic scoring and recurrence statistics."""
import numpy as np
import pytest
import torch

from textglauber import engine, reported, topics
from textglauber.pages import basins as basins_page
from textglauber.scheduler import RunSettings
from textglauber.profile import ModelSpec

LABELLED = [  # written for this test, disjoint from the calibration set
    ("the goalkeeper saved a penalty and his club won the football league", "sport"),
    ("parliament voted on the new law after the prime minister's speech", "politics"),
    ("shares fell on the stock exchange as the central bank raised rates", "finance"),
    ("add the onions to the pan and fry them with garlic and pepper", "food"),
    ("the vaccine protects patients against the virus, the doctors said", "health"),
    ("the telescope detected light from a galaxy billions of years old", "science"),
]


@pytest.fixture(scope="module")
def minilm_scorer():
    return topics.scorer("embedding:package:all-MiniLM-L6-v2")


def test_embedding_scorer_ranks_the_right_label_first(minilm_scorer):
    p = minilm_scorer([t for t, _ in LABELLED])
    assert p.shape == (len(LABELLED), len(topics.LABELS))
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-9)
    predicted = [topics.LABELS[k] for k in p.argmax(1)]
    assert predicted == [l for _, l in LABELLED]


def test_calibrated_temperature_beats_the_extremes(minilm_scorer):
    cal = topics.calibration_set()
    y = np.array([topics.LABELS.index(l) for l in cal.label])
    cos = minilm_scorer.cosines(cal.text.tolist())

    def nll(t):
        return -np.log(topics._softmax(cos / t)[np.arange(len(y)), y]).mean()
    t = minilm_scorer.temperature
    assert 0.005 < t < 1.0                      # an interior optimum: the set is not separable
    assert nll(t) <= nll(t * 3) and nll(t) <= nll(t / 3)


def test_recurrence_counts_upward_crossings_on_a_known_series():
    steps = np.arange(0, 1000, 100)
    score = np.array([0.05, 0.2, 0.3, 0.05, 0.01, 0.15, 0.02, 0.02, 0.5, 0.4])
    r = topics.recurrence(steps, score, baseline=0.1)
    assert not r["starts_above"] and r["upward_crossings"] == 3 and r["crossed_up"]
    assert (r["first crossing"], r["last crossing"]) == (100.0, 800.0)
    assert r["peak"] == 0.5 and r["end"] == 0.4 and r["share above"] == pytest.approx(0.5)
    flat = topics.recurrence(steps, np.full(10, 0.05), 0.1)
    assert not flat["crossed_up"] and not flat["ever_above"] and np.isnan(flat["first crossing"])
    at = topics.recurrence(steps[:4], np.array([0.1, 0.2, 0.1, 0.2]), 0.1)   # "at" the baseline is not above
    assert at["upward_crossings"] == 2 and at["first crossing"] == 100.0 and not at["starts_above"]


def test_a_chain_starting_above_has_not_risen_above():
    """Starting above the baseline is not a crossing; only falling to or below it and rising
    again is (the old rule counted the first record as a crossing)."""
    steps = np.arange(0, 500, 100)
    stays = topics.recurrence(steps, np.array([0.3, 0.3, 0.2, 0.4, 0.5]), 0.1)
    assert stays["starts_above"] and stays["ever_above"]
    assert stays["upward_crossings"] == 0 and not stays["crossed_up"] and np.isnan(stays["first crossing"])
    falls = topics.recurrence(steps, np.array([0.3, 0.05, 0.05, 0.05, 0.02]), 0.1)
    assert falls["starts_above"] and falls["upward_crossings"] == 0 and not falls["crossed_up"]
    returns = topics.recurrence(steps, np.array([0.3, 0.05, 0.2, 0.1, 0.4]), 0.1)
    assert returns["starts_above"] and returns["upward_crossings"] == 2
    assert (returns["first crossing"], returns["last crossing"]) == (200.0, 400.0)


def test_recurrence_matches_a_plain_loop_on_random_series():
    rng = np.random.default_rng(3)
    for _ in range(200):
        score = rng.choice([0.05, 0.1, 0.2], size=rng.integers(1, 12))
        steps = np.arange(len(score)) * 50
        ups = [steps[k] for k in range(1, len(score)) if score[k - 1] <= 0.1 < score[k]]
        r = topics.recurrence(steps, score, 0.1)
        assert r["upward_crossings"] == len(ups) and r["starts_above"] == (score[0] > 0.1)
        assert r["crossed_up"] == bool(ups) and r["ever_above"] == bool((score > 0.1).any())
        if ups:
            assert (r["first crossing"], r["last crossing"]) == (ups[0], ups[-1])


def test_protocol_differences_name_each_departure_from_the_preprint():
    ref = dict(model="bert-base-uncased", topic_scorer="nli:facebook/bart-large-mnli", labels=topics.LABELS,
               temperature=1.0, steps=10_000, score_every=200, chains_per_topic=10)
    assert basins_page.protocol_differences(**ref) == {}
    paper = basins_page.protocol_differences(**{**ref, "chains_per_topic": 12})
    assert set(paper) == {"chains_per_topic"}
    offline = basins_page.protocol_differences(**{**ref, "model": "trained:english", "topic_scorer":
                                             "embedding:package:all-MiniLM-L6-v2", "steps": 3000, "score_every": 100,
                                             "labels": topics.LABELS[:9]})
    assert set(offline) == {"model", "topic_scorer", "steps", "score_every", "labels"}
    assert "1/9 = 0.111" in offline["labels"] and "another scale" in offline["topic_scorer"]


def test_preprint_starts_above_bound():
    """Step-0 politics means of 0.008 / 0.011 / 0.003 / 0.003 / 0.004 over 10 chains each: with
    baseline 1/11 or 1/9 only the sport topic (mean up to 0.0115, 10 chains: sum up to 0.115)
    leaves room for one chain above; at 0.02 the topics allow 4 + 5 + 1 + 1 + 2; at 0.002 all 50."""
    assert topics.preprint_max_starts_above(1 / 11) == 1
    assert topics.preprint_max_starts_above(1 / 9) == 1
    assert topics.preprint_max_starts_above(0.2) == 0
    assert topics.preprint_max_starts_above(0.02) == 13
    assert topics.preprint_max_starts_above(0.002) == 50


# ------------------------------------------------------------------ the NLI scorer on a stand-in model
MNLI = {0: "contradiction", 1: "neutral", 2: "entailment"}
NLI_TEXTS = ["the minister spoke to parliament about the election",
             "add garlic and onions to the hot pan",
             "the striker scored twice in the final",
             "a new vaccine was tested on patients",
             "shares fell sharply"]
NLI_LABELS = ["politics", "food", "sport", "health", "finance", "art"]


@pytest.fixture(scope="module")
def nli_models(tmp_path_factory):
    """Two copies of one random BERT sequence classifier (bert-base WordPiece vocabulary, shipped
    with the all-MiniLM-L6-v2 package): one in the MNLI label layout, one whose output rows and
    labels are permuted (upper-case names, as some NLI checkpoints have them). Same network, so
    the same entailment logit."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from textglauber.train_mlm import minilm_dir

    tok = AutoTokenizer.from_pretrained(str(minilm_dir()))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, initializer_range=0.5, id2label=MNLI,
                     label2id={v: k for k, v in MNLI.items()})
    model = BertForSequenceClassification(cfg).eval()
    root = tmp_path_factory.mktemp("nli")
    model.save_pretrained(root / "mnli")
    tok.save_pretrained(root / "mnli")
    order = [2, 0, 1]                                # new row k holds old row order[k]
    permuted = BertForSequenceClassification.from_pretrained(root / "mnli").eval()
    with torch.no_grad():
        permuted.classifier.weight.copy_(model.classifier.weight[order])
        permuted.classifier.bias.copy_(model.classifier.bias[order])
    permuted.config.id2label = {k: MNLI[o].upper() for k, o in enumerate(order)}
    permuted.config.label2id = {v: k for k, v in permuted.config.id2label.items()}
    permuted.save_pretrained(root / "permuted")
    tok.save_pretrained(root / "permuted")
    return tok, model, root


@pytest.fixture(scope="module")
def direct_logits(nli_models):
    """(text, label, class) logits of (text, "This example is {label}."), one unpadded forward pass
    per pair, straight from the MNLI-layout model."""
    tok, model, _ = nli_models
    out = np.empty((len(NLI_TEXTS), len(NLI_LABELS), len(MNLI)))
    with torch.no_grad():
        for a, text in enumerate(NLI_TEXTS):
            for b, label in enumerate(NLI_LABELS):
                enc = tok(text, f"This example is {label}.", return_tensors="pt")
                out[a, b] = model(**enc).logits[0].numpy()
    return out


def test_nli_scorer_is_the_softmax_over_labels_of_the_entailment_logit(nli_models, direct_logits):
    _, _, root = nli_models
    want = topics._softmax(direct_logits[:, :, 2])              # per text, softmax over labels
    assert np.abs(want - 1 / len(NLI_LABELS)).max() > 0.05     # far from uniform: the check has teeth
    for folder in ("mnli", "permuted"):                         # the index comes from label2id, not a position
        sc = topics.NLITopicScorer(str(root / folder), NLI_LABELS, device="cpu", dtype="float32", batch=4)
        assert sc.entail == {"mnli": 2, "permuted": 0}[folder]
        got = sc(NLI_TEXTS)                                     # batches of 4 pairs, padded, cut across texts
        np.testing.assert_allclose(got, want, atol=1e-5)
        np.testing.assert_allclose(got.sum(1), 1.0, atol=1e-6)


def test_nli_scorer_check_can_fail(nli_models, direct_logits):
    """The same direct computation on the contradiction or neutral logit gives another answer."""
    _, _, root = nli_models
    got = topics.NLITopicScorer(str(root / "mnli"), NLI_LABELS, device="cpu", dtype="float32")(NLI_TEXTS)
    np.testing.assert_allclose(got, topics._softmax(direct_logits[:, :, 2]), atol=1e-5)
    for wrong in (0, 1):
        assert np.abs(got - topics._softmax(direct_logits[:, :, wrong])).max() > 0.05


def test_nli_scorer_agrees_with_the_zero_shot_pipeline(nli_models):
    """transformers' single-label zero-shot pipeline is an independent implementation of the rule."""
    from transformers import pipeline

    _, _, root = nli_models
    got = topics.NLITopicScorer(str(root / "permuted"), NLI_LABELS, device="cpu", dtype="float32")(NLI_TEXTS)
    pipe = pipeline("zero-shot-classification", model=str(root / "permuted"), tokenizer=str(root / "permuted"),
                    device="cpu")
    for text, row in zip(NLI_TEXTS, got):
        res = pipe(text, candidate_labels=NLI_LABELS, hypothesis_template=topics.HYPOTHESIS, multi_label=False)
        ref = dict(zip(res["labels"], res["scores"]))
        np.testing.assert_allclose(row, [ref[l] for l in NLI_LABELS], atol=1e-5)


def test_nli_scorer_refuses_a_model_without_an_entailment_label(nli_models, tmp_path):
    from transformers import BertForSequenceClassification

    tok, model, _ = nli_models
    other = BertForSequenceClassification(model.config.__class__(**{**model.config.to_dict(),
                                                                    "id2label": {0: "a", 1: "b", 2: "c"},
                                                                    "label2id": {"a": 0, "b": 1, "c": 2}}))
    other.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="entailment"):
        topics.NLITopicScorer(str(tmp_path), NLI_LABELS, device="cpu", dtype="float32")


def test_prefix_conditioned_chain_keeps_its_prefix(tiny_mlm, full_scorer):
    prefix = tiny_mlm.tokenizer("the old teacher said that", add_special_tokens=False)["input_ids"]
    free = full_scorer.vocab.ids[torch.randint(full_scorer.vocab.size, (6, 7), generator=torch.Generator().manual_seed(0))]
    init = torch.cat([torch.tensor(prefix).expand(6, -1), free], 1)
    run = engine.run(full_scorer, init, engine.ChainSpec(temperature=1.0, steps=80, record_every=4,
                                                         prefix_len=len(prefix)), seed=0)
    assert (run.states[:, :, :len(prefix)] == np.array(prefix)).all()


# ------------------------------------------------------------------ the null model of the recurrence count
import pandas as pd  # noqa: E402  (only these tests need it)


def test_recurrence_time_averages_leave_out_the_seed():
    steps = np.arange(0, 1000, 100)                  # last step 900: the second half is steps 500 to 900
    score = np.array([0.5, 0.2, 0.3, 0.05, 0.01, 0.15, 0.02, 0.02, 0.5, 0.4])
    r = topics.recurrence(steps, score, baseline=0.1)
    assert r["share above after start"] == pytest.approx(5 / 9)
    assert r["mean after start"] == pytest.approx(score[1:].mean())
    assert r["share above late"] == pytest.approx(3 / 5)
    one = topics.recurrence(steps[:1], score[:1], 0.1)
    assert np.isnan(one["share above after start"]) and np.isnan(one["share above late"])


def _chains(crossed, starts_above=False, **averages):
    n = len(crossed)
    return pd.DataFrame({"starts_above": starts_above, "crossed_up": crossed,
                         **{s: averages.get(s, np.zeros(n)) for s in list(topics.NULL_STATISTICS)[1:]}})


def test_null_comparison_on_a_known_answer():
    """10 of 10 against 0 of 10: the one-sided Fisher p is one table in C(20, 10); chains that
    start above the baseline are left out of the crossing share in both groups."""
    topic = _chains([True] * 10 + [False] * 3, starts_above=[False] * 10 + [True] * 3,
                    **{"mean after start": np.r_[np.full(10, 0.3), np.full(3, 0.2)]})
    null = _chains([False] * 10 + [True] * 5, starts_above=[False] * 10 + [True] * 5,
                   **{"mean after start": np.full(15, 0.05)})
    c = topics.null_comparison(topic, null, rng=0).set_index("statistic")
    cs = c.loc["crossing share"]
    assert (cs["n topic"], cs["count topic"], cs["n null"], cs["count null"]) == (10, 10, 10, 0)
    assert cs.p == pytest.approx(1 / 184756) and cs.exceeds
    assert cs.difference == 1.0 and 0.6 < cs.low < 0.65 and cs.high == pytest.approx(1.0)
    m = c.loc["mean after start"]
    assert m.topic == pytest.approx((10 * 0.3 + 3 * 0.2) / 13) and m.null == pytest.approx(0.05)
    assert m.p < 1e-3 and m.exceeds and m.low > 0.2
    # the shares are equal (0): no excess
    assert not c.loc["share above after start"].exceeds and c.loc["share above after start"].p == 1.0
    # Newcombe's worked examples (Statistics in Medicine 1998, method 10)
    np.testing.assert_allclose(topics.share_difference_interval(56, 70, 48, 80), (0.0524, 0.3339), atol=1e-4)
    np.testing.assert_allclose(topics.share_difference_interval(9, 10, 3, 10), (0.1705, 0.8090), atol=1e-4)
    # every null chain starts above: nothing to compare, and no verdict of excess
    gone = topics.null_comparison(topic, _chains([True] * 4, starts_above=True), rng=0).set_index("statistic")
    assert gone.loc["crossing share", "n null"] == 0 and np.isnan(gone.loc["crossing share", "p"])
    assert not gone.loc["crossing share", "exceeds"]


def _series(rng, chains, records, basin):
    """Score series below a baseline of 0.1 with rare noisy excursions above it (about one record
    in 60); with ``basin``, each chain also enters a basin at a random record with probability
    0.9 and stays above the baseline for 5 records."""
    steps = np.arange(records) * 50
    out = []
    for _ in range(chains):
        score = 0.1 * np.exp(rng.normal(-1.2, 0.5, records))
        if basin and rng.random() < 0.9:
            k = rng.integers(1, records - 5)
            score[k:k + 5] = rng.uniform(0.12, 0.3, 5)
        score[0] = 0.02                                       # every seed starts well below
        out.append(topics.recurrence(steps, score, 0.1))
    return pd.DataFrame(out)


def test_null_comparison_finds_a_planted_basin_and_not_noise():
    """Pure noise in both groups: the noise alone makes some chains cross (the reason for a
    null), and the test finds an excess in few replicates (near its 5% level). A planted basin
    in the topic group: an excess in nearly every replicate."""
    rng = np.random.default_rng(7)
    noise, planted, null_crossed = 0, 0, []
    for _ in range(20):
        null = _series(rng, 20, 30, basin=False)
        null_crossed.append(null.crossed_up.mean())
        c = topics.null_comparison(_series(rng, 20, 30, basin=False), null, boot=500, rng=rng)
        noise += bool(c.set_index("statistic").loc["crossing share", "exceeds"])
        c = topics.null_comparison(_series(rng, 20, 30, basin=True), null, boot=500, rng=rng)
        planted += bool(c.set_index("statistic").loc["crossing share", "exceeds"])
    assert 0.1 < np.mean(null_crossed) < 0.6          # noise alone crosses the baseline in a fair share of chains
    assert noise <= 3 and planted >= 18


def test_null_states_keep_the_tokens_or_draw_from_the_allowed_vocabulary():
    ids = torch.arange(30).view(3, 10)                       # three seed windows of 10 tokens
    allowed = torch.tensor([100, 101, 102, 103])
    out, kind, source = topics.null_states(ids, ["food", "sport", "health"], allowed, ["shuffled", "random"], 7,
                                           torch.Generator().manual_seed(0))
    assert out.shape == (7, 10) and kind == ["shuffled"] * 4 + ["random"] * 3
    for row, src in zip(out[:4], source[:4]):
        k = ["food", "sport", "health"].index(src)
        assert sorted(row.tolist()) == ids[k].tolist()       # the same tokens ...
    assert any(row.tolist() != sorted(row.tolist()) for row in out[:4])   # ... in another order
    assert len({s for s in source[:3]}) == 3                 # windows drawn without replacement while they last
    assert source[4:] == [None] * 3 and set(out[4:].flatten().tolist()) <= set(allowed.tolist())
    with pytest.raises(ValueError, match="unknown null seeds"):
        topics.null_states(ids, ["food"] * 3, allowed, ["reversed"], 2, torch.Generator())
    none, _, _ = topics.null_states(ids, ["food"] * 3, allowed, ["shuffled"], 0, torch.Generator())
    assert none.shape == (0, 10)


def test_findings_line_says_whether_the_recurrence_exceeds_the_null(tmp_path):
    import json

    from textglauber import results
    from textglauber.pages import basins as basins_page

    (tmp_path / "manifest.json").write_text(json.dumps({"parameters": {
        "basin_label": "politics", "labels": ["politics"] + [f"l{k}" for k in range(10)], "steps": 600,
        "null_seeds": ["shuffled", "random"]}, "tables": ["summary", "recurrence"]}))
    results.write_table(pd.DataFrame({"seed topic": ["health"], "politics at 0": [0.01], "politics at end": [0.1]}),
                        tmp_path, "summary")
    results.write_table(pd.DataFrame({"model": "m", "chain": range(6), "crossed_up": [True, True, True, False, True, False],
                                      "kind": ["topic"] * 4 + ["random", "shuffled"]}), tmp_path, "recurrence")
    line = basins_page.headline(tmp_path, tmp_path, "x").text()
    assert "3 of 4 chains crossed the politics baseline (1/11) upward; no null model ran." in line
    rows = pd.DataFrame({"model": "m", "against": ["shuffled + random", "random"], "statistic": "crossing share",
                         "n topic": 4, "n null": [2, 1], "count topic": 3, "count null": [1, 1], "p": [0.5, 0.7],
                         "exceeds": False})
    results.write_table(rows, tmp_path, "recurrence_null")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    (tmp_path / "manifest.json").write_text(json.dumps({**manifest, "tables": [*manifest["tables"], "recurrence_null"]}))
    line = basins_page.headline(tmp_path, tmp_path, "x").text()
    assert "3 of 4 topic-seeded chains against 1 of 2 chains from seeds with no topic" in line
    assert "p = 0.5): the recurrence does not exceed the null model's." in line
    results.write_table(rows.assign(p=[0.01, 0.2], exceeds=[True, False]), tmp_path, "recurrence_null")
    assert "p = 0.01): the recurrence exceeds the null model's." in basins_page.headline(tmp_path, tmp_path, "x").text()


@pytest.mark.parametrize("filters", [{"whole_words": True}, {"alphabetic": True}])
def test_seed_states_hold_only_tokens_of_the_allowed_vocabulary(tiny_mlm, filters):
    """With an allowed vocabulary the seed windows skip the tokens outside it (the tiny MLM's
    [UNK] for words it lacks, and punctuation under ``alphabetic``): every token is one the chain
    could write, each row is its sentence's allowed tokens in order, the ids alone work as well,
    and a sentence without any allowed token is refused by name."""
    from textglauber import vocabulary

    tok = tiny_mlm.tokenizer
    v = vocabulary.allowed_vocabulary(tok, **filters)
    wanted = ["health", "sport", "food"]
    unfiltered, _, _ = topics.seed_states(tok, wanted, 2, 20)
    assert not bool(v.contains(unfiltered).all())                  # the check can fail: seeds hold such tokens
    ids, labels, texts = topics.seed_states(tok, wanted, 2, 20, vocab=v)
    assert ids.shape == (6, 20) and labels == [t for t in wanted for _ in range(2)]
    assert bool(v.contains(ids).all())
    allowed = set(v.ids.tolist())
    for row, text in zip(ids.tolist(), texts):
        own = [i for i in vocabulary.encode(tok, text) if i in allowed]
        assert row[:len(own)] == own[:20]
    assert torch.equal(topics.seed_states(tok, wanted, 2, 20, vocab=v.ids)[0], ids)
    seen = set(vocabulary.encode(tok, " ".join(topics.seed_texts().text)))
    absent = next(t for i, t in zip(v.ids.tolist(), v.tokens) if i not in seen)
    with pytest.raises(ValueError, match="no token in the allowed vocabulary"):
        topics.seed_states(tok, ["health"], 1, 20, vocab=vocabulary.allowed_vocabulary(tok, tokens=[absent]))


# ------------------------------------------------------------------ the basins chapter's reading
LABELS3 = ["politics", "health", "sport"]
POLITICS = {0: [0.1, 0.5, 0.6], 1: [0.5, 0.2, 0.4], 2: [0.1, 0.2, 0.1], 3: [0.1, 0.2, 0.5], 4: [0.1, 0.1, 0.1]}
KINDS = {0: ("topic", "health"), 1: ("topic", "health"), 2: ("topic", "sport"), 3: ("shuffled", "health"),
         4: ("random", None)}


def _allscores(model="m"):
    """Five chains of one model, records at steps 0, 50, 100, baseline 1/3: chain 0 (health) crosses
    up, chain 1 (health) starts above, falls and crosses up again, chain 2 (sport) is never above;
    chain 3 (shuffled) crosses up, chain 4 (random) never does."""
    rows = []
    for b, series in POLITICS.items():
        for k, p in enumerate(series):
            health = 0.9 - p if b < 2 else 0.05
            rows.append({"model": model, "chain": b, "kind": KINDS[b][0], "seed topic": KINDS[b][1], "step": 50 * k,
                         "text": f"{b}-{k}", "politics": p, "health": health, "sport": 1 - p - health})
    return pd.DataFrame(rows)


def test_scorer_note_names_the_scorer_and_its_fitted_temperature():
    class Fitted:
        temperature = 0.0421

    note = basins_page.scorer_note("embedding:x", LABELS3, "politics", Fitted())
    assert note == ("Topic scorer: `embedding:x` over 3 labels (politics, health, sport); basin label politics; uniform "
                    "baseline 1/3 = 0.333; softmax temperature fitted on the calibration set: 0.042.")
    assert basins_page.scorer_note("nli:y", LABELS3, "politics", object()).endswith("1/3 = 0.333.")


def test_run_models_joins_the_models_that_ran_and_notes_the_others(monkeypatch):
    """Each model's chains come back as texts and are scored here: the frame is the chapter's
    (_allscores), a missing model is a note, and the first model that ran is named."""
    from textglauber.models import ModelUnavailableError

    ref = _allscores()
    by_text = {t: [p, h, s] for t, p, h, s in zip(ref.text, ref.politics, ref.health, ref.sport)}
    seen = []

    def chains(spec, seed_topics, *, gen, device, dtype, **options):
        if spec.name == "gone":                 # each entry comes typed, as the schema reads it
            raise ModelUnavailableError("not here")
        seen.append((spec.name, int(torch.randint(2**31 - 1, (1,), generator=gen)), options["steps"]))
        texts = [f"{b}-{k}" for k in range(3) for b in range(5)]
        return topics.BasinChains(spec.name, {"name": spec.name}, np.array([0, 50, 100]), texts,
                                  [KINDS[b][0] for b in range(5)], [KINDS[b][1] for b in range(5)])

    monkeypatch.setattr(topics, "basin_chains", chains)
    got = topics.run_models(
        [{"name": "a"}, {"name": "gone"}, {"name": "b"}], RunSettings(torch.Generator().manual_seed(0), "cpu", "float32",
                                                                      "skip", "serial"),
        score=lambda texts: [by_text[t] for t in texts], labels=LABELS3, seed_topics=["health"], steps=100)
    allscores, described, notes, first = got.scores, got.described, got.notes, got.first
    assert list(allscores.model.unique()) == ["a", "b"] and len(allscores) == 2 * 15
    got = allscores[allscores.model == "a"].sort_values(["chain", "step"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, ref.assign(model="a"), check_like=True)
    assert [d["name"] for d in described] == ["a", "b"] and len(notes) == 1 and notes[0].startswith("gone skipped")
    assert first.name == "a" and first == ModelSpec.part_of({"name": "a"})
    # each model drew from its own generator, seeded before any ran: a and b differ, and skipping "gone" moved neither
    assert [s[2] for s in seen] == [100, 100] and seen[0][1] != seen[1][1]


def test_start_end_table_and_recurrence_table():
    scores = _allscores()
    table = topics.start_end_table(scores[scores.kind == "topic"], "politics")
    health = table.iloc[0]
    assert list(table["seed topic"]) == ["health", "sport"] and health.chains == 2
    assert health["politics at 0"] == pytest.approx(0.3) and health["politics at end"] == pytest.approx(0.5)
    assert health["seed topic at 0"] == pytest.approx(0.6) and health["seed topic at end"] == pytest.approx(0.4)
    rec = topics.recurrence_table(scores, "politics", 1 / 3)
    assert list(rec.chain) == [0, 1, 2, 3, 4] and list(rec.kind) == [KINDS[b][0] for b in range(5)]
    for b, row in rec.iterrows():
        expected = topics.recurrence(np.array([0, 50, 100]), np.array(POLITICS[b]), 1 / 3)
        assert {k: row[k] for k in expected} == pytest.approx(expected, nan_ok=True)


def test_crossing_counts_and_sentence():
    rec = topics.recurrence_table(_allscores(), "politics", 1 / 3)
    counts = topics.crossing_counts(rec, "m")
    assert counts == {"chains": 3, "up": 2, "start": 1, "start_up": 1, "never": 1}
    text = basins_page.crossing_sentence("m", counts, basin_label="health", baseline=1 / 3, score_every=50, steps=100)
    assert text == ("**2 of 3** chains of m crossed the health baseline (0.333) upward at least once: a record at or below "
                    "it followed by one above it, with records every 50 steps over 100 steps. 1 of 3 started above the "
                    "baseline (1 of these fell back and crossed up again later), and 1 of 3 were never above it.")
    politics = basins_page.crossing_sentence("m", counts, basin_label="politics", baseline=1 / 3, score_every=50, steps=100)
    room = topics.preprint_max_starts_above(1 / 11)
    assert politics.startswith(text.replace("health", "politics"))
    assert politics.endswith(f"at most {room} of its chains to have started above 1/11, so however it counted such "
                             f"chains, its count of upward crossings is at least {46 - room} of 50.")


def test_null_comparisons_compare_each_kind_and_the_pooled_null():
    rec = topics.recurrence_table(_allscores(), "politics", 1 / 3)
    table, kinds, pooled = topics.null_comparisons(rec, ["m"], ["shuffled", "random"], alpha=0.05,
                                                   rng=np.random.default_rng(0))
    assert kinds == ["shuffled", "random"] and pooled == "shuffled + random"
    assert list(table.columns) == topics.NULL_COLUMNS and list(table.against.unique()) == ["shuffled", "random", pooled]
    rng = np.random.default_rng(0)                            # the same comparisons, in the same order, by hand
    topic = rec[rec.kind == "topic"]
    for against in (["shuffled"], ["random"], ["shuffled", "random"]):
        expected = topics.null_comparison(topic, rec[rec.kind.isin(against)], alpha=0.05, rng=rng)
        got = table[table.against == " + ".join(against)].drop(columns=["model", "against"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, expected)
    one, kinds, pooled = topics.null_comparisons(rec[rec.kind != "random"], ["m"], ["shuffled", "random"], alpha=0.05, rng=0)
    assert kinds == ["shuffled"] and pooled == "shuffled" and list(one.against.unique()) == ["shuffled"]
    none, kinds, _ = topics.null_comparisons(rec[rec.kind == "topic"], ["m"], ["shuffled"], alpha=0.05, rng=0)
    assert kinds == [] and len(none) == 0 and list(none.columns) == topics.NULL_COLUMNS


def test_p_values_and_verdicts_read_as_the_page_says_them():
    assert basins_page.format_p(np.nan) == "p not defined"
    assert basins_page.format_p(0.01234) == "p = 0.012" and basins_page.format_p(0.0004) == "p < 0.001"
    rec = topics.recurrence_table(_allscores(), "politics", 1 / 3)
    table, _, pooled = topics.null_comparisons(rec, ["m"], ["shuffled", "random"], alpha=0.05, rng=0)
    exceeds, cs, C = topics.null_verdict(table, "m", pooled)
    assert exceeds is False and cs.statistic == "crossing share" and len(C) == 4 and (C.against == pooled).all()
    assert topics.null_verdict(table, "other", pooled)[:2] == (None, None)
    assert basins_page.verdict_clause(exceeds, cs) == (f"which does not exceed what chains from seeds with no topic give "
                                                  f"(one-sided Fisher {basins_page.format_p(cs.p)} among chains that started "
                                                  "at or below the baseline)")
    assert basins_page.verdict_clause(None, cs).startswith("which cannot be compared with what")


def test_null_paragraph_reports_the_shares_the_kinds_the_late_share_and_the_other_models():
    rec = topics.recurrence_table(pd.concat([_allscores("m"), _allscores("m2")], ignore_index=True), "politics", 1 / 3)
    table, kinds, pooled = topics.null_comparisons(rec, ["m", "m2"], ["shuffled", "random"], alpha=0.05, rng=0)
    counts = topics.crossing_counts(rec, "m")
    text = basins_page.null_paragraph(rec, table, "m", ["m2"], counts=counts, null_kinds=kinds, basin_label="politics",
                                 alpha=0.05, temperature=1.0, rng=np.random.default_rng(5))
    cs = table[(table.model == "m") & (table.against == pooled) & (table.statistic == "crossing share")].iloc[0]
    assert text.startswith("m ran 2 null chains (1 shuffled, 1 random seeds); 0 of them started above the politics "
                           "baseline, against 1 of the 3 topic-seeded chains. Among the chains that started at or below "
                           "it, **1 of 2** topic-seeded chains crossed upward and **1 of 2** null chains did: a difference "
                           f"in share of +0.00 (95% interval {cs.low:+.2f} to {cs.high:+.2f}), one-sided Fisher "
                           f"{basins_page.format_p(cs.p)}. **The topic-seeded chains' recurrence does not exceed what the null "
                           "gives** at level 0.05: chains that start from no topic cross the baseline at least as often")
    assert "crossings among chains starting at or below: shuffled seeds 1 of 1 (" in text and ", random seeds 0 of 1 (" in text
    late = rec[rec.model == "m"]["share above late"].to_numpy(float)           # the bootstrap, by hand
    boot = late[np.random.default_rng(5).integers(len(late), size=(4000, len(late)))].mean(1)
    lo, hi = np.quantile(boot, [0.025, 0.975])
    assert (f"all 5 chains of m together (topic-seeded and null) have the politics score above the baseline in "
            f"{late.mean():.0%} of records (95% bootstrap interval {lo:.0%} to {hi:.0%})") in text
    assert text.endswith(f"The other models, crossings among chains starting at or below: m2: 1 of 2 against 1 of 2, "
                         f"{basins_page.format_p(cs.p)}, does not exceed it.")
    above = rec.assign(starts_above=rec.starts_above | (rec.kind != "topic"))   # no null chain starts at or below
    table, kinds, _ = topics.null_comparisons(above, ["m"], ["shuffled", "random"], alpha=0.05, rng=0)
    text = basins_page.null_paragraph(above, table, "m", [], counts=counts, null_kinds=kinds, basin_label="politics",
                                 alpha=0.05, temperature=1.0, rng=0)
    assert "null chains did. One group has no chain that started at or below the baseline" in text


def test_basin_plots_draw_what_they_say():
    import matplotlib.pyplot as plt

    scores = _allscores()
    fig, axes = plt.subplots(1, 2)
    basins_page.plot_null_curves(axes, scores, "politics", 1 / 3, 3)
    assert [line.get_label() for line in axes[0].lines] == ["topic (3)", "shuffled (1)", "random (1)"]
    assert list(axes[0].lines[0].get_ydata()) == pytest.approx([1 / 3, 1 / 3, 2 / 3])    # chains above 1/3 per record
    assert list(axes[1].lines[1].get_ydata()) == pytest.approx(POLITICS[3])
    plt.close(fig)
    topic = scores[scores.kind == "topic"]
    fig, axes = plt.subplots(1, 2)
    basins_page.plot_chain_scores(axes, topic, [0, 2], LABELS3, "politics", 1 / 3)
    assert [line.get_label() for line in axes[0].lines[:2]] == ["health", "politics"]   # politics ends highest: once
    assert axes[1].get_title() == "chain 2 (seed: sport)"
    plt.close(fig)
    fig, ax = plt.subplots()
    dots = basins_page.plot_topic_map(ax, topic, LABELS3)
    xy = dots.get_offsets()
    starts = {a.get_text(): a.xy for a in ax.texts}
    np.testing.assert_allclose(starts["health"], xy[[0, 3]].mean(0))              # chains 0 and 1 at step 0
    np.testing.assert_allclose(starts["sport"], xy[6])
    plt.close(fig)


def test_prefix_attractors_start_from_drawn_seed_windows_behind_the_prefix(tiny_mlm, full_scorer):
    from textglauber import vocabulary

    labels = ["a", "b", "c"]

    def score(texts):                                   # a stand-in scorer: the last label wins for every text
        return np.tile([0.2, 0.3, 0.5], (len(texts), 1))

    out = topics.prefix_attractors(tiny_mlm, full_scorer, score, labels, prefix="the old", seed_topics=["food", "sport"],
                                   seeds_per_topic=2, seq_len=5, chains=3, temperature=1.0, steps=20, score_every=10,
                                   gen=torch.Generator().manual_seed(4))
    assert list(out.columns) == ["start", "after 20 steps", "top topic", "its score"] and len(out) == 3
    gen = torch.Generator().manual_seed(4)
    ids, _, _ = topics.seed_states(tiny_mlm.tokenizer, ["food", "sport"], 2, 5, vocab=full_scorer.vocab)
    pre = tiny_mlm.tokenizer("the old", add_special_tokens=False)["input_ids"]
    picked = ids[torch.randperm(len(ids), generator=gen)[:3]]
    assert out.start.tolist() == [vocabulary.decode(tiny_mlm.tokenizer, pre + row.tolist()) for row in picked]
    assert (out["top topic"] == "c").all() and (out["its score"] == 0.5).all()
    assert basins_page.attractor_sentence(out, "the old") == 'Top topics of the 3 final states after the prefix "the old": c (3).'


def test_basins_preprint_table_and_run_sentences():
    scores = _allscores()
    table = topics.start_end_table(scores[scores.kind == "topic"], "politics")
    cmp = basins_page.preprint_table(table, ["health", "sport"], "politics", 100)
    p0, p1 = reported.BASINS_POLITICS["health"]
    assert cmp.iloc[0].tolist() == ["health", f"{p0:.3f} -> {p1:.3f}", "0.300 -> 0.500",
                                    "{:.3f} -> {:.3f}".format(*reported.BASINS_SEED_TOPIC["health"]), "0.600 -> 0.400"]
    assert list(cmp.columns)[2] == "this run politics 0 -> 100"
    counts = topics.crossing_counts(topics.recurrence_table(scores, "politics", 1 / 3), "m")
    last = scores[scores.kind == "topic"].copy()
    last.loc[(last.chain == 1) & (last.step == 100), ["politics", "health"]] = [0.6, 0.3]   # politics tops 2 of 3 at the end
    line = basins_page.run_sentence("m", table, last, LABELS3, "politics", counts, "which VERDICT")
    assert line == ("In this run (m) the seed-topic score falls for 1 of 2 seed topics and the politics score rises for 1 "
                    "of 2; 2 of 3 chains crossed the politics baseline upward, which VERDICT. At step 100 the most "
                    "frequent top label is politics (2 of 3 chains).")
    diffs = basins_page.protocol_differences("tiny-mlm", "embedding:x", LABELS3, 1.0, 100, 50, 2)
    lines = basins_page.protocol_sentences(diffs, "politics")
    assert lines[0].startswith("The preprint gives no null model for its 46 of 50")
    assert lines[1].startswith("This run departs from the preprint's protocol: the masked LM is `tiny-mlm`")
    assert lines[2].startswith("With another model and another topic scorer and another label set, the two sides")
    same = basins_page.protocol_sentences({}, "health")
    assert same == ["The preprint's columns are for politics, this run's for health.",
                    "This run follows the preprint's protocol except for the seed sentences, which are this package's own.",
                    "Model, scorer and label set are the preprint's, so the values compare, up to the differences "
                    "listed, the choice of seed sentences and the sampling noise of a few chains per topic."]
