"""The system an entry ran on, structured: accelerator type and count, CPU, framework and version, cloud instance.

Each reader fills it from what its format states:

- daybreak records (``result.json``, ``inference.json``, repeat directories): the measured ``system`` (GPU names, CPU
  model), the devices the run used (``world_size`` on CUDA), ``framework`` ("PyTorch 2.13.0") and ``--instance``;
- DAWNBench v1 files: parsed from the free-text ``hardware`` and ``framework`` fields (the original text is kept
  beside it in the entry's ``hardware``/``framework``);
- MLPerf results trees: the ``systems/*.json`` keys (``accelerator_model_name``, ``number_of_nodes`` x
  ``accelerators_per_node``, ``host_processor_model_name``, ``framework``, ``system_type``/cloud).

Nothing here guesses beyond the text: a field the source does not state stays "" / None, and the board shows the
submitted text for it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

CPU_ONLY = "CPU only"  # the accelerator of a system without one (daybreak's CPU runs)


@dataclass(frozen=True)
class System:
    accelerator: str = ""
    accelerator_count: int | None = None
    cpu: str = ""
    framework_name: str = ""
    framework_version: str = ""
    cloud_instance: str = ""

    def columns(self) -> dict[str, Any]:
        return asdict(self)


def apply(sub: Any, system: System) -> Any:
    """Set ``sub``'s structured-system fields from ``system``; returns ``sub``."""
    for name, value in system.columns().items():
        setattr(sub, name, value)
    return sub


_MEMORY = re.compile(r"[\s-]*(\d+\s*(GB|GiB|G)\b.*|PCIe.*|SXM\d?.*|HBM\d?e?.*)$", re.I)


def accelerator_name(raw: str) -> str:
    """A GPU's marketing name without its memory size or form factor: 'NVIDIA H100 80GB HBM3' -> 'NVIDIA H100',
    'Tesla V100-SXM2-16GB' -> 'NVIDIA V100'."""
    name = re.sub(r"\s+", " ", raw).strip()
    name = _MEMORY.sub("", name).strip(" -")
    name = re.sub(r"^(NVIDIA\s+)?Tesla\s+", "NVIDIA ", name, flags=re.I)
    if re.match(r"^(GeForce|Quadro|RTX|GTX|[AHVTLPK]\d)", name, re.I) and not name.upper().startswith("NVIDIA"):
        name = f"NVIDIA {name}"
    return name


def framework_parts(text: str) -> tuple[str, str]:
    """'PyTorch 2.13.0' -> ('PyTorch', '2.13.0'); a name without a version -> (name, '')."""
    m = re.match(r"^\s*([A-Za-z][\w.+-]*?)[\s-]*v?(\d+(\.\d+)*\S*)?\s*$", text or "")
    if not m:
        return (text or "").strip(), ""
    return m.group(1), m.group(2) or ""


def from_run_document(doc: dict[str, Any]) -> System:
    """The system of a daybreak ``result.json`` / ``inference.json`` document (a dict as stored)."""
    system = doc.get("system") if isinstance(doc.get("system"), dict) else {}
    name, version = framework_parts(str(doc.get("framework") or ""))
    if name.lower() == "unknown":
        name, version = "", ""
    device = str(doc.get("device") or "")
    gpus = [g.get("name", "") for g in system.get("gpus") or [] if isinstance(g, dict)]
    if system.get("source") == "declared":  # `daybreak time --log`: only what the program declared
        return System(framework_name=name, framework_version=version, cloud_instance=str(doc.get("instance") or ""))
    if device.startswith("cuda") and gpus:
        world = doc.get("world_size") if isinstance(doc.get("world_size"), int) else 1
        accelerator, count = accelerator_name(gpus[0]), max(1, world)
    elif device.startswith("cpu") or not gpus:
        accelerator, count = CPU_ONLY, 0
    else:
        accelerator, count = accelerator_name(gpus[0]), None
    return System(accelerator=accelerator, accelerator_count=count, cpu=str(system.get("cpu_model") or ""),
                  framework_name=name, framework_version=version, cloud_instance=str(doc.get("instance") or ""))


def from_dawnbench(hardware: str, framework: str) -> System:
    """DAWNBench v1's free-text ``hardware`` and ``framework`` -> what they state (see the module docstring)."""
    name, version = framework_parts(framework)
    return System(framework_name=name, framework_version=version)


def stored_columns(source_format: str, document: Any, hardware: str, framework: str) -> dict[str, Any]:
    """The schema-4 columns of an entry stored before schema 4, from its stored document (used by the store's
    upgrade): the structured system and, for daybreak records, the attribution (commit, recipe hash)."""
    from daybreak.leaderboard.submission import FORMAT_DAWNBENCH, FORMAT_INFERENCE, FORMAT_REPEAT, FORMAT_RUN

    if source_format == FORMAT_DAWNBENCH:
        return from_dawnbench(hardware, framework).columns()
    if source_format == FORMAT_REPEAT and isinstance(document, dict):
        summary = document.get("summary") if isinstance(document.get("summary"), dict) else {}
        runs = document.get("runs") or []
        first = runs[0] if runs and isinstance(runs[0], dict) else {}
        name, version = framework_parts(framework)
        device = str(first.get("device") or "")
        world = first.get("world_size") if isinstance(first.get("world_size"), int) else 1
        gpu_name = re.sub(r"^\d+ x ", "", str(first.get("hardware") or "")).split(";")[0]
        cpu_only = device.startswith("cpu") or "(CPU only)" in str(first.get("hardware") or "")
        return System(accelerator=CPU_ONLY if cpu_only else accelerator_name(gpu_name),
                      accelerator_count=0 if cpu_only else max(1, world), framework_name=name,
                      framework_version=version, cloud_instance=str(summary.get("instance") or "")).columns()
    if source_format in (FORMAT_RUN, FORMAT_INFERENCE) and isinstance(document, dict):
        values = from_run_document(document).columns()
        context = document.get("context") if isinstance(document.get("context"), dict) else {}
        commit, recipe = str(context.get("git_commit") or ""), str(context.get("recipe_sha256") or "")
        values["code_commit"] = commit if re.fullmatch(r"[0-9a-f]{7,64}", commit) else ""
        values["recipe_sha256"] = recipe if re.fullmatch(r"[0-9a-f]{64}", recipe) else ""
        return values
    return {}
