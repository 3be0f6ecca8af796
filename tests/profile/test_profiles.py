"""Profiles: the stand-in profile is the paper profile with names replaced and counts scaled, so a
change to params/paper.yaml is exercised by the stand-in run."""
import pytest
import yaml

from textglauber import profile as P
from textglauber.paths import repo_root
from textglauber.profile import loader
from conftest import named_models

SIZE_KEYS = {"n_rectangles", "n_grids", "n_contexts", "top_k", "extra", "drift_states", "trials", "steps", "pairs",
             "budget", "sweeps", "budget_sweeps", "reference_sweeps", "fast_within", "power_replicates", "fixed_t", "chains", "checkpoint_every", "seeds_per_topic", "chains_per_seed", "prefix_chains", "rectangles",
             "replicates", "sample_size", "null_chains", "traps", "temperatures", "max_moves", "exact_chains",
             "tmix_max_states", "calibration_n", "calibration_pairs", "max_states", "settle_states", "passages", "passage_max_n", "starts", "candidates"}


def _counts_only(size: dict, a: dict, b: dict, where) -> None:
    """b is a with the counts of ``size`` set (scaled down, never up), nested mappings alike."""
    for k, v in size.items():
        if isinstance(v, dict):
            _counts_only(v, a[k], b[k], (*where, k))
        else:
            assert k in SIZE_KEYS and b[k] <= a[k], (*where, k)


def _strings(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def test_standin_is_paper_with_names_and_counts_only():
    paper, standin = P.load_profile("paper"), P.load_profile("standin")
    raw = yaml.safe_load(P.profile_path("standin").read_text())
    replace = raw["replace"]
    assert list(standin["chapters"]) == list(paper["chapters"])
    paper_strings = set(_strings(paper["chapters"]))
    for hub in replace:                          # no stale entry: each replaced name is used by paper
        assert any(s == hub or s.endswith(":" + hub) for s in paper_strings), hub
    for ch, spec in paper["chapters"].items():
        a, b = spec["parameters"], standin["chapters"][ch]["parameters"]
        assert set(a) == set(b), ch
        assert spec["notebook"] == standin["chapters"][ch]["notebook"]
        for key in a:
            size = raw["sizes"].get(ch, {}).get(key)
            if isinstance(size, dict):                      # counts inside a mapping; the rest as paper's
                _counts_only(size, a[key], b[key], (ch, key))
                assert {k: v for k, v in b[key].items() if k not in size} == \
                    {k: loader._renamed(v, replace) for k, v in a[key].items() if k not in size}, (ch, key)
            elif size is not None:
                assert key in SIZE_KEYS, (ch, key)
                assert b[key] <= a[key], (ch, key)          # scaled down, never up
            else:
                assert b[key] == loader._renamed(a[key], replace), (ch, key)
    # no hub name survives: every model and corpus of the stand-in run is local
    for ch in standin["chapters"]:
        prm = P.chapter_parameters("standin", ch)
        for name in named_models(prm) + P.corpus_names(prm):
            assert name.startswith("_build/standins/"), (ch, name)


def test_derive_refuses_what_is_not_a_name_or_a_count(tmp_path, monkeypatch):
    base = P.load_profile("paper")
    bad = {"profile": "x", "derive": "paper", "sizes": {"bounds": {"not_a_parameter": 1}}}
    with pytest.raises(ValueError, match="not parameters"):
        P.derive(base, bad, tmp_path / "x.yaml")
    nested = P.derive(base, {"derive": "paper", "sizes": {"ground_truth": {"ising_fit": {"replicates": 3}}}},
                      tmp_path / "x.yaml")["chapters"]["ground_truth"]["parameters"]["ising_fit"]
    assert nested == {**base["chapters"]["ground_truth"]["parameters"]["ising_fit"], "replicates": 3}
    assert base["chapters"]["ground_truth"]["parameters"]["ising_fit"]["replicates"] == 100   # base untouched
    with pytest.raises(ValueError, match="not parameters"):
        P.derive(base, {"derive": "paper", "sizes": {"ground_truth": {"ising_fit": {"spin": 3}}}}, tmp_path / "x.yaml")
    with pytest.raises(ValueError, match="holds only"):
        P.derive(base, {"derive": "paper", "chapters": {}}, tmp_path / "x.yaml")
    renamed = loader._renamed({"a": ["nli:foo", "foo", {"m": "sentence:foo"}, "foobar"]}, {"foo": "L"})
    assert renamed == {"a": ["nli:L", "L", {"m": "sentence:L"}, "foobar"]}


def _code_strings(nb_path):
    import ast
    import json

    nb = json.loads((repo_root() / nb_path).read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            for node in ast.walk(ast.parse("".join(cell["source"]))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    yield node.value


@pytest.mark.parametrize("profile", P.profiles())
def test_every_profile_loads_in_data_order_and_declares_what_it_reads(profile):
    spec = P.load_profile(profile)
    chapters = spec["chapters"]
    order = P.build_order(spec, list(chapters))
    assert sorted(order) == sorted(chapters)
    assert chapters["crossover"]["reads"] == ["bounds"] and chapters["bounds"]["reads"] == []
    for name, ch in chapters.items():
        for up in ch["reads"]:
            assert order.index(up) < order.index(name)
        # a chapter that names another chapter's results folder in its code must declare that it reads it
        named = {s for s in _code_strings(ch["notebook"]) if s in chapters and s != name}
        assert named <= set(ch["reads"]), (profile, name, named)


def test_reads_refuse_cycles_unknown_chapters_and_unknown_keys(tmp_path):
    nb = "book/02_mixing_bounds.ipynb"
    spec = {"chapters": {"a": {"notebook": nb, "reads": ["b"]}, "b": {"notebook": nb, "reads": ["c"]},
                         "c": {"notebook": nb, "reads": ["a"]}}}
    with pytest.raises(ValueError, match="cycle: a -> b -> c -> a"):
        loader._check_chapters(spec, tmp_path / "x.yaml")
    for bad in ({"notebook": nb, "reads": ["a"]}, {"notebook": nb, "reads": ["nope"]}, {"notebook": nb, "reads": "b"}):
        with pytest.raises(ValueError, match="'reads' lists other chapters"):
            loader._check_chapters({"chapters": {"a": bad, "b": {"notebook": nb}}}, tmp_path / "x.yaml")
    with pytest.raises(ValueError, match="unknown keys"):
        loader._check_chapters({"chapters": {"a": {"notebook": nb, "read": ["b"]}}}, tmp_path / "x.yaml")
    for pattern in ("results/*/timings.json", "results/p/*.json", "results/*"):     # wall times change every run
        with pytest.raises(ValueError, match="wall times"):
            loader._check_chapters({"profile": "p", "chapters": {"a": {"notebook": nb, "reads_files": [pattern]}}},
                              tmp_path / "x.yaml")
    loader._check_chapters({"profile": "p", "chapters": {"a": {"notebook": nb, "reads_files": ["results/bench/*"]}}},
                      tmp_path / "x.yaml")
    ok = {"chapters": {"b": {"notebook": nb, "reads": ["a"]}, "a": {"notebook": nb}, "c": {"notebook": nb}}}
    loader._check_chapters(ok, tmp_path / "x.yaml")
    assert P.build_order(ok, ["c", "b", "a"]) == ["a", "b", "c"]
    assert P.build_order(ok, ["b"]) == ["b"]
