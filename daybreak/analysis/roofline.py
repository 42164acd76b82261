"""Roofline: where a run (or a throughput-sweep configuration) sits against the device's two ceilings.

For each point:

* FLOPs per step: counted with :mod:`daybreak.measure.flops` (FlopCounterMode; matmul/conv/attention FLOPs, a
  multiply-add = 2; elementwise ops and the optimizer update are not counted). For a run, one forward + loss +
  backward of the recipe's model at the run's per-device batch on the CPU, times the world size; for a sweep
  row, the ``flops_per_step`` the sweep recorded.
* Bytes per step: an *estimate* of the DRAM traffic of one step (see ``BYTES_METHOD``).
* Achieved FLOP/s: for a run, FLOPs per step x optimizer steps to the target (or to the last evaluation when
  the target was not reached) / the time of the training phases up to that evaluation (the run's recorded
  ``train`` intervals: no data loading, model initialization, compilation, warm-up, evaluation or record writes,
  so a cold and a warm run of the same recipe agree); the same FLOPs over the headline clock are shown beside it,
  labelled (``headline_*``). A record without phases falls back to the headline clock, with a note. For a sweep
  row, the ``achieved_flops_per_s`` it recorded (FLOPs per step x steps / median time).
* Operational intensity = FLOPs / bytes; attainable FLOP/s = min(peak FLOP/s, bandwidth x intensity);
  utilization = achieved / peak; fraction of the roofline = achieved / attainable.
* Peak FLOP/s (matmul, in the run's precision) and bandwidth (large copy, read + write): from ``daybreak
  peak``'s cache for the device the run used (or ``--peak FILE``), measured on the spot with
  :mod:`daybreak.sweep.peak` when the run used this machine's hardware and nothing is cached. With several
  devices both ceilings are multiplied by the world size.
* MFU against the datasheet: on an NVIDIA GPU of daybreak's catalog (:mod:`daybreak.measure.datasheet`), achieved
  FLOP/s / (the vendor's dense peak in the point's precision x devices), next to the utilization of the measured
  peak. Without autocast a run's convolutions run in TF32 on Ampere and later GPUs (torch's default
  ``cudnn.allow_tf32``) and its matmuls in fp32 (``matmul.allow_tf32`` is off by default), so an image model's MFU
  is against the TF32 column and BERT's against fp32; a sweep row says what its worker ran. On a CPU or a GPU the
  catalog does not list there is no MFU, and the point's notes say why.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal

from pydantic import BaseModel, Field

from daybreak.analysis.sources import classify, provenance, runs_in, unique_labels
from daybreak.analysis.stats import attainable_flops, operational_intensity
from daybreak.errors import ConfigError, DataError, DaybreakError, RecordError
from daybreak.fileio import atomic_write_text
from daybreak.records.base import Versioned
from daybreak.records.provenance import Provenance
from daybreak.records.run import RunResult
from daybreak.records.throughput import PeakResult, ThroughputResult, datasheet_mfu, mfu_precision, with_mfu

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle

JSON_FILE = "roofline.json"
PLOT_FILE = "roofline.png"
MARKDOWN_FILE = "roofline.md"

FLOPS_METHOD = ("FLOPs of one step counted with torch.utils.flop_counter.FlopCounterMode (daybreak.measure.flops): "
                "matmul/convolution/attention FLOPs of forward + loss + backward, a multiply-add = 2 FLOPs; "
                "elementwise ops, normalization and the optimizer update are not counted")
BYTES_METHOD = (
    "estimated DRAM traffic of one training step per device = input batch bytes + 2 x activation bytes "
    "(forward writes each activation, backward reads it back) + 4 x parameter bytes (read in forward, read in "
    "backward, read and written by the optimizer) + 2 x gradient bytes (written by backward, read by the "
    "optimizer) + 2 x optimizer-state bytes (read and written by the optimizer); activation bytes = the sum of "
    "the output tensor sizes of every leaf module in one forward pass (forward hooks), counted at 2 bytes per "
    "element under AMP (bf16/fp16) and at the tensor's own size otherwise. Inference: input + activations + "
    "parameters. Not counted: activation gradients, functional ops outside modules, re-reads when tensors do "
    "not fit in cache and cache hits, so this is a rough lower-order estimate, not a measurement")
ACHIEVED_METHOD = ("run: FLOPs per step x optimizer steps to the target (last evaluation if not reached) / the "
                   "seconds of the training phases up to that evaluation (init, compile, warm-up, data loading and "
                   "evaluation left out; the headline clock's figure is shown beside it, labelled); sweep: the row's "
                   "achieved_flops_per_s (FLOPs per step x steps / median time)")
TRAINING_BASIS = "training phases up to the target"
AMP_TO_PRECISION = {"off": "fp32", "bf16": "bf16", "fp16": "fp16"}


class BytesEstimate(BaseModel):
    """Per device, per step."""

    mode: Literal["train", "infer"] = "train"
    input_bytes: float
    activation_bytes: float  # sum of leaf-module outputs in one forward
    parameter_bytes: float
    gradient_bytes: float = 0.0
    optimizer_state_bytes: float = 0.0
    total_bytes: float


class RooflinePoint(BaseModel):
    label: str
    source: str  # a run directory or a sweep directory
    kind: Literal["run", "sweep"]
    mode: Literal["train", "infer"] = "train"
    precision: str = "fp32"
    world_size: int = 1
    batch_size_per_device: int | None = None
    flops_per_step: float | None = None  # all devices
    bytes_per_step: float | None = None  # all devices
    bytes_breakdown: BytesEstimate | None = None  # one device
    steps: int | None = None
    seconds: float | None = None
    achieved_flops_per_s: float | None = None
    operational_intensity: float | None = None  # FLOP/byte
    peak_flops_per_s: float | None = None  # all devices, this precision
    peak_bandwidth_bytes_per_s: float | None = None  # all devices
    attainable_flops_per_s: float | None = None
    utilization: float | None = None  # achieved / peak
    fraction_of_roofline: float | None = None  # achieved / attainable
    bound: Literal["memory", "compute"] | None = None
    device_name: str | None = None
    device_type: str | None = None  # cpu / cuda / mps
    mfu: float | None = None  # achieved / datasheet peak of every device (NVIDIA GPUs of the catalog only)
    mfu_precision: str | None = None  # the datasheet column: fp32 / tf32 / bf16 / fp16
    datasheet_gpu: str | None = None
    datasheet_peak_flops_per_s: float | None = None  # all devices
    # a run: what ``seconds`` measures ("training phases up to the target"), and the same FLOPs over the headline
    # clock (data loading, init and compile included under DAWNBench's rules), labelled as such
    seconds_basis: str | None = None
    headline_seconds: float | None = None
    headline_rules: str | None = None
    headline_achieved_flops_per_s: float | None = None
    headline_mfu: float | None = None
    notes: list[str] = Field(default_factory=list)


class RooflineAnalysis(Versioned):
    schema_version: int = 1
    kind: Literal["daybreak.roofline"] = "daybreak.roofline"
    points: list[RooflinePoint]
    peaks: list[PeakResult] = Field(default_factory=list)  # the ceilings used (per device)
    flops_method: str = FLOPS_METHOD
    bytes_method: str = BYTES_METHOD
    achieved_method: str = ACHIEVED_METHOD
    notes: list[str] = Field(default_factory=list)
    provenance: Provenance


def roofline_numbers(flops_per_step: float, bytes_per_step: float, achieved: float | None,
                     peak_flops: float | None, bandwidth: float | None) -> dict[str, Any]:
    """intensity = flops/bytes; attainable = min(peak, bandwidth x intensity); utilization = achieved/peak."""
    intensity = operational_intensity(flops_per_step, bytes_per_step)
    out: dict[str, Any] = dict(operational_intensity=intensity, attainable_flops_per_s=None, utilization=None,
                               fraction_of_roofline=None, bound=None)
    if peak_flops and achieved is not None:
        out["utilization"] = achieved / peak_flops
    if peak_flops and bandwidth:
        attainable = attainable_flops(peak_flops, bandwidth, intensity)
        out["attainable_flops_per_s"] = attainable
        out["bound"] = "memory" if bandwidth * intensity < peak_flops else "compute"
        if achieved is not None:
            out["fraction_of_roofline"] = achieved / attainable
    return out


# --- bytes: forward hooks ------------------------------------------------------------------------------------

def _tensor_bytes(value: Any, half: bool) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        size = 2 if half and value.is_floating_point() else value.element_size()
        return value.numel() * size
    if isinstance(value, dict):
        return sum(_tensor_bytes(v, half) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v, half) for v in value)
    return 0


class ActivationCounter:
    """Sum of the output sizes of every leaf module while installed (``with ActivationCounter(model, amp):``)."""

    def __init__(self, model: Any, amp: str = "off"):
        self.model, self.half, self.bytes = model, amp in ("bf16", "fp16"), 0
        self._handles: list[RemovableHandle] = []

    def __enter__(self) -> "ActivationCounter":
        leaves = [m for m in self.model.modules() if not any(True for _ in m.children())] or [self.model]
        for m in leaves:
            self._handles.append(m.register_forward_hook(self._hook))
        return self

    def _hook(self, module: Any, inputs: Any, output: Any) -> None:
        self.bytes += _tensor_bytes(output, self.half)

    def __exit__(self, *exc: object) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()


def _param_bytes(model: Any) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def _state_bytes(optimizer: Any) -> int:
    import torch

    total = 0
    for state in optimizer.state.values():
        for v in state.values():
            if isinstance(v, torch.Tensor) and v.numel() > 1:  # skip scalar step counters
                total += v.numel() * v.element_size()
    return total


def bytes_estimate(mode: str, input_bytes: float, activation_bytes: float, parameter_bytes: float,
                   optimizer_state_bytes: float) -> BytesEstimate:
    """The BYTES_METHOD formula."""
    if mode == "infer":
        total = input_bytes + activation_bytes + parameter_bytes
        return BytesEstimate(mode="infer", input_bytes=input_bytes, activation_bytes=activation_bytes,
                             parameter_bytes=parameter_bytes, total_bytes=total)
    gradient_bytes = parameter_bytes
    total = (input_bytes + 2 * activation_bytes + 4 * parameter_bytes + 2 * gradient_bytes
             + 2 * optimizer_state_bytes)
    return BytesEstimate(mode="train", input_bytes=input_bytes, activation_bytes=activation_bytes,
                         parameter_bytes=parameter_bytes, gradient_bytes=gradient_bytes,
                         optimizer_state_bytes=optimizer_state_bytes, total_bytes=total)


# --- a run's step -----------------------------------------------------------------------------------------------

@dataclass
class StepProfile:
    flops_per_device: int
    bytes: BytesEstimate
    batch_size: int
    input_shape: list[int]
    notes: list[str]


# Examples per step the FLOP counter really runs (on this machine's CPU): the count of a larger batch is scaled
# linearly from it (matmul/conv/attention FLOPs, input and activation bytes are proportional to the batch).
EXTERNAL_NOTE = "a `daybreak time` record of an external program, no daybreak model to count a step's FLOPs on"
PROFILE_MAX_BATCH = 64  # tasks held in memory (Task.in_memory: digits, mnist, cifar10): small models
STREAM_PROFILE_BATCH = 2  # tasks that stream their data (imagenet, squad): ResNet-50 / BERT-size models


def _first_line(e: BaseException, limit: int = 160) -> str:
    text = str(e).strip()
    line = text.splitlines()[0].strip() if text else type(e).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _classes_in_checkpoint(run_dir: Path | None, result: RunResult) -> int | None:
    """The number of outputs of the checkpoint's last linear layer (its class count), if there is one."""
    import torch

    if run_dir is None:
        return None
    path = Path(run_dir) / (result.checkpoint or "checkpoint.pt")
    if not path.is_file():
        return None
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        state = payload.get("state_dict", {}) if isinstance(payload, dict) else {}
        weights = [v for k, v in state.items() if k.endswith("fc.weight") and getattr(v, "dim", lambda: 0)() == 2]
        return int(weights[-1].shape[0]) if weights else None
    except Exception:  # noqa: BLE001 - only a hint for a stand-in; any unreadable file means "unknown"
        return None


