"""The in-memory dataset every reader returns, and where task data lives on disk."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # reading a task's facts (its registry entry) needs no torch
    import torch


@dataclass
class TaskData:
    """A whole dataset in memory, as tensors, exactly as read from its distribution files.

    Images keep their stored dtype (uint8 for MNIST/CIFAR, float for digits) and layout N,C,H,W; recipes
    normalize on the device. Labels are int64 class indices.

    Datasets too large for memory (ImageNet) or with another metric (SQuAD) have their batch source and evaluator
    made by their task file (``daybreak/tasks/<name>.py``); their tensors may then be ``None`` (train) or hold what
    inference needs (eval inputs and labels, one example per row).
    """

    train_x: torch.Tensor | None
    train_y: torch.Tensor | None
    eval_x: torch.Tensor
    eval_y: torch.Tensor
    num_classes: int
    official: bool = True  # False when the files do not match the official checksums (--allow-custom-data)
    source: str = ""  # where the data came from: a folder, a package, ...
    notes: list[str] = field(default_factory=list)  # e.g. which files failed the checksum

    def __post_init__(self) -> None:
        if (self.train_x is None) != (self.train_y is None):
            raise ValueError("train inputs and labels must both be given or both be None")
        if self.train_x is not None and self.train_y is not None and len(self.train_x) != len(self.train_y):
            raise ValueError("train inputs and labels differ in count")
        if len(self.eval_x) != len(self.eval_y):
            raise ValueError("eval inputs and labels differ in count")

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.eval_x.shape[1:])


def data_cache_root() -> Path:
    """``$DAYBREAK_DATA`` if set, else the user cache dir (e.g. ~/.cache/daybreak/data)."""
    env = os.environ.get("DAYBREAK_DATA")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("daybreak")) / "data"


def task_data_dir(task: str, data_dir: str | os.PathLike[str] | None) -> Path:
    """``--data-dir`` if given (the folder that holds the task's files themselves), else ``<cache>/<task>/``."""
    if data_dir is not None:
        return Path(data_dir).expanduser()
    return data_cache_root() / task
