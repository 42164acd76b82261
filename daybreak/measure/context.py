"""The measurement context of a run: how busy the machine was, the threads used, the exact code and packages.

On a shared 2-core machine a busy neighbour can turn a 1 s run into 23 s; the record must show that it happened.
``ContextSampler.start()`` before the run and ``.stop()`` after it read the load average and the CPU time of the
whole machine and of this process tree (psutil); everything that is not ours is "other".
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

BUSY_FRACTION = 0.10  # other processes took more than 10% of the machine's CPU time during the run
BUSY_LOAD = 0.5  # or the 1-minute load average before the run exceeded half the logical CPUs


def machine_cpu_s() -> float | None:
    try:
        import psutil

        t = psutil.cpu_times()
        return float(sum(getattr(t, f, 0.0) for f in ("user", "nice", "system", "irq", "softirq")))
    except Exception:  # noqa: BLE001 - context is informative only
        return None


def _our_processes() -> list[Any]:
    """This process, its children, and under torchrun the sibling ranks (the launcher's other children)."""
    import psutil

    me = psutil.Process()
    procs = {me.pid: me}
    for child in me.children(recursive=True):
        procs[child.pid] = child
    if os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("LOCAL_WORLD_SIZE"):
        try:
            for sibling in me.parent().children(recursive=True):
                procs[sibling.pid] = sibling
        except Exception:  # noqa: BLE001
            pass
    return list(procs.values())


def _our_cpu_s(cache: dict[int, float]) -> float | None:
    """CPU seconds of our processes; ``cache`` keeps the last reading of processes that have exited since."""
    try:
        for p in _our_processes():
            try:
                t = p.cpu_times()
                cache[p.pid] = float(t.user + t.system)
            except Exception:  # noqa: BLE001 - exited meanwhile
                pass
        return sum(cache.values())
    except Exception:  # noqa: BLE001
        return None


def loadavg() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def package_versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for name in ("torch", "numpy", "daybreak", "mlperf-logging", "scikit-learn", "pillow"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    try:
        import torch

        if torch.version.cuda:
            out["cuda"] = str(torch.version.cuda)
        if torch.backends.cudnn.is_available():  # type: ignore[no-untyped-call]  # (torch leaves it unannotated)
            out["cudnn"] = str(torch.backends.cudnn.version())  # type: ignore[no-untyped-call]
        out["torch_cpu_capability"] = str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # noqa: BLE001
        pass
    return out


def git_state(path: str | Path) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git work tree holding ``path``, or (None, None) outside one."""
    folder = Path(path).resolve()
    folder = folder if folder.is_dir() else folder.parent
    try:
        head = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5)
        if head.returncode != 0:
            return None, None
        status = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10)
        return head.stdout.strip() or None, (bool(status.stdout.strip()) if status.returncode == 0 else None)
    except (OSError, subprocess.SubprocessError):
        return None, None


def git_remote(path: str | Path) -> str | None:
    """The URL of the remote (``origin``, else the first one) of the git work tree holding ``path``, with any
    user name, password or token taken out of it; None without a remote or outside a work tree."""
    folder = Path(path).resolve()
    folder = folder if folder.is_dir() else folder.parent
    try:
        names = subprocess.run(["git", "-C", str(folder), "remote"], capture_output=True, text=True, timeout=5)
        remotes = names.stdout.split() if names.returncode == 0 else []
        if not remotes:
            return None
        name = "origin" if "origin" in remotes else remotes[0]
        url = subprocess.run(["git", "-C", str(folder), "remote", "get-url", name], capture_output=True, text=True,
                             timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return without_credentials(url.stdout.strip()) if url.returncode == 0 and url.stdout.strip() else None


def without_credentials(url: str) -> str:
    """``https://user:token@host/path`` -> ``https://host/path`` (scp-style ``git@host:path`` is kept: no secret)."""
    if "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    host, sep, path = rest.partition("/")
    return f"{scheme}://{host.rpartition('@')[2]}{sep}{path}"


def file_sha256(path: str | Path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


class ContextSampler:
    """Reads the machine's load at ``start`` and ``stop``; ``stop`` returns the fields of a MeasurementContext."""

    def __init__(self) -> None:
        self._cache: dict[int, float] = {}
        self._t0 = time.monotonic()
        self._machine0: float | None = None
        self._ours0: float | None = None
        self.load_before: list[float] | None = None

    def start(self) -> "ContextSampler":
        self.load_before = loadavg()
        self._t0 = time.monotonic()
        self._machine0 = machine_cpu_s()
        self._ours0 = _our_cpu_s(self._cache)
        return self

    def stop(self) -> dict[str, Any]:
        wall = max(time.monotonic() - self._t0, 1e-9)
        machine1, ours1 = machine_cpu_s(), _our_cpu_s(self._cache)
        fields: dict[str, Any] = {"load_avg_before": self.load_before, "load_avg_after": loadavg(), "warnings": []}
        cpus = os.cpu_count() or 1
        if None not in (machine1, ours1, self._machine0, self._ours0):
            own = max(ours1 - self._ours0, 0.0)  # type: ignore[operator]
            other = max((machine1 - self._machine0) - own, 0.0)  # type: ignore[operator]
            fields.update(own_cpu_s=round(own, 3), other_cpu_s=round(other, 3),
                          busy_fraction=round(min(other / (wall * cpus), 1.0), 4))
            if other / (wall * cpus) > BUSY_FRACTION:
                fields["warnings"].append(
                    f"the machine was busy: other processes took {other:.1f} CPU-s during the run's {wall:.1f} s "
                    f"({100 * other / (wall * cpus):.0f}% of its {cpus} logical CPUs); times may be inflated")
        if self.load_before and self.load_before[0] > BUSY_LOAD * cpus:
            fields["warnings"].append(f"the 1-minute load average before the run was {self.load_before[0]:.2f} on "
                                      f"{cpus} logical CPUs: the machine was not quiet")
        return fields
