"""Inference latency, throughput and cost of a run's checkpoint, DAWNBench's way. Usable from Python:

    loaded = load_for_inference("runs/digits-...")       # model + prepared eval set in host memory
    lat = measure_latency(loaded, warmup=10)              # batch 1, every eval example, per-query ns
    stats = latency_stats(lat.ns)                          # mean (= total / N), p50, p90, p99, max, min
    top1, top5 = accuracy_of(lat.predictions, loaded.labels)
    thr = measure_throughput(loaded, batch_size=256)      # offline examples/s

``infer(InferConfig(run_dir))`` does all of it and writes inference.json + dawnbench_inference.json.

The clock of one query: from a prepared input tensor (batch 1) in host memory to the predicted label on
the host. Included: host-to-device copy, forward (with the recipe's test-time ``predict`` if it has one,
since that is what reached the accuracy), argmax (+ top-5 when the task reports it), label back to the
host, device synchronize. Excluded: reading/decoding dataset files, the recipe's ``prepare`` (applied once
to the whole eval set before timing), model build, checkpoint load, compile, warm-up.

Energy (``meter=``, a daybreak.measure.energy.EnergyMeter): the counters are read right after the device
synchronize where each timed loop starts and ends (and either side of a progress-bar update, which is left out),
so the joules cover the measured stretches only; ``infer`` turns them into joules per 10,000 examples.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

import torch
from torch import nn

from daybreak.config import compile_mode
from daybreak.errors import ConfigError, DaybreakError, RecordError
from daybreak.infer.config import InferConfig as InferConfig, check_flags
from daybreak.infer.defaults import DEFAULT_BATCH_SIZE, DEFAULT_REPEATS, DEFAULT_WARMUP
from daybreak.measure.device import amp_dtype, resolve_amp, select_device, set_threads, synchronize
from daybreak.metrics import get_metric
from daybreak.records.inference import (
    InferenceEnergy, InferenceResult, InferenceSettings, LatencyStats, ThroughputStats,
)
from daybreak.records.run import RunResult

if TYPE_CHECKING:
    from daybreak.measure.energy import EnergyMeter, EnergySnapshot

CHECKPOINT_FORMAT = "daybreak.checkpoint/1"
EXIT_INVALID = 3  # the predictions did not reach the run's target accuracy
_OOM = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)


def _one_line(e: BaseException, limit: int = 300) -> str:
    text = str(e).strip()
    line = text.splitlines()[0].strip() if text else type(e).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."


# --- loading ---------------------------------------------------------------------------------------------


@dataclass
class LoadedRun:
    """A run's checkpoint rebuilt for inference, and its task's eval set prepared in host memory."""

    run_dir: Path
    result: RunResult
    checkpoint: dict[str, Any]  # the checkpoint's metadata (everything but the state dict)
    task: Any  # daybreak.tasks.Task
    recipe: Any  # daybreak.recipes.Recipe
    model: nn.Module  # eval mode, on the device; torch.compile'd when asked
    predict: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None
    device: torch.device
    amp: str
    compiled: bool
    inputs: torch.Tensor  # prepare(eval images), N x ..., in host memory (page-locked for CUDA)
    labels: torch.Tensor  # N int64 class indices, host
    top5: bool  # predictions carry the top-5 labels too (the task's metric or report)
    prepared_on: str
    data_source: str = ""
    data_official: bool = True
    # A task whose accuracy is not a label comparison (SQuAD's F1) scores the raw model outputs of every query
    # itself: ``TaskData.score_predictions(outputs) -> metrics``; the queries then return the outputs, not labels.
    score_predictions: Callable[[torch.Tensor], dict[str, float]] | None = None
    data_dir: Path | None = None  # the folder read (None: the task's default)
    data_origin: str = "default"  # "--data-dir", "run" (the run's own folder) or "default"
    _queries: list[torch.Tensor] | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        return len(self.inputs)

    def queries(self) -> list[torch.Tensor]:
        """One batch-1 view per example (made once, before any clock runs)."""
        if self._queries is None:
            self._queries = [self.inputs[i : i + 1] for i in range(len(self.inputs))]
        return self._queries


def _jsonable(value: dict[str, Any]) -> dict[str, Any]:
    try:
        out: dict[str, Any] = json.loads(json.dumps(value, default=str))
        return out
    except (TypeError, ValueError):
        return dict(value)


def read_checkpoint(run_dir: Path, result: RunResult) -> dict[str, Any]:
    """The run's checkpoint.pt, checked against its result.json. One-line RecordErrors."""
    name = result.checkpoint or "checkpoint.pt"
    path = run_dir / name
    if not path.exists():
        if not result.reached:
            best = f"{result.best_accuracy * 100:.2f}%" if result.best_accuracy is not None else "no evaluation"
            raise RecordError(f"{run_dir}: this run never reached its target ({result.status}, best {best} < "
                              f"{result.target * 100:.2f}%), so it saved no checkpoint to measure")
        raise RecordError(f"{path}: checkpoint missing; the run reached its target but its checkpoint file is gone")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling/zip error means a corrupt file
        raise RecordError(f"{path}: not a readable checkpoint ({_one_line(e, 160)})") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise RecordError(f"{path}: not a daybreak checkpoint (expected format {CHECKPOINT_FORMAT})")
    if payload.get("task") != result.task or payload.get("recipe") != result.recipe:
        raise RecordError(f"{path}: checkpoint is for task {payload.get('task')!r} / recipe {payload.get('recipe')!r}, "
                          f"but the run is task {result.task!r} / recipe {result.recipe!r}")
    state = payload.get("state_dict")
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise RecordError(f"{path}: checkpoint has no state_dict of tensors")
    hp = payload.get("hyperparameters")
    if not isinstance(hp, dict):
        raise RecordError(f"{path}: checkpoint has no hyperparameters")
    ours, theirs = _jsonable(hp), _jsonable(result.hyperparameters)  # result.json turned tuples into lists
    differing = [k for k in sorted(set(ours) | set(theirs)) if ours.get(k) != theirs.get(k)]
    if differing:
        k = differing[0]
        raise RecordError(f"{path}: checkpoint hyperparameters differ from the run's ({k}: "
                          f"{hp.get(k)!r} vs {result.hyperparameters.get(k)!r}); is it from another run?")
    return payload


