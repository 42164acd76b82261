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


def resolve_amp(amp: str, device: torch.device) -> str:
    """'auto' means bf16 on a GPU that supports it (fp16 otherwise) and off on CPU/MPS."""
    amp = (amp or "auto").lower()
    if amp not in AMP_CHOICES:
        raise ConfigError(f"--amp {amp!r}: choose one of {', '.join(AMP_CHOICES)}")
    if amp == "auto":
        if device.type == "cuda":
            return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        return "off"
    if amp == "fp16" and device.type == "cpu":
        # CPU autocast supports fp16 in recent torch, but it is slow and rarely what anyone wants; allow it.
        pass
    return amp


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
