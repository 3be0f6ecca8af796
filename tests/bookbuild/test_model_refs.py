"""Every model a chapter reads is checked and keyed (issue 50), wherever its parameters name it.

The models a chapter's parameters name are found by the schema's types, at any depth
(:func:`textglauber.profile.model_refs`): the traps chapter's ``escape.models`` and
``escape.exact_models`` are in its input key, so a local model's weights edited in place re-run
it, and the pre-flight checks them like any other (a missing model, weights cut short, a token
outside the vocabulary, a length the model cannot take: one line each, before any compute). The
trap search passes over a batch that reaches no fixed point, and nothing else.
"""
import shutil
import struct
from typing import Optional

import pytest
import torch
import transformers

from textglauber import models, traps
from textglauber import profile as P
from textglauber.bookbuild import preflight as build_preflight
from textglauber.bookbuild import stamps
from textglauber.profile import ProfileError, refs
from conftest import named_models
from test_bad_params import shipped, write


def _smoke_refs(chapter: str) -> list:
    spec = P.load_profile("smoke")
    return P.model_refs(spec["chapters"][chapter]["notebook"], P.chapter_parameters("smoke", chapter, spec=spec))


# --------------------------------------------------------------------------- the walker
def test_the_escape_models_of_the_traps_chapter_are_found_with_their_tokens_and_lengths():
    refs = {r.key: r for r in _smoke_refs("traps")}
    esc = refs["escape.models[0]"]
    assert (esc.name, esc.role, esc.tokens, esc.corpus) == ("tiny-mlm", "mlm", (), None)
    assert esc.lengths == (("escape.seq_len", 8, 8),)               # escape's own seq_len, not the chapter's 10
    exact = refs["escape.exact_models[0]"]
    assert (exact.name, exact.role) == ("tiny-mlm", "mlm")
    assert exact.tokens == (("escape.exact_models[0].tokens", ["the", "dog", "ran"], ("the", "dog", "ran")),)
    assert exact.lengths == (("escape.exact_models[0].n", 4, 4),)   # an exact model runs at its own n
    assert refs["model"].lengths == (("seq_len", 10, 10),) and refs["model"].corpus == "tiny"


# (key, name, role, via) of each model the smoke profile's chapters name, written out by hand
SMOKE = {
    "incompatibility": [("models[0]", "tiny-mlm", "mlm", ""), ("models[1]", "tiny-mlm:seed=1,layers=3", "mlm", ""),
                        ("models[2]", "trained:tiny", "mlm", ""), ("control", "tiny-causal", "causal", ""),
                        ("training_run", "trained:tiny", "mlm", "trained")],
    "bounds": [("models[0]", "tiny-mlm", "mlm", ""), ("models[1]", "trained:tiny", "mlm", "")],
    "crossover": [("model", "tiny-mlm", "mlm", ""), ("phase.models[0]", "tiny-mlm", "mlm", "")],   # issue 51's nested models
    "traps": [("model", "tiny-mlm", "mlm", ""), ("escape.models[0]", "tiny-mlm", "mlm", ""),
              ("escape.exact_models[0]", "tiny-mlm", "mlm", ""), ("escape.growth.models[0]", "tiny-mlm", "mlm", ""),
              ("escape.length.models[0]", "tiny-mlm", "mlm", "")],                   # issue 63's length family
    "basins": [("models[0]", "tiny-mlm", "mlm", ""), ("models[1]", "trained:tiny", "mlm", ""),
               ("topic_scorer", "package:all-MiniLM-L6-v2", "sentence", "embedding")],
    "ground_truth": [("models[0]", "tiny-mlm", "mlm", ""), ("models[1]", "tiny-mlm", "mlm", "")],
    "cost": [],
}


@pytest.mark.parametrize("chapter", list(SMOKE))
def test_every_smoke_chapter_names_the_models_it_did_and_the_nested_ones(chapter):
    spec = P.load_profile("smoke")
    nb = spec["chapters"][chapter]["notebook"]
    prm = P.chapter_parameters("smoke", chapter, spec=spec)
    assert [(r.key, r.name, r.role, r.via) for r in P.model_refs(nb, prm)] == SMOKE[chapter]
    # what the callers derive, as before at the top level (the training run and package embedders
    # are keyed, not resolved by name; the training run is an artifact, not pre-flighted)
    top = [(k, n, r) for k, n, r, via in SMOKE[chapter]]
    assert named_models(prm, nb) == [n for k, n, r, via in SMOKE[chapter] if via == ""]
    assert [(w.key, w.name, w.role, w.where) for w in models.wanted_models(prm, chapter, notebook=nb)] == [
        (k, n, r, f"{chapter} {k}") for k, n, r, via in SMOKE[chapter] if via != "trained"]
    assert stamps.models_read(prm, nb) == sorted({n for _, n, _ in top})
    assert P.corpus_names(prm, nb) == {"incompatibility": ["tiny"] * 4, "bounds": ["tiny"] * 2,
                                       "crossover": ["tiny", "tiny"], "traps": ["tiny"]}.get(chapter, [])
    # a caller with the parameters alone finds the same models
    assert [(r.key, r.name, r.role) for r in P.model_refs(None, prm)] == [(k, n, r) for k, n, r in top]


