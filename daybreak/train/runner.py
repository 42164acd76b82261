"""The timed time-to-accuracy run: load, build, (warm up), then train under the clock until the target.

The loop in ``_train`` is deliberately plain; recording (result.json, DAWNBench files, mllog, checkpoint)
hangs off it in ``RunRecorder`` and the progress bar in ``Progress``.
"""

from __future__ import annotations

import copy
import math
import random
import signal
import time
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch

from daybreak.errors import ConfigError
from daybreak.measure.context import ContextSampler, file_sha256, git_state, package_versions
from daybreak.measure.device import autocast, resolve_amp, select_device, set_threads
from daybreak.measure.system import system_info
from daybreak.pricing import resolve_price
from daybreak.recipes import Recipe, TrainSetup, default_recipe_for, get_recipe
from daybreak.records.run import ClockRules, MeasurementContext, RunResult
from daybreak.rules import DEFAULT_RULES, RULE_SETS, get_rules
from daybreak.tasks import Task, get_task
from daybreak.train.clock import Timeline
from daybreak.train.distributed import (DEFAULT_TIMEOUT_S, DistContext, Terminated, destroy, init_distributed,
                                        injected_fault_step)
from daybreak.train.batches import BatchPlan, Evaluator, TrainBatches, evaluator_for, train_batches_for
from daybreak.train.evaluate import evaluate
from daybreak.train.recorder import RunRecorder

# Exit statuses of `daybreak run` (also used by wrappers such as `repeat`).
EXIT_REACHED = 0
EXIT_USER_ERROR = 2
EXIT_NOT_REACHED = 3
EXIT_DIVERGED = 4
EXIT_FAILED = 5
EXIT_INTERRUPTED = 130

EXIT_CODES = {"reached": EXIT_REACHED, "not_reached": EXIT_NOT_REACHED, "diverged": EXIT_DIVERGED,
              "failed": EXIT_FAILED, "interrupted": EXIT_INTERRUPTED}


@dataclass
class RunConfig:
    task: str = "digits"
    recipe: str | None = None  # default: the task's reference recipe
    overrides: dict[str, Any] = field(default_factory=dict)  # hyperparameter overrides
    seed: int = 0
    target: float | None = None  # fraction or percent; default: the task's
    data_dir: Path | None = None
    allow_custom_data: bool = False
    download: bool = True
    out: Path | None = None
    device: str = "auto"
    amp: str = "auto"
    compile: bool = False
    threads: int | None = None
    eval_every_epochs: int | None = 1
    eval_every_steps: int | None = None
    rules: str = DEFAULT_RULES  # the rule set of the headline figures; every record holds all of them
    full_schedule: bool = False
    cost_per_hour: float | None = None
    instance: str | None = None
    quiet: bool = False
    author: str = ""
    author_email: str = ""
    command: list[str] = field(default_factory=list)
    dist_timeout_s: float = DEFAULT_TIMEOUT_S  # multi-process: a collective waiting longer ends the run


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


def normalize_target(target: float | str) -> float:
    """Kept for callers that pass a number: the same rule as ``parse_target``."""
    return parse_target(target)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def default_run_dir(task: str, recipe: str, when: datetime) -> Path:
    base = Path("runs") / f"{task}-{recipe}-{when.strftime('%Y%m%d-%H%M%S')}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def reusable_out_dir(out: Path) -> bool:
    """A run directory that holds only a run that failed before training started (a data or set-up error):
    the same ``--out`` may be used again, and the failed record is replaced."""
    try:
        result = RunResult.load(out)
    except Exception:  # noqa: BLE001 - not a daybreak run: not reusable
        return False
    return result.status == "failed" and not result.history and not any(p.phase == "train" for p in result.phases)


def _check_out_dir(out: Path) -> bool:
    """Refuse an ``--out`` that would overwrite a run; returns True when it holds a failed start to replace."""
    try:
        if out.exists() and not out.is_dir():
            raise ConfigError(f"--out {out}: exists and is not a directory")
        if out.exists() and any(out.iterdir()):
            if reusable_out_dir(out):
                return True
            raise ConfigError(f"--out {out}: directory is not empty; choose a new one so no earlier run is "
                              "overwritten")
        parent = out.resolve().parent
        probe = parent
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if not probe.is_dir():
            raise ConfigError(f"--out {out}: {probe} is not a directory")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise ConfigError(f"--out {out}: {probe} is not writable")
    except OSError as e:
        raise ConfigError(f"--out {out}: {e.strerror or e}") from None
    return False


