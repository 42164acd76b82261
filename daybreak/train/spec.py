"""A run, asked for (``daybreak.config.RunConfig``: every option, declared once) and resolved once (``RunSpec``).

``resolve_run_spec`` is the one function that turns a request into a frozen, typed spec: the task and its
recipe (a registered name, or a user's recipe file, hashed), the checked hyperparameters, the target, the clock
rule set, the seed, the devices and the batch each of them takes, the price. ``run``, the trials of every
experiment, ``leaderboard reproduce`` and the torchrun workers all start from a spec; the workers receive it
serialized (``DAYBREAK_RUN_SPEC``) instead of parsing the command line again, and every run directory holds it as
``config.toml``, which ``daybreak run --config`` reads back.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import ConfigDict

from daybreak.config import COMPILE_MODES, DEFAULT_TF32, RunConfig, compile_mode  # noqa: F401 (re-exported)
from daybreak.errors import ConfigError
from daybreak.launch import LaunchSpec
from daybreak.options import to_toml
from daybreak.plugins import import_file, not_a_file
from daybreak.recipes import RECIPES, Recipe, get_recipe, parse_overrides
from daybreak.tasks import Task, get_task

SPEC_ENV = "DAYBREAK_RUN_SPEC"  # the serialized RunSpec handed to torchrun workers
CONFIG_FILE = "config.toml"  # every run directory's resolved options: `daybreak run --config DIR/config.toml`


class RunSpec(RunConfig):
    """A resolved run: every option of ``RunConfig`` checked and final (``recipe`` is the registered name, ``target``
    a fraction, ``overrides`` typed), plus what resolving adds. Frozen; ``with_(...)`` makes a changed copy."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    recipe: str
    target: float
    recipe_file: str | None = None  # a user's recipe file (absolute), loaded again by every process
    hyperparameters: dict[str, Any]
    target_is_default: bool
    world_size: int = 1
    per_device_batch_size: int
    global_batch_size: int
    lr_scale: float = 1.0
    scaling: str = ""  # the recipe's rule in words
    price_date: str | None = None
    price_warning: str | None = None

    @property
    def compiled(self) -> bool:
        return self.compile != "off"

    def task_obj(self) -> Task:
        return get_task(self.task)

    def recipe_obj(self) -> Recipe:
        if self.recipe_file:
            return file_recipe(self.recipe_file, expected_sha256=self.recipe_sha256)
        return get_recipe(self.recipe)

    def launch(self) -> LaunchSpec:
        return LaunchSpec(self.nproc_per_node, self.nnodes, self.node_rank, self.rdzv_endpoint)

    def reproducing_config(self) -> dict[str, Any]:
        """The options that make this run again (its config.toml): the recipe (a file pinned by its SHA-256), every
        hyperparameter as an override, the resolved target, seed and price; not where its output went."""
        values = {name: getattr(self, name) for name, opt in RunConfig.options().items() if opt.recorded}
        values["recipe"] = self.recipe_file or self.recipe
        values["overrides"] = dict(self.hyperparameters)
        values["init_from"] = None  # already among the hyperparameters
        return values

    def config_toml(self) -> str:
        header = [f"daybreak run {self.task}: the resolved options of this run (every hyperparameter pinned).",
                  "Run it again: daybreak run --config THIS_FILE [--out NEW_DIR]; flags given there override it."]
        return to_toml(self.reproducing_config(), RunConfig, header)


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


USER_RECIPE_MODULE = "daybreak_user_recipe_"  # + the file's SHA-256 (16 hex digits): one module per content


def load_recipe_file(path: str | os.PathLike[str], *, expected_sha256: str | None = None) -> tuple[str, str]:
    """Import a user's recipe file (it registers one recipe with ``RECIPES.add``, or defines ``RECIPE``);
    returns (recipe name, file SHA-256). Loading the same file twice returns what the first load registered.
    Two different files may register the same name (one recipe file at two commits, ``daybreak ab --a-commit
    --b-commit``): the later one takes the name in the registry, and each file keeps its own recipe
    (``file_recipe``), which is what a run of that file uses. A name of daybreak's own or a plug-in's stays
    taken."""
    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise ConfigError(f"--recipe {path}: {not_a_file(file)}")
    digest = hashlib.sha256(file.read_bytes()).hexdigest()
    if expected_sha256 is not None and digest != expected_sha256:
        raise ConfigError(f"--recipe {file}: the file changed since the run was specified (SHA-256 differs)")
    module_name = f"{USER_RECIPE_MODULE}{digest[:16]}"
    if module_name in sys.modules:
        return sys.modules[module_name].__daybreak_recipe__, digest
    from_files = {n for n in RECIPES.names() if (RECIPES.origin(n) or "").startswith(USER_RECIPE_MODULE)}
    with RECIPES.replaceable(from_files):
        module = import_file(file, module_name, "--recipe")
        added = [n for n in RECIPES.names() if RECIPES.origin(n) == module_name]
        recipe = getattr(module, "RECIPE", None)
        if isinstance(recipe, Recipe) and not added and (recipe.name not in RECIPES or recipe.name in from_files):
            RECIPES.add(recipe.name, recipe)
            added = [recipe.name]
    if len(added) != 1:
        sys.modules.pop(module_name, None)
        raise ConfigError(f"--recipe {file}: the file must register exactly one recipe (RECIPES.add or a "
                          f"RECIPE = Recipe(...) at module level); it registered {len(added)}")
    setattr(module, "__daybreak_recipe__", added[0])  # (which recipe this file registered)
    setattr(module, "__daybreak_recipe_obj__", RECIPES.get(added[0]))  # (and the recipe itself)
    return added[0], digest


