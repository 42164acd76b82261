"""SQuAD windows -> feature rows, and span answers from the model's logits on them (daybreak.data.squad).

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

from dataclasses import dataclass

import numpy as np
import torch

from daybreak.data.squad_eval import score_answer
from daybreak.data.squad_reader import SquadSplit, answer_token_span
from daybreak.data.wordpiece import DEFAULT_MAX_SEQ_LEN, WordPieceTokenizer
from daybreak.errors import ConfigError

DEFAULT_DOC_STRIDE = 128
DEFAULT_MAX_QUERY_LEN = 64
DEFAULT_MAX_ANSWER_LEN = 30
DEFAULT_N_BEST = 20


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
