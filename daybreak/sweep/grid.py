"""The throughput sweep's grid: its options, checked, expanded into one ThroughputConfig per configuration."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from daybreak.errors import ConfigError
from daybreak.records.throughput import Amp, Mode, PeakResult, Protocol, ThroughputConfig
from daybreak.sweep.launch import LaunchSpec

AMP_ORDER: tuple[Amp, ...] = ("off", "bf16", "fp16")
DEFAULT_PEAK_BUDGET_S = 60.0  # daybreak.sweep.peak.DEFAULT_BUDGET_S (not imported here: it imports torch)


@dataclass
class SweepOptions:
    model: str
    out: Path
    mode: Mode = "train"
    batch_sizes: list[int] = field(default_factory=lambda: [32])
    amps: list[Amp] = field(default_factory=lambda: ["off"])
    compiles: list[bool] = field(default_factory=lambda: [False])
    devices: list[int] = field(default_factory=lambda: [1])
    nodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None  # with nodes > 1: HOST:PORT of node 0 (as `daybreak run --rdzv-endpoint`)
    seq_len: int | None = None
    image_size: int | None = None
    data: str | None = None
    data_dir: Path | str | None = None  # with data: the folder holding the task's files (as `daybreak run`)
    allow_custom_data: bool = False  # with data: accept files that do not match the official checksums
    download: bool = True  # with data: download missing files (once, here, before any worker starts)
    channels_last: bool = False
    device: str = "auto"
    warmup: int = 20
    steps: int = 100
    repeats: int = 7
    threads: int | None = None  # per process
    find_max_batch: bool = False
    force: bool = False
    retry_failed: bool = False
    timeout_s: float = 1800.0
    plots: bool = True
    quiet: bool = False
    peak: PeakResult | None = None  # the node's ceilings, instead of the cached/measured ones (tests, offline)
    peak_budget_s: float = DEFAULT_PEAK_BUDGET_S  # seconds for every peak measurement this sweep needs
    log: Callable[[str], None] | None = None
    frameworks: list[str] = field(default_factory=lambda: ["pytorch"])  # pytorch and/or daybreak.sweep.program's
    program: list[str] | None = None  # --program: any program speaking the protocol (daybreak.sweep.program)
    # "auto": the program protocol for every framework (PyTorch's reference program too) as soon as one framework
    # is not PyTorch or --program is given, else the worker; "worker" / "program" as ThroughputConfig.protocol
    protocol: str = "auto"
    min_window_s: float = 1.0  # program protocol: the shortest window a program reports (throughput_log)


def resolve_device(name: str) -> str:
    """'cpu', 'cuda' or 'mps', without creating a CUDA context in this process."""
    import torch

    name = (name or "auto").lower()
    if name == "auto":
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        return "mps" if mps is not None and mps.is_available() else "cpu"
    if name.startswith("cuda"):
        if name != "cuda":
            raise ConfigError(f"--device {name}: give `cuda`; the sweep uses devices 0..N-1 "
                              "(restrict them with CUDA_VISIBLE_DEVICES)")
        if not torch.cuda.is_available():
            raise ConfigError(f"--device cuda: CUDA is not available (torch {torch.__version__} sees no GPU)")
        return "cuda"
    if name in ("cpu", "mps"):
        if name == "mps":
            mps = getattr(torch.backends, "mps", None)
            if mps is None or not mps.is_available():
                raise ConfigError("--device mps: Apple MPS is not available on this machine")
        return name
    raise ConfigError(f"--device {name!r}: choose auto, cpu, cuda or mps")


def sweep_data_tasks() -> list[str]:
    """The tasks whose real examples a sweep can feed (``--data``): ``Task.feeds_sweeps``."""
    from daybreak.tasks import get_task, task_names

    return [name for name in task_names() if get_task(name).feeds_sweeps]


def expand(options: SweepOptions) -> list[ThroughputConfig]:
    """Check the options and list the configurations: framework, devices, then precision, compile, batch size."""
    from daybreak.models import model_names
    from daybreak.sweep.worker import DEFAULT_SEQ_LEN, model_kind

    if options.mode not in ("train", "infer"):
        raise ConfigError(f"--mode {options.mode!r}: choose train or infer")
    frameworks = check_frameworks(options)
    protocol = resolve_protocol(options, frameworks)
    if options.program is None and options.model not in model_names():
        raise ConfigError(f"unknown model {options.model!r}; known models: {', '.join(model_names())}")
    # --program: the model is the program's own (a name for the records); daybreak's models are checked as usual
    kind = model_kind(options.model) if options.model in model_names() else None
    for name, values in (("--batch-sizes", options.batch_sizes), ("--devices", options.devices)):
        if not values or any(v < 1 for v in values):
            raise ConfigError(f"{name}: give one or more integers >= 1")
    for name, value, low in (("--warmup", options.warmup, 0), ("--steps", options.steps, 1),
                             ("--repeats", options.repeats, 1), ("--nodes", options.nodes, 1)):
        if value < low:
            raise ConfigError(f"{name} {value}: must be >= {low}")
    if not 0 <= options.node_rank < options.nodes:
        raise ConfigError(f"--node-rank {options.node_rank}: must be in 0..{options.nodes - 1}")
    if options.nodes > 1 and not options.rdzv_endpoint:
        raise ConfigError("--nodes > 1 needs --rdzv-endpoint HOST:PORT (node 0's address and a free port), "
                          "the same on every node")
    LaunchSpec(nproc_per_node=1, nnodes=options.nodes, node_rank=options.node_rank,
               rdzv_endpoint=options.rdzv_endpoint).validate()  # the HOST:PORT format
    if options.threads is not None and options.threads < 1:
        raise ConfigError(f"--threads {options.threads}: must be >= 1")
    if not options.timeout_s > 0:
        raise ConfigError(f"--timeout {options.timeout_s:g}: must be > 0 seconds")
    if not options.peak_budget_s > 0:
        raise ConfigError(f"--peak-budget {options.peak_budget_s:g}: must be > 0 seconds")
    if not options.data:
        for flag, given in (("--data-dir", options.data_dir is not None),
                            ("--allow-custom-data", options.allow_custom_data),
                            ("--no-download", not options.download)):
            if given:
                raise ConfigError(f"{flag} applies to real data: add --data TASK ({', '.join(sweep_data_tasks())})")
    bad = [a for a in options.amps if a not in AMP_ORDER]
    if bad or not options.amps:
        raise ConfigError(f"--amp {','.join(bad) or '(empty)'}: choose from off, bf16, fp16")
    seq_len, image_size, data = options.seq_len, options.image_size, options.data
    if kind == "tokens":
        if image_size is not None:
            raise ConfigError(f"--image-size: {options.model} takes token sequences; use --seq-len")
        if data:
            raise ConfigError(f"--data {data}: real data is for image models; {options.model} runs on synthetic tokens")
        seq_len = DEFAULT_SEQ_LEN if seq_len is None else seq_len
        if not 1 <= seq_len <= 512:
            raise ConfigError(f"--seq-len {seq_len}: must be in 1..512 (BERT's positions)")
    elif kind == "image":
        if seq_len is not None:
            raise ConfigError(f"--seq-len: {options.model} takes images; use --image-size")
        if image_size is not None and image_size < 1:
            raise ConfigError(f"--image-size {image_size}: must be >= 1")
        if data:
            from daybreak.tasks import get_task

            if not get_task(data).feeds_sweeps:  # an unknown task: a ConfigError naming the known ones
                raise ConfigError(f"--data {data}: the sweep feeds tasks whose images fit in memory "
                                  f"({', '.join(sweep_data_tasks())}); leave --data out for synthetic inputs")
    device = resolve_device(options.device)
    if device == "cuda":
        import torch

        available = torch.cuda.device_count()
        if max(options.devices) > available:
            raise ConfigError(f"--devices {max(options.devices)}: this node has {available} GPU(s)")
    if device == "mps" and (max(options.devices) > 1 or options.nodes > 1):
        raise ConfigError("--device mps: one device only (no multi-process backend for MPS)")

    data_dir = str(Path(options.data_dir).expanduser().resolve()) if data and options.data_dir is not None else None
    configs = []
    for framework, devices, amp, compiled, batch in itertools.product(
            frameworks, sorted(set(options.devices)), sorted(set(options.amps), key=AMP_ORDER.index),
            sorted(set(options.compiles)), sorted(set(options.batch_sizes))):
        configs.append(ThroughputConfig(
            model=options.model, mode=options.mode, batch_size=batch, amp=amp, compile=compiled,
            devices=devices, nodes=options.nodes, seq_len=seq_len, image_size=image_size, data=data,
            data_dir=data_dir, allow_custom_data=options.allow_custom_data and bool(data),
            download=options.download, channels_last=options.channels_last, device=device, warmup=options.warmup,
            steps=options.steps, repeats=options.repeats, threads=options.threads,
            find_max_batch=options.find_max_batch, framework=framework,
            program=options.program if framework == "program" else None,
            protocol="program" if framework != "pytorch" else protocol, min_window_s=options.min_window_s))
    return configs


def resolve_protocol(options: SweepOptions, frameworks: list[str]) -> Protocol:
    """The protocol of the sweep's PyTorch rows (every other framework's rows are programs): one protocol for
    every row of a comparison."""
    others = [f for f in frameworks if f != "pytorch"]
    if options.protocol not in ("auto", "worker", "program"):
        raise ConfigError(f"--protocol {options.protocol}: choose auto, worker or program")
    if options.protocol == "worker" and others:
        raise ConfigError(f"--protocol worker: only PyTorch has daybreak's worker; {', '.join(others)} run(s) as "
                          "programs, so a comparison times every framework as a program (--protocol program, the "
                          "default)")
    if options.protocol == "program" or (options.protocol == "auto" and others):
        if not options.min_window_s > 0:
            raise ConfigError(f"--min-window {options.min_window_s:g}: must be > 0 seconds")
        return "program"
    return "worker"


def check_frameworks(options: SweepOptions) -> list[str]:
    """The frameworks to run (``program`` for --program), each installed, with what programs can do checked."""
    from daybreak.sweep.program import FRAMEWORKS, REFERENCE_MODELS, check_framework

    names = list(dict.fromkeys(f.strip().lower() for f in options.frameworks if f.strip()))
    if options.program is not None:
        if names != ["pytorch"]:
            raise ConfigError("give --program or --frameworks, not both")
        if not options.program:
            raise ConfigError("--program: give the program's command line, e.g. --program 'python train.py'")
        names = ["program"]
    if not names:
        raise ConfigError(f"--frameworks: give one or more of {', '.join(FRAMEWORKS)}")
    for name in names:
        if name not in ("pytorch", "program"):
            if name not in FRAMEWORKS:
                check_framework(name)  # the one-line error naming the frameworks there are
            if options.model not in REFERENCE_MODELS:
                raise ConfigError(f"--frameworks {name}: its reference program trains {' and '.join(REFERENCE_MODELS)}"
                                  f", not {options.model} (or time your own program with --program)")
    if any(n != "pytorch" for n in names) or options.protocol == "program":
        for flag, bad in (("--mode infer", options.mode != "train"), ("--data", bool(options.data)),
                          ("--nodes > 1", options.nodes > 1)):
            if bad:
                raise ConfigError(f"{flag}: programs (--program, --frameworks other than pytorch, --protocol "
                                  "program) time training steps on synthetic data on one node")
    fixed = [n for n in names if n in FRAMEWORKS and n != "pytorch"]
    if options.channels_last and fixed:
        layouts = ", ".join(f"{n} {FRAMEWORKS[n].layout}" for n in fixed)
        raise ConfigError(f"--channels-last is PyTorch's memory format: the reference programs train in one layout "
                          f"each ({layouts}; every row records its layout); leave it out to compare frameworks")
    for name in fixed:  # last: a mistake in the flags is said whether or not the frameworks are installed
        check_framework(name)
    return names
