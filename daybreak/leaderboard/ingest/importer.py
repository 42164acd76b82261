"""`daybreak leaderboard import`: find submissions under the given paths, validate each, store the good ones.

A path may be a daybreak run directory (its result.json and inference.json are read, nothing else), a
`daybreak repeat` directory (summary.json and the result.json of each run it lists: one multi-run entry), a tree
of DAWNBench v1 files (``CIFAR10|ImageNet|SQuAD/train|inference/*.json`` with a ``.tsv`` beside each training
JSON), or single JSON files (a training JSON's TSV is the file of the same name ending ``.tsv``).
Every file found is accounted for: part of a stored (or already stored) entry, or reported with its reason.

The folder may come from anyone: only regular files are opened (never following a symbolic link, never
blocking on a FIFO), symbolic links inside it are reported and not followed, and a file that cannot be parsed
for any reason is reported without stopping the import of the others.

Provenance: what the host imports from its own run and repeat directories is ``daybreak-run`` (unless it is a
``daybreak time`` record of an external program); everything else, and everything :func:`parse_submission`
returns to the web server, is ``self-reported``.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daybreak.leaderboard.ingest.dawnbench_import import parse_dawnbench
from daybreak.leaderboard.ingest.runs_import import is_external, parse_inference, parse_repeat, parse_run
from daybreak.leaderboard.ingest.text_rules import printable, visible
from daybreak.leaderboard.ingest.submission import (
    FORMAT_INFERENCE, FORMAT_REPEAT, FORMAT_RUN, MAX_FILE_BYTES, MAX_SOURCE_CHARS, PROVENANCE_RUN,
    Submission, SubmissionError, load_json, one_line, shown, text_field,
)

if TYPE_CHECKING:
    from daybreak.leaderboard.store.database import Store

RUN_FILES = ("result.json", "inference.json")
REPEAT_FILE = "summary.json"  # daybreak.analysis.sources.REPEAT_FILE
MAX_RUN_FILES = 100
_RUN_DIR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def parse_submission(json_bytes: bytes, tsv_bytes: bytes | None = None, *, source: str, task: str | None = None,
                     path: Path | None = None, what: str | None = None, tsv_what: str | None = None,
                     run_files: list[tuple[str, bytes]] | None = None) -> Submission:
    """Any supported submission -> a validated Submission (or SubmissionError with a one-line reason).

    ``run_files``: (name, bytes) of the runs' result.json files that come with a repeat summary. The
    Submission is ``self-reported``: only the host's own import (below) or reproduction sets anything else."""
    what = what or source
    source = visible(one_line(source, MAX_SOURCE_CHARS)).encode("utf-8", "replace").decode("utf-8")
    doc = load_json(json_bytes, what)
    kind = doc.get("kind") if isinstance(doc, dict) else None
    if kind != FORMAT_REPEAT and run_files:
        raise SubmissionError(f"{what}: kind: {shown(kind)}: run records go with a daybreak.repeat summary only")
    if kind == FORMAT_REPEAT:
        if tsv_bytes is not None:
            raise SubmissionError(f"{what}: a daybreak repeat summary takes no TSV (its runs hold their histories)")
        if task is not None and doc.get("task") != task:
            raise SubmissionError(f"{what}: task {one_line(task, 40)!r} was given but the summary "
                                  + (f"is for {one_line(str(doc['task']), 40)!r}" if doc.get("task") is not None
                                     else "names no task"))
        return parse_repeat(doc, _ordered_runs(doc, run_files or [], what), source=source, what=what)
    if kind in (FORMAT_RUN, FORMAT_INFERENCE):
        if tsv_bytes is not None:
            raise SubmissionError(f"{what}: a daybreak {kind} record takes no TSV (its history is inside)")
        if task is not None and doc.get("task") != task:
            raise SubmissionError(f"{what}: task {one_line(task, 40)!r} was given but the record "
                                  + (f"is for {one_line(str(doc['task']), 40)!r}" if doc.get("task") is not None
                                     else "names no task"))
        parse = parse_run if kind == FORMAT_RUN else parse_inference
        return parse(doc, source=source, what=what)
    if isinstance(doc, dict) and "kind" in doc:  # DAWNBench v1 files have no kind: daybreak's records do
        raise SubmissionError(f"{what}: kind: {shown(kind)} is not a leaderboard submission (expected "
                              "daybreak.run, daybreak.inference or daybreak.repeat; a DAWNBench v1 file has no kind)")
    return parse_dawnbench(doc, tsv_bytes, source=source, task=task, path=path, what=what, tsv_what=tsv_what)


