"""The timed time-to-accuracy run: load the data, build the model, warm up, then train until the target.

The loop in ``_train`` is deliberately plain; the phases and clocks hang off it in ``RunRecorder`` (result.json,
DAWNBench files, mllog, checkpoint), the progress bar in ``RunProgress``, the step in ``TrainStep``. The warm-up is
daybreak.train.warmup; the measurement context (code, packages, machine load), daybreak.train.run_context.
"""

from __future__ import annotations

import math
import random
import signal
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch

from daybreak.errors import ConfigError
from daybreak.measure.context import ContextSampler
from daybreak.measure.device import set_threads
from daybreak.measure.system import system_info
from daybreak.recipes import Recipe, TrainSetup
from daybreak.records.run import ClockRules, RunResult
from daybreak.rules import get_rules
from daybreak.tasks import Task
from daybreak.tasks.batches import BatchPlan, Evaluator, TrainBatches, evaluator_for, train_batches_for
from daybreak.train.clock import Timeline
from daybreak.train.distributed import Terminated, destroy, init_distributed, injected_fault_step
from daybreak.train.energy import RunEnergy
from daybreak.train.recorder import RunRecorder
from daybreak.train.run_context import finish_context, static_context
from daybreak.train.rundir import check_out_dir, default_run_dir
from daybreak.train.spec import CONFIG_FILE, RunConfig, RunSpec, resolve_run_spec
from daybreak.train.step import Backend, TrainStep
from daybreak.train.views import TrainingData
from daybreak.train.warmup import compile_count, warm_up

# Exit statuses of `daybreak run` (also used by wrappers such as `repeat`).
EXIT_REACHED = 0
EXIT_USER_ERROR = 2
EXIT_NOT_REACHED = 3
EXIT_DIVERGED = 4
EXIT_FAILED = 5
EXIT_INTERRUPTED = 130

EXIT_CODES = {"reached": EXIT_REACHED, "not_reached": EXIT_NOT_REACHED, "diverged": EXIT_DIVERGED,
              "failed": EXIT_FAILED, "interrupted": EXIT_INTERRUPTED}


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def run(request: RunConfig | RunSpec) -> RunResult:
    """Do one timed run and return its record (also written to the run directory).

    A ``RunConfig`` is resolved here (every user mistake is a ConfigError before any work); a ``RunSpec`` (from
    ``resolve_run_spec``, or a torchrun worker's ``DAYBREAK_RUN_SPEC``) is used as it is."""
    wall_start_ns = time.perf_counter_ns()
    started_at = datetime.now(timezone.utc)
    spec = request if isinstance(request, RunSpec) else resolve_run_spec(request)
    task, recipe = spec.task_obj(), spec.recipe_obj()
    set_threads(spec.threads)
    ctx, rank_device = init_distributed(spec.device, spec.dist_timeout_s)  # single process: no-op
    try:
        if ctx.world_size != spec.world_size:
            raise ConfigError(f"the run was specified for {spec.world_size} process(es) but runs in "
                              f"{ctx.world_size}")
        backend = Backend.resolve(spec.device, spec.amp, ctx, rank_device)
        out = Path(spec.out) if spec.out else default_run_dir(task.name, recipe.name, started_at)
        if not isinstance(request, RunSpec):
            request.out = out  # the caller learns where the run directory is
        return _run(spec.with_(out=str(out)), task, recipe, backend, wall_start_ns, started_at)
    finally:
        destroy(ctx)


