"""Start-up time of the `daybreak` command: lazy registration (only the named command's module is imported) vs
registering every command module, as every command did before (daybreak.commands_index).

Both sides are fresh interpreters started the same way, interleaved (lazy, eager, lazy, ...), timed from the
process start to its exit with perf_counter_ns around subprocess.run; the ratio of medians is printed per command
line. What is inside the clock: interpreter start-up, imports, building the parser, printing the help.

    python benchmarks/cli_startup.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

EAGER = ("import sys\nfrom daybreak.cli import build_parser\n"
         "build_parser().parse_args(sys.argv[1:])")  # every module registered, then the same parse
LAZY = "import sys\nfrom daybreak.cli import main\nsys.exit(main(sys.argv[1:]))"
COMMAND_LINES = (["--help"], ["run", "--help"], ["time", "--help"], ["leaderboard", "--help"])


def seconds(code: str, argv: list[str]) -> float:
    t0 = time.perf_counter_ns()
    subprocess.run([sys.executable, "-c", code, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    return (time.perf_counter_ns() - t0) / 1e9


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args()
    print(f"{'command line':24} {'eager s (median)':>17} {'lazy s (median)':>16} {'lazy/eager':>11}  spread (lazy)")
    for argv in COMMAND_LINES:
        seconds(LAZY, argv), seconds(EAGER, argv)  # warm the file cache
        lazy, eager = [], []
        for _ in range(args.repeats):
            lazy.append(seconds(LAZY, argv))
            eager.append(seconds(EAGER, argv))
        ml, me = statistics.median(lazy), statistics.median(eager)
        line = "daybreak " + " ".join(argv)
        print(f"{line:24} {me:17.3f} {ml:16.3f} {ml / me:11.3f}  {min(lazy):.3f}..{max(lazy):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