def _task_data(result: RunResult, data_dir: Path | None, run_dir: Path | None = None) -> tuple[Any, list[str]]:
    """The task's data (for input shapes and classes only), or the task's stand-in of the same shapes."""
    from daybreak.infer.run_data import recorded_folder
    from daybreak.tasks import get_task

    task = get_task(result.task)
    folder, gone = data_dir, None
    if folder is None:
        recorded = recorded_folder(result)
        if recorded is not None and recorded.is_dir():
            folder = recorded
        elif recorded is not None:
            gone = f"the run's data folder {recorded} is gone or has moved"
    try:
        if gone:
            raise DataError(gone)
        return task.load(folder, True, False), []
    except DaybreakError as e:
        why = _first_line(e)
        checkpoint_classes = _classes_in_checkpoint(run_dir, result)
        classes = checkpoint_classes or task.num_classes
        examples = max(int(result.per_device_batch_size or result.hyperparameters.get("batch_size", 1) or 1), 1)
        data = task.stand_in_data(classes, examples)
        if data is None:
            raise RecordError(f"{result.task} data not found, so its training step cannot be rebuilt ({why}); "
                              "`daybreak analyze roofline --data-dir FOLDER` reads it from elsewhere") from None
        where = "from the checkpoint" if checkpoint_classes else f"the {task.name} task's"
        return data, [f"task data not found ({why[:120]}); counted on synthetic inputs of the task's shapes, "
                      f"{classes} classes ({where})"]