def run(config: RunConfig) -> RunResult:
    """Do one timed run and return its record (also written to the run directory)."""
    wall_start_ns = time.perf_counter_ns()
    started_at = datetime.now(timezone.utc)

    # --- everything a user can get wrong is checked before any work -------------------------------------
    task: Task = get_task(config.task)
    recipe: Recipe = get_recipe(config.recipe or default_recipe_for(task.name))
    if recipe.task != task.name:
        raise ConfigError(f"recipe {recipe.name} is for task {recipe.task}, not {task.name}")
    hp = recipe.hyperparameters(config.overrides)
    for key in ("batch_size", "epochs"):
        if not isinstance(hp[key], int) or hp[key] < 1:
            raise ConfigError(f"{key}={hp[key]}: must be an integer >= 1")
    if config.rules not in RULE_SETS:
        raise ConfigError(f"--rules {config.rules}: choose one of {', '.join(RULE_SETS)}")
    target = task.target if config.target is None else normalize_target(config.target)
    if config.eval_every_steps is not None and config.eval_every_steps < 1:
        raise ConfigError("--eval-every-steps must be >= 1")
    if config.eval_every_steps is None and (config.eval_every_epochs or 0) < 1:
        raise ConfigError("--eval-every must be >= 1")
    price, instance, price_date = resolve_price(config.cost_per_hour, config.instance)
    set_threads(config.threads)
    ctx, rank_device = init_distributed(config.device, config.dist_timeout_s)  # single process: no-op
    try:
        return _run(config, task, recipe, hp, target, price, instance, price_date, ctx, rank_device,
                    wall_start_ns, started_at)
    finally:
        destroy(ctx)


def lr_scale(rule: str, batch_ratio: float) -> float:
    """How a recipe's learning rate follows the global batch: ``batch_ratio`` = the global batch actually used /
    the recipe's reference global batch (1 for recipes that keep their global batch fixed)."""
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


def _run(config: RunConfig, task: Task, recipe: Recipe, hp: dict[str, Any], target: float, price: float | None,
         instance: str | None, price_date: str | None, ctx: DistContext, rank_device: torch.device | None,
         wall_start_ns: int, started_at: datetime) -> RunResult:
    device = rank_device or select_device(config.device)
    amp = resolve_amp(config.amp, device)
    if amp == "fp16" and device.type == "mps":
        raise ConfigError("--amp fp16 with gradient scaling is not supported on MPS; use bf16 or off")
    out = config.out or default_run_dir(task.name, recipe.name, started_at)
    replace_failed = _check_out_dir(out) if ctx.is_main else False
    config.out = out  # the caller learns where the run directory is
    per_device_batch, global_batch, lr_factor = batch_split(recipe, hp, ctx.world_size)

    unofficial: list[str] = []
    if target != task.target:
        unofficial.append(f"target {target:.4f} differs from the task's {task.target:.4f}")

    result = RunResult(
        run_id=out.name,
        task=task.name,
        recipe=recipe.name,
        model=recipe.model,
        framework=f"PyTorch {torch.__version__.split('+')[0]}",
        metric=task.metric.name,
        target=target,
        target_is_default=target == task.target,
        official=not unofficial,
        unofficial_reasons=unofficial,
        hyperparameters=hp,
        seed=config.seed,
        device=str(device),
        amp=amp,
        compile=config.compile,
        threads=torch.get_num_threads(),
        world_size=ctx.world_size,
        nodes=ctx.nodes,
        backend=ctx.backend,
        per_device_batch_size=per_device_batch,
        global_batch_size=global_batch,
        lr_scaling=recipe.scaling_summary(),
        lr_scale=lr_factor,
        stop_at_target=not config.full_schedule,
        eval_every_epochs=None if config.eval_every_steps else config.eval_every_epochs,
        eval_every_steps=config.eval_every_steps,
        cost_per_hour=price,
        instance=instance,
        price_date=price_date,
        clock=_clock_rules(config.rules),
        rules=config.rules,
        context=_static_context(recipe),
        system=system_info(),
        started_at=started_at,
        command=config.command,
    )
    timeline = Timeline(device, wall_start_ns)
    recorder = RunRecorder(out, result, timeline, author=config.author, author_email=config.author_email,
                           write=ctx.is_main, benchmark=mllog_benchmark(recipe, task, target),
                           replace_failed=replace_failed)
    sampler = ContextSampler().start()
    old_term = _on_sigterm(ctx)
    try:
        _run_recorded(config, task, recipe, hp, device, amp, ctx, recorder, wall_start_ns)
    except KeyboardInterrupt:
        recorder.finish("interrupted", "interrupted by the user (Ctrl-C)", wall_start_ns)
    except _SigTerm:
        recorder.finish("interrupted", "terminated by SIGTERM", wall_start_ns)
    except Terminated as e:
        recorder.finish("failed", str(e), wall_start_ns)
        raise
    except BaseException as e:  # a user error found late (e.g. bad data), a bug or a crash: record, re-raise
        recorder.finish("failed", (f"{type(e).__name__}: {e}".splitlines() or [""])[0][:500], wall_start_ns)
        raise
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
        _finish_context(recorder, sampler)
        recorder.close()
    return recorder.result


