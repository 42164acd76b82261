"""Recipe registry. A recipe = model + optimizer + schedule + batch size + epochs for one task, in one file."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
from torch import nn

from daybreak.data.base import TaskData
from daybreak.errors import ConfigError
from daybreak.options import parse_bool_text
from daybreak.registry import Registry


@dataclass
class TrainSetup:
    """What a recipe hands the runner. Every callable runs on tensors already on the device."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    # (step, total_steps) -> factor on each param group's base lr, or one factor per group (a group with its own
    # schedule, e.g. airbench94_muon's whitening bias)
    lr_multiplier: Callable[[int, int], float | Sequence[float]]
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    prepare: Callable[[torch.Tensor], torch.Tensor]  # raw stored images -> model input (normalize, layout)
    augment: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None  # training batches only
    predict: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None = None  # eval logits (e.g. flip TTA)
    # Anything the recipe computes from the training data (e.g. whitening) runs here, inside the clock.
    init_from_data: Callable[[torch.Tensor, torch.Tensor], None] | None = None
    # The first-call costs of init_from_data (a solver's lazy start-up: cuSOLVER for the whitening's eigh), paid
    # in the warm-up on a batch of synthetic prepared inputs; what it sets in the model is put back after it.
    warm_up_init: Callable[[torch.Tensor], None] | None = None
    # --- hooks inside the clock (all optional) ---------------------------------------------------------------
    clip_grad_norm: float | None = None  # clip the global gradient norm before each optimizer step (0/None: off)
    on_step: Callable[[int, int], None] | None = None  # after each optimizer step: (steps done, total steps)
    on_epoch_end: Callable[[int], None] | None = None  # after each epoch: (epochs done, from 1)
    # the model that is evaluated, checkpointed and used for inference, when it is not ``model`` itself (an EMA or
    # lookahead copy of the weights); called at each evaluation
    eval_model: Callable[[], nn.Module] | None = None
    # hyperparameters this setup actually used when they differ from the recipe's (recorded, e.g. derived values)
    notes: list[str] = field(default_factory=list)
    # the network holds its own weights in this dtype ("fp16": airbench's half network with float BatchNorm): the
    # runner then neither autocasts nor scales the loss, and records this precision as the run's
    native_precision: str | None = None
    # a schedule of a fractional number of epochs (airbench94's 9.9): training stops after
    # ceil(train_epochs x steps per epoch) steps, in the last of the ``epochs`` epochs; None: ``epochs`` whole
    train_epochs: float | None = None

    def evaluated_model(self) -> nn.Module:
        return self.eval_model() if self.eval_model is not None else self.model


@dataclass(frozen=True)
class Range:
    """The values a numeric hyperparameter may take: ``low <= value <= high``, either end open."""

    low: float = 0.0
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def __str__(self) -> str:
        if self.high == math.inf:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"


# The rule for hyperparameter values (checked by Recipe.hyperparameters, so for --set, repeat, lesion and the
# Python API alike): a value has its default's type (an int where a float is expected is fine); every number is
# finite and >= 0 -- negative learning rates, weight decays, epochs or sizes cannot be meant -- unless a range is
# declared for its name, here for names that mean the same in every recipe or in the recipe's own ``limits``;
# integers are at most INT_MAX.
NON_NEGATIVE = Range()                          # the default for every number
POSITIVE = Range(0.0, low_open=True)            # divided by (e.g. CIFAR-10's lr)
COUNT = Range(1)                                # sizes, counts, epochs
FRACTION = Range(0.0, 1.0)                      # a share of the steps, [0, 1]
BELOW_ONE = Range(0.0, 1.0, high_open=True)     # momentum, Adam's betas, dropout, label smoothing: [0, 1)
INT_MAX = 2**31 - 1
COMMON_LIMITS: dict[str, Range] = {
    "batch_size": COUNT, "epochs": COUNT, "eval_batch_size": COUNT,
    "momentum": BELOW_ONE, "label_smoothing": BELOW_ONE, "dropout": BELOW_ONE,
    "adam_beta1": BELOW_ONE, "adam_beta2": BELOW_ONE,
}


