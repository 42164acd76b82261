"""The leaderboard's tasks and their targets: DAWNBench v1's three plus daybreak's own tasks, then one board per
MLPerf Training benchmark that has no DAWNBench task beside it (``mlperf-bert``, ...; daybreak.leaderboard.
mlperf_rules). MLPerf's ResNet-50 results go on ``imagenet`` beside DAWNBench's entries, whose notes say how the
two rule sets differ.

Accuracies are fractions everywhere in the leaderboard (0.94 = 94%); the DAWNBench files' percent values are
normalized on import (see :mod:`daybreak.leaderboard.ingest.dawnbench_import`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from daybreak.errors import ConfigError
from daybreak.leaderboard.mlperf_rules import BESIDE_DAWNBENCH, mlperf_boards
from daybreak.metrics import Metric


@dataclass(frozen=True)
class LeaderboardTask:
    name: str  # daybreak's name: "cifar10", "imagenet", "squad", "digits", "mnist"
    title: str
    metric: str  # "top1", "top5" or "f1"
    target: float  # fraction
    dawnbench_field: str  # the accuracy field/column of a DAWNBench v1 submission for this task
    eval_split: str
    dawnbench: bool  # one of DAWNBench v1's own tasks
    clock_rules: str = "dawnbench"  # the rule set of the board's own entries ("mlperf": an MLPerf benchmark's board)
    notes: tuple[str, ...] = ()  # what the board's page says first: rule sets ranked on it, what it is not
    quality: Metric | None = None  # an MLPerf board's quality measure (masked_lm_accuracy, auc, eval_loss, ...)
    goal_label: str = ""  # an MLPerf board's whole target, where it is more than one value ("FID <= 90 and CLIP ...")

    @property
    def metric_label(self) -> str:
        if self.quality is not None:
            return self.quality.label
        return {"top1": "top-1 accuracy", "top5": "top-5 accuracy", "f1": "F1"}[self.metric]

    @property
    def target_label(self) -> str:
        if self.goal_label and " and " in self.goal_label:
            return f"{self.goal_label} on {self.eval_split}"
        if self.quality is not None:
            return self.quality.target_label(self.target, self.eval_split)
        if self.metric == "f1":
            return f"F1 {self.target:g} on {self.eval_split}"
        return f"{self.target * 100:g}% {self.metric_label} on {self.eval_split}"


@lru_cache(maxsize=1)
def _catalog_tasks() -> tuple[LeaderboardTask, ...]:
    """Every task of the catalog (daybreak/tasks/<name>.py): its metric, default target and leaderboard facts.
    DAWNBench v1's tasks (their targets are the competition's thresholds) first, in the competition's order."""
    from daybreak.tasks import TASKS

    order = {"cifar10": 0, "imagenet": 1, "squad": 2}
    tasks = [TASKS.get(name) for name in TASKS.names()]
    tasks.sort(key=lambda t: (not t.leaderboard.dawnbench, order.get(t.name, 99), t.name))
    catalog = [LeaderboardTask(t.name, t.leaderboard.title, t.metric.name, t.target, t.metric.dawnbench_column,
                               t.leaderboard.eval_split or t.eval_split, t.leaderboard.dawnbench,
                               notes=(BESIDE_DAWNBENCH[t.name],) if t.name in BESIDE_DAWNBENCH else ())
               for t in tasks]
    mlperf = [LeaderboardTask(b.name, b.title, b.quality.name, b.target, "", b.eval_split, False,
                              clock_rules="mlperf", notes=b.notes, quality=b.quality, goal_label=b.goal_label)
              for b in mlperf_boards()]
    return tuple(catalog + mlperf)


def all_tasks() -> list[LeaderboardTask]:
    """DAWNBench's tasks first (in the competition's order), then daybreak's own, by name, then MLPerf's boards."""
    return list(_catalog_tasks())


def task_names() -> list[str]:
    return [t.name for t in all_tasks()]


def leaderboard_task(name: str) -> LeaderboardTask:
    for t in all_tasks():
        if t.name == name:
            return t
    raise ConfigError(f"unknown leaderboard task {name!r}; known: {', '.join(task_names())}")


def task_from_label(label: str) -> str | None:
    """A folder name such as ``CIFAR10``, ``ImageNet``, ``SQuAD`` or ``mnist`` -> the task's name, else None."""
    key = re.sub(r"[^a-z0-9]", "", label.lower())
    aliases = {"squad11": "squad", "squad1": "squad", "imagenet1k": "imagenet", "ilsvrc2012": "imagenet"}
    key = aliases.get(key, key)
    return key if key in task_names() else None
