"""Energy from cumulative hardware counters, read at the clock's own boundaries.

What is read
------------
- every local NVIDIA GPU: NVML's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``, millijoules since
  the driver was loaded; Volta and newer), through the optional ``nvidia-ml-py`` package (``pip install
  'daybreak[energy]'``), imported lazily;
- CPU package, DRAM, core and uncore energy through Linux powercap/RAPL: ``<root>/intel-rapl:N/energy_uj`` (a
  package) and its subzones ``intel-rapl:N:M`` named ``dram``, ``core``, ``uncore`` (AMD Zen CPUs expose their
  package and core counters through the same ``intel-rapl`` tree on recent kernels; they have no DRAM zone).
  Counters wrap at the zone's ``max_energy_range_uj``; each wrap seen between two reads is added back.

Nothing is ever estimated. A counter that does not exist or cannot be read is reported ``unavailable`` with the
reason (no NVML, no GPU, a GPU without the counter, no powercap tree, ``energy_uj`` readable by root only...).

How a run uses it
-----------------
::

    meter = EnergyMeter(gpus=[torch_gpu_uuid(local_rank)])   # each rank: its own GPU, and the node's CPU zones
    snaps = []
    t = timeline.begin("train"); snaps.append(meter.read(t))  # right after the device synchronize, same instant
    ...
    t = timeline.end("train");   snaps.append(meter.read(t))
    clock = energy_for_clock(get_rules("dawnbench"), timeline.intervals, snaps, at_s=t_target)
    per_rank = all_gather_object(clock.energy)                 # torch.distributed, any transport
    total = combine_ranks(per_rank)                            # GPUs by UUID, CPU zones by host + zone: once each
    meter.close()

``energy_for_clock`` sums energy over exactly the stretches of the timeline (``daybreak.rules.clock_segments``)
whose lengths ``daybreak.rules.read_clock`` adds up, so joules-to-target and time-to-target follow the same rule
set by the same arithmetic.

Testing without hardware
------------------------
- ``DAYBREAK_POWERCAP_ROOT`` (default ``/sys/class/powercap``): the powercap tree to read. A fake tree is a folder
  of zone folders (``intel-rapl:0/{name,energy_uj,max_energy_range_uj}``, ``intel-rapl:0:0/...``), flat as in
  ``/sys/class/powercap`` or nested as in ``/sys/devices/virtual/powercap/intel-rapl``.
- ``DAYBREAK_FAKE_NVML=/path/file.json``: used instead of NVML. The file is read when the meter starts (the GPU
  list) and at every read (the counters), so a test rewrites it between reads. Format::

      {"init_error": null,                     # optional: a string makes "NVML" fail to initialize
       "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-...", "energy_mj": 123456},
                {"index": 1, "name": "Tesla P100-PCIE-16GB", "uuid": "GPU-...", "energy_mj": null,
                 "error": "Not Supported"}]}   # a GPU without the counter

  ``energy_mj`` is NVML's counter (millijoules since the driver loaded); ``error`` (optional) is returned as the
  NVML error for that GPU ("Not Supported" is treated like NVML_ERROR_NOT_SUPPORTED).
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from functools import partial
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from daybreak.rules import Interval, RuleSet, clock_segments, read_clock

POWERCAP_ROOT_ENV = "DAYBREAK_POWERCAP_ROOT"
DEFAULT_POWERCAP_ROOT = "/sys/class/powercap"
FAKE_NVML_ENV = "DAYBREAK_FAKE_NVML"
DEFAULT_POLL_S = 20.0  # background reads of wrapping counters (RAPL wraps every few minutes at full load)
MAX_ZONE_W = 1000.0  # a zone drawing this much wraps its counter every range/1000 s: reads further apart may miss one
INSTALL_HINT = "pip install 'daybreak[energy]'"
PLATYPUS = ("energy_uj is readable by root only since Linux 5.10 (the PLATYPUS side-channel mitigation, "
            "CVE-2020-8694); run as root or have an administrator grant read access")

SourceKind = Literal["gpu", "cpu_package", "dram", "core", "uncore", "psys", "other"]
# The kinds that make up the total. core and uncore are parts of the package; psys (platform, on some laptops)
# includes the package: they are kept per zone but never added to a total.
TOTAL_KINDS: tuple[str, ...] = ("gpu", "cpu_package", "dram")
KIND_LABELS = {"gpu": "GPU", "cpu_package": "CPU package", "dram": "DRAM", "core": "CPU cores", "uncore": "uncore",
               "psys": "platform (psys)", "other": "other"}

_ZONE_RE = re.compile(r"^intel-rapl:\d+(?::\d+)*$")


# --------------------------------------------------------------------------------------------------- the records


class CounterReading(BaseModel):
    """One counter at one instant. ``joules`` is the energy since this meter first read the counter, wrap-arounds
    added back; ``None`` when the counter could not be read (``unavailable`` says why)."""

    model_config = ConfigDict(frozen=True)

    source: str  # unique per meter: "gpu0" (NVML index), "intel-rapl:0", "intel-rapl:0:0"
    kind: SourceKind
    key: str  # the physical counter, for deduplication across ranks: "gpu:<UUID>", "powercap:<host>:<zone path>"
    label: str = ""  # "NVIDIA H100 80GB HBM3", "package-0", "package-0/dram"
    host: str = ""
    rank: int | None = None
    joules: float | None = None
    raw: int | None = None  # the counter as read, in ``unit``
    unit: Literal["uJ", "mJ"] = "uJ"
    range_j: float | None = None  # the counter wraps after this many joules (None: does not wrap in practice)
    epoch: int = 0  # bumped when the counter was reset (went backwards without a known range)
    unavailable: str | None = None
    warning: str | None = None  # e.g. reads too far apart to rule out a missed wrap


class EnergySnapshot(BaseModel):
    """Every counter of one meter (or of several ranks, see ``combine_snapshots``) at one instant."""

    model_config = ConfigDict(frozen=True)

    t_s: float | None = None  # the instant on the run's timeline (what the clock read), when the caller gave it
    perf_counter_s: float  # time.perf_counter() at the read
    host: str
    rank: int | None = None
    readings: tuple[CounterReading, ...] = ()
    missing: dict[str, str] = Field(default_factory=dict)  # kind -> why it has no counter at all ("gpu": "nvml: ...")
    notes: tuple[str, ...] = ()

    def by_key(self) -> dict[str, CounterReading]:
        return {r.key: r for r in self.readings}

    def reading(self, source: str) -> CounterReading | None:
        return next((r for r in self.readings if r.source == source), None)


class SourceEnergy(BaseModel):
    """Joules one counter measured over an interval (``None``: unavailable, with the reason)."""

    source: str
    kind: SourceKind
    key: str
    label: str = ""
    host: str = ""
    rank: int | None = None
    joules: float | None = None
    unavailable: str | None = None


class EnergyDelta(BaseModel):
    """Energy over an interval (or a sum of intervals): per counter, per kind, and a total.

    A kind's total (``gpu_j``, ``cpu_package_j``, ``dram_j``) is ``None`` when any of its counters is unavailable
    or it has none; ``unavailable[kind]`` then says why. ``total_j`` adds the kinds that are available and
    ``total_covers`` names them: a total without ``cpu_package`` is GPU energy only, never a guess at the rest.
    """

    seconds: float = 0.0
    sources: list[SourceEnergy] = Field(default_factory=list)
    gpu_j: float | None = None
    cpu_package_j: float | None = None
    dram_j: float | None = None
    total_j: float | None = None
    total_covers: list[str] = Field(default_factory=list)
    unavailable: dict[str, str] = Field(default_factory=dict)  # kind -> reason its total is None
    missing: dict[str, str] = Field(default_factory=dict)  # kind -> why no counter of that kind exists
    notes: list[str] = Field(default_factory=list)

    @property
    def available(self) -> bool:
        return self.total_j is not None

    def kind_j(self, kind: str) -> float | None:
        return {"gpu": self.gpu_j, "cpu_package": self.cpu_package_j, "dram": self.dram_j}.get(kind)

    def watts(self) -> dict[str, float | None]:
        """Mean watts per source over ``seconds`` (``None`` where unavailable or the interval is empty)."""
        return {s.source: (s.joules / self.seconds if s.joules is not None and self.seconds > 0 else None)
                for s in self.sources}


class PowerSample(BaseModel):
    """Mean power per source over a short window (``sample_idle_power``)."""

    seconds: float
    per_source_w: dict[str, float | None] = Field(default_factory=dict)  # source -> W (None: unavailable)
    gpu_w: float | None = None
    cpu_package_w: float | None = None
    dram_w: float | None = None
    total_w: float | None = None
    total_covers: list[str] = Field(default_factory=list)
    unavailable: dict[str, str] = Field(default_factory=dict)
    energy: EnergyDelta


class ClockEnergy(BaseModel):
    """Energy under one rule set: the joules spent in exactly the stretches of the timeline its clock counts."""

    rules: str
    start_s: float
    at_s: float
    seconds: float  # the counted time; equals daybreak.rules.read_clock(...).seconds
    segments: list[tuple[float, float]] = Field(default_factory=list)
    energy: EnergyDelta
    notes: list[str] = Field(default_factory=list)


# -------------------------------------------------------------------------------------------------- the readers


class _Unreadable(Exception):
    """A counter that cannot be read now; the message is the reason."""


@dataclass
class _Counter:
    source: str
    kind: SourceKind
    key: str
    label: str
    unit: Literal["uJ", "mJ"]
    range_raw: int | None  # wraps at this raw value (None: no wrap)
    read: Callable[[], int]  # raises _Unreadable
    broken: str | None = None  # permanently unreadable (e.g. a GPU without the counter)


def _read_text(path: Path) -> str:
    with open(path, encoding="ascii") as f:
        return f.read().strip()


def _describe_os_error(path: Path, err: OSError) -> str:
    if isinstance(err, PermissionError):
        return f"powercap: {path} is not readable (permission denied; {PLATYPUS})"
    if isinstance(err, FileNotFoundError):
        return f"powercap: {path} does not exist"
    return f"powercap: {path} cannot be read ({err.strerror or err})"


_ZONE_KINDS: dict[str, SourceKind] = {"dram": "dram", "core": "core", "uncore": "uncore", "psys": "psys"}


def _zone_kind(name: str) -> SourceKind:
    if name.startswith("package"):
        return "cpu_package"
    return _ZONE_KINDS.get(name, "other")


class _Powercap:
    """Linux powercap/RAPL zones under ``root`` (DAYBREAK_POWERCAP_ROOT or /sys/class/powercap)."""

    def __init__(self, root: Path, host: str):
        self.root = root
        self.counters: list[_Counter] = []
        self.missing: dict[str, str] = {}
        if not root.is_dir():
            reason = (f"powercap: {root} does not exist (not Linux, no powercap/RAPL driver, or a container that "
                      f"does not expose /sys/class/powercap)")
            self.missing = {"cpu_package": reason, "dram": reason}
            return
        zones: dict[str, Path] = {}
        try:
            for entry in sorted(root.iterdir()):
                if _ZONE_RE.match(entry.name):
                    zones.setdefault(entry.name, entry)
                elif entry.name == "intel-rapl" and entry.is_dir():  # nested layout (/sys/devices/virtual/powercap)
                    for sub in sorted(entry.iterdir()):
                        if _ZONE_RE.match(sub.name):
                            zones.setdefault(sub.name, sub)
            for name, path in list(zones.items()):  # subzones nested inside their package
                if path.is_dir():
                    for sub in sorted(path.iterdir()):
                        if _ZONE_RE.match(sub.name):
                            zones.setdefault(sub.name, sub)
        except OSError as err:
            reason = f"powercap: cannot list {root} ({err.strerror or err})"
            self.missing = {"cpu_package": reason, "dram": reason}
            return
        if not zones:
            reason = (f"powercap: no intel-rapl zone under {root} (the intel_rapl driver is not loaded, or this "
                      f"CPU or virtual machine exposes no RAPL)")
            self.missing = {"cpu_package": reason, "dram": reason}
            return
        names: dict[str, str] = {}
        for zone_id in sorted(zones, key=_zone_sort_key):
            path = zones[zone_id]
            try:
                names[zone_id] = _read_text(path / "name")
            except OSError:
                names[zone_id] = zone_id
        for zone_id in sorted(zones, key=_zone_sort_key):
            path = zones[zone_id]
            name = names[zone_id]
            parent = zone_id.rsplit(":", 1)[0] if zone_id.count(":") > 1 else None
            label = f"{names.get(parent, parent)}/{name}" if parent else name
            try:
                range_raw: int | None = int(_read_text(path / "max_energy_range_uj"))
            except (OSError, ValueError):
                range_raw = None
            energy = path / "energy_uj"
            self.counters.append(_Counter(
                source=zone_id, kind=_zone_kind(name), key=f"powercap:{host}:{path.resolve()}", label=label,
                unit="uJ", range_raw=range_raw if range_raw else None, read=_file_reader(energy)))
        kinds = {c.kind for c in self.counters}
        if "cpu_package" not in kinds:
            self.missing["cpu_package"] = f"powercap: no package zone under {root}"
        if "dram" not in kinds:
            self.missing["dram"] = (f"powercap: no dram zone under {root} (client CPUs and AMD CPUs usually expose "
                                    f"none)")


def _zone_sort_key(zone_id: str) -> tuple[int, ...]:
    return tuple(int(p) for p in zone_id.split(":")[1:])


def _file_reader(path: Path) -> Callable[[], int]:
    def read() -> int:
        try:
            text = _read_text(path)
        except OSError as err:
            raise _Unreadable(_describe_os_error(path, err)) from None
        try:
            return int(text)
        except ValueError:
            raise _Unreadable(f"powercap: {path} holds {text[:40]!r}, not a number of microjoules") from None

    return read


@dataclass
class _Gpu:
    index: int
    name: str
    uuid: str | None


class _GpuSource:
    """Every selected GPU through NVML, or through the fake NVML file (DAYBREAK_FAKE_NVML)."""

    def __init__(self, host: str, gpus: Sequence[int | str] | None, fake: str | None):
        self.counters: list[_Counter] = []
        self.missing: dict[str, str] = {}
        self._nvml: Any = None
        self.backend = f"fake NVML {fake}" if fake else "nvml"
        if gpus is not None and len(gpus) == 0:
            self.missing["gpu"] = "gpu: not measured (no GPU selected)"
            return
        try:
            found = self._open_fake(fake) if fake else self._open_nvml()
        except _Unreadable as err:
            self.missing["gpu"] = str(err)
            return
        if not found:
            self.missing["gpu"] = f"{self.backend}: no NVIDIA GPU found"
            return
        chosen = found
        if gpus is not None:
            chosen = []
            for want in gpus:
                match = [g for g in found if (g.index == want if isinstance(want, int) else
                                              (g.uuid or "").lower() == str(want).lower())]
                if not match:
                    known = ", ".join(f"{g.index} ({g.uuid})" for g in found)
                    self.missing["gpu"] = f"{self.backend}: no GPU {want!r} (found: {known})"
                chosen.extend(m for m in match if m not in chosen)
        for g in chosen:
            key = f"gpu:{g.uuid}" if g.uuid else f"gpu:{host}:{g.index}"
            counter = _Counter(source=f"gpu{g.index}", kind="gpu", key=key, label=g.name, unit="mJ", range_raw=None,
                               read=self._reader(g))
            try:  # a GPU without the counter never gets one: say so once, and never ask again
                counter.read()
            except _Unreadable as err:
                if "Not Supported" in str(err):
                    counter.broken = str(err)
            self.counters.append(counter)

    # ---- NVML
    def _open_nvml(self) -> list[_Gpu]:
        try:
            import pynvml  # nvidia-ml-py
        except ImportError:
            raise _Unreadable(f"nvml: the nvidia-ml-py package is not installed ({INSTALL_HINT}), so GPU energy is "
                              f"not read") from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as err:
            raise _Unreadable(f"nvml: cannot initialize NVML ({err}); no NVIDIA driver or GPU on this machine?") from None
        self._nvml = pynvml
        gpus = []
        try:
            for i in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(i)
                gpus.append(_Gpu(i, _text(pynvml.nvmlDeviceGetName(handle)), _text(pynvml.nvmlDeviceGetUUID(handle))))
        except pynvml.NVMLError as err:
            raise _Unreadable(f"nvml: cannot list GPUs ({err})") from None
        return gpus

    # ---- the fake
    def _open_fake(self, fake: str) -> list[_Gpu]:
        data = _load_fake(fake)
        if data.get("init_error"):
            raise _Unreadable(f"{self.backend}: cannot initialize NVML ({data['init_error']})")
        try:
            return [_Gpu(int(g.get("index", i)), str(g.get("name", f"GPU {i}")), g.get("uuid"))
                    for i, g in enumerate(data.get("gpus", []))]
        except (TypeError, ValueError, AttributeError) as err:
            raise _Unreadable(f"{self.backend}: malformed 'gpus' ({err})") from None

    def _reader(self, gpu: _Gpu) -> Callable[[], int]:
        what = f"GPU {gpu.index} ({gpu.name})"
        no_counter = "has no total-energy counter (NVML: Not Supported; it needs a Volta or newer GPU)"
        if self._nvml is not None:
            pynvml = self._nvml

            def read_nvml() -> int:
                try:
                    handle = pynvml.nvmlDeviceGetHandleByIndex(gpu.index)
                    return int(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))
                except pynvml.NVMLError as err:
                    if getattr(err, "value", None) == getattr(pynvml, "NVML_ERROR_NOT_SUPPORTED", object()):
                        raise _Unreadable(f"nvml: {what} {no_counter}") from None
                    raise _Unreadable(f"nvml: {what}: {err}") from None

            return read_nvml
        path = self.backend.removeprefix("fake NVML ")

        def read_fake() -> int:
            try:
                data = _load_fake(path)
            except _Unreadable as err:
                raise _Unreadable(f"{self.backend}: {err}") from None
            for i, g in enumerate(data.get("gpus", [])):
                if int(g.get("index", i)) == gpu.index:
                    if g.get("error"):
                        error = str(g["error"])
                        raise _Unreadable(f"{self.backend}: {what} {no_counter}" if "not supported" in error.lower()
                                          else f"{self.backend}: {what}: {error}")
                    if g.get("energy_mj") is None:
                        raise _Unreadable(f"{self.backend}: {what} {no_counter}")
                    return int(g["energy_mj"])
            raise _Unreadable(f"{self.backend}: {what} is no longer listed")

        return read_fake

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - shutting down is best effort
                pass
            self._nvml = None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _load_fake(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise _Unreadable(f"fake NVML {path}: cannot read ({err.strerror or err})") from None
    except ValueError as err:
        raise _Unreadable(f"fake NVML {path}: not JSON ({err})") from None
    if not isinstance(data, dict):
        raise _Unreadable(f"fake NVML {path}: expected an object with 'gpus'")
    return data


def torch_gpu_uuid(device_index: int) -> str | None:
    """NVML's UUID ("GPU-...") of torch's CUDA device ``device_index``, so that a rank meters its own GPU
    (NVML numbers GPUs in PCI order, CUDA by default fastest-first and after CUDA_VISIBLE_DEVICES). None when
    torch cannot say."""
    try:
        import torch

        uuid = getattr(torch.cuda.get_device_properties(device_index), "uuid", None)
    except Exception:  # noqa: BLE001 - no CUDA, bad index, old torch
        return None
    if uuid is None:
        return None
    text = str(uuid)
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


# ---------------------------------------------------------------------------------------------------- the meter


@dataclass
class _State:
    last_raw: int
    total_raw: int = 0
    last_s: float = 0.0
    epoch: int = 0
    warning: str | None = None


class EnergyMeter:
    """Reads every energy counter of this process's node (or the GPUs given) and keeps them cumulative.

    ``gpus``: ``None`` = every GPU NVML lists; a sequence of NVML indices or UUIDs (``torch_gpu_uuid``) = those;
    ``()`` = none. ``cpu``: read the powercap zones. ``powercap_root`` / ``fake_nvml`` default to the environment
    (``DAYBREAK_POWERCAP_ROOT``, ``DAYBREAK_FAKE_NVML``). ``poll_s``: a daemon thread reads wrapping counters this
    often so that no wrap is missed however long a phase lasts (``None`` or 0: only on ``read``).
    """

    def __init__(self, *, gpus: Sequence[int | str] | None = None, cpu: bool = True,
                 powercap_root: str | os.PathLike[str] | None = None, fake_nvml: str | os.PathLike[str] | None = None,
                 host: str | None = None, rank: int | None = None, poll_s: float | None = DEFAULT_POLL_S):
        self.host = host or socket.gethostname()
        self.rank = rank
        root = Path(powercap_root or os.environ.get(POWERCAP_ROOT_ENV) or DEFAULT_POWERCAP_ROOT)
        fake = str(fake_nvml) if fake_nvml else (os.environ.get(FAKE_NVML_ENV) or None)
        self._gpu = _GpuSource(self.host, gpus, fake)
        self._cpu = _Powercap(root, self.host) if cpu else None
        self.missing: dict[str, str] = dict(self._gpu.missing)
        if self._cpu is not None:
            self.missing.update(self._cpu.missing)
        else:
            self.missing.update({"cpu_package": "powercap: not measured (cpu=False)",
                                 "dram": "powercap: not measured (cpu=False)"})
        self.counters: list[_Counter] = self._gpu.counters + (self._cpu.counters if self._cpu else [])
        self._state: dict[str, _State] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: list[CounterReading] = []
        self._sampled_s: float | None = None
        with self._lock:
            self._last = self._sample()  # the baseline: every counter's joules count from here
        if poll_s and any(c.range_raw for c in self.counters if not c.broken):
            self._thread = threading.Thread(target=self._poll, args=(float(poll_s),), name="daybreak-energy",
                                            daemon=True)
            self._thread.start()

    # ---- public
    def read(self, t_s: float | None = None) -> EnergySnapshot:
        """Every counter now. Call it right after the device synchronize at each clock boundary and pass the
        timeline instant the clock used (``t_s``), so that energy follows exactly the clock's intervals."""
        started = time.perf_counter()
        with self._lock:
            readings = self._last = self._sample()
            sampled = self._sampled_s
        # the instant the counters were read (not after building the snapshot: a preemption there is not energy)
        return EnergySnapshot(t_s=t_s, perf_counter_s=sampled if sampled is not None else started, host=self.host,
                              rank=self.rank, readings=tuple(readings), missing=dict(self.missing))

    @property
    def available(self) -> bool:
        """True when at least one counter could be read at the last read."""
        return any(r.joules is not None for r in self._last)

    def describe(self) -> dict[str, Any]:
        """What is measured and what is not (for logs and records)."""
        return {"host": self.host, "rank": self.rank, "gpu_backend": self._gpu.backend,
                "powercap_root": str(self._cpu.root) if self._cpu else None,
                "counters": [{"source": c.source, "kind": c.kind, "label": c.label, "key": c.key,
                              "range_j": _range_j(c), "unavailable": c.broken} for c in self.counters],
                "missing": dict(self.missing)}

    def close(self) -> None:
        """Stops the polling thread and shuts NVML down. Snapshots already taken stay valid."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._gpu.close()

    def __enter__(self) -> "EnergyMeter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals
    def _poll(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            with self._lock:
                self._sample(wrapping_only=True)

    def _sample(self, wrapping_only: bool = False) -> list[CounterReading]:
        out: list[CounterReading] = []
        self._sampled_s = None  # time.perf_counter() just before the first counter was read
        for c in self.counters:
            if wrapping_only and not c.range_raw:
                continue
            range_j = _range_j(c)
            reading = partial(CounterReading, source=c.source, kind=c.kind, key=c.key, label=c.label, host=self.host,
                              rank=self.rank, unit=c.unit, range_j=range_j)
            if c.broken:
                out.append(reading(unavailable=c.broken))
                continue
            now = time.perf_counter()
            if self._sampled_s is None:
                self._sampled_s = now
            try:
                raw = c.read()
            except _Unreadable as err:
                out.append(reading(unavailable=str(err)))
                continue
            st = self._state.get(c.key)
            if st is None:
                st = self._state[c.key] = _State(last_raw=raw, last_s=now)
            else:
                step = raw - st.last_raw
                if step < 0 and c.range_raw:
                    step += c.range_raw  # one wrap
                elif step < 0:  # a counter without a range went backwards: the driver was reloaded
                    st.epoch += 1
                    st.total_raw = 0
                    st.warning = (f"{c.source}: counter went back from {st.last_raw} to {raw} {c.unit} (driver "
                                  f"reloaded?); energy across this point is unavailable")
                    step = 0
                if range_j is not None and now - st.last_s > range_j / MAX_ZONE_W:
                    st.warning = (f"{c.source}: {now - st.last_s:.0f} s between two reads of a counter that wraps "
                                  f"every {range_j:.0f} J: a second wrap may have been missed (poll more often)")
                st.total_raw += step
                st.last_raw = raw
                st.last_s = now
            scale = 1e-6 if c.unit == "uJ" else 1e-3
            out.append(reading(joules=st.total_raw * scale, raw=raw, epoch=st.epoch, warning=st.warning))
        return out


def _range_j(c: _Counter) -> float | None:
    if not c.range_raw:
        return None
    return c.range_raw * (1e-6 if c.unit == "uJ" else 1e-3)


# -------------------------------------------------------------------------------------------------- arithmetic


def _summarize(seconds: float, sources: list[SourceEnergy], missing: Mapping[str, str],
               notes: Iterable[str]) -> EnergyDelta:
    totals: dict[str, float | None] = {}
    unavailable: dict[str, str] = {}
    for kind in TOTAL_KINDS:
        mine = [s for s in sources if s.kind == kind]
        bad = [s for s in mine if s.joules is None]
        if not mine:
            totals[kind] = None
            unavailable[kind] = missing.get(kind) or f"no {KIND_LABELS[kind]} counter"
        elif bad:
            totals[kind] = None
            unavailable[kind] = "; ".join(dict.fromkeys(f"{s.source}: {s.unavailable}" for s in bad))
        elif kind in missing:  # some counters read, others of the same kind missing (e.g. one rank's GPU)
            totals[kind] = None
            unavailable[kind] = f"partial: {missing[kind]}"
        else:
            totals[kind] = math.fsum(s.joules for s in mine if s.joules is not None)  # (none is: bad is empty)
    covered = {k: joules for k in TOTAL_KINDS if (joules := totals[k]) is not None}
    covers = list(covered)
    return EnergyDelta(seconds=seconds, sources=sources, gpu_j=totals["gpu"], cpu_package_j=totals["cpu_package"],
                       dram_j=totals["dram"], total_j=math.fsum(covered.values()) if covered else None,
                       total_covers=covers, unavailable=unavailable, missing=dict(missing),
                       notes=list(dict.fromkeys(notes)))


def _source(r: CounterReading, joules: float | None = None, unavailable: str | None = None) -> SourceEnergy:
    return SourceEnergy(source=r.source, kind=r.kind, key=r.key, label=r.label, host=r.host, rank=r.rank,
                        joules=joules, unavailable=unavailable)


def delta(start: EnergySnapshot, end: EnergySnapshot) -> EnergyDelta:
    """Joules per counter between two snapshots of the same meter (or of the same ranks), with totals.
    ``seconds`` is ``end.t_s - start.t_s`` when both carry a timeline instant, else the perf_counter gap."""
    if start.t_s is not None and end.t_s is not None:
        seconds = end.t_s - start.t_s
    else:
        seconds = end.perf_counter_s - start.perf_counter_s
    if seconds < 0:
        raise ValueError(f"the end snapshot ({end.t_s}) is before the start ({start.t_s})")
    first = start.by_key()
    sources: list[SourceEnergy] = []
    notes = list(start.notes) + list(end.notes)
    for key, e in end.by_key().items():
        s = first.pop(key, None)
        if s is None:
            sources.append(_source(e, unavailable="not read at the interval's start"))
        elif e.unavailable or s.unavailable:
            sources.append(_source(e, unavailable=e.unavailable or s.unavailable))
        elif s.epoch != e.epoch:
            sources.append(_source(e, unavailable="the counter was reset during the interval (driver reloaded?)"))
        else:
            sources.append(_source(e, joules=e.joules - s.joules))  # type: ignore[operator]
            if e.warning and e.warning != s.warning:
                notes.append(e.warning)
    for s in first.values():
        sources.append(_source(s, unavailable="not read at the interval's end"))
    return _summarize(seconds, sources, {**start.missing, **end.missing}, notes)


def sum_deltas(deltas: Iterable[EnergyDelta]) -> EnergyDelta:
    """Consecutive intervals of the same meter added up (per counter, by key). A counter unavailable in any
    interval, or absent from one, is unavailable in the sum."""
    parts = list(deltas)
    if not parts:
        return _summarize(0.0, [], {}, ["no interval"])
    order: dict[str, SourceEnergy] = {}
    joules: dict[str, list[float]] = {}
    bad: dict[str, str] = {}
    for d in parts:
        for s in d.sources:
            order.setdefault(s.key, s)
            if s.joules is None:
                bad.setdefault(s.key, s.unavailable or "unavailable")
            else:
                joules.setdefault(s.key, []).append(s.joules)
    sources = []
    for key, s in order.items():
        if key in bad:
            sources.append(s.model_copy(update={"joules": None, "unavailable": bad[key]}))
        elif len(joules.get(key, [])) != len(parts):
            sources.append(s.model_copy(update={"joules": None,
                                                "unavailable": "not read over every interval of the sum"}))
        else:
            sources.append(s.model_copy(update={"joules": math.fsum(joules[key]), "unavailable": None}))
    missing: dict[str, str] = {}
    for d in parts:
        missing.update(d.missing)
    return _summarize(math.fsum(d.seconds for d in parts), sources, missing, [n for d in parts for n in d.notes])


def energy_by_phase(intervals: Iterable[tuple[str, EnergySnapshot, EnergySnapshot]]) -> dict[str, EnergyDelta]:
    """``[(phase, start_snapshot, end_snapshot), ...]`` -> joules per phase (its intervals summed), phases in the
    order they first appear."""
    grouped: dict[str, list[EnergyDelta]] = {}
    for phase, start, end in intervals:
        grouped.setdefault(phase, []).append(delta(start, end))
    return {phase: sum_deltas(ds) for phase, ds in grouped.items()}


def snapshot_at(snapshots: Sequence[EnergySnapshot], t_s: float, tolerance_s: float = 1e-9) -> EnergySnapshot:
    """The counters at timeline instant ``t_s``: the snapshot read at that instant, else a linear interpolation
    between the readings either side (noted), else every counter unavailable (no reading on one side)."""
    timed = sorted((s for s in snapshots if s.t_s is not None), key=lambda s: s.t_s)  # type: ignore[arg-type,return-value]
    if len(timed) != len(snapshots):
        raise ValueError("snapshot_at needs snapshots read with a timeline instant (EnergyMeter.read(t_s))")
    if not timed:
        raise ValueError("no snapshot")
    for s in timed:
        if abs(s.t_s - t_s) <= tolerance_s:  # type: ignore[operator]
            return s
    before = [s for s in timed if s.t_s < t_s]  # type: ignore[operator]
    after = [s for s in timed if s.t_s > t_s]  # type: ignore[operator]
    if not before or not after:
        near, side = (after[0], "at or before") if not before else (before[-1], "at or after")
        why = f"no energy reading {side} {t_s:.3f} s on the timeline"
        return near.model_copy(update={"t_s": t_s, "readings": tuple(
            r.model_copy(update={"joules": None, "unavailable": why}) for r in near.readings)})
    a, b = before[-1], after[0]
    w = (t_s - a.t_s) / (b.t_s - a.t_s)  # type: ignore[operator]
    first = a.by_key()
    readings = []
    for key, rb in b.by_key().items():
        ra = first.get(key)
        if ra is None or ra.joules is None or rb.joules is None or ra.epoch != rb.epoch:
            why = rb.unavailable or (ra.unavailable if ra else None) or "cannot interpolate"
            readings.append(rb.model_copy(update={"joules": None, "unavailable": why}))
        else:
            readings.append(rb.model_copy(update={"joules": ra.joules + w * (rb.joules - ra.joules), "raw": None}))
    note = f"energy at {t_s:.3f} s interpolated between readings at {a.t_s:.3f} s and {b.t_s:.3f} s"
    return b.model_copy(update={"t_s": t_s, "perf_counter_s": a.perf_counter_s + w * (b.perf_counter_s -
                                                                                      a.perf_counter_s),
                                "readings": tuple(readings), "notes": (*b.notes, note)})


def energy_for_clock(rules: RuleSet, timeline: Sequence[Interval], snapshots: Sequence[EnergySnapshot],
                     at_s: float) -> ClockEnergy:
    """Joules under ``rules`` up to ``at_s`` (e.g. the end of the evaluation that reached the target): the
    energy of exactly the stretches ``daybreak.rules.clock_segments`` gives, whose lengths ``read_clock`` adds up.
    ``snapshots`` carry timeline instants (``meter.read(t_s)`` at every boundary); an instant without one is
    interpolated between its neighbours, and the result says so."""
    reading = read_clock(rules, timeline, at_s)
    segments = clock_segments(rules, timeline, at_s)
    if segments:
        energy = sum_deltas(delta(snapshot_at(snapshots, a), snapshot_at(snapshots, b)) for a, b in segments)
    else:
        here = snapshot_at(snapshots, reading.start_s)
        energy = delta(here, here)
    return ClockEnergy(rules=rules.name, start_s=reading.start_s, at_s=at_s,
                       seconds=reading.seconds, segments=segments, energy=energy,
                       notes=list(reading.notes))


# ------------------------------------------------------------------------------------------------------ ranks


_R = TypeVar("_R")


def _dedupe(readings: Iterable[_R], key: Callable[[_R], str], ok: Callable[[_R], bool]) -> tuple[list[_R], list[str]]:
    chosen: dict[str, _R] = {}
    notes: list[str] = []
    for r in readings:
        k = key(r)
        if k not in chosen:
            chosen[k] = r
            continue
        kept = chosen[k]
        if not ok(kept) and ok(r):
            chosen[k] = r
        notes.append(f"{k} was measured by more than one rank; counted once")
    return list(chosen.values()), list(dict.fromkeys(notes))


def combine_ranks(parts: Sequence[EnergyDelta]) -> EnergyDelta:
    """Energy of several ranks over the same interval, each physical counter once: GPUs by UUID, CPU zones by
    host and zone path (ranks sharing a node share its CPU package and DRAM counters). ``seconds`` is the
    longest rank's. A kind missing on one rank but read on another is partial: its total is unavailable."""
    if not parts:
        return _summarize(0.0, [], {}, ["no rank"])
    sources, notes = _dedupe((s for d in parts for s in d.sources), lambda s: s.key, lambda s: s.joules is not None)
    missing: dict[str, str] = {}
    for i, d in enumerate(parts):
        for kind, why in d.missing.items():
            rank = next((s.rank for s in d.sources if s.rank is not None), i)
            text = f"rank {rank}: {why}" if len(parts) > 1 else why
            missing[kind] = f"{missing[kind]}; {text}" if kind in missing and text not in missing[kind] else text
    # a kind no rank has stays unavailable with every rank's reason; a kind only some ranks have is partial (its
    # total is None): e.g. DRAM read on one node and not on another is not the DRAM energy of the job
    return _summarize(max(d.seconds for d in parts), sources, missing,
                      [n for d in parts for n in d.notes] + notes)


