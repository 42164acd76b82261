"""The GPU suite: what a freshly lent GPU machine runs in one command, offline, in at most 9 minutes.

    bash benchmarks/gpu_suite.sh --prepare [--python 3.12]       # here, where the registries answer: .gpu/ wheels
    bash benchmarks/gpu_suite.sh --offline --results $OUT        # there: no network, the machine's own python3
    bash benchmarks/gpu_suite.sh --offline --dry-run --results R # any CPU: the same, at a tiny size

``--offline`` uses the machine's ``python3`` (or ``$PYTHON``) and its own torch (recorded; older than 2.1 is one
line), installs the wheels of ``.gpu/`` it lacks into a temporary folder on ``PYTHONPATH``
(benchmarks/gpu_wheels.py), and never touches the network. Without ``--offline`` (a GPU machine of your own, with a
network) the set-up of docs/getting-started/index.md (scripts/bootstrap.sh, .venv) comes first.

Steps (all of them by default, in this order), each a fresh process in its own process group with its own time limit (then
SIGTERM, which a run records as ``interrupted``, and SIGKILL after a grace; every process the step started,
however detached, is found by a marker in its environment and stopped before the next step):

    digits              daybreak run digits: both clocks, NVML energy
    mnist               daybreak run mnist on MNIST-format synthetic files (60,000 / 10,000 images)
    cifar10             daybreak run cifar10 --full-schedule on CIFAR-format synthetic files (50,000 / 10,000):
                        per-epoch train time, both clocks
    cifar10_muon        the same with the Muon recipe (fp16 network, the loss summed in float32; all 8 epochs)
    peak                daybreak peak: fp32, tf32, bf16, fp16 ceilings and copy bandwidth beside the datasheet
    throughput_resnet50 daybreak throughput, bf16, eager, MFU against the datasheet
    throughput_bert_base the same for bert_base, at batches 128 and 256 (32 was launch-bound on an H200)
    throughput_resnet50_compiled  resnet50 bf16 with --compile on, beside the JAX program
    infer               daybreak infer on the cifar10 run: batch-1 latency and batched throughput
    digits_compile      daybreak run digits --compile: recompilations inside the clock, MLPerf clock vs eager
    throughput_jax_resnet50  resnet50 in JAX/Flax (XLA, bf16) through `daybreak throughput --frameworks jax` (the
                        image has jax, flax and optax)
    loss_overflow       benchmarks/loss_overflow.py: fp16 logits [2000, 10] at gaps 3.40 and 3.71, the loss summed
                        in fp16 (inf) against float32 and cifar10_muon's own loss, on the device
    airbench_muon_loss  airbench94_muon alone (needs --airbench-muon PATH), eager, with its own loss recorded at
                        every step (fp16 value and the float32 one)
    boundary            benchmarks/phase_boundary.py: one epoch boundary's cost against a bare one (claim 0.5 ms)
    profile_daybreak    benchmarks/step_profile.py: 10 steps of daybreak's cifar10 under torch.profiler (device
                        time, busy share, kernel launches and host syncs per step)
    profile_airbench    the same for airbench94 (needs --airbench PATH)
    parity              benchmarks/airbench_parity.py (needs --airbench PATH): 5 pairs of fresh processes, ABBA,
                        the training time ratio with its 99% interval

``--steps diagnose`` (``STEP_SETS``) is issue 37's one GPU call: loss_overflow, cifar10_muon, airbench_muon_loss,
boundary, profile_daybreak, profile_airbench, parity, then throughput_resnet50_compiled, throughput_jax_resnet50
and throughput_bert_base, in that order, as far as the budget allows.

The summary ``<results>/<gpu>-<date>.json`` and ``.md`` (``--results``, default benchmarks/results) is rewritten
atomically at the start, when a step starts (its name, ``running``) and when it ends, so a cut-off at any second
leaves every finished step; ``<gpu>-<date>-records.tar.gz`` beside them holds each step's small record files
(result.json, mllog, results.jsonl; no checkpoints). ``--budget`` (default 540 s) bounds everything from the
suite's start, installing included; a step that would not fit is skipped and says so. ``--steps a,b`` runs only
those (names or step sets), in that order; ``--keep DIR`` keeps the run folders.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_wheels  # noqa: E402 - stdlib only: usable before anything is installed

DEFAULT_BUDGET_S = 540.0  # 9 minutes, from the suite's start to its last summary (a device command may run 10)
RESERVE_S = 10.0  # kept back from the budget for stopping a step and writing the summary
MIN_STEP_S = 20.0  # a step with less time left than this is skipped
GRACE_S = 15.0  # after SIGTERM, before SIGKILL: a run writes its record as interrupted
OLDEST_TORCH = (2, 1)  # pyproject.toml: torch>=2.1
MARKER = "DAYBREAK_SUITE_STEP"  # in every step process's environment, inherited by whatever it starts
RECORD_SUFFIXES = (".json", ".jsonl", ".log", ".tsv", ".md", ".txt", ".toml", ".out", ".err")
RECORD_MAX_BYTES = 4 * 2**20
ENV_PROBE = """
import json, sys, torch
out = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda,
       "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
       "cuda_available": torch.cuda.is_available()}
