"""What a chapter runs with is what its check returns (issue 53, item 2; issue 66): every parameter
of the chapter, a plain value as the profile injects it (same value, same type), a section or a list
of model entries as the typed object its model declares, written back by the manifest as the mapping
the profile gave (same keys, values and types); the schema's default where nothing gives one."""
from pathlib import Path
from typing import ClassVar

import pytest

from pydantic import BaseModel

from textglauber import profile as P
from textglauber import results
from textglauber.profile.values import Int, ListOf

ROOT = Path(__file__).resolve().parents[2]


def same(a, b) -> bool:
    """Equal, and of the same type at every depth (1 is not 1.0, a tuple is not a list)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return sorted(a) == sorted(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("profile", P.profiles())
def test_a_chapter_runs_with_what_the_profile_injects(profile):
    spec = P.load_profile(profile)
    for chapter, entry in spec["chapters"].items():
        notebook = entry["notebook"]
        model = P.CHAPTERS[notebook]
        injected = P.chapter_parameters(profile, chapter, spec=spec)
        cell = P.notebook_parameters(ROOT / notebook)
        namespace = {**cell, **injected}                # the notebook's namespace once papermill ran its cells
        got = P.check_chapter(notebook, namespace)
        assert list(got) == list(model.model_fields), chapter
        written = results.manifest_parameters(got)
        for key, value in injected.items():
            typed = got[key]
            items = typed if isinstance(typed, list) else [typed]
            if items and isinstance(items[0], BaseModel):                # a section, or model entries: typed
                declared = model.model_fields[key].annotation
                assert all(isinstance(x, BaseModel) for x in items), (profile, chapter, key)
                assert typed == (declared.model_validate(value) if isinstance(declared, type) else typed)
            else:
                assert typed is value, (profile, chapter, key)          # passed on, not rebuilt
            if key != "results_root":
                assert same(written[key], value), (profile, chapter, key, written[key], value)
        for key in set(model.model_fields) - set(injected):
            field = model.model_fields[key]
            expected = field.default                  # the cell holds None: the schema's default stands
            assert same(got[key], expected), (profile, chapter, key)


def test_a_parameter_nothing_gives_takes_the_schemas_default(monkeypatch):
    """A declared default fills a parameter neither the profile nor the notebook gives, a fresh copy
    each time; a value given keeps its own type and keys."""
    class WithDefaults(P.Chapter):
        noun: ClassVar[str] = "a parameter of this chapter"
        count: Int(ge=0) = 24
        sizes: ListOf(Int(ge=1), "integers >= 1") = [1, 2]

    notebook = "book/99_defaults.ipynb"
    monkeypatch.setitem(P.CHAPTERS, notebook, WithDefaults)
    base = {"profile": "smoke", "results_root": "/tmp/r", "seed": 0, "device": "auto", "dtype": "auto",
            "on_missing_model": "skip"}
    got = P.check_chapter(notebook, base)
    assert same(got, {**base, "count": 24, "sizes": [1, 2]})
    got["sizes"].append(3)
    assert P.check_chapter(notebook, base)["sizes"] == [1, 2]
    given = P.check_chapter(notebook, {**base, "count": 7})
    assert same(given["count"], 7)


def test_an_entry_read_as_part_of_a_model_keeps_its_declared_keys_fills_defaults_and_is_checked():
    """``part_of`` is how library code reads a model entry that holds more keys than it needs: the
    keys the model declares, typed, the others at the schema's defaults, and a bad value refused."""
    from textglauber.profile import Control, ModelSpec

    got = ModelSpec.part_of({"name": "tiny-mlm", "corpus": "tiny", "drift_token": "a", "whole_words": True})
    assert (got.name, got.whole_words, got.tokens) == ("tiny-mlm", True, None)
    assert got.alphabetic is ModelSpec.default_of("alphabetic")
    ctl = Control.part_of({"name": "tiny-causal", "kind": "causal", "corpus": "tiny", "rectangles": 3})
    assert (ctl.rectangles, ctl.candidates, ctl.noise) == (3, Control.default_of("candidates"), Control.default_of("noise"))
    for bad in ({"candidates": 1}, {"noise": -0.5}, {"kind": "mlm"}):
        with pytest.raises(ValueError):
            Control.part_of({"name": "tiny-causal", "kind": "causal", "corpus": "tiny", **bad})


def test_a_typed_entry_is_a_model_entry_and_a_scorer_is_not():
    """The units of work take a profile's model entry (now typed, as a chapter hands it on) or a
    model object a test hands in: a typed entry must load its model, not be used as a scorer."""
    from textglauber import scheduler
    from textglauber.profile import EmbeddedModel, ModelSpec, entry_name, is_model_entry

    typed = EmbeddedModel(name="tiny-mlm", corpus="tiny", embedder="self")
    for entry in (typed, {"name": "tiny-mlm"}, ModelSpec(name="tiny-mlm")):
        assert is_model_entry(entry) and entry_name(entry) == "tiny-mlm" == scheduler.model_label(entry)

    class Scorer:
        name = "not an entry"

    assert not is_model_entry(Scorer()) and scheduler.model_label(Scorer()) == "Scorer"
