"""SQuAD v1.1: the official train/dev JSON, WordPiece features in windows, span answers scored by EM/F1.

Files, in the task folder (``--data-dir D``, default ``$DAYBREAK_DATA/squad``)::

    D/train-v1.1.json   official, SHA-256 3527663986b8...fd955 (30,288,272 bytes); downloaded when missing
    D/dev-v1.1.json     official, SHA-256 95aa6a52d5d6...972c9 (4,854,279 bytes); downloaded when missing
    D/vocab.txt         the WordPiece vocabulary of the BERT you fine-tune (never downloaded: it belongs to the
                        model; use the vocab.txt that came with the checkpoint)

The two JSON files are checked against their published SHA-256 like every other task's files: other bytes are
refused unless ``--allow-custom-data`` (the run is then recorded ``official: false``). The vocabulary is not part
of the dataset; its SHA-256 is recorded in the run's data notes.

Here: the files, :class:`SquadData` (the task's data) and :func:`load_squad`. Parsing and validating the JSON
is daybreak.data.squad_reader; the windows, feature rows and span answers, daybreak.data.squad_features.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from daybreak.data.base import TaskData, task_data_dir
from daybreak.data.download import OfficialFile, ensure_files
from daybreak.data.squad_features import (
    DEFAULT_DOC_STRIDE, DEFAULT_MAX_ANSWER_LEN, DEFAULT_MAX_QUERY_LEN, DEFAULT_N_BEST, Features,
    SpanSettings, WindowConfig, answers_from_spans, best_spans, featurize, score_answers,
)
from daybreak.data.squad_reader import TASK, SquadSplit, read_squad_file, tokenize_split
from daybreak.data.wordpiece import DEFAULT_MAX_SEQ_LEN, WordPieceTokenizer
from daybreak.errors import ConfigError, DataError

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


def load_squad(data_dir: str | os.PathLike[str] | None, *, allow_custom_data: bool = False,
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