if torch.cuda.is_available():
    from daybreak.measure.device import native_bf16, sm_name
    d = torch.device("cuda")
    out.update(gpu=torch.cuda.get_device_name(d), compute_capability=sm_name(d), native_bf16=native_bf16(d),
               memory_gib=round(torch.cuda.get_device_properties(d).total_memory / 2**30, 1),
               gpu_count=torch.cuda.device_count())
try:
    import pynvml  # nvidia-ml-py: GPU energy
    out["nvml"] = "nvidia-ml-py installed"
except ImportError:
    out["nvml"] = "nvidia-ml-py not installed: GPU energy unavailable"
for name in ("jax", "flax", "optax"):
    try:
        out[name] = __import__(name).__version__
    except Exception:
        out[name] = None
print(json.dumps(out))
"""


class SuiteError(Exception):
    """One line for the user; the suite exits 2."""


@dataclass
class Step:
    """One command of the suite: ``argv`` on the GPU; ``tiny`` (or nothing: parse only) for --dry-run."""

    name: str
    argv: list[str]
    tiny: list[str] | None = None
    timeout_s: float = 120.0
    ok_codes: tuple[int, ...] = (0,)
    collect: Callable[["Step", Path], dict[str, Any]] | None = None
    daybreak_cli: bool = True  # argv is a `daybreak` command (parsed by its parser before it runs)
    before: Callable[[], None] | None = None  # e.g. write the synthetic data
    needs: str | None = None  # a step whose output this one uses (skipped when that one did not succeed)
    tiny_timeout_s: float = 600.0  # the dry run's limit (a CPU is slower than the GPU the limits above are for)
    figures_from_stdout: Callable[[str], dict[str, Any]] | None = None
    missing: str | None = None  # why it cannot run here (a script the suite was not given): skipped, saying so


# --- what each step leaves behind --------------------------------------------------------------------------------

def run_figures(folder: Path) -> dict[str, Any]:
    """The figures of a run directory that the suite is about."""
    from daybreak.records.run import RunResult

    r = RunResult.load(folder)
    p = r.performance
    phase = lambda name: round(sum(i.end_s - i.start_s for i in r.phases if i.phase == name), 4)  # noqa: E731
    return {
        "status": r.status, "device": r.device, "amp": r.amp, "amp_reason": p.amp_reason, "tf32": p.tf32,
        "cudnn_benchmark": p.cudnn_benchmark, "compute_capability": p.compute_capability, "compile": r.compile,
        "recompiles_under_clock": r.recompiles_under_clock, "host_sync": p.host_sync, "warmup": p.warmup,
        "time_to_target_s": {k: c.time_to_target_s for k, c in r.clocks.items()},
        "clock_s": {k: c.clock_s for k, c in r.clocks.items()},
        "phases_s": {k: phase(k) for k in ("model_init", "warmup", "data_load", "train", "eval", "record")},
        "epoch_train_s": epoch_train_seconds(r), "steps_per_epoch": r.steps_per_epoch,
        "best_accuracy": r.best_accuracy, "energy_available": r.energy.available,
        "joules_to_target": r.energy.joules_to_target, "energy_unavailable": r.energy.unavailable,
        "warnings": r.warnings, "message": r.message, "epochs_run": len(r.history),
        "non_finite_loss": [n.summary + ("" if n.diverged else " (not diverged)") for n in r.non_finite_loss],
    }


def epoch_train_seconds(result: Any) -> list[float]:
    """Seconds of training between consecutive evaluations (one evaluation per epoch by default)."""
    epochs: list[float] = []
    current = 0.0
    for p in result.phases:
        if p.phase == "train":
            current += p.end_s - p.start_s
        elif p.phase == "eval":
            epochs.append(round(current, 4))
            current = 0.0
    return epochs


def compile_verdict(eager: dict[str, Any], compiled: dict[str, Any]) -> dict[str, Any]:
    """Issue 21's test: MLPerf's clock of the compiled run within max(3x eager, eager + 2 s)."""
    e, c = eager.get("clock_s", {}).get("mlperf"), compiled.get("clock_s", {}).get("mlperf")
    if e is None or c is None:
        return {"mlperf_within_bound": None}
    bound = max(3 * e, e + 2.0)
    return {"mlperf_eager_s": e, "mlperf_compiled_s": c, "mlperf_bound_s": bound, "mlperf_within_bound": c <= bound,
            "zero_recompilations": compiled.get("recompiles_under_clock") == 0}


def peak_figures(text: str) -> dict[str, Any]:
    from daybreak.measure.datasheet import datasheet_peak
    from daybreak.records.throughput import PeakResult

    p = PeakResult.model_validate_json(text)
    out: dict[str, Any] = {"device_name": p.device_name, "flops_per_s": p.flops_per_s, "unsupported": p.unsupported,
                           "emulated": {k: v.flops_per_s for k, v in p.emulated.items()},
                           "bandwidth_bytes_per_s": p.bandwidth_bytes_per_s, "seconds": p.seconds}
    if p.device.startswith("cuda"):
        sheet = {k: datasheet_peak(p.device_name, k).flops_per_s for k in ("fp32", "tf32", "bf16", "fp16")}
        out["datasheet_flops_per_s"] = sheet
        out["measured_of_datasheet"] = {k: v / sheet[k] for k, v in p.flops_per_s.items() if sheet.get(k)}
    return out


def throughput_figures(folder: Path) -> dict[str, Any]:
    from daybreak.records.throughput import load_results

    rows = [{"batch_size": r.config.batch_size, "amp": r.config.amp, "status": r.status, "error": r.error,
             "samples_per_s": r.samples_per_s, "achieved_flops_per_s": r.achieved_flops_per_s, "mfu": r.mfu,
             "mfu_precision": r.mfu_precision, "datasheet_gpu": r.datasheet_gpu, "utilization": r.utilization,
             "device_name": r.device_name}
            for r in load_results(folder / "results.jsonl")]
    return {"rows": rows}


def infer_figures(folder: Path) -> dict[str, Any]:
    from daybreak.records.inference import INFERENCE_FILE, InferenceResult

    r = InferenceResult.model_validate_json((folder / INFERENCE_FILE).read_text())
    t = r.throughput
    return {"p50_ms": r.latency.p50_ms, "p90_ms": r.latency.p90_ms, "p99_ms": r.latency.p99_ms,
            "mean_ms": r.latency.mean_ms, "examples_per_s": t.examples_per_s if t else None,
            "accuracy": r.accuracy, "valid": r.valid}


def parity_figures(folder: Path) -> dict[str, Any]:
    path = folder / "parity.json"
    if not path.exists():
        return {}
    s = json.loads(path.read_text())
    if s.get("side") == "airbench":  # one airbench run alone (airbench94_muon with its loss recorded)
        loss = {k: v for k, v in (s.get("loss") or {}).items() if k not in ("own", "float32")}
        loss.update(own_first=(s.get("loss") or {}).get("own", [])[:12],
                    float32_first=(s.get("loss") or {}).get("float32", [])[:12])
        return {"side": "airbench", "script_kind": s.get("script_kind"), "compile": s.get("compile"),
                "epoch_s": s.get("epoch_s"), "total_s": s.get("total_s"), "accuracy": s.get("accuracy"), "loss": loss}
    return {k: s.get(k) for k in ("mode", "script_kind", "recipe", "compile", "ratio_total", "ratio", "ratio_words",
                                  "within_goal", "goal_ratio", "epochs", "airbench_total_s", "daybreak_total_s",
                                  "warnings", "device_name", "threads")}


def overflow_figures(path: Path) -> dict[str, Any]:
    f = json_figures(path)
    f["loss_rows"] = f.pop("rows", [])  # ("rows" are throughput's)
    return f


def json_figures(path: Path, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """A benchmark script's --out JSON (loss_overflow, phase_boundary, step_profile)."""
    if not path.exists():
        return {}
    return {k: v for k, v in json.loads(path.read_text()).items() if k not in drop}


