"""`daybreak leaderboard import`: find submissions under the given paths, validate each, store the good ones.

A path may be a daybreak run directory (its result.json and inference.json are read, nothing else), a tree of
DAWNBench v1 files (``CIFAR10|ImageNet|SQuAD/train|inference/*.json`` with a ``.tsv`` beside each training
JSON), or single JSON files (a training JSON's TSV is the file of the same name ending ``.tsv``).
Every file found is accounted for: part of a stored (or already stored) entry, or reported with its reason.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from daybreak.leaderboard.dawnbench_import import parse_dawnbench
from daybreak.leaderboard.runs_import import parse_inference, parse_run
from daybreak.leaderboard.submission import (
    FORMAT_INFERENCE, FORMAT_RUN, MAX_FILE_BYTES, MAX_SOURCE_CHARS, Submission, SubmissionError, load_json, one_line,
)

RUN_FILES = ("result.json", "inference.json")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def parse_submission(json_bytes: bytes, tsv_bytes: bytes | None = None, *, source: str, task: str | None = None,
                     path: Path | None = None, what: str | None = None, tsv_what: str | None = None) -> Submission:
    """Any supported submission -> a validated Submission (or SubmissionError with a one-line reason)."""
    what = what or source
    source = _CONTROL.sub("", one_line(source, MAX_SOURCE_CHARS)).encode("utf-8", "replace").decode("utf-8")
    doc = load_json(json_bytes, what)
    kind = doc.get("kind") if isinstance(doc, dict) else None
    if kind in (FORMAT_RUN, FORMAT_INFERENCE):
        if tsv_bytes is not None:
            raise SubmissionError(f"{what}: a daybreak {kind} record takes no TSV (its history is inside)")
        if task is not None and doc.get("task") != task:
            raise SubmissionError(f"{what}: task {one_line(task, 40)!r} was given but the record is for "
                                  f"{one_line(str(doc.get('task')), 40)!r}")
        parse = parse_run if kind == FORMAT_RUN else parse_inference
        return parse(doc, source=source, what=what)
    if isinstance(kind, str) and kind.startswith("daybreak."):
        raise SubmissionError(f"{what}: a {one_line(kind, 40)!r} record is not a leaderboard submission "
                              "(expected daybreak.run or daybreak.inference)")
    return parse_dawnbench(doc, tsv_bytes, source=source, task=task, path=path, what=what, tsv_what=tsv_what)


@dataclass
class Found:
    json_path: Path
    tsv_path: Path | None
    source: str


@dataclass
class Outcome:
    path: str
    status: str  # "stored", "duplicate" or "skipped"
    reason: str = ""
    entry_id: int | None = None
    files: int = 1


@dataclass
class ImportReport:
    outcomes: list[Outcome] = field(default_factory=list)

    def _count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def stored(self) -> int:
        return self._count("stored")

    @property
    def duplicates(self) -> int:
        return self._count("duplicate")

    @property
    def skipped(self) -> int:
        return self._count("skipped")

    @property
    def files(self) -> int:
        return sum(o.files for o in self.outcomes)

    def problems(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "skipped"]

    def summary(self) -> str:
        return (f"{self.stored} stored, {self.duplicates} already stored, {self.skipped} skipped "
                f"({self.files} files)")

    def to_json(self) -> dict:
        return {
            "stored": self.stored, "duplicates": self.duplicates, "skipped": self.skipped, "files": self.files,
            "outcomes": [o.__dict__ for o in self.outcomes],
        }


def _source_key(path: Path, root: Path | None) -> str:
    """What the leaderboard shows as the entry's source: no local folders above the tree that was imported."""
    if root is not None:
        try:
            return "/".join((root.name, *path.relative_to(root).parts))
        except ValueError:
            pass
    return "/".join(path.resolve().parts[-3:])