def _epochs_trained(result: RunResult) -> int:
    """Epochs the clock covered: to the target, else to the last evaluation, else the recipe's epochs."""
    if result.reached and result.epochs_to_target:
        return max(math.ceil(result.epochs_to_target - 1e-9), 1)
    if result.history:
        return max(math.ceil(result.history[-1].epoch - 1e-9), 1)
    return max(int(result.hyperparameters.get("epochs", 1) or 1), 1)


def _profile_batches(data: Any, result: RunResult, n: int) -> tuple[list[tuple[int, Any, Any]], list[str]]:
    """[(epochs, x, y)]: one batch of ``n`` examples per distinct input shape of the epochs trained."""
    example = getattr(data, "example_train_batch", None)
    if not callable(example):
        if data.train_x is None or data.train_y is None:
            raise RecordError(f"the {result.task} data holds no training examples in memory and offers no example "
                              "batch, so the training step cannot be rebuilt")
        return [(1, data.train_x[:n], data.train_y[:n])], []
    by_shape: dict[tuple[int, ...], list[int]] = {}
    for epoch in range(_epochs_trained(result)):
        x, y = example(1, epoch=epoch)
        key = tuple(x.shape[1:])
        if key not in by_shape:
            by_shape[key] = [0, epoch]
        by_shape[key][0] += 1
    batches = []
    for count, epoch in by_shape.values():
        x, y = example(n, epoch=epoch)
        batches.append((count, x, y))
    notes = []
    if len(batches) > 1:
        parts = ", ".join(f"{'x'.join(str(d) for d in shape)} for {c} epoch(s)" for shape, (c, _) in by_shape.items())
        notes.append(f"inputs change shape during training ({parts}): FLOPs and bytes per step are the mean over "
                     "the epochs trained")
    return batches, notes