class _SigTerm(BaseException):
    """SIGTERM in a single-process run (schedulers, `timeout`, container stops): recorded like Ctrl-C."""


def _on_sigterm(ctx: DistContext) -> Any:
    """Single process, main thread: SIGTERM raises _SigTerm so the run is recorded ``interrupted``. Under torchrun
    the distributed module's own handler (Terminated) stays in place."""
    import threading

    if ctx.enabled or threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: Any) -> None:
        raise _SigTerm()

    return signal.signal(signal.SIGTERM, handler)


def _clock_rules(rules: str) -> ClockRules:
    r = get_rules(rules)
    return ClockRules(
        starts=("when data loading starts (the first touch of the dataset)" if r.contiguous else
                "when data loading starts; data loading, model init and compile/warm-up count"),
        init_excluded=not r.inside["model_init"],
        eval_included=r.inside["eval"],
        checkpoint_included=r.inside["record"],
        stops="at the end of the first evaluation whose accuracy is at or above the target",
    )


def mllog_benchmark(recipe: Recipe, task: Task, target: float) -> str:
    """An MLPerf benchmark name only when the run follows that benchmark's definition (metric and target);
    otherwise a daybreak benchmark name, so MLPerf tools never read daybreak's metric as theirs."""
    claim = recipe.mllog_benchmark
    if claim and recipe.mllog_metric == task.metric.name and recipe.mllog_target is not None \
            and target >= recipe.mllog_target:
        return claim
    return f"daybreak_{task.name}"


def _static_context(recipe: Recipe) -> MeasurementContext:
    """What is known before the run: the code (git state of the recipe's file) and the packages."""
    import inspect

    try:
        recipe_file = inspect.getsourcefile(recipe.build)
    except TypeError:
        recipe_file = None
    commit, dirty = git_state(recipe_file) if recipe_file else (None, None)
    return MeasurementContext(git_commit=commit, git_dirty=dirty, packages=package_versions(),
                              recipe_file=recipe_file, recipe_sha256=file_sha256(recipe_file) if recipe_file else None,
                              threads_used=torch.get_num_threads(), interop_threads=torch.get_num_interop_threads())


def _finish_context(recorder: RunRecorder, sampler: ContextSampler) -> None:
    r = recorder.result
    try:
        fields = sampler.stop()
    except Exception:  # noqa: BLE001 - context is informative; never lose a result over it
        return
    warnings = fields.pop("warnings", [])
    for key, value in fields.items():
        setattr(r.context, key, value)
    r.context.warnings = warnings
    r.warnings.extend(w for w in warnings if w not in r.warnings)
    recorder.save()