def _run(spec: RunSpec, task: Task, recipe: Recipe, backend: Backend, wall_start_ns: int,
         started_at: datetime) -> RunResult:
    ctx = backend.ctx
    out = Path(spec.out or ".")
    replace_failed = check_out_dir(out) if ctx.is_main else False
    unofficial: list[str] = []
    if not spec.target_is_default:
        unofficial.append(f"target {spec.target:.4f} differs from the task's {task.target:.4f}")
    if spec.recipe_file:
        unofficial.append(f"a user's recipe file ({Path(spec.recipe_file).name}, SHA-256 {spec.recipe_sha256[:12]})")
    result = RunResult(
        run_id=out.name, task=task.name, recipe=recipe.name, model=recipe.model,
        framework=f"PyTorch {torch.__version__.split('+')[0]}", metric=task.metric.name, target=spec.target,
        target_is_default=spec.target_is_default, official=not unofficial, unofficial_reasons=unofficial,
        hyperparameters=dict(spec.hyperparameters), seed=spec.seed, device=str(backend.device), amp=backend.amp,
        compile=spec.compile, threads=torch.get_num_threads(), world_size=ctx.world_size, nodes=ctx.nodes,
        backend=ctx.backend, per_device_batch_size=spec.per_device_batch_size,
        global_batch_size=spec.global_batch_size, lr_scaling=spec.scaling, lr_scale=spec.lr_scale,
        stop_at_target=not spec.full_schedule,
        eval_every_epochs=None if spec.eval_every_steps else spec.eval_every_epochs,
        eval_every_steps=spec.eval_every_steps, cost_per_hour=spec.cost_per_hour, instance=spec.instance,
        price_date=spec.price_date, clock=_clock_rules(spec.rules), rules=spec.rules,
        context=static_context(recipe, spec), system=system_info(), started_at=started_at, command=spec.command,
    )
    if spec.price_warning:
        result.warnings.append(spec.price_warning)
    energy = RunEnergy(backend.device, ctx)
    _energy_before(result, energy, spec.idle_power_s)
    timeline = Timeline(backend.device, wall_start_ns)
    timeline.on_boundary.append(energy.on_boundary)
    recorder = RunRecorder(out, result, timeline, author=spec.author, author_email=spec.author_email,
                           write=ctx.is_main, benchmark=mllog_benchmark(recipe, task, spec.target),
                           replace_failed=replace_failed, energy=energy, files={CONFIG_FILE: spec.config_toml()})
    sampler = ContextSampler().start()
    old_term = _on_sigterm(backend)
    try:
        _run_recorded(spec, task, recipe, backend, recorder, wall_start_ns)
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
        finish_context(recorder, sampler)
        energy.close()
        recorder.close()
    return recorder.result


def _energy_before(result: RunResult, energy: RunEnergy, idle_s: float) -> None:
    """What the counters can measure on this machine, and its idle power; or why there is nothing."""
    e = result.energy
    e.available = energy.available
    e.unavailable = energy.unavailable()
    e.counters = energy.meter.describe()["counters"]
    if not energy.available:
        e.notes.append("no energy counter is readable here: joules are not recorded (see unavailable); "
                       "nothing is estimated")
        return
    watts, seconds = energy.idle_power(idle_s)
    e.idle_power_w, e.idle_seconds = watts, seconds or None


class _SigTerm(BaseException):
    """SIGTERM in a single-process run (schedulers, `timeout`, container stops): recorded like Ctrl-C."""


def _on_sigterm(backend: Backend) -> Any:
    """Single process, main thread: SIGTERM raises _SigTerm so the run is recorded ``interrupted``. Under torchrun
    the distributed module's own handler (Terminated) stays in place."""
    if backend.ctx.enabled or threading.current_thread() is not threading.main_thread():
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
            and task.metric.reaches(target, recipe.mllog_target):
        return claim
    return f"daybreak_{task.name}"


def _run_recorded(spec: RunSpec, task: Task, recipe: Recipe, backend: Backend, recorder: RunRecorder,
                  wall_start_ns: int) -> None:
    hp = dict(spec.hyperparameters)
    seed_everything(spec.seed)
    recorder.run_start()  # ---- data loading: the first touch of the dataset --------------------------------
    data = task.load(Path(spec.data_dir) if spec.data_dir else None, spec.allow_custom_data, spec.download)
    if not data.official:
        recorder.mark_unofficial("data does not match the official checksums (--allow-custom-data)")
    recorder.result.data_source = data.source
    recorder.result.data_notes = list(data.notes)
    recorder.data_loaded()

    recorder.phase_start("model_init")  # ---- model, optimizer, distribution wrapper ------------------------
    view = TrainingData(data)  # the recipe sees the training split only: evaluation stays with the runner
    setup = recipe.build(hp, view, backend.device)
    recorder.result.setup_notes = list(setup.notes)
    recorder.data_checked(recipe.mllog_events(hp, view, spec.global_batch_size) if recipe.mllog_events else {},
                          train_samples=None if data.train_x is None else len(data.train_x),
                          eval_samples=len(data.eval_y))
    train_model = backend.wrap(setup.model)
    if spec.compile:
        train_model = torch.compile(train_model)
    plan = BatchPlan(setup=setup, batch_size=spec.per_device_batch_size, epochs=hp["epochs"], seed=spec.seed,
                     device=backend.device, amp=backend.amp, ctx=backend.ctx)
    batches = train_batches_for(task, data, plan)
    evaluator = evaluator_for(task, data, plan)
    step = TrainStep(train_model, setup.optimizer, setup.loss_fn, backend, clip_grad_norm=setup.clip_grad_norm)
    _record_effective(recorder, batches, data, backend)
    recorder.phase_end("model_init")

    recorder.phase_start("warmup")  # ---- compile / autotune on the exact shapes of the real batches -------
    if spec.compile or backend.device.type == "cuda":
        warm_up(setup, step, batches, evaluator, data, plan)
    backend.ctx.barrier()
    recorder.phase_end("warmup")
    compiles_before = compile_count()
    recorder.training_ready()

    _train(spec, hp, setup, step, batches, evaluator, backend, recorder)
    if spec.compile:
        recorder.result.recompiles_under_clock = compile_count() - compiles_before
        if recorder.result.recompiles_under_clock:
            recorder.result.warnings.append(
                f"torch.compile compiled {recorder.result.recompiles_under_clock} more time(s) during training or "
                "evaluation: that compile time is inside the training phase")
    recorder.finish_from_history(wall_start_ns)


