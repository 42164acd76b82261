"""The device's two roofline ceilings: peak matmul FLOP/s per precision and memory copy bandwidth.

Matmul: large square ``torch.mm`` (n = 2048 on CPU, 8192 on a GPU; shrunk if one product takes too long, e.g.
fp16 on a CPU without fp16 arithmetic), enough products per repeat to run ~0.25 s, device synchronized at both
ends; FLOP/s = 2 n^3 x products / time, median of the repeats. Bandwidth: ``dst.copy_(src)`` of a large tensor
(256 MiB on CPU, 1 GiB on a GPU); bytes read + written / time, median of the repeats.

Results are cached per machine as JSON in ``<cache>/peak/<machine-key>.json`` (``<cache>`` = ``$DAYBREAK_CACHE``
if set, else ``platformdirs.user_cache_dir("daybreak")``); the key names the CPU model and thread count or the
GPU, and the torch version. ``daybreak peak --force`` re-measures.

``python -m daybreak.measure.peak --device cuda --out FILE`` writes the (cached or measured) PeakResult to FILE:
the sweep uses this so that its own process never initializes CUDA.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

from daybreak.fileio import atomic_write_text
from daybreak.measure.device import synchronize
from daybreak.records.throughput import PeakResult, load_peak_file

PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DEFAULT_SIZE = {"cpu": 2048, "cuda": 8192, "mps": 4096}
COPY_BYTES = {"cpu": 256 * 2**20, "cuda": 2**30, "mps": 256 * 2**20}
MIN_SIZE = 256
TARGET_REPEAT_S = 0.25  # each repeat runs about this long
MAX_SINGLE_S = 1.0  # one product slower than this: halve n (keeps slow precisions from taking minutes)


def peak_cache_dir() -> Path:
    env = os.environ.get("DAYBREAK_CACHE")
    if env:
        return Path(env).expanduser() / "peak"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("daybreak")) / "peak"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-")[:80]


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    from daybreak.measure.system import system_info

    info = system_info()
    if device.type == "mps" and info.gpus:
        return info.gpus[0].name
    return info.cpu_model


def machine_key(device: torch.device, threads: int | None = None) -> str:
    """E.g. 'cpu-Intel-R-Xeon-R-Processor-2t-torch2.13.0-1a2b3c4d' or 'cuda-NVIDIA-H100-...-torch2.13.0-...'."""
    name = device_name(device)
    if device.type == "cpu":
        threads = threads or torch.get_num_threads()
        raw = f"cpu|{name}|{threads}t|torch{torch.__version__}"
        pretty = f"cpu-{_slug(name)}-{threads}t-torch{torch.__version__}"
    else:
        extra = (torch.version.cuda or "") if device.type == "cuda" else ""
        raw = f"{device.type}|{name}|torch{torch.__version__}|{extra}"
        pretty = f"{device.type}-{_slug(name)}-torch{torch.__version__}"
    digest = hashlib.sha1(raw.encode()).hexdigest()[:8]
    return f"{_slug(pretty)}-{digest}"


def _time_products(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, count: int, device: torch.device) -> float:
    synchronize(device)
    t0 = time.perf_counter()
    for _ in range(count):
        torch.mm(a, b, out=c)
    synchronize(device)
    return time.perf_counter() - t0


def measure_matmul(device: torch.device, dtype: torch.dtype, size: int, repeats: int,
                   target_s: float = TARGET_REPEAT_S) -> tuple[int, list[float]]:
    """Return (n used, FLOP/s of each repeat). Raises if the dtype's matmul does not run on the device."""
    n = size
    while True:
        gen = torch.Generator(device="cpu").manual_seed(0)
        a = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
        b = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
        c = torch.empty(n, n, device=device, dtype=dtype)
        one = _time_products(a, b, c, 1, device)  # also the warm-up (library init, kernel selection)
        one = min(one, _time_products(a, b, c, 1, device))
        if one <= MAX_SINGLE_S or n <= MIN_SIZE:
            break
        n //= 2
    count = max(1, round(target_s / max(one, 1e-9)))
    flops = 2.0 * n ** 3 * count
    return n, [flops / _time_products(a, b, c, count, device) for _ in range(repeats)]


