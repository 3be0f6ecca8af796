"""Bad profiles are refused before anything loads (issue 42, items 2 and 3).

Every case writes a profile into a temporary params folder (``params.params_dir`` patched; the
shipped profiles are copied beside it so that ``derive`` works), runs the build's command line in
process with every model, tokenizer and corpus loader patched to fail the test if called, and
expects exit status 2, one line on stderr that names the file, the chapter, the key, the value
and what is allowed, and no stamp or result written.
"""
import copy
import json
import math
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from textglauber import corpus, models
from textglauber.profile import ProfileError, notebooks
from textglauber.bookbuild import cli
from textglauber.bookbuild import execute as build_execute
from textglauber import profile as P
from textglauber.bookbuild import preflight as build_preflight

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("smoke", "offline", "paper", "standin")


class Loaded(AssertionError):
    pass


@pytest.fixture
def no_loading(monkeypatch):
    """Every way to a model, a tokenizer, a corpus, an artifact or a notebook run fails the test."""
    def refuse(what):
        def f(*a, **k):
            raise Loaded(f"{what} was called before the profile was refused")
        return f

    from textglauber import standins, train_mlm
    from textglauber.bench import cache as bench_cache
    from textglauber.models import loading, lookup, preflight, scorers, tiny

    model_names = ("load", "open_mlm", "tokenizer", "resolve", "check_available", "check_models")
    for mod, names in (*((m, model_names) for m in (models, lookup, loading, scorers, preflight)),
                       (corpus, ("texts", "windows", "check_available")), (tiny, ("build",)),
                       (train_mlm, ("ensure",)), (standins, ("ensure",)), (bench_cache, ("ensure",)),
                       (cli, ("build_artifacts", "stage", "preflight", "run_chapters", "build_site")),
                       (build_execute, ("execute",))):
        for name in names:
            if hasattr(mod, name):
                monkeypatch.setattr(mod, name, refuse(f"{mod.__name__}.{name}"))
    import papermill

    monkeypatch.setattr(papermill, "execute_notebook", refuse("papermill.execute_notebook"))


def shipped(name: str = "smoke") -> dict:
    return yaml.safe_load((ROOT / "params" / f"{name}.yaml").read_text())


def write(pdir: Path, name: str, spec: dict) -> str:
    spec = copy.deepcopy(spec)
    if "profile" in spec:
        spec["profile"] = name
    (pdir / f"{name}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return name


def with_param(chapter: str, key: str, value, base: str = "smoke") -> dict:
    spec = shipped(base)
    spec["chapters"][chapter]["parameters"][key] = value
    return spec


def refused(capsys, tmp_path, *argv) -> str:
    """Run the build's command line; it must exit 2 with exactly one line on stderr and write nothing."""
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        cli.main([*argv, "--build-dir", str(out / "_build"), "--results", str(out / "results")])
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0]
    assert not [p for p in out.rglob("*") if "stamp" in p.name or p.suffix in (".parquet", ".ipynb")]
    assert not (out / "results").exists()
    return lines[0]


