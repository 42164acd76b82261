"""The GPU suite: what a freshly lent GPU machine runs, in at most 10 minutes, without a network.

Run it with ``bash benchmarks/gpu_suite.sh`` (that first brings .venv up with the README's own set-up, then calls
this). Steps, each a daybreak command in its own process with its own time limit, each recorded even when it fails:

    env                 torch, CUDA, the GPU, its compute capability, native bf16, NVML
    digits              daybreak run digits (both clocks, NVML energy where nvidia-ml-py is installed)
    digits_compile      daybreak run digits --compile: 0 recompilations under the clock, compile outside
                        MLPerf's clock (within max(3x eager, eager + 2 s)), inside DAWNBench's
    mnist, cifar10      runs on synthetic data in the real file formats (daybreak.data.synthetic)
    cifar10_muon        the Muon recipe on the same synthetic CIFAR files
    peak                daybreak peak: fp32, tf32, bf16, fp16 ceilings and copy bandwidth, beside the datasheet's
    throughput_resnet50 daybreak throughput, bf16, MFU against the datasheet
    throughput_bert     the same for bert_base
    throughput_jax_resnet50  resnet50 in JAX/Flax (XLA, bf16) through `daybreak throughput --frameworks jax`
    infer               daybreak infer on the cifar10 run: batch-1 latency and batched throughput
    parity              benchmarks/airbench_parity.py on the synthetic CIFAR files (needs --airbench PATH)

It writes ``<results>/<gpu>-<date>.json`` and ``.md`` (``--results``, default benchmarks/results). ``--dry-run``
resolves every step on the CPU: each command's exact GPU arguments are parsed by daybreak's own parser, and the
cheap ones run at a tiny size (the tests run it). Options: ``--airbench PATH`` (an airbench script you have; never
vendored), ``--budget SECONDS`` (default 540: the 10 minutes less the set-up), ``--keep DIR`` (keep the run
folders; default a temporary folder).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
ENV = dict(os.environ)  # what every step's process gets
DEFAULT_BUDGET_S = 540.0  # 10 minutes less about one for the set-up (bootstrap) and the summary
DAYBREAK = [sys.executable, "-m", "daybreak"]
ENV_PROBE = """
import json, torch
out = {"torch": torch.__version__, "cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available()}
if torch.cuda.is_available():
    from daybreak.measure.device import native_bf16, sm_name
    d = torch.device("cuda")
    out.update(gpu=torch.cuda.get_device_name(d), compute_capability=sm_name(d), native_bf16=native_bf16(d),
               memory_gib=round(torch.cuda.get_device_properties(d).total_memory / 2**30, 1))
try:
    import pynvml  # nvidia-ml-py: GPU energy
    out["nvml"] = "nvidia-ml-py installed"
except ImportError:
    out["nvml"] = "nvidia-ml-py not installed: GPU energy unavailable (pip install -e '.[energy]')"
print(json.dumps(out))
"""


@dataclass
class Step:
    """One command of the suite: ``argv`` on the GPU; ``tiny`` (or nothing: parse only) for --dry-run."""

    name: str
    argv: list[str]
    tiny: list[str] | None = None
    timeout_s: float = 120.0
    ok_codes: tuple[int, ...] = (0,)
    collect: Callable[["Step", Path], dict[str, Any]] | None = None
    daybreak_cli: bool = True  # argv is a `daybreak` command (parsed by its parser in --dry-run)
    before: Callable[[], None] | None = None  # e.g. write the synthetic data
    result: dict[str, Any] = field(default_factory=dict)


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
        "recompiles_under_clock": r.recompiles_under_clock, "host_sync": p.host_sync,
        "time_to_target_s": {k: c.time_to_target_s for k, c in r.clocks.items()},
        "clock_s": {k: c.clock_s for k, c in r.clocks.items()},
        "phases_s": {k: phase(k) for k in ("model_init", "warmup", "data_load", "train", "eval", "record")},
        "best_accuracy": r.best_accuracy, "energy_available": r.energy.available,
        "joules_to_target": r.energy.joules_to_target, "energy_unavailable": r.energy.unavailable,
        "warnings": r.warnings,
    }


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
             "mfu_precision": r.mfu_precision, "datasheet_gpu": r.datasheet_gpu, "utilization": r.utilization}
            for r in load_results(folder / "results.jsonl")]
    return {"rows": rows}


def infer_figures(folder: Path) -> dict[str, Any]:
    from daybreak.records.inference import INFERENCE_FILE, InferenceResult

    r = InferenceResult.model_validate_json((folder / INFERENCE_FILE).read_text())
    t = r.throughput
    return {"p50_ms": r.latency.p50_ms, "p99_ms": r.latency.p99_ms, "mean_ms": r.latency.mean_ms,
            "examples_per_s": t.examples_per_s if t else None, "accuracy": r.accuracy, "valid": r.valid}


# --- the steps ---------------------------------------------------------------------------------------------------

def steps(work: Path, airbench: Path | None, dry_run: bool = False) -> list[Step]:
    """Every step, GPU arguments and tiny CPU arguments; run folders under ``work``. The synthetic data is tiny
    for a dry run (its runs only have to run)."""
    mnist, cifar = work / "data-mnist", work / "data-cifar"
    from_run = lambda name: (lambda step, w: run_figures(w / name))  # noqa: E731
    data_flags = lambda folder: ["--data-dir", str(folder), "--allow-custom-data", "--no-download"]  # noqa: E731
    out = []
    out.append(Step("digits", ["run", "digits", "--out", str(work / "digits"), "-q"],
                    tiny=["run", "digits", "--device", "cpu", "--set", "epochs=1", "--full-schedule", "--target",
                          "0.5", "--out", str(work / "digits"), "-q"], ok_codes=(0, 3), collect=from_run("digits")))
    out.append(Step("digits_compile", ["run", "digits", "--compile", "--out", str(work / "digits-compile"), "-q"],
                    timeout_s=240, collect=from_run("digits-compile")))
    out.append(Step("mnist", ["run", "mnist", *data_flags(mnist), "--target", "0.9", "--set", "epochs=3",
                              "--out", str(work / "mnist"), "-q"],
                    tiny=["run", "mnist", *data_flags(mnist), "--device", "cpu", "--target", "0.2", "--set",
                          "epochs=1", "--out", str(work / "mnist"), "-q"],
                    ok_codes=(0, 3), collect=from_run("mnist"), before=lambda: _write_mnist(mnist, dry_run)))
    out.append(Step("cifar10", ["run", "cifar10", *data_flags(cifar), "--target", "0.9", "--out",
                                str(work / "cifar10"), "-q"],
                    tiny=["run", "cifar10", *data_flags(cifar), "--device", "cpu", "--target", "0.05", "--set",
                          "epochs=1", "--set", "batch_size=50", "--out", str(work / "cifar10"), "-q"],  # 5%: a
                    # checkpoint for the infer step whatever one epoch learns
                    ok_codes=(0, 3), timeout_s=180, collect=from_run("cifar10"),
                    before=lambda: _write_cifar(cifar, dry_run)))
    out.append(Step("cifar10_muon", ["run", "cifar10", "--recipe", "cifar10_muon", *data_flags(cifar), "--target",
                                     "0.9", "--out", str(work / "cifar10-muon"), "-q"],
                    ok_codes=(0, 3), timeout_s=180, collect=from_run("cifar10-muon")))
    out.append(Step("peak", ["peak", "--budget", "30", "--force", "--json"],
                    tiny=["peak", "--device", "cpu", "--budget", "1", "--precisions", "fp32,tf32", "--size", "128",
                          "--repeats", "1", "--json"], timeout_s=120, collect=None))
    for model, extra in (("resnet50", ["--channels-last", "--batch-sizes", "128"]),
                         ("bert_base", ["--seq-len", "128", "--batch-sizes", "32"])):
        folder = work / f"throughput-{model}"
        out.append(Step(f"throughput_{model}", ["throughput", "--model", model, *extra, "--amp", "bf16", "--warmup",
                                                "10", "--steps", "20", "--repeats", "3", "--peak-budget", "20",
                                                "--no-plots", "--out", str(folder), "-q"],
                        timeout_s=150, collect=lambda step, w, f=folder: throughput_figures(f)))
    out.append(jax_throughput_step(work))
    out.append(Step("infer", ["infer", str(work / "cifar10"), *data_flags(cifar), "-q"],
                    tiny=["infer", str(work / "cifar10"), *data_flags(cifar), "--device", "cpu", "--warmup", "1",
                          "--throughput-repeats", "1", "-q"],
                    ok_codes=(0, 3), collect=lambda step, w: infer_figures(w / "cifar10")))
    parity = [sys.executable, str(REPO / "benchmarks" / "airbench_parity.py"), "--airbench", str(airbench or ""),
              "--data-dir", str(cifar), "--repeats", "2", "--out", str(work / "parity")]
    out.append(Step("parity", parity, tiny=parity + ["--device", "cpu", "--dry-run"], timeout_s=240,
                    daybreak_cli=False, collect=lambda step, w: _parity_figures(w / "parity")))
    return out


def jax_throughput_step(work: Path) -> Step:
    """ResNet-50 in JAX/Flax (XLA, bf16) through `daybreak throughput --frameworks jax` (issue 30): the GPU image has
    jax, flax and optax. Each repeat is a fresh process that compiles again, hence 2 repeats and 240 s."""
    folder = work / "throughput-jax"
    return Step("throughput_jax_resnet50", ["throughput", "--model", "resnet50", "--frameworks", "jax",
                                            "--batch-sizes", "128", "--amp", "bf16", "--compile", "on", "--warmup",
                                            "10", "--steps", "20", "--repeats", "2", "--peak-budget", "20",
                                            "--no-plots", "--out", str(folder), "-q"],
                timeout_s=240, collect=lambda step, w: throughput_figures(folder))


def _write_mnist(folder: Path, tiny: bool) -> None:
    from daybreak.data.synthetic import write_mnist

    if not folder.exists():
        write_mnist(folder, *((300, 100) if tiny else (6000, 1000)))


def _write_cifar(folder: Path, tiny: bool) -> None:
    from daybreak.data.synthetic import write_cifar10

    if not folder.exists():  # 10,000 training and 2,000 test images (a dry run: 250 and 50)
        write_cifar10(folder, *((50, 50) if tiny else (2000, 2000)), as_tarball=True)


def _parity_figures(folder: Path) -> dict[str, Any]:
    path = folder / "parity.json"
    if not path.exists():
        return {}
    s = json.loads(path.read_text())
    return {"ratio_total": s.get("ratio_total"), "goal_ratio": s.get("goal_ratio"), "epochs": s.get("epochs")}


# --- running them ------------------------------------------------------------------------------------------------

def parse_only(argv: list[str]) -> str | None:
    """None if daybreak's own parser accepts ``argv`` and every run option in it is a valid value (the check a
    command makes before any work), else its one-line error."""
    import contextlib
    import io

    from daybreak.cli import build_parser
    from daybreak.config import RunConfig
    from daybreak.errors import DaybreakError
    from daybreak.options import values_for

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = build_parser().parse_args(argv)
    except SystemExit as e:
        return err.getvalue().strip() or f"exit {e.code}"
    command = getattr(args, "command", None) or ""
    if RunConfig.options_of(command):
        try:
            values_for(RunConfig, args, command)
        except DaybreakError as e:
            return f"daybreak: error: {e}"
    return None


def execute(step: Step, argv: list[str], timeout_s: float, work: Path) -> dict[str, Any]:
    """Run one command; its exit status, time, last lines of output and the figures it left."""
    cmd = (DAYBREAK + argv) if step.daybreak_cli else argv
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=REPO, env=ENV)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "seconds": round(time.perf_counter() - t0, 2), "command": shlex.join(cmd)}
    res: dict[str, Any] = {"status": "ok" if proc.returncode in step.ok_codes else "failed",
                           "exit_code": proc.returncode, "seconds": round(time.perf_counter() - t0, 2),
                           "command": shlex.join(cmd)}
    if res["status"] == "failed":
        res["error"] = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    try:
        if step.name == "peak" and proc.returncode == 0:
            res["figures"] = peak_figures(proc.stdout)
        elif step.collect is not None:
            res["figures"] = step.collect(step, work)
    except Exception as e:  # noqa: BLE001 - a step's figures are best effort; the status says what ran
        res["figures_error"] = f"{type(e).__name__}: {e}"[:300]
    return res


def run_step(step: Step, work: Path, dry_run: bool, deadline: float, airbench: Path | None) -> dict[str, Any]:
    if step.name == "parity" and airbench is None:
        return {"status": "skipped", "reason": "no --airbench script given (daybreak never ships airbench)"}
    if step.daybreak_cli:
        problem = parse_only(step.argv)
        if problem:
            return {"status": "failed", "error": [f"the step's arguments do not parse: {problem}"]}
    if step.before is not None:
        step.before()
    if dry_run:
        if step.tiny is None:
            return {"status": "parsed", "command": shlex.join(DAYBREAK + step.argv),
                    "reason": "dry run: arguments parsed by daybreak's parser; too slow to run on a CPU"}
        return execute(step, step.tiny, 600.0, work)
    left = deadline - time.monotonic()
    if left < 10:
        return {"status": "skipped", "reason": "the suite's time budget ran out"}
    return execute(step, step.argv, min(step.timeout_s, left), work)


def probe_env() -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", ENV_PROBE], capture_output=True, text=True, timeout=120, cwd=REPO)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-")[:60] or "unknown"


# --- the summary -------------------------------------------------------------------------------------------------

def markdown(summary: dict[str, Any]) -> str:
    env = summary["env"]
    lines = [f"# GPU suite: {env.get('gpu', 'no GPU')} ({summary['date']})", "",
             f"torch {env.get('torch')}, CUDA {env.get('cuda')}, {env.get('compute_capability') or '-'}, native bf16 "
             f"{env.get('native_bf16', '-')}, NVML: {env.get('nvml')}" + ("; DRY RUN on the CPU" if summary["dry_run"]
                                                                           else ""), "",
             "| step | status | seconds | key figures |", "|---|---|---|---|"]
    for name, res in summary["steps"].items():
        lines.append(f"| {name} | {res.get('status')} | {res.get('seconds', '-')} | {_key_figures(res)} |")
    lines += ["", f"Total {summary['seconds']:.0f} s. Every step's command and figures are in the JSON file beside "
                  "this one."]
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
        if f.get("recompiles_under_clock") is not None:
            parts.append(f"{f['recompiles_under_clock']} recompilations")
        if f.get("joules_to_target"):
            parts.append(", ".join(f"{k} {v:.0f} J" for k, v in f["joules_to_target"].items() if v is not None))
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
        parts.append(f"p50 {f['p50_ms']:.3f} ms, p99 {f['p99_ms']:.3f} ms")
    if f.get("ratio_total") is not None:
        parts.append(f"daybreak / airbench {f['ratio_total']:.3f}x (goal {f['goal_ratio']}x)")
    return "; ".join(parts).replace("|", "/") or "-"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bash benchmarks/gpu_suite.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("--dry-run", action="store_true", help="resolve every step on the CPU (parse / tiny runs)")
    p.add_argument("--airbench", type=Path, help="your airbench script, for the parity step (never vendored)")
    p.add_argument("--results", type=Path, default=REPO / "benchmarks" / "results", help="where the summary goes")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds for all steps (default 540)")
    p.add_argument("--keep", type=Path, help="keep the run folders here (default: a temporary folder)")
    args = p.parse_args(argv)
    started, deadline = time.perf_counter(), time.monotonic() + args.budget
    env = probe_env()
    if not args.dry_run and not env.get("cuda_available"):
        print("gpu_suite: error: no CUDA GPU is visible (use --dry-run to check the suite on a CPU)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="daybreak-gpu-suite-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        results = {}
        if args.dry_run:  # the dry run's peak goes to a cache of its own, not this machine's
            ENV["DAYBREAK_CACHE"] = str(work / "cache")
        for step in steps(work, args.airbench, args.dry_run):
            print(f"gpu_suite: {step.name} ...", file=sys.stderr, flush=True)
            results[step.name] = run_step(step, work, args.dry_run, deadline, args.airbench)
            print(f"gpu_suite: {step.name}: {results[step.name]['status']}", file=sys.stderr, flush=True)
        if "digits" in results and "digits_compile" in results:
            results["digits_compile"].setdefault("figures", {}).update(compile_verdict(
                results["digits"].get("figures", {}), results["digits_compile"].get("figures", {})))
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    summary = {"date": date, "dry_run": args.dry_run, "env": env, "steps": results,
               "seconds": time.perf_counter() - started, "budget_s": args.budget}
    name = f"{slug(env.get('gpu', 'cpu'))}-{date}" + ("-dry-run" if args.dry_run else "")
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"{name}.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (args.results / f"{name}.md").write_text(markdown(summary))
    print(f"gpu_suite: wrote {args.results / name}.json and .md")
    failed = [n for n, r in results.items() if r["status"] in ("failed", "timeout")]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
