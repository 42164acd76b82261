"""DLPerf's question on this machine: which framework trains ResNet-50 and BERT-base fastest, with and without its
compiler (XLA; torch.compile for PyTorch) and bf16?

    python benchmarks/frameworks.py [--out benchmarks/results/frameworks] [--repeats 3] [--quick]

Runs `daybreak throughput --frameworks pytorch,jax,tensorflow,paddle` for ResNet-50 (at --image-size, default 64
px: a CPU's minutes, not hours) and BERT-base with the masked-LM head (at --seq-len, default 32), batch per device
--resnet-batch / --bert-batch, precisions off and bf16, compiler off and on, each configuration's repeats fresh
processes (PyTorch: one process, timed windows), then prints the framework table (samples/s, the spread of the
repeats, relative to PyTorch eager) and which framework was fastest per model. Frameworks whose extra is not
installed are left out with a line saying so. The folders keep results.jsonl, results.md and the logs.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FRAMEWORKS = {"pytorch": "torch", "jax": "flax", "tensorflow": "tensorflow", "paddle": "paddle"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "frameworks")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--resnet-batch", type=int, default=8)
    p.add_argument("--bert-batch", type=int, default=4)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--models", default="resnet50,bert_base")
    p.add_argument("--quick", action="store_true", help="a tiny check that everything runs (not a measurement)")
    args = p.parse_args(argv)
    if args.quick:
        args.image_size, args.seq_len, args.resnet_batch, args.bert_batch = 32, 8, 2, 2
        args.warmup, args.steps, args.repeats = 1, 1, 2
    frameworks = [f for f, module in FRAMEWORKS.items() if importlib.util.find_spec(module) is not None]
    for f in sorted(set(FRAMEWORKS) - set(frameworks)):
        print(f"frameworks: {f} is not installed (pip install -e '.[{f}]'): left out", file=sys.stderr)
    from daybreak.records.throughput import compiler_name, load_results, latest_by_key

    lines = []
    for model in args.models.split(","):
        size = (["--image-size", str(args.image_size), "--batch-sizes", str(args.resnet_batch)] if model == "resnet50"
                else ["--seq-len", str(args.seq_len), "--batch-sizes", str(args.bert_batch)])
        out = args.out / model
        cmd = [sys.executable, "-m", "daybreak", "throughput", "--model", model, "--frameworks", ",".join(frameworks),
               *size, "--amp", "off,bf16", "--compile", "off,on", "--device", "cpu", "--warmup", str(args.warmup),
               "--steps", str(args.steps), "--repeats", str(args.repeats), "--peak-budget", "20", "--out", str(out),
               "--no-plots", "-q"]
        print(f"frameworks: {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
        subprocess.run(cmd, cwd=REPO, check=False)
        rows = sorted(latest_by_key(load_results(out / "results.jsonl")).values(),
                      key=lambda r: (r.config.framework, r.config.amp, r.config.compile))
        eager = {r.config.pytorch_eager_key(): r for r in rows
                 if r.config.framework == "pytorch" and not r.config.compile and r.status == "ok"}
        shape = f"{args.image_size} px, batch {args.resnet_batch}" if model == "resnet50" else \
            f"sequence {args.seq_len}, batch {args.bert_batch}"
        lines += [f"### {model} ({shape}; {args.warmup} warm-up + {args.steps} timed steps, median of "
                  f"{args.repeats} repeats)", "", "| framework | compiler | precision | samples/s | min-max | "
                  "vs PyTorch eager |", "|---|---|---|---|---|---|"]
        for r in rows:
            c = r.config
            name = f"{c.framework} {r.framework_version}" if r.framework_version else c.framework
            precision = "fp32" if c.amp == "off" else c.amp
            if r.status != "ok":
                lines.append(f"| {name} | {compiler_name(r)} | {precision} | {r.status}: {(r.error or '')[:110]} | | |")
                continue
            base = eager.get(c.pytorch_eager_key())
            ratio = f"{r.samples_per_s / base.samples_per_s:.2f}x" if base else "-"
            lines.append(f"| {name} | {compiler_name(r)} | {precision} | {r.samples_per_s:.2f} | "
                         f"{r.samples_per_s_min:.2f}-{r.samples_per_s_max:.2f} | {ratio} |")
        ok = [r for r in rows if r.status == "ok"]
        if ok:
            best = max(ok, key=lambda r: r.samples_per_s)
            lines += ["", f"Fastest: {best.config.framework} ({compiler_name(best)}, "
                          f"{'fp32' if best.config.amp == 'off' else best.config.amp}), {best.samples_per_s:.2f} "
                          "samples/s."]
        lines.append("")
    text = "\n".join(lines)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
