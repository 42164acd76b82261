"""The `daybreak` command. Each command lives in its own module with ``register(subparsers)``."""

from __future__ import annotations

import argparse
import importlib
import sys

from daybreak import __version__
from daybreak.errors import DaybreakError

# Modules that add commands. Each defines register(subparsers) and sets `func` on its parser(s);
# func(args) returns the exit status.
COMMAND_MODULES = [
    "daybreak.train.commands",
    "daybreak.leaderboard.commands",
    "daybreak.external.commands",
    "daybreak.infer.commands",
    "daybreak.sweep.commands",
    "daybreak.analysis.commands",
    "daybreak.squad_commands",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="daybreak",
        description="End-to-end deep-learning benchmark: time and cost to train to a fixed accuracy "
                    "(DAWNBench's metric), inference latency and cost, throughput sweeps, analyses and a leaderboard.",
        epilog="Run `daybreak run` with no arguments for the offline default (digits to 98%%). "
               "`daybreak COMMAND --help` explains each command.",
    )
    parser.add_argument("--version", action="version", version=f"daybreak {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv  # the command line as given (commands that re-launch themselves need it)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except DaybreakError as e:
        print(f"daybreak: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("daybreak: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