def _ordered_runs(summary: dict[str, Any], run_files: list[tuple[str, bytes]], what: str
                  ) -> list[tuple[str, dict[str, Any]]]:
    """The run records of a repeat summary, in the summary's order (matched on run_id)."""
    listed = summary.get("runs")
    if not isinstance(listed, list):
        raise SubmissionError(f"{what}: invalid repeat summary: runs: must be a list of objects, not "
                              f"{shown(listed)}")
    for i, r in enumerate(listed):
        if not isinstance(r, dict):
            raise SubmissionError(f"{what}: invalid repeat summary: runs[{i}]: must be an object, not {shown(r)}")
    if not run_files:
        raise SubmissionError(f"{what}: a repeat summary needs the result.json of each of its {len(listed)} runs "
                              "(upload: one form field 'run' per run; `leaderboard import` reads them from the "
                              "repeat directory)")
    if len(run_files) > MAX_RUN_FILES:
        raise SubmissionError(f"{what}: more than {MAX_RUN_FILES} run records")
    by_id: dict[str, tuple[str, dict[str, Any]]] = {}
    for name, data in run_files:
        run_what = f"{what}: run {one_line(name, 80)}"
        doc = load_json(data, run_what)
        run_id = doc.get("run_id") if isinstance(doc, dict) else None
        if not isinstance(run_id, str):
            raise SubmissionError(f"{run_what}: not a daybreak run record (no run_id)")
        if run_id in by_id:
            raise SubmissionError(f"{run_what}: run {one_line(run_id, 40)!r} given twice")
        by_id[run_id] = (name, doc)
    out = []
    for i, r in enumerate(listed):
        found = by_id.pop(r.get("run_id"), None) if isinstance(r.get("run_id"), str) else None
        if found is None:
            raise SubmissionError(f"{what}: runs[{i}].run_id {shown(r.get('run_id'))}: no run record with this run_id "
                                  "came with the summary")
        out.append(found)
    if by_id:
        raise SubmissionError(f"{what}: runs: the run record {one_line(next(iter(by_id)), 40)!r} is not in the "
                              "summary's runs")
    return out


@dataclass
class Found:
    json_path: Path
    tsv_path: Path | None
    source: str
    run_dir: bool = False  # a daybreak run directory's own record (result.json / inference.json)
    repeat: bool = False  # json_path is a repeat directory's summary.json


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

    def to_json(self) -> dict[str, Any]:
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


