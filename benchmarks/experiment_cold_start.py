"""Do experiment trials measure what `daybreak run` measures? `daybreak repeat`'s trials against separate
`daybreak run` invocations of the same recipe, interleaved on the same machine.

The baseline is N separate `daybreak run digits` commands (each its own cold process). The candidate is one
`daybreak repeat digits` experiment grown one trial at a time (`--resume --runs k`), so that its trials and the
separate runs alternate (run, trial, run, trial, ...) and drift of a shared machine hits both alike. Printed:
each trial's data_load and model_init (every trial should pay the cold start alike: max/min <= 2), the CV of the
trials' time-to-target (<= 35%), and the ratio of the repeat's olympic mean to the median of the separate runs
(within 25% of 1). Before experiments ran trials as fresh processes, the first seed took 4.4 s and the others
0.4-0.5 s (ratio ~0.1-0.2).

    python benchmarks/experiment_cold_start.py [--runs 5] [--task digits] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from daybreak.analysis.stats import olympic_mean
from daybreak.records.experiment import Experiment
from daybreak.records.run import RunResult


def daybreak(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "daybreak", *args], check=False, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--task", default="digits")
    ap.add_argument("--threads", default=None)
    args = ap.parse_args()
    extra = ["--threads", args.threads] if args.threads else []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        exp = root / "exp"
        separate: list[RunResult] = []
        for k in range(1, args.runs + 1):
            out = root / f"run-{k}"
            daybreak("run", args.task, "--seed", str(k - 1), "--out", str(out), "-q", *extra)
            separate.append(RunResult.load(out))
            daybreak("repeat", args.task, "--runs", str(k), "--out", str(exp), *(["--resume"] if k > 1 else []), *extra)
        record = Experiment.load(exp)
        trials = [t for t in record.trials if t.state == "done"]
    print(f"{'':<10} {'data_load s':>12} {'model_init s':>13} {'time to target s':>17}")
    for i, t in enumerate(trials):
        print(f"trial {i:<4} {t.data_load_s:>12.3f} {t.model_init_s:>13.3f} {t.time_to_target_s or float('nan'):>17.3f}")
    for i, r in enumerate(separate):
        phases = {p.phase: p.end_s - p.start_s for p in r.phases}
        print(f"run {i:<6} {phases.get('data_load', 0):>12.3f} {phases.get('model_init', 0):>13.3f} "
              f"{r.time_to_target_s or float('nan'):>17.3f}")
    cold = [t.data_load_s + t.model_init_s for t in trials]
    data_spread = max(t.data_load_s for t in trials) / min(t.data_load_s for t in trials)
    init_spread = max(t.model_init_s for t in trials) / min(t.model_init_s for t in trials)
    times = [t.time_to_target_s for t in trials if t.time_to_target_s is not None]
    cv = statistics.stdev(times) / statistics.mean(times) if len(times) > 1 else float("nan")
    olympic = olympic_mean(times)
    median_separate = statistics.median(r.time_to_target_s for r in separate if r.time_to_target_s is not None)
    ratio = (olympic or statistics.mean(times)) / median_separate
    print()
    print(f"data_load max/min over trials      {data_spread:.2f}   (<= 2: every trial pays the cold start)")
    print(f"model_init max/min over trials     {init_spread:.2f}   (<= 2)")
    print(f"cold start (data+init) max/min     {max(cold) / min(cold):.2f}")
    print(f"CV of the trials' time to target   {cv * 100:.1f}%  (<= 35%)")
    print(f"repeat olympic mean                {olympic if olympic is not None else float('nan'):.3f} s")
    print(f"median of separate daybreak runs   {median_separate:.3f} s")
    print(f"ratio repeat / separate            {ratio:.3f}   (within 0.75-1.25)")
    ok = data_spread <= 2 and init_spread <= 2 and cv <= 0.35 and 0.75 <= ratio <= 1.25
    print("OK" if ok else "NOT OK")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
