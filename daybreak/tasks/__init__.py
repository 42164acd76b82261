"""Task registry: a dataset reader + metric + default target + eval split. ``get_task("mnist")``."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from daybreak.data.base import TaskData
from daybreak.registry import Registry


@dataclass(frozen=True)
class Task:
    name: str
    description: str
    metric: str  # "top1" or "top5": the accuracy the target applies to
    target: float  # default target, as a fraction (0.94 = 94%)
    eval_split: str  # what the accuracy is measured on
    num_classes: int
    # load(data_dir, allow_custom_data, download) -> TaskData; data_dir None means the default cache folder
    load: Callable[[Path | None, bool, bool], TaskData]
    files: str = ""  # which files the task needs, for help and offline errors
    report_top5: bool = False  # record top-5 accuracy in the history too
    dawnbench_name: str | None = None  # the DAWNBench task this corresponds to, if any

    @property
    def target_percent(self) -> float:
        return round(self.target * 100, 6)


TASKS: Registry[Task] = Registry("task")


def get_task(name: str) -> Task:
    return TASKS.get(name)


def reader(module: str, function: str) -> Callable[[Path | None, bool, bool], TaskData]:
    """A Task.load that imports its reader only when called: ``function(data_dir, allow_custom_data=, download=)``."""

    def load(data_dir: Path | None, allow_custom: bool, download: bool) -> TaskData:
        read = getattr(importlib.import_module(module), function)
        return read(data_dir, allow_custom_data=allow_custom, download=download)

    return load


def _load_digits(data_dir: Path | None, allow_custom: bool, download: bool) -> TaskData:
    from daybreak.data.digits import load_digits_task

    return load_digits_task()  # bundled with scikit-learn: nothing to find, check or download


TASKS.add("digits", Task(
    name="digits",
    description="scikit-learn's bundled 8x8 handwritten digits; offline, no download",
    metric="top1", target=0.98, eval_split="fixed seeded 25% test split (450 images)", num_classes=10,
    load=_load_digits, files="none (bundled with scikit-learn)",
))
TASKS.add("mnist", Task(
    name="mnist",
    description="MNIST handwritten digits, the four IDX files",
    metric="top1", target=0.99, eval_split="t10k test files (10,000 images)", num_classes=10,
    load=reader("daybreak.data.mnist", "load_mnist"),
    files="train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (.gz or not)",
))
TASKS.add("cifar10", Task(
    name="cifar10",
    description="CIFAR-10, the python distribution",
    metric="top1", target=0.94, eval_split="test_batch (10,000 images)", num_classes=10,
    load=reader("daybreak.data.cifar10", "load_cifar10"),
    files="cifar-10-python.tar.gz or the extracted cifar-10-batches-py/",
    dawnbench_name="CIFAR10",
))

from daybreak.tasks import extra  # noqa: E402,F401  (registers imagenet and squad)
