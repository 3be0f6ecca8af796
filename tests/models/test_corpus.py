"""Corpora and local paths: local copies in every supported layout, relative paths taken from the
repository root whatever the working directory, and the pre-flight's one message per missing
model or corpus before any compute."""
import json

import pandas as pd
import pytest

from textglauber import corpus, hub, models, paths
from textglauber.bookbuild import preflight as build_preflight
from conftest import named_models

MARCO_ROWS = [{"query": "q1", "passages": {"is_selected": [0, 1], "passage_text": ["first passage.", "second one."]}},
              {"query": "q2", "passages": {"is_selected": [1], "passage_text": ["third passage here."]}}]
MARCO_TEXTS = ["first passage.", "second one.", "third passage here."]


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A stand-in repository root, and a working directory elsewhere (as the chapters have)."""
    monkeypatch.setattr(paths, "repo_root", lambda: tmp_path)
    cwd = tmp_path / "book"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("TEXTGLAUBER_MSMARCO", raising=False)
    return tmp_path


def test_local_corpora_in_every_layout(root):
    from datasets import Dataset

    (root / "data").mkdir()
    pd.DataFrame(MARCO_ROWS).to_parquet(root / "data" / "marco.parquet")
    (root / "data" / "marco.jsonl").write_text("\n".join(json.dumps(r) for r in MARCO_ROWS))
    Dataset.from_list(MARCO_ROWS).save_to_disk(str(root / "saved"))
    pd.DataFrame({"text": ["alpha beta", " ", "gamma"]}).to_parquet(root / "plain.parquet")
    (root / "lines.txt").write_text("one line\n\nanother line\n")
    assert corpus.texts("data/marco.parquet") == MARCO_TEXTS
    assert corpus.texts("data/marco.jsonl") == MARCO_TEXTS
    assert corpus.texts("saved") != [] and corpus.texts("./saved") == MARCO_TEXTS
    assert corpus.texts("plain.parquet") == ["alpha beta", "gamma"]
    assert corpus.texts("lines.txt") == ["one line", "another line"]
    # a folder of files reads them all, in name order
    assert corpus.texts("data") == MARCO_TEXTS + MARCO_TEXTS


def test_bad_corpora_fail_clearly(root):
    pd.DataFrame({"body": ["x"]}).to_parquet(root / "wrong.parquet")
    with pytest.raises(ValueError, match="none of the columns"):
        corpus.texts("wrong.parquet")
    with pytest.raises(corpus.CorpusUnavailableError, match="no such file"):
        corpus.texts("missing/folder")
    with pytest.raises(ValueError, match="unknown corpus"):
        corpus.texts("nosuchcorpus")


def test_msmarco_reads_a_local_copy_and_never_the_hub(root, monkeypatch):
    monkeypatch.setattr(hub, "reachable", lambda timeout=3.0: False)
    with pytest.raises(corpus.CorpusUnavailableError, match="fetch msmarco"):
        corpus.texts("msmarco")
    with pytest.raises(corpus.CorpusUnavailableError, match="fetch msmarco"):
        corpus.check_available(["msmarco", "tiny"])
    # the cached copy that `python -m textglauber.corpus fetch msmarco` writes
    folder = root / "_build" / "corpora" / "msmarco"
    folder.mkdir(parents=True)
    pd.DataFrame({"text": MARCO_TEXTS}).to_parquet(folder / "passages.parquet")
    corpus.check_available(["msmarco"])
    assert corpus.texts("msmarco") == MARCO_TEXTS
    # an explicit copy, by a path relative to the repository root
    pd.DataFrame(MARCO_ROWS[:1]).to_parquet(root / "mine.parquet")
    monkeypatch.setenv("TEXTGLAUBER_MSMARCO", "mine.parquet")
    assert corpus.texts("msmarco") == MARCO_TEXTS[:2]
    monkeypatch.setenv("TEXTGLAUBER_MSMARCO", "nothere")
    with pytest.raises(corpus.CorpusUnavailableError, match="TEXTGLAUBER_MSMARCO"):
        corpus.check_available(["msmarco"])


def test_relative_model_directory_is_taken_from_the_repository_root(root):
    (root / "models" / "bert-base-uncased").mkdir(parents=True)
    src = models.resolve("models/bert-base-uncased")
    assert not src.is_hub and src.path == str(root / "models" / "bert-base-uncased")
    with pytest.raises(models.ModelUnavailableError, match="no such local directory"):
        models.resolve("./models/roberta-base")


def test_offline_paper_profile_stops_before_compute_with_one_message_each(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.delenv("TEXTGLAUBER_MSMARCO", raising=False)
    monkeypatch.setattr(corpus, "msmarco_local", lambda: None)
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    chapters = list(build_preflight.P.load_profile("paper")["chapters"])
    with pytest.raises(SystemExit) as exc:
        build_preflight.preflight("paper", chapters)
    msg = str(exc.value)
    P = build_preflight.P
    wanted = sorted({n for ch in chapters for n in named_models(P.chapter_parameters("paper", ch))})
    assert len(wanted) >= 6
    for name in wanted:
        assert msg.count(f"model {name!r}") == 1, name
    assert msg.count("corpus 'msmarco'") == 1