def _run_recorded(config: RunConfig, task: Task, recipe: Recipe, hp: dict[str, Any], device: torch.device,
                  amp: str, ctx: DistContext, recorder: RunRecorder, wall_start_ns: int) -> None:
    seed_everything(config.seed)
    recorder.run_start()  # ---- data loading: the first touch of the dataset --------------------------------
    data = task.load(config.data_dir, config.allow_custom_data, config.download)
    if not data.official:
        recorder.mark_unofficial("data does not match the official checksums (--allow-custom-data)")
    recorder.result.data_source = data.source
    recorder.result.data_notes = list(data.notes)
    recorder.data_loaded()

    recorder.phase_start("model_init")  # ---- model, optimizer, distribution wrapper ------------------------
    setup = recipe.build(hp, data, device)
    recorder.data_checked(recipe.mllog_events(hp, data, recorder.result.global_batch_size or 1)
                          if recipe.mllog_events is not None else {},
                          train_samples=None if data.train_x is None else len(data.train_x),
                          eval_samples=len(data.eval_y))
    train_model: torch.nn.Module = setup.model
    if ctx.enabled:  # gradients all-reduced across ranks; rank 0's initial weights broadcast to all
        train_model = torch.nn.parallel.DistributedDataParallel(
            setup.model, device_ids=[device.index] if device.type == "cuda" else None)
    if config.compile:
        train_model = torch.compile(train_model)
    plan = BatchPlan(setup=setup, batch_size=recorder.result.per_device_batch_size or hp["batch_size"],
                     epochs=hp["epochs"], seed=config.seed, device=device, amp=amp, ctx=ctx)
    batches = train_batches_for(task, data, plan)
    evaluator = evaluator_for(task, data, plan)
    _record_effective(recorder, batches, data, ctx, hp)
    recorder.phase_end("model_init")

    recorder.phase_start("warmup")  # ---- compile / autotune on the exact shapes of the real batches -------
    if config.compile or device.type == "cuda":
        _warm_up(setup, train_model, batches, evaluator, data, plan)
    ctx.barrier()
    recorder.phase_end("warmup")
    compiles_before = _compile_count()
    recorder.training_ready()

    _train(config, task, hp, setup, train_model, batches, evaluator, device, amp, ctx, recorder)
    if config.compile:
        recorder.result.recompiles_under_clock = _compile_count() - compiles_before
        if recorder.result.recompiles_under_clock:
            recorder.result.warnings.append(
                f"torch.compile compiled {recorder.result.recompiles_under_clock} more time(s) during training or "
                "evaluation: that compile time is inside the training phase")
    recorder.finish_from_history(wall_start_ns)


def _compile_count() -> int:
    """Frames dynamo has compiled so far in this process (recompilations included)."""
    try:
        from torch._dynamo.utils import counters

        return int(counters["frames"]["total"])
    except Exception:  # noqa: BLE001 - no dynamo: nothing compiles
        return 0


def _record_effective(recorder: RunRecorder, batches: TrainBatches, data: Any, ctx: DistContext,
                      hp: dict[str, Any]) -> None:
    """What the data source actually does, which may differ from what was asked (a small dataset)."""
    r = recorder.result
    r.steps_per_epoch = batches.steps_per_epoch
    effective = getattr(batches, "batch_size", None)
    if isinstance(effective, int):
        r.effective_batch_size = effective
        r.global_batch_size = effective * ctx.world_size
        if effective < (r.per_device_batch_size or effective):
            r.warnings.append(f"the training set is smaller than one batch per device: batch {effective} per "
                              f"device was used, not {r.per_device_batch_size}")
    if data.train_x is not None:
        r.train_examples = int(len(data.train_x))


def _warm_up(setup: TrainSetup, model: torch.nn.Module, batches: TrainBatches, evaluator: Evaluator, data: Any,
             plan: BatchPlan) -> None:
    """Compile / autotune on tensors of exactly the real batches' shapes, dtypes and memory layouts (from the
    batch source and evaluator themselves, on synthetic values), then restore the initial weights and optimizer
    state. Three training steps (the optimizer's first step differs from later ones), then one evaluation."""
    model_state = copy.deepcopy(setup.model.state_dict())
    opt_state = copy.deepcopy(setup.optimizer.state_dict())
    device, amp = plan.device, plan.amp
    scaler = torch.amp.GradScaler(device.type, enabled=amp == "fp16")
    examples = getattr(batches, "warmup_batches", None)
    pairs = list(examples()) if examples is not None else _fallback_warmup_batches(data, plan)
    model.train()
    for i in range(3):
        for x, y in pairs:
            with autocast(device, amp):
                loss = setup.loss_fn(model(x), y)
            setup.optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(setup.optimizer)
            scaler.update()
    eval_model = setup.model if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model
    warm_eval = getattr(evaluator, "warm_up", None)
    if warm_eval is not None:
        warm_eval(eval_model)
    else:
        x, y = pairs[0]
        evaluate(eval_model, x, y, device=device, amp=amp, predict=setup.predict)
    setup.model.load_state_dict(model_state)
    setup.optimizer.load_state_dict(opt_state)
    setup.optimizer.zero_grad(set_to_none=True)


