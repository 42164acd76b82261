"""SQuAD v1.1 scoring: exact match and F1, computed the way the official v1.1 evaluation computes them.

The official rules, restated (this is an independent implementation of them):

- an answer is normalized by lower-casing it, deleting every character of ``string.punctuation``, replacing the
  articles "a", "an", "the" (as whole words) by a space, and folding all whitespace into single spaces;
- exact match: the normalized prediction equals the normalized ground truth;
- F1: over the whitespace tokens of the two normalized texts, with the overlap counted as a multiset
  (``Counter`` intersection); no common token gives 0;
- a question scores the maximum over its ground-truth answers;
- a question without a prediction scores 0 (and a line saying so goes to stderr);
- the scores are percentages: 100 x the sum over questions / the number of questions, summed in file order.

``evaluate_squad(dataset, predictions)`` returns ``{"exact_match": .., "f1": ..}`` in percent, as the official
script prints it; the runner's evaluator uses :func:`score_answer` and reports fractions (0..1).
"""

from __future__ import annotations

import json
import re
import string
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, TextIO

from daybreak.errors import DataError

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
EXPECTED_VERSION = "1.1"


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (the official order of the four steps)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match_score(prediction: str, ground_truth: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def f1_score(prediction: str, ground_truth: str) -> float:
    predicted = normalize_answer(prediction).split()
    truth = normalize_answer(ground_truth).split()
    overlap = sum((Counter(predicted) & Counter(truth)).values())
    if overlap == 0:
        return 0
    precision = 1.0 * overlap / len(predicted)
    recall = 1.0 * overlap / len(truth)
    return (2 * precision * recall) / (precision + recall)


def best_over_ground_truths(metric: Callable[[str, str], Any], prediction: str, ground_truths: Iterable[str]) -> Any:
    return max(metric(prediction, truth) for truth in ground_truths)


def score_answer(prediction: str, ground_truths: list[str]) -> tuple[float, float]:
    """(exact match 0/1, F1 0..1) of one prediction against a question's ground-truth answers."""
    return (float(best_over_ground_truths(exact_match_score, prediction, ground_truths)),
            float(best_over_ground_truths(f1_score, prediction, ground_truths)))


# --- the whole file ------------------------------------------------------------------------------------------


def _where(*parts: object) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")


def questions_of(dataset: Any, source: str = "dataset") -> list[tuple[str, list[str]]]:
    """(id, ground-truth answer texts) of every question of a v1.1 ``data`` list, in file order.

    One-line DataErrors for anything that is not the SQuAD layout ``data[].paragraphs[].qas[].answers[].text``.
    """
    if not isinstance(dataset, list):
        raise DataError(f"{source}: 'data' is a {type(dataset).__name__}, expected a list of articles")
    out: list[tuple[str, list[str]]] = []
    for a, article in enumerate(dataset):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise DataError(f"{source}: {_where('data', a)} has no 'paragraphs' list")
        for p, paragraph in enumerate(paragraphs):
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list):
                raise DataError(f"{source}: {_where('data', a, 'paragraphs', p)} has no 'qas' list")
            for q, qa in enumerate(qas):
                where = _where("data", a, "paragraphs", p, "qas", q)
                if not isinstance(qa, dict) or not isinstance(qa.get("id"), str):
                    raise DataError(f"{source}: {where} has no string 'id'")
                answers = qa.get("answers")
                if not isinstance(answers, list) or not answers:
                    raise DataError(f"{source}: {where} (id {qa['id']}) has no 'answers'; "
                                    "every SQuAD v1.1 question has at least one")
                texts = []
                for answer in answers:
                    if not isinstance(answer, dict) or not isinstance(answer.get("text"), str):
                        raise DataError(f"{source}: {where} (id {qa['id']}) has an answer without a string 'text'")
                    texts.append(answer["text"])
                out.append((qa["id"], texts))
    return out


def evaluate_squad(dataset: Any, predictions: dict[str, str], *, stderr: TextIO | None = None,
                   source: str = "dataset") -> dict[str, float]:
    """Official v1.1 scores in percent. ``dataset`` is the file's ``data`` list; ``predictions`` maps id -> text.

    Each question without a prediction scores 0 and, when ``stderr`` is given, gets the official message there.
    """
    questions = questions_of(dataset, source)
    if not questions:
        raise DataError(f"{source}: no questions to evaluate")
    exact_match = f1 = 0
    for qid, truths in questions:
        if qid not in predictions:
            if stderr is not None:
                print(f"Unanswered question {qid} will receive score 0.", file=stderr)
            continue
        prediction = predictions[qid]
        exact_match += best_over_ground_truths(exact_match_score, prediction, truths)
        f1 += best_over_ground_truths(f1_score, prediction, truths)
    total = len(questions)
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


def _read_json(path: Path, what: str) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: no such {what} file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: cannot read the {what} file ({' '.join(str(e).split())})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None


def evaluate_files(dataset_file: Path, prediction_file: Path, *, stderr: TextIO | None = sys.stderr) -> dict[str, float]:
    """``evaluate_squad`` on a v1.1 dataset file and a predictions file ({"question id": "answer text", ...})."""
    dataset_json = _read_json(dataset_file, "dataset")
    if not isinstance(dataset_json, dict) or "data" not in dataset_json:
        raise DataError(f"{dataset_file}: not a SQuAD dataset (no top-level 'data')")
    questions_of(dataset_json["data"], str(dataset_file))  # every error before any output
    predictions = _read_json(prediction_file, "predictions")
    if not isinstance(predictions, dict):
        raise DataError(f"{prediction_file}: expected a JSON object mapping question ids to answer texts")
    bad = next((k for k, v in predictions.items() if not isinstance(v, str)), None)
    if bad is not None:
        raise DataError(f"{prediction_file}: the prediction for {bad!r} is a {type(predictions[bad]).__name__}, "
                        "not a string")
    if dataset_json.get("version") != EXPECTED_VERSION and stderr is not None:
        print(f"Evaluation expects v-{EXPECTED_VERSION}, but got dataset with v-{dataset_json.get('version')}",
              file=stderr)
    return evaluate_squad(dataset_json["data"], predictions, stderr=stderr, source=str(dataset_file))
