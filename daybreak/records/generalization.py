"""GeneralizationEntry: one evaluation of a run's checkpoint on another labelled set (`daybreak evaluate`,
daybreak.analysis.generalization). ``RUN_DIR/generalization.json`` holds a JSON list of them, one per evaluation."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import Field

from daybreak.fileio import atomic_write_text
from daybreak.measure.system import SystemInfo
from daybreak.records.base import Record, load_record_list

GENERALIZATION_FILE = "generalization.json"


class GeneralizationEntry(Record):
    # no FILE of its own: generalization.json is a list of entries (load_entries / save_entries)
    WHAT = "generalization"

    kind: Literal["daybreak.generalization"] = "daybreak.generalization"
    run_id: str
    task: str
    recipe: str
    model: str
    metric: str
    data_dir: str  # as given (without --data-dir: the run's own data folder, or its source for digits)
    data_dir_resolved: str
    data_default: bool = False  # no --data-dir: the data the run itself read
    data_source: str
    data_official: bool
    n: int  # examples evaluated (the other set's eval split)
    accuracy: float  # the task's metric on the other set
    top1: float | None = None  # classification tasks
    top5: float | None = None
    original_accuracy: float | None  # the checkpoint's accuracy on the task's own eval set
    original_data_source: str = ""
    difference: float | None  # accuracy - original_accuracy (fraction; negative = worse)
    checkpoint: str
    checkpoint_epoch: float | None = None
    device: str
    amp: str
    seconds: float
    system: SystemInfo
    evaluated_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    command: list[str] = Field(default_factory=list)


def load_entries(run_dir: str | Path) -> list[GeneralizationEntry]:
    """Every entry of ``run_dir/generalization.json``, oldest first; [] when there is none."""
    return load_record_list(GeneralizationEntry, Path(run_dir) / GENERALIZATION_FILE,
                            kind=GeneralizationEntry.record_kind(), what=GeneralizationEntry.WHAT)


def save_entries(run_dir: str | Path, entries: list[GeneralizationEntry]) -> Path:
    return atomic_write_text(Path(run_dir) / GENERALIZATION_FILE,
                             json.dumps([json.loads(e.model_dump_json()) for e in entries], indent=2) + "\n")