# --- the steps ---------------------------------------------------------------------------------------------------

STEP_SETS = {
    # issue 37's one GPU call: what decides the fp16 loss, the parity and the clock, then the anchors' throughput,
    # most decisive first (a step that no longer fits the budget is skipped and says so)
    "diagnose": ("loss_overflow", "cifar10_muon", "airbench_muon_loss", "boundary", "profile_daybreak",
                 "profile_airbench", "parity", "throughput_resnet50_compiled", "throughput_jax_resnet50",
                 "throughput_bert_base"),
}


def steps(work: Path, airbench: Path | None, dry_run: bool = False, airbench_muon: Path | None = None) -> list[Step]:
    """Every step, GPU arguments and tiny CPU arguments; run folders under ``work``. The synthetic data is tiny
    for a dry run (its runs only have to run)."""
    mnist, cifar = work / "data-mnist", work / "data-cifar"
    from_run = lambda name: (lambda step, w: run_figures(w / name))  # noqa: E731
    data_flags = lambda folder: ["--data-dir", str(folder), "--allow-custom-data", "--no-download"]  # noqa: E731
    cpu_tiny = ["--device", "cpu", "--set", "epochs=1", "--full-schedule"]
    bench = lambda name: [sys.executable, str(REPO / "benchmarks" / name)]  # noqa: E731
    no_airbench = None if airbench else "no --airbench script given (daybreak never ships airbench)"
    no_muon = None if airbench_muon else "no --airbench-muon script given (daybreak never ships airbench)"
    write_cifar = lambda: _write_cifar(cifar, dry_run)  # noqa: E731
    out = [
        Step("digits", ["run", "digits", "--out", str(work / "digits"), "-q"],
             tiny=["run", "digits", *cpu_tiny, "--target", "0.5", "--out", str(work / "digits"), "-q"],
             timeout_s=90, ok_codes=(0, 3), collect=from_run("digits")),
        Step("mnist", ["run", "mnist", *data_flags(mnist), "--out", str(work / "mnist"), "-q"],
             tiny=["run", "mnist", *data_flags(mnist), *cpu_tiny, "--target", "0.2", "--out", str(work / "mnist"),
                   "-q"],
             timeout_s=120, ok_codes=(0, 3), collect=from_run("mnist"), before=lambda: _write_mnist(mnist, dry_run)),
        Step("cifar10", ["run", "cifar10", *data_flags(cifar), "--target", "0.9", "--full-schedule", "--out",
                         str(work / "cifar10"), "-q"],
             tiny=["run", "cifar10", *data_flags(cifar), *cpu_tiny, "--target", "0.05", "--set", "batch_size=50",
                   "--out", str(work / "cifar10"), "-q"],  # 5%: a checkpoint for the infer step whatever it learns
             timeout_s=150, ok_codes=(0, 3), collect=from_run("cifar10"), before=write_cifar),
        # the fp16 network with the loss summed in float32, through all 8 epochs (--full-schedule): on the H200 the
        # fp16 sum's inf stopped it as "diverged" at the first evaluation
        Step("cifar10_muon", ["run", "cifar10", "--recipe", "cifar10_muon", *data_flags(cifar), "--target", "0.9",
                              "--full-schedule", "--out", str(work / "cifar10-muon"), "-q"],
             tiny=["run", "cifar10", "--recipe", "cifar10_muon", *data_flags(cifar), *cpu_tiny, "--target", "0.05",
                   "--set", "batch_size=50", "--out", str(work / "cifar10-muon"), "-q"],
             timeout_s=150, ok_codes=(0, 3), collect=from_run("cifar10-muon"), before=write_cifar),
        Step("peak", ["peak", "--budget", "30", "--force", "--json"],
             tiny=["peak", "--device", "cpu", "--budget", "1", "--precisions", "fp32,tf32", "--size", "128",
                   "--repeats", "1", "--json"], timeout_s=90, figures_from_stdout=peak_figures),
    ]
    # BERT at batches that are not launch-bound (at 32 on the H200: ~900 small kernels a step, 12.9% MFU)
    for name, model, extra in (("throughput_resnet50", "resnet50", ["--channels-last", "--batch-sizes", "128",
                                                                      "--repeats", "3"]),
                               ("throughput_bert_base", "bert_base", ["--seq-len", "128", "--batch-sizes", "128,256",
                                                                      "--repeats", "2"]),
                               ("throughput_resnet50_compiled", "resnet50", ["--channels-last", "--batch-sizes", "128",
                                                                             "--compile", "on", "--repeats", "2"])):
        folder = work / name.replace("_", "-")
        out.append(Step(name, ["throughput", "--model", model, *extra, "--amp", "bf16", "--warmup", "10", "--steps",
                               "20", "--peak-budget", "20", "--no-plots", "--out", str(folder), "-q"],
                        timeout_s=240 if "compiled" in name else 150,
                        collect=lambda step, w, f=folder: throughput_figures(f)))
    out.append(Step("infer", ["infer", str(work / "cifar10"), *data_flags(cifar), "-q"],
                    tiny=["infer", str(work / "cifar10"), *data_flags(cifar), "--device", "cpu", "--warmup", "1",
                          "--throughput-repeats", "1", "-q"],
                    timeout_s=120, ok_codes=(0, 3), needs="cifar10",
                    collect=lambda step, w: infer_figures(w / "cifar10")))
    out.append(Step("digits_compile", ["run", "digits", "--compile", "--out", str(work / "digits-compile"), "-q"],
                    timeout_s=240, collect=from_run("digits-compile")))
    jax_folder = work / "throughput-jax"  # each repeat is a fresh process that compiles again: 2 repeats, 240 s
    out.append(Step("throughput_jax_resnet50", ["throughput", "--model", "resnet50", "--frameworks", "jax",
                                                "--batch-sizes", "128", "--amp", "bf16", "--compile", "on",
                                                "--warmup", "10", "--steps", "20", "--repeats", "2", "--peak-budget",
                                                "20", "--no-plots", "--out", str(jax_folder), "-q"],
                    timeout_s=240, collect=lambda step, w: throughput_figures(jax_folder)))
    # issue 37's checks (STEP_SETS["diagnose"])
    overflow = bench("loss_overflow.py") + ["--out", str(work / "loss-overflow.json")]
    out.append(Step("loss_overflow", overflow, tiny=overflow + ["--device", "cpu"], timeout_s=90, daybreak_cli=False,
                    collect=lambda step, w: overflow_figures(w / "loss-overflow.json")))
    muon_side = bench("airbench_parity.py") + ["--airbench", str(airbench_muon or ""), "--data-dir", str(cifar),
                                               "--side", "airbench", "--record-loss", "--compile", "off", "--out",
                                               str(work / "airbench-muon")]
    out.append(Step("airbench_muon_loss", muon_side, tiny=muon_side + ["--device", "cpu", "--dry-run"],
                    timeout_s=120, daybreak_cli=False, missing=no_muon, before=write_cifar,
                    collect=lambda step, w: parity_figures(w / "airbench-muon")))
    boundary = bench("phase_boundary.py") + ["--out", str(work / "boundary.json")]
    out.append(Step("boundary", boundary, tiny=boundary + ["--device", "cpu", "--boundaries", "20", "--repeats", "2"],
                    timeout_s=90, daybreak_cli=False, collect=lambda step, w: json_figures(w / "boundary.json")))
    for side, flags, missing in (("daybreak", ["--recipe", "cifar10"], None),
                                 ("airbench", ["--airbench", str(airbench or "")], no_airbench)):
        result = work / f"profile-{side}.json"
        argv = bench("step_profile.py") + ["--side", side, *flags, "--data-dir", str(cifar), "--out", str(result)]
        out.append(Step(f"profile_{side}", argv, tiny=argv + ["--device", "cpu", "--skip", "1", "--steps", "2"],
                        timeout_s=120, daybreak_cli=False, missing=missing, before=write_cifar,
                        collect=lambda step, w, f=result: json_figures(f)))
    parity = bench("airbench_parity.py") + ["--airbench", str(airbench or ""), "--data-dir", str(cifar), "--pairs",
                                            "5", "--trial-timeout", "90", "--out", str(work / "parity")]
    out.append(Step("parity", parity, tiny=parity + ["--device", "cpu", "--dry-run"], timeout_s=300,
                    daybreak_cli=False, collect=lambda step, w: parity_figures(w / "parity"), missing=no_airbench,
                    before=write_cifar))
    return out


