"""The timed time-to-accuracy run: load, build, (warm up), then train under the clock until the target.

The loop in ``_train`` is deliberately plain; recording (result.json, DAWNBench files, mllog, checkpoint)
hangs off it in ``RunRecorder`` and the progress bar in ``Progress``.
"""

from __future__ import annotations

import copy
import math
import random
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch

from daybreak.errors import ConfigError
from daybreak.measure.device import autocast, resolve_amp, select_device, set_threads
from daybreak.measure.system import system_info
from daybreak.pricing import resolve_price
from daybreak.recipes import Recipe, TrainSetup, default_recipe_for, get_recipe
from daybreak.records.run import ClockRules, EpochRecord, RunResult
from daybreak.tasks import Task, get_task
from daybreak.train.clock import Stopwatch, TrainingClock
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
    count_eval: bool = False
    full_schedule: bool = False
    cost_per_hour: float | None = None
    instance: str | None = None
    quiet: bool = False
    author: str = ""
    author_email: str = ""
    command: list[str] = field(default_factory=list)
    dist_timeout_s: float = DEFAULT_TIMEOUT_S  # multi-process: a collective waiting longer ends the run


def normalize_target(target: float) -> float:
    """Accept 0.98 or 98 (percent); return a fraction in (0, 1]."""
    if not math.isfinite(target) or target <= 0 or target > 100:
        raise ConfigError(f"--target {target}: give a fraction (0.98) or a percent (98), in (0, 100]")
    return target / 100.0 if target > 1 else float(target)


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


def _check_out_dir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out}: directory is not empty; choose a new one so no earlier run is overwritten")


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


def lr_scale(rule: str, world_size: int) -> float:
    """How a recipe's learning rate follows the global batch (world_size x per-device batch)."""
    if rule == "linear":
        return float(world_size)
    if rule == "sqrt":
        return math.sqrt(world_size)
    if rule == "none":
        return 1.0
    raise ConfigError(f"unknown lr scaling rule {rule!r} (linear, sqrt, none)")


def _run(config: RunConfig, task: Task, recipe: Recipe, hp: dict[str, Any], target: float, price: float | None,
         instance: str | None, price_date: str | None, ctx: DistContext, rank_device: torch.device | None,
         wall_start_ns: int, started_at: datetime) -> RunResult:
    device = rank_device or select_device(config.device)
    amp = resolve_amp(config.amp, device)
    if amp == "fp16" and device.type == "mps":
        raise ConfigError("--amp fp16 with gradient scaling is not supported on MPS; use bf16 or off")
    out = config.out or default_run_dir(task.name, recipe.name, started_at)
    if ctx.is_main:
        _check_out_dir(out)
    config.out = out  # the caller learns where the run directory is

    unofficial: list[str] = []
    if target != task.target:
        unofficial.append(f"target {target:.4f} differs from the task's {task.target:.4f}")

    result = RunResult(
        run_id=out.name,
        task=task.name,
        recipe=recipe.name,
        model=recipe.model,
        framework=f"PyTorch {torch.__version__.split('+')[0]}",
        metric=task.metric,
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
        per_device_batch_size=hp["batch_size"],
        global_batch_size=hp["batch_size"] * ctx.world_size,
        lr_scaling=recipe.lr_scaling,
        lr_scale=lr_scale(recipe.lr_scaling, ctx.world_size),
        stop_at_target=not config.full_schedule,
        eval_every_epochs=None if config.eval_every_steps else config.eval_every_epochs,
        eval_every_steps=config.eval_every_steps,
        cost_per_hour=price,
        instance=instance,
        price_date=price_date,
        clock=ClockRules(eval_included=config.count_eval),
        system=system_info(),
        started_at=started_at,
        command=config.command,
    )
    recorder = RunRecorder(out, result, author=config.author, author_email=config.author_email, write=ctx.is_main,
                           benchmark=recipe.mllog_benchmark)
    try:
        _run_recorded(config, task, recipe, hp, device, amp, ctx, recorder, wall_start_ns)
    except KeyboardInterrupt:
        recorder.finish("interrupted", "interrupted by the user (Ctrl-C)", wall_start_ns)
    except Terminated as e:
        recorder.finish("failed", str(e), wall_start_ns)
        raise
    except BaseException as e:  # a user error found late (e.g. bad data), a bug or a crash: record, re-raise
        recorder.finish("failed", (f"{type(e).__name__}: {e}".splitlines() or [""])[0][:500], wall_start_ns)
        raise
    finally:
        recorder.close()
    return recorder.result


