"""A run, asked for (``RunConfig``: what a command line or a notebook says) and resolved once (``RunSpec``).

``resolve_run_spec`` is the one function that turns a request into a frozen, typed spec: the task and its
recipe (a registered name, or a user's recipe file, hashed), the checked hyperparameters, the target, the clock
rule set, the seed, the devices and the batch each of them takes, the price. ``run``, ``repeat``, ``lesion``,
``leaderboard reproduce`` and the torchrun workers all start from a spec; the workers receive it serialized
(``DAYBREAK_RUN_SPEC``) instead of parsing the command line again.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from daybreak.errors import ConfigError
from daybreak.recipes import RECIPES, Recipe, get_recipe
from daybreak.rules import DEFAULT_RULES, RULE_SETS
from daybreak.tasks import Task, get_task

SPEC_ENV = "DAYBREAK_RUN_SPEC"  # the serialized RunSpec handed to torchrun workers
DEFAULT_TIMEOUT_S = 300.0
COMPILE_MODES = ("off", "default", "reduce-overhead", "max-autotune")
# TF32 on by default: cuDNN already runs fp32 convolutions in TF32 unless told otherwise, so this makes fp32
# matmuls agree with them (one stated precision for the run); it only matters for math outside autocast (and for
# --amp off), on sm_80 and later, and every record says which setting ran.
DEFAULT_TF32 = True


def compile_mode(value: Any) -> str:
    """``--compile`` as a mode: True -> "default" and False/None -> "off" (older callers and records)."""
    if value is None or value is False:
        return "off"
    if value is True:
        return "default"
    mode = str(value).strip().lower()
    if mode not in COMPILE_MODES:
        raise ConfigError(f"--compile {value}: choose one of {', '.join(COMPILE_MODES)}")
    return mode


@dataclass
class RunConfig:
    """A run as asked for. Everything is optional but the task; ``resolve_run_spec`` checks it all."""

    task: str = "digits"
    recipe: str | None = None  # a registered recipe name or a path to a recipe file; default: the task's reference
    overrides: dict[str, Any] = field(default_factory=dict)  # hyperparameter overrides
    seed: int = 0
    target: float | None = None  # a fraction in (0, 1]; default: the task's
    data_dir: Path | None = None
    allow_custom_data: bool = False
    download: bool = True
    out: Path | None = None
    device: str = "auto"
    amp: str = "auto"
    compile: str | bool = "off"  # off | default | reduce-overhead | max-autotune (True = default)
    tf32: bool = DEFAULT_TF32  # fp32 matmuls/convolutions on TF32 tensor cores (sm_80+)
    threads: int | None = None
    eval_every_epochs: int | None = 1
    eval_every_steps: int | None = None
    rules: str = DEFAULT_RULES  # the rule set of the headline figures; every record holds all of them
    full_schedule: bool = False
    cost_per_hour: float | None = None
    instance: str | None = None
    price_file: Path | None = None
    idle_power_s: float = 2.0  # seconds of idle power sampled before the run (only where energy counters exist)
    quiet: bool = False
    author: str = ""
    author_email: str = ""
    command: list[str] = field(default_factory=list)
    dist_timeout_s: float = DEFAULT_TIMEOUT_S  # multi-process: a collective waiting longer ends the run


class RunSpec(BaseModel):
    """A resolved run: every value checked and final. Frozen; ``with_(...)`` makes a changed copy."""

    model_config = ConfigDict(frozen=True)

    task: str
    recipe: str
    recipe_file: str | None = None  # a user's recipe file (absolute), loaded again by every process
    recipe_sha256: str | None = None
    hyperparameters: dict[str, Any]
    target: float
    target_is_default: bool
    rules: str
    seed: int
    data_dir: str | None = None
    allow_custom_data: bool = False
    download: bool = True
    out: str | None = None
    device: str = "auto"
    amp: str = "auto"
    compile: str = "off"  # off | default | reduce-overhead | max-autotune
    tf32: bool = DEFAULT_TF32
    threads: int | None = None
    eval_every_epochs: int | None = 1
    eval_every_steps: int | None = None
    full_schedule: bool = False
    world_size: int = 1
    per_device_batch_size: int
    global_batch_size: int
    lr_scale: float = 1.0
    scaling: str = ""  # the recipe's rule in words
    cost_per_hour: float | None = None
    instance: str | None = None
    price_date: str | None = None
    price_warning: str | None = None
    idle_power_s: float = 2.0
    quiet: bool = False
    author: str = ""
    author_email: str = ""
    command: list[str] = []
    dist_timeout_s: float = DEFAULT_TIMEOUT_S

    @field_validator("compile", mode="before")
    @classmethod
    def _compile_mode(cls, value: Any) -> str:
        return compile_mode(value)

    @property
    def compiled(self) -> bool:
        return self.compile != "off"

    def with_(self, **changes: Any) -> "RunSpec":
        return self.model_copy(update=changes)

    def task_obj(self) -> Task:
        return get_task(self.task)

    def recipe_obj(self) -> Recipe:
        if self.recipe_file:
            load_recipe_file(self.recipe_file, expected_sha256=self.recipe_sha256)
        return get_recipe(self.recipe)


def parse_target(text: str | float) -> float:
    """``0.98`` (a fraction in (0, 1]) or ``98%`` (a percent in (0, 100]) -> a fraction. Anything else, a bare
    ``98`` included, is refused: a number means one thing only."""
    raw = str(text).strip()
    percent = raw.endswith("%")
    try:
        value = float(raw[:-1] if percent else raw)
    except ValueError:
        raise ConfigError(f"--target {raw!r}: write a fraction in (0, 1] (0.98) or a percent with % (98%)") from None
    if percent:
        if not (math.isfinite(value) and 0 < value <= 100):
            raise ConfigError(f"--target {raw}: a percent must be in (0%, 100%]")
        return value / 100.0
    if not (math.isfinite(value) and 0 < value <= 1):
        hint = f"; for a percent write {raw}%" if math.isfinite(value) and 1 < value <= 100 else ""
        raise ConfigError(f"--target {raw}: a fraction must be in (0, 1]{hint}")
    return value


def lr_scale(rule: str, batch_ratio: float) -> float:
    """How a recipe's learning rate follows its global batch: ``batch_ratio`` = the global batch used / the one
    the recipe's lr is given for."""
    if rule == "linear":
        return float(batch_ratio)
    if rule == "sqrt":
        return math.sqrt(batch_ratio)
    if rule == "none":
        return 1.0
    raise ConfigError(f"unknown lr scaling rule {rule!r} (linear, sqrt, none)")