def _write_mnist(folder: Path, tiny: bool) -> None:
    from daybreak.data.synthetic import write_mnist

    if not folder.exists():  # MNIST's own sizes (a dry run: 300 and 100)
        write_mnist(folder, *((300, 100) if tiny else (60000, 10000)), gzip=tiny)


def _write_cifar(folder: Path, tiny: bool) -> None:
    from daybreak.data.synthetic import write_cifar10

    if not folder.exists():  # CIFAR-10's own sizes, extracted (no gzip to undo on the clock); a dry run: 250 / 50
        write_cifar10(folder, *((50, 50) if tiny else (10000, 10000)), as_tarball=tiny)


# --- running them ------------------------------------------------------------------------------------------------

def parse_only(argv: list[str]) -> str | None:
    """None if daybreak's own parser accepts ``argv`` and every run option in it is a valid value (the check a
    command makes before any work), else its one-line error. Imports only that command's module."""
    import contextlib

    from daybreak.cli import build_parser
    from daybreak.config import RunConfig
    from daybreak.errors import DaybreakError
    from daybreak.options import values_for

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = build_parser(argv).parse_args(argv)
    except SystemExit as e:
        return err.getvalue().strip() or f"exit {e.code}"
    command = getattr(args, "command", None) or ""
    if RunConfig.options_of(command):
        try:
            values_for(RunConfig, args, command)
        except DaybreakError as e:
            return f"daybreak: error: {e}"
    return None


