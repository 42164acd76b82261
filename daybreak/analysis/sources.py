"""What a path given to an analysis is (run, repeat, lesion or sweep directory) and the records in it.

* run directory: has ``result.json`` (``kind: daybreak.run``);
* repeat directory: has ``summary.json`` (``kind: daybreak.repeat``), or run directories one level down;
* lesion directory: has ``lesion.json`` (``kind: daybreak.lesion``); its runs are two levels down;
* sweep directory: has ``results.jsonl`` (ThroughputResult per line).

A folder of run directories that is none of these counts as a set of runs (``runs``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

from daybreak.errors import RecordError
from daybreak.records.lesion import LESION_FILE, LesionSummary
from daybreak.records.provenance import Provenance
from daybreak.records.repeat import REPEAT_FILE, RepeatSummary
from daybreak.records.run import RESULT_FILE, RunResult

SWEEP_FILE = "results.jsonl"

Kind = Literal["run", "repeat", "lesion", "sweep", "runs"]


def provenance(inputs: Sequence[str | Path], command: list[str] | None = None) -> Provenance:
    """What an analysis read and where: the machine that analysed (an analysis of records imports no torch, so
    its accelerators are not probed: daybreak.measure.system.host_info)."""
    from daybreak.measure.system import host_info

    return Provenance(command=list(command or []), inputs=[str(p) for p in inputs], system=host_info())


def _kind_of_json(path: Path) -> str | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data.get("kind") if isinstance(data, dict) else None


def _run_subdirs(folder: Path, depth: int = 1) -> list[Path]:
    found: list[Path] = []
    try:
        children = sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return []
    for child in children:
        if (child / RESULT_FILE).is_file():
            found.append(child)
        elif depth > 1:
            found.extend(_run_subdirs(child, depth - 1))
    return found


def classify(path: str | Path) -> tuple[Kind, Path]:
    """(kind, directory). One-line RecordError for anything else."""
    path = Path(path)
    if not path.exists():
        raise RecordError(f"{path}: no such file or directory")
    if path.is_file():
        names = {RESULT_FILE: "run", LESION_FILE: "lesion", SWEEP_FILE: "sweep", REPEAT_FILE: "repeat"}
        if path.name in names:
            return classify(path.parent)
        raise RecordError(f"{path}: give a run, repeat, lesion or sweep directory, not a file")
    if (path / RESULT_FILE).is_file():
        return "run", path
    if (path / LESION_FILE).is_file() and _kind_of_json(path / LESION_FILE) == LesionSummary.record_kind():
        return "lesion", path
    if (path / REPEAT_FILE).is_file() and _kind_of_json(path / REPEAT_FILE) == RepeatSummary.record_kind():
        return "repeat", path
    if (path / SWEEP_FILE).is_file():
        return "sweep", path
    if _run_subdirs(path):
        return "runs", path
    if _run_subdirs(path, depth=2):
        return "runs", path
    raise RecordError(f"{path}: not a run, repeat, lesion or sweep directory (no {RESULT_FILE}, {REPEAT_FILE}, "
                      f"{LESION_FILE} or {SWEEP_FILE}, and no run directories inside)")


@dataclass
class AnalyzedRun:
    """A run record found under a path given to an analysis, and the run directory it came from (not to be
    confused with daybreak.infer.latency.LoadedRun, a run's model rebuilt for inference)."""

    path: Path
    result: RunResult

    @property
    def label(self) -> str:
        return str(self.path)




def unique_labels(runs: list[AnalyzedRun]) -> dict[Path, str]:
    """A short, unique name per run: the run ids if they are unique, else parent/name (``rep/seed-0``) for
    every run if those are, else the paths."""
    ids = [r.result.run_id for r in runs]
    if len(set(ids)) == len(ids):
        return {r.path: rid for r, rid in zip(runs, ids)}
    pairs = [f"{r.path.parent.name}/{r.path.name}" for r in runs]
    if len(set(pairs)) == len(pairs):
        return {r.path: pair for r, pair in zip(runs, pairs)}
    return {r.path: str(r.path) for r in runs}


def runs_in(path: str | Path) -> list[AnalyzedRun]:
    """Every run record a run/repeat/lesion/runs directory holds (in name order). Sweeps have none."""
    kind, folder = classify(path)
    if kind == "sweep":
        raise RecordError(f"{path}: a throughput sweep has no time-to-accuracy runs; give run or repeat directories")
    if kind == "run":
        dirs = [folder]
    elif kind == "lesion":
        dirs = _run_subdirs(folder, depth=2)
    else:
        dirs = _run_subdirs(folder, depth=1) or _run_subdirs(folder, depth=2)
    return [AnalyzedRun(d, RunResult.load(d)) for d in dirs]


def collect_runs(paths: Sequence[str | Path], what: str = "runs") -> list[AnalyzedRun]:
    """All runs under ``paths`` (each a run, repeat, lesion or runs directory), without duplicates."""
    if not paths:
        raise RecordError(f"no {what} given")
    seen: set[Path] = set()
    out: list[AnalyzedRun] = []
    for p in paths:
        for run in runs_in(p):
            key = run.path.resolve()
            if key not in seen:
                seen.add(key)
                out.append(run)
    if not out:
        raise RecordError(f"no runs found in {', '.join(str(p) for p in paths)}")
    return out


def jsonable(value: Any) -> Any:
    """Hyperparameters as they compare after a JSON round trip (tuples become lists)."""
    return json.loads(json.dumps(value, default=str, sort_keys=True))