def _kind(default: Any) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, int):
        return "an integer"
    if isinstance(default, float):
        return "a number"
    return "text"


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
    # Ranges of numeric hyperparameters other than COMMON_LIMITS and the default (finite, >= 0); see Range.
    limits: dict[str, Range] = field(default_factory=dict)
    # MLPerf's submission_benchmark name (e.g. "resnet"), claimed in the mllog only when the run follows that
    # benchmark's definition: its metric (mllog_metric) at or above its target (mllog_target). Else daybreak_<task>.
    mllog_benchmark: str | None = None
    mllog_metric: str | None = None
    mllog_target: float | None = None
    # (hp, data, global batch) -> extra MLPerf keys to log after the header (e.g. opt_base_learning_rate)
    mllog_events: Callable[[dict[str, Any], TaskData, int], dict[str, Any]] | None = None
    # build() needs only ``num_classes`` and the task's InputSpec, never the training tensors (statistics of the
    # data go in TrainSetup.init_from_data, which runs on the clock): the runner then builds, compiles and warms
    # the model up on synthetic tensors before it touches the dataset (MLPerf's model initialization, outside
    # MLPerf's clock). False (the default, what a recipe file that reads the data in build needs): data first.
    builds_from_spec: bool = False

    def scaling_summary(self) -> str:
        if self.batch_scaling == "global":
            return "global batch fixed at batch_size (each of N devices takes batch_size / N); lr unchanged"
        return f"batch_size per device (global batch = N x batch_size); lr scaled {self.lr_scaling} with N"

    def hyperparameters(self, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        """The defaults with ``overrides`` applied, every value checked (ConfigError: one line)."""
        hp = dict(self.defaults)
        for key, value in (overrides or {}).items():
            if key not in hp:
                raise ConfigError(f"recipe {self.name} has no hyperparameter {key!r}; it has: {', '.join(hp)}")
            hp[key] = value
        for key, value in hp.items():
            self.check(key, value)
        return hp

    def limit(self, key: str) -> Range | None:
        """The range of a numeric hyperparameter (None for switches and text)."""
        default = self.defaults[key]
        if isinstance(default, bool) or not isinstance(default, (int, float)):
            return None
        return self.limits.get(key) or COMMON_LIMITS.get(key) or NON_NEGATIVE

    def check(self, key: str, value: Any) -> None:
        """ConfigError unless ``value`` is allowed for hyperparameter ``key`` (see Range)."""
        default = self.defaults[key]
        kind = _kind(default)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = number and isinstance(value, int)
        elif isinstance(default, float):
            ok = number
        else:
            ok = isinstance(value, type(default))
        if not ok:
            raise ConfigError(f"{key}={value!r}: expected {kind} (recipe {self.name})")
        limit = self.limit(key)
        if limit is None:
            return
        if not math.isfinite(value):
            raise ConfigError(f"{key}={value}: must be a finite number (recipe {self.name})")
        if value not in limit:
            raise ConfigError(f"{key}={value}: must be {kind} {limit} (recipe {self.name})")
        if isinstance(value, int) and value > INT_MAX:
            raise ConfigError(f"{key}={value}: too large, at most {INT_MAX} (recipe {self.name})")


# Filled on first use from every module of this package and the "daybreak.recipes" entry-point group.
RECIPES: Registry[Recipe] = Registry("recipe", package=__name__, entry_point_group="daybreak.recipes")


def get_recipe(name: str) -> Recipe:
    return RECIPES.get(name)


def recipe_names() -> list[str]:
    return RECIPES.names()


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
                value: Any = parse_bool_text(raw)  # true or false, as in a file
            elif isinstance(default, int):
                value = int(raw)
            elif isinstance(default, float):
                value = float(raw)
                if not math.isfinite(value):
                    raise ConfigError(f"--set {key}={raw}: must be a finite number")
            else:
                value = raw
        except ValueError:
            kind = "true or false" if isinstance(default, bool) else _kind(default)
            raise ConfigError(f"--set {key}={raw[:40]}: expected {kind}") from None
        out[key] = value
    return out