def marked_processes(token: str) -> list[int]:
    """PIDs of live processes whose environment carries this step's marker (Linux /proc)."""
    needle = f"{MARKER}={token}".encode()
    pids = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def stop_all(proc: subprocess.Popen | None, token: str, grace_s: float) -> int:
    """SIGTERM the step's process group and every process carrying its marker, SIGKILL what is left after
    ``grace_s``; the number of processes that had to be stopped."""
    def signal_all(sig: int) -> set[int]:
        hit = set()
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
                hit.add(proc.pid)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in marked_processes(token):
            try:
                os.kill(pid, sig)
                hit.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        return hit

    stopped = signal_all(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and ((proc is not None and proc.poll() is None) or marked_processes(token)):
        time.sleep(0.2)
    stopped |= signal_all(signal.SIGKILL)
    if proc is not None:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    return len(stopped)


class Runner:
    """Runs one step at a time; ``current`` is what a signal to the suite must stop."""

    def __init__(self, work: Path, env: dict[str, str]):
        self.work, self.env = work, env
        self.current: tuple[subprocess.Popen, str] | None = None

    def execute(self, step: Step, argv: list[str], timeout_s: float, token: str) -> dict[str, Any]:
        """Run one command (its processes marked with ``token``); its exit status, time, last lines of output and
        the figures it left."""
        cmd = ([sys.executable, "-m", "daybreak"] + argv) if step.daybreak_cli else argv
        logs = self.work / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        out_path, err_path = logs / f"{step.name}.out", logs / f"{step.name}.err"
        t0 = time.perf_counter()
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=REPO,
                                    env={**self.env, MARKER: token}, start_new_session=True)
            self.current = (proc, token)
            try:
                code: int | None = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                leftovers = stop_all(proc, token, GRACE_S if proc.poll() is None else 2.0)
                self.current = None
        seconds = round(time.perf_counter() - t0, 2)
        res: dict[str, Any] = {"command": shlex.join(cmd), "seconds": seconds}
        if code is None:
            res.update(status="timeout", reason=f"stopped at its {timeout_s:.0f} s limit (SIGTERM, then SIGKILL "
                                                f"after {GRACE_S:.0f} s)")
        else:
            res.update(status="ok" if code in step.ok_codes else "failed", exit_code=code)
        if leftovers and code is not None:
            res["stopped_leftover_processes"] = leftovers
        stdout = out_path.read_text(errors="replace")
        if res["status"] != "ok":
            text = err_path.read_text(errors="replace").strip() or stdout.strip()
            res["error"] = text.splitlines()[-3:]
        try:
            if step.figures_from_stdout is not None and code == 0:
                res["figures"] = step.figures_from_stdout(stdout)
            elif step.collect is not None:
                res["figures"] = step.collect(step, self.work)
        except Exception as e:  # noqa: BLE001 - a step's figures are best effort; the status says what ran
            res["figures_error"] = f"{type(e).__name__}: {e}"[:300]
        return res


