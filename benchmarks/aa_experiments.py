"""A/A tests: an experiment whose two arms are the same must say "not distinguishable".

Each of --experiments seeded `daybreak lesion digits --set augment=false --without augment` experiments compares
the full recipe with a variant that switches off a switch that is already off: the two arms run the same
configuration. With the default confidence (0.99) the verdict must be "not distinguishable" in at least 19 of 20
experiments (a false "significant" is expected about 1% of the time). Each experiment uses other seeds
(--seed 1000*i) and its own interleaving (--order random --order-seed i).

    python benchmarks/aa_experiments.py [--experiments 20] [--runs 4] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiments", type=int, default=20)
    ap.add_argument("--runs", type=int, default=4, help="seeds (pairs) per experiment")
    ap.add_argument("--threads", default="1")
    args = ap.parse_args()
    verdicts, ratios = [], []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.experiments):
            out = Path(tmp) / f"aa-{i}"
            cmd = [sys.executable, "-m", "daybreak", "lesion", "digits", "--set", "augment=false", "--without",
                   "augment", "--runs", str(args.runs), "--seed", str(1000 * i), "--order", "random",
                   "--order-seed", str(i), "--threads", args.threads, "--out", str(out), "--json"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"experiment {i}: exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
                verdicts.append("error")
                continue
            variant = json.loads(proc.stdout)["variants"][1]
            c = variant["comparison"]
            verdicts.append(c["verdict"])
            ratios.append(c["ratio"])
            print(f"experiment {i:>2}: ratio {c['ratio']:.3f}  CI [{c['ci_low']:.3f}, {c['ci_high']:.3f}]  "
                  f"{c['verdict']}  ({time.perf_counter() - start:.0f} s)", flush=True)
    same = sum(v == "not distinguishable" for v in verdicts)
    print(f"\nnot distinguishable in {same} of {len(verdicts)} A/A experiments (need >= {len(verdicts) - 1}); "
          f"geometric-mean ratios {min(ratios):.3f}..{max(ratios):.3f}")
    return 0 if same >= len(verdicts) - 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