def test_a_model_field_nested_two_levels_deep_is_found_by_its_type(monkeypatch):
    """A chapter whose models sit in a section inside a section, in a list, an Optional and a
    dict, with a topic scorer and an embedder of the marked string types: found with no change
    to the walker, by the pre-flight and the input key alike."""
    class Deeper(P.Closed):
        probes: P.ListOf(P.ExactModel, "model entries")
        by_name: dict[str, P.BoundsModel] = {}

    class Section(P.Closed):
        deeper: Optional[Deeper] = None
        seq_len: P.Length(P.PosInt)
        judge: P.TopicScorer

    class NewChapter(P.Chapter):
        section: Section
        embedded: P.EmbeddedModel

    values = {"section": {"seq_len": 7, "judge": "nli:some/nli-model",
                          "deeper": {"probes": [{"name": "tiny-mlm", "tokens": ["the", "zzz"], "n": 3}],
                                     "by_name": {"a": {"name": "local/bounds", "corpus": "tiny", "drift_token": "."}}}},
              "embedded": {"name": "some/embedded-mlm", "corpus": "lee", "embedder": "sentence:some/embedder"}}
    monkeypatch.setitem(P.CHAPTERS, "book/99_new.ipynb", NewChapter)
    refs = P.model_refs("book/99_new.ipynb", values)
    got = {r.key: (r.name, r.role, r.tokens, r.lengths, r.corpus) for r in refs}
    assert got == {
        "section.judge": ("some/nli-model", "nli", (), (("section.seq_len", 7, 7),), None),
        "section.deeper.probes[0]": ("tiny-mlm", "mlm",
                                     (("section.deeper.probes[0].tokens", ["the", "zzz"], ("the", "zzz")),),
                                     (("section.deeper.probes[0].n", 3, 3),), None),
        "section.deeper.by_name.a": ("local/bounds", "mlm", (("section.deeper.by_name.a.drift_token", ".", (".",)),),
                                     (), "tiny"),
        "embedded": ("some/embedded-mlm", "mlm", (), (), "lee"),
        "embedded.embedder": ("some/embedder", "sentence", (), (), None),
    }
    assert stamps.models_read(values, "book/99_new.ipynb") == sorted(n for n, *_ in got.values())
    assert {(w.name, w.role) for w in models.wanted_models(values, "new", notebook="book/99_new.ipynb")} == {
        (n, role) for n, role, *_ in got.values()}
    assert P.corpus_names(values, "book/99_new.ipynb") == ["tiny", "lee"]


def test_what_names_a_model_is_marked_on_the_types_the_schema_declares():
    """Roles are those the model checks know; every window-length key is marked as a length (a new
    chapter's ``seq_len`` typed otherwise would go unchecked)."""
    assert P.ModelSpec.role in models.ROLES
    assert P.Control.role_of({"kind": "causal"}) == "causal"
    for t in (P.Embedder, P.TopicScorer, P.TrainingRun):
        (mark,) = [m for m in t.__metadata__ if isinstance(m, P.NamesModels)]
        roles = {r for _, r in mark.prefixes} | ({mark.role} if mark.template else set())
        assert roles and roles <= set(models.ROLES), t
    for model in set(P.CHAPTERS.values()) | {P.Escape, P.ExactModel}:
        for name, field in model.model_fields.items():
            if name in ("seq_len", "lengths", "coupling_lengths", "n"):
                assert refs._marked(field.rebuild_annotation(), P.CONTENT_LENGTH), (model.__name__, name)


# --------------------------------------------------------------------------- the input key
def _local_copy(tmp_path, name="local-mlm"):
    """A folder holding the tiny MLM's files, as a local model named by its path."""
    folder = tmp_path / name
    shutil.copytree(models.resolve("tiny-mlm").path, folder)
    return folder


def _escape_with(spec: dict, **changes) -> dict:
    spec["chapters"]["traps"]["parameters"]["escape"].update(changes)
    return spec