def batch_split(recipe: Recipe, hp: dict[str, Any], world_size: int) -> tuple[int, int, float]:
    """(per-device batch, global batch, lr scale) on ``world_size`` processes, by the recipe's declared rule.

    ``batch_scaling="global"``: ``batch_size`` is the global batch; each device takes its share and the lr is
    unchanged, so N devices train exactly the schedule one device does. ``"per-device"``: each device takes
    ``batch_size``; the global batch grows with N and the lr follows it by ``lr_scaling``."""
    if recipe.batch_scaling == "global":
        per_device = hp["batch_size"] // world_size
        if per_device < 1:
            raise ConfigError(f"batch_size={hp['batch_size']} is the global batch of recipe {recipe.name}: it "
                              f"cannot be split over {world_size} processes")
        return per_device, per_device * world_size, 1.0
    return hp["batch_size"], hp["batch_size"] * world_size, lr_scale(recipe.lr_scaling, world_size)


def is_recipe_file(name: str | None) -> bool:
    return bool(name) and (str(name).endswith(".py") or os.sep in str(name) or "/" in str(name))


def load_recipe_file(path: str | os.PathLike, *, expected_sha256: str | None = None) -> tuple[str, str]:
    """Import a user's recipe file (it registers one recipe with ``RECIPES.add``, or defines ``RECIPE``);
    returns (recipe name, file SHA-256). Loading the same file twice returns what the first load registered."""
    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise ConfigError(f"--recipe {path}: no such file")
    digest = hashlib.sha256(file.read_bytes()).hexdigest()
    if expected_sha256 is not None and digest != expected_sha256:
        raise ConfigError(f"--recipe {file}: the file changed since the run was specified (SHA-256 differs)")
    module_name = f"daybreak_user_recipe_{digest[:16]}"
    if module_name in sys.modules:
        return sys.modules[module_name].__daybreak_recipe__, digest
    before = set(RECIPES.names())
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ConfigError(f"--recipe {file}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's code: one line, the file and the line
        sys.modules.pop(module_name, None)
        tb = e.__traceback__
        line = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == str(file):
                line = tb.tb_lineno
            tb = tb.tb_next
        where = f"{file}:{line}" if line else str(file)
        raise ConfigError(f"--recipe {where}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    added = sorted(set(RECIPES.names()) - before)
    recipe = getattr(module, "RECIPE", None)
    if isinstance(recipe, Recipe) and recipe.name not in RECIPES:
        RECIPES.add(recipe.name, recipe)
        added = [recipe.name]
    if len(added) != 1:
        sys.modules.pop(module_name, None)
        raise ConfigError(f"--recipe {file}: the file must register exactly one recipe (RECIPES.add or a "
                          f"RECIPE = Recipe(...) at module level); it registered {len(added)}")
    module.__daybreak_recipe__ = added[0]
    return added[0], digest


def resolve_run_spec(config: RunConfig, world_size: int | None = None) -> RunSpec:
    """Check everything a user can get wrong, before any work; one ConfigError line for each mistake."""
    from daybreak.pricing import resolve_price

    task = get_task(config.task)
    recipe_file = sha = None
    if is_recipe_file(config.recipe):
        name, sha = load_recipe_file(str(config.recipe))
        recipe_file = str(Path(str(config.recipe)).expanduser().resolve())
    else:
        name = config.recipe or task.reference_recipe
    recipe = get_recipe(name)
    if recipe.task != task.name:
        raise ConfigError(f"recipe {recipe.name} is for task {recipe.task}, not {task.name}")
    hp = recipe.hyperparameters(config.overrides)
    for key in ("batch_size", "epochs"):
        if not isinstance(hp.get(key), int) or hp[key] < 1:
            raise ConfigError(f"{key}={hp.get(key)}: must be an integer >= 1 (recipe {recipe.name})")
    if config.rules not in RULE_SETS:
        raise ConfigError(f"--rules {config.rules}: choose one of {', '.join(RULE_SETS)}")
    target = task.target if config.target is None else parse_target(config.target)
    if config.eval_every_steps is not None and config.eval_every_steps < 1:
        raise ConfigError("--eval-every-steps must be >= 1")
    if config.eval_every_steps is None and (config.eval_every_epochs or 0) < 1:
        raise ConfigError("--eval-every must be >= 1")
    if config.threads is not None and config.threads < 1:
        raise ConfigError(f"--threads {config.threads}: must be >= 1")
    if not (math.isfinite(config.idle_power_s) and 0 <= config.idle_power_s <= 60):
        raise ConfigError(f"--idle-power-seconds {config.idle_power_s}: must be in [0, 60]")
    if not (isinstance(config.seed, int) and 0 <= config.seed < 2**32):
        raise ConfigError(f"--seed {config.seed}: must be an integer in [0, 2**32 - 1]")
    try:
        price, instance, price_date = resolve_price(config.cost_per_hour, config.instance, config.price_file)
    except TypeError:  # an older pricing module without price files
        price, instance, price_date = resolve_price(config.cost_per_hour, config.instance)
    price_warning = _price_warning(config)
    world = world_size if world_size is not None else int(os.environ.get("WORLD_SIZE", "1"))
    per_device, global_batch, factor = batch_split(recipe, hp, world)
    return RunSpec(
        task=task.name, recipe=recipe.name, recipe_file=recipe_file, recipe_sha256=sha, hyperparameters=hp,
        target=target, target_is_default=target == task.target, rules=config.rules, seed=config.seed,
        data_dir=None if config.data_dir is None else str(Path(config.data_dir).expanduser()),
        allow_custom_data=config.allow_custom_data, download=config.download,
        out=None if config.out is None else str(config.out), device=config.device, amp=config.amp,
        compile=compile_mode(config.compile), tf32=bool(config.tf32), threads=config.threads, eval_every_epochs=config.eval_every_epochs,
        eval_every_steps=config.eval_every_steps, full_schedule=config.full_schedule, world_size=world,
        per_device_batch_size=per_device, global_batch_size=global_batch, lr_scale=factor,
        scaling=recipe.scaling_summary(), cost_per_hour=price, instance=instance, price_date=price_date,
        price_warning=price_warning,
        idle_power_s=config.idle_power_s, quiet=config.quiet, author=config.author, author_email=config.author_email, command=list(config.command),
        dist_timeout_s=config.dist_timeout_s,
    )


def _price_warning(config: RunConfig) -> str | None:
    """A GPU instance's price on a run that will not use a GPU (or the other way round)."""
    if not config.instance:
        return None
    try:
        import torch

        from daybreak.pricing import gpu_price_warning, lookup_instance

        entry = lookup_instance(config.instance, config.price_file)
        uses_gpu = config.device.startswith("cuda") or (config.device == "auto" and torch.cuda.is_available())
        return gpu_price_warning(entry, uses_gpu)
    except Exception:  # noqa: BLE001 - the price itself was already resolved; a warning is optional
        return None
