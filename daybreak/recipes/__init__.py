"""Recipe registry. A recipe = model + optimizer + schedule + batch size + epochs for one task, in one file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from daybreak.data.base import TaskData
from daybreak.errors import ConfigError
from daybreak.registry import Registry


@dataclass
class TrainSetup:
    """What a recipe hands the runner. Every callable runs on tensors already on the device."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    lr_multiplier: Callable[[int, int], float]  # (step, total_steps) -> factor on each group's base lr
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    prepare: Callable[[torch.Tensor], torch.Tensor]  # raw stored images -> model input (normalize, layout)
    augment: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None  # training batches only
    predict: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None = None  # eval logits (e.g. flip TTA)
    # Anything the recipe computes from the training data (e.g. whitening) runs here, inside the clock.
    init_from_data: Callable[[torch.Tensor, torch.Tensor], None] | None = None


@dataclass(frozen=True)
class Recipe:
    name: str
    task: str
    model: str  # a name in the model registry
    summary: str
    defaults: dict[str, Any]  # every hyperparameter, with batch_size (see batch_scaling) and epochs
    build: Callable[[dict[str, Any], TaskData, torch.device], TrainSetup]
    # How the recipe runs on N devices. "global": batch_size is the global batch, split over the devices, lr
    # unchanged (N devices train the 1-device schedule). "per-device": each device takes batch_size, and the lr
    # follows the global batch by lr_scaling ("linear", "sqrt", "none").
    batch_scaling: str = "global"
    lr_scaling: str = "none"
    switches: tuple[str, ...] = field(default_factory=tuple)  # boolean hyperparameters that can be switched off
    # MLPerf's submission_benchmark name (e.g. "resnet"), claimed in the mllog only when the run follows that
    # benchmark's definition: its metric (mllog_metric) at or above its target (mllog_target). Else daybreak_<task>.
    mllog_benchmark: str | None = None
    mllog_metric: str | None = None
    mllog_target: float | None = None
    # (hp, data, global batch) -> extra MLPerf keys to log after the header (e.g. opt_base_learning_rate)
    mllog_events: Callable[[dict[str, Any], TaskData, int], dict[str, Any]] | None = None

    def scaling_summary(self) -> str:
        if self.batch_scaling == "global":
            return "global batch fixed at batch_size (each of N devices takes batch_size / N); lr unchanged"
        return f"batch_size per device (global batch = N x batch_size); lr scaled {self.lr_scaling} with N"

    def hyperparameters(self, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        hp = dict(self.defaults)
        for key, value in (overrides or {}).items():
            if key not in hp:
                raise ConfigError(f"recipe {self.name} has no hyperparameter {key!r}; it has: {', '.join(hp)}")
            hp[key] = value
        return hp


RECIPES: Registry[Recipe] = Registry("recipe")


def get_recipe(name: str) -> Recipe:
    _import_all()
    return RECIPES.get(name)


def recipe_names() -> list[str]:
    _import_all()
    return RECIPES.names()


def default_recipe_for(task: str) -> str:
    _import_all()
    for name in RECIPES.names():
        if RECIPES.get(name).task == task:
            return name
    raise ConfigError(f"no recipe for task {task!r}; see `daybreak recipes`")


def parse_overrides(items: list[str] | None, defaults: dict[str, Any]) -> dict[str, Any]:
    """``["lr=0.1", "epochs=3"]`` -> typed values, using the type of each default."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        key, raw = (s.strip() for s in item.split("=", 1))
        if key not in defaults:
            raise ConfigError(f"--set {key}: unknown hyperparameter; known: {', '.join(defaults)}")
        default = defaults[key]
        try:
            if isinstance(default, bool):
                if raw.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError(raw)
                value: Any = raw.lower() in ("1", "true", "yes", "on")
            elif isinstance(default, int):
                value = int(raw)
            elif isinstance(default, float):
                value = float(raw)
            else:
                value = raw
        except ValueError:
            raise ConfigError(f"--set {key}={raw}: expected a {type(default).__name__}") from None
        out[key] = value
    return out


def _import_all() -> None:
    from daybreak.recipes import cifar10, digits, imagenet, mnist, squad  # noqa: F401
