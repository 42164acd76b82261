"""Device, precision and thread selection shared by every command."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch

from daybreak.errors import ConfigError

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")
AMP_CHOICES = ("auto", "off", "bf16", "fp16")


def select_device(name: str = "auto") -> torch.device:
    """auto: CUDA > MPS > CPU. An explicit device that is not available is a one-line error."""
    name = (name or "auto").lower()
    mps_ok = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if mps_ok:
            return torch.device("mps")
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError(f"--device {name}: CUDA is not available (torch {torch.__version__} sees no GPU)")
        return torch.device(name)
    if name == "mps":
        if not mps_ok:
            raise ConfigError("--device mps: Apple MPS is not available on this machine")
        return torch.device("mps")
    if name == "cpu":
        return torch.device("cpu")
    raise ConfigError(f"--device {name!r}: choose one of {', '.join(DEVICE_CHOICES)}")


def compute_capability(device: torch.device) -> tuple[int, int] | None:
    """(major, minor) of a CUDA device (8, 0 for an A100), None for anything else."""
    if device.type != "cuda":
        return None
    return tuple(torch.cuda.get_device_capability(device))  # type: ignore[return-value]


def sm_name(device: torch.device) -> str | None:
    """"sm_80" for an A100, None off CUDA."""
    cc = compute_capability(device)
    return None if cc is None else f"sm_{cc[0]}{cc[1]}"


def native_bf16(device: torch.device) -> bool:
    """bf16 arithmetic in hardware (Ampere, sm_80, and later). ``torch.cuda.is_bf16_supported()`` alone also says
    True on a V100 or T4, where bf16 runs emulated, slowly: ``including_emulation=False`` asks for the hardware."""
    if device.type != "cuda":
        return False
    try:
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except TypeError:  # a torch without the argument: decide by the architecture
        cc = compute_capability(device)
        return cc is not None and cc[0] >= 8


def resolve_amp(amp: str, device: torch.device) -> str:
    """'auto' means bf16 on a GPU with native bf16 (sm_80 and later), fp16 with gradient scaling on older GPUs
    (sm_70 V100, sm_75 T4: their bf16 is emulated), and off on CPU/MPS."""
    amp = (amp or "auto").lower()
    if amp not in AMP_CHOICES:
        raise ConfigError(f"--amp {amp!r}: choose one of {', '.join(AMP_CHOICES)}")
    if amp == "auto":
        if device.type == "cuda":
            return "bf16" if native_bf16(device) else "fp16"
        return "off"
    return amp


def amp_reason(asked: str, resolved: str, device: torch.device) -> str:
    """Why the run computes in ``resolved``, in words for the record."""
    sm = sm_name(device)
    if (asked or "auto").lower() != "auto":
        return f"{resolved}: --amp {asked}"
    if device.type != "cuda":
        return f"off: autocast is only chosen automatically on CUDA ({device.type} here)"
    if resolved == "bf16":
        return f"bf16: native on {sm}"
    return f"fp16 with gradient scaling: {sm} has no native bf16 (it would be emulated)"


def tf32_applies(device: torch.device) -> bool:
    """TF32 tensor cores exist (Ampere, sm_80, and later); elsewhere the setting changes nothing."""
    cc = compute_capability(device)
    return cc is not None and cc[0] >= 8


def set_tf32(enabled: bool) -> None:
    """fp32 matmuls and convolutions on TF32 tensor cores (10-bit mantissa, fp32 range) or in full fp32. PyTorch's
    own defaults disagree with each other (convolutions on, matmuls off); a run states one setting for both."""
    torch.backends.cuda.matmul.allow_tf32 = bool(enabled)
    torch.backends.cudnn.allow_tf32 = bool(enabled)


def set_cudnn_benchmark(enabled: bool) -> None:
    """cuDNN times its convolution algorithms for each new input shape and keeps the fastest (what airbench
    does); the timing happens on the first batch of a shape, which the warm-up provides."""
    torch.backends.cudnn.benchmark = bool(enabled)


def amp_dtype(amp: str) -> torch.dtype | None:
    return {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}[amp]


@contextlib.contextmanager
def autocast(device: torch.device, amp: str) -> Iterator[None]:
    dtype = amp_dtype(amp)
    if dtype is None:
        yield
        return
    with torch.autocast(device_type=device.type, dtype=dtype):
        yield


def synchronize(device: torch.device) -> None:
    """Wait for queued device work so that a clock read afterwards includes it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def set_threads(threads: int | None) -> None:
    if threads is None:
        return
    if threads < 1:
        raise ConfigError(f"--threads {threads}: must be >= 1")
    torch.set_num_threads(threads)