def _not_regular(path: Path) -> str | None:
    """Why ``path`` is not a plain file to read (without following a symbolic link), or None."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"cannot read ({e.strerror or e})"
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link (not followed)"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (a folder, FIFO, socket or device)" if not stat.S_ISDIR(st.st_mode) else \
            "a folder"
    return None


def _is_repeat_summary(path: Path) -> bool:
    if _not_regular(path) is not None:
        return False
    try:
        doc = load_json(_read(path), str(path))
    except SubmissionError:
        return False
    return isinstance(doc, dict) and doc.get("kind") == FORMAT_REPEAT


def collect(paths: list[Path]) -> tuple[list[Found], list[Outcome]]:
    """Submissions under ``paths`` (sorted, each JSON once) and the files that cannot be one.

    Only regular files are read: symbolic links inside a tree are reported and not followed (a folder named on
    the command line may itself be a link), FIFOs, sockets and devices are reported and never opened."""
    found: list[Found] = []
    problems: list[Outcome] = []
    seen: set[Path] = set()

    def add(json_path: Path, root: Path | None, *, run_dir: bool = False, repeat: bool = False) -> None:
        key = json_path.absolute()
        if key in seen:
            return
        seen.add(key)
        tsv = json_path.with_suffix(".tsv")
        partner = None
        if not run_dir and not repeat and json_path.name not in RUN_FILES:
            try:
                os.lstat(tsv)
                partner = tsv
            except OSError:
                partner = None
        found.append(Found(json_path, partner, _source_key(json_path, root), run_dir=run_dir, repeat=repeat))

    def run_dir(folder: Path, root: Path | None) -> bool:
        summary = folder / REPEAT_FILE
        if _is_repeat_summary(summary):
            add(summary, root, repeat=True)
            return True
        is_run_dir = False
        for n in RUN_FILES:
            f = folder / n
            if not os.path.lexists(f):
                continue
            is_run_dir = True
            why = _not_regular(f)
            if why is None:
                add(f, root, run_dir=True)
            else:
                problems.append(Outcome(str(f), "skipped", why))
        return is_run_dir

    for path in paths:
        if not os.path.lexists(path):
            problems.append(Outcome(str(path), "skipped", "no such file or directory", files=0))
        elif path.is_dir():
            if run_dir(path, path.parent):
                continue
            for folder, dirs, files in os.walk(path, followlinks=False):
                dirs.sort()
                here = Path(folder)
                for name in list(dirs):
                    if os.path.islink(here / name):
                        problems.append(Outcome(str(here / name), "skipped", "a symbolic link to a folder (not "
                                                                               "followed)", files=0))
                        dirs.remove(name)
                if run_dir(here, path):
                    dirs[:] = []
                    continue
                names = set(files)
                for name in sorted(files):
                    file = here / name
                    if name.endswith(".tsv") and name[:-4] + ".json" in names \
                            and _not_regular(here / (name[:-4] + ".json")) is None:
                        continue  # read (or refused) with its JSON
                    why = _not_regular(file)
                    if why is not None:
                        problems.append(Outcome(str(file), "skipped", why))
                    elif name.endswith(".json"):
                        add(file, path)
                    elif name.endswith(".tsv"):
                        problems.append(Outcome(str(file), "skipped", "a TSV without its JSON (same name, .json)"))
                    else:
                        problems.append(Outcome(str(file), "skipped", "not a submission file (.json, .tsv)"))
        elif path.suffix == ".json":
            add(path, None, run_dir=path.name in RUN_FILES)
        elif path.suffix == ".tsv":
            partner = path.with_suffix(".json")
            if os.path.lexists(partner):
                add(partner, None)
            else:
                problems.append(Outcome(str(path), "skipped", "a TSV without its JSON (same name, .json)"))
        else:
            problems.append(Outcome(str(path), "skipped", "not a submission file (.json, .tsv) or run directory"))
    # a TSV named on the command line beside its JSON is counted with that JSON
    return found, problems


def _read(path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """A regular file's bytes, at most ``limit`` (MAX_FILE_BYTES). Never follows a symbolic link, never blocks on a
    FIFO."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if os.path.islink(path):
            raise SubmissionError(f"{path}: a symbolic link (not followed)") from None
        raise SubmissionError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SubmissionError(f"{path}: not a regular file (a folder, FIFO, socket or device)")
        if st.st_size > limit:
            raise SubmissionError(f"{path}: {st.st_size:,} bytes, more than the {limit:,} allowed")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise SubmissionError(f"{path}: cannot read ({e.strerror or e})") from None
    finally:
        os.close(fd)


