"""Which data `daybreak infer` and `daybreak evaluate` read by default: the data the run itself read.

A run records where its data came from in result.json's ``data_source`` (an absolute path for the folder-based
tasks; "bundled with scikit-learn ..." for digits). Without ``--data-dir`` the measurement reads that folder again:

* the folder is there: it is read as it is (never downloaded into when it held custom data); a run made with
  ``--allow-custom-data`` accepts the same custom files again without the flag;
* the folder is gone or has moved: a one-line DataError naming it and the flags to pass (``--data-dir``, and
  ``--allow-custom-data`` when the run used custom data), except when it was the default cache folder, which the
  task's loader may fill again as ``daybreak run`` would (download);
* nothing recorded, or no folder (a task whose data ships in a package, such as digits; old records): the
  task's default, as for ``daybreak run``.

Which folder a recorded source means is the task's to say (``Task.data_folder``).

``--data-dir`` always wins; custom files there need ``--allow-custom-data`` unless it is the run's own folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from daybreak.errors import DataError, RecordError
from daybreak.records.run import RunResult

CUSTOM_DATA_FLAG = "--allow-custom-data"


@dataclass(frozen=True)
class DataChoice:
    """What to hand the task's loader: ``task.load(data_dir, allow_custom_data, download)``."""

    data_dir: Path | None  # None: the task's default (the cache folder, or data bundled in a package)
    allow_custom_data: bool
    download: bool
    origin: str  # "--data-dir", "run" (the run's own folder) or "default"


def run_used_custom_data(result: RunResult) -> bool:
    """The run was made with --allow-custom-data on files that failed the official checksums."""
    return any(CUSTOM_DATA_FLAG in reason for reason in result.unofficial_reasons)


def recorded_folder(result: RunResult) -> Path | None:
    """The folder the run read its data from (from ``data_source``), or None when it has none or recorded none."""
    from daybreak.tasks import get_task

    return get_task(result.task).data_folder(result.data_source or "")


def same_folder(a: Path, b: Path) -> bool:
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return os.path.abspath(a) == os.path.abspath(b)


def _flags(custom: bool) -> str:
    return "--data-dir FOLDER" + (f" {CUSTOM_DATA_FLAG}" if custom else "")


def choose_data(result: RunResult, run_dir: Path, data_dir: Path | None, *, allow_custom_data: bool = False,
                download: bool = True) -> DataChoice:
    """The data to measure ``result``'s checkpoint on (see the module doc). One-line DataError when the run's
    folder is gone."""
    custom = run_used_custom_data(result)
    recorded = recorded_folder(result)
    if data_dir is not None:
        from daybreak.tasks import get_task

        get_task(result.task).check_data_dir(Path(data_dir))
        own = recorded is not None and same_folder(Path(data_dir), recorded)
        return DataChoice(Path(data_dir), allow_custom_data or (custom and own), download, "--data-dir")
    if recorded is None:
        return DataChoice(None, allow_custom_data, download, "default")
    if recorded.is_dir():
        return DataChoice(recorded, allow_custom_data or custom, download and not custom, "run")
    from daybreak.data.base import task_data_dir

    if not custom and same_folder(recorded, task_data_dir(result.task, None)):
        return DataChoice(None, allow_custom_data, download, "default")  # the cache: the loader may fetch it again
    where = f"{Path(run_dir) / 'result.json'}"
    if not recorded.is_absolute():
        raise DataError(
            f"{result.task}: the run read its data from the relative path {str(recorded)!r} (data_source in {where}), "
            f"which is not a folder from here ({os.getcwd()}); pass {_flags(custom)}"
        )
    what = "is not a folder" if recorded.exists() else "is gone or has moved"
    raise DataError(
        f"{result.task}: the run's data folder {recorded} (data_source in {where}) {what}; "
        f"pass {_flags(custom)} to read it from where it is now"
    )


def model_run(run_dir: Path) -> RunResult:
    """The record of a run directory whose model can be loaded (`daybreak infer`, `evaluate`): a one-line
    RecordError for a path that is no directory, holds no record, or holds a `daybreak time` record (no model).
    Reads the record only (no torch), so the commands check it before loading anything heavy."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise RecordError(f"{run_dir}: no such run directory")
    if not run_dir.is_dir():
        raise RecordError(f"{run_dir}: not a directory; give a run directory (made by `daybreak run`)")
    result = RunResult.load(run_dir)
    if result.is_external:
        raise RecordError(f"{run_dir}: a `daybreak time` record of an external program has no daybreak model or "
                          "checkpoint to load; give a run directory made by `daybreak run`")
    return result
