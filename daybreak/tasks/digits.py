"""digits: scikit-learn's bundled 8x8 handwritten digits, the offline default (no download, no files)."""

from __future__ import annotations

from pathlib import Path

from daybreak.data.base import TaskData
from daybreak.metrics import TOP1
from daybreak.tasks import TASKS, InputSpec, LeaderboardFacts, Task


def _load(data_dir: Path | None, allow_custom: bool, download: bool) -> TaskData:
    from daybreak.data.digits import load_digits_task

    return load_digits_task()  # bundled with scikit-learn: nothing to find, check or download


TASKS.add("digits", Task(
    name="digits",
    description="scikit-learn's bundled 8x8 handwritten digits; offline, no download",
    metric=TOP1, target=0.98, eval_split="fixed seeded 25% test split (450 images)", num_classes=10,
    load=_load, files="none (bundled with scikit-learn)", reference_recipe="digits", has_data_dir=False,
    input_spec=InputSpec(shape=(1, 8, 8), dtype="float32", value_range=(0.0, 16.0)),
    leaderboard=LeaderboardFacts(title="Digits", eval_split="the fixed 450-image test split"),
))
