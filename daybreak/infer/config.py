"""What `daybreak infer` is asked to do, and the check of it: importable without torch, so a mistake on the command
line (a flag's value, a folder that is no run directory) is one line before torch is imported."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from daybreak.config import compile_mode
from daybreak.errors import ConfigError
from daybreak.infer.defaults import DEFAULT_BATCH_SIZE, DEFAULT_REPEATS, DEFAULT_WARMUP


@dataclass
class InferConfig:
    run_dir: Path
    device: str = "auto"
    amp: str = "auto"
    compile: str = "off"  # off | default | reduce-overhead | max-autotune (True/False accepted)
    threads: int | None = None
    warmup: int = DEFAULT_WARMUP
    batch_size: int = DEFAULT_BATCH_SIZE
    throughput_repeats: int = DEFAULT_REPEATS  # 0: skip the throughput measurement
    cost_per_hour: float | None = None
    instance: str | None = None
    price_file: Path | None = None
    backend: str = "daybreak"  # or "loadgen": also run MLCommons LoadGen's SingleStream + Offline
    loadgen_min_queries: int = 1024
    loadgen_min_duration_s: float = 0.0
    data_dir: Path | None = None
    download: bool = True
    allow_custom_data: bool = False
    progress: bool = False  # tqdm bars on stderr (the CLI enables them on a terminal only)
    energy: bool = True  # read the energy counters at the timed loops' boundaries (where they exist)
    idle_power_s: float = 2.0  # seconds of idle power sampled before the measurement (only where a counter exists)
    write: bool = True  # write inference.json and dawnbench_inference.json into the run directory
    command: list[str] = field(default_factory=list)


def check_flags(config: InferConfig) -> None:
    """The flags, before any work (``config.compile`` normalized to a mode); a ConfigError names the first wrong
    one. LoadGen being installed is checked where it is used; the price flags last (an unknown --instance, or it
    with --cost-per-hour)."""
    from daybreak.pricing import resolve_price

    if config.warmup < 0:
        raise ConfigError(f"--warmup {config.warmup}: must be >= 0")
    config.compile = compile_mode(config.compile)
    if config.compile != "off" and config.warmup < 1:
        raise ConfigError("--compile needs --warmup >= 1: compilation happens in the untimed warm-up queries")
    if config.batch_size < 1:
        raise ConfigError(f"--batch-size {config.batch_size}: must be >= 1")
    if config.throughput_repeats < 0:
        raise ConfigError(f"--throughput-repeats {config.throughput_repeats}: must be >= 0")
    if not (isinstance(config.idle_power_s, (int, float)) and math.isfinite(config.idle_power_s)
            and 0 <= config.idle_power_s <= 60):
        raise ConfigError(f"--idle-power-seconds {config.idle_power_s}: must be in [0, 60]")
    if config.backend not in ("daybreak", "loadgen"):
        raise ConfigError(f"--backend {config.backend!r}: choose daybreak or loadgen")
    if config.backend == "loadgen":
        if config.loadgen_min_queries < 1:
            raise ConfigError(f"--loadgen-min-queries {config.loadgen_min_queries}: must be >= 1")
        if not config.loadgen_min_duration_s >= 0:
            raise ConfigError(f"--loadgen-min-duration {config.loadgen_min_duration_s}: must be >= 0")
    resolve_price(config.cost_per_hour, config.instance, config.price_file)
