"""The timed time-to-accuracy run: load the data, build the model, warm up, then train until the target.

The loop in ``_train`` is deliberately plain; the phases and clocks hang off it in ``RunRecorder`` (result.json,
DAWNBench files, mllog, checkpoint), the progress bar in ``RunProgress``, the step in ``TrainStep``. The warm-up is
daybreak.train.warmup; the measurement context (code, packages, machine load), daybreak.train.run_context.
"""

from __future__ import annotations

import dataclasses
import math
import random
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, cast

import numpy as np
import torch

from daybreak.data.base import TaskData
from daybreak.errors import ConfigError, DaybreakError
from daybreak.fileio import atomic_write_text
from daybreak.measure.context import ContextSampler
from daybreak.measure.device import amp_reason, set_cudnn_benchmark, set_tf32, set_threads, sm_name, tf32_applies
from daybreak.measure.system import system_info
from daybreak.recipes import Recipe, TrainSetup
from daybreak.records.run import ClockRules, PerformanceSettings, RunResult
# the exit statuses of `daybreak run` (also used by wrappers such as `repeat`), declared beside the run's statuses
from daybreak.records.run import EXIT_CODES as EXIT_CODES, EXIT_FAILED as EXIT_FAILED
from daybreak.rules import get_rules
from daybreak.tasks import Task
from daybreak.tasks.batches import BatchPlan, Evaluator, TrainBatches, evaluator_for, train_batches_for
from daybreak.tasks.evaluate import EVAL_CHUNK
from daybreak.train.clock import Timeline
from daybreak.train.distributed import Terminated, destroy, init_distributed, injected_fault_step
from daybreak.train.energy import RunEnergy
from daybreak.train.recorder import RunRecorder
from daybreak.train.run_context import finish_context, static_context
from daybreak.train.rundir import check_out_dir, default_run_dir
from daybreak.config import RunConfig
from daybreak.train.spec import CONFIG_FILE, RunSpec, resolve_run_spec
from daybreak.train.step import Backend, TrainStep
from daybreak.train.views import SpecData, TrainingData
from daybreak.train import divergence, warmup
from daybreak.train.warmup import (WARMUP_EVAL_EXAMPLES, WARMUP_PASSES, compile_count, data_warmup, spec_warmup,
                                   spec_warmup_data, warm_up)