# --------------------------------------------------------------------------- the probe's cases
CASES = [
    # (id, chapter, key, value, what the line must say)
    ("typo", "incompatibility", "temprature", 4.0,
     "chapter 'incompatibility': temprature = 4.0: not a parameter of book/01_incompatibility.ipynb "
     "(did you mean 'temperature'?)"),
    ("typo-steps", "traps", "stpes", 100, "chapter 'traps': stpes = 100: not a parameter of book/05_traps.ipynb "
                                          "(did you mean 'steps'?)"),
    ("nan", "incompatibility", "temperature", math.nan,
     "chapter 'incompatibility': temperature = nan: must be a finite number > 0"),
    ("inf", "bounds", "temperatures", [0.5, math.inf], "chapter 'bounds': temperatures[1] = inf: must be a finite number > 0"),
    ("zero-contexts", "bounds", "n_contexts", 0, "chapter 'bounds': n_contexts = 0: must be an integer >= 1"),
    ("negative-temperature", "traps", "temperature", -0.5, "chapter 'traps': temperature = -0.5: must be a finite number > 0"),
    ("zero-temperature", "basins", "temperature", 0, "chapter 'basins': temperature = 0: must be a finite number > 0"),
    ("zero-chains", "traps", "chains", 0, "chapter 'traps': chains = 0: must be an integer >= 1"),
    ("negative-steps", "basins", "steps", -50, "chapter 'basins': steps = -50: must be an integer >= 1"),
    ("n-zero", "incompatibility", "seq_len", 0, "chapter 'incompatibility': seq_len = 0: must be an integer >= 2"),
    ("string-int", "crossover", "trials", "16", "chapter 'crossover': trials = '16': must be an integer >= 1"),
    ("bool-int", "incompatibility", "n_rectangles", True,
     "chapter 'incompatibility': n_rectangles = true: must be an integer >= 1"),
    ("float-int", "traps", "seq_len", 10.0, "chapter 'traps': seq_len = 10.0: must be an integer >= 1"),
    ("bool-float", "traps", "threshold", True, "chapter 'traps': threshold = true: must be a finite number > 0"),
    ("string-float", "incompatibility", "temperature", "1.0",
     "chapter 'incompatibility': temperature = '1.0': must be a finite number > 0"),
    ("delta-range", "crossover", "delta", 2.0, "chapter 'crossover': delta = 2.0: must be a finite number in (0, 2)"),
    ("nested-key", "crossover", "model", {"name": "tiny-mlm", "corpus": "tiny", "embeder": "self"},
     "chapter 'crossover': model.embeder = 'self': not a key of a model entry (did you mean 'embedder'?)"),
    ("nested-missing", "traps", "model", {"name": "tiny-mlm", "corpus": "tiny"},
     "chapter 'traps': model.embedder: missing"),
    ("nested-name", "crossover", "model", {"name": "", "corpus": "tiny", "embedder": "self"},
     "chapter 'crossover': model.name = '': must be a model name"),
    ("nested-list", "ground_truth", "holding", {"temperatures": [0.05, -0.1], "deepest": 2, "chains": 200, "steps": 10},
     "chapter 'ground_truth': holding.temperatures[1] = -0.1: must be a finite number > 0"),
    ("list-entry", "incompatibility", "models", [{"name": "tiny-mlm", "corpus": "tiny", "whole_word": True}],
     "chapter 'incompatibility': models[0].whole_word = true: not a key of a model entry (did you mean 'whole_words'?)"),
    ("embedder", "traps", "model", {"name": "tiny-mlm", "corpus": "tiny", "embedder": "sentnce:x"},
     "chapter 'traps': model.embedder = 'sentnce:x': must be 'self', 'hamming' or 'sentence:NAME'"),
    ("on-missing", "bounds", "on_missing_model", "ignore",
     "chapter 'bounds': on_missing_model = 'ignore': must be one of 'skip', 'fail'"),
    ("injected", "bounds", "results_root", "/tmp/elsewhere",
     "chapter 'bounds': results_root = '/tmp/elsewhere': set by the build, not by a profile"),
    # relations
    ("fixed_t", "crossover", "fixed_t", 41,
     "chapter 'crossover': fixed_t = 41: must be at most sweeps * min(lengths) = 10 * 4 = 40 steps"),
    ("reference", "crossover", "reference_sweeps", 31, "chapter 'crossover': reference_sweeps = 31: must be at most "
                                                       "budget_sweeps = 30"),
    ("coupon", "crossover", "budget_sweeps", 20, "chapter 'crossover': budget_sweeps = 20: must be at least fast_within * "
                                                 "ln(max coupling length) = 8 * ln(32) = 27.7"),
    ("record_every", "crossover", "record_every", 41, "chapter 'crossover': record_every = 41: must be at most "
                                                      "fixed_t = 40"),
    ("window", "traps", "window", 9, "chapter 'traps': window = 9: must be at least 2 * record_every = 10"),
    ("window-steps", "traps", "window", 2000, "chapter 'traps': window = 2000: must be at most steps = 1500"),
    ("score_every", "basins", "score_every", 70, "chapter 'basins': steps = 600: must be a multiple of score_every = 70"),
    ("basin_label", "basins", "basin_label", "sports", "chapter 'basins': basin_label = 'sports': must be one of labels"),
    ("seed_topics", "basins", "seed_topics", ["health", "hobbies"],
     "chapter 'basins': seed_topics[1] = 'hobbies': must be a topic with seed sentences"),
    ("null_seeds", "basins", "null_seeds", ["shuffled", "uniform"],
     "chapter 'basins': null_seeds[1] = 'uniform': must be one of 'shuffled', 'random'"),
    ("drift_k", "bounds", "drift_k", 11, "chapter 'bounds': drift_k = 11: must be at most seq_len = 10"),
    ("grid_k", "incompatibility", "grid_k", 1, "chapter 'incompatibility': grid_k = 1: must be 0 (no grids) or at least 2"),
    ("states", "ground_truth", "models", [{"name": "tiny-mlm", "tokens": ["the", "dog", "ran"], "n": 10}],
     "chapter 'ground_truth': models[0].n = 10: must keep len(tokens)^n = 3^10 within 20000 enumerated states"),
    ("ks", "ground_truth", "ising_separation", {"clique": 5, "free": 1, "coupling": 1.0, "field": 0.05, "ks": [1, 7]},
     "chapter 'ground_truth': ising_separation.ks[1] = 7: must be at most clique + free = 6"),
    ("escape-k", "traps", "escape", {"models": [{"name": "tiny-mlm"}], "seq_len": 8, "traps": 3, "chains": 30, "distances": [1, 9], "holding_decades": [3.0, 9.0], "temperatures": 5, "horizon": 1.0e+12, "max_moves": 200, "exact_models": [{"name": "tiny-mlm", "tokens": ["the", "dog", "ran"], "n": 4}], "exact_temperatures": [0.5], "exact_distances": [1], "exact_chains": 400, "exact_max_moves": 60, "candidates": 3, "length": {"models": [{"name": "tiny-mlm"}], "lengths": [6, 8, 10], "traps": 3, "max_states": 200, "temperatures": 4, "holding_decades": [2.0, 5.0], "chains": 20}, "growth": {"models": [{"name": "tiny-mlm"}], "lengths": [8, 12], "traps": 2, "max_states": 50, "check_lengths": [8], "temperature": 0.3, "chains": 4}},
     "chapter 'traps': escape.distances[1] = 9: must be at most escape.seq_len = 8"),
    ("escape-decades", "traps", "escape", {"models": [{"name": "tiny-mlm"}], "seq_len": 8, "traps": 3, "chains": 30, "distances": [1, 2], "holding_decades": [9.0, 3.0], "temperatures": 5, "horizon": 1.0e+12, "max_moves": 200, "exact_models": [{"name": "tiny-mlm", "tokens": ["the", "dog", "ran"], "n": 4}], "exact_temperatures": [0.5], "exact_distances": [1], "exact_chains": 400, "exact_max_moves": 60, "candidates": 3, "length": {"models": [{"name": "tiny-mlm"}], "lengths": [6, 8, 10], "traps": 3, "max_states": 200, "temperatures": 4, "holding_decades": [2.0, 5.0], "chains": 20}, "growth": {"models": [{"name": "tiny-mlm"}], "lengths": [8, 12], "traps": 2, "max_states": 50, "check_lengths": [8], "temperature": 0.3, "chains": 4}},
     "chapter 'traps': escape.holding_decades = [9.0, 3.0]: must be two numbers [low, high] with low < high"),
    ("escape-states", "traps", "escape", {"models": [{"name": "tiny-mlm"}], "seq_len": 8, "traps": 3, "chains": 30, "distances": [1, 2], "holding_decades": [3.0, 9.0], "temperatures": 5, "horizon": 1.0e+12, "max_moves": 200, "exact_models": [{"name": "tiny-mlm", "tokens": ["the", "dog", "ran"], "n": 12}], "exact_temperatures": [0.5], "exact_distances": [1], "exact_chains": 400, "exact_max_moves": 60, "candidates": 3, "length": {"models": [{"name": "tiny-mlm"}], "lengths": [6, 8, 10], "traps": 3, "max_states": 200, "temperatures": 4, "holding_decades": [2.0, 5.0], "chains": 20}, "growth": {"models": [{"name": "tiny-mlm"}], "lengths": [8, 12], "traps": 2, "max_states": 50, "check_lengths": [8], "temperature": 0.3, "chains": 4}},
     "chapter 'traps': escape.exact_models[0].n = 12: must keep len(tokens)^n = 3^12 within 20000 enumerated states"),
    ("escape-growth", "traps", "escape", {"models": [{"name": "tiny-mlm"}], "seq_len": 8, "traps": 3, "chains": 30, "distances": [1, 2], "holding_decades": [3.0, 9.0], "temperatures": 5, "horizon": 1.0e+12, "max_moves": 200, "exact_models": [{"name": "tiny-mlm", "tokens": ["the", "dog", "ran"], "n": 4}], "exact_temperatures": [0.5], "exact_distances": [1], "exact_chains": 400, "exact_max_moves": 60, "candidates": 3, "length": {"models": [{"name": "tiny-mlm"}], "lengths": [6, 8, 10], "traps": 3, "max_states": 200, "temperatures": 4, "holding_decades": [2.0, 5.0], "chains": 20}, "growth": {"models": [{"name": "tiny-mlm"}], "lengths": [8, 12], "traps": 2, "max_states": 50, "check_lengths": [10], "temperature": 0.3, "chains": 4}},
     "chapter 'traps': escape.growth.check_lengths[0] = 10: must be one of lengths = [8, 12]"),
    # the model list's old spellings (one spelling now, in every chapter)
    ("renamed-mlms", "bounds", "mlms", 1,
     "chapter 'bounds': mlms = 1: not a parameter of book/02_mixing_bounds.ipynb (renamed: it is 'models' now)"),
    ("renamed-models_", "ground_truth", "models_", 1,
     "chapter 'ground_truth': models_ = 1: not a parameter of book/06_ground_truth.ipynb (renamed: it is 'models' now)"),
    ("tokens-distinct", "ground_truth", "models", [{"name": "tiny-mlm", "tokens": ["the", "the"], "n": 4}],
     "chapter 'ground_truth': models[0].tokens = ['the', 'the']: must be a list of at least 2 distinct tokens "
     "('the' appears twice)"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_bad_parameter_is_one_line_before_anything_loads(case, pdir, no_loading, capsys, tmp_path):
    _, chapter, key, value, says = case
    name = write(pdir, "bad", with_param(chapter, key, value))
    line = refused(capsys, tmp_path, "--profile", name)
    assert line.startswith(f"{pdir / 'bad.yaml'}: chapter '{chapter}': "), line
    assert says in line, line


def test_a_relation_broken_by_the_schemas_default_says_so(pdir, no_loading, capsys, tmp_path):
    spec = shipped()
    prm = spec["chapters"]["ground_truth"]["parameters"]
    assert "trap_window" not in prm and "trap_window" not in spec["defaults"]   # the schema's trap_window = 50 steps
    prm["budget"] = 40
    line = refused(capsys, tmp_path, "--profile", write(pdir, "bad", spec))
    assert "chapter 'ground_truth': trap_window = 50: must be at most budget = 40" in line
    assert "the schema's default" in line


def test_a_key_the_profile_leaves_out_without_a_default_is_missing(pdir, no_loading, capsys, tmp_path):
    spec = shipped()
    del spec["chapters"]["traps"]["parameters"]["window"]
    line = refused(capsys, tmp_path, "--profile", write(pdir, "bad", spec))
    assert line.endswith("chapter 'traps': window: missing (required)"), line


@pytest.mark.parametrize("key,value,says", [
    ("seed", "7", "defaults.seed = '7': must be an integer in [0, 4294967295]"),
    ("seed", True, "defaults.seed = true: must be an integer in [0, 4294967295]"),
    ("seed", -1, "defaults.seed = -1: must be an integer in [0, 4294967295]"),
    ("device", "gpu", "defaults.device = 'gpu': must be 'auto', 'cpu', 'mps', 'cuda' or 'cuda:N'"),
    ("dtype", "bf32", "defaults.dtype = 'bf32': must be one of 'auto', 'float32'"),
    ("sede", 7, "defaults.sede = 7: not a key of defaults (did you mean 'seed'?)"),
])
def test_bad_defaults_are_refused(key, value, says, pdir, no_loading, capsys, tmp_path):
    spec = shipped()
    spec["defaults"][key] = value
    line = refused(capsys, tmp_path, "--profile", write(pdir, "bad", spec))
    assert line.startswith(f"{pdir / 'bad.yaml'}: {says}"), line


def test_default_for_defaults_is_refused_with_the_right_name(pdir, no_loading, capsys, tmp_path):
    spec = shipped()
    spec = {("default" if k == "defaults" else k): v for k, v in spec.items()}
    spec["default"] = {**spec["default"], "seed": 7}
    line = refused(capsys, tmp_path, "--profile", write(pdir, "bad", spec))
    assert line.startswith(f"{pdir / 'bad.yaml'}: default = {{seed: 7, "), line
    assert "not a profile key (did you mean 'defaults'?)" in line


def test_a_profile_states_every_default(pdir, no_loading, capsys, tmp_path):
    spec = shipped()
    del spec["defaults"]["on_missing_model"]
    line = refused(capsys, tmp_path, "--profile", write(pdir, "bad", spec))
    assert line.startswith(f"{pdir / 'bad.yaml'}: defaults.on_missing_model: missing"), line


def test_chapter_entry_keys_and_names(pdir, no_loading, capsys, tmp_path):
    spec = shipped()
    spec["chapters"]["bounds"]["parameter"] = spec["chapters"]["bounds"].pop("parameters")
    line = refused(capsys, tmp_path, "--profile", write(pdir, "bad", spec))
    assert "chapters.bounds.parameter = {" in line and "not a chapter key (did you mean 'parameters'?)" in line
    spec = shipped()
    spec["chapters"]["../x"] = spec["chapters"].pop("cost")
    line = refused(capsys, tmp_path, "--profile", write(pdir, "bad", spec))
    assert "chapters.../x: the key '../x' must be a name of letters, digits, _ and -" in line


def test_a_derived_profile_is_checked_after_sizes_and_replace(pdir, no_loading, capsys, tmp_path):
    spec = yaml.safe_load((ROOT / "params" / "standin.yaml").read_text())
    spec["sizes"]["crossover"]["fixed_t"] = 400                # paper: sweeps 60 -> 4 here, min(lengths) 10
    line = refused(capsys, tmp_path, "--profile", write(pdir, "bad", spec))
    assert line.startswith(f"{pdir / 'bad.yaml'} (derives from 'paper'): chapter 'crossover': fixed_t = 400: "
                           "must be at most sweeps * min(lengths) = 4 * 10 = 40 steps"), line
    spec = yaml.safe_load((ROOT / "params" / "standin.yaml").read_text())
    spec["replace"]["gpt2"] = ""
    line = refused(capsys, tmp_path, "--profile", write(pdir, "bad", spec))
    assert "replace.gpt2 = '': must be a non-empty replacement name" in line


@pytest.mark.parametrize("profile", ["../../evil", "/tmp/evil", "smoke.yaml", "", "a b"])
def test_a_profile_is_a_name_of_a_file_in_params(profile, pdir, no_loading, capsys, tmp_path):
    (tmp_path / "evil.yaml").write_text((ROOT / "params" / "smoke.yaml").read_text())   # a readable file out there
    line = refused(capsys, tmp_path, "--profile", profile)
    assert line.startswith(f"profile {profile!r}: a profile is the name of a file params/NAME.yaml"), line
    assert "known: " in line and "smoke" in line


def test_derive_naming_a_path_is_refused(pdir, no_loading, capsys, tmp_path):
    line = refused(capsys, tmp_path, "--profile", write(pdir, "bad", {"derive": "../params/smoke"}))
    assert line == f"{pdir / 'bad.yaml'}: derive = '../params/smoke': must be a name of letters, digits, _ and - " \
                   "(a file params/NAME.yaml)"


def test_derive_cycles_are_refused(pdir, no_loading, capsys, tmp_path):
    write(pdir, "a", {"derive": "b"})
    write(pdir, "b", {"derive": "c"})
    write(pdir, "c", {"derive": "a"})
    line = refused(capsys, tmp_path, "--profile", "a")
    assert line == f"{pdir / 'c.yaml'}: derive = 'a': the profiles derive from each other in a cycle (a -> b -> c -> a); " \
                   "a chain of derive must end at a profile written out in full"
    write(pdir, "d", {"derive": "d"})
    assert "cycle (d -> d)" in refused(capsys, tmp_path, "--profile", "d")


def test_unknown_profile_and_chapter_name_the_known_ones(pdir, no_loading, capsys, tmp_path):
    line = refused(capsys, tmp_path, "--profile", "smoek")
    assert line.startswith("unknown profile 'smoek' (no file params/smoek.yaml); known: ") and "smoke" in line
    line = refused(capsys, tmp_path, "--profile", "smoke", "--chapter", "trap")
    assert line.endswith("--chapter 'trap': not a chapter of this profile; known: incompatibility, bounds, crossover, "
                         "traps, basins, ground_truth, cost"), line


def test_invalid_yaml_is_one_line(pdir, no_loading, capsys, tmp_path):
    (pdir / "bad.yaml").write_text("profile: bad\nchapters: {a: [}\n")
    line = refused(capsys, tmp_path, "--profile", "bad")
    assert line.startswith(f"{pdir / 'bad.yaml'}: not valid YAML at line 2"), line


def test_the_papermill_recipe_checks_the_whole_profile_first(pdir, no_loading, capsys):
    name = write(pdir, "bad", with_param("incompatibility", "temperature", math.nan))
    with pytest.raises(SystemExit) as exc:
        P.main([name, "cost"])                          # another chapter than the bad one
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"{pdir / 'bad.yaml'}: chapter 'incompatibility': temperature = nan: must be a finite number > 0"]
    with pytest.raises(SystemExit) as exc:
        P.main(["smoke", "nope"])
    assert exc.value.code == 2 and "--chapter 'nope': not a chapter" in capsys.readouterr().err
    assert P.main(["smoke", "traps"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["profile"] == "smoke" and printed["steps"] == shipped()["chapters"]["traps"]["parameters"]["steps"]


# --------------------------------------------------------------------------- what the schema declares
@pytest.mark.parametrize("profile", SHIPPED)
def test_every_shipped_profile_validates(profile):
    spec = P.check_profile(profile)
    assert set(spec["chapters"]) >= {"incompatibility", "bounds", "crossover", "traps", "basins", "ground_truth", "cost"}


@pytest.mark.parametrize("notebook", sorted(P.CHAPTERS))
def test_the_schema_declares_exactly_the_notebooks_parameters(notebook):
    """A profile key the notebook does not declare is refused by the schema (extra keys are
    forbidden), and the schema declares nothing the notebook lacks: so a parameter papermill
    injects always exists in the notebook, and every one of the notebook's is checked."""
    cell = set(P.notebook_parameters(ROOT / notebook))
    declared = set(P.CHAPTERS[notebook].model_fields)
    assert declared == cell, (sorted(cell - declared), sorted(declared - cell))
    assert P.schema_mismatch(notebook, ROOT) is None
    assert set(P.INJECTED) | set(P.DEFAULT_KEYS) <= cell


def test_every_notebook_of_every_profile_has_a_schema_and_runs_alone():
    for profile in P.profiles():
        for ch in P.load_profile(profile)["chapters"].values():
            assert ch["notebook"] in P.CHAPTERS, ch["notebook"]
    for notebook, model in P.CHAPTERS.items():      # the notebook run alone, as papermill would without a profile
        got = P.check_chapter(notebook, P.notebook_parameters(ROOT / notebook))
        model.model_validate({k: v for k, v in got.items()})


def test_the_library_refuses_past_the_schemas_limits():
    """The limits have one home (profile.values); the library's refusals fall exactly there: an
    Ising chain of MAX_SPINS spins is built and one more is refused, an exact chain of MAX_STATES
    states is allowed and one of more refused, and a null seed outside NULL_SEEDS is refused."""
    import numpy as np
    import torch

    from textglauber import exact, ising, topics

    ising.IsingModel(np.zeros((P.MAX_SPINS, P.MAX_SPINS)), np.zeros(P.MAX_SPINS))
    with pytest.raises(ValueError, match=f"exceed the enumeration limit of {P.MAX_SPINS}"):
        ising.IsingModel(np.zeros((P.MAX_SPINS + 1, P.MAX_SPINS + 1)), np.zeros(P.MAX_SPINS + 1))
    with pytest.raises(ValueError, match=f"exceed the limit of {P.MAX_STATES}"):
        exact.enumerate_states(np.arange(P.MAX_STATES + 1), 1)
    assert len(exact.enumerate_states(np.arange(P.MAX_STATES), 1)) == P.MAX_STATES
    with pytest.raises(ValueError, match="unknown null seeds"):
        topics.null_states(torch.zeros((1, 3), dtype=torch.long), ["a"], torch.arange(3), ["uniform"], 1,
                           torch.Generator())


def test_the_names_the_schema_mirrors_are_the_librarys():
    """Presets and artifacts are the library's names, mirrored in the schema (which imports nothing
    of the library); these tie them together."""
    from textglauber import topics, train_mlm
    from textglauber.bench import cache as bench_cache

    assert set(P.TRAINING_PRESETS) == set(train_mlm.PRESETS)
    assert set(P.ARTIFACTS) == {"standins", *bench_cache.PRESETS, *train_mlm.PRESETS}
    assert set(P.seed_topics_available()) == set(topics.seed_texts().label)


def test_the_schema_adds_no_library_module_to_a_chapters_code():
    """A chapter's cache key covers the modules its notebook reaches (imports inside functions too);
    the profile package, which every chapter reaches, must pull in no other module than paths."""
    import re

    for f in sorted((ROOT / "src" / "textglauber" / "profile").glob("*.py")):
        src = f.read_text()
        outside = set(re.findall(r"^\s*from \.\.(\w*) import", src, re.M))
        assert outside <= {"paths"}, (f.name, "imports the library", outside)
        assert not re.findall(r"^\s*from \.\.\.|^\s*import textglauber|^\s*from textglauber", src, re.M), f.name


def test_a_notebook_whose_cell_and_schema_differ_is_refused(monkeypatch, pdir, no_loading, capsys, tmp_path):
    """A parameter added to a notebook but not to its schema stops the build (for every chapter of
    the profile, not only those selected), naming both sides."""
    read = notebooks.notebook_parameters

    def with_a_new_knob(path):
        got = read(path)
        return {**got, "new_knob": 3} if Path(path).name == "05_traps.ipynb" else got

    monkeypatch.setattr(notebooks, "notebook_parameters", with_a_new_knob)
    line = refused(capsys, tmp_path, "--profile", "smoke", "--chapter", "bounds")
    assert line == (f"{pdir / 'smoke.yaml'}: chapter 'traps': book/05_traps.ipynb: its parameters cell declares "
                    "['new_knob'], which the schema does not (textglauber.profile.Traps declares exactly the cell's "
                    "names: change both together)")


# --------------------------------------------------------------------------- the pre-flight's corpus check
def test_a_window_longer_than_the_corpus_is_refused_by_the_preflight_without_a_model(pdir, monkeypatch):
    def refuse(*a, **k):
        raise Loaded("a model was loaded")

    from textglauber.models import loading, scorers

    for mod in (models, loading, scorers):                      # the package, and where its parts look them up
        for name in ("load", "open_mlm", "tokenizer"):
            if hasattr(mod, name):
                monkeypatch.setattr(mod, name, refuse)
    spec = with_param("traps", "seq_len", 5000)                 # the tiny corpus: 40 short sentences
    spec["chapters"]["traps"]["parameters"]["window"] = 100
    name = write(pdir, "long", spec)
    P.check_profile(name)                                        # the schema cannot see it
    lines = build_preflight.window_problems(name, {c: P.chapter_parameters(name, c) for c in ["traps", "crossover", "ground_truth"]})
    assert len(lines) == 1
    assert lines[0].startswith(f"{pdir / 'long.yaml'}: chapter 'traps': seq_len = 5000: a window of 5000 tokens is "
                               "longer than corpus 'tiny' holds (at most "), lines
    assert build_preflight.window_problems("smoke", {c: P.chapter_parameters("smoke", c) for c in
                                                             ["incompatibility", "bounds", "crossover", "traps"]}) == []


# --------------------------------------------------------------------------- run_all.sh
def _run_all(tmp_path, *args):
    venv = tmp_path / "venv"
    env = {**os.environ, "VENV": str(venv), "PYTHON": "false"}     # building a venv would fail, and leave a trace
    r = subprocess.run(["bash", str(ROOT / "run_all.sh"), *args], capture_output=True, text=True, env=env, timeout=60)
    assert not venv.exists(), "run_all.sh prepared the environment before refusing its arguments"
    return r


@pytest.mark.parametrize("args,says", [
    (["--profile"], "run_all.sh: --profile needs a value: a profile name (known: "),
    (["--chapter"], "run_all.sh: --chapter needs a value: a chapter name"),
    (["--profile", "smoke", "--chapter"], "run_all.sh: --chapter needs a value"),
    (["--results"], "run_all.sh: --results needs a value"),
    (["--profile="], "run_all.sh: --profile needs a value"),
    (["--profile", "../../evil"], "run_all.sh: profile '../../evil' is not a profile name"),
    (["--profile", "nope"], "run_all.sh: unknown profile 'nope'"),
    (["--profile", "--force"], "run_all.sh: --profile needs a value"),
    (["--bogus"], "run_all.sh: unknown argument: --bogus"),
])
def test_run_all_refuses_bad_arguments_in_one_line_before_the_environment(args, says, tmp_path):
    (tmp_path / "evil.yaml").write_text("profile: evil\n")
    r = _run_all(tmp_path, *args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(says), r.stderr
    assert "unbound variable" not in r.stderr and r.stdout == ""


# --------------------------------------------------------------------------- a papermill run outside the build
CHECKED = ["book/01_incompatibility.ipynb", "book/02_mixing_bounds.ipynb", "book/03_crossover.ipynb",
           "book/04_basins.ipynb", "book/05_traps.ipynb", "book/06_ground_truth.ipynb", "book/90_cost.ipynb"]


@pytest.mark.parametrize("notebook, key, value, says", [
    ("book/05_traps.ipynb", "window", 9, "window = 9: must be at least 2 * record_every = 10"),
    ("book/05_traps.ipynb", "threshold", 0, "threshold = 0: must be a finite number > 0"),
    ("book/04_basins.ipynb", "basin_label", "sports", "basin_label = 'sports': must be one of labels"),
    ("book/04_basins.ipynb", "score_every", 70, "steps = 600: must be a multiple of score_every = 70"),
    ("book/03_crossover.ipynb", "fixed_t", 41, "fixed_t = 41: must be at most sweeps * min(lengths) = 10 * 4 = 40"),
    ("book/03_crossover.ipynb", "reference_sweeps", 0, "reference_sweeps = 0: must be a finite number > 0"),
    ("book/03_crossover.ipynb", "reference_sweeps", 31, "reference_sweeps = 31: must be at most budget_sweeps = 30"),
    ("book/01_incompatibility.ipynb", "mlms", [], "mlms = []: not a parameter of book/01_incompatibility.ipynb "
                                                 "(renamed: it is 'models' now)"),
    ("book/06_ground_truth.ipynb", "models_", [], "models_ = []: not a parameter of book/06_ground_truth.ipynb "
                                                  "(renamed: it is 'models' now)"),
])
def test_a_chapter_checks_its_own_parameters_in_one_line(notebook, key, value, says):
    """What a papermill run outside the build injects (``-p window 9``) is refused by the chapter's
    first call, in one line naming the notebook, the key, the value and what is allowed; the
    notebook's own defaults pass, and a name the schema does not declare is no parameter to check."""
    values = {**P.notebook_parameters(ROOT / notebook), "unrelated": object()}
    P.check_chapter(notebook, values)
    with pytest.raises(ProfileError) as exc:
        P.check_chapter(notebook, {**values, key: value})
    assert str(exc.value).count("\n") == 0 and str(exc.value).startswith(f"{notebook}: {says}")


@pytest.mark.parametrize("notebook", CHECKED)
def test_a_chapter_checks_its_parameters_before_it_starts(notebook):
    """The check comes before the results folder is emptied and before anything is computed."""
    nb = json.loads((ROOT / notebook).read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code" and "parameters" not in c["metadata"].get("tags", [])]
    lines = [ln for ln in "".join(code[0]["source"]).splitlines() if ln and not ln.startswith(("import ", "from "))]
    checked = f'checked = check_chapter("{notebook}", globals())'     # kept for the manifest
    first = 2 if lines[0] == checked else 1
    assert lines[:first] in ([checked, "globals().update(checked)"], [f'globals().update(check_chapter("{notebook}", globals()))'])
    if "results.start_chapter(" in "".join(code[0]["source"]):        # the cost appendix writes no results
        assert lines[first].startswith("out, gen = results.start_chapter(")


def test_every_chapter_notebook_is_checked():
    """No chapter of a profile escapes the check: every notebook the schema declares, but the
    findings page (which the build runs with its own three parameters), is in CHECKED."""
    assert sorted(CHECKED) == sorted(P.CHAPTERS)