def _fallback_warmup_batches(data: Any, plan: BatchPlan) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """For batch sources without ``warmup_batches``: zeros of the eval inputs' shape at the training batch size."""
    n = max(min(plan.batch_size, len(data.eval_x)), 1)
    raw = torch.zeros((n, *data.eval_x.shape[1:]), dtype=data.eval_x.dtype, device=plan.device)
    y = data.eval_y[torch.arange(n) % max(len(data.eval_y), 1)].to(plan.device)
    return [(plan.setup.prepare(raw), y)]


def _train(config: RunConfig, task: Task, hp: dict[str, Any], setup: TrainSetup, model: torch.nn.Module,
           batches: TrainBatches, evaluator: Evaluator, device: torch.device, amp: str, ctx: DistContext,
           recorder: RunRecorder) -> None:
    steps_per_epoch = batches.steps_per_epoch
    total_steps = steps_per_epoch * hp["epochs"]
    eval_every_steps = config.eval_every_steps or steps_per_epoch * (config.eval_every_epochs or 1)
    base_lrs = [g["lr"] * recorder.result.lr_scale for g in setup.optimizer.param_groups]
    scaler = torch.amp.GradScaler(device.type, enabled=amp == "fp16")
    eval_model = setup.model if ctx.enabled else model  # DDP forwards must match across ranks; eval shards don't
    loss_sum = torch.zeros((), device=device)
    loss_count = 0
    fault_step = injected_fault_step(ctx)
    headline = get_rules(recorder.result.rules)

    def mean_loss_since_last_eval() -> float:  # over all ranks; reads the device (a sync)
        return ctx.all_reduce_sum(loss_sum.clone()).item() / (max(loss_count, 1) * ctx.world_size)

    progress = recorder.progress(total_steps, enabled=not config.quiet)
    recorder.train_start()  # ---- training: the next line prepares the training data on the device -------
    batches.start()
    model.train()
    step = 0
    for epoch in range(hp["epochs"]):
        recorder.epoch_start(epoch + 1)
        for x, y in batches.epoch(epoch):
            factor = setup.lr_multiplier(step, total_steps)
            for group, base in zip(setup.optimizer.param_groups, base_lrs):
                group["lr"] = base * factor
            with autocast(device, amp):
                loss = setup.loss_fn(model(x), y)
            setup.optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(setup.optimizer)
            scaler.update()
            step += 1
            if step == fault_step:
                raise RuntimeError(f"injected fault on rank {ctx.rank} at step {step} (DAYBREAK_FAULT_INJECT)")
            loss_sum += loss.detach().float()
            loss_count += 1
            if progress.due(step):
                mean_loss = mean_loss_since_last_eval()
                if not math.isfinite(mean_loss):
                    recorder.train_pause()
                    return recorder.diverged(step)
                progress.update(step, epoch=step / steps_per_epoch, loss=mean_loss,
                                elapsed_s=recorder.timeline.read(headline))
            if step % eval_every_steps != 0 and step != total_steps:
                continue
            # ---- evaluation: its own phase; each rule set decides whether it counts ------------------------
            recorder.train_pause()
            mean_loss = mean_loss_since_last_eval()
            if not math.isfinite(mean_loss):
                return recorder.diverged(step)
            recorder.eval_start(step / steps_per_epoch)
            ctx.broadcast_buffers(setup.model)  # every rank evaluates rank 0's weights
            metrics = evaluator(eval_model)
            record = recorder.evaluated(step / steps_per_epoch, step, metrics, mean_loss, setup.model)
            progress.update(step, epoch=record.epoch, loss=mean_loss, elapsed_s=record.elapsed_s,
                            accuracy=record.accuracy)
            loss_sum.zero_()
            loss_count = 0
            if recorder.result.reached and not config.full_schedule:
                progress.close()
                return None
            recorder.train_start()
        recorder.epoch_stop(epoch + 1)
    if recorder.timeline.is_open("train"):
        recorder.train_pause()
    progress.close()
    return None
