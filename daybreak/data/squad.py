"""SQuAD v1.1: the official train/dev JSON, WordPiece features in windows, span answers scored by EM/F1.

Files, in the task folder (``--data-dir D``, default ``$DAYBREAK_DATA/squad``)::

    D/train-v1.1.json   official, SHA-256 3527663986b8...fd955 (30,288,272 bytes); downloaded when missing
    D/dev-v1.1.json     official, SHA-256 95aa6a52d5d6...972c9 (4,854,279 bytes); downloaded when missing
    D/vocab.txt         the WordPiece vocabulary of the BERT you fine-tune (never downloaded: it belongs to the
                        model; use the vocab.txt that came with the checkpoint)

The two JSON files are checked against their published SHA-256 like every other task's files: other bytes are
refused unless ``--allow-custom-data`` (the run is then recorded ``official: false``). The vocabulary is not part
of the dataset; its SHA-256 is recorded in the run's data notes.

Validation: malformed JSON or a missing key is a one-line DataError naming the file and the place
(``data[3].paragraphs[0].qas[7]``). An answer whose ``answer_start`` is out of range or does not point at its
``text`` is counted, not fatal: a training question whose first answer is such is skipped (there is no span to
learn); a dev question is kept (the evaluation compares texts; only the warm-up target uses the offsets). The counts
go into the run's data notes.

Features (BERT's SQuAD recipe): ``[CLS] question [SEP] context window [SEP]`` padded to ``max_seq_len``; the
question is cut to ``max_query_len`` tokens; a context longer than a window is split into windows whose starts are
``doc_stride`` tokens apart. A feature is a row ``(3, L)`` of input ids, token types (0 question, 1 context) and the
attention mask. The training target is the (start, end) token position of the first answer in the window, or
(0, 0) (the [CLS] token) when the answer is not wholly inside it. Tokenization is done once, when the data is
loaded (dataset preprocessing: outside the training clock, like decoding images); windows are cut when a recipe
sets their sizes.

Prediction: for each window, the ``n_best`` highest start and end logits are paired; a pair is valid when both
tokens are context tokens, the start token has its maximum context in this window (BERT's rule for tokens that
appear in several windows), end >= start and the span has at most ``max_answer_len`` tokens. The valid pair with
the highest start + end logit over all windows of a question is its answer: the context characters from the
start token's first to the end token's last character. No valid pair gives the empty answer.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
from torch import nn

from daybreak.data.base import TaskData, task_data_dir
from daybreak.data.download import OfficialFile, ensure_files, one_line
from daybreak.data.wordpiece import WordPieceTokenizer
from daybreak.errors import ConfigError, DataError
from daybreak.data.squad_eval import score_answer

TASK = "squad"
TRAIN_FILE = "train-v1.1.json"
DEV_FILE = "dev-v1.1.json"
VOCAB_FILE = "vocab.txt"
BASE_URL = "https://rajpurkar.github.io/SQuAD-explorer/dataset/"
# Published SHA-256 of the official files (the same values are pinned by many projects that fetch them).
TRAIN_SHA256 = "3527663986b8295af4f7fcdff1ba1ff3f72d07d61a20f487cb238a6ef92fd955"  # 30,288,272 bytes
DEV_SHA256 = "95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9"  # 4,854,279 bytes
OFFICIAL_FILES = (
    OfficialFile(TRAIN_FILE, TRAIN_SHA256, urls=(BASE_URL + TRAIN_FILE,)),
    OfficialFile(DEV_FILE, DEV_SHA256, urls=(BASE_URL + DEV_FILE,)),
)

DEFAULT_MAX_SEQ_LEN = 384
DEFAULT_DOC_STRIDE = 128
DEFAULT_MAX_QUERY_LEN = 64
DEFAULT_MAX_ANSWER_LEN = 30
DEFAULT_N_BEST = 20


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


# --- windows -> features ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowConfig:
    max_seq_len: int = DEFAULT_MAX_SEQ_LEN
    doc_stride: int = DEFAULT_DOC_STRIDE
    max_query_len: int = DEFAULT_MAX_QUERY_LEN

    def check(self) -> "WindowConfig":
        if self.max_query_len < 1 or self.doc_stride < 1:
            raise ConfigError(f"max_query_len={self.max_query_len}, doc_stride={self.doc_stride}: must be >= 1")
        if self.max_seq_len < self.max_query_len + 4:
            raise ConfigError(f"max_seq_len={self.max_seq_len} leaves no room for context after a question of "
                              f"max_query_len={self.max_query_len} tokens and [CLS] [SEP] [SEP]")
        return self


@dataclass
class Features:
    """One row per window. ``x`` (N, 3, L): input ids, token types, attention mask."""

    x: torch.Tensor
    y: torch.Tensor  # (N, 2) int64 start/end positions of the first answer, (0, 0) when not in the window
    question: torch.Tensor  # (N,) int64 index of the question
    # For prediction only (None for training features): (N, L, 2) int32 character span of each context token in
    # the context, -1 elsewhere; (N, L) bool: the token has its maximum context in this window.
    offsets: torch.Tensor | None = None
    max_context: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.x)


def _windows(n_context: int, max_doc: int, stride: int) -> list[tuple[int, int]]:
    out, start = [], 0
    while True:
        length = min(n_context - start, max_doc)
        out.append((start, length))
        if start + length >= n_context:
            return out
        start += min(length, stride)


def featurize(split: SquadSplit, tokenizer: WordPieceTokenizer, config: WindowConfig, *,
              dtype: torch.dtype = torch.int64, spans: bool = True) -> Features:
    """Cut every question's context into windows; one feature row per window (see the module doc). ``spans``:
    also the token offsets and max-context flags that prediction needs."""
    config.check()
    L = config.max_seq_len
    plans: list[tuple[int, np.ndarray, list[tuple[int, int]]]] = []
    for qi, question in enumerate(split.questions):
        assert question.ids is not None, "tokenize_split first"
        q_ids = question.ids[: config.max_query_len]
        n_context = len(split.paragraphs[question.paragraph].ids)  # type: ignore[arg-type]
        plans.append((qi, q_ids, _windows(n_context, L - len(q_ids) - 3, config.doc_stride)))
    n = sum(len(w) for _, _, w in plans)
    x = np.zeros((n, 3, L), dtype=np.int32)
    x[:, 0, :] = tokenizer.pad_id
    y = np.zeros((n, 2), dtype=np.int64)
    owner = np.zeros(n, dtype=np.int64)
    offsets = np.full((n if spans else 0, L, 2), -1, dtype=np.int32)
    max_context = np.zeros((n if spans else 0, L), dtype=bool)
    row = 0
    for qi, q_ids, windows in plans:
        question = split.questions[qi]
        paragraph = split.paragraphs[question.paragraph]
        ctx_ids, ctx_offsets = paragraph.ids, paragraph.offsets
        answer = answer_token_span(paragraph, question.answer_span)
        best_window = _max_context_windows(len(ctx_ids), windows) if spans else None  # type: ignore[arg-type]
        q = len(q_ids)
        p0 = q + 2  # position of the first context token
        for k, (ws, wl) in enumerate(windows):
            ids = x[row, 0]
            ids[0] = tokenizer.cls_id
            ids[1 : 1 + q] = q_ids
            ids[1 + q] = tokenizer.sep_id
            ids[p0 : p0 + wl] = ctx_ids[ws : ws + wl]  # type: ignore[index]
            ids[p0 + wl] = tokenizer.sep_id
            x[row, 1, p0 : p0 + wl + 1] = 1
            x[row, 2, : p0 + wl + 1] = 1
            if best_window is not None:
                offsets[row, p0 : p0 + wl] = ctx_offsets[ws : ws + wl]  # type: ignore[index]
                max_context[row, p0 : p0 + wl] = best_window[ws : ws + wl] == k
            if answer is not None and ws <= answer[0] and answer[1] < ws + wl:
                y[row] = (p0 + answer[0] - ws, p0 + answer[1] - ws)
            owner[row] = qi
            row += 1
    return Features(x=torch.from_numpy(x).to(dtype), y=torch.from_numpy(y), question=torch.from_numpy(owner),
                    offsets=torch.from_numpy(offsets) if spans else None,
                    max_context=torch.from_numpy(max_context) if spans else None)


def _max_context_windows(n_context: int, windows: list[tuple[int, int]]) -> np.ndarray:
    """For each context token, the window where it has the most context: max of min(left, right) + 0.01 x length
    (the first such window on ties)."""
    best_score = np.full(n_context, -np.inf)
    best = np.full(n_context, -1, dtype=np.int64)
    for k, (ws, wl) in enumerate(windows):
        d = np.arange(ws, ws + wl)
        score = np.minimum(d - ws, ws + wl - 1 - d) + 0.01 * wl
        better = score > best_score[ws : ws + wl]
        best_score[ws : ws + wl] = np.where(better, score, best_score[ws : ws + wl])
        best[ws : ws + wl] = np.where(better, k, best[ws : ws + wl])
    return best


# --- predictions --------------------------------------------------------------------------------------------------


def best_spans(logits: torch.Tensor, valid_start: torch.Tensor, valid_end: torch.Tensor, *, n_best: int,
               max_answer_len: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per feature: (score, start, end) of the best valid pair among the n_best start x n_best end logits.

    ``logits`` (N, L, 2); ``valid_start``/``valid_end`` (N, L) bool. Score is -inf where no pair is valid.
    """
    start_logits, end_logits = logits[..., 0].float(), logits[..., 1].float()
    k = min(n_best, start_logits.shape[1])
    s_val, s_idx = start_logits.topk(k, dim=1)
    e_val, e_idx = end_logits.topk(k, dim=1)
    ok = valid_start.gather(1, s_idx)[:, :, None] & valid_end.gather(1, e_idx)[:, None, :]
    length = e_idx[:, None, :] - s_idx[:, :, None]
    ok &= (length >= 0) & (length < max_answer_len)
    score = (s_val[:, :, None] + e_val[:, None, :]).masked_fill(~ok, float("-inf"))
    best, flat = score.flatten(1).max(dim=1)
    rows = torch.arange(len(flat), device=flat.device)
    return best, s_idx[rows, flat // k], e_idx[rows, flat % k]


@dataclass
class SpanSettings:
    n_best: int = DEFAULT_N_BEST
    max_answer_len: int = DEFAULT_MAX_ANSWER_LEN


def answers_from_spans(split: SquadSplit, features: Features, rows: torch.Tensor, score: torch.Tensor,
                       start: torch.Tensor, end: torch.Tensor) -> dict[int, str]:
    """Question index -> answer text from the best span of each feature row (``rows``: their indices in
    ``features``). Questions whose rows have no valid span answer ""."""
    assert features.offsets is not None, "features made with spans=True"
    score, start, end, rows = (t.cpu() for t in (score, start, end, rows))
    owners = features.question[rows].tolist()
    best: dict[int, tuple[float, int, int, int]] = {}
    for owner, row, s, a, b in zip(owners, rows.tolist(), score.tolist(), start.tolist(), end.tolist()):
        if owner not in best or s > best[owner][0]:
            best[owner] = (s, row, a, b)
    answers: dict[int, str] = {}
    for owner, (s, row, a, b) in best.items():
        if s == float("-inf"):
            answers[owner] = ""
            continue
        context = split.paragraphs[split.questions[owner].paragraph].context
        char_start = int(features.offsets[row, a, 0])
        char_end = int(features.offsets[row, b, 1])
        answers[owner] = context[char_start:char_end]
    return answers


def score_answers(split: SquadSplit, answers: dict[int, str], questions: list[int]) -> tuple[float, float]:
    """Sums of exact match and F1 (each 0..1 per question) over ``questions``; a missing answer scores 0."""
    em = f1 = 0.0
    for qi in questions:
        if qi in answers:
            e, f = score_answer(answers[qi], split.questions[qi].answers)
            em += e
            f1 += f
    return em, f1


# --- the task's data ----------------------------------------------------------------------------------------------


@dataclass
class SquadData(TaskData):
    """TaskData of SQuAD: ``eval_x`` / ``eval_y`` are the dev features of the current windows (one row per
    window: what ``daybreak infer`` times as one query), and the training features come from
    ``make_train_batches``. A recipe calls :meth:`configure` with its window sizes before using them."""

    tokenizer: WordPieceTokenizer | None = None
    train_split: SquadSplit | None = None
    dev_split: SquadSplit | None = None
    window: WindowConfig = field(default_factory=WindowConfig)
    spans: SpanSettings = field(default_factory=SpanSettings)
    eval_batch_size: int = 128
    _features: dict[tuple[str, WindowConfig], Features] = field(default_factory=dict, repr=False)

    def configure(self, *, max_seq_len: int = DEFAULT_MAX_SEQ_LEN, doc_stride: int = DEFAULT_DOC_STRIDE,
                  max_query_len: int = DEFAULT_MAX_QUERY_LEN, max_answer_len: int = DEFAULT_MAX_ANSWER_LEN,
                  n_best: int = DEFAULT_N_BEST, eval_batch_size: int | None = None) -> None:
        if max_answer_len < 1 or n_best < 1:
            raise ConfigError(f"max_answer_len={max_answer_len}, n_best={n_best}: must be >= 1")
        self.window = WindowConfig(max_seq_len, doc_stride, max_query_len).check()
        self._features = {k: v for k, v in self._features.items() if k[1] == self.window}  # free other windows
        self.spans = SpanSettings(n_best=n_best, max_answer_len=max_answer_len)
        if eval_batch_size is not None:
            self.eval_batch_size = max(int(eval_batch_size), 1)
        dev = self.dev_features()
        self.eval_x, self.eval_y = dev.x, dev.y

    def _cached(self, which: str, split: SquadSplit | None, dtype: torch.dtype, spans: bool) -> Features:
        if split is None or self.tokenizer is None:
            raise DataError(f"{TASK}: no {which} split loaded")
        key = (which, self.window)
        if key not in self._features:
            self._features[key] = featurize(split, self.tokenizer, self.window, dtype=dtype, spans=spans)
        return self._features[key]

    def train_features(self) -> Features:
        # int32 in memory (half of int64: ~0.4 GB for the 88k official questions); batches are cast to int64.
        return self._cached("train", self.train_split, torch.int32, spans=False)

    def dev_features(self) -> Features:
        return self._cached("dev", self.dev_split, torch.int64, spans=True)

    def train_size(self) -> int:
        """Training windows (what a per-device batch is capped by)."""
        return len(self.train_features())

    def example_train_batch(self, n: int, epoch: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """The first ``n`` training windows (repeated if there are fewer), as the training batches hold them
        (int32 (n, 3, L) features, (n, 2) start/end targets): for counting FLOPs and bytes of a step
        (``daybreak analyze roofline``). Every epoch has the same window length, so ``epoch`` changes nothing."""
        features = self.train_features()
        if len(features) == 0:
            raise DataError(f"{TASK}: the training split has no windows")
        rows = torch.arange(n) % len(features)
        return features.x[rows], features.y[rows]

    def predict_answers(self, logits: torch.Tensor) -> dict[str, str]:
        """Answer text per dev question id from the logits (N, L, 2) of every dev feature row, in order."""
        dev, split = self.dev_features(), self.dev_split
        assert split is not None
        answers = self._answers(logits, torch.arange(len(dev)))
        return {q.qid: answers.get(i, "") for i, q in enumerate(split.questions)}

    def _answers(self, logits: torch.Tensor, rows: torch.Tensor) -> dict[int, str]:
        dev = self.dev_features()
        assert self.dev_split is not None
        assert dev.offsets is not None and dev.max_context is not None
        valid_end = dev.offsets[rows, :, 0] >= 0
        valid_start = valid_end & dev.max_context[rows]
        score, start, end = best_spans(logits.cpu(), valid_start, valid_end, n_best=self.spans.n_best,
                                       max_answer_len=self.spans.max_answer_len)
        return answers_from_spans(self.dev_split, dev, rows, score, start, end)

    def score_predictions(self, raw_outputs: torch.Tensor) -> dict[str, float]:
        """EM and F1 (fractions) of the model outputs (N, L, 2) for every dev feature row, in eval_x order.

        The hook ``daybreak infer`` calls with the logits of its timed batch-1 queries."""
        dev, split = self.dev_features(), self.dev_split
        assert split is not None
        if raw_outputs.dim() != 3 or raw_outputs.shape[0] != len(dev) or raw_outputs.shape[-1] != 2:
            raise ValueError(f"expected start/end logits of shape ({len(dev)}, L, 2), got {tuple(raw_outputs.shape)}")
        answers = self._answers(raw_outputs, torch.arange(len(dev)))
        em, f1 = score_answers(split, answers, list(range(len(split.questions))))
        n = max(len(split.questions), 1)
        return {"f1": f1 / n, "exact_match": em / n}


# --- loading ------------------------------------------------------------------------------------------------------


def _vocab_note(path: Path, tokenizer: WordPieceTokenizer) -> str:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    case = "uncased (lower-casing, accents stripped)" if tokenizer.lower_case else "cased"
    return f"{VOCAB_FILE}: {len(tokenizer.vocab)} tokens, {case}, SHA-256 {digest}"


def folder_of_source(source: str) -> Path | None:
    """The folder to read again for a run whose ``data_source`` is ``source`` (the folder itself)."""
    return Path(source) if source else None


def load_squad(data_dir: str | os.PathLike | None, *, allow_custom_data: bool = False,
               download: bool = True) -> SquadData:
    """Read, validate and tokenize SQuAD v1.1 from ``data_dir`` (or the cache folder); see the module doc."""
    folder = task_data_dir(TASK, data_dir)
    vocab_path = folder / VOCAB_FILE
    if not vocab_path.is_file():
        raise DataError(
            f"{TASK}: {VOCAB_FILE} not found in {folder}; put the WordPiece vocabulary of the BERT you fine-tune "
            f"there (e.g. the vocab.txt of bert-base-uncased), beside {TRAIN_FILE} and {DEV_FILE}"
        )
    tokenizer = WordPieceTokenizer.from_file(vocab_path)
    found = ensure_files(TASK, folder, [(spec,) for spec in OFFICIAL_FILES], allow_custom_data=allow_custom_data,
                         download=download, wanted=f"{TRAIN_FILE} and {DEV_FILE}")
    train = read_squad_file(found.paths[0], training=True)
    dev = read_squad_file(found.paths[1], training=False)
    tokenize_split(train, tokenizer)
    tokenize_split(dev, tokenizer)
    notes = list(found.notes) + [n for n in (train.note(), dev.note()) if n] + [_vocab_note(vocab_path, tokenizer)]
    placeholder = torch.zeros((0, 3, DEFAULT_MAX_SEQ_LEN), dtype=torch.int64)
    data = SquadData(
        train_x=None, train_y=None, eval_x=placeholder, eval_y=torch.zeros((0, 2), dtype=torch.int64),
        num_classes=0, official=found.official, source=os.path.abspath(folder), notes=notes,
        tokenizer=tokenizer, train_split=train, dev_split=dev,
    )
    data.configure()  # BERT's default windows until a recipe sets its own
    return data