def test_editing_an_escape_models_weights_in_place_changes_the_traps_key(pdir, tmp_path):
    folder = _local_copy(tmp_path)
    name = write(pdir, "local", _escape_with(shipped(), models=[{"name": str(folder)}]))
    spec = P.check_profile(name)
    before = stamps.chapter_inputs(spec, name, "traps", tmp_path / "results")
    assert str(folder) in before["models"]
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    (n,) = struct.unpack("<Q", bytes(data[:8]))
    data[8 + n + 16] ^= 0xFF                                  # one byte of one weight, the file as long as it was
    weights.write_bytes(bytes(data))
    after = stamps.chapter_inputs(spec, name, "traps", tmp_path / "results")
    assert before["models"][str(folder)] != after["models"][str(folder)]
    assert stamps.changes(before, after) == "models (" + str(folder) + ")"


# --------------------------------------------------------------------------- the pre-flight
@pytest.fixture
def no_weights(monkeypatch):
    """Loading any model's weights fails the test (its tokenizer alone may be read)."""
    def refuse(*a, **k):
        raise AssertionError("weights were loaded before the pre-flight refused")

    for cls in (transformers.AutoModelForMaskedLM, transformers.AutoModelForCausalLM, transformers.AutoModel,
                transformers.PreTrainedModel):
        monkeypatch.setattr(cls, "from_pretrained", refuse)


def _refused(name: str) -> list[str]:
    with pytest.raises(SystemExit) as exc:
        build_preflight.preflight(name, ["traps"])
    lines = str(exc.value).splitlines()
    assert lines[0] == f"profile {name!r} cannot run:"
    return lines[1:]


def test_a_missing_escape_model_is_refused_naming_its_key(pdir, tmp_path, no_weights):
    gone = tmp_path / "not-there"
    name = write(pdir, "gone", _escape_with(shipped(), models=[{"name": str(gone)}]))
    P.check_profile(name)
    lines = _refused(name)
    assert len(lines) == 1, lines
    assert lines[0].startswith("traps escape.models[0]: ") and str(gone) in lines[0]
    assert "no such local directory" in lines[0]