def collect(paths: list[Path]) -> tuple[list[Found], list[Outcome]]:
    """Submissions under ``paths`` (sorted, each JSON once) and the files that cannot be one."""
    found: list[Found] = []
    problems: list[Outcome] = []
    seen: set[Path] = set()

    def add(json_path: Path, root: Path | None) -> None:
        key = json_path.resolve()
        if key in seen:
            return
        seen.add(key)
        tsv = json_path.with_suffix(".tsv")
        found.append(Found(json_path, tsv if json_path.name not in RUN_FILES and tsv.is_file() else None,
                           _source_key(json_path, root)))

    def run_dir(folder: Path, root: Path | None) -> bool:
        files = [folder / n for n in RUN_FILES if (folder / n).is_file()]
        for f in files:
            add(f, root)
        return bool(files)

    for path in paths:
        if not path.exists():
            problems.append(Outcome(str(path), "skipped", "no such file or directory", files=0))
        elif path.is_dir():
            if run_dir(path, path.parent):
                continue
            for folder, dirs, files in os.walk(path):
                dirs.sort()
                here = Path(folder)
                if run_dir(here, path):
                    dirs[:] = []
                    continue
                names = set(files)
                for name in sorted(files):
                    file = here / name
                    if name.endswith(".json"):
                        add(file, path)
                    elif name.endswith(".tsv"):
                        if name[:-4] + ".json" not in names:
                            problems.append(Outcome(str(file), "skipped", "a TSV without its JSON (same name, .json)"))
                    else:
                        problems.append(Outcome(str(file), "skipped", "not a submission file (.json, .tsv)"))
        elif path.suffix == ".json":
            add(path, None)
        elif path.suffix == ".tsv":
            partner = path.with_suffix(".json")
            if partner.is_file():
                add(partner, None)
            else:
                problems.append(Outcome(str(path), "skipped", "a TSV without its JSON (same name, .json)"))
        else:
            problems.append(Outcome(str(path), "skipped", "not a submission file (.json, .tsv) or run directory"))
    # a TSV named on the command line beside its JSON is counted with that JSON
    return found, problems


def _read(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise SubmissionError(f"{path}: {size:,} bytes, more than the {MAX_FILE_BYTES:,} allowed")
        with open(path, "rb") as f:
            return f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise SubmissionError(f"{path}: cannot read ({e.strerror or e})") from None


def read_found(item: Found, task: str | None = None) -> Submission:
    json_bytes = _read(item.json_path)
    tsv_bytes = _read(item.tsv_path) if item.tsv_path is not None else None
    return parse_submission(json_bytes, tsv_bytes, source=item.source, task=task, path=item.json_path,
                            what=str(item.json_path), tsv_what=str(item.tsv_path) if item.tsv_path else None)


def import_paths(store, paths: list[Path], *, task: str | None = None, submitter: str | None = None) -> ImportReport:
    """Validate and store every submission under ``paths``; one entry per transaction, duplicates not re-stored."""
    found, problems = collect(paths)
    report = ImportReport()
    for item in found:
        files = 1 + (item.tsv_path is not None)
        try:
            sub = read_found(item, task)
        except SubmissionError as e:
            report.outcomes.append(Outcome(str(item.json_path), "skipped", _reason(str(e), item), files=files))
            continue
        sub.submitter = submitter
        entry_id, created = store.add(sub)
        report.outcomes.append(Outcome(str(item.json_path), "stored" if created else "duplicate",
                                       entry_id=entry_id, files=files))
    report.outcomes.extend(problems)
    return report


def _reason(message: str, item: Found) -> str:
    """The error without the leading JSON path (the report prints it); a TSV's problem names the TSV file."""
    prefix = str(item.json_path) + ": "
    if message.startswith(prefix):
        return message[len(prefix):]
    if item.tsv_path is not None and message.startswith(str(item.tsv_path) + ": "):
        return item.tsv_path.name + ": " + message[len(str(item.tsv_path)) + 2:]
    return message
