"""The device's two roofline ceilings: peak matmul FLOP/s per precision and memory copy bandwidth, measured
within a time budget.

Everything one command needs is measured within ``budget_s`` (DEFAULT_BUDGET_S = 60 s, `daybreak peak
--budget`), and only what it needs: the precisions asked for (a sweep of ``--amp off`` needs fp32 only), at the
thread counts asked for (on CPU each thread count is its own measurement and cache entry). Per precision:

1. probe: a small product (n = 256 on CPU, 1024 on a GPU; smaller if even that is slow) timed 1, 2, 4, ...
   times until it takes PROBE_S, which gives the precision's speed;
2. a precision EMULATED_SLOWDOWN (8) times slower than fp32 at the same n, in every one of up to three rounds
   of back-to-back probes (or whose measured ceiling is 8 times below fp32's), has no native support here: on a CPU without bf16/fp16 arithmetic its matmuls run at ~1
   GFLOP/s, 20-100x below fp32 (native bf16 without AMX runs at about half the fp32 rate). It is recorded in
   ``emulated`` with its speed, the slowdown and a note, and is not a ceiling (utilization against it is left
   empty). This is decided by measuring; torch's CPU capability (AVX2, AVX512, ...) is recorded next to it as
   information only. On CPU a verdict of "emulated" at fewer threads holds at more (native support is a
   property of the CPU; a contended multi-threaded probe is the less reliable one);
3. otherwise the largest n up to 2048 on CPU (8192 on a GPU, ``--size``) whose product takes at most half a
   repeat at the probed speed; ``repeats`` timed repeats of ~0.25 s (shorter when the budget is tight; the
   loop stops when the next repeat would not fit); FLOP/s = 2 n^3 x products / time, median of the repeats.

Bandwidth: ``dst.copy_(src)`` of a large tensor (256 MiB on CPU, 1 GiB on a GPU; smaller when the budget is
tight); bytes read + written / time, median of the repeats. Time is shared out as it goes: the bandwidth keeps
up to 20% of the budget, each precision an equal part of what is left (fast ones leave the rest to the others);
a precision left with no time is recorded in ``skipped`` and measured the next time it is needed.

Results are cached per machine as JSON in ``<cache>/peak/<machine-key>.json`` (``<cache>`` = ``$DAYBREAK_CACHE``
if set, else ``platformdirs.user_cache_dir("daybreak")``); the key names the CPU model and thread count or the
GPU, and the torch version. A cached result that lacks a precision is completed, not re-measured;
``daybreak peak --force`` re-measures.

``python -m daybreak.sweep.peak --device cuda --out FILE`` writes the (cached or measured) PeakResult to FILE:
the sweep uses this so that its own process never initializes CUDA.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import torch

from daybreak.fileio import atomic_write_text
from daybreak.measure.device import native_bf16, sm_name, synchronize, tf32_applies
from daybreak.records.throughput import (  # noqa: F401 - EMULATED_SLOWDOWN is part of this module's interface
    EMULATED_SLOWDOWN, PeakResult, SlowPrecision, load_peak_file, slow_precision_note,
)
from daybreak.text import one_line

# tf32: float32 operands with TF32 tensor cores allowed (torch.backends.cuda.matmul.allow_tf32) -- the ceiling of a
# run's fp32 math under --tf32 on sm_80 and later; fp32 is measured with TF32 off (the CUDA cores)
PRECISIONS = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
PRECISION_ORDER = ("fp32", "tf32", "bf16", "fp16")
NOT_COMPARED = ("fp32", "tf32")  # not checked for emulation against fp32 (TF32 is only measured where it is native)
DEFAULT_SIZE = {"cpu": 2048, "cuda": 8192, "mps": 4096}  # the largest n; smaller when the device is slow
PROBE_SIZE = {"cpu": 256, "cuda": 1024, "mps": 512}  # n of the timing probe (smaller if even that is slow)
COPY_BYTES = {"cpu": 256 * 2**20, "cuda": 2**30, "mps": 256 * 2**20}
MIN_SIZE = 64
SIZE_STEP = 64  # n is a multiple of this
TARGET_REPEAT_S = 0.25  # each repeat runs about this long
PROBE_S = 0.02  # a probe times 1, 2, 4, ... products until they take this long
DEFAULT_BUDGET_S = 60.0  # everything one command measures, all thread counts and precisions together
BANDWIDTH_SHARE = 0.2  # of the budget, at most, kept for the copy bandwidth
MIN_SLICE_S = 0.02  # less time than this left for a precision: skipped (measured the next time it is needed)
CONFIRM_ROUNDS = 2  # a precision that looks emulated is probed again, next to fp32, this many more times
SPREAD_BOUND = 2.0  # repeats further apart than this (max / min) measured noise, not a ceiling
ACCEPT_NOISY_ENV = "DAYBREAK_PEAK_ACCEPT_NOISY"  # "1": keep a noisy or busy measurement as a ceiling anyway


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
    """Seconds for ``count`` products a @ b (device synchronized at both ends). Every matmul timing goes here."""
    synchronize(device)
    t0 = time.perf_counter()
    for _ in range(count):
        torch.mm(a, b, out=c)
    synchronize(device)
    return time.perf_counter() - t0


def _time_copies(src: torch.Tensor, dst: torch.Tensor, count: int, device: torch.device) -> float:
    synchronize(device)
    t0 = time.perf_counter()
    for _ in range(count):
        dst.copy_(src)
    synchronize(device)
    return time.perf_counter() - t0


def _operands(device: torch.device, dtype: torch.dtype, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """a, b (random, made on the device: 8192 x 8192 on a host CPU would take seconds) and the output c."""
    try:
        gen = torch.Generator(device=device).manual_seed(0)
        a = torch.randn(n, n, device=device, generator=gen).to(dtype)
        b = torch.randn(n, n, device=device, generator=gen).to(dtype)
    except (RuntimeError, TypeError):  # no generator on this device type
        gen = torch.Generator().manual_seed(0)
        a = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
        b = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
    return a, b, torch.empty(n, n, device=device, dtype=dtype)


def _flops(n: int, count: int = 1) -> float:
    return 2.0 * n ** 3 * count


def size_for(flops_per_s: float, seconds: float, largest: int) -> int:
    """The largest n (a multiple of SIZE_STEP, at most ``largest``) whose n x n x n product takes about
    ``seconds`` at ``flops_per_s``."""
    n = int((max(flops_per_s, 1.0) * max(seconds, 0.0) / 2.0) ** (1.0 / 3.0))
    n = n // SIZE_STEP * SIZE_STEP
    return max(min(MIN_SIZE, largest), min(largest, n))


def probe_matmul(device: torch.device, dtype: torch.dtype, n: int, limit_s: float) -> float:
    """FLOP/s of n x n products: one untimed (warm-up), then 1, 2, 4, ... timed until a window takes PROBE_S (or
    the next doubling would pass ``limit_s``), then that window once more if time allows; the fastest window
    (other tenants of a shared machine only ever slow one down)."""
    a, b, c = _operands(device, dtype, n)
    started = time.perf_counter()
    _time_products(a, b, c, 1, device)
    count, best = 1, 0.0
    while True:
        t = max(_time_products(a, b, c, count, device), 1e-9)
        best = max(best, _flops(n, count) / t)
        spent = time.perf_counter() - started
        if t >= PROBE_S or spent + 2 * t > limit_s:
            if spent + t <= limit_s:
                best = max(best, _flops(n, count) / max(_time_products(a, b, c, count, device), 1e-9))
            return best
        count *= 2


def probe_size(device: torch.device, dtype: torch.dtype, limit_s: float) -> int:
    """n for this precision's probe: PROBE_SIZE, smaller only if one product of it would take over ``limit_s``
    (judged from the fastest of three products at MIN_SIZE, after one untimed: a pessimistic estimate, since a
    tiny product is mostly overhead). Keeps a device that is slower than anyone expects within the budget."""
    a, b, c = _operands(device, dtype, MIN_SIZE)
    _time_products(a, b, c, 1, device)
    one = min(_time_products(a, b, c, 1, device) for _ in range(3))
    return size_for(_flops(MIN_SIZE) / max(one, 1e-9), limit_s, PROBE_SIZE.get(device.type, 256))


def measure_matmul(device: torch.device, dtype: torch.dtype, size: int, repeats: int,
                   target_s: float = TARGET_REPEAT_S, budget_s: float | None = None,
                   flops_hint: float | None = None) -> tuple[int, list[float]]:
    """Return (n used, FLOP/s of each repeat). Raises if the dtype's matmul does not run on the device.

    ``size`` is the largest n. With ``flops_hint`` (a probe's FLOP/s) n is picked so that one product takes at
    most half a repeat; every repeat runs ``count`` products, about ``target_s``. With ``budget_s`` the repeats
    are shortened to fit it and the loop stops when the next repeat would not fit (after at least one)."""
    started = time.perf_counter()
    deadline = started + budget_s if budget_s is not None else float("inf")
    if budget_s is not None:
        target_s = min(target_s, 0.8 * budget_s / (repeats + 1))  # +1: the warm-up product
    n = size if flops_hint is None else size_for(flops_hint, target_s / 2, size)
    while True:
        a, b, c = _operands(device, dtype, n)
        _time_products(a, b, c, 1, device)  # warm-up (library init, kernel selection)
        one = _time_products(a, b, c, 1, device)
        if one <= max(target_s, 1e-9) or n <= MIN_SIZE:
            break
        if time.perf_counter() + one > deadline:  # no time to try a smaller n: keep this one
            break
        n = size_for(_flops(n) / one, target_s / 2, n - SIZE_STEP)  # slower than expected: shrink
    count = max(1, round(target_s / max(one, 1e-9)))
    samples: list[float] = []
    for _ in range(repeats):
        if samples and time.perf_counter() + count * one > deadline:
            break
        t = max(_time_products(a, b, c, count, device), 1e-12)
        samples.append(_flops(n, count) / t)
        one = max(one, t / count)  # predict the next repeat from the slowest seen (a busy machine stalls)
    return n, samples


def _buffers(device: torch.device, nbytes: int) -> tuple[torch.Tensor, torch.Tensor]:
    while True:
        try:
            src = torch.ones(max(1, nbytes // 4), device=device, dtype=torch.float32)
            return src, torch.empty_like(src)
        except (RuntimeError, MemoryError):
            if nbytes <= 16 * 2**20:
                raise
            nbytes //= 2


def measure_bandwidth(device: torch.device, nbytes: int, repeats: int, target_s: float = TARGET_REPEAT_S,
                      budget_s: float | None = None) -> tuple[int, list[float]]:
    """Return (bytes per tensor, (read + written bytes) / s of each repeat).

    With ``budget_s`` the setup of a 16 MiB pair (allocation, first touch, one copy) is timed first and the
    tensor shrunk so that setting up the large pair takes at most 30% of the budget; the repeats share half of
    it, and the loop stops when the next repeat would not fit (after at least one)."""
    started = time.perf_counter()
    deadline = started + budget_s if budget_s is not None else float("inf")
    if budget_s is not None:
        target_s = min(target_s, 0.5 * budget_s / repeats)
        small = min(nbytes, 16 * 2**20)
        t0 = time.perf_counter()
        src, dst = _buffers(device, small)
        dst.copy_(src)
        synchronize(device)
        per_byte = (time.perf_counter() - t0) / small
        nbytes = max(small, min(nbytes, int(0.3 * budget_s / max(per_byte, 1e-15))))
        del src, dst
    src, dst = _buffers(device, nbytes)
    dst.copy_(src)  # warm-up: page in both buffers
    one = _time_copies(src, dst, 1, device)
    count = max(1, round(target_s / max(one, 1e-9)))
    moved = 2.0 * src.numel() * src.element_size() * count
    samples: list[float] = []
    for _ in range(repeats):
        if samples and time.perf_counter() + count * one > deadline:
            break
        t = max(_time_copies(src, dst, count, device), 1e-12)
        samples.append(moved / t)
        one = max(one, t / count)
    return src.numel() * src.element_size(), samples


def _supported(device: torch.device, precision: str) -> str | None:
    """None if the precision can be measured here, else why not."""
    if precision == "tf32" and device.type != "cuda":
        return "TF32 is a tensor-core format of NVIDIA GPUs (sm_80 and later), not of this device"
    if precision == "tf32" and not tf32_applies(device):
        return f"no TF32 tensor cores before sm_80 (this GPU is {sm_name(device)})"
    if device.type == "cuda" and precision == "bf16" and not native_bf16(device):
        return f"no native bf16 before sm_80 (this GPU is {sm_name(device)}; torch would emulate it)"
    try:
        x = torch.ones(16, 16, device=device, dtype=PRECISIONS[precision])
        torch.mm(x, x)
        synchronize(device)
    except (RuntimeError, TypeError) as e:
        return str(e).splitlines()[0][:200] if str(e) else type(e).__name__
    return None


@contextlib.contextmanager
def _matmul_mode(precision: str) -> Iterator[None]:
    """float32 matmuls on TF32 tensor cores for ``tf32``, in full fp32 otherwise; the setting restored after."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def cpu_capability() -> str | None:
    """torch's vectorization level for this CPU (e.g. AVX2, AVX512): recorded for information only; whether a
    precision is native is decided by measuring it."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # noqa: BLE001 - older torch or another platform
        return None


def check_precisions(precisions: Iterable[str | None]) -> tuple[str, ...]:
    """The precisions in measuring order (fp32 first: the reference of the others), or a ConfigError."""
    from daybreak.errors import ConfigError

    wanted = {p.strip().lower() for p in precisions if p and p.strip()}
    wanted = {"fp32" if p in ("off", "float32") else "bf16" if p == "bfloat16" else "fp16" if p == "float16" else p
              for p in wanted}
    bad = sorted(wanted - set(PRECISION_ORDER))
    if bad or not wanted:
        raise ConfigError(f"--precisions {','.join(bad) or '(empty)'}: choose from {', '.join(PRECISION_ORDER)}")
    return tuple(p for p in PRECISION_ORDER if p in wanted)


def measure_peak(device: torch.device, size: int | None = None, repeats: int = 5,
                 precisions: tuple[str, ...] = PRECISION_ORDER, copy_bytes: int | None = None,
                 repeat_s: float = TARGET_REPEAT_S, budget_s: float = DEFAULT_BUDGET_S, bandwidth: bool = True,
                 known_emulated: Mapping[str, SlowPrecision] | None = None,
                 log: Callable[[str], None] | None = None) -> PeakResult:
    """Measure ``precisions`` (and the copy bandwidth) within ``budget_s`` seconds of wall time.

    Each precision: a small probe (n = PROBE_SIZE) gives its speed; a precision EMULATED_SLOWDOWN times slower
    than fp32 at the same n is recorded in ``emulated`` (not a ceiling) and not measured further; the others get
    n chosen from the probe (one product at most half a repeat, n <= ``size``) and ``repeats`` timed repeats.
    Time is shared out as it goes: the bandwidth keeps up to BANDWIDTH_SHARE, each precision an equal part of
    what is left; a precision left with no time is recorded in ``skipped``. ``known_emulated``: precisions
    already found emulated on this device (at another thread count), recorded as such without measuring."""
    from daybreak.errors import ConfigError
    from daybreak.measure.context import ContextSampler
    from daybreak.measure.system import system_info

    started = time.perf_counter()
    sampler = ContextSampler().start() if device.type == "cpu" else None  # other processes' share of the CPUs
    if not budget_s > 0:
        raise ConfigError(f"--budget {budget_s:g}: must be > 0 seconds")
    if repeats < 1:
        raise ConfigError(f"--repeats {repeats}: must be >= 1")
    deadline = started + 0.95 * budget_s  # 5% for what comes after (freeing memory, the cache file)
    wanted = check_precisions(precisions) if precisions else ()
    largest = size or DEFAULT_SIZE.get(device.type, 2048)
    capability = cpu_capability() if device.type == "cpu" else None
    result = PeakResult(machine_key=machine_key(device), device=str(device), device_name=device_name(device),
                        torch=torch.__version__, threads=torch.get_num_threads() if device.type == "cpu" else None,
                        cpu_capability=capability, budget_s=budget_s, measured_at=datetime.now(timezone.utc),
                        system=system_info())
    left = deadline - time.perf_counter()
    reserve = min(BANDWIDTH_SHARE * left, 2.0 + repeats * repeat_s) if bandwidth else 0.0
    matmul_deadline = deadline - reserve
    rates: dict[tuple[str, int], float] = {}  # (precision, n) -> probe FLOP/s

    def probe(precision: str, limit_s: float, n: int | None = None) -> tuple[int, float]:
        """(n, FLOP/s) of this precision's probe (at n, else at its own probe size), probed once."""
        dtype = PRECISIONS[precision]
        n = n or probe_size(device, dtype, limit_s)
        if (precision, n) not in rates:
            with _matmul_mode(precision):
                rates[(precision, n)] = probe_matmul(device, dtype, n, limit_s)
        return n, rates[(precision, n)]

    fp32_why = _supported(device, "fp32")
    for i, precision in enumerate(wanted):
        share = (matmul_deadline - time.perf_counter()) / (len(wanted) - i)
        why = fp32_why if precision == "fp32" else _supported(device, precision)
        if why is not None:
            result.unsupported[precision] = why
            continue
        if known_emulated and precision in known_emulated:
            result.emulated[precision] = known_emulated[precision]
            continue
        if share < MIN_SLICE_S:
            result.skipped[precision] = f"the {budget_s:.3g} s budget ran out before it"
            if log:
                log(f"{precision}: not measured, the {budget_s:.3g} s budget ran out (measured next time)")
            continue
        if log:
            log(f"measuring {precision} matmul peak on {result.device_name} ...")
        n_probe, rate = probe(precision, share / 4)
        result.probe_size[precision] = n_probe
        result.probe_flops_per_s[precision] = rate
        if precision not in NOT_COMPARED and fp32_why is None:
            _, reference = probe("fp32", share / 8, n_probe)
            slowdown = reference / max(rate, 1e-9)
            # Confirm: a busy moment on a shared machine can slow one probe (a multi-threaded one by 30x and
            # more), so fp32 and this precision are probed again back to back, and every round must agree.
            confirm_until = time.perf_counter() + share / 2
            for _ in range(CONFIRM_ROUNDS):
                if slowdown < EMULATED_SLOWDOWN or time.perf_counter() >= confirm_until:
                    break
                with _matmul_mode("fp32"):
                    again32 = probe_matmul(device, torch.float32, n_probe, share / 16)
                again = probe_matmul(device, PRECISIONS[precision], n_probe, share / 8)
                slowdown = min(slowdown, again32 / max(again, 1e-9))
                rate, reference = max(rate, again), max(reference, again32)
            result.probe_flops_per_s[precision] = rate
            result.probe_size.setdefault("fp32", n_probe)
            result.probe_flops_per_s.setdefault("fp32", reference)
            if slowdown >= EMULATED_SLOWDOWN:
                note = slow_precision_note(precision, slowdown, device.type, capability)
                result.emulated[precision] = SlowPrecision(flops_per_s=rate, slowdown_vs_fp32=slowdown,
                                                           matmul_size=n_probe, note=note)
                if log:
                    log(note)
                continue
        share = (matmul_deadline - time.perf_counter()) / (len(wanted) - i)
        with _matmul_mode(precision):
            n, samples = measure_matmul(device, PRECISIONS[precision], largest, repeats, repeat_s,
                                        budget_s=max(share, MIN_SLICE_S), flops_hint=rate)
        flops = statistics.median(samples)
        fp32 = result.flops_per_s.get("fp32")
        if precision not in NOT_COMPARED and fp32 and fp32 / max(flops, 1e-9) >= EMULATED_SLOWDOWN:
            # the probe missed it (a noisy probe on a shared machine): the two ceilings say it
            slowdown = fp32 / max(flops, 1e-9)
            note = slow_precision_note(precision, slowdown, device.type, capability)
            result.emulated[precision] = SlowPrecision(flops_per_s=flops, slowdown_vs_fp32=slowdown, matmul_size=n,
                                                       note=note)
            if log:
                log(note)
            continue
        result.matmul_size[precision] = n
        result.flops_samples[precision] = samples
        result.flops_per_s[precision] = flops
        if len(samples) < repeats:
            result.notes.append(f"{precision}: {len(samples)} of {repeats} repeats fit the {budget_s:.3g} s budget")
        if n < largest and size is not None:
            result.notes.append(f"{precision}: n = {n} instead of {largest}, for the {budget_s:.3g} s budget")
    if bandwidth:
        if log:
            log("measuring copy bandwidth ...")
        nbytes, samples = measure_bandwidth(device, copy_bytes or COPY_BYTES.get(device.type, 256 * 2**20),
                                            repeats, repeat_s, budget_s=max(deadline - time.perf_counter(),
                                                                            MIN_SLICE_S))
        result.copy_bytes = nbytes
        asked = copy_bytes or COPY_BYTES.get(device.type, 256 * 2**20)
        if nbytes < asked:
            result.notes.append(f"copy bandwidth: a {nbytes / 2**20:.0f} MiB tensor instead of {asked / 2**20:.0f} "
                                f"MiB, for the {budget_s:.3g} s budget (if it fits in cache it overstates memory "
                                "bandwidth)")
        result.bandwidth_samples = samples
        result.bandwidth_bytes_per_s = statistics.median(samples)
    busy = sampler.stop()["warnings"] if sampler is not None else []
    screen_ceilings(result, busy[0] if busy else None)
    result.seconds = time.perf_counter() - started
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


def noise_of(samples: list[float]) -> str | None:
    """Why repeats cannot be a ceiling: more than SPREAD_BOUND apart (a shared machine slows some of them down)."""
    if len(samples) >= 2 and min(samples) > 0 and max(samples) / min(samples) > SPREAD_BOUND:
        return (f"its {len(samples)} repeats are {max(samples) / min(samples):.1f}x apart (more than "
                f"{SPREAD_BOUND:g}x): noise, not a ceiling")
    return None


def screen_ceilings(result: PeakResult, busy: str | None) -> PeakResult:
    """Move every figure that cannot be a ceiling out of ``flops_per_s`` (and the bandwidth) into ``unreliable``,
    with the reason: repeats too far apart, or the machine busy while it was measured (``busy``: the context
    sampler's warning, CPUs only). Such a precision is not cached as a ceiling and is measured again the next time
    it is needed. DAYBREAK_PEAK_ACCEPT_NOISY=1 keeps them (a machine that is never quiet), with a note."""
    accept = os.environ.get(ACCEPT_NOISY_ENV) == "1"
    problems: dict[str, str] = {}
    for precision, samples in result.flops_samples.items():
        if precision in result.flops_per_s:
            why = noise_of(samples) or (f"measured while {busy}" if busy else None)
            if why:
                problems[precision] = why
    if result.bandwidth_bytes_per_s is not None:
        why = noise_of(result.bandwidth_samples) or (f"measured while {busy}" if busy else None)
        if why:
            problems["bandwidth"] = why
    for what, why in problems.items():
        if accept:
            result.notes.append(f"{what}: {why}; kept as a ceiling ({ACCEPT_NOISY_ENV}=1)")
            continue
        result.unreliable[what] = why
        if what == "bandwidth":
            result.bandwidth_bytes_per_s = None
        else:
            result.flops_per_s.pop(what, None)
            result.matmul_size.pop(what, None)
    return result


def cache_path(key: str) -> Path:
    return peak_cache_dir() / f"{key}.json"


def load_cached(device: torch.device) -> PeakResult | None:
    return load_peak_file(cache_path(machine_key(device)))


def save(result: PeakResult) -> Path:
    return atomic_write_text(cache_path(result.machine_key), result.model_dump_json(indent=2) + "\n")


@contextlib.contextmanager
def _threads(device: torch.device, threads: int | None) -> Iterator[None]:
    if device.type != "cpu" or threads is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def emulated_on_this_cpu(device: torch.device, threads: int, fewer_only: bool = False) -> dict[str, SlowPrecision]:
    """Precisions a cached measurement found emulated on this CPU (same model and torch) at ``threads`` or fewer
    threads (``fewer_only``: fewer), the fewest first. Native support is a property of the CPU, and on a busy
    machine fewer threads measure it more reliably (a contended multi-threaded fp32 probe can make an emulated
    precision look native)."""
    if device.type != "cpu":
        return {}
    name = device_name(device)
    found: dict[str, tuple[int, SlowPrecision]] = {}
    folder = peak_cache_dir()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        p = load_peak_file(path)
        if p is None or not p.device.startswith("cpu") or p.device_name != name or p.torch != torch.__version__ \
                or not p.threads or p.threads > threads or (fewer_only and p.threads == threads):
            continue
        for precision, slow in p.emulated.items():
            if precision not in found or p.threads < found[precision][0]:
                found[precision] = (p.threads, slow)
    out = {}
    for precision, (t, slow) in found.items():
        if t != threads and "(found at " not in slow.note:
            slow = slow.model_copy(update=dict(note=f"{slow.note} (found at {t} thread{'s' if t > 1 else ''})"))
        out[precision] = slow
    return out


def _apply_emulated(result: PeakResult, known: Mapping[str, SlowPrecision]) -> bool:
    """Move a precision that ``known`` says is emulated out of the ceilings of ``result``; True if any moved."""
    moved = False
    for precision, slow in known.items():
        if precision in result.flops_per_s:
            for name in ("flops_per_s", "flops_samples", "matmul_size"):
                getattr(result, name).pop(precision, None)
            result.emulated[precision] = slow
            moved = True
    return moved


def get_peak(device: torch.device, force: bool = False, log: Callable[[str], None] | None = None,
             precisions: tuple[str, ...] = PRECISION_ORDER, threads: int | None = None,
             budget_s: float = DEFAULT_BUDGET_S, **measure_kwargs: Any) -> PeakResult:
    """This machine's PeakResult for ``precisions`` (on CPU at ``threads`` threads, default: the current
    number): the cached one if it has them all, else what it lacks (everything with ``force``) measured now
    within ``budget_s`` seconds, merged into the cache. A precision found emulated on this CPU at fewer threads
    is emulated here too (not measured again, and not a ceiling)."""
    wanted = check_precisions(precisions)
    with _threads(device, threads):
        known = emulated_on_this_cpu(device, torch.get_num_threads(), fewer_only=force)
        cached = load_cached(device)
        if cached is not None and _apply_emulated(cached, known):
            save(cached)
        missing = wanted if force or cached is None else tuple(p for p in wanted if not cached.has(p))
        bandwidth = force or cached is None or cached.bandwidth_bytes_per_s is None
        if cached is not None and not missing and not bandwidth:
            return cached
        if cached is not None and not force and log:
            log(f"the cached peak lacks {', '.join(missing) or 'the copy bandwidth'}; measuring it")
        result = measure_peak(device, precisions=missing, bandwidth=bandwidth, budget_s=budget_s, log=log,
                              known_emulated=known, **measure_kwargs)
        if cached is not None and cached.machine_key == result.machine_key:
            result = cached.merged(result).model_copy(update=dict(seconds=result.seconds))  # this measurement's time
        save(result)
        return result


def get_peaks(device: torch.device, needs: Mapping[int | None, Iterable[str]], budget_s: float = DEFAULT_BUDGET_S,
              force: bool = False, log: Callable[[str], None] | None = None) -> dict[int | None, PeakResult]:
    """The peak at each CPU thread count of ``needs`` (threads -> precisions; None: the current count), all
    within ``budget_s`` together: each count gets an equal part of the time left (a cached one takes none)."""
    deadline = time.perf_counter() + budget_s
    out: dict[int | None, PeakResult] = {}
    counts = sorted(needs, key=lambda t: (t is None, t or 0))  # fewest threads first: see emulated_on_this_cpu
    for i, threads in enumerate(counts):
        share = (deadline - time.perf_counter()) / (len(counts) - i)
        if share <= MIN_SLICE_S:
            if log:
                log(f"no time left in the {budget_s:g} s peak budget for {threads} threads; "
                    "utilization will be left empty there")
            continue
        try:
            out[threads] = get_peak(device, force=force, log=log, precisions=tuple(needs[threads]),
                                    threads=threads, budget_s=share)
        except Exception as e:  # noqa: BLE001 - utilization is optional; the caller goes on without it
            if log:
                log(f"peak measurement failed ({one_line(e, 300)}); utilization will be left empty")
    return out


def peak_in_subprocess(device: str, force: bool = False, timeout: float | None = None,
                       log: Callable[[str], None] | None = None, precisions: tuple[str, ...] = PRECISION_ORDER,
                       budget_s: float = DEFAULT_BUDGET_S) -> PeakResult | None:
    """Run ``get_peak`` in a fresh process (so the caller never touches the accelerator); None if it fails.
    The process is killed after ``timeout`` seconds (default: the budget plus 3 minutes to start up)."""
    import tempfile

    from daybreak.sweep.launch import worker_env

    timeout = timeout if timeout is not None else budget_s + 180.0
    with tempfile.TemporaryDirectory(prefix="daybreak-peak-") as tmp:
        out = Path(tmp) / "peak.json"
        cmd = [sys.executable, "-m", "daybreak.sweep.peak", "--device", device, "--out", str(out),
               "--precisions", ",".join(check_precisions(precisions)), "--budget", f"{budget_s:g}"]
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
    parser = argparse.ArgumentParser(prog="python -m daybreak.sweep.peak")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--precisions", default=",".join(PRECISION_ORDER))
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds, all measurements")
    parser.add_argument("--out", type=Path, required=True, help="write the PeakResult JSON here")
    args = parser.parse_args(argv)
    from daybreak.measure.device import select_device

    result = get_peak(select_device(args.device), force=args.force, precisions=tuple(args.precisions.split(",")),
                      budget_s=args.budget, log=lambda m: print(m, file=sys.stderr, flush=True))
    atomic_write_text(args.out, result.model_dump_json(indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