def test_an_escape_model_whose_weights_are_cut_short_is_refused_naming_the_file(pdir, tmp_path, no_weights):
    folder = _local_copy(tmp_path, "cut")
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[:len(data) // 2])
    name = write(pdir, "cut", _escape_with(shipped(), models=[{"name": str(folder)}]))
    lines = _refused(name)
    assert len(lines) == 1, lines
    assert f"{folder / 'model.safetensors'} is cut short" in lines[0] and "traps escape.models[0]" in lines[0]
    assert "Fix: download or copy the model again" in lines[0]


def test_a_pytorch_checkpoint_cut_short_is_named_without_loading_it(tmp_path, no_weights):
    from safetensors.torch import load_file

    folder = _local_copy(tmp_path, "bin")
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")    # PyTorch's zip format
    (folder / "model.safetensors").unlink()
    models.check_models([models.Wanted(str(folder), "mlm", "traps escape.models[0]")])
    data = (folder / "pytorch_model.bin").read_bytes()
    (folder / "pytorch_model.bin").write_bytes(data[:len(data) // 2])
    with pytest.raises(models.ModelMismatchError) as exc:
        models.check_models([models.Wanted(str(folder), "mlm", "traps escape.models[0]")])
    assert str(exc.value) == (f"model {str(folder)!r} (traps escape.models[0]): its weights cannot be read: "
                              f"{folder / 'pytorch_model.bin'} is cut short or damaged: its zip directory cannot be "
                              "read (File is not a zip file). Fix: download or copy the model again (a file cut short "
                              "is most often a download or copy that stopped)")
    (folder / "pytorch_model.bin").unlink()
    (folder / "pytorch_model.bin.index.json").write_text('{"weight_map": {"a": "pytorch_model-00001-of-00002.bin"}}')
    with pytest.raises(models.ModelMismatchError, match="lists 1 shard.s. that are not in"):
        models.check_models([models.Wanted(str(folder), "mlm")])


def test_a_token_outside_the_vocabulary_is_refused_naming_key_model_and_token(pdir, tmp_path, no_weights):
    build_preflight.preflight("smoke", ["traps", "ground_truth"])          # the shipped tokens are all there
    exact = [{"name": "tiny-mlm", "tokens": ["the", "dog", "zzz"], "n": 4}]
    name = write(pdir, "tok", _escape_with(shipped(), exact_models=exact))
    lines = _refused(name)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{P.where(pdir / 'tok.yaml')}: chapter 'traps': escape.exact_models[0].tokens = "
                               "['the', 'dog', 'zzz']: ['zzz'] not in the vocabulary of model 'tiny-mlm'"), lines[0]


def test_an_escape_window_longer_than_the_model_takes_is_refused(pdir, tmp_path, no_weights):
    name = write(pdir, "long", _escape_with(shipped(), seq_len=5000))
    P.check_profile(name)                                     # the schema cannot see it
    lines = _refused(name)
    assert len(lines) == 1, lines
    assert lines[0] == (f"{P.where(pdir / 'long.yaml')}: chapter 'traps': escape.seq_len = 5000: model 'tiny-mlm' "
                        "(escape.models[0]) takes at most 64 positions, so at most 62 tokens with its special tokens")


# --------------------------------------------------------------------------- the schema
def test_exact_distances_beyond_the_exact_models_n_are_refused_by_the_schema(pdir):
    name = write(pdir, "far", _escape_with(shipped(), exact_distances=[1, 2, 9]))
    with pytest.raises(ProfileError) as exc:
        P.check_profile(name)
    lines = str(exc.value).splitlines()
    assert lines == [f"{P.where(pdir / 'far.yaml')}: chapter 'traps': escape.exact_distances[2] = 9: must be at most "
                     "the smallest exact model's n = 4 (escape.exact_models[0].n): each distance is checked on every "
                     "exact model, and none can move further than its n sites"]


# --------------------------------------------------------------------------- nothing swallowed
class _Flipping:
    """Two sites, tokens {0, 1}: each site's argmax is the other token than the one it holds, so
    every sweep flips both and coordinate ascent never settles."""

    def __init__(self):
        from textglauber.vocabulary import AllowedVocab

        self.vocab = AllowedVocab(torch.tensor([0, 1]), ("a", "b"), 2)
        self.max_length = 2

    def scores(self, states, sites):
        out = torch.zeros(len(states), 2)
        out[torch.arange(len(states)), 1 - states[torch.arange(len(states)), sites]] = 1.0
        return out


class _Broken(_Flipping):
    """A scorer that fails as a model asked for a window longer than it takes does."""

    def scores(self, states, sites):
        raise RuntimeError("The size of tensor a (5002) must match the size of tensor b (64) at non-singleton "
                           "dimension 1")


def test_the_trap_search_passes_over_no_fixed_point_and_nothing_else():
    """A scorer that fails (the shape error of a window longer than the model takes) stops the
    search: it read as 'no perfect trap reached', exit status 0. A batch that reaches no fixed
    point is passed over, as before."""
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        traps.find_traps(_Broken(), 2, 3, gen)
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        traps.deep_traps(_Broken(), 2, 3, gen, batches=2)
    assert traps.find_traps(_Flipping(), 2, 3, gen) == []
    with pytest.raises(traps.NoFixedPoint):
        traps.deep_traps(_Flipping(), 2, 3, gen, batches=2)
    assert issubclass(traps.NoFixedPoint, RuntimeError)


# --------------------------------------------------------------------------- chapter 3's phase models (issue 51)
def _phase_with(spec: dict, **changes) -> dict:
    spec["chapters"]["crossover"]["parameters"]["phase"]["models"][0].update(changes)
    return spec


def _refused_crossover(name: str) -> list[str]:
    with pytest.raises(SystemExit) as exc:
        build_preflight.preflight(name, ["crossover"])
    return str(exc.value).splitlines()[1:]


def test_the_phase_models_of_the_crossover_chapter_are_found_with_pair_corpus_and_length():
    """Issue 51 adds models under crossover.phase.models: the walker finds them by type, with no
    new code in the key or the pre-flight."""
    refs = {r.key: r for r in _smoke_refs("crossover")}
    ph = refs["phase.models[0]"]
    assert (ph.name, ph.role, ph.corpus) == ("tiny-mlm", "mlm", "tiny")
    assert ph.tokens == (("phase.models[0].pair", ["the", "dog"], ("the", "dog")),)
    assert ph.lengths == (("phase.models[0].max_n", 9, 9),)


def test_a_phase_pair_outside_the_vocabulary_and_a_length_beyond_the_limit_are_refused(pdir, tmp_path, no_weights):
    build_preflight.preflight("smoke", ["crossover"])
    lines = _refused_crossover(write(pdir, "ptok", _phase_with(shipped(), pair=["the", "zzz"])))
    assert len(lines) == 1 and "phase.models[0].pair = ['the', 'zzz']: ['zzz'] not in the vocabulary of model " \
                               "'tiny-mlm'" in lines[0], lines
    spec = _phase_with(shipped(), max_n=21)                          # beyond PHASE_MAX_N, whatever the model
    with pytest.raises(ProfileError, match=r"phase.models\[0\].max_n = 21"):
        P.check_profile(write(pdir, "ptoo", spec))