def file_recipe(path: str | os.PathLike[str], *, expected_sha256: str | None = None) -> Recipe:
    """The recipe a user's recipe file registered (loading it if needed): this file's, even when another file
    registered the same name later."""
    _, digest = load_recipe_file(path, expected_sha256=expected_sha256)
    recipe: Recipe = sys.modules[f"{USER_RECIPE_MODULE}{digest[:16]}"].__daybreak_recipe_obj__
    return recipe


def resolve_run_spec(config: RunConfig, world_size: int | None = None) -> RunSpec:
    """Check everything a user can get wrong, before any work; one ConfigError line for each mistake. (Each option
    alone was checked when the RunConfig was built; this checks what depends on the recipe, the price, the world.)"""
    from daybreak.pricing import resolve_price

    task = get_task(config.task)
    task.check_data_dir(config.data_dir)
    recipe_file = sha = None
    if is_recipe_file(config.recipe):
        _, sha = load_recipe_file(str(config.recipe), expected_sha256=config.recipe_sha256)
        recipe_file = str(Path(str(config.recipe)).expanduser().resolve())
        recipe = file_recipe(recipe_file, expected_sha256=sha)
    else:
        if config.recipe_sha256 is not None:
            raise ConfigError(f"--recipe-sha256 pins a recipe file; {config.recipe or task.reference_recipe} is a "
                              f"registered recipe")
        recipe = get_recipe(config.recipe or task.reference_recipe)
    if recipe.task != task.name:
        raise ConfigError(f"recipe {recipe.name} is for task {recipe.task}, not {task.name}")
    overrides = typed_overrides(recipe, config.overrides)
    if config.init_from is not None:
        if "init_from" not in recipe.defaults:
            raise ConfigError(f"--init-from: recipe {recipe.name} has no init_from hyperparameter")
        overrides["init_from"] = str(config.init_from.expanduser().resolve())
    hp = recipe.hyperparameters(overrides)
    for key in ("batch_size", "epochs"):
        if not isinstance(hp.get(key), int) or hp[key] < 1:
            raise ConfigError(f"{key}={hp.get(key)}: must be an integer >= 1 (recipe {recipe.name})")
    target = task.target if config.target is None else config.target
    launch = LaunchSpec(config.nproc_per_node, config.nnodes, config.node_rank, config.rdzv_endpoint).validate()
    price, instance, price_date = resolve_price(config.cost_per_hour, config.instance, config.price_file)
    world = world_size if world_size is not None else int(os.environ.get("WORLD_SIZE", launch.world_size))
    per_device, global_batch, factor = batch_split(recipe, hp, world)
    values = {name: getattr(config, name) for name in RunConfig.model_fields}
    values.update(
        recipe=recipe.name, recipe_file=recipe_file, recipe_sha256=sha, overrides=overrides, hyperparameters=hp,
        target=target, target_is_default=target == task.target, world_size=world, per_device_batch_size=per_device,
        global_batch_size=global_batch, lr_scale=factor, scaling=recipe.scaling_summary(), cost_per_hour=price,
        instance=instance, price_date=price_date, price_warning=_price_warning(config),
        author=config.author if config.author is not None else user_name(),
    )
    return RunSpec(**values)


def typed_overrides(recipe: Recipe, overrides: dict[str, Any]) -> dict[str, Any]:
    """Overrides from a flag (text) or a file/the API (typed): text typed by the recipe's defaults, the way
    ``--set`` reads it; typed values as given (``Recipe.hyperparameters`` checks them)."""
    text = [f"{k}={v}" for k, v in overrides.items() if isinstance(v, str) and not isinstance(recipe.defaults.get(k), str)]
    out = {k: v for k, v in overrides.items() if not (isinstance(v, str) and not isinstance(recipe.defaults.get(k), str))}
    out.update(parse_overrides(text, recipe.defaults))
    unknown = [k for k in out if k not in recipe.defaults]
    if unknown:
        from daybreak.options import unknown_key_message

        raise ConfigError(f"recipe {recipe.name}: " + unknown_key_message(unknown[0], recipe.defaults, "hyperparameter"))
    return out


def user_name() -> str:
    try:
        import getpass

        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name is fine
        return ""


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
