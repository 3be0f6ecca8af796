"""The allowed vocabulary A: the tokens a chain may write and the softmax runs over."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import torch

_UNUSED = re.compile(r"^(\[unused\d+\]|<unused\d+>|\[UNUSED_\d+\])$")


@dataclass(frozen=True)
class AllowedVocab:
    """Sorted token ids of A, with their strings, and a reverse index into A.

    The ids are sorted here whatever order they are given in (tokens kept aligned), so that a
    scorer's columns, the engine's writes and the exact enumeration all follow one order."""

    ids: torch.Tensor          # (|A|,) long, sorted
    tokens: tuple[str, ...]
    vocab_size: int

    def __post_init__(self):
        ids = torch.as_tensor(self.ids, dtype=torch.long).flatten()
        if len(self.tokens) != ids.numel():
            raise ValueError(f"{ids.numel()} ids but {len(self.tokens)} tokens")
        order = torch.argsort(ids)
        ids = ids[order]
        if ids.numel() > 1 and bool((ids[1:] == ids[:-1]).any()):
            raise ValueError("the allowed vocabulary lists a token id twice")
        if ids.numel() and (int(ids[0]) < 0 or int(ids[-1]) >= self.vocab_size):
            raise ValueError(f"token ids must lie in [0, {self.vocab_size})")
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "tokens", tuple(self.tokens[i] for i in order.tolist()))

    @property
    def size(self) -> int:
        return int(self.ids.numel())

    @cached_property
    def _table(self) -> torch.Tensor:
        table = torch.full((self.vocab_size,), -1, dtype=torch.long)
        table[self.ids] = torch.arange(self.size)
        return table

    def index_of(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Position in A of each token id; -1 where the token is not in A."""
        return self._table[token_ids.cpu()].to(token_ids.device)

    def contains(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self.index_of(token_ids) >= 0

    def key(self) -> str:
        """A short fingerprint, stable across runs, for manifests and checkpoints."""
        import hashlib

        return hashlib.sha1(self.ids.numpy().tobytes()).hexdigest()[:12]


def _is_whole_word(tok: str, style: str) -> bool:
    if style == "wordpiece":
        return not tok.startswith("##")
    if style == "bpe":          # byte-level BPE marks a word start with 'Ġ'
        return tok.startswith("Ġ") and len(tok) > 1
    if style == "sentencepiece":
        return tok.startswith("▁") and len(tok) > 1
    return True


def _style(vocab: dict[str, int]) -> str:
    toks = list(vocab)
    n = max(len(toks), 1)
    if sum(t.startswith("##") for t in toks) > 0.05 * n:
        return "wordpiece"
    if sum(t.startswith("Ġ") for t in toks) > 0.05 * n:
        return "bpe"
    if sum(t.startswith("▁") for t in toks) > 0.05 * n:
        return "sentencepiece"
    return "plain"


_STYLES: dict[int, tuple[int, str]] = {}


def style(tokenizer) -> str:
    """The tokenizer family: "wordpiece", "bpe" (byte-level, 'Ġ' marks a word start), "sentencepiece" or "plain".

    Remembered per tokenizer object (and its size): reading a 30k-entry vocabulary for every text
    encoded made cutting windows from a corpus take minutes."""
    key, size = id(tokenizer), len(tokenizer)
    hit = _STYLES.get(key)
    if hit is None or hit[0] != size:
        hit = _STYLES[key] = (size, _style(tokenizer.get_vocab()))
    return hit[1]


def special_ids(tokenizer) -> set[int]:
    """Every special token: the special-tokens map and every added token flagged special in the
    tokenizer file (ModernBERT's ``<|padding|>``, ``<|endoftext|>``, ``|||IP_ADDRESS|||`` are only there)."""
    out = set(tokenizer.all_special_ids)
    for idx, tok in getattr(tokenizer, "added_tokens_decoder", {}).items():
        if getattr(tok, "special", False):
            out.add(int(idx))
    return out


def encode(tokenizer, text: str) -> list[int]:
    """Content token ids of ``text`` as it would appear inside a longer text.

    Byte-level BPE writes a word differently at the very start of a text ('The') and after a
    space ('ĠThe'); chains, windows and seeds all sit inside text, so BPE texts are encoded after a
    space. Whole words are then the word-start tokens in every family ('Ġ' tokens for BPE, pieces
    without '##' for WordPiece), the first word of a text included."""
    if style(tokenizer) == "bpe" and not text.startswith(" "):
        text = " " + text
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def encode_many(tokenizer, texts: list[str]) -> list[list[int]]:
    """:func:`encode` for many texts in one batched tokenizer call."""
    if style(tokenizer) == "bpe":
        texts = [t if t.startswith(" ") else " " + t for t in texts]
    return tokenizer(list(texts), add_special_tokens=False)["input_ids"] if texts else []


def decode(tokenizer, ids) -> str:
    """Display text of a state: no special tokens, tokenization spaces cleaned (BERT's "it ' s")."""
    ids = [int(i) for i in ids]
    return tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=True).strip()


def round_trips(tokenizer, ids) -> bool:
    """Whether the tokenizer would produce exactly these ids from their own text."""
    ids = [int(i) for i in ids]
    return encode(tokenizer, tokenizer.decode(ids)) == ids


def single_token(tokenizer, text: str) -> int:
    """The id of ``text`` when it is one token of the vocabulary (as written mid-text); else an error."""
    vocab = tokenizer.get_vocab()
    if text not in vocab:
        raise ValueError(f"{text!r} is not a token of this vocabulary")
    idx = vocab[text]
    if idx in special_ids(tokenizer):
        raise ValueError(f"{text!r} is a special token")
    return idx


def _valid_text(tokenizer, idx: int) -> bool:
    """False for byte-level pieces that are only part of a UTF-8 character (they decode to U+FFFD)."""
    return "\ufffd" not in tokenizer.decode([idx])


def allowed_vocabulary(tokenizer, *, whole_words: bool = False, tokens: list[str] | None = None,
                       alphabetic: bool = False) -> AllowedVocab:
    """A = the model's vocabulary minus special, unused and (byte-level BPE) partial-character tokens.

    ``tokens`` restricts A to an explicit list (each must be a single vocabulary entry);
    ``whole_words`` keeps word-start tokens only (see :func:`encode`); ``alphabetic`` keeps tokens
    made of letters only (after the word-start marker).
    """
    vocab = tokenizer.get_vocab()
    vsize = max(max(vocab.values()) + 1, len(tokenizer))
    special = special_ids(tokenizer)
    if tokens is not None:
        missing = [t for t in tokens if t not in vocab]
        if missing:
            raise ValueError(f"tokens not in the vocabulary: {missing}")
        chosen = sorted({vocab[t] for t in tokens} - special)
    else:
        fam = _style(vocab)
        chosen = []
        for tok, idx in vocab.items():
            if idx in special or _UNUSED.match(tok):
                continue
            if whole_words and not _is_whole_word(tok, fam):
                continue
            if fam == "bpe" and not _valid_text(tokenizer, idx):
                continue
            if alphabetic and not tok.lstrip("Ġ▁").isalpha():
                continue
            chosen.append(idx)
        chosen.sort()
    if not chosen:
        raise ValueError("the allowed vocabulary is empty: no token passes the given filters")
    inv = {i: t for t, i in vocab.items()}
    return AllowedVocab(ids=torch.tensor(chosen, dtype=torch.long),
                        tokens=tuple(inv[i] for i in chosen), vocab_size=vsize)