def _run_recorded(config: RunConfig, task: Task, recipe: Recipe, hp: dict[str, Any], device: torch.device,
                  amp: str, ctx: DistContext, recorder: RunRecorder, wall_start_ns: int) -> None:
    recorder.init_start()
    seed_everything(config.seed)
    data = task.load(config.data_dir, config.allow_custom_data, config.download)
    if not data.official:
        recorder.mark_unofficial("data does not match the official checksums (--allow-custom-data)")
    recorder.result.data_source = data.source
    recorder.result.data_notes = list(data.notes)
    setup = recipe.build(hp, data, device)
    if recipe.mllog_events is not None:
        for key, value in recipe.mllog_events(hp, data, hp["batch_size"] * ctx.world_size).items():
            recorder.mllog.event(key, value)
    train_model: torch.nn.Module = setup.model
    if ctx.enabled:  # gradients all-reduced across ranks; rank 0's initial weights broadcast to all
        train_model = torch.nn.parallel.DistributedDataParallel(
            setup.model, device_ids=[device.index] if device.type == "cuda" else None)
    if config.compile:
        train_model = torch.compile(train_model)
    if config.compile or device.type == "cuda":
        _warm_up(setup, train_model, data.eval_x, data.eval_y, hp["batch_size"], device, amp)
    plan = BatchPlan(setup=setup, batch_size=hp["batch_size"], epochs=hp["epochs"], seed=config.seed,
                     device=device, amp=amp, ctx=ctx)
    batches = train_batches_for(data, plan)
    evaluator = evaluator_for(data, plan, top5=task.report_top5 or task.metric == "top5")
    ctx.barrier()
    recorder.init_stop(time.perf_counter_ns() - wall_start_ns)

    _train(config, task, hp, setup, train_model, batches, evaluator, device, amp, ctx, recorder)
    recorder.finish_from_history(wall_start_ns)


def _warm_up(setup: TrainSetup, model: torch.nn.Module, eval_x: torch.Tensor, eval_y: torch.Tensor,
             batch_size: int, device: torch.device, amp: str) -> None:
    """Compile / autotune on zero inputs of the example shape, then restore the initial weights.

    Zeros and eval-set targets, not training data: the clock rules say the clock starts at the first touch
    of training data, and warm-up is init.
    """
    model_state = copy.deepcopy(setup.model.state_dict())
    opt_state = copy.deepcopy(setup.optimizer.state_dict())
    n = max(min(batch_size, len(eval_x)), 1)
    fake_raw = torch.zeros((n, *eval_x.shape[1:]), dtype=eval_x.dtype, device=device)
    fake_y = eval_y[torch.arange(n) % max(len(eval_y), 1)].to(device)
    scaler = torch.amp.GradScaler(device.type, enabled=amp == "fp16")
    for _ in range(3):
        x = setup.prepare(fake_raw)
        with autocast(device, amp):
            loss = setup.loss_fn(model(x), fake_y)
        setup.optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(setup.optimizer)
        scaler.update()
    eval_model = model if not isinstance(model, torch.nn.parallel.DistributedDataParallel) else setup.model
    evaluate(eval_model, setup.prepare(fake_raw), fake_y, device=device, amp=amp, predict=setup.predict)
    setup.model.load_state_dict(model_state)
    setup.optimizer.load_state_dict(opt_state)
    setup.optimizer.zero_grad(set_to_none=True)


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

    def mean_loss_since_last_eval() -> float:  # over all ranks; reads the device (a sync)
        return ctx.all_reduce_sum(loss_sum.clone()).item() / (max(loss_count, 1) * ctx.world_size)

    clock = TrainingClock(device)
    recorder.run_start()
    progress = recorder.progress(total_steps, enabled=not config.quiet)
    clock.start()  # ---- the clock starts here: the next line touches training data -------------------
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
                    return recorder.diverged(step, clock.pause())
                progress.update(step, epoch=step / steps_per_epoch, loss=mean_loss, elapsed_s=clock.elapsed_s)
            if step % eval_every_steps != 0 and step != total_steps:
                continue
            # ---- evaluation: the clock pauses (unless --count-eval) ---------------------------------------
            train_elapsed = clock.pause()
            mean_loss = mean_loss_since_last_eval()
            if not math.isfinite(mean_loss):
                return recorder.diverged(step, train_elapsed)
            with Stopwatch(device) as sw:
                recorder.eval_start(step / steps_per_epoch)
                ctx.broadcast_buffers(setup.model)  # every rank evaluates rank 0's weights
                metrics = evaluator(eval_model)
            if config.count_eval:
                clock.add(sw.seconds)
            record = EpochRecord(epoch=step / steps_per_epoch, step=step, elapsed_s=clock.elapsed_s,
                                 accuracy=metrics[task.metric], top1=metrics.get("top1"), top5=metrics.get("top5"),
                                 metrics=metrics, train_loss=mean_loss, eval_s=sw.seconds)
            recorder.evaluated(record, setup.model)
            progress.update(step, epoch=record.epoch, loss=mean_loss, elapsed_s=record.elapsed_s,
                            accuracy=record.accuracy)
            loss_sum.zero_()
            loss_count = 0
            if recorder.result.reached and not config.full_schedule:
                progress.close()
                return None
            clock.resume()
        recorder.epoch_stop(epoch + 1)
    clock.pause()
    progress.close()
    return None
