"""BERT's tokenization with character offsets: basic tokenization, then greedy longest-match-first WordPiece.

Basic tokenization (what BERT does before WordPiece), in order:

1. clean: drop NUL, U+FFFD and control characters (Unicode category C*, except tab, newline and carriage return,
   which count as whitespace); every whitespace character (space, tab, newline, CR, category Zs) and the line and
   paragraph separators U+2028/U+2029 separate tokens;
2. every CJK ideograph (the CJK Unified Ideographs blocks and their extensions, and the compatibility
   ideographs) is a token of its own;
3. for an uncased vocabulary: lower-case, then strip accents (Unicode NFD, then drop the non-spacing marks, Mn);
4. every punctuation character is a token of its own (ASCII 33-47, 58-64, 91-96, 123-126, and every character
   of a Unicode P* category).

WordPiece: each basic token is split greedily into the longest vocabulary entries from the left; pieces after
the first carry the ``##`` continuation prefix. A token longer than 100 characters, or one with a part that no
entry matches, becomes ``[UNK]`` as a whole.

Every token keeps ``(start, end)``: the span of the original text (Python string indices, i.e. code points, as
SQuAD's ``answer_start`` counts) that it came from; characters a token gained or lost in normalization map to the
original character they came from.

Whether the vocabulary is uncased is read from the vocabulary itself: uncased when no entry (other than the
bracketed specials such as ``[CLS]``) contains an upper-case letter; ``lower_case=`` overrides that.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path
from typing import Iterable

from daybreak.errors import DataError

# the tokens of one window of a BERT model's input (question, context and the special tokens): SQuAD's input shape
# (its task file) and its features' default (daybreak.data.squad_features); here, where importing it costs nothing
DEFAULT_MAX_SEQ_LEN = 384

UNK, CLS, SEP, PAD = "[UNK]", "[CLS]", "[SEP]", "[PAD]"
REQUIRED_SPECIALS = (PAD, UNK, CLS, SEP)
MAX_CHARS_PER_WORD = 100
CONTINUATION = "##"

# Unicode Zs plus the four ASCII whitespace characters BERT treats as separators.
_WHITESPACE = " \t\n\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
# BERT splits the cleaned text with Python's str.split(), which also breaks at the line/paragraph separators
# U+2028/U+2029 (the other characters it splits at are either whitespace above or control characters, which
# cleaning removes first).
_CHUNKS = re.compile(f"[^{re.escape(_WHITESPACE)}\u2028\u2029]+")
# An ASCII chunk without control characters: runs of letters/digits, every other printable char is punctuation.
_ASCII_CLEAN = re.compile(r"[\x21-\x7e]+")
_ASCII_PIECES = re.compile(r"[A-Za-z0-9]+|[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]")

_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)


def is_cjk(cp: int) -> bool:
    return cp >= 0x3400 and any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_control(ch: str) -> bool:
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


# A basic token: its normalized text and, per character, the index of the original character it came from; an int
# instead of the list when the characters map one to one onto text[start:start + len].
BasicToken = tuple[str, "list[int] | int"]
_ASCII_PUNCT = frozenset(chr(c) for c in range(33, 127) if not chr(c).isalnum())


class WordPieceTokenizer:
    """``tokenize_with_offsets(text)`` -> (ids, tokens, offsets); the vocabulary maps token -> id (line number)."""

    def __init__(self, vocab: dict[str, int], *, lower_case: bool | None = None, source: str = "vocabulary"):
        missing = [tok for tok in REQUIRED_SPECIALS if tok not in vocab]
        if missing:
            raise DataError(f"{source} lacks {', '.join(missing)}; a BERT WordPiece vocabulary has "
                            f"{', '.join(REQUIRED_SPECIALS)}")
        self.vocab = vocab
        self.size = max(vocab.values()) + 1
        self.lower_case = vocab_is_uncased(vocab) if lower_case is None else lower_case
        self.unk_id, self.cls_id, self.sep_id, self.pad_id = (vocab[t] for t in (UNK, CLS, SEP, PAD))
        self.source = source
        self._cache: dict[str, list[tuple[str, int, int]]] = {}  # word -> [(piece, start, end)], char indices

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, lower_case: bool | None = None) -> "WordPieceTokenizer":
        return cls(load_vocab(path), lower_case=lower_case, source=str(path))

    def __len__(self) -> int:
        return self.size

    # --- basic tokenization -------------------------------------------------------------------------------------
    def basic_tokens(self, text: str) -> list[BasicToken]:
        out: list[BasicToken] = []
        for m in _CHUNKS.finditer(text):
            chunk, base = m.group(), m.start()
            if chunk.isascii() and _ASCII_CLEAN.fullmatch(chunk):  # fast path: the usual English word
                lower = self.lower_case
                for piece in _ASCII_PIECES.finditer(chunk):
                    word = piece.group()
                    out.append((word.lower() if lower else word, base + piece.start()))
            else:
                self._basic_slow(chunk, base, out)
        return out

    def _basic_slow(self, chunk: str, base: int, out: list[BasicToken]) -> None:
        word_chars: list[str] = []
        word_index: list[int] = []

        def flush() -> None:
            if word_chars:
                self._normalize_and_split("".join(word_chars), word_index, out)
                word_chars.clear()
                word_index.clear()

        for k, ch in enumerate(chunk):
            cp = ord(ch)
            if 32 < cp < 127:  # printable ASCII: never removed, never CJK
                word_chars.append(ch)
                word_index.append(base + k)
                continue
            if cp == 0 or cp == 0xFFFD or is_control(ch):
                continue
            if is_whitespace(ch):  # a separator the chunk regex does not know (cannot happen for Zs; defensive)
                flush()
                continue
            if is_cjk(cp):
                flush()
                out.append((ch, [base + k]))
                continue
            word_chars.append(ch)
            word_index.append(base + k)
        flush()

    def _normalize_and_split(self, word: str, index: list[int], out: list[BasicToken]) -> None:
        chars: list[str] = []
        where: list[int] = []
        if self.lower_case:
            lowered = word.lower()  # of the whole word, as BERT does: Greek capital sigma depends on its context
            pairs: Iterable[tuple[str, int]]
            if len(lowered) == len(word):  # the usual case: one character each
                pairs = zip(lowered, index)
            else:  # some character lower-cases to several (e.g. U+0130): align them one original char at a time
                pairs = _aligned_lower(word, lowered, index)
            for ch, i in pairs:
                if ch.isascii():
                    chars.append(ch)
                    where.append(i)
                    continue
                for c in unicodedata.normalize("NFD", ch):
                    if unicodedata.category(c) != "Mn":
                        chars.append(c)
                        where.append(i)
        else:
            chars, where = list(word), list(index)
        start = 0
        for k, ch in enumerate(chars):
            if ch in _ASCII_PUNCT or (not ch.isascii() and is_punctuation(ch)):
                if k > start:
                    out.append(("".join(chars[start:k]), where[start:k]))
                out.append((ch, [where[k]]))
                start = k + 1
        if len(chars) > start:
            out.append(("".join(chars[start:]), where[start:]))

    # --- WordPiece ----------------------------------------------------------------------------------------------
    def wordpieces(self, word: str) -> list[tuple[str, int, int]]:
        """Greedy longest-match-first split of one basic token: [(piece, first char, end char)]."""
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        n = len(word)
        pieces: list[tuple[str, int, int]] = []
        if n > MAX_CHARS_PER_WORD:
            pieces = [(UNK, 0, n)]
        else:
            start = 0
            while start < n:
                end = n
                match = None
                while start < end:
                    piece = word[start:end] if start == 0 else CONTINUATION + word[start:end]
                    if piece in self.vocab:
                        match = piece
                        break
                    end -= 1
                if match is None:
                    pieces = [(UNK, 0, n)]
                    break
                pieces.append((match, start, end))
                start = end
        if len(self._cache) < 500_000:
            self._cache[word] = pieces
        return pieces

    def tokenize_with_offsets(self, text: str) -> tuple[list[int], list[str], list[tuple[int, int]]]:
        """Token ids, token strings and each token's (start, end) span in ``text``."""
        ids: list[int] = []
        tokens: list[str] = []
        offsets: list[tuple[int, int]] = []
        vocab = self.vocab
        for word, index in self.basic_tokens(text):
            for piece, start, end in self.wordpieces(word):
                ids.append(vocab[piece])
                tokens.append(piece)
                if isinstance(index, int):
                    offsets.append((index + start, index + end))
                else:
                    offsets.append((index[start], index[end - 1] + 1))
        return ids, tokens, offsets

    def tokenize(self, text: str) -> list[str]:
        return self.tokenize_with_offsets(text)[1]

    def encode(self, text: str) -> list[int]:
        return self.tokenize_with_offsets(text)[0]