def measure_bandwidth(device: torch.device, nbytes: int, repeats: int,
                      target_s: float = TARGET_REPEAT_S) -> tuple[int, list[float]]:
    """Return (bytes per tensor, (read + written bytes) / s of each repeat)."""
    while True:
        try:
            src = torch.ones(nbytes // 4, device=device, dtype=torch.float32)
            dst = torch.empty_like(src)
            break
        except (RuntimeError, MemoryError):
            if nbytes <= 16 * 2**20:
                raise
            nbytes //= 2
    dst.copy_(src)  # warm-up: page in both buffers
    one = _time_products_copy(src, dst, 1, device)
    count = max(1, round(target_s / max(one, 1e-9)))
    moved = 2.0 * src.numel() * src.element_size() * count
    return src.numel() * src.element_size(), [moved / _time_products_copy(src, dst, count, device)
                                              for _ in range(repeats)]


def _time_products_copy(src: torch.Tensor, dst: torch.Tensor, count: int, device: torch.device) -> float:
    synchronize(device)
    t0 = time.perf_counter()
    for _ in range(count):
        dst.copy_(src)
    synchronize(device)
    return time.perf_counter() - t0


def _supported(device: torch.device, precision: str) -> str | None:
    """None if the precision can be measured here, else why not."""
    if device.type == "cuda" and precision == "bf16" and not torch.cuda.is_bf16_supported():
        return "this GPU has no bf16 support"
    try:
        x = torch.ones(16, 16, device=device, dtype=PRECISIONS[precision])
        torch.mm(x, x)
        synchronize(device)
    except (RuntimeError, TypeError) as e:
        return str(e).splitlines()[0][:200] if str(e) else type(e).__name__
    return None


def measure_peak(device: torch.device, size: int | None = None, repeats: int = 5,
                 precisions: tuple[str, ...] = ("fp32", "bf16", "fp16"), copy_bytes: int | None = None,
                 repeat_s: float = TARGET_REPEAT_S, log: Callable[[str], None] | None = None) -> PeakResult:
    from daybreak.measure.system import system_info

    started = time.perf_counter()
    size = size or DEFAULT_SIZE.get(device.type, 2048)
    result = PeakResult(machine_key=machine_key(device), device=str(device), device_name=device_name(device),
                        torch=torch.__version__, threads=torch.get_num_threads() if device.type == "cpu" else None,
                        measured_at=datetime.now(timezone.utc), system=system_info())
    for precision in precisions:
        why = _supported(device, precision)
        if why is not None:
            result.unsupported[precision] = why
            continue
        if log:
            log(f"measuring {precision} matmul peak on {result.device_name} ...")
        n, samples = measure_matmul(device, PRECISIONS[precision], size, repeats, repeat_s)
        result.matmul_size[precision] = n
        result.flops_samples[precision] = samples
        result.flops_per_s[precision] = statistics.median(samples)
    if log:
        log("measuring copy bandwidth ...")
    nbytes, samples = measure_bandwidth(device, copy_bytes or COPY_BYTES.get(device.type, 256 * 2**20), repeats,
                                        repeat_s)
    result.copy_bytes = nbytes
    result.bandwidth_samples = samples
    result.bandwidth_bytes_per_s = statistics.median(samples)
    result.seconds = time.perf_counter() - started
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


def cache_path(key: str) -> Path:
    return peak_cache_dir() / f"{key}.json"


def load_cached(device: torch.device) -> PeakResult | None:
    return load_peak_file(cache_path(machine_key(device)))


def save(result: PeakResult) -> Path:
    return atomic_write_text(cache_path(result.machine_key), result.model_dump_json(indent=2) + "\n")


def get_peak(device: torch.device, force: bool = False, log: Callable[[str], None] | None = None,
             **measure_kwargs) -> PeakResult:
    """The cached PeakResult of this machine, measured (and cached) now if there is none or ``force``."""
    if not force:
        cached = load_cached(device)
        if cached is not None:
            return cached
    result = measure_peak(device, log=log, **measure_kwargs)
    save(result)
    return result


def peak_in_subprocess(device: str, force: bool = False, timeout: float = 900,
                       log: Callable[[str], None] | None = None) -> PeakResult | None:
    """Run ``get_peak`` in a fresh process (so the caller never touches the accelerator); None if it fails."""
    import tempfile

    from daybreak.sweep.launch import worker_env

    with tempfile.TemporaryDirectory(prefix="daybreak-peak-") as tmp:
        out = Path(tmp) / "peak.json"
        cmd = [sys.executable, "-m", "daybreak.measure.peak", "--device", device, "--out", str(out)]
        if force:
            cmd.append("--force")
        try:
            proc = subprocess.run(cmd, env=worker_env(), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            if log:
                log(f"peak measurement timed out after {timeout:.0f} s; utilization will be left empty")
            return None
        if proc.returncode != 0:
            if log:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                log(f"peak measurement failed ({tail[0]}); utilization will be left empty")
            return None
        return load_peak_file(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m daybreak.measure.peak")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--out", type=Path, required=True, help="write the PeakResult JSON here")
    args = parser.parse_args(argv)
    from daybreak.measure.device import select_device

    result = get_peak(select_device(args.device), force=args.force,
                      log=lambda m: print(m, file=sys.stderr, flush=True))
    atomic_write_text(args.out, result.model_dump_json(indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