def _repeat_runs(summary_path: Path) -> list[tuple[str, bytes]]:
    """The result.json of every run a repeat summary lists, read from ``DIR/<run_dir>/result.json``."""
    doc = load_json(_read(summary_path), str(summary_path))
    listed = doc.get("runs") if isinstance(doc, dict) else None
    if not isinstance(listed, list) or not listed or len(listed) > MAX_RUN_FILES:
        raise SubmissionError(f"{summary_path}: invalid repeat summary: 'runs' must list 1 to {MAX_RUN_FILES} runs")
    out = []
    for r in listed:
        name = r.get("run_dir") if isinstance(r, dict) else None
        if not isinstance(name, str) or not _RUN_DIR_NAME.match(name) or name in (".", ".."):
            raise SubmissionError(f"{summary_path}: run_dir {one_line(printable(str(name)), 60)!r} is not a folder "
                                  "name inside the repeat directory")
        folder = summary_path.parent / name
        if os.path.islink(folder):
            raise SubmissionError(f"{folder}: a symbolic link (not followed)")
        out.append((name, _read(folder / "result.json")))
    return out


def read_found(item: Found, task: str | None = None) -> Submission:
    json_bytes = _read(item.json_path)
    if item.repeat:
        sub = parse_submission(json_bytes, None, source=item.source, task=task, path=item.json_path,
                               what=str(item.json_path.parent), run_files=_repeat_runs(item.json_path))
        sub.provenance = PROVENANCE_RUN
        return sub
    if item.tsv_path is not None:
        why = _not_regular(item.tsv_path)
        if why is not None:
            raise SubmissionError(f"{item.tsv_path}: {why}")
    tsv_bytes = _read(item.tsv_path) if item.tsv_path is not None else None
    sub = parse_submission(json_bytes, tsv_bytes, source=item.source, task=task, path=item.json_path,
                           what=str(item.json_path), tsv_what=str(item.tsv_path) if item.tsv_path else None)
    if item.run_dir and sub.source_format in (FORMAT_RUN, FORMAT_INFERENCE) and not _external(sub):
        sub.provenance = PROVENANCE_RUN  # the host imports its own run directory
    if item.run_dir and sub.source_format == FORMAT_RUN and not sub.author:
        sub.author, sub.author_email = _dawnbench_author(item.json_path.parent)
    return sub


def _dawnbench_author(run_dir: Path) -> tuple[str, str]:
    """(author, e-mail) from a run directory's dawnbench.json: a run recorded before result.json held its
    ``--author`` has it only there. ("", "") when it cannot be read."""
    try:
        doc = load_json(_read(run_dir / "dawnbench.json"), str(run_dir / "dawnbench.json"))
        author = text_field(doc, "author", "dawnbench.json", required=False)
        email = text_field(doc, "authorEmail", "dawnbench.json", required=False)
    except SubmissionError:
        return "", ""
    return author, email


def _external(sub: Submission) -> bool:
    if sub.source_format != FORMAT_RUN:
        return str(sub.document.get("recipe", "")) == "external"
    from daybreak.leaderboard.ingest.runs_import import load_run

    return is_external(load_run(sub.document, sub.source))


def import_paths(store: Store, paths: list[Path], *, task: str | None = None, submitter: str | None = None
                 ) -> ImportReport:
    """Validate and store every submission under ``paths``; one entry per transaction, duplicates not re-stored.

    A file that cannot be read or parsed for any reason is reported (skipped) and the import goes on with the
    next one; only a database error stops it."""
    found, problems = collect(paths)
    report = ImportReport()
    for item in found:
        files = 1 + (item.tsv_path is not None)
        try:
            sub = read_found(item, task)
        except SubmissionError as e:
            report.outcomes.append(Outcome(str(item.json_path), "skipped", _reason(str(e), item), files=files))
            continue
        except (RecursionError, MemoryError, ValueError, TypeError, OverflowError, KeyError, AttributeError) as e:
            report.outcomes.append(Outcome(str(item.json_path), "skipped",
                                           f"unexpected problem while reading it ({type(e).__name__}: "
                                           f"{one_line(str(e), 120)})", files=files))
            continue
        if item.repeat:
            files = 1 + (sub.runs_n or 0)  # summary.json and each run's result.json
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
