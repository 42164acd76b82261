"""A tolerant reader and strict validator of DAWNBench v1 submissions (JSON, plus a TSV for training).

Tolerated, because the competition's real files do it: a UTF-8 byte-order mark, CRLF line ends, cells separated
by tabs and stray spaces, trailing blank lines, columns in any order (``hours`` before ``epoch``, ``f1Score``
before ``hours``), ``timestamp`` without zero padding (``2019-7-22``), ``costPerHour``/``cost``/``codeURL``
missing or null, ``misc`` as an object or a string, accuracies in percent (CIFAR-10, ImageNet) or as a fraction
(SQuAD's F1; one SQuAD inference file writes F1 in percent).

Refused, each with one line naming the field or TSV line: invalid JSON (duplicate keys and numbers beyond
the bounds included), a missing or null required field (``author`` too, as DAWNBench requires), a bad
timestamp (before 2017 or after tomorrow), an unknown or missing TSV column, a cell that is not a number,
``hours`` not increasing, a TSV that never reaches the task's target (or reaches it in less than 10 ms), an
inference accuracy below it, values out of range, a price below any real machine's (``costPerHour``, and an
inference ``cost`` per example for its latency: daybreak.leaderboard.ingest.plausibility), over-long strings, invisible
characters (daybreak.leaderboard.ingest.text_rules) and files over the size limits.

Units are normalized explicitly: an accuracy column (or value) whose values all lie in 0..1 is a fraction, one
with a value above 1 is percent (at most 100); the leaderboard stores fractions and records which unit the file
used in the entry's notes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daybreak.leaderboard.ingest.submission import (
    FORMAT_DAWNBENCH, KIND_INFERENCE, KIND_TRAIN, MAX_QUANTITY, MAX_TSV_ROWS, Submission,
    SubmissionError,
    accuracy_value, decode_text, number_field, one_line, parse_timestamp, reaches, text_field,
)
from daybreak.leaderboard.ingest.plausibility import MIN_CLOCK_S, check_price, check_price_per_example
from daybreak.leaderboard.ingest.systems import apply as apply_system
from daybreak.leaderboard.ingest.systems import from_dawnbench
from daybreak.leaderboard.tasks import LeaderboardTask, leaderboard_task, task_from_label, task_names

# DAWNBench's submission format requires these (every one of the competition's 118 JSON files has them, none
# null or empty); a null is refused like a missing field.
REQUIRED_TEXT = ("model", "hardware", "framework", "author")
OPTIONAL_TEXT = ("authorEmail", "codeURL", "commitHash")
_VERSION = re.compile(r"^v?1(\.\d+){0,2}$", re.ASCII)

# TSV columns by canonical name (lower case, letters and digits only) -> the name DAWNBench spells.
COLUMNS = {
    "epoch": "epoch",
    "hours": "hours",
    "top1accuracy": "top1Accuracy",
    "top5accuracy": "top5Accuracy",
    "f1score": "f1Score",
    "exactmatch": "exactMatch",
}
_ALIASES = {"epochs": "epoch", "top1": "top1accuracy", "top5": "top5accuracy", "f1": "f1score", "em": "exactmatch"}
ACCURACY_COLUMNS = ("top1accuracy", "top5accuracy", "f1score", "exactmatch")
_CELL = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$", re.ASCII)


@dataclass
class TsvTable:
    columns: list[str]  # canonical names, in file order
    rows: list[list[float]]
    lines: list[int]  # the file line number of each row

    def column(self, name: str) -> list[float]:
        i = self.columns.index(name)
        return [r[i] for r in self.rows]


def _canonical_column(name: str) -> str:
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    return _ALIASES.get(key, key)


def parse_tsv(data: bytes, what: str) -> TsvTable:
    """Read a DAWNBench TSV: a header naming the columns, then one numeric row per evaluation."""
    text = decode_text(data, what)
    header: list[str] | None = None
    rows: list[list[float]] = []
    lines: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = line.split()  # tabs, with or without stray spaces around them
        if header is None:
            if all(_CELL.match(c) for c in cells):
                raise SubmissionError(f"{what}: line {number}: expected a header (epoch, hours, top1Accuracy, ...), "
                                      "found numbers")
            # one pass, stopping at the first unknown or repeated column: a header has at most len(COLUMNS)
            # cells, however long the line (a 1 MiB header costs one split, not a quadratic search)
            header = []
            for raw in cells:
                canon = _canonical_column(raw[:40])
                if canon not in COLUMNS or len(raw) > 40:
                    raise SubmissionError(f"{what}: line {number}: unknown column {one_line(raw, 40)!r} "
                                          f"(known: {', '.join(COLUMNS.values())})")
                if canon in header:
                    raise SubmissionError(f"{what}: line {number}: column {COLUMNS[canon]!r} appears twice")
                header.append(canon)
            if "hours" not in header:
                raise SubmissionError(f"{what}: line {number}: no 'hours' column (columns: "
                                      f"{', '.join(COLUMNS[c] for c in header)})")
            continue
        if len(cells) != len(header):
            raise SubmissionError(f"{what}: line {number}: {len(cells)} cells, expected {len(header)} "
                                  f"({', '.join(COLUMNS[c] for c in header)})")
        row = []
        for name, cell in zip(header, cells):
            if not _CELL.match(cell):
                raise SubmissionError(f"{what}: line {number}: {COLUMNS[name]} {one_line(cell, 30)!r} is not a number")
            value = float(cell)
            if value != value or value in (float("inf"), float("-inf")):
                raise SubmissionError(f"{what}: line {number}: {COLUMNS[name]} {cell!r} is not finite")
            row.append(value)
        rows.append(row)
        lines.append(number)
        if len(rows) > MAX_TSV_ROWS:
            raise SubmissionError(f"{what}: more than {MAX_TSV_ROWS:,} rows")
    if header is None:
        raise SubmissionError(f"{what}: empty file, expected a header and one row per evaluation")
    if not rows:
        raise SubmissionError(f"{what}: no rows after the header")
    table = TsvTable(header, rows, lines)
    _check_rows(table, what)
    return table


def _check_rows(table: TsvTable, what: str) -> None:
    hours = table.column("hours")
    for i, h in enumerate(hours):
        line = table.lines[i]
        if h < 0:
            raise SubmissionError(f"{what}: line {line}: hours {h:g} is negative")
        if h > MAX_QUANTITY:
            raise SubmissionError(f"{what}: line {line}: hours {h:g} is out of range (at most {MAX_QUANTITY:g})")
        if i and h <= hours[i - 1]:
            raise SubmissionError(f"{what}: line {line}: hours {h:g} is not after the previous row's {hours[i - 1]:g} "
                                  "(hours must increase)")
    if "epoch" in table.columns:
        epochs = table.column("epoch")
        for i, e in enumerate(epochs):
            if e < 0:
                raise SubmissionError(f"{what}: line {table.lines[i]}: epoch {e:g} is negative")
            if i and e < epochs[i - 1]:
                raise SubmissionError(f"{what}: line {table.lines[i]}: epoch {e:g} is before the previous row's "
                                      f"{epochs[i - 1]:g}")
    for name in table.columns:
        if name in ACCURACY_COLUMNS:
            for i, v in enumerate(table.column(name)):
                if v < 0 or v > 100:
                    raise SubmissionError(f"{what}: line {table.lines[i]}: {COLUMNS[name]} {v:g} is out of range "
                                          "(0-100 percent or 0-1 fraction)")


def column_unit(values: list[float]) -> str:
    """A column whose values all lie in 0..1 is a fraction; one with any value above 1 is percent."""
    return "fraction" if max(values) <= 1.0 else "percent"


def task_from_path(path: Path | None) -> str | None:
    """The task named by the nearest folder such as CIFAR10/, ImageNet/, SQuAD/ (DAWNBench's layout)."""
    if path is None:
        return None
    for part in reversed(path.parts[:-1]):
        task = task_from_label(part)
        if task:
            return task
    return None


def resolve_task(doc: dict[str, Any], task: str | None, path: Path | None, what: str) -> LeaderboardTask:
    """--task / the form's task > misc.daybreakTask (daybreak's own DAWNBench JSON) > the folder it sits in. An MLPerf
    benchmark's board takes MLPerf results only (`daybreak leaderboard import-mlperf`)."""
    found = _named_task(doc, task, path, what)
    if found.clock_rules == "mlperf":
        raise SubmissionError(f"{what}: {found.name} is an MLPerf benchmark's board: it takes MLPerf results only "
                              "(`daybreak leaderboard import-mlperf DIR`), not DAWNBench files")
    return found


def _named_task(doc: dict[str, Any], task: str | None, path: Path | None, what: str) -> LeaderboardTask:
    known = ", ".join(t for t in task_names() if leaderboard_task(t).clock_rules != "mlperf")
    misc = doc.get("misc")
    stated = misc.get("daybreakTask") if isinstance(misc, dict) else None
    if stated is not None and (not isinstance(stated, str) or stated not in task_names()):
        raise SubmissionError(f"{what}: misc.daybreakTask {one_line(str(stated), 40)!r} is not a leaderboard task "
                              f"({known})")
    if task is not None:
        if task not in task_names():
            raise SubmissionError(f"{what}: unknown task {one_line(task, 40)!r} (known: {known})")
        if stated and stated != task:
            raise SubmissionError(f"{what}: task {task!r} was given but misc.daybreakTask says {stated!r}")
        return leaderboard_task(task)
    if stated:
        return leaderboard_task(stated)
    found = task_from_path(path)
    if found:
        return leaderboard_task(found)
    raise SubmissionError(f"{what}: cannot tell the task: put the file under a CIFAR10/, ImageNet/ or SQuAD/ folder "
                          f"or name it (--task / misc.daybreakTask; known: {known})")


def _metadata(doc: dict[str, Any], what: str) -> dict[str, str]:
    version = doc.get("version")
    if version is not None and not (isinstance(version, str) and _VERSION.match(version.strip())):
        raise SubmissionError(f"{what}: 'version' {one_line(str(version), 20)!r} is not DAWNBench v1 (expected 'v1.0')")
    out = {key: text_field(doc, key, what, required=True) for key in REQUIRED_TEXT}
    out.update({key: text_field(doc, key, what, required=False) for key in OPTIONAL_TEXT})
    misc = doc.get("misc")
    if misc is not None and not isinstance(misc, (dict, str, list)):
        raise SubmissionError(f"{what}: 'misc' must be an object or a string, not {type(misc).__name__}")
    return out


def parse_dawnbench(doc: Any, tsv: bytes | None, *, source: str, task: str | None = None,
                    path: Path | None = None, what: str | None = None, tsv_what: str | None = None) -> Submission:
    """Validate one DAWNBench v1 submission: ``doc`` the parsed JSON, ``tsv`` the TSV bytes (training) or None.

    Training when a TSV comes with it, inference when the JSON has ``latency`` and no TSV.
    """
    what = what or source
    if not isinstance(doc, dict):
        raise SubmissionError(f"{what}: expected a JSON object, found {type(doc).__name__}")
    meta = _metadata(doc, what)
    lb_task = resolve_task(doc, task, path, what)
    misc = doc.get("misc")
    if isinstance(misc, dict) and "daybreakTask" in misc:  # written by daybreak: its own flags count too
        if misc.get("official") is False:
            raise SubmissionError(f"{what}: unofficial daybreak run (misc.official is false); the leaderboard takes "
                                  "official runs only")
        if misc.get("valid") is False:
            raise SubmissionError(f"{what}: daybreak marked this measurement not valid (misc.valid is false)")
    if "timestamp" not in doc:
        raise SubmissionError(f"{what}: required field 'timestamp' is missing (YYYY-MM-DD)")
    submitted = parse_timestamp(doc["timestamp"], what)
    common = dict(
        task=lb_task.name, source_format=FORMAT_DAWNBENCH, source=source, model=meta["model"],
        hardware=meta["hardware"], framework=meta["framework"], submitted_at=submitted, metric=lb_task.metric,
        target=lb_task.target, document=doc, author=meta["author"], author_email=meta["authorEmail"],
        code_url=meta["codeURL"],
    )
    if tsv is not None:
        return _training(doc, tsv, lb_task, common, what, tsv_what or f"{what} (TSV)")
    if "latency" in doc:
        return _inference(doc, lb_task, common, what)
    raise SubmissionError(f"{what}: neither training (no TSV with it: the .tsv of the same name) nor inference "
                          "(no 'latency' field)")


def _target_text(task: LeaderboardTask) -> str:
    return f"F1 {task.target:g}" if task.metric == "f1" else f"{task.target * 100:g}% {task.metric}"


def _value_text(task: LeaderboardTask, accuracy: float) -> str:
    return f"F1 {accuracy:.4f}" if task.metric == "f1" else f"{accuracy * 100:.2f}%"


def _training(doc: dict[str, Any], tsv: bytes, task: LeaderboardTask, common: dict[str, Any], what: str,
              tsv_what: str) -> Submission:
    table = parse_tsv(tsv, tsv_what)
    column = _canonical_column(task.dawnbench_field)
    if column not in table.columns:
        raise SubmissionError(f"{tsv_what}: no {task.dawnbench_field} column (columns: "
                              f"{', '.join(COLUMNS[c] for c in table.columns)}); {task.name} is ranked on "
                              f"{task.metric_label}")
    raw = table.column(column)
    unit = column_unit(raw)
    scale = 100.0 if unit == "percent" else 1.0
    accuracies = [v / scale for v in raw]
    hours = table.column("hours")
    epochs = table.column("epoch") if "epoch" in table.columns else [None] * len(hours)
    first = next((i for i, a in enumerate(accuracies) if reaches(a, task.target)), None)
    if first is None:
        raise SubmissionError(f"{tsv_what}: never reaches the target {_target_text(task)} "
                              f"(best {_value_text(task, max(accuracies))})")
    cost_per_hour = number_field(doc, "costPerHour", what, required=False)
    check_price(cost_per_hour, what, "'costPerHour'")
    time_s = hours[first] * 3600.0
    if time_s < MIN_CLOCK_S:
        raise SubmissionError(f"{tsv_what}: line {table.lines[first]}: a time-to-target of {hours[first]:g} hours "
                              f"is impossibly small (at least {MIN_CLOCK_S:g} s: DAWNBench's clock includes loading "
                              "the data and building the model)")
    notes = [f"{task.dawnbench_field} read as {unit}",
             f"target reached at TSV line {table.lines[first]} ({hours[first]:g} hours)"]
    if cost_per_hour is None:
        notes.append("no costPerHour: not ranked on train-cost")
    sub = Submission(
        kind=KIND_TRAIN, accuracy=accuracies[first], accuracy_unit=unit, time_to_target_s=time_s,
        epochs_to_target=epochs[first], cost_per_hour=cost_per_hour,
        train_cost_usd=None if cost_per_hour is None else hours[first] * cost_per_hour,
        curve=[(h, a, e) for h, a, e in zip(hours, accuracies, epochs)],
        tsv_columns=[COLUMNS[c] for c in table.columns], notes=notes, **common,
    )
    apply_system(sub, from_dawnbench(sub.hardware, sub.framework))
    return sub.finish({"document": doc, "tsv": {"columns": table.columns, "rows": table.rows}})


def _inference(doc: dict[str, Any], task: LeaderboardTask, common: dict[str, Any], what: str) -> Submission:
    latency = number_field(doc, "latency", what, required=True)
    cost = number_field(doc, "cost", what, required=False)
    check_price_per_example(cost, latency, what, "'cost'")
    field_name = task.dawnbench_field
    if doc.get(field_name) is None:
        others = [k for k in ("top1Accuracy", "top5Accuracy", "f1Score") if k in doc and k != field_name]
        hint = f" (it has {others[0]!r}: is it really a {task.name} submission?)" if others else ""
        state = "null" if field_name in doc else "missing"
        raise SubmissionError(f"{what}: required field {field_name!r} is {state}{hint}")
    accuracy, unit = accuracy_value(doc[field_name], f"{what}: {field_name!r}")
    if not reaches(accuracy, task.target):
        raise SubmissionError(f"{what}: {field_name} {_value_text(task, accuracy)} is below the target "
                              f"{_target_text(task)}")
    notes = [f"{field_name} read as {unit}"]
    if cost is None:
        notes.append("no cost: not ranked on inference-cost")
    sub = Submission(
        kind=KIND_INFERENCE, accuracy=accuracy, accuracy_unit=unit, latency_ms=latency, cost_per_example_usd=cost,
        inference_cost_10k_usd=None if cost is None else cost * 10_000, notes=notes, **common,
    )
    apply_system(sub, from_dawnbench(sub.hardware, sub.framework))
    return sub.finish({"document": doc})