def run_step(step: Step, runner: Runner, dry_run: bool, deadline: float, done: dict[str, dict[str, Any]],
             token: str) -> dict[str, Any]:
    if step.missing:
        return {"status": "skipped", "reason": step.missing}
    if step.needs and done.get(step.needs, {}).get("status") != "ok":
        return {"status": "skipped", "reason": f"needs the {step.needs} step, which did not succeed"}
    if step.daybreak_cli:
        problem = parse_only(step.argv)
        if problem:
            return {"status": "failed", "error": [f"the step's arguments do not parse: {problem}"]}
    left = deadline - time.monotonic() - RESERVE_S
    if left < MIN_STEP_S:
        return {"status": "skipped", "reason": "the suite's time budget ran out"}
    if step.before is not None:
        step.before()
    if dry_run:
        if step.tiny is None:
            return {"status": "parsed", "command": shlex.join([sys.executable, "-m", "daybreak", *step.argv]),
                    "reason": "dry run: arguments parsed by daybreak's parser; too slow to run on a CPU"}
        return runner.execute(step, step.tiny, min(step.tiny_timeout_s, left), token)
    return runner.execute(step, step.argv, min(step.timeout_s, deadline - time.monotonic() - RESERVE_S), token)


def probe_env(env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", ENV_PROBE], capture_output=True, text=True, timeout=180, cwd=REPO,
                          env=env)
    if proc.returncode != 0:
        raise SuiteError("the environment probe failed: "
                         + ((proc.stderr or proc.stdout).strip().splitlines() or ["(no output)"])[-1])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def torch_too_old(version: str) -> bool:
    numbers = tuple(int(x) for x in re.findall(r"\d+", version.split("+")[0])[:2])
    return numbers < OLDEST_TORCH


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-")[:60] or "unknown"


# --- the summary -------------------------------------------------------------------------------------------------

