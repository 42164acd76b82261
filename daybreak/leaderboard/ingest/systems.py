"""The system an entry ran on, structured: accelerator type and count, CPU, framework and version, cloud instance.

Each reader fills it from what its format states:

- daybreak records (``result.json``, ``inference.json``, repeat directories): the measured ``system`` (GPU names, CPU
  model), the devices the run used (``world_size`` on CUDA), ``framework`` ("PyTorch 2.13.0") and ``--instance``;
- DAWNBench v1 files: parsed from the free-text ``hardware`` and ``framework`` fields (the original text is kept
  beside it in the entry's ``hardware``/``framework``): the accelerator's name and the number written next to it
  (times the nodes where the text says "for each node"), else the accelerators of a named cloud instance type
  (:data:`CLOUD_INSTANCES`, from the providers' specifications), else "CPU only" where the text lists only
  memory and CPUs; the CPU model or count, the instance type, and the first known framework with its version;
- MLPerf results trees: the ``systems/*.json`` keys (``accelerator_model_name``, ``number_of_nodes`` x
  ``accelerators_per_node``, ``host_processor_model_name``, ``framework``, ``system_type``/cloud).

Nothing here guesses beyond the text: a field the source does not state stays "" / None, and the board shows the
submitted text for it. Text is read in its compatibility form (NFKC: "Ｖ１００" is a V100, "ＰｙＴｏｒｃｈ" PyTorch).
"""

from __future__ import annotations

import math
import re
import unicodedata
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


def section(doc: dict[str, Any], key: str) -> dict[str, Any]:
    """``doc[key]`` when it is an object, else {} (an optional part of a stored document)."""
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def whole(doc: dict[str, Any], key: str, default: int) -> int:
    """``doc[key]`` when it is an int, else ``default``."""
    value = doc.get(key)
    return value if isinstance(value, int) else default


def from_run_document(doc: dict[str, Any]) -> System:
    """The system of a daybreak ``result.json`` / ``inference.json`` document (a dict as stored)."""
    system = section(doc, "system")
    name, version = framework_parts(unicodedata.normalize("NFKC", str(doc.get("framework") or "")))
    if name.lower() == "unknown":
        name, version = "", ""
    device = str(doc.get("device") or "")
    gpus = [g.get("name", "") for g in system.get("gpus") or [] if isinstance(g, dict)]
    if system.get("source") == "declared":  # `daybreak time --log`: only what the program declared
        return System(framework_name=name, framework_version=version, cloud_instance=str(doc.get("instance") or ""))
    if device.startswith("cuda") and gpus:
        world = whole(doc, "world_size", 1)
        accelerator, count = accelerator_name(gpus[0]), max(1, world)
    elif device.startswith("cpu") or not gpus:
        accelerator, count = CPU_ONLY, 0
    else:
        accelerator, count = accelerator_name(gpus[0]), None
    return System(accelerator=accelerator, accelerator_count=count, cpu=str(system.get("cpu_model") or ""),
                  framework_name=name, framework_version=version, cloud_instance=str(doc.get("instance") or ""))


# --- DAWNBench v1's free text ----------------------------------------------------------------------------------
# Read from the 64 distinct ``hardware`` strings of the 118 DAWNBench v1 JSON files (tests/test_leaderboard_systems.py
# holds them with their parse): "8 * V100 (AWS p3.16xlarge)", "16 nodes with InfiniBand (8*V100 ... for each node)",
# "Tesla V100 * 8 GPU / 32 GB / 40 CPU", "60 GB / 16 CPU (Google Cloud [n1-standard-16])", "1/4 of a TPUv2 Pod".

# Accelerator names as the files write them -> the name daybreak's own records get (accelerator_name of the
# driver's name), so that one filter finds both. Case-sensitive: "P4" is a GPU, "p4d.24xlarge" an instance.
DAWNBENCH_ACCELERATORS = (
    (r"TPU\s*v?2\b", "Google TPU v2"),
    (r"TPU\s*v?3\b", "Google TPU v3"),
    (r"\bTPU\b", "Google TPU"),  # "Cloud TPU": the version is not stated
    (r"\bV100\b", "NVIDIA V100"),
    (r"\bP100\b", "NVIDIA P100"),
    (r"\bK80\b", "NVIDIA K80"),
    (r"\bM60\b", "NVIDIA M60"),
    (r"\bP4\b", "NVIDIA P4"),
    (r"\bT4\b", "NVIDIA T4"),
    (r"\bA100\b", "NVIDIA A100"),
    (r"\bH100\b", "NVIDIA H100"),
    (r"GTX[\s-]*1080\s*Ti\b", "NVIDIA GeForce GTX 1080 Ti"),
    (r"RTX\s*2080\b|\b2080\s*RTX", "NVIDIA GeForce RTX 2080"),
    (r"Alibaba Cloud (?i:npu)\b", "Alibaba Cloud NPU"),  # the model is not stated
)

