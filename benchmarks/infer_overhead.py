"""How much does daybreak's latency measurement add over a bare inference loop?

    python benchmarks/infer_overhead.py                 # makes its own digits run in a temp dir
    python benchmarks/infer_overhead.py RUN_DIR --repeats 31 --threads 1 --device cpu

Same process, same model object, same prepared batch-1 inputs in host memory. The eval set is cut into
blocks (default 90 queries); every block is measured four times in the order A B B A (which cancels a
linear drift in machine speed, and keeps a burst of interference from other processes to one short
comparison), each measurement one of

  A. daybreak: ``measure_latency`` (per-query clock reads, device sync, label to host) -> mean = total / N
  B. bare:     ``with torch.inference_mode(): for x in inputs: model(x).argmax(1)`` on the CPU, and
               ``model(x.to(dev, non_blocking=True)).argmax(1).cpu()`` on a GPU, timed as a whole (two clock
               reads for the entire pass, one device sync at its end) -> total / N

and reports the ratio mean(A)/mean(B) per block and repeat: median, quartiles, min and max (plus the ratio
of the medians and of the fastest measurements). Target: median ratio <= 1.05.
Exit status 0 when the target is met, 1 when not.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from daybreak.infer.latency import latency_stats, load_for_inference, measure_latency
from daybreak.measure.device import set_threads, synchronize

TARGET = 1.05


def bare_mean_ms(model: torch.nn.Module, queries: list[torch.Tensor], device: torch.device, warmup: int) -> float:
    """The least a loop can do: forward + argmax (+ copies to/from the device when it is not the CPU)."""
    n = len(queries)
    if device.type == "cpu":
        def query(x: torch.Tensor) -> torch.Tensor:
            return model(x).argmax(1)
    else:
        def query(x: torch.Tensor) -> torch.Tensor:
            return model(x.to(device, non_blocking=True)).argmax(1).cpu()
    with torch.inference_mode():
        for i in range(warmup):
            query(queries[i % n])
        synchronize(device)
        t0 = time.perf_counter_ns()
        for x in queries:
            query(x)
        synchronize(device)
        return (time.perf_counter_ns() - t0) / n / 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", nargs="?", type=Path, help="a run directory (default: make a digits run in a temp dir)")
    ap.add_argument("--repeats", type=int, default=15, help="passes over the eval set")
    ap.add_argument("--block", type=int, default=90,
                    help="queries per ABBA comparison (two daybreak + two bare measurements of the same block)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed queries before each measurement")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1 by default: on a small shared machine extra threads add scheduler noise)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--amp", default="off")
    args = ap.parse_args(argv)

    set_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="daybreak-overhead-") as tmp:
        run_dir = args.run_dir
        if run_dir is None:
            from daybreak.train.runner import RunConfig, run

            run_dir = Path(tmp) / "digits"
            print(f"making a digits run in {run_dir} ...", file=sys.stderr)
            result = run(RunConfig(out=run_dir, quiet=True, threads=args.threads))
            if result.status != "reached":
                print(f"the digits run did not reach its target ({result.message})", file=sys.stderr)
                return 2
        loaded = load_for_inference(run_dir, device=args.device, amp=args.amp)
        if loaded.predict is not None or loaded.amp != "off" or loaded.top5:
            print("note: the recipe uses test-time predict/amp/top-5, which the bare loop does not; "
                  "the ratio then includes that work", file=sys.stderr)
        block = max(1, min(args.block, loaded.n))
        # Short blocks of the eval set, each measured A B B A: a burst of interference from other processes
        # then spoils one short comparison instead of a whole pass.
        blocks = [replace(loaded, inputs=loaded.inputs[i : i + block], labels=loaded.labels[i : i + block],
                          _queries=None) for i in range(0, loaded.n, block)]
        ours: list[float] = []
        bare: list[float] = []
        ratios: list[float] = []
        for _ in range(args.repeats):
            for part in blocks:
                queries = part.queries()
                got = {"daybreak": 0.0, "bare": 0.0}
                for which in ("daybreak", "bare", "bare", "daybreak"):  # ABBA cancels a linear drift in speed
                    if which == "daybreak":
                        got[which] += latency_stats(measure_latency(part, warmup=args.warmup).ns).mean_ms / 2
                    else:
                        got[which] += bare_mean_ms(part.model, queries, part.device, args.warmup) / 2
                ours.append(got["daybreak"])
                bare.append(got["bare"])
                ratios.append(got["daybreak"] / got["bare"])

    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
    median = statistics.median(ratios)
    print(f"model {loaded.result.model} ({loaded.result.task}), {loaded.n} batch-1 queries in {len(blocks)} blocks "
          f"of <= {block}, device {loaded.device}, threads {torch.get_num_threads()}, {args.repeats} repeats x "
          f"{len(blocks)} blocks = {len(ratios)} ABBA comparisons")
    print(f"daybreak mean latency:  median {statistics.median(ours) * 1000:.2f} us "
          f"(fastest {min(ours) * 1000:.2f}, slowest {max(ours) * 1000:.2f})")
    print(f"bare loop mean latency: median {statistics.median(bare) * 1000:.2f} us "
          f"(fastest {min(bare) * 1000:.2f}, slowest {max(bare) * 1000:.2f})")
    print(f"ratio daybreak/bare: median {median:.4f}, quartiles {q[0]:.4f}-{q[2]:.4f}, "
          f"min {min(ratios):.4f}, max {max(ratios):.4f}; ratio of medians "
          f"{statistics.median(ours) / statistics.median(bare):.4f}, of fastest {min(ours) / min(bare):.4f}")
    ok = median <= TARGET
    print(f"{'PASS' if ok else 'FAIL'}: median ratio {median:.4f} {'<=' if ok else '>'} {TARGET}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
