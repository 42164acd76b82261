"""One throughput measurement in a fresh process: ``python -m daybreak.sweep.worker --spec S.json --result R.json``.

Run directly for one device, under torchrun for several (DDP: gloo on CPU, NCCL on GPUs; local rank 0 reports).
What it does, in order:

1. build the model and one batch per device (synthetic inputs of the model's shape, or a task's real data
   prepared by the task's recipe and kept on the device), the loss and the optimizer (SGD with momentum for the
   CNNs, AdamW for BERT); wrap in DDP, then ``torch.compile`` if asked;
2. count the FLOPs of one step (forward + backward for train, forward for infer) with FlopCounterMode on the
   unwrapped model, once, before anything is timed;
3. run ``warmup`` steps (compilation happens here), then ``repeats`` windows of ``steps`` steps, each timed
   with ``perf_counter_ns`` after synchronizing the device (and, with DDP, a barrier) at both ends; the energy
   counters (daybreak.measure.energy: this rank's GPU by UUID and the node's CPU powercap zones) are read right
   after the synchronize and barrier at both ends too, and every rank's joules are combined (each physical
   counter once);
4. write a WorkerReport as JSON: the first process of each node (local rank 0) writes R.json, so the node that
   records results has one whichever global rank torchrun's rendezvous gave it; the ranks' timed windows are
   aligned by the barriers, so every node's report carries the same times. Another rank writes
   ``R.json.rankN`` only if it fails.

A training step is the whole of forward, loss, backward (with the DDP all-reduce) and optimizer step; an
inference step is a forward pass under ``torch.inference_mode``. Inputs are already on the device.

Testing hooks (environment): ``DAYBREAK_SWEEP_OOM_ABOVE=N`` raises an out-of-memory error when the per-device
batch exceeds N; ``DAYBREAK_SWEEP_FAIL_BATCH=N`` raises a RuntimeError when it equals N.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

import torch
import torch.nn.functional as F
from pydantic import BaseModel, Field
from torch import nn

from daybreak.errors import ConfigError
from daybreak.fileio import atomic_write_text
from daybreak.text import one_line as text_one_line
from daybreak.measure.device import autocast, synchronize
from daybreak.records.throughput import Status, ThroughputConfig
from daybreak.sweep.launch import cpu_cores

if TYPE_CHECKING:
    from daybreak.measure.energy import EnergyDelta, EnergySnapshot
    from daybreak.train.distributed import DistContext
    from daybreak.tasks import Task

# The one model pre-trained on token sequences (masked-language modelling); every other model's input is its task's
# (Task.input_spec of the task its recipes train it for).
TOKEN_MODELS = {"bert_base"}
DEFAULT_SEQ_LEN = 128
MLM_PROBABILITY = 0.15  # BERT pre-training: 15% of the tokens are predicted


class WorkerSpec(BaseModel):
    config: ThroughputConfig
    batch_size: int  # per device, this attempt (--find-max-batch may have halved config.batch_size)
    threads: int


class WorkerReport(BaseModel):
    status: Status  # ok / oom / failed
    error: str | None = None
    traceback: str | None = None
    rank: int = 0
    world_size: int = 1
    batch_size: int
    global_batch_size: int
    times_s: list[float] = Field(default_factory=list)
    flops_per_step_per_device: int | None = None  # the model FLOPs (daybreak's count; see flops_source)
    own_flops_per_step_per_device: int | None = None  # a program's own count (a diagnostic)
    flops_source: str | None = None  # "daybreak" (torch.utils.flop_counter on daybreak's model) or "program"
    input_shape: list[int] = Field(default_factory=list)
    peak_memory_bytes: int | None = None
    peak_host_rss_bytes: int | None = None
    backend: str | None = None
    threads: int | None = None
    inter_op_threads: int | None = None
    cores_used: float | None = None  # CPU time / wall time over the timed steps (programs on a CPU)
    layout: str | None = None  # image layout the model trained in (NCHW / NHWC), as the program says
    device_name: str | None = None
    optimizer: str | None = None
    init_s: float | None = None
    cpu_cores: int | None = None  # cores this process may run on (its affinity mask)
    data_official: bool | None = None  # --data: whether the files match the official checksums
    data_notes: list[str] = Field(default_factory=list)  # --data: the reader's notes (custom data, ...)
    math_precision: str | None = None  # what the model's math ran in: fp32 / tf32 / bf16 / fp16
    energy_j: list[float | None] = Field(default_factory=list)  # each timed repeat, all ranks (None: not read)
    energy_covers: list[str] = Field(default_factory=list)  # the kinds in those totals
    energy_unavailable: dict[str, str] = Field(default_factory=dict)  # kind -> why it is not in the totals
    system: dict[str, Any] | None = None
    framework: str | None = None  # "pytorch" here; a program's own name (daybreak.sweep.program)
    framework_version: str | None = None
    compiler: str | None = None  # "torch.compile" / "none"; a program's: "XLA", ...
    notes: list[str] = Field(default_factory=list)  # for the row's notes
    finished_at: float = Field(default_factory=time.time)

    def row_fields(self, steps: int) -> dict[str, Any]:
        """What a ThroughputResult takes from this report besides the times: the precision the math ran in and
        the energy of the timed repeats (joules per sample, mean power)."""
        from daybreak.records.throughput import energy_fields

        return {"math_precision": self.math_precision,
                **energy_fields(self.energy_j, self.times_s, self.global_batch_size * steps, self.energy_covers,
                                self.energy_unavailable)}


# --- what to run --------------------------------------------------------------------------------------------

def model_task(name: str) -> "Task | None":
    """The task whose inputs ``name`` takes: that of a recipe training it (a task's reference recipe first), when
    the task's examples are images (token tasks bring their own features: only TOKEN_MODELS run on tokens)."""
    from daybreak.recipes import get_recipe, recipe_names
    from daybreak.tasks import get_task

    users = [get_recipe(r) for r in recipe_names() if get_recipe(r).model == name]
    users.sort(key=lambda r: get_task(r.task).reference_recipe != r.name)
    tasks = [get_task(r.task) for r in users]
    return next((t for t in tasks if t.input_spec.kind == "image"), None)


def model_kind(name: str) -> str:
    """'image' or 'tokens' (or a ConfigError naming the models that have an input spec)."""
    if name in TOKEN_MODELS:
        return "tokens"
    if model_task(name) is not None:
        return "image"
    from daybreak.models import model_names

    known = sorted(m for m in model_names() if m in TOKEN_MODELS or model_task(m) is not None)
    raise ConfigError(f"model {name!r} has no throughput input spec (no recipe trains it on an image task); "
                      f"supported: {', '.join(known)}")


def synthetic_image_shape(config: ThroughputConfig) -> tuple[int, int, int]:
    """(channels, height, width) of the model's task's images, square at ``--image-size`` when given."""
    task = model_task(config.model)
    assert task is not None, "model_kind first"
    channels, height, width = task.input_spec.shape
    if config.image_size:
        height = width = config.image_size
    return channels, height, width


def make_optimizer(cls: Callable[..., torch.optim.Optimizer], model: nn.Module, fused: bool = True,
                   **kwargs: Any) -> torch.optim.Optimizer:
    """The fused implementation where this torch/device has one (one kernel per step instead of a pass per
    elementwise op: 10x faster AdamW on CPU), else (or with ``fused=False``: torch.compile traces the foreach one
    into its own kernels, the fused one it cannot trace) the default (foreach) one."""
    if fused:
        try:
            return cls(model.parameters(), fused=True, **kwargs)
        except (RuntimeError, TypeError, ValueError):
            pass
    return cls(model.parameters(), **kwargs)


def describe_optimizer(optimizer: torch.optim.Optimizer) -> str:
    group = optimizer.param_groups[0]
    keys = [k for k in ("lr", "momentum", "weight_decay") if k in group]
    args = ", ".join(f"{k}={group[k]:g}" for k in keys)
    impl = "fused" if group.get("fused") else ("foreach" if group.get("foreach") in (True, None) else "for-loop")
    return f"{type(optimizer).__name__}({args}, {impl})"


@dataclass
class Workload:
    model: nn.Module
    next_batch: Callable[[], tuple[torch.Tensor, torch.Tensor]]
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    input_shape: list[int]
    make_optimizer: Callable[..., torch.optim.Optimizer]  # (model, fused=True) -> the optimizer
    data_official: bool | None = None  # real data: whether the files match the official checksums
    data_notes: list[str] = field(default_factory=list)


def _cycle(x: torch.Tensor, y: torch.Tensor, batch: int) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    """Consecutive slices of (x, y), wrapping around: views, no copies."""
    n = len(x)
    if n < batch:
        reps = -(-batch // n) + 1
        x, y, n = x.repeat(reps, *([1] * (x.dim() - 1))), y.repeat(reps), n * reps
    state = {"i": 0}

    def next_batch() -> tuple[torch.Tensor, torch.Tensor]:
        i = state["i"]
        if i + batch > n:
            i = 0
        state["i"] = i + batch
        return x[i:i + batch], y[i:i + batch]

    return next_batch


def masked_count(seq_len: int) -> int:
    """The masked tokens per sequence: 15% of them, rounded half up, at least 1 (= reference.masked_count)."""
    return max(1, int(seq_len * MLM_PROBABILITY + 0.5))


def synthetic_tokens(batch: int, seq_len: int, vocab: int, generator: torch.Generator
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(token ids (B, L), the sorted positions of each sequence's masked tokens (B, P), their labels (B, P)): the
    same count P in every sequence, so every framework's step has static shapes."""
    ids = torch.randint(1, vocab, (batch, seq_len), generator=generator)
    positions = torch.rand(batch, seq_len, generator=generator).argsort(dim=1)[:, :masked_count(seq_len)]
    positions = positions.sort(dim=1).values
    return ids, positions, ids.gather(1, positions)


def mlm_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The masked-LM loss: the mean cross-entropy over the masked positions (the only ones scored)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


class MaskedLMBatch(nn.Module):
    """BERT's masked-LM step on one tensor per batch (the worker's steps take one input): each row is a
    sequence's ``seq_len`` token ids followed by the positions of its masked tokens, which are all the head
    scores (daybreak.models.bert: ``masked_positions``)."""

    def __init__(self, bert: nn.Module, seq_len: int):
        super().__init__()
        self.bert, self.seq_len = bert, seq_len

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.bert(batch[:, :self.seq_len], masked_positions=batch[:, self.seq_len:])
        return out


def build_workload(config: ThroughputConfig, batch: int, device: torch.device, rank: int, world: int) -> Workload:
    from daybreak.models import create_model

    kind = model_kind(config.model)
    generator = torch.Generator().manual_seed(1234 + rank)
    memory_format = torch.channels_last if config.channels_last else torch.contiguous_format
    if kind == "tokens":
        if config.data:
            raise ConfigError(f"--data {config.data}: real data is for image models; {config.model} "
                              "runs on synthetic token sequences")
        seq_len = config.seq_len or DEFAULT_SEQ_LEN
        from daybreak.models.bert import BertForMaskedLM

        bert = create_model(config.model).to(device)
        assert isinstance(bert, BertForMaskedLM), "TOKEN_MODELS are BERTs"
        if seq_len > bert.config.max_position_embeddings:
            raise ConfigError(f"--seq-len {seq_len}: {config.model} has "
                              f"{bert.config.max_position_embeddings} positions")
        ids, positions, labels = synthetic_tokens(batch, seq_len, bert.config.vocab_size, generator)
        x, y = torch.cat([ids, positions], dim=1).to(device), labels.to(device)

        return Workload(model=MaskedLMBatch(bert, seq_len), next_batch=lambda: (x, y), loss_fn=mlm_loss,
                        input_shape=[seq_len],
                        make_optimizer=lambda m, fused=True: make_optimizer(torch.optim.AdamW, m, fused, lr=1e-5,
                                                                            weight_decay=0.01))

    def sgd(m: nn.Module, fused: bool = True) -> torch.optim.Optimizer:
        return make_optimizer(torch.optim.SGD, m, fused, lr=1e-3, momentum=0.9, weight_decay=5e-5)

    if config.data:
        from daybreak.recipes import get_recipe
        from daybreak.tasks import get_task

        task = get_task(config.data)
        # The sweep found (and if need be downloaded) the files before starting any worker: never download here,
        # where several ranks would do it at once.
        data = task.load(Path(config.data_dir) if config.data_dir else None, config.allow_custom_data, False)
        # the grid takes only tasks that feed sweeps (Task.feeds_sweeps: their examples are in memory)
        assert data.train_x is not None and data.train_y is not None, f"{task.name} holds no training examples"
        recipe = get_recipe(task.reference_recipe)
        setup = recipe.build(recipe.hyperparameters(), data, device)  # for its prepare (normalize, layout)
        perm = torch.randperm(len(data.train_x), generator=generator)[rank::world]  # this rank's shard
        with torch.no_grad():
            xs = setup.prepare(data.train_x[perm].to(device)).contiguous(memory_format=memory_format)
        ys = data.train_y[perm].to(device)
        extra = {"in_channels": xs.shape[1]} if config.model == "resnet50" else {}
        model = create_model(config.model, num_classes=data.num_classes, **extra)
        # torch's stub of Module.to omits memory_format (the method takes it)
        model = model.to(device, memory_format=memory_format)  # type: ignore[call-overload]
        return Workload(model=model, next_batch=_cycle(xs, ys, batch), loss_fn=F.cross_entropy,
                        input_shape=list(xs.shape[1:]), make_optimizer=sgd, data_official=data.official,
                        data_notes=list(data.notes))

    shape = synthetic_image_shape(config)
    image_task = model_task(config.model)
    assert image_task is not None
    num_classes = image_task.num_classes
    model = create_model(config.model, num_classes=num_classes)
    model = model.to(device, memory_format=memory_format)  # type: ignore[call-overload]  # (as above)
    x = torch.randn(batch, *shape, generator=generator).to(device).contiguous(memory_format=memory_format)
    y = torch.randint(0, num_classes, (batch,), generator=generator).to(device)
    return Workload(model=model, next_batch=lambda: (x, y), loss_fn=F.cross_entropy, input_shape=list(shape),
                    make_optimizer=sgd)


# --- the training step -------------------------------------------------------------------------------------

WHOLE_STEP = "torch.compile"  # forward, loss, backward and optimizer under the compiler (XLA's scope)
MODEL_ONLY = "torch.compile (model only)"  # DDP or fp16 loss scaling: the model compiled, the rest eager


def compile_whole_step(model: nn.Module, optimizer: torch.optim.Optimizer,
                       loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], device: torch.device, amp: str,
                       backend: Any = "inductor") -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The whole training step under torch.compile, as XLA compiles JAX's and TensorFlow's: Dynamo traces the
    forward, the loss and the backward (``trace_autograd_ops``) into one graph and the optimizer's update (a
    foreach optimizer: the fused one is opaque to it) into another (torch's optimizer breaks the graph at its
    no_grad boundary on purpose); the gradients are released in the step. Returns step(x, y) -> the loss."""
    import torch._dynamo

    try:
        setattr(torch._dynamo.config, "trace_autograd_ops", True)  # noqa: B010 - a config flag torch may lack
    except AttributeError:  # an older torch: compiled autograd captures the backward instead
        setattr(torch._dynamo.config, "compiled_autograd", True)  # noqa: B010
    params = [p for group in optimizer.param_groups for p in group["params"]]

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with autocast(device, amp):
            loss = loss_fn(model(x), y)
        value = loss.detach()
        loss.backward()  # type: ignore[no-untyped-call]  # (torch's Tensor.backward is unannotated)
        optimizer.step()
        for p in params:
            p.grad = None
        return value

    return cast(Callable[[torch.Tensor, torch.Tensor], torch.Tensor], torch.compile(step, backend=backend))


def make_train_step(work: Workload, device: torch.device, amp: str, compile: bool, dist_ctx: "DistContext",
                    ) -> tuple[Callable[[], torch.Tensor], str, str]:
    """(step() -> the step's loss tensor, the optimizer's description, the compiler): daybreak's TrainStep (the
    training step of `daybreak run`) eagerly; with ``compile`` the whole step compiled (compile_whole_step), or,
    under DDP or fp16 loss scaling (whose hooks and scaler Dynamo cannot trace into one step), the model compiled
    and the rest eager, which the compiler's name says."""
    from daybreak.train.step import Backend, TrainStep

    model = work.model
    whole = compile and not dist_ctx.enabled and amp != "fp16"
    optimizer = work.make_optimizer(model, fused=not whole)
    if whole:
        compiled = compile_whole_step(model, optimizer, work.loss_fn, device, amp)

        def run_compiled() -> torch.Tensor:
            x, y = work.next_batch()
            return compiled(x, y)

        return run_compiled, describe_optimizer(optimizer), WHOLE_STEP
    runnable: nn.Module = model
    if dist_ctx.enabled:
        from torch.nn.parallel import DistributedDataParallel

        runnable = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    if compile:
        runnable = cast(nn.Module, torch.compile(runnable))  # an OptimizedModule (torch's stub says Callable)
    train_step = TrainStep(runnable, optimizer, work.loss_fn, Backend(device, amp, dist_ctx))

    def run() -> torch.Tensor:
        x, y = work.next_batch()
        return train_step(x, y)

    return run, describe_optimizer(optimizer), MODEL_ONLY if compile else "none"


def model_step_flops(config: ThroughputConfig, batch: int) -> int:
    """daybreak's count of one step's FLOPs on one device for ``config``'s model, shape and mode at ``batch``
    (torch.utils.flop_counter on meta tensors: shapes only, nothing computed): the model FLOPs every framework's
    row of the same (model, shape, batch) carries."""
    from daybreak.measure.flops import step_flops
    from daybreak.models import create_model

    train = config.mode == "train"
    with torch.device("meta"):
        if model_kind(config.model) == "tokens":
            seq_len = config.seq_len or DEFAULT_SEQ_LEN
            model: nn.Module = MaskedLMBatch(create_model(config.model), seq_len)
            x = torch.zeros(batch, seq_len + masked_count(seq_len), dtype=torch.long)
            y = torch.zeros(batch, masked_count(seq_len), dtype=torch.long)
            loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = mlm_loss
        else:
            task = model_task(config.model)
            assert task is not None, "model_kind checked it"
            model = create_model(config.model, num_classes=task.num_classes)
            x = torch.zeros(batch, *synthetic_image_shape(config))
            y = torch.zeros(batch, dtype=torch.long)
            loss_fn = F.cross_entropy
    model.train(train)
    return step_flops(model, x, y, loss_fn, train)


# --- helpers ------------------------------------------------------------------------------------------------

def is_oom(error: BaseException) -> bool:
    if isinstance(error, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(error).lower()
    return any(s in text for s in ("out of memory", "can't allocate memory", "not enough memory",
                                   "failed to allocate"))


def one_line(error: BaseException, limit: int = 400) -> str:
    """A worker's failure on one line, with its type (daybreak.text.one_line)."""
    return text_one_line(error, limit, with_type=True)


def host_rss_peak_bytes() -> int | None:
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak if sys.platform == "darwin" else peak * 1024)  # bytes on macOS, KiB on Linux
    except (ImportError, OSError):
        try:
            import psutil

            info = psutil.Process().memory_info()
            return int(getattr(info, "peak_wset", info.rss))
        except Exception:  # noqa: BLE001 - memory is informative only
            return None


def math_precision(config: ThroughputConfig, device: torch.device) -> str:
    """What the model's matmuls/convolutions run in: the autocast precision; without autocast on an Ampere or
    later GPU, TF32 where torch allows it for the model's dominant operation (convolutions through cuDNN for the
    image models, matmuls for BERT), else fp32."""
    precision = {"off": "fp32", "bf16": "bf16", "fp16": "fp16"}[config.amp]
    if precision != "fp32" or device.type != "cuda":
        return precision
    if torch.cuda.get_device_capability(device)[0] < 8:
        return "fp32"
    allowed = (torch.backends.cuda.matmul.allow_tf32 if model_kind(config.model) == "tokens"
               else torch.backends.cudnn.allow_tf32)
    return "tf32" if allowed else "fp32"


class RepeatEnergy:
    """The energy counters of this rank (its GPU, the node's CPU zones), read at each timed repeat's ends."""

    def __init__(self, device: torch.device, rank: int):
        from daybreak.measure.energy import EnergyMeter, torch_gpu_uuid

        gpus: list[int | str] = []
        if device.type == "cuda":
            uuid = torch_gpu_uuid(device.index or 0)
            gpus = [uuid] if uuid else [device.index or 0]
        self.meter = EnergyMeter(gpus=gpus, rank=rank)
        self.windows: list[tuple[EnergySnapshot, EnergySnapshot]] = []  # (start, end) snapshot of each repeat
        self._open: EnergySnapshot | None = None

    def start(self) -> None:
        self._open = self.meter.read()

    def stop(self) -> None:
        assert self._open is not None, "start() first"
        self.windows.append((self._open, self.meter.read()))

    def deltas(self) -> list[EnergyDelta]:
        from daybreak.measure.energy import delta

        return [delta(a, b) for a, b in self.windows]

    def close(self) -> None:
        self.meter.close()


def combine_repeats(per_rank: list[list[EnergyDelta]]) -> tuple[list[float | None], list[str], dict[str, str]]:
    """Every rank's per-repeat EnergyDelta -> (joules of each repeat, all ranks, each counter once; the kinds
    those totals cover; why a kind is not in them)."""
    from daybreak.measure.energy import combine_ranks

    repeats = min((len(r) for r in per_rank), default=0)
    joules: list[float | None] = []
    covers: list[str] = []
    unavailable: dict[str, str] = {}
    for i in range(repeats):
        combined = combine_ranks([r[i] for r in per_rank])
        joules.append(combined.total_j)
        if i == 0:
            covers, unavailable = list(combined.total_covers), dict(combined.unavailable)
        elif combined.total_covers != covers:  # a kind that dropped out on the way: no consistent total
            joules[-1] = None
            unavailable.update(combined.unavailable)
    return joules, covers, unavailable


def _inject_failures(batch: int) -> None:
    limit = os.environ.get("DAYBREAK_SWEEP_OOM_ABOVE")
    if limit and batch > int(limit):
        raise torch.OutOfMemoryError(f"simulated out of memory: batch {batch} > DAYBREAK_SWEEP_OOM_ABOVE={limit}")
    fail = os.environ.get("DAYBREAK_SWEEP_FAIL_BATCH")
    if fail and batch == int(fail):
        raise RuntimeError(f"injected failure for batch {batch} (DAYBREAK_SWEEP_FAIL_BATCH)")


class Progress:
    """Rank 0 writes {"phase", "done", "total"} to a small file the parent polls; never inside a timed window."""

    def __init__(self, path: Path | None, total: int):
        self.path, self.total, self.done = path, total, 0

    def update(self, phase: str, done: int | None = None) -> None:
        if self.path is None:
            return
        if done is not None:
            self.done = done
        try:
            self.path.write_text(json.dumps(dict(phase=phase, done=self.done, total=self.total)))
        except OSError:
            pass


# --- the measurement ----------------------------------------------------------------------------------------

def measure(spec: WorkerSpec, progress_path: Path | None = None) -> WorkerReport:
    """Everything after process start: returns the report of this rank (raises on failure)."""
    import torch.distributed as dist

    from daybreak.measure.flops import step_flops

    t_start = time.perf_counter()
    config, batch = spec.config, spec.batch_size
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.set_num_threads(spec.threads)

    if config.device == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("CUDA is not available in the worker")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    elif config.device == "mps":
        device = torch.device("mps")
    else:
        device = torch.device("cpu")

    backend = None
    if world > 1:
        backend = "nccl" if device.type == "cuda" else "gloo"
        kwargs: dict[str, Any] = {}
        if device.type == "cuda" and "device_id" in inspect.signature(dist.init_process_group).parameters:
            kwargs["device_id"] = device  # torch >= 2.3: binds NCCL to this rank's GPU up front
        dist.init_process_group(backend=backend, **kwargs)

    def barrier() -> None:
        if world > 1:
            if backend == "nccl":
                dist.barrier(device_ids=[local_rank])
            else:
                dist.barrier()

    progress = Progress(progress_path if local_rank == 0 else None, config.warmup + config.steps * config.repeats)
    progress.update("build")
    torch.manual_seed(rank)
    train = config.mode == "train"
    _inject_failures(batch)
    work = build_workload(config, batch, device, rank, world)
    model = work.model
    model.train(train)

    # FLOPs of one step on this device, on the plain model, under the same autocast (so memory matches).
    progress.update("count FLOPs")
    x0, y0 = work.next_batch()
    with autocast(device, config.amp):
        flops = step_flops(model, x0, y0, work.loss_fn, train)

    optimizer_name, compiler = None, "none"
    if train:
        from daybreak.train.distributed import DistContext

        dist_ctx = DistContext(rank=rank, world_size=world, local_rank=local_rank, backend=backend)
        train_step, optimizer_name, compiler = make_train_step(work, device, config.amp, config.compile, dist_ctx)

        def step() -> None:
            train_step()
    else:
        runnable = cast(nn.Module, torch.compile(model)) if config.compile else model
        compiler = "torch.compile" if config.compile else "none"

        def step() -> None:
            x, _ = work.next_batch()
            with torch.inference_mode(), autocast(device, config.amp):
                runnable(x)

    energy = RepeatEnergy(device, rank)
    try:
        progress.update("warm-up" + (" (compiling)" if config.compile else ""))
        for i in range(config.warmup):
            step()
            progress.update("warm-up", i + 1)
        synchronize(device)
        barrier()
        init_s = time.perf_counter() - t_start

        times: list[float] = []
        for r in range(config.repeats):
            progress.update(f"repeat {r + 1}/{config.repeats}")
            synchronize(device)
            barrier()
            energy.start()  # after the synchronize and barrier, just before the clock starts
            t0 = time.perf_counter_ns()
            for _ in range(config.steps):
                step()
            synchronize(device)
            barrier()
            times.append((time.perf_counter_ns() - t0) / 1e9)
            energy.stop()  # just after the clock stops
            progress.update(f"repeat {r + 1}/{config.repeats}", config.warmup + (r + 1) * config.steps)
    finally:
        energy.close()
    deltas = energy.deltas()
    if world > 1:  # every rank's joules, so that each node's report has the job's (each counter once)
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, deltas)
        energy_j, energy_covers, energy_unavailable = combine_repeats(gathered)
    else:
        energy_j, energy_covers, energy_unavailable = combine_repeats([deltas])

    peak_mem = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    rss = host_rss_peak_bytes()
    if world > 1:  # the largest over ranks
        stats = torch.tensor([peak_mem or 0, rss or 0], dtype=torch.float64,
                             device=device if backend == "nccl" else "cpu")
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)
        peak_mem = int(stats[0].item()) if peak_mem is not None else None
        rss = int(stats[1].item()) if rss is not None else None

    system = None
    device_name = None
    if local_rank == 0:
        from daybreak.measure.system import system_info

        system = system_info().model_dump(mode="json")
        device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else system["cpu_model"]
    report = WorkerReport(
        status="ok", rank=rank, world_size=world, batch_size=batch, global_batch_size=batch * world,
        times_s=times, flops_per_step_per_device=flops, input_shape=work.input_shape, peak_memory_bytes=peak_mem,
        peak_host_rss_bytes=rss, backend=backend, threads=torch.get_num_threads(), device_name=device_name,
        optimizer=optimizer_name, init_s=init_s, cpu_cores=cpu_cores(), data_official=work.data_official,
        data_notes=work.data_notes, math_precision=math_precision(config, device), energy_j=energy_j,
        energy_covers=energy_covers, energy_unavailable=energy_unavailable, system=system,
        framework="pytorch", framework_version=torch.__version__, compiler=compiler,
    )
    if world > 1:
        barrier()
        dist.destroy_process_group()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m daybreak.sweep.worker")
    parser.add_argument("--spec", type=Path, required=True, help="WorkerSpec JSON")
    parser.add_argument("--result", type=Path, required=True, help="where local rank 0 writes the WorkerReport JSON")
    parser.add_argument("--progress", type=Path, help="progress file the parent polls")
    args = parser.parse_args(argv)
    spec = WorkerSpec.model_validate_json(args.spec.read_text(encoding="utf-8"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    try:
        report = measure(spec, args.progress)
    except BaseException as e:  # noqa: BLE001 - every failure is recorded, then the process exits non-zero
        if isinstance(e, KeyboardInterrupt):
            raise
        report = WorkerReport(
            status="oom" if is_oom(e) else "failed", error=one_line(e),
            traceback="".join(traceback.format_exception(e))[-8000:], rank=rank, world_size=world,
            batch_size=spec.batch_size, global_batch_size=spec.batch_size * world,
            peak_host_rss_bytes=host_rss_peak_bytes(),
        )
        target = args.result if local_rank == 0 else args.result.with_name(f"{args.result.name}.rank{rank}")
        atomic_write_text(target, report.model_dump_json() + "\n")
        print(f"daybreak worker rank {rank}: {report.error}", file=sys.stderr, flush=True)
        return 1
    if local_rank == 0:
        atomic_write_text(args.result, report.model_dump_json() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