def _strip_wrapper_prefixes(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Keys saved from a DistributedDataParallel or torch.compile wrapper ("module.", "_orig_mod.") -> plain."""
    for prefix in ("module.", "_orig_mod."):
        if state and all(k.startswith(prefix) for k in state):
            state = {k[len(prefix):]: v for k, v in state.items()}
    return state


def _prepare_on_host(prepare: Callable[[torch.Tensor], torch.Tensor], eval_x: torch.Tensor,
                     device: torch.device) -> tuple[torch.Tensor, str]:
    """``prepare`` on the host; if a recipe's prepare only works on its device, run it there in chunks."""
    with torch.inference_mode():
        try:
            x = prepare(eval_x)
            if x.device.type == "cpu":
                return x, "cpu"
        except (RuntimeError, TypeError):
            if device.type == "cpu":
                raise
        chunks = [prepare(eval_x[i : i + 4096].to(device)).cpu() for i in range(0, len(eval_x), 4096)]
        return torch.cat(chunks), str(device)


def load_for_inference(run_dir: str | Path, *, device: str | torch.device = "auto", amp: str = "auto",
                       compile: bool | str = False, data_dir: Path | None = None, download: bool = True,
                       allow_custom_data: bool = False) -> LoadedRun:
    """Rebuild the run's recipe model from checkpoint.pt and prepare the task's eval set in host memory.

    ``data_dir`` None: the data the run itself read (see daybreak.infer.run_data), with the run's own
    --allow-custom-data; else that folder, custom files there needing ``allow_custom_data``."""
    from daybreak.infer.run_data import choose_data, model_run
    from daybreak.recipes import get_recipe
    from daybreak.tasks import get_task

    run_dir = Path(run_dir)
    result = model_run(run_dir)
    try:
        task = get_task(result.task)
        recipe = get_recipe(result.recipe)
    except ConfigError as e:
        raise RecordError(f"{run_dir}: {e}") from None
    if recipe.task != task.name:
        raise RecordError(f"{run_dir}: recipe {recipe.name} is for task {recipe.task}, but the run is task {task.name}")
    payload = read_checkpoint(run_dir, result)
    state = _strip_wrapper_prefixes(payload.pop("state_dict"))
    choice = choose_data(result, run_dir, data_dir, allow_custom_data=allow_custom_data, download=download)

    dev = device if isinstance(device, torch.device) else select_device(device)
    amp = resolve_amp(amp, dev)
    data = task.load(choice.data_dir, choice.allow_custom_data, choice.download)
    setup = recipe.build(dict(payload["hyperparameters"]), data, dev)
    model = setup.model
    try:
        model.load_state_dict(state, strict=True)
    except (RuntimeError, KeyError, ValueError) as e:
        msg = " ".join(str(e).split())
        msg = msg.replace("Error(s) in loading state_dict for ", "state dict does not fit ")
        raise RecordError(f"{run_dir / (result.checkpoint or 'checkpoint.pt')}: the model cannot load it: "
                          f"{msg[:240] + ('...' if len(msg) > 240 else '')}") from None
    model.eval()
    model.requires_grad_(False)
    # A task whose eval inputs are too large to keep decoded during training (ImageNet) decodes them here.
    eval_x = task.inputs_for_inference(data)
    inputs, prepared_on = _prepare_on_host(setup.prepare, eval_x, dev)
    if dev.type == "cuda":
        inputs = inputs.pin_memory()
    top5 = task.measures_top5
    return LoadedRun(
        run_dir=run_dir, result=result, checkpoint=payload, task=task, recipe=recipe,
        model=_compiled(model, compile), predict=setup.predict, device=dev, amp=amp,
        compiled=compile not in (False, None, "off"), inputs=inputs, labels=data.eval_y.to("cpu", torch.long), top5=top5,
        prepared_on=prepared_on, data_source=data.source, data_official=data.official,
        score_predictions=getattr(data, "score_predictions", None), data_dir=choice.data_dir,
        data_origin=choice.origin,
    )


# --- the query -------------------------------------------------------------------------------------------


def make_classifier(loaded: LoadedRun, *, to_host: bool = True) -> Callable[[torch.Tensor], torch.Tensor]:
    """Host input batch -> predicted labels (N,) or, with top-5, (N, 1 + k): [argmax, top-k...]; for a task that
    scores its own predictions (``loaded.score_predictions``), the raw outputs (as float32) instead of labels.

    Call inside ``torch.inference_mode()``. With ``to_host`` the labels come back to host memory (which
    waits for the device); the caller still synchronizes before reading a clock.
    """
    model, predict, device = loaded.model, loaded.predict, loaded.device
    dtype = amp_dtype(loaded.amp)
    non_blocking = device.type == "cuda" and loaded.inputs.is_pinned()
    k = min(5, int(loaded.task.num_classes)) if loaded.top5 else 0

    if predict is None:
        forward: Callable[[torch.Tensor], torch.Tensor] = model
    else:
        def forward(x: torch.Tensor) -> torch.Tensor:
            return predict(model, x)

    if dtype is not None:
        plain_forward = forward

        def forward(x: torch.Tensor) -> torch.Tensor:  # noqa: F811 - autocast wrapper
            with torch.autocast(device_type=device.type, dtype=dtype):
                return plain_forward(x)

    if loaded.score_predictions is not None:
        def labels(logits: torch.Tensor) -> torch.Tensor:
            return logits.float()
    elif k:
        def labels(logits: torch.Tensor) -> torch.Tensor:
            top = logits.topk(min(k, logits.shape[1]), dim=1).indices  # custom data may have < 5 classes
            return torch.cat((logits.argmax(dim=1, keepdim=True), top), dim=1)
    else:
        def labels(logits: torch.Tensor) -> torch.Tensor:
            return logits.argmax(dim=1)

    if device.type == "cpu":
        def classify(x: torch.Tensor) -> torch.Tensor:
            return labels(forward(x))
    elif to_host:
        def classify(x: torch.Tensor) -> torch.Tensor:
            return labels(forward(x.to(device, non_blocking=non_blocking))).cpu()
    else:
        def classify(x: torch.Tensor) -> torch.Tensor:
            return labels(forward(x.to(device, non_blocking=non_blocking)))
    return classify


# --- latency ---------------------------------------------------------------------------------------------


@dataclass
class LatencyRun:
    ns: list[int]  # per-query latency, nanoseconds, in eval-set order
    predictions: torch.Tensor  # (N,) labels or (N, 1 + k) [argmax, top-k]
    warmup: int
    # with a meter: the counters at the start and end of each measured stretch (the progress bar's updates
    # between stretches are left out)
    energy_windows: list[tuple["EnergySnapshot", "EnergySnapshot"]] = field(default_factory=list)


def measure_latency(loaded: LoadedRun, *, warmup: int = DEFAULT_WARMUP,
                    progress: Callable[[int], None] | None = None, progress_every: int = 64,
                    meter: "EnergyMeter | None" = None) -> LatencyRun:
    """Classify every eval example one at a time; time each query from host input to host label.

    ``warmup`` untimed queries (cycling through the eval set) run first. ``progress(done)`` is called
    between queries every ``progress_every`` queries, outside the timed region. With ``meter``, its counters
    are read after the synchronize that ends the warm-up, after the last query, and either side of each
    progress update (``LatencyRun.energy_windows``).
    """
    if warmup < 0:
        raise ConfigError(f"--warmup {warmup}: must be >= 0")
    classify = make_classifier(loaded)
    queries = loaded.queries()
    n = len(queries)
    if n == 0:
        raise ConfigError("the task's eval set is empty")
    device = loaded.device
    sync = (lambda: synchronize(device)) if device.type != "cpu" else None
    clock = time.perf_counter_ns
    ns = [0] * n
    preds: list[torch.Tensor] = [None] * n  # type: ignore[list-item]
    windows: list[tuple[EnergySnapshot, EnergySnapshot]] = []
    with torch.inference_mode():
        for i in range(warmup):
            classify(queries[i % n])
        synchronize(device)
        opened = meter.read() if meter is not None else None
        if sync is None and progress is None:  # the CPU fast path: nothing between the clock reads but the query
            for i in range(n):
                x = queries[i]
                t0 = clock()
                p = classify(x)
                t1 = clock()
                ns[i] = t1 - t0
                preds[i] = p
        else:
            for i in range(n):
                x = queries[i]
                t0 = clock()
                p = classify(x)
                if sync is not None:
                    sync()
                t1 = clock()
                ns[i] = t1 - t0
                preds[i] = p
                if progress is not None and (i + 1) % progress_every == 0:
                    if meter is None:
                        progress(i + 1)
                    elif i + 1 < n:  # the bar's update is not part of the measured stretch
                        windows.append((opened, meter.read()))  # type: ignore[arg-type]
                        progress(i + 1)
                        opened = meter.read()
                    # the last update comes below, after the counters are read
        if meter is not None:  # the device was synchronized after the last query (CPU: synchronous)
            windows.append((opened, meter.read()))  # type: ignore[arg-type]
    if progress is not None:
        progress(n)
    return LatencyRun(ns=ns, predictions=torch.cat(preds).cpu(), warmup=warmup, energy_windows=windows)


def nearest_rank(sorted_values: list[int], percent: int) -> int:
    """The smallest value with at least ``percent``% of the values at or below it (nearest-rank method)."""
    n = len(sorted_values)
    rank = max((percent * n + 99) // 100, 1)  # ceil(percent/100 * n), exact in integers
    return sorted_values[rank - 1]


def latency_stats(ns: list[int]) -> LatencyStats:
    if not ns:
        raise ValueError("no latencies")
    s = sorted(ns)
    n = len(s)
    total = sum(s)
    return LatencyStats(
        n=n, total_s=total / 1e9, mean_ms=total / n / 1e6, min_ms=s[0] / 1e6,
        p50_ms=nearest_rank(s, 50) / 1e6, p90_ms=nearest_rank(s, 90) / 1e6, p99_ms=nearest_rank(s, 99) / 1e6,
        max_ms=s[-1] / 1e6, std_ms=statistics.pstdev(s) / 1e6,
    )


def accuracy_of(predictions: torch.Tensor, labels: torch.Tensor) -> tuple[float, float | None]:
    """(top1, top5 or None) of predictions from ``make_classifier``: (N,) or (N, 1 + k)."""
    labels = labels.to(predictions.device)
    n = max(len(labels), 1)
    if predictions.dim() == 1:
        return (predictions == labels).sum().item() / n, None
    top1 = (predictions[:, 0] == labels).sum().item() / n
    top5 = (predictions[:, 1:] == labels.unsqueeze(1)).any(dim=1).sum().item() / n
    return top1, top5


# --- throughput ------------------------------------------------------------------------------------------


def measure_throughput(loaded: LoadedRun, *, batch_size: int = DEFAULT_BATCH_SIZE, repeats: int = DEFAULT_REPEATS,
                       warmup_passes: int = 1, meter: "EnergyMeter | None" = None,
                       energy_windows: list[tuple["EnergySnapshot", "EnergySnapshot"]] | None = None
                       ) -> ThroughputStats:
    """Offline throughput: whole passes over the eval set in batches; examples/s of the median pass.

    With ``meter``, its counters are read right after the synchronize that starts each timed pass and right
    after the one that ends it; the (start, end) snapshots are appended to ``energy_windows``."""
    if batch_size < 1:
        raise ConfigError(f"--batch-size {batch_size}: must be >= 1")
    if repeats < 1:
        raise ConfigError(f"--throughput-repeats {repeats}: must be >= 1")
    n = loaded.n
    bs = min(batch_size, n)
    classify = make_classifier(loaded, to_host=False)
    batches = [loaded.inputs[i : i + bs] for i in range(0, n, bs)]
    device = loaded.device

    def one_pass() -> torch.Tensor:
        return torch.cat([classify(b) for b in batches]).cpu()

    times: list[float] = []
    try:
        with torch.inference_mode():
            for _ in range(warmup_passes):
                one_pass()
            for _ in range(repeats):
                synchronize(device)
                opened = meter.read() if meter is not None else None
                t0 = time.perf_counter_ns()
                one_pass()
                synchronize(device)
                times.append((time.perf_counter_ns() - t0) / 1e9)
                if meter is not None and opened is not None and energy_windows is not None:
                    energy_windows.append((opened, meter.read()))
    except _OOM:
        raise ConfigError(f"--batch-size {batch_size}: out of device memory; use a smaller batch") from None
    median = statistics.median(times)
    return ThroughputStats(examples_per_s=n / median if median > 0 else float("inf"), batch_size=bs,
                           repeats=repeats, warmup_passes=warmup_passes, pass_s=times)


# --- the whole command -----------------------------------------------------------------------------------


class _Bar:
    def __init__(self, enabled: bool, total: int, desc: str, unit: str):
        self._bar = None
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True)

    def to(self, done: int) -> None:
        if self._bar is not None:
            self._bar.update(done - self._bar.n)  # tqdm redraws at most every mininterval

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _compiled(model: nn.Module, mode: bool | str) -> nn.Module:
    mode = compile_mode(mode)
    if mode == "off":
        return model
    compiled = torch.compile(model) if mode == "default" else torch.compile(model, mode=mode)
    return cast(nn.Module, compiled)  # an OptimizedModule (torch's stub says Callable)


def infer(config: InferConfig) -> InferenceResult:
    """Measure a run's checkpoint; write inference.json and dawnbench_inference.json; return the record."""
    from daybreak.measure.system import system_info
    from daybreak.pricing import cost_usd, resolve_price
    from daybreak.records.dawnbench_inference import submission_author, write_dawnbench_inference

    wall0 = time.perf_counter_ns()
    created_at = datetime.now(timezone.utc)
    # --- flags first, before any work -------------------------------------------------------------------
    check_flags(config)
    if config.backend == "loadgen":
        from daybreak.infer.loadgen import require_loadgen

        require_loadgen()
    price, instance, price_date = resolve_price(config.cost_per_hour, config.instance, config.price_file)
    set_threads(config.threads)
    device = select_device(config.device)
    amp = resolve_amp(config.amp, device)

    loaded = load_for_inference(config.run_dir, device=device, amp=amp, compile=config.compile,
                                data_dir=config.data_dir, download=config.download,
                                allow_custom_data=config.allow_custom_data)
    run = loaded.result
    if config.cost_per_hour is None and config.instance is None:
        price, instance, price_date = run.cost_per_hour, run.instance, run.price_date

    meter = None
    energy, idle_covers = None, None
    if config.energy:
        from daybreak.infer import energy as infer_energy

        meter = infer_energy.open_meter(device)
    else:  # the record says so (no energy at all reads as a record made before daybreak measured energy)
        energy = InferenceEnergy(unavailable={kind: "not measured: asked without energy (energy=False)"
                                              for kind in ("gpu", "cpu_package", "dram")})
    try:
        if meter is not None:
            energy, idle_covers = infer_energy.start_record(meter, config.idle_power_s)
            if not meter.available:
                meter.close()
                meter = None
        # --- batch-1 latency over the whole eval set ----------------------------------------------------
        bar = _Bar(config.progress, loaded.n, f"{run.task} latency", "query")
        try:
            lat = measure_latency(loaded, warmup=config.warmup, progress=bar.to if config.progress else None,
                                  meter=meter)
        finally:
            bar.close()
        stats = latency_stats(lat.ns)

        # --- offline throughput -----------------------------------------------------------------------
        throughput = None
        throughput_windows: list[tuple[EnergySnapshot, EnergySnapshot]] = []
        if config.throughput_repeats > 0:
            throughput = measure_throughput(loaded, batch_size=config.batch_size, repeats=config.throughput_repeats,
                                            meter=meter, energy_windows=throughput_windows)
    finally:
        if meter is not None:
            meter.close()
    if energy is not None and lat.energy_windows:
        energy = infer_energy.finish_record(
            energy,
            infer_energy.window(lat.energy_windows, loaded.n, stats.total_s, energy.idle_power_w, idle_covers),
            infer_energy.window(throughput_windows, loaded.n * len(throughput_windows),
                                math.fsum(throughput.pass_s) if throughput else 0.0, energy.idle_power_w,
                                idle_covers))
    if loaded.score_predictions is not None:  # e.g. SQuAD: F1 of the answers decoded from the timed outputs
        metrics = loaded.score_predictions(lat.predictions)
        accuracy = metrics[run.metric]
        top1, top5 = metrics.get("top1"), metrics.get("top5")
    else:
        top1, top5 = accuracy_of(lat.predictions, loaded.labels)
        accuracy = top5 if run.metric == "top5" and top5 is not None else top1
        metrics = {"top1": top1, **({"top5": top5} if top5 is not None else {})}
    valid = get_metric(run.metric).reaches(accuracy, run.target)
    reason = None if valid else (f"accuracy {accuracy * 100:.2f}% of the timed predictions is below the run's target "
                                 f"{run.target * 100:.2f}% ({run.metric})")

    # --- optional MLCommons LoadGen -------------------------------------------------------------------
    loadgen_result = None
    if config.backend == "loadgen":
        from daybreak.infer.loadgen import run_loadgen

        loadgen_result = run_loadgen(
            loaded, make_classifier(loaded), Path(config.run_dir), min_query_count=config.loadgen_min_queries,
            min_duration_ms=int(round(config.loadgen_min_duration_s * 1000)),
            expected_latency_ns=max(int(stats.p90_ms * 1e6), 1),
            expected_qps=throughput.examples_per_s if throughput else 1e9 / max(stats.mean_ms * 1e6, 1.0),
            batch_size=config.batch_size,
        )

    cost_per_example = cost_usd(stats.mean_ms / 1000.0, price)  # one example's mean latency at the hourly price
    result = InferenceResult(
        run_id=run.run_id, task=run.task, recipe=run.recipe, model=run.model,
        framework=f"PyTorch {torch.__version__.split('+')[0]}", metric=run.metric,
        checkpoint=run.checkpoint or "checkpoint.pt", checkpoint_epoch=loaded.checkpoint.get("epoch"),
        checkpoint_accuracy=loaded.checkpoint.get("accuracy"),
        n_examples=loaded.n, latency=stats, throughput=throughput,
        accuracy=accuracy, top1=top1, top5=top5, metrics=metrics, target=run.target, valid=valid, reason=reason,
        cost_per_hour=price, instance=instance, price_date=price_date,
        cost_per_example_usd=cost_per_example,
        cost_per_10k_usd=None if cost_per_example is None else cost_per_example * 10_000,
        settings=InferenceSettings(
            device=str(device), amp=amp, compile=config.compile != "off", threads=torch.get_num_threads(),
            warmup=config.warmup, throughput_batch_size=throughput.batch_size if throughput else None,
            throughput_repeats=config.throughput_repeats, backend=config.backend,  # type: ignore[arg-type]
            pinned_memory=loaded.inputs.is_pinned() if device.type == "cuda" else False,
            prepared_on=loaded.prepared_on, test_time_predict=loaded.predict is not None,
        ),
        system=system_info(), data_source=loaded.data_source, data_official=loaded.data_official,
        created_at=created_at, command=list(config.command), loadgen=loadgen_result, energy=energy,
    )
    result.duration_s = (time.perf_counter_ns() - wall0) / 1e9
    if config.write:
        result.save(config.run_dir)
        author, email = submission_author(config.run_dir)
        write_dawnbench_inference(result, config.run_dir, author=author, author_email=email)
    return result


__all__ = [
    "DaybreakError", "EXIT_INVALID", "InferConfig", "LatencyRun", "LoadedRun", "accuracy_of", "infer",
    "latency_stats", "load_for_inference", "make_classifier", "measure_latency", "measure_throughput",
    "nearest_rank", "read_checkpoint",
]