class Summary:
    """The suite's JSON + Markdown summary and its records archive, each rewritten atomically on every change."""

    def __init__(self, results: Path, data: dict[str, Any]):
        self.results, self.data = results, data
        self.name: str | None = None

    def named(self, env: dict[str, Any], dry_run: bool) -> None:
        self.name = f"{slug(env.get('gpu') or 'cpu')}-{self.data['date']}" + ("-dry-run" if dry_run else "")

    def write(self) -> None:
        if self.name is None:
            self.named({}, self.data.get("dry_run", False))
        self.data["seconds"] = round(time.monotonic() - self.data["_t0"], 2)
        public = {k: v for k, v in self.data.items() if not k.startswith("_")}
        self.results.mkdir(parents=True, exist_ok=True)
        _atomic(self.results / f"{self.name}.json", (json.dumps(public, indent=2, default=str) + "\n").encode())
        _atomic(self.results / f"{self.name}.md", markdown(public).encode())

    def archive(self, work: Path) -> None:
        """The small record files of every step so far (no checkpoints, no data)."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for path in sorted(work.rglob("*")):
                rel = path.relative_to(work)
                if (path.is_file() and not path.is_symlink() and path.suffix in RECORD_SUFFIXES
                        and not rel.parts[0].startswith("data-") and rel.parts[0] != "cache"
                        and path.stat().st_size <= RECORD_MAX_BYTES):
                    tar.add(path, arcname=str(rel))
        _atomic(self.results / f"{self.name}-records.tar.gz", buf.getvalue())


def _atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def markdown(summary: dict[str, Any]) -> str:
    env = summary.get("env") or {}
    lines = [f"# GPU suite: {env.get('gpu', 'no GPU')} ({summary['date']})", "",
             f"torch {env.get('torch')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, "
             f"{env.get('compute_capability') or '-'}, native bf16 {env.get('native_bf16', '-')}, "
             f"NVML: {env.get('nvml')}; Python {env.get('python')}"
             + ("; DRY RUN on the CPU" if summary["dry_run"] else ""), "",
             f"Installed from .gpu: {summary.get('installed') or '-'}", ""]
    if summary.get("running"):
        lines += [f"**Running when this was written: {summary['running']}** (a cut-off here leaves it unfinished)",
                  ""]
    lines += ["| step | status | seconds | key figures |", "|---|---|---|---|"]
    for name, res in summary["steps"].items():
        lines.append(f"| {name} | {res.get('status')} | {res.get('seconds', '-')} | {_key_figures(res)} |")
    lines += ["", f"Total {summary['seconds']:.0f} s of a {summary['budget_s']:.0f} s budget. Every step's command "
                  "and figures are in the JSON file beside this one; its record files in the -records.tar.gz."]
    for name, res in summary["steps"].items():
        for line in res.get("error", []):
            lines.append(f"- {name}: {line}")
        if res.get("reason"):
            lines.append(f"- {name}: {res['reason']}")
    return "\n".join(lines) + "\n"


def _key_figures(res: dict[str, Any]) -> str:
    f = res.get("figures") or {}
    parts = []
    if "time_to_target_s" in f:
        t = f["time_to_target_s"]
        parts.append(", ".join(f"{k} {v:.2f} s" for k, v in t.items() if v is not None) or f"status {f['status']}")
        parts.append(f"amp {f['amp']}, warm-up {f['phases_s']['warmup']:.1f} s")
        if f.get("epoch_train_s"):
            e = f["epoch_train_s"]
            parts.append(f"{len(e)} epochs, train s/epoch first {e[0]:.3f}, median {sorted(e)[len(e) // 2]:.3f}")
        if f.get("recompiles_under_clock") is not None:
            parts.append(f"{f['recompiles_under_clock']} recompilations")
        if f.get("joules_to_target"):
            parts.append(", ".join(f"{k} {v:.0f} J" for k, v in f["joules_to_target"].items() if v is not None))
        if f.get("non_finite_loss"):
            parts.append(f"non-finite loss: {f['non_finite_loss'][0]}" + (f" (+{len(f['non_finite_loss']) - 1})"
                                                                          if len(f["non_finite_loss"]) > 1 else ""))
    for row in f.get("loss_rows", []):
        parts.append(f"gap {row['gap']:.2f}: fp16 sum {row['fp16_sum']:.6g}, float32 {row['float32']:.6g}, "
                     f"cifar10_muon {row['cifar10_muon_loss_fn']:.6g}, fp16 gradient "
                     f"{'finite' if row['fp16_gradient_finite'] else 'NON-FINITE'}")
    if "extra_ms" in f:
        parts.append(f"one boundary {f['daybreak_ms']:.4f} ms vs bare {f['bare_ms']:.4f} ms (+{f['extra_ms']:.4f} ms; "
                     f"claim {f['claim_ms']} ms), {f['inside_train_interval_ms']:.4f} ms inside the train interval")
    if "kernel_launches_per_step" in f:
        ms = lambda v: "-" if v is None else f"{v:.3f} ms"  # noqa: E731
        busy = "-" if f.get("device_busy") is None else f"{f['device_busy']:.0%}"
        parts.append(f"per step: wall {ms(f['wall_ms_per_step'])}, device {ms(f['device_ms_per_step'])} (busy "
                     f"{busy}), {f['kernel_launches_per_step']:g} launches, {f['host_syncs_per_step_total']:g} "
                     "host syncs")
    if f.get("side") == "airbench" and f.get("loss"):
        loss = f["loss"]
        parts.append(f"{f.get('script_kind')}: {len(f.get('epoch_s') or [])} epochs, {f.get('total_s') or 0:.3f} s; "
                     f"its own {loss.get('dtype')} loss non-finite at {loss.get('non_finite_steps')} of "
                     f"{loss.get('steps')} steps, float32 at {loss.get('float32_non_finite_steps')}")
    if "mlperf_within_bound" in f:
        parts.append(f"MLPerf clock within the bound: {f['mlperf_within_bound']}")
    if "flops_per_s" in f:
        from daybreak.measure.flops import format_flops

        parts.append(", ".join(f"{k} {format_flops(v, 'FLOP/s')}" for k, v in f["flops_per_s"].items()))
        parts += [f"{k} {v:.0%} of the datasheet" for k, v in f.get("measured_of_datasheet", {}).items()]
    for row in f.get("rows", []):
        mfu = f", MFU {row['mfu']:.1%} of {row['mfu_precision']}" if row.get("mfu") is not None else ""
        parts.append(f"batch {row['batch_size']}: {row['samples_per_s'] or 0:.0f} samples/s{mfu}")
    if "p50_ms" in f:
        parts.append(f"p50 {f['p50_ms']:.3f} ms, p90 {f['p90_ms']:.3f} ms, p99 {f['p99_ms']:.3f} ms")
    if f.get("ratio_words"):
        parts.append(f"{f.get('script_kind')} vs {f.get('recipe')}: {f['ratio_words']} (goal {f['goal_ratio']}x)")
    elif f.get("ratio_total") is not None:
        parts.append(f"{f.get('script_kind')} vs {f.get('recipe')}: daybreak / airbench {f['ratio_total']:.3f}x "
                     f"({f.get('mode') or 'in-process'}; goal {f['goal_ratio']}x)")
    return "; ".join(parts).replace("|", "/") or "-"


# --- the whole suite -----------------------------------------------------------------------------------------------

def install_wheels(wheels: Path, target: Path) -> str:
    """The offline set-up: .gpu's wheels this Python lacks, into ``target`` (put on PYTHONPATH by the caller)."""
    try:
        done = gpu_wheels.install(wheels, target)
    except gpu_wheels.WheelError as e:
        raise SuiteError(str(e)) from None
    return ", ".join(f"{d.name} {d.version} ({d.action})" for d in done)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bash benchmarks/gpu_suite.sh", description=__doc__.split("\n\n")[0],
                                epilog="Exit status: 0 every step ok or skipped, 1 a step failed or timed out, 2 a "
                                       "usage error or a machine the suite cannot use (one line), 130 stopped.")
    p.add_argument("--offline", action="store_true", help="no network: the machine's python3 and torch, .gpu's "
                                                          "wheels installed into a temporary folder")
    p.add_argument("--wheels", type=Path, default=REPO / ".gpu", help="the prepared wheels (default .gpu)")
    p.add_argument("--dry-run", action="store_true", help="resolve every step on the CPU (parse / tiny runs)")
    p.add_argument("--airbench", type=Path, help="your copy of airbench's legacy/airbench94.py, for the parity and "
                                                  "profile_airbench steps (never vendored)")
    p.add_argument("--airbench-muon", type=Path, help="your copy of airbench94_muon.py, for the airbench_muon_loss "
                                                       "step (never vendored)")
    p.add_argument("--results", type=Path, default=REPO / "benchmarks" / "results", help="where the summary goes")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S,
                   help=f"seconds for everything, set-up included (default {DEFAULT_BUDGET_S:.0f})")
    p.add_argument("--steps", help="only these steps or step sets, comma-separated, in that order (default: all; "
                                   f"sets: {', '.join(f'{k} = {chr(44).join(v)}' for k, v in STEP_SETS.items())})")
    p.add_argument("--keep", type=Path, help="keep the run folders here (default: a temporary folder)")
    args = p.parse_args(argv)
    if args.budget <= RESERVE_S + MIN_STEP_S:
        p.error(f"--budget {args.budget:g}: at least {RESERVE_S + MIN_STEP_S:.0f} seconds")
    return args