def combine_snapshots(parts: Sequence[EnergySnapshot]) -> EnergySnapshot:
    """Several ranks' snapshots taken at the same boundary as one, each physical counter once (see
    ``combine_ranks``). ``delta`` of two combined snapshots equals ``combine_ranks`` of the per-rank deltas."""
    if not parts:
        raise ValueError("no snapshot")
    readings, notes = _dedupe((r for p in parts for r in p.readings), lambda r: r.key,
                              lambda r: r.joules is not None)
    missing: dict[str, str] = {}
    for p in parts:
        for kind, why in p.missing.items():
            text = f"rank {p.rank}: {why}" if len(parts) > 1 and p.rank is not None else why
            missing[kind] = f"{missing[kind]}; {text}" if kind in missing and text not in missing[kind] else text
    hosts = sorted({p.host for p in parts})
    return EnergySnapshot(t_s=parts[0].t_s, perf_counter_s=parts[0].perf_counter_s, host=",".join(hosts), rank=None,
                          readings=tuple(readings), missing=missing,
                          notes=tuple(dict.fromkeys([n for p in parts for n in p.notes] + notes)))


# ------------------------------------------------------------------------------------------------------- idle


def power_from(energy: EnergyDelta) -> PowerSample:
    """Mean watts per source and per kind over ``energy.seconds``."""
    s = energy.seconds

    def w(j: float | None) -> float | None:
        return j / s if j is not None and s > 0 else None

    return PowerSample(seconds=s, per_source_w=energy.watts(), gpu_w=w(energy.gpu_j),
                       cpu_package_w=w(energy.cpu_package_j), dram_w=w(energy.dram_j), total_w=w(energy.total_j),
                       total_covers=list(energy.total_covers), unavailable=dict(energy.unavailable), energy=energy)


def sample_idle_power(seconds: float = 3.0, meter: EnergyMeter | None = None,
                      sleep: Callable[[float], None] = time.sleep) -> PowerSample:
    """Mean watts per source over ``seconds`` of doing nothing (before a run: the machine's idle floor).

    NVML's counter advances every 20-100 ms on recent GPUs, so a few seconds are needed for a stable mean. Uses
    ``meter`` if given (left open), else a meter of its own (closed afterwards)."""
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0, not {seconds}")
    own = meter is None
    m = meter or EnergyMeter(poll_s=None)
    try:
        start = m.read()
        sleep(seconds)
        end = m.read()
    finally:
        if own:
            m.close()
    return power_from(delta(start, end))


__all__ = [
    "ClockEnergy", "CounterReading", "EnergyDelta", "EnergyMeter", "EnergySnapshot", "PowerSample", "SourceEnergy",
    "TOTAL_KINDS", "combine_ranks", "combine_snapshots", "delta",
    "energy_by_phase", "energy_for_clock", "power_from", "sample_idle_power", "snapshot_at", "sum_deltas",
    "torch_gpu_uuid",
]