def _record_effective(recorder: RunRecorder, batches: TrainBatches, data: Any, backend: Backend) -> None:
    """What the data source actually does, which may differ from what was asked (a small dataset)."""
    r = recorder.result
    r.steps_per_epoch = batches.steps_per_epoch
    effective = getattr(batches, "batch_size", None)
    if isinstance(effective, int):
        r.effective_batch_size = effective
        r.global_batch_size = effective * backend.ctx.world_size
        if effective < (r.per_device_batch_size or effective):
            r.warnings.append(f"the training set is smaller than one batch per device: batch {effective} per "
                              f"device was used, not {r.per_device_batch_size}")
    if data.train_x is not None:
        r.train_examples = int(len(data.train_x))


def _train(spec: RunSpec, hp: dict[str, Any], setup: TrainSetup, step_fn: TrainStep, batches: TrainBatches,
           evaluator: Evaluator, backend: Backend, recorder: RunRecorder) -> None:
    ctx = backend.ctx
    steps_per_epoch = batches.steps_per_epoch
    total_steps = steps_per_epoch * hp["epochs"]
    eval_every_steps = spec.eval_every_steps or steps_per_epoch * (spec.eval_every_epochs or 1)
    base_lrs = [g["lr"] * spec.lr_scale for g in setup.optimizer.param_groups]
    model = step_fn.model
    loss_sum = torch.zeros((), device=backend.device)
    loss_count = 0
    fault_step = injected_fault_step(ctx)
    headline = get_rules(spec.rules)

    def mean_loss_since_last_eval() -> float:  # over all ranks; reads the device (a sync)
        return ctx.all_reduce_sum(loss_sum.clone()).item() / (max(loss_count, 1) * ctx.world_size)

    def eval_model() -> torch.nn.Module:  # DDP forwards must match across ranks; eval shards don't
        if setup.eval_model is not None:
            return setup.eval_model()
        return setup.model if ctx.enabled else model

    progress = recorder.progress(total_steps, enabled=not spec.quiet)
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
            loss = step_fn(x, y)
            step += 1
            if setup.on_step is not None:
                setup.on_step(step, total_steps)
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
            end_of_epoch = step % steps_per_epoch == 0
            if end_of_epoch and setup.on_epoch_end is not None:
                setup.on_epoch_end(step // steps_per_epoch)
            if step % eval_every_steps != 0 and step != total_steps:
                continue
            # ---- evaluation: its own phase; each rule set decides whether it counts ------------------------
            recorder.train_pause()
            mean_loss = mean_loss_since_last_eval()
            if not math.isfinite(mean_loss):
                return recorder.diverged(step)
            recorder.eval_start(step / steps_per_epoch)
            ctx.broadcast_buffers(setup.model)  # every rank evaluates rank 0's weights
            evaluated = eval_model()
            metrics = evaluator(evaluated)
            record = recorder.evaluated(step / steps_per_epoch, step, metrics, mean_loss,
                                        setup.evaluated_model())
            progress.update(step, epoch=record.epoch, loss=mean_loss, elapsed_s=record.elapsed_s,
                            accuracy=record.accuracy)
            loss_sum.zero_()
            loss_count = 0
            if recorder.result.reached and not spec.full_schedule:
                progress.close()
                return None
            recorder.train_start()
        recorder.epoch_stop(epoch + 1)
    if recorder.timeline.is_open("train"):
        recorder.train_pause()
    progress.close()
    return None
