"""SQuAD v1.1 JSON -> validated paragraphs and questions (one split), tokenized once (daybreak.data.squad).

Validation: malformed JSON or a missing key is a one-line DataError naming the file and the place
(``data[3].paragraphs[0].qas[7]``). An answer whose ``answer_start`` is out of range or does not point at its
``text`` is counted, not fatal: a training question whose first answer is such is skipped (there is no span to
learn); a dev question is kept (the evaluation compares texts; only the warm-up target uses the offsets). The counts
go into the run's data notes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from daybreak.data.wordpiece import WordPieceTokenizer
from daybreak.errors import DataError
from daybreak.text import one_line

TASK = "squad"


# --- reading the JSON --------------------------------------------------------------------------------------------


@dataclass
class Question:
    qid: str
    text: str
    paragraph: int  # index into the split's paragraphs
    answers: list[str]  # every ground-truth text (dev has up to ~3 per question)
    answer_span: tuple[int, int] | None  # characters [start, end) of the first answer, when its offset is right
    ids: np.ndarray | None = None  # question token ids (int32), set by tokenization


@dataclass
class Paragraph:
    context: str
    ids: np.ndarray | None = None  # context token ids (int32)
    offsets: np.ndarray | None = None  # (n, 2) int32 character span of each token in the context


@dataclass
class SquadSplit:
    name: str  # file name
    paragraphs: list[Paragraph]
    questions: list[Question]
    bad_offsets: int = 0  # answers whose answer_start does not point at their text (counted, see module doc)
    skipped: int = 0  # questions dropped for it (training only)

    def note(self) -> str | None:
        if not self.bad_offsets:
            return None
        what = f"{self.bad_offsets} answer(s) whose answer_start does not point at their text"
        if self.skipped:
            return f"{self.name}: {what}; {self.skipped} training question(s) skipped"
        return f"{self.name}: {what} (kept: the evaluation compares texts)"


def _where(*parts: object) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")


def parse_squad(obj: Any, name: str, *, training: bool) -> SquadSplit:
    """The ``data[].paragraphs[].qas[]`` structure of a v1.1 file -> paragraphs and questions (file order)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
        raise DataError(f"{TASK}: {name} is not a SQuAD file (no top-level 'data' list)")
    split = SquadSplit(name=name, paragraphs=[], questions=[])
    seen: set[str] = set()
    for a, article in enumerate(obj["data"]):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise DataError(f"{TASK}: {name}: {_where('data', a)} has no 'paragraphs' list")
        for p, paragraph in enumerate(paragraphs):
            here = _where("data", a, "paragraphs", p)
            if not isinstance(paragraph, dict) or not isinstance(paragraph.get("context"), str):
                raise DataError(f"{TASK}: {name}: {here} has no string 'context'")
            if not isinstance(paragraph.get("qas"), list):
                raise DataError(f"{TASK}: {name}: {here} has no 'qas' list")
            context = paragraph["context"]
            index = len(split.paragraphs)
            split.paragraphs.append(Paragraph(context))
            for q, qa in enumerate(paragraph["qas"]):
                where = f"{here}.qas[{q}]"
                if not isinstance(qa, dict):
                    raise DataError(f"{TASK}: {name}: {where} is not an object")
                for key, kind in (("id", str), ("question", str), ("answers", list)):
                    if not isinstance(qa.get(key), kind):
                        raise DataError(f"{TASK}: {name}: {where} has no {kind.__name__} '{key}'")
                if not qa["answers"]:
                    raise DataError(f"{TASK}: {name}: {where} (id {qa['id']}) has no answers; "
                                    "SQuAD v1.1 questions all have at least one")
                if qa["id"] in seen:
                    raise DataError(f"{TASK}: {name}: question id {qa['id']!r} appears twice ({where})")
                seen.add(qa["id"])
                texts: list[str] = []
                first_span: tuple[int, int] | None = None
                for k, answer in enumerate(qa["answers"]):
                    if not isinstance(answer, dict) or not isinstance(answer.get("text"), str):
                        raise DataError(f"{TASK}: {name}: {where}.answers[{k}] has no string 'text'")
                    start = answer.get("answer_start")
                    if isinstance(start, bool) or not isinstance(start, int):
                        raise DataError(f"{TASK}: {name}: {where}.answers[{k}] has no integer 'answer_start'")
                    text = answer["text"]
                    texts.append(text)
                    ok = 0 <= start and start + len(text) <= len(context) and text.strip() != "" \
                        and context[start:start + len(text)] == text
                    if not ok:
                        split.bad_offsets += 1
                    elif k == 0:
                        first_span = (start, start + len(text))
                if training and first_span is None:
                    split.skipped += 1
                    continue
                split.questions.append(Question(qa["id"], qa["question"], index, texts, first_span))
    if not split.questions:
        raise DataError(f"{TASK}: {name} has no usable questions")
    return split


def read_squad_file(path: Path, *, training: bool) -> SquadSplit:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{TASK}: {path} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise DataError(f"{TASK}: cannot read {path}: {one_line(e)}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{TASK}: {path} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    return parse_squad(obj, Path(path).name, training=training)


def tokenize_split(split: SquadSplit, tokenizer: WordPieceTokenizer) -> None:
    """Token ids and character offsets of every context (once per paragraph) and question, in place."""
    for paragraph in split.paragraphs:
        ids, _, offsets = tokenizer.tokenize_with_offsets(paragraph.context)
        paragraph.ids = np.asarray(ids, dtype=np.int32)
        paragraph.offsets = np.asarray(offsets, dtype=np.int32).reshape(-1, 2)
    for question in split.questions:
        question.ids = np.asarray(tokenizer.encode(question.text), dtype=np.int32)


def answer_token_span(paragraph: Paragraph, span: tuple[int, int] | None) -> tuple[int, int] | None:
    """Context token indices (first, last) covering the characters [start, end), or None if no token does."""
    if span is None or paragraph.offsets is None or len(paragraph.offsets) == 0:
        return None
    start, end = span
    first = int(np.searchsorted(paragraph.offsets[:, 1], start, side="right"))  # first token ending after start
    last = int(np.searchsorted(paragraph.offsets[:, 0], end, side="left")) - 1  # last token starting before end
    if first >= len(paragraph.offsets) or last < first:
        return None
    return first, last