def _aligned_lower(word: str, lowered: str, index: list[int]) -> list[tuple[str, int]]:
    """(character of ``lowered``, original index) when ``word.lower()`` changed the length. Per-character
    ``lower()`` gives the same characters except for the context-dependent capital sigma (final or not), which is
    taken from the whole-word result at the same position."""
    out: list[tuple[str, int]] = []
    pos = 0
    for ch, i in zip(word, index):
        low = lowered[pos : pos + 1] if ch == "\u03a3" else ch.lower()
        out.extend((c, i) for c in low)
        pos += len(low)
    return out


def vocab_is_uncased(vocab: dict[str, int]) -> bool:
    """True when no entry but the bracketed specials ([CLS], [unused0], ...) has an upper-case letter."""
    for token in vocab:
        if token.startswith("[") and token.endswith("]"):
            continue
        if token != token.lower():
            return False
    return True


def load_vocab(path: str | os.PathLike[str]) -> dict[str, int]:
    """``vocab.txt``: one token per line, the id is the line number (0-based); surrounding whitespace is ignored."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: no such vocabulary file") from None
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); is it a WordPiece vocab.txt?") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read the vocabulary ({' '.join(str(e).split())})") from None
    vocab: dict[str, int] = {}
    for i, line in enumerate(text.split("\n")):
        token = line.strip()
        if token:
            vocab[token] = i
    if not vocab:
        raise DataError(f"{path}: the vocabulary is empty")
    return vocab
