"""The task catalog: one file per task (``daybreak/tasks/<name>.py``) owns everything task-specific.

A task file builds one ``Task`` and registers it with ``TASKS.add``: its reader hook-up, its typed ``Metric``,
default target and eval split, its reference recipe (by name), the batch-source and evaluator factories when
its data does not sit in memory, what inference needs, an ``InputSpec`` for synthetic workloads (sweeps,
roofline, warm-up) and its leaderboard / DAWNBench facts. Task files are found by scanning this package and the
``daybreak.tasks`` entry-point group, so adding a task is its task file plus its own reader, model and recipe
files: nothing else is edited.

``data/`` holds format readers only and imports nothing above it; the task file is where a reader meets the
runner. Beside the task files, ``batches.py`` (batch sources, evaluators, ``BatchPlan``) and ``evaluate.py``
(top-1/top-5 counting) are the building blocks task files and the runner share; they import nothing from train/.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from daybreak.data.base import TaskData
from daybreak.errors import ConfigError
from daybreak.metrics import TOP5, Metric
from daybreak.registry import Registry

if TYPE_CHECKING:  # a task's facts are read without torch (`daybreak tasks`, the leaderboard, `time --log`)
    import torch

    from daybreak.tasks.batches import BatchPlan, Evaluator, TrainBatches


@dataclass(frozen=True, init=False)
class InputSpec:
    """One example as the task's data source stores it (before the recipe's ``prepare``): what synthetic
    workloads (throughput sweeps, roofline, contract tests) feed the task's models. ``dtype`` is given as torch's
    dtype or its name ("uint8", "float32"); the spec keeps the name, so a task file registers without importing
    torch, and ``dtype`` gives torch's."""

    shape: tuple[int, ...]  # e.g. (1, 28, 28) for MNIST, (384,) token ids for SQuAD windows
    dtype_name: str  # "uint8", "float32", "int64": an attribute of torch
    kind: str = "image"  # "image" or "tokens"
    value_range: tuple[float, float] = (0.0, 255.0)  # synthetic values are drawn from this range

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype | str, kind: str = "image",
                 value_range: tuple[float, float] = (0.0, 255.0)):
        name = str(dtype).removeprefix("torch.")
        if not name.isidentifier():
            raise ValueError(f"InputSpec dtype {dtype!r}: give torch's dtype or its name, such as 'uint8'")
        object.__setattr__(self, "shape", tuple(shape))
        object.__setattr__(self, "dtype_name", name)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "value_range", value_range)

    @property
    def dtype(self) -> torch.dtype:
        import torch

        dtype = getattr(torch, self.dtype_name, None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"InputSpec dtype {self.dtype_name!r} is no torch dtype")
        return dtype

    def example(self, n: int, num_classes: int, *, generator: torch.Generator | None = None,
                device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` synthetic examples and class labels of exactly this spec."""
        import torch

        g = generator or torch.Generator().manual_seed(0)
        lo, hi = self.value_range
        if self.dtype.is_floating_point:
            x = torch.rand((n, *self.shape), generator=g) * (hi - lo) + lo
            x = x.to(self.dtype)
        else:
            x = torch.randint(int(lo), int(hi) + 1, (n, *self.shape), generator=g, dtype=torch.int64).to(self.dtype)
        y = torch.randint(0, max(num_classes, 1), (n,), generator=g)
        return x.to(device), y.to(device)


@dataclass(frozen=True)
class LeaderboardFacts:
    title: str  # "CIFAR-10"
    dawnbench: bool = False  # one of DAWNBench v1's own tasks (its published entries rank with daybreak's)
    dawnbench_folder: str | None = None  # its folder in the dawn-bench-entries repository ("CIFAR10")
    eval_split: str = ""  # how the leaderboard names the eval split


# (data_dir, allow_custom_data, download) -> TaskData
Loader = Callable[[Path | None, bool, bool], TaskData]


@dataclass(frozen=True)
class Task:
    name: str
    description: str
    metric: Metric  # what the target applies to
    target: float  # default target as a fraction of the metric (0.94 = 94% top-1; 0.75 = F1 0.75)
    eval_split: str  # what the metric is measured on
    num_classes: int  # 0 when not classification
    load: Loader
    reference_recipe: str  # the recipe `daybreak run TASK` uses (named, never "the first one that sorts")
    input_spec: InputSpec
    leaderboard: LeaderboardFacts
    files: str = ""  # which files the task needs, for help and offline errors
    extra_metrics: tuple[Metric, ...] = ()  # also measured at every evaluation (ImageNet records top-1 too)
    # the runner's data source and evaluator for data that does not sit in memory as tensors, or whose metric is
    # not classification accuracy; None: daybreak.tasks.batches' in-memory ones
    make_train_batches: Callable[[TaskData, "BatchPlan"], "TrainBatches"] | None = None
    make_evaluator: Callable[[TaskData, "BatchPlan"], "Evaluator"] | None = None
    # daybreak infer: the eval inputs to time one at a time (default: data.eval_x)
    inference_inputs: Callable[[TaskData], torch.Tensor] | None = None
    # False: the data ships inside a package (digits: scikit-learn's), so there is no folder and --data-dir means
    # nothing for it
    has_data_dir: bool = True
    # a run's recorded data_source -> the folder to read again (`daybreak infer`, `evaluate`, `analyze roofline`);
    # None: the source is that folder itself
    folder_of_source: Callable[[str], Path | None] | None = None
    # (num_classes, examples) -> data of the task's shapes without its files, for `analyze roofline` of a run made
    # elsewhere; None: made from input_spec when the data sits in memory, else there is none
    stand_in: Callable[[int, int], TaskData] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def measures_top5(self) -> bool:
        return self.metric == TOP5 or TOP5 in self.extra_metrics

    @property
    def in_memory(self) -> bool:
        """Its examples sit in memory as tensors (``TaskData.train_x``/``eval_x``), fed by the default batch source."""
        return self.make_train_batches is None

    @property
    def feeds_sweeps(self) -> bool:
        """`daybreak throughput --data TASK` can feed its real examples: (image, class) tensors in memory."""
        return self.in_memory and self.num_classes > 0 and self.input_spec.kind == "image"

    def check_data_dir(self, data_dir: Path | None, flag: str = "--data-dir") -> None:
        """A --data-dir that would be ignored is a mistake: the task reads no folder (its data ships in a package),
        or the path is a file. (A folder that does not exist yet may be where the files are downloaded.)"""
        if data_dir is None:
            return
        if not self.has_data_dir:
            raise ConfigError(f"{flag} {data_dir}: task {self.name} reads no data folder ({self.files}); drop {flag}")
        if Path(data_dir).expanduser().exists() and not Path(data_dir).expanduser().is_dir():
            raise ConfigError(f"{flag} {data_dir}: not a folder; give the folder that holds {self.name}'s files "
                              f"({self.files})")

    def data_folder(self, source: str) -> Path | None:
        """The folder a run whose ``data_source`` is ``source`` read, to read again; None when it has none."""
        if not self.has_data_dir or not source.strip():
            return None
        if self.folder_of_source is not None:
            return self.folder_of_source(source)
        return Path(source.strip()).expanduser()

    def stand_in_data(self, num_classes: int, examples: int = 1) -> TaskData | None:
        """Data of the task's shapes and ``num_classes`` classes, without its files (synthetic values: enough to
        build a recipe's model and count a step's FLOPs); None when the task has no way to make one."""
        if self.stand_in is not None:
            return self.stand_in(num_classes, examples)
        if not self.in_memory:
            return None
        x, y = self.input_spec.example(max(examples, 1), num_classes)
        return TaskData(train_x=x, train_y=y, eval_x=x[:1], eval_y=y[:1], num_classes=num_classes, official=False,
                        source="", notes=["stand-in without files"])

    @property
    def target_label(self) -> str:
        return self.metric.target_label(self.target)

    def inputs_for_inference(self, data: TaskData) -> torch.Tensor:
        return self.inference_inputs(data) if self.inference_inputs is not None else data.eval_x


# the task files are found by scanning this package; the building blocks beside them (batch sources, evaluators and
# the hooks of tasks whose data does not sit in memory) register nothing and import torch: a run imports them
TASKS: Registry[Task] = Registry("task", package=__name__, entry_point_group="daybreak.tasks",
                                 helpers=("batches", "evaluate", "imagenet_batches", "squad_batches"))


def get_task(name: str) -> Task:
    return TASKS.get(name)


def task_names() -> list[str]:
    return TASKS.names()


def lazy(module: str, function: str) -> Callable[..., Any]:
    """``module.function``, imported only when called: the registry imports every task file, readers stay unloaded
    until a task is used."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), function)(*args, **kwargs)

    return call


def reader(module: str, function: str) -> Loader:
    """A ``Task.load`` that imports its reader only when called: ``function(data_dir, allow_custom_data=,
    download=)``."""
    read = lazy(module, function)

    def load(data_dir: Path | None, allow_custom: bool, download: bool) -> TaskData:
        data: TaskData = read(data_dir, allow_custom_data=allow_custom, download=download)
        return data

    return load
