"""What text the leaderboard takes, once, at the door: every string of a submitted document (keys included) is one
line of characters a reader can see, stored in Unicode's composed form (NFC); names are compared as a reader reads
them (:func:`fold`).

Refused, naming the field:

- control characters: C0 (tab and newline too), DEL, C1, and the line and paragraph separators (``CONTROL``);
- invisible characters: every Unicode format character (general category Cf: zero-width spaces and joiners, the
  byte-order mark U+FEFF, the soft hyphen U+00AD, the word joiner U+2060, the Mongolian vowel separator U+180E, the
  bidirectional marks, embeddings, overrides and isolates, the tag characters U+E0001 and U+E0020..U+E007F, ...),
  the fillers that render as nothing (Hangul fillers U+115F, U+1160, U+3164, U+FFA0, the Braille blank U+2800, the
  combining grapheme joiner U+034F, the Khmer inherent vowels U+17B4/U+17B5, the Mongolian free variation selectors)
  and the rest of the tag block (U+E0000..U+E007F). Seven "xy"s that look alike, or eight "Alice"s, are then one.

Variation selectors (U+FE00..U+FE0F) stay: emoji need them.

Normalised: NFC, so that "Café" typed with a composed é and with e + U+0301 is the same text, the same content hash
and the same name. Compared (filters and groupings: framework, accelerator, author, ...): :func:`fold`, NFKC with
case folding and whitespace collapsed, so that "ＰｙＴｏｒｃｈ", "pytorch" and "PyTorch" are one framework.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Any

# Control characters (C0 with tab and newline, DEL, C1), the line and paragraph separators, and the invisible
# bidirectional formatting characters (marks, embeddings, overrides, isolates) that reorder text.
CONTROL_CHARACTERS = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
FILLERS = "\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\u2800\u3164\uffa0"
TAGS = "\U000e0000-\U000e007f"
_CONTROL = re.compile(f"[{CONTROL_CHARACTERS}]")
CONTROL_RULE = ("contains control characters ({}): text is one line of visible characters (no control or "
                "bidirectional formatting characters)")
INVISIBLE_RULE = ("contains an invisible character ({}): format characters (Unicode category Cf), fillers and tag "
                  "characters are refused, text shows what it says")


@lru_cache(maxsize=1)
def _format_characters() -> str:
    """Every code point of general category Cf, as regex class ranges (planes 0, 1 and 14 hold them all)."""
    out: list[tuple[int, int]] = []
    start: int | None = None
    last = -1
    for cp in (*range(0x20000), *range(0xE0000, 0xF0000)):
        if unicodedata.category(chr(cp)) == "Cf":
            if start is None or cp != last + 1:
                if start is not None:
                    out.append((start, last))
                start = cp
            last = cp
    if start is not None:
        out.append((start, last))
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in out)


@lru_cache(maxsize=1)
def invisible_re() -> re.Pattern[str]:
    """Everything refused in text: control characters, format characters, fillers, tags."""
    return re.compile(f"[{CONTROL_CHARACTERS}{_format_characters()}{FILLERS}{TAGS}]")


@lru_cache(maxsize=1)
def _unprintable_re() -> re.Pattern[str]:
    return re.compile(f"[{CONTROL_CHARACTERS}{_format_characters()}{FILLERS}{TAGS}\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with every control, invisible or undecodable character written as an escape (``\\x1b``,
    ``\\u200b``, ``\\U000e0041``)."""
    def esc(m: re.Match[str]) -> str:
        c = ord(m.group(0))
        return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"

    return _unprintable_re().sub(esc, str(text))


def text_problem(text: str) -> str | None:
    """Why ``text`` is refused (the rule, with the first offending character as an escape and its name), or None."""
    found = _CONTROL.search(text)
    if found:
        return CONTROL_RULE.format(printable(found.group(0)))
    found = invisible_re().search(text)
    if found:
        char = found.group(0)
        name = unicodedata.name(char, "")
        return INVISIBLE_RULE.format(printable(char) + (f" {name}" if name else ""))
    return None


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def nfc_document(obj: Any) -> tuple[Any, str | None]:
    """``obj`` (a parsed JSON document) with every string and key in NFC -> (document, the first key that two keys
    of one object became, or None)."""
    if isinstance(obj, str):
        return nfc(obj), None
    if isinstance(obj, list):
        out_list = []
        for item in obj:
            value, clash = nfc_document(item)
            if clash is not None:
                return obj, clash
            out_list.append(value)
        return out_list, None
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for key, item in obj.items():
            k = nfc(key)
            if k in out:
                return obj, k
            value, clash = nfc_document(item)
            if clash is not None:
                return obj, clash
            out[k] = value
        return out, None
    return obj, None


def visible(text: str) -> str:
    """``text`` without the characters :func:`text_problem` refuses (for names from outside that are shown but
    not refused: an uploaded file's name), in NFC."""
    return nfc(invisible_re().sub("", text))


def fold(text: str | None) -> str:
    """The key two names are compared by: NFKC (full-width and compatibility forms to their plain ones), case folded,
    without invisible characters, whitespace runs as one space. ``""`` for None."""
    if not text:
        return ""
    plain = invisible_re().sub("", unicodedata.normalize("NFKC", str(text)))
    return " ".join(unicodedata.normalize("NFKC", plain.casefold()).split())
