"""What a result ran on: CPU, memory, GPUs, OS and library versions. Every record embeds one."""

from __future__ import annotations

import os
import platform
import sys
from functools import lru_cache
from typing import Annotated, Any, Literal, Mapping

from pydantic import BaseModel, Field


class GpuInfo(BaseModel):
    name: str
    memory_gb: Annotated[float, Field(ge=0.0)]  # 0 for Apple MPS (unified memory)
    capability: str | None = None


class SystemInfo(BaseModel):
    os: str
    platform: str
    python: str
    torch: str
    daybreak: str
    numpy: str | None = None
    cpu_model: str
    # counts as daybreak.records.fields declares them (measure sits below records: the same constraints, inline)
    cpu_cores_physical: Annotated[int, Field(ge=1)] | None
    cpu_threads_logical: Annotated[int, Field(ge=1)] | None
    torch_threads: Annotated[int, Field(ge=0)]  # 0 in a declared system (not known)
    ram_gb: Annotated[float, Field(gt=0.0)] | None
    gpu_count: Annotated[int, Field(ge=0)]
    gpus: list[GpuInfo]
    cuda: str | None = None
    cudnn: str | None = None
    accelerator: str  # "cuda", "mps" or "cpu": what torch can use on this machine
    # "measured": the fields above describe this machine. "declared": a program's log says what it ran on (e.g. an
    # MLPerf log's submission_platform, read by `daybreak time --log`); only ``hardware``/``framework`` are known.
    source: Literal["measured", "declared"] = "measured"
    hardware: str | None = None  # declared hardware, as the program wrote it (e.g. '8xNVIDIA H100-SXM5-80GB')
    framework: str | None = None  # declared framework
    declared_fields: dict[str, Any] = Field(default_factory=dict)  # what the program declared (submission_* keys)

    @classmethod
    def declared(cls, hardware: str | None, *, framework: str | None = None,
                 fields: Mapping[str, Any] | None = None) -> "SystemInfo":
        """A system known only from what a program declared about it; everything not declared is 'unknown'."""
        unknown = "unknown"
        return cls(os=unknown, platform=unknown, python=unknown, torch=unknown, daybreak=unknown, cpu_model=unknown,
                   cpu_cores_physical=None, cpu_threads_logical=None, torch_threads=0, ram_gb=None, gpu_count=0,
                   gpus=[], accelerator=unknown, source="declared", hardware=hardware, framework=framework,
                   declared_fields=dict(fields or {}))

    def hardware_summary(self) -> str:
        """A DAWNBench-style hardware string, e.g. '1 x NVIDIA H100 80GB HBM3' or '2-core Intel Xeon ...';
        for a declared system the declared hardware string."""
        if self.source == "declared":
            return self.hardware or "unknown (not declared)"
        if self.accelerator == NOT_PROBED:
            cores = self.cpu_cores_physical or self.cpu_threads_logical or 0
            return f"{cores}-core {self.cpu_model} (accelerators not probed)"
        if self.gpus:
            names = {g.name for g in self.gpus}
            return "; ".join(f"{sum(g.name == n for g in self.gpus)} x {n}" for n in sorted(names))
        cores = self.cpu_cores_physical or self.cpu_threads_logical or 0
        return f"{cores}-core {self.cpu_model} (CPU only)"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            import subprocess

            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5)
            if out.stdout.strip():
                return out.stdout.strip()
        except Exception:  # noqa: BLE001 - best effort only
            pass
    return platform.processor() or platform.machine() or "unknown CPU"


@lru_cache(maxsize=1)
def _static_info() -> dict[str, Any]:
    import numpy
    import psutil
    import torch

    from daybreak.version import __version__ as daybreak_version

    gpus: list[GpuInfo] = []
    cuda_version = cudnn_version = None
    accelerator = "cpu"
    if torch.cuda.is_available():
        accelerator = "cuda"
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            gpus.append(GpuInfo(name=p.name, memory_gb=round(p.total_memory / 2**30, 2), capability=f"{p.major}.{p.minor}"))
        cuda_version = torch.version.cuda or getattr(torch.version, "hip", None)
        if torch.backends.cudnn.is_available():  # type: ignore[no-untyped-call]  # (torch leaves it unannotated)
            cudnn_version = str(torch.backends.cudnn.version())  # type: ignore[no-untyped-call]
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        accelerator = "mps"
        gpus.append(GpuInfo(name=f"Apple MPS ({platform.machine()})", memory_gb=0.0))
    ram = psutil.virtual_memory().total
    return dict(
        os=f"{platform.system()} {platform.release()}",
        platform=platform.platform(),
        python=platform.python_version(),
        torch=torch.__version__,
        daybreak=daybreak_version,
        numpy=numpy.__version__,
        cpu_model=_cpu_model(),
        cpu_cores_physical=psutil.cpu_count(logical=False),
        cpu_threads_logical=psutil.cpu_count(logical=True) or os.cpu_count(),
        ram_gb=round(ram / 2**30, 2) if ram else None,
        gpu_count=len(gpus) if accelerator == "cuda" else 0,
        gpus=gpus,
        cuda=cuda_version,
        cudnn=cudnn_version,
        accelerator=accelerator,
    )


NOT_PROBED = "not probed"  # the accelerator of a host_info(): torch was not imported to look


def host_info() -> SystemInfo:
    """This machine as a command that only reads text records it (`daybreak time --log`'s ``analyzed_on``: the
    machine that read a log), without importing torch: OS, Python, CPU, memory and the installed torch's version
    (from its package metadata); its accelerators are not probed (``accelerator`` 'not probed', no GPUs listed,
    ``torch_threads`` 0: not known)."""
    import importlib.metadata

    import psutil

    from daybreak.version import __version__ as daybreak_version

    def version(package: str) -> str | None:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return None

    ram = psutil.virtual_memory().total
    return SystemInfo(
        os=f"{platform.system()} {platform.release()}", platform=platform.platform(),
        python=platform.python_version(), torch=version("torch") or "not installed", daybreak=daybreak_version,
        numpy=version("numpy"), cpu_model=_cpu_model(), cpu_cores_physical=psutil.cpu_count(logical=False),
        cpu_threads_logical=psutil.cpu_count(logical=True) or os.cpu_count(), torch_threads=0,
        ram_gb=round(ram / 2**30, 2) if ram else None, gpu_count=0, gpus=[], accelerator=NOT_PROBED)


def system_info() -> SystemInfo:
    import torch

    return SystemInfo(torch_threads=torch.get_num_threads(), **_static_info())
