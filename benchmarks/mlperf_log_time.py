"""Wall time of `daybreak time --log FILE --rules mlperf` on one MLPerf log, a fresh process per run, against the
same command with torch imported first (what every text command paid before it stopped importing torch).

Each pair runs both sides one right after the other, in fresh interpreters started the same way, the order
alternating from pair to pair; each is timed with perf_counter around subprocess.run (interpreter start-up,
imports, parsing and analysing the log, writing the run directory) and its CPU time read from getrusage of the
children. Both sides run with Python's bytecode cache on, as an installed package has it (PYTHONDONTWRITEBYTECODE
is dropped from their environment: the warm-up writes daybreak's, in its source tree's ignored __pycache__). The ratio (daybreak / with torch) is daybreak.analysis.paired's geometric mean of the per-pair ratios with
its Student-t interval. The claim it checks: at most 0.3 s wall for a 10 KB log on a quiet 2-core machine (the
script says whether the median met it, and whether the machine was quiet: a 1-minute load average under 0.5 before
it started, and other processes -- not its own children, which raise the load average themselves -- taking at most
10% of the CPUs while it ran, as daybreak.sweep.load counts them). The log: --log FILE, else a 10 KB closed-division R-GAT log written here in the published
format (training_results_v5.0/<submitter>/results/<system>/rgat/result_0.txt), never a published one.

    python benchmarks/mlperf_log_time.py [--pairs 15] [--log FILE] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLAIM_S = 0.3
DAYBREAK = "import sys\nfrom daybreak.cli import main\nsys.exit(main(sys.argv[1:]))"
WITH_TORCH = "import sys\nimport torch\nfrom daybreak.cli import main\nsys.exit(main(sys.argv[1:]))"
T0 = 1_745_000_000_000  # 2025-04-18 in epoch milliseconds


def _record(key: str, value: object, time_ms: int, event_type: str = "POINT_IN_TIME", **metadata: object) -> str:
    return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": time_ms, "event_type": event_type, "key": key,
                                     "value": value, "metadata": {"file": "train.py", "lineno": 1, **metadata}})


def rgat_log(size_bytes: int = 10_000) -> str:
    """A closed-division R-GAT log of about ``size_bytes``: header, hyperparameters, init, run_start, epochs with
    an evaluation each (the last at the target, 0.72), run_stop."""
    lines = [_record("cache_clear", True, T0), _record("init_start", None, T0, "INTERVAL_START")]
    lines += [_record(k, v, T0 + 1) for k, v in (
        ("submission_benchmark", "rgat"), ("submission_org", "Acme"), ("submission_division", "closed"),
        ("submission_status", "onprem"), ("submission_platform", "1xAcme-8x"), ("seed", 1234),
        ("global_batch_size", 16384), ("opt_name", "adam"), ("opt_base_learning_rate", 0.001),
        ("gradient_accumulation_steps", 1), ("train_samples", 157675969), ("eval_samples", 788379))]
    start = T0 + 60_000
    lines += [_record("init_stop", None, start - 1, "INTERVAL_END"), _record("run_start", None, start, "INTERVAL_START")]
    epochs = []
    epoch = 1
    while sum(len(x) + 1 for x in lines + epochs) < size_bytes - 1_200:
        t = start + 60_000 * epoch
        epochs += [_record("epoch_start", None, t - 60_000, "INTERVAL_START", epoch_num=epoch),
                   _record("epoch_stop", None, t - 2_000, "INTERVAL_END", epoch_num=epoch),
                   _record("eval_start", None, t - 2_000, "INTERVAL_START", epoch_num=epoch),
                   _record("eval_accuracy", 0.70 + epoch * 1e-4, t, epoch_num=epoch),
                   _record("eval_stop", None, t, "INTERVAL_END", epoch_num=epoch)]
        epoch += 1
    t = start + 60_000 * epoch
    epochs += [_record("eval_accuracy", 0.7214, t, epoch_num=epoch),
               _record("run_stop", None, t + 500, "INTERVAL_END", status="success")]
    return "\n".join(lines + epochs) + "\n"


def timed(code: str, argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit status) of one fresh interpreter running ``code`` with ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          env=env, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 3):
        raise SystemExit(f"the command failed ({proc.returncode}): {proc.stderr.decode(errors='replace')[-500:]}")
    return wall, cpu, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--log", type=Path, help="an MLPerf log (default: a 10 KB R-GAT log written here)")
    ap.add_argument("--threads", type=int, default=1, help="OMP/MKL threads of both sides (default 1)")
    args = ap.parse_args()
    from daybreak.analysis.paired import paired_ratio
    from daybreak.sweep.load import LoadMeter

    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package's modules are read from their bytecode
    meter = LoadMeter().start()  # the timed processes are our children: only other processes count as load
    with tempfile.TemporaryDirectory(prefix="daybreak-log-time-") as tmp:
        log = args.log
        if log is None:
            log = Path(tmp) / "training_results_v5.0" / "Acme" / "results" / "acme_1x8" / "rgat" / "result_0.txt"
            log.parent.mkdir(parents=True)
            log.write_text(rgat_log())
        out = Path(tmp) / "out"

        def argv() -> list[str]:
            shutil.rmtree(out, ignore_errors=True)
            return ["time", "--rules", "mlperf", "--log", str(log), "--out", str(out), "-q"]

        timed(DAYBREAK, argv(), env), timed(WITH_TORCH, argv(), env)  # warm the file cache
        light: list[tuple[float, float]] = []
        heavy: list[tuple[float, float]] = []
        status = None
        for i in range(args.pairs):
            for side in ((DAYBREAK, light), (WITH_TORCH, heavy))[:: 1 if i % 2 == 0 else -1]:
                wall, cpu, status = timed(side[0], argv(), env)
                side[1].append((wall, cpu))
        size = log.stat().st_size
    context = meter.stop()
    ratio = paired_ratio([w for w, _ in heavy], [w for w, _ in light], confidence=0.95, quantity="wall_s")
    med = statistics.median(w for w, _ in light)
    print(f"`daybreak time --rules mlperf --log` on a {size / 1000:.1f} KB log ({'reached' if status == 0 else 'not reached'}), "
          f"{args.pairs} interleaved pairs of fresh processes, {args.threads} thread(s), {os.cpu_count()} CPUs")
    print(f"  daybreak (no torch)   wall median {med:.3f} s ({min(w for w, _ in light):.3f}..{max(w for w, _ in light):.3f}),"
          f" CPU median {statistics.median(c for _, c in light):.3f} s")
    print(f"  with torch imported   wall median {statistics.median(w for w, _ in heavy):.3f} s, CPU median "
          f"{statistics.median(c for _, c in heavy):.3f} s")
    lo, hi = ratio.ci_low, ratio.ci_high
    print(f"  ratio daybreak / with torch: {ratio.ratio:.3f} (95% CI {lo:.3f}..{hi:.3f})")
    before = context.load_avg_before[0] if context.load_avg_before else float("nan")
    after = context.load_avg_after[0] if context.load_avg_after else float("nan")
    others = "unknown" if context.busy_fraction is None else f"{context.busy_fraction:.0%}"
    print(f"  load average before {before:.2f}, after {after:.2f} (1 min; after counts these processes); other "
          f"processes took {others} of the CPUs")
    # quiet: nothing else ran before it started, and others took at most 10% of the CPUs while it ran
    quiet = before < 0.5 and context.busy_fraction is not None and not context.warnings
    verdict = "meets" if med <= CLAIM_S else "misses"
    print(f"  claim <= {CLAIM_S} s wall: {verdict} it" + ("" if quiet else
                                                          " -- NOT a quiet machine: this figure is no evidence either way"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