def run_step_profile(result: RunResult, data_dir: Path | None = None, run_dir: Path | None = None) -> StepProfile:
    """FLOPs and the bytes estimate of one training step of ``result``'s recipe, per device, on the CPU."""
    import torch

    from daybreak.measure.flops import step_flops
    from daybreak.recipes import get_recipe

    if result.is_external:
        raise RecordError(f"{result.run_id}: {EXTERNAL_NOTE}")
    try:
        recipe = get_recipe(result.recipe)
    except ConfigError as e:
        raise RecordError(f"{result.run_id}: {e}") from None
    data, notes = _task_data(result, data_dir, run_dir)
    world = max(result.world_size, 1)
    device = torch.device("cpu")
    torch.manual_seed(0)
    setup = recipe.build(dict(result.hyperparameters), data, device)  # configures streamed data (crop, windows)
    streamed = callable(getattr(data, "example_train_batch", None))
    if streamed:
        size = getattr(data, "train_size", None)
        available = size() if callable(size) else 0
    else:
        available = len(data.train_x) if data.train_x is not None else 0
    # what each device took per step: recorded by the run (a recipe's batch_size may be the global batch)
    batch = max(int(result.per_device_batch_size or result.hyperparameters.get("batch_size", 1) or 1), 1)
    if available > 0:
        batch = min(batch, max(available // world, 1))
    counted = min(batch, STREAM_PROFILE_BATCH if streamed else PROFILE_MAX_BATCH)
    batches, shape_notes = _profile_batches(data, result, counted)
    notes += shape_notes
    model = setup.model
    model.train()
    half = result.amp in ("bf16", "fp16")
    weight = sum(w for w, _, _ in batches)
    flops = activation_bytes = input_bytes = 0.0
    x = y = None
    for w, xb, yb in batches:
        with torch.no_grad():
            x = setup.prepare(xb.to(device))
        y = yb.to(device)
        with ActivationCounter(model, result.amp) as counter:
            flops += w * step_flops(model, x, y, setup.loss_fn, train=True)
        activation_bytes += w * counter.bytes
        input_bytes += w * _tensor_bytes(x, half)
    assert x is not None and y is not None
    # one optimizer step, to see the optimizer's state tensors (torch's Tensor.backward is unannotated)
    setup.loss_fn(model(x), y).backward()  # type: ignore[no-untyped-call]
    setup.optimizer.step()
    setup.optimizer.zero_grad(set_to_none=True)
    scale = batch / counted / weight
    if counted < batch:
        notes.append(f"FLOPs and bytes counted at a batch of {counted} and scaled linearly to the run's "
                     f"per-device batch of {batch}")
    est = bytes_estimate("train", input_bytes * scale, activation_bytes * scale, _param_bytes(model),
                         _state_bytes(setup.optimizer))
    return StepProfile(flops_per_device=int(round(flops * scale)), bytes=est, batch_size=batch,
                       input_shape=list(x.shape[1:]), notes=notes)


# --- peaks ------------------------------------------------------------------------------------------------------

def _hardware_of_run(result: RunResult) -> tuple[str, str]:
    """(device type, hardware name) the run used."""
    dtype = result.device.split(":")[0]
    if dtype in ("cuda", "mps") and result.system.gpus:
        index = int(result.device.split(":")[1]) if ":" in result.device else 0
        gpus = result.system.gpus
        return dtype, gpus[index].name if index < len(gpus) else gpus[0].name
    return dtype, result.system.cpu_model


def cached_peaks() -> list[PeakResult]:
    from daybreak.sweep.peak import peak_cache_dir
    from daybreak.records.throughput import load_peak_file

    folder = peak_cache_dir()
    if not folder.is_dir():
        return []
    found = [load_peak_file(p) for p in sorted(folder.glob("*.json"))]
    return [p for p in found if p is not None]


class PeakFinder:
    """Ceilings for (device type, hardware name, threads): --peak file, the cache, or a measurement now."""

    def __init__(self, peak_file: Path | None = None, measure: bool = True,
                 log: Callable[[str], None] | None = None):
        self.given: PeakResult | None = None
        if peak_file is not None:
            from daybreak.records.throughput import load_peak_file

            if not Path(peak_file).is_file():
                raise ConfigError(f"--peak {peak_file}: no such file")
            self.given = load_peak_file(peak_file)
            if self.given is None:
                raise ConfigError(f"--peak {peak_file}: not a PeakResult JSON (made by `daybreak peak --json`)")
        self.measure, self.log = measure, log
        self._memo: dict[tuple[str, str, int | None], tuple[PeakResult | None, str | None]] = {}

    def find(self, device_type: str, name: str, threads: int | None) -> tuple[PeakResult | None, str | None]:
        """(peak, note)."""
        if self.given is not None:
            note = None
            if self.given.device_name != name:
                note = f"ceilings from --peak ({self.given.device_name}), not measured on this run's {name}"
            return self.given, note
        key = (device_type, name, threads)
        if key not in self._memo:
            self._memo[key] = self._find(device_type, name, threads)
        return self._memo[key]

    def _find(self, device_type: str, name: str, threads: int | None) -> tuple[PeakResult | None, str | None]:
        matches = [p for p in cached_peaks() if p.device.split(":")[0] == device_type and p.device_name == name]
        if device_type == "cpu" and threads:
            exact = [p for p in matches if p.threads == threads]
            if exact:
                return exact[-1], None
            if matches:
                return matches[-1], (f"cached CPU peak measured with {matches[-1].threads} threads; "
                                     f"the run used {threads}")
        elif matches:
            return matches[-1], None
        if not self.measure:
            return None, f"no cached `daybreak peak` for {name}; utilization left empty"
        return self._measure_here(device_type, name, threads)

    def _measure_here(self, device_type: str, name: str, threads: int | None) -> tuple[PeakResult | None, str | None]:
        import torch

        from daybreak.sweep import peak as peak_mod

        if device_type == "cuda" and not torch.cuda.is_available() or device_type == "mps" and not (
                getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            return None, f"no cached `daybreak peak` for {name} and no {device_type} device here to measure it"
        device = torch.device(device_type)
        if peak_mod.device_name(device) != name:
            return None, (f"no cached `daybreak peak` for {name}; this machine has {peak_mod.device_name(device)}, "
                          "so it cannot be measured here (pass --peak FILE)")
        before = torch.get_num_threads()
        try:
            if device_type == "cpu" and threads:
                torch.set_num_threads(threads)
            if self.log:
                self.log(f"measuring the peak of {name} now (cached for next time; `daybreak peak` does the same)")
            return peak_mod.get_peak(device, log=self.log), "peak measured now by this analysis"
        finally:
            torch.set_num_threads(before)


def _fill(point: RooflinePoint, peak: PeakResult | None, per_device_bandwidth: float | None = None) -> RooflinePoint:
    """Ceilings (all devices) from the row's own values or ``peak``, then the roofline numbers."""
    if point.peak_bandwidth_bytes_per_s is None and per_device_bandwidth:
        point.peak_bandwidth_bytes_per_s = per_device_bandwidth * point.world_size
    if peak is not None:
        precision, flops = peak.peak_for_amp(point.precision)
        if point.peak_flops_per_s is None:
            if flops:
                point.peak_flops_per_s = flops * point.world_size
            else:
                why = peak.unreliable.get(precision)
                point.notes.append(f"the peak measurement has no {precision} matmul figure"
                                   + (f": {why}" if why else ""))
        if point.peak_bandwidth_bytes_per_s is None and peak.bandwidth_bytes_per_s:
            point.peak_bandwidth_bytes_per_s = peak.bandwidth_bytes_per_s * point.world_size
    if point.flops_per_step and point.bytes_per_step:
        for k, v in roofline_numbers(point.flops_per_step, point.bytes_per_step, point.achieved_flops_per_s,
                                     point.peak_flops_per_s, point.peak_bandwidth_bytes_per_s).items():
            setattr(point, k, v)
    elif point.peak_flops_per_s and point.achieved_flops_per_s is not None:
        point.utilization = point.achieved_flops_per_s / point.peak_flops_per_s
    if point.utilization is not None and point.utilization > 1.0:
        flag = (f"(!) utilization {point.utilization:.0%} of the measured {point.precision} peak is above 100%: the "
                "peak was measured below the device's real ceiling (a busy machine, too few threads) or the FLOP "
                "count is wrong - not a utilization figure")
        if flag not in point.notes:
            point.notes.append(flag)
    return point


def run_point(path: Path, result: RunResult, finder: PeakFinder, data_dir: Path | None = None,
              profiles: dict[tuple[Any, ...], StepProfile] | None = None,
              name: str | None = None) -> tuple[RooflinePoint, PeakResult | None]:
    key = (result.task, result.recipe, json.dumps(result.hyperparameters, sort_keys=True, default=str),
           result.world_size, result.amp, result.data_source)
    profiles = profiles if profiles is not None else {}
    if key not in profiles:
        profiles[key] = run_step_profile(result, data_dir, path)
    prof: StepProfile = profiles[key]
    world = max(result.world_size, 1)
    precision = _run_precision(result)
    flops_per_step = float(prof.flops_per_device * world)
    point = RooflinePoint(label=f"{name or result.run_id} ({result.recipe}, {result.device}, {precision})",
                          source=str(path), kind="run", precision=precision,
                          world_size=world, batch_size_per_device=prof.batch_size,
                          flops_per_step=flops_per_step,
                          bytes_per_step=prof.bytes.total_bytes * world, bytes_breakdown=prof.bytes,
                          notes=list(prof.notes))
    _achieved(point, result, flops_per_step)
    dtype, name = _hardware_of_run(result)
    point.device_name, point.device_type = name, dtype
    peak, note = finder.find(dtype, name, result.threads)
    if note:
        point.notes.append(note)
    _fill(point, peak)
    _datasheet(point, mfu_precision(result.amp, dtype, name, tf32=_run_tf32(result)))
    if point.mfu is not None and point.headline_achieved_flops_per_s is not None and point.achieved_flops_per_s:
        point.headline_mfu = point.mfu * point.headline_achieved_flops_per_s / point.achieved_flops_per_s
    return point, peak


def evaluation_index(result: RunResult) -> int | None:
    """The evaluation the figures stop at: the first at the target, else the last; None without evaluations."""
    if not result.history:
        return None
    if result.reached and result.steps_to_target is not None:
        for i, h in enumerate(result.history):
            if h.step == result.steps_to_target:
                return i
    return len(result.history) - 1


def training_seconds(result: RunResult, index: int) -> float | None:
    """Seconds of the run's ``train`` phases before the end of evaluation ``index`` (the evaluations are the
    run's ``eval`` intervals in order); None for a record without phases."""
    evals = [p for p in result.phases if p.phase == "eval"]
    if index >= len(evals):
        return None
    until = evals[index].end_s
    return sum(min(p.end_s, until) - p.start_s for p in result.phases if p.phase == "train" and p.start_s < until)


def _achieved(point: RooflinePoint, result: RunResult, flops_per_step: float) -> None:
    """FLOP/s over the training phases up to the target (the headline clock's figure beside it, labelled);
    ``flops_per_step``: the point's."""
    i = evaluation_index(result)
    if i is None:
        point.notes.append("no evaluation recorded: no achieved FLOP/s")
        return
    h = result.history[i]
    point.steps = h.step
    if not result.reached:
        point.notes.append(f"not reached: FLOP/s over the {h.step} steps to the last evaluation")
    point.headline_seconds, point.headline_rules = h.elapsed_s, result.rules
    if h.step and h.elapsed_s:
        point.headline_achieved_flops_per_s = flops_per_step * h.step / h.elapsed_s
    train_s = training_seconds(result, i)
    if train_s:
        point.seconds, point.seconds_basis = train_s, TRAINING_BASIS
    else:
        point.seconds, point.seconds_basis = h.elapsed_s, f"the {result.rules} headline clock"
        point.notes.append("the record has no phase intervals: FLOP/s over the headline clock (init and data "
                           "loading included)")
    if point.steps and point.seconds:
        point.achieved_flops_per_s = flops_per_step * point.steps / point.seconds


def _run_precision(result: RunResult) -> str:
    """The matmul precision of the run's ceiling: its autocast precision, or tf32 for fp32 math that ran on TF32
    tensor cores (recorded --tf32 on an sm_80+ GPU; ``daybreak peak`` measures that ceiling)."""
    precision = AMP_TO_PRECISION.get(result.amp, result.amp)
    p = result.performance
    if precision == "fp32" and p.tf32 and p.tf32_applies:
        return "tf32"
    return precision


def _run_tf32(result: RunResult) -> bool:
    """Whether the run's fp32 math ran in TF32: as the run recorded it (``performance.tf32``), else torch's defaults
    for the model's dominant math (records made before the setting was recorded)."""
    if result.performance.tf32 is not None:
        return bool(result.performance.tf32)
    return _tf32_by_default(result.model)


def _tf32_by_default(model: str) -> bool:
    """Whether torch's defaults let the model's dominant math run in TF32 without autocast: convolutions
    (cudnn.allow_tf32 is on) yes, matmuls (matmul.allow_tf32 is off) no."""
    from daybreak.sweep.worker import model_kind

    try:
        return model_kind(model) == "image"
    except ConfigError:
        return False


def _datasheet(point: RooflinePoint, precision: str) -> RooflinePoint:
    """MFU against the datasheet peak of the point's GPU (or, in its notes, why there is none)."""
    d = datasheet_mfu(point.achieved_flops_per_s, point.world_size, point.device_type or "cpu", point.device_name,
                      precision)
    point.mfu, point.mfu_precision, point.datasheet_gpu = d.value, d.precision, d.gpu
    point.datasheet_peak_flops_per_s = d.peak_flops_per_s
    if d.reason:
        point.notes.append(d.reason)
    elif d.value is not None and d.value > 1:
        point.notes.append(f"(!) MFU {d.value:.0%} of the {d.gpu} {d.precision} datasheet peak is above 100%: the "
                           "FLOP count, the time or the GPU named is wrong - not a utilization figure")
    return point


# --- a sweep row ------------------------------------------------------------------------------------------------

PROFILE_BATCH = 2  # bytes of sweep rows are measured at this batch and scaled linearly to the row's batch


def _sweep_profile(row: ThroughputResult) -> tuple[float, float, float, float]:
    """(input bytes per sample, activation bytes per sample, parameter bytes, optimizer-state bytes)."""
    import torch

    from daybreak.sweep.worker import build_workload

    config = row.config
    torch.manual_seed(0)
    work = build_workload(config, PROFILE_BATCH, torch.device("cpu"), 0, 1)
    model = work.model
    x, y = work.next_batch()
    half = config.amp in ("bf16", "fp16")
    state = 0
    if config.mode == "infer":
        model.eval()
        with torch.no_grad(), ActivationCounter(model, config.amp) as counter:
            model(x)
    else:
        model.train()
        optimizer = work.make_optimizer(model)
        with ActivationCounter(model, config.amp) as counter:
            loss = work.loss_fn(model(x), y)
        loss.backward()  # type: ignore[no-untyped-call]  # (torch's Tensor.backward is unannotated)
        optimizer.step()
        state = _state_bytes(optimizer)
    n = len(x)
    return _tensor_bytes(x, half) / n, counter.bytes / n, _param_bytes(model), state


def sweep_points(folder: Path, finder: PeakFinder,
                 log: Callable[[str], None] | None = None) -> tuple[list[RooflinePoint], list[PeakResult]]:
    from daybreak.records.throughput import RESULTS_FILE, latest_by_key, load_results

    rows = [r for r in latest_by_key(load_results(folder / RESULTS_FILE, warn=log)).values() if r.status == "ok"]
    if not rows:
        raise RecordError(f"{folder}: the sweep has no successfully measured configuration")
    points, peaks = [], []
    cache: dict[tuple[Any, ...], tuple[float, float, float, float] | str] = {}
    for row in rows:
        c = row.config
        point = RooflinePoint(label=c.label(), source=str(folder), kind="sweep", mode=c.mode,
                              precision=AMP_TO_PRECISION.get(c.amp, c.amp), world_size=row.world_size,
                              batch_size_per_device=row.batch_size, device_name=row.device_name,
                              device_type=c.device,
                              flops_per_step=float(row.flops_per_step) if row.flops_per_step else None,
                              steps=c.steps, seconds=row.median_time_s,
                              achieved_flops_per_s=row.achieved_flops_per_s,
                              peak_flops_per_s=row.peak_flops_per_s)
        if point.achieved_flops_per_s is None and point.flops_per_step and row.median_time_s:
            point.achieved_flops_per_s = point.flops_per_step * c.steps / row.median_time_s
        key = (c.model, c.mode, c.seq_len, c.image_size, c.data, c.channels_last, c.amp)
        if key not in cache:
            try:
                cache[key] = _sweep_profile(row)
            except Exception as e:  # noqa: BLE001 - a model that cannot be rebuilt here: no bytes, say why
                cache[key] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
        prof = cache[key]
        if isinstance(prof, str):
            point.notes.append(f"bytes not estimated: {prof}")
        else:
            in_ps, act_ps, params, state = prof
            b = row.batch_size or c.batch_size
            est = bytes_estimate(c.mode, in_ps * b, act_ps * b, params, state)
            point.bytes_breakdown = est
            point.bytes_per_step = est.total_bytes * row.world_size
        peak = None
        if point.peak_flops_per_s is None or row.peak_bandwidth_bytes_per_s is None:
            dtype = c.device
            peak, note = finder.find(dtype, row.device_name or "", row.threads_per_process)
            if note:
                point.notes.append(note)
            if peak is not None:
                peaks.append(peak)
        _fill(point, peak, row.peak_bandwidth_bytes_per_s)
        _datasheet(point, with_mfu(row).mfu_precision or row.math_precision or point.precision)
        points.append(point)
    return points, peaks


# --- the analysis ------------------------------------------------------------------------------------------------

def analyze_roofline(paths: list[str | Path], peak_file: Path | None = None, measure: bool = True,
                     data_dir: Path | None = None, command: list[str] | None = None,
                     log: Callable[[str], None] | None = None) -> RooflineAnalysis:
    if not paths:
        raise ConfigError("give a run, repeat or sweep directory")
    finder = PeakFinder(peak_file, measure, log)
    points: list[RooflinePoint] = []
    peaks: dict[str, PeakResult] = {}
    inputs: list[str] = []
    profiles: dict[tuple[Any, ...], StepProfile] = {}
    items = [classify(p) for p in paths]
    labels = unique_labels([run for kind, folder in items if kind != "sweep" for run in runs_in(folder)])
    notes = []
    for kind, folder in items:  # in the order given
        if kind == "sweep":
            pts, pks = sweep_points(folder, finder, log)
            points += pts
            inputs.append(str(folder))
            for pk in pks:
                peaks[pk.machine_key] = pk
            continue
        for run in runs_in(folder):
            if run.result.is_external:
                notes.append(f"{labels.get(run.path, run.result.run_id)} left out: {EXTERNAL_NOTE}")
                continue
            point, peak = run_point(run.path, run.result, finder, data_dir, profiles, labels.get(run.path))
            points.append(point)
            inputs.append(str(run.path))
            if peak is not None:
                peaks[peak.machine_key] = peak
    if not points:
        raise RecordError("no roofline point: " + "; ".join(notes or ["nothing to place"]))
    if not peaks and all(p.peak_flops_per_s is None for p in points):
        notes.append("no peak measurement for these devices: run `daybreak peak` on that machine, or pass --peak FILE")
    return RooflineAnalysis(points=points, peaks=list(peaks.values()), notes=notes,
                            provenance=provenance(inputs, command))


def _fmt(x: float | None, unit: str) -> str:
    from daybreak.measure.flops import format_flops

    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format_flops(x, unit)


def table_rows(a: RooflineAnalysis) -> tuple[list[str], list[list[str]]]:
    header = ["point", "FLOP/step", "bytes/step (est.)", "intensity (FLOP/B)", "achieved (training phases)", "peak",
              "bandwidth", "attainable", "utilization", "MFU (datasheet)", "of roofline", "bound",
              "achieved over the headline clock"]
    body = []
    for p in a.points:
        body.append([
            p.label, _fmt(p.flops_per_step, "FLOP"), _fmt(p.bytes_per_step, "B"),
            "-" if p.operational_intensity is None else f"{p.operational_intensity:.3g}",
            _fmt(p.achieved_flops_per_s, "FLOP/s"), _fmt(p.peak_flops_per_s, "FLOP/s"),
            _fmt(p.peak_bandwidth_bytes_per_s, "B/s"), _fmt(p.attainable_flops_per_s, "FLOP/s"),
            "-" if p.utilization is None else f"{p.utilization:.2%}" + (" (!)" if p.utilization > 1 else ""),
            "-" if p.mfu is None else f"{p.mfu:.2%} of {p.datasheet_gpu} {p.mfu_precision}"
            + (" (!)" if p.mfu > 1 else ""),
            "-" if p.fraction_of_roofline is None else f"{p.fraction_of_roofline:.2%}", p.bound or "-",
            _headline_cell(p),
        ])
    return header, body


def _headline_cell(p: RooflinePoint) -> str:
    """A run's FLOP/s (and MFU) over its headline clock, labelled with the rule set; '-' for sweep rows."""
    if p.headline_achieved_flops_per_s is None:
        return "-"
    mfu = f", MFU {p.headline_mfu:.2%}" if p.headline_mfu is not None else ""
    return f"{_fmt(p.headline_achieved_flops_per_s, 'FLOP/s')}{mfu} ({p.headline_rules} clock)"


def write_roofline(a: RooflineAnalysis, out: Path) -> list[Path]:
    from daybreak.analysis import plots
    from daybreak.analysis.tables import markdown_table

    out.mkdir(parents=True, exist_ok=True)
    written = [atomic_write_text(out / JSON_FILE, a.model_dump_json(indent=2) + "\n")]
    header, body = table_rows(a)
    md = ["# Roofline", "", markdown_table(header, body), "", f"FLOPs: {a.flops_method}.", "",
          f"Bytes: {a.bytes_method}.", "", f"Achieved: {a.achieved_method}.", ""]
    for p in a.points:
        md += [f"Note ({p.label}): {n}" for n in p.notes]
    md += [f"Note: {n}" for n in a.notes]
    written.append(atomic_write_text(out / MARKDOWN_FILE, "\n".join(md) + "\n"))
    written.append(plots.roofline_plot(a, out / PLOT_FILE))
    return written