# Cloud instance types -> (accelerator, accelerators per instance), from the providers' published specifications
# (AWS EC2 P2/P3/G3/C5, Azure NDv2, Alibaba ECS gn5i/gn6i/gn6e, Huawei Cloud Pi1/Pi2). Used only where the text
# names the instance and not the accelerator or its number. Host types that take attached accelerators (GCP's
# n1-standard-*) are not here: the text must say what was attached.
CLOUD_INSTANCES: dict[str, tuple[str, int]] = {
    "p2.xlarge": ("NVIDIA K80", 1), "p2.8xlarge": ("NVIDIA K80", 8), "p2.16xlarge": ("NVIDIA K80", 16),
    "p3.2xlarge": ("NVIDIA V100", 1), "p3.8xlarge": ("NVIDIA V100", 4), "p3.16xlarge": ("NVIDIA V100", 8),
    "p3dn.24xlarge": ("NVIDIA V100", 8),
    "g3.4xlarge": ("NVIDIA M60", 1), "g3.8xlarge": ("NVIDIA M60", 2), "g3.16xlarge": ("NVIDIA M60", 4),
    **{f"c5.{size}": (CPU_ONLY, 0) for size in ("large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "18xlarge")},
    "ND40s_v2": ("NVIDIA V100", 8), "ND40rs_v2": ("NVIDIA V100", 8),
    "ecs.gn5i-c8g1.2xlarge": ("NVIDIA P4", 1), "ecs.gn6i-c8g1.2xlarge": ("NVIDIA T4", 1),
    "ecs.gn6e-c12g1.24xlarge": ("NVIDIA V100", 8),
    "pi1.2xlarge.4": ("NVIDIA P4", 1), "pi2.2xlarge.4": ("NVIDIA T4", 1),
}
_INSTANCE = re.compile(r"(?<![\w.-])(?:(\d+)\s+)?([a-z]\d[a-z]*\.\d*x?large|ecs\.[a-z0-9-]+\.\d*x?large|"
                       r"pi\d\.\d*x?large\.\d+|ND\d+r?s_v\d|n\d-(?:standard|highmem|highcpu)-\d+)(?![\w.-])")
TPU_V2_POD_DEVICES = 64  # a Cloud TPU v2 Pod: 64 TPU devices (256 chips, 512 cores); "1 TPUv2" is one device
_POD = re.compile(r"\b(?:(\d+)\s*/\s*(\d+)|(half)|(quarter)) of a TPU\s*v?2 Pod", re.I)
_VENDOR = r"(?:(?:NVIDIA|Tesla|GeForce)[\s-]*)*"
_COUNT_BEFORE = re.compile(r"((?:\d+\s*[*x\u00d7]\s*)*\d+)(?:\s*[*x\u00d7]\s*|\s+)" + _VENDOR + r"$", re.I)
_GPUS_BEFORE = re.compile(r"(\d+)\s*GPUs?\s*\(\s*" + _VENDOR + r"$", re.I)
_COUNT_AFTER = re.compile(r"^\s*[*x\u00d7]\s*(\d+)")
_NODES = re.compile(r"\b(\d+)\s*(?:nodes|machines)\b", re.I)
_PER_NODE = re.compile(r"(\d+)\s*\*\s*[^()]*?\b(?:for each|per) node", re.I)
_CPU_MODEL = re.compile(r"\b(?:Intel\s+)?Xeon(?:\(\w+\))?\s+((?:Platinum|Gold|Silver|Bronze)\s+\w+|E\d-\w+(?:\s+v\d)?)")
_CPU_COUNT = re.compile(r"\b(\d+)\s*(vCPUs?|CPUs?|cores)\b", re.I)
_MEMORY_AND_CPUS = re.compile(r"^\s*\d+\s*GB\s*/\s*\d+\s*v?CPUs?\b", re.I)  # "60 GB / 16 CPU": no accelerator listed

# Frameworks by their usual spelling; the first one the text names is the framework, whatever toolkit sits on top
# of it ("fastai / pytorch", "AIACC-Training 1.3 + Tensorflow 2.1", "tensorflow 1.5, tensorpack 0.8.1").
FRAMEWORKS = {"pytorch": "PyTorch", "tensorflow": "TensorFlow", "mxnet": "MXNet", "caffe2": "Caffe2", "caffe": "Caffe",
              "tensorrt": "TensorRT", "paddlepaddle": "PaddlePaddle", "jax": "JAX", "chainer": "Chainer"}
_FRAMEWORK = re.compile(r"(?<![a-z])(" + "|".join(FRAMEWORKS) + r")(?![a-z])(?:[\s-]*v?(\d+(?:\.\d+)*[\w.+-]*))?", re.I)


def dawnbench_framework(text: str) -> tuple[str, str]:
    """'tensorflow 1.5, tensorpack 0.8.1' -> ('TensorFlow', '1.5'); a text naming no known framework -> its own
    name and version as written ('ifx' -> ('ifx', ''))."""
    m = _FRAMEWORK.search(text or "")
    if m:
        return FRAMEWORKS[m.group(1).lower()], m.group(2) or ""
    return framework_parts(text)


def _stated_count(text: str, start: int, end: int) -> int | None:
    """The number of accelerators the text writes next to the name found at text[start:end], over all nodes."""
    nodes, per_node = _NODES.search(text), _PER_NODE.search(text)
    if nodes and per_node:
        return int(nodes.group(1)) * int(per_node.group(1))
    before = _COUNT_BEFORE.search(text[:start]) or _GPUS_BEFORE.search(text[:start])
    if before:
        return math.prod(int(n) for n in re.findall(r"\d+", before.group(1)))
    after = _COUNT_AFTER.match(text[end:])
    return int(after.group(1)) if after else None


def _pod_devices(text: str) -> int | None:
    m = _POD.search(text)
    if not m:
        return None
    if m.group(3) or m.group(4):
        return TPU_V2_POD_DEVICES // (2 if m.group(3) else 4)
    numerator, denominator = int(m.group(1)), int(m.group(2))
    return TPU_V2_POD_DEVICES * numerator // denominator if denominator else None


def _cpu(text: str) -> str:
    model, count = _CPU_MODEL.search(text), _CPU_COUNT.search(text)
    if model:
        return f"Intel Xeon {model.group(1)}"
    if count:
        unit = count.group(2).lower().rstrip("s")
        return f"{count.group(1)} {'vCPU' if unit == 'vcpu' else unit.upper() if unit == 'cpu' else unit}s"
    return ""


def _accelerator(text: str, instance: re.Match[str] | None) -> tuple[str, int | None]:
    """(accelerator, count over all nodes) as the text states them; ("", None) when it names none."""
    known = CLOUD_INSTANCES.get(instance.group(2)) if instance else None
    per_instance = (known[1] * int(instance.group(1) or 1)) if known and instance else None
    for pattern, name in DAWNBENCH_ACCELERATORS:
        m = re.search(pattern, text)
        if m:
            count = _stated_count(text, m.start(), m.end())
            if count is None:
                count = per_instance if known and known[0] == name else _pod_devices(text) or 1  # "a V100": one
            return name, count
    if known:
        return known[0], per_instance
    if _CPU_MODEL.search(text) or _MEMORY_AND_CPUS.match(text):
        return CPU_ONLY, 0
    return "", None


def from_dawnbench(hardware: str, framework: str) -> System:
    """DAWNBench v1's free-text ``hardware`` and ``framework`` -> what they state (see the module docstring). A
    count the text writes wins over its instance type's; a single accelerator named without a number is one."""
    text = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", hardware or "")).strip()
    instance = _INSTANCE.search(text)
    accelerator, count = _accelerator(text, instance)
    name, version = dawnbench_framework(unicodedata.normalize("NFKC", framework or ""))
    return System(accelerator=accelerator, accelerator_count=count, cpu=_cpu(text), framework_name=name,
                  framework_version=version, cloud_instance=instance.group(2) if instance else "")


def stored_columns(source_format: str, document: Any, hardware: str, framework: str) -> dict[str, Any]:
    """The schema-4 columns of an entry stored before schema 4, from its stored document (used by the store's
    upgrade): the structured system and, for daybreak records, the attribution (commit, recipe hash)."""
    from daybreak.leaderboard.ingest.submission import FORMAT_DAWNBENCH, FORMAT_INFERENCE, FORMAT_REPEAT, FORMAT_RUN

    if source_format == FORMAT_DAWNBENCH:
        return from_dawnbench(hardware, framework).columns()
    if source_format == FORMAT_REPEAT and isinstance(document, dict):
        summary = section(document, "summary")
        runs = document.get("runs") or []
        first = runs[0] if runs and isinstance(runs[0], dict) else {}
        name, version = framework_parts(framework)
        device = str(first.get("device") or "")
        world = whole(first, "world_size", 1)
        gpu_name = re.sub(r"^\d+ x ", "", str(first.get("hardware") or "")).split(";")[0]
        cpu_only = device.startswith("cpu") or "(CPU only)" in str(first.get("hardware") or "")
        return System(accelerator=CPU_ONLY if cpu_only else accelerator_name(gpu_name),
                      accelerator_count=0 if cpu_only else max(1, world), framework_name=name,
                      framework_version=version, cloud_instance=str(summary.get("instance") or "")).columns()
    if source_format in (FORMAT_RUN, FORMAT_INFERENCE) and isinstance(document, dict):
        values = from_run_document(document).columns()
        context = section(document, "context")
        commit, recipe = str(context.get("git_commit") or ""), str(context.get("recipe_sha256") or "")
        values["code_commit"] = commit if re.fullmatch(r"[0-9a-f]{7,64}", commit) else ""
        values["recipe_sha256"] = recipe if re.fullmatch(r"[0-9a-f]{64}", recipe) else ""
        return values
    return {}