TRACEBACK_FILE = "traceback.txt"  # a crashed run's traceback, beside its record
NO_WARMUP = "none (eager on a CPU: nothing to compile, autotune or start lazily; see warmup.warmup_pays)"


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
        unofficial.append(f"a user's recipe file ({Path(spec.recipe_file).name}, SHA-256 "
                          f"{(spec.recipe_sha256 or 'unknown')[:12]})")
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
        author=spec.author or None, author_email=spec.author_email or None,
    )
    if spec.price_warning:
        result.warnings.append(spec.price_warning)
    energy = RunEnergy(backend.device, ctx)
    _energy_before(result, energy, spec.idle_power_s)
    timeline = Timeline(backend.device, wall_start_ns)
    timeline.before_begin.append(energy.read_ahead)
    timeline.on_boundary.append(energy.on_boundary)
    recorder = RunRecorder(out, result, timeline, author=spec.author or "", author_email=spec.author_email,
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
    except DaybreakError as e:  # a user error found late (e.g. bad data): recorded, then the CLI's one line
        recorder.finish("failed", _one_line(e), wall_start_ns)
        raise
    except Exception as e:  # a crash (a recipe's build, a bug): recorded "failed" with its traceback beside it
        recorder.finish("failed", _one_line(e) + _save_traceback(out, ctx.is_main), wall_start_ns)
        if ctx.enabled:
            raise  # under torchrun a worker must exit non-zero so that torchrun stops the others
    except BaseException as e:  # SystemExit and the like: recorded, re-raised
        recorder.finish("failed", _one_line(e), wall_start_ns)
        raise
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
        finish_context(recorder, sampler)
        energy.close()
        recorder.close()
    return recorder.result


def _one_line(e: BaseException) -> str:
    return (f"{type(e).__name__}: {e}".splitlines() or [""])[0][:500]


def _save_traceback(out: Path, write: bool) -> str:
    """The current exception's traceback in the run directory; the words the message adds about it."""
    if not write:
        return ""
    try:
        atomic_write_text(out / TRACEBACK_FILE, traceback.format_exc())
    except OSError:
        return ""
    return f" (traceback in {out / TRACEBACK_FILE})"


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
        starts=("when data loading starts (the first touch of the dataset); model initialization and compile/"
                f"warm-up before it are outside (at most {(r.max_init_excluded_s or 0) / 60:g} minutes), after it "
                "inside" if r.contiguous else
                "at the first counted phase; data loading, model init and compile/warm-up all count"),
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


@dataclass
class Built:
    """The model side of a run, ready to train: the recipe's setup, the (wrapped, compiled) step, the backend it
    runs under (autocast off when the recipe's network carries its own precision) and the model to evaluate."""

    setup: TrainSetup
    step: TrainStep
    backend: Backend
    eval_model: Callable[[], torch.nn.Module]


def _run_recorded(spec: RunSpec, task: Task, recipe: Recipe, backend: Backend, recorder: RunRecorder,
                  wall_start_ns: int) -> None:
    hp = dict(spec.hyperparameters)
    seed_everything(spec.seed)
    _apply_settings(spec, hp, backend, recorder.result.performance)
    recorder.result.performance.init_before_data = _init_before_data(recipe, task)
    if recorder.result.performance.init_before_data:
        built, batches, evaluator = _init_then_data(spec, task, recipe, hp, backend, recorder)
    else:
        built, batches, evaluator = _data_then_init(spec, task, recipe, hp, backend, recorder)
    compiles_before = compile_count()
    recorder.training_ready()

    _train(spec, hp, built, batches, evaluator, recorder)
    if spec.compiled:
        recorder.result.recompiles_under_clock = compile_count() - compiles_before
        if recorder.result.recompiles_under_clock:
            recorder.result.warnings.append(
                f"torch.compile compiled {recorder.result.recompiles_under_clock} more time(s) during training or "
                "evaluation: that compile time is inside the training phase")
    recorder.finish_from_history(wall_start_ns)


def _init_before_data(recipe: Recipe, task: Task) -> bool:
    """MLPerf's order (model initialization, then the clock and the data) when the recipe builds from the task's
    InputSpec and the task's batches are the in-memory kind the warm-up can imitate exactly."""
    return recipe.builds_from_spec and task.make_train_batches is None and task.make_evaluator is None


def _init_then_data(spec: RunSpec, task: Task, recipe: Recipe, hp: dict[str, Any], backend: Backend,
                    recorder: RunRecorder) -> tuple[Built, TrainBatches, Evaluator]:
    """Build, compile and warm up on synthetic tensors of the task's InputSpec, then start the clock and touch
    the data. Statistics of the data (cifar10's whitening) are the recipe's ``init_from_data``: on the clock."""
    recorder.init_start()  # ---- model initialization: nothing here reads the dataset -------------------------
    built = _build(spec, recipe, hp, SpecData(task.num_classes, task.input_spec, recipe.name), backend, recorder)
    recorder.phase_start("warmup")
    if warmup.warmup_pays(spec.compiled, backend.device):
        synthetic = spec_warmup_data(task.input_spec, task.num_classes, spec.per_device_batch_size,
                                     backend.ctx.world_size)
        pairs, warm_evaluator = spec_warmup(synthetic, _plan(spec, hp, built), top5=task.measures_top5)
        warm_up(built.setup, built.step, pairs, lambda: warm_evaluator(built.eval_model()), built.backend.device)
        recorder.result.performance.warmup = (
            f"before the data: {WARMUP_PASSES} training steps on a synthetic batch of the task's InputSpec"
            + (", the recipe's first-call init (warm_up_init)" if built.setup.warm_up_init else "")
            + f" and one evaluation ({WARMUP_EVAL_EXAMPLES} examples padded to one chunk of {EVAL_CHUNK}, the "
            "shape of every real chunk), made by the run's own batch source and evaluator; weights, optimizer, "
            "loss scale and random generators restored")
    else:
        recorder.result.performance.warmup = NO_WARMUP
    backend.ctx.barrier()
    recorder.phase_end("warmup")

    data = _load(spec, task, recorder)  # ---- the clock (MLPerf run_start) and the first touch of the data ----
    view = cast(TaskData, TrainingData(data))  # (a view that passes for its TaskData: attributes, isinstance)
    recorder.data_checked(recipe.mllog_events(hp, view, spec.global_batch_size) if recipe.mllog_events else {},
                          train_samples=None if data.train_x is None else len(data.train_x),
                          eval_samples=len(data.eval_y))
    plan = _plan(spec, hp, built)
    batches, evaluator = train_batches_for(task, data, plan), evaluator_for(task, data, plan)
    _record_effective(recorder, batches, data, backend)
    return built, batches, evaluator


def _data_then_init(spec: RunSpec, task: Task, recipe: Recipe, hp: dict[str, Any], backend: Backend,
                    recorder: RunRecorder) -> tuple[Built, TrainBatches, Evaluator]:
    """The recipe builds from the loaded data: the data first, then the model (under MLPerf's rules its
    initialization is then on the clock, and the record says so)."""
    data = _load(spec, task, recorder)
    # the recipe sees the training split only: evaluation stays with the runner (a view that passes for its TaskData)
    view = cast(TaskData, TrainingData(data))
    built = _build(spec, recipe, hp, view, backend, recorder)
    recorder.data_checked(recipe.mllog_events(hp, view, spec.global_batch_size) if recipe.mllog_events else {},
                          train_samples=None if data.train_x is None else len(data.train_x),
                          eval_samples=len(data.eval_y))
    plan = _plan(spec, hp, built)
    batches, evaluator = train_batches_for(task, data, plan), evaluator_for(task, data, plan)
    _record_effective(recorder, batches, data, backend)
    recorder.phase_start("warmup")  # ---- compile / autotune on the exact shapes of the real batches -------
    if warmup.warmup_pays(spec.compiled, backend.device):
        pairs, evaluate_once = data_warmup(batches, evaluator, data, plan, built.eval_model)
        warm_up(built.setup, built.step, pairs, evaluate_once, built.backend.device)
        recorder.result.performance.warmup = (
            f"after the data: {WARMUP_PASSES} training steps on zeros of the real batches' shapes and one "
            "evaluation; weights, optimizer, loss scale and random generators restored")
    else:
        recorder.result.performance.warmup = NO_WARMUP
    backend.ctx.barrier()
    recorder.phase_end("warmup")
    return built, batches, evaluator


def _load(spec: RunSpec, task: Task, recorder: RunRecorder) -> TaskData:
    recorder.run_start()  # ---- data loading: the first touch of the dataset --------------------------------
    data = task.load(Path(spec.data_dir) if spec.data_dir else None, spec.allow_custom_data, spec.download)
    if not data.official:
        recorder.mark_unofficial("data does not match the official checksums (--allow-custom-data)")
    recorder.result.data_source = data.source
    recorder.result.data_notes = list(data.notes)
    recorder.data_loaded()
    return data


def _build(spec: RunSpec, recipe: Recipe, hp: dict[str, Any], view: Any, backend: Backend,
           recorder: RunRecorder) -> Built:
    """The model_init phase: the recipe's build, the distribution wrapper, torch.compile (lazy: it compiles in the
    warm-up), the training step."""
    recorder.phase_start("model_init")
    setup = recipe.build(hp, view, backend.device)
    recorder.result.setup_notes = list(setup.notes)
    recorder.result.optimizer = type(setup.optimizer).__name__
    backend = _native_precision(setup, spec, backend, recorder)
    train_model = backend.wrap(setup.model)
    if spec.compiled:
        # an OptimizedModule (torch's stub says Callable)
        train_model = cast(torch.nn.Module, torch.compile(train_model, mode=_torch_mode(spec.compile)))
    step = TrainStep(train_model, setup.optimizer, setup.loss_fn, backend, clip_grad_norm=setup.clip_grad_norm)
    recorder.precision_known(recorder.result.amp, recorder.result.performance.tf32)
    recorder.phase_end("model_init")
    return Built(setup, step, backend, _eval_model_fn(setup, train_model, backend, spec))


def _torch_mode(mode: str) -> str | None:
    return None if mode == "default" else mode


def _eval_model_fn(setup: TrainSetup, train_model: torch.nn.Module, backend: Backend,
                   spec: RunSpec) -> Callable[[], torch.nn.Module]:
    """What each evaluation runs: the recipe's evaluated model (an EMA / lookahead average; compiled too, once,
    when the run compiles), else the training model (unwrapped under DDP: eval shards differ per rank)."""
    compiled: dict[int, torch.nn.Module] = {}

    def eval_model() -> torch.nn.Module:
        if setup.eval_model is None:
            return setup.model if backend.ctx.enabled else train_model
        module = setup.eval_model()
        if not spec.compiled:
            return module
        if id(module) not in compiled:
            compiled[id(module)] = cast(torch.nn.Module, torch.compile(module, mode=_torch_mode(spec.compile)))
        return compiled[id(module)]

    return eval_model


def _plan(spec: RunSpec, hp: dict[str, Any], built: Built) -> BatchPlan:
    b = built.backend
    return BatchPlan(setup=built.setup, batch_size=spec.per_device_batch_size, epochs=hp["epochs"], seed=spec.seed,
                     device=b.device, amp=b.amp, ctx=b.ctx,
                     fixed_eval_shapes=warmup.warmup_pays(spec.compiled, b.device))


def _apply_settings(spec: RunSpec, hp: dict[str, Any], backend: Backend, settings: PerformanceSettings) -> None:
    """TF32 and cuDNN autotuning as the run asks (each recorded), and why the precision is what it is."""
    device = backend.device
    set_tf32(spec.tf32)
    settings.tf32, settings.tf32_applies = spec.tf32, tf32_applies(device)
    cudnn = bool(hp.get("cudnn_benchmark", True))  # a recipe switch where the recipe declares it
    set_cudnn_benchmark(cudnn)
    settings.cudnn_benchmark = cudnn
    settings.compile_mode = spec.compile
    settings.compute_capability = sm_name(device)
    settings.amp_reason = amp_reason(spec.amp, backend.amp, device)
    if device.type != "cuda":
        settings.notes.append(f"TF32 and cudnn.benchmark are CUDA settings: recorded, no effect on {device.type}")


def _native_precision(setup: TrainSetup, spec: RunSpec, backend: Backend, recorder: RunRecorder) -> Backend:
    """A recipe whose network holds its own weights in half precision (airbench's fp16 net): no autocast and no
    loss scaling on top of it; the record's precision is the network's."""
    if not setup.native_precision:
        return backend
    r = recorder.result
    if spec.amp not in ("auto", setup.native_precision):
        r.warnings.append(f"--amp {spec.amp} was not applied: recipe {spec.recipe} runs its own "
                          f"{setup.native_precision} network (see its fp16 switch)")
    r.amp = setup.native_precision
    r.performance.native_precision = setup.native_precision
    r.performance.amp_reason = (f"{setup.native_precision}: the recipe's network holds {setup.native_precision} "
                                "weights itself (BatchNorm in fp32); no autocast, no loss scaling")
    return dataclasses.replace(backend, amp="off")


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


def _train(spec: RunSpec, hp: dict[str, Any], built: Built, batches: TrainBatches, evaluator: Evaluator,
           recorder: RunRecorder) -> None:
    setup, step_fn, backend = built.setup, built.step, built.backend
    ctx = backend.ctx
    steps_per_epoch = batches.steps_per_epoch
    total_steps = _total_steps(setup, steps_per_epoch, hp["epochs"])
    eval_every_steps = spec.eval_every_steps or steps_per_epoch * (spec.eval_every_epochs or 1)
    base_lrs = [g["lr"] * spec.lr_scale for g in setup.optimizer.param_groups]
    model = step_fn.model
    loss_sum = torch.zeros((), device=backend.device)
    loss_count = 0
    fault_step = injected_fault_step(ctx)
    headline = get_rules(spec.rules)

    def mean_loss_since_last_eval() -> float:  # over all ranks; reads the device (a sync)
        return ctx.all_reduce_sum(loss_sum.clone()).item() / (max(loss_count, 1) * ctx.world_size)

    last_batch: tuple[torch.Tensor, torch.Tensor] | None = None

    def diverged_on(mean_loss: float) -> bool:
        """A non-finite loss sum: is the training state non-finite too (daybreak.train.divergence)? Recorded
        either way; the train interval is closed while it looks."""
        verdict = divergence.inspect(mean_loss, step, loss_count, setup, scaler_skips=step_fn.scaler.is_enabled(),
                                     batch=last_batch, autocast=backend.autocast(), ctx=ctx)
        recorder.non_finite_loss(verdict)
        return verdict.diverged

    progress = recorder.progress(total_steps, enabled=not spec.quiet)
    recorder.result.performance.host_sync = (
        f"every {progress.every} steps (the progress bar shows the loss) and at each evaluation" if progress.shown
        else "at each evaluation only (the loss is summed on the device in between)")
    recorder.train_start()  # ---- training: the next line prepares the training data on the device -------
    batches.start()
    model.train()
    step = 0
    for epoch in range(hp["epochs"]):
        recorder.epoch_start(epoch + 1)
        for x, y in batches.epoch(epoch):
            _set_lrs(setup, base_lrs, step, total_steps)
            loss = step_fn(x, y)
            last_batch = (x, y)  # (a reference: for the float32 loss if the sum turns out non-finite)
            step += 1
            if setup.on_step is not None:
                setup.on_step(step, total_steps)
            if step == fault_step:
                raise RuntimeError(f"injected fault on rank {ctx.rank} at step {step} (DAYBREAK_FAULT_INJECT)")
            loss_sum += loss.detach().float()
            loss_count += 1
            if progress.shown and progress.due(step):  # a host sync: only when someone is watching
                if ctx.enabled:  # only rank 0 draws a bar: its own loss, no collective the others would miss
                    mean_loss = loss_sum.item() / max(loss_count, 1)
                else:
                    mean_loss = mean_loss_since_last_eval()
                    if not math.isfinite(mean_loss):
                        recorder.train_pause()
                        if diverged_on(mean_loss):
                            return recorder.diverged()
                        recorder.train_start()
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
            if not math.isfinite(mean_loss) and diverged_on(mean_loss):
                return recorder.diverged()
            recorder.eval_start(step / steps_per_epoch)
            ctx.broadcast_buffers(setup.model)  # every rank evaluates rank 0's weights
            metrics = evaluator(built.eval_model())
            record = recorder.evaluated(step / steps_per_epoch, step, metrics,
                                        mean_loss if math.isfinite(mean_loss) else None, setup.evaluated_model())
            progress.update(step, epoch=record.epoch, loss=mean_loss, elapsed_s=record.elapsed_s,
                            accuracy=record.accuracy)
            loss_sum.zero_()
            loss_count = 0
            if (recorder.result.reached and not spec.full_schedule) or step >= total_steps:
                progress.close()
                return None
            recorder.train_start()
        recorder.epoch_stop(epoch + 1)
    if recorder.timeline.is_open("train"):
        recorder.train_pause()
    progress.close()
    return None


def _total_steps(setup: TrainSetup, steps_per_epoch: int, epochs: int) -> int:
    """``epochs`` whole epochs, or ceil(train_epochs x steps per epoch) for a fractional schedule (airbench's
    9.9 epochs: 476 steps of 48), never more than the epochs allow."""
    if setup.train_epochs is None:
        return steps_per_epoch * epochs
    return max(1, min(math.ceil(setup.train_epochs * steps_per_epoch - 1e-9), steps_per_epoch * epochs))


def _set_lrs(setup: TrainSetup, base_lrs: list[float], step: int, total_steps: int) -> None:
    """Each group's lr for the next step: its base lr times the recipe's factor (one for all, or one per group)."""
    factor = setup.lr_multiplier(step, total_steps)
    factors = [float(factor)] * len(base_lrs) if isinstance(factor, (int, float)) else [float(f) for f in factor]
    for group, base, f in zip(setup.optimizer.param_groups, base_lrs, factors, strict=True):
        group["lr"] = base * f