def main(argv: list[str] | None = None) -> int:
    t0 = time.monotonic()
    args = parse_args(argv)
    deadline = t0 + args.budget
    summary = Summary(args.results, {"_t0": t0, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
                                     "dry_run": args.dry_run, "offline": args.offline, "budget_s": args.budget,
                                     "env": {}, "installed": None, "running": None, "steps": {}})
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        with tempfile.TemporaryDirectory(prefix="daybreak-gpu-suite-") as tmp:
            return _suite(args, summary, Path(tmp), deadline)
    except SuiteError as e:
        print(f"gpu_suite: error: {e}", file=sys.stderr)
        summary.data["error"] = str(e)
        summary.write()
        return 2
    except KeyboardInterrupt:  # before the steps (installing, probing): nothing ran yet
        summary.data["error"] = "stopped (SIGTERM or Ctrl-C) before the first step"
        summary.write()
        print("gpu_suite: interrupted", file=sys.stderr)
        return 130
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def chosen(all_steps: list[Step], text: str) -> list[Step]:
    """``--steps a,b`` (names or step sets, e.g. ``diagnose``): those steps in the order given, each once."""
    by_name = {s.name: s for s in all_steps}
    wanted: list[str] = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        wanted += STEP_SETS.get(item, (item,))
    unknown = sorted(set(wanted) - set(by_name))
    if unknown:
        raise SuiteError(f"--steps: no step or step set named {', '.join(unknown)} (the steps: "
                         f"{', '.join(by_name)}; the sets: {', '.join(STEP_SETS)})")
    return [by_name[n] for n in dict.fromkeys(wanted)]


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _suite(args: argparse.Namespace, summary: Summary, tmp: Path, deadline: float) -> int:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    paths = [str(REPO)]
    if args.offline:
        site = tmp / "site"
        summary.data["installed"] = install_wheels(args.wheels, site)
        paths.append(str(site))
        sys.path[:0] = paths  # this process reads the records with daybreak too
    env["PYTHONPATH"] = os.pathsep.join(paths + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    env["PYTHONUNBUFFERED"] = "1"
    work = args.keep or tmp / "work"
    work.mkdir(parents=True, exist_ok=True)
    if args.dry_run:  # the dry run's peak goes to a cache of its own, not this machine's
        env["DAYBREAK_CACHE"] = str(work / "cache")
    info = probe_env(env)
    summary.data["env"] = info
    summary.named(info, args.dry_run)
    if torch_too_old(info["torch"]):
        raise SuiteError(f"torch {info['torch']} is older than {'.'.join(map(str, OLDEST_TORCH))}, the oldest "
                         "daybreak supports (pyproject.toml)")
    if not args.dry_run and not info.get("cuda_available"):
        raise SuiteError("no CUDA GPU is visible (use --dry-run to check the suite on a CPU)")
    all_steps = steps(work, args.airbench, args.dry_run, airbench_muon=args.airbench_muon)
    if args.steps:
        all_steps = chosen(all_steps, args.steps)
    summary.write()
    runner = Runner(work, env)
    results: dict[str, dict[str, Any]] = summary.data["steps"]
    try:
        for step in all_steps:
            print(f"gpu_suite: {step.name} ...", file=sys.stderr, flush=True)
            token = uuid.uuid4().hex
            summary.data["running"] = step.name
            results[step.name] = {"status": "running", "started_s": round(time.monotonic() - summary.data["_t0"], 2),
                                  "marker": f"{MARKER}={token}"}  # in the environment of all its processes
            summary.write()
            results[step.name] = run_step(step, runner, args.dry_run, deadline, results, token)
            summary.data["running"] = None
            if results.get("digits", {}).get("figures") and results.get("digits_compile", {}).get("figures"):
                results["digits_compile"]["figures"].update(compile_verdict(results["digits"]["figures"],
                                                                            results["digits_compile"]["figures"]))
            summary.write()
            summary.archive(work)
            print(f"gpu_suite: {step.name}: {results[step.name]['status']}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        name = summary.data["running"]
        if runner.current is not None:
            stop_all(runner.current[0], runner.current[1], 5.0)
        if name:
            results[name] = {**results.get(name, {}), "status": "interrupted",
                             "reason": "the suite was stopped (SIGTERM or Ctrl-C) during this step"}
        summary.data["running"] = None
        summary.write()
        summary.archive(work)
        print("gpu_suite: interrupted", file=sys.stderr)
        return 130
    print(f"gpu_suite: wrote {args.results / summary.name}.json, .md and -records.tar.gz")
    failed = [n for n, r in results.items() if r["status"] in ("failed", "timeout")]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
