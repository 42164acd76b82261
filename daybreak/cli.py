"""The `daybreak` command. Each command lives in its own module with ``register(subparsers)``.

Exit status, for every command: 0 success, 2 a usage or data error (one line on stderr, never a traceback),
130 interrupted; each command documents its other outcomes (run: 3 below the target, 4 diverged, 5 failed).
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import signal
import sys
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any, NoReturn, TypeVar, overload

from daybreak.commands_index import BY_NAME, COMMANDS, extra_providing, missing_extra_message, modules
from daybreak.errors import DaybreakError
from daybreak.version import __version__

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# Seeds go to random.seed, torch.manual_seed (64 bits) and numpy.random.seed, which takes [0, 2**32 - 1]: that
# range, the same for every command that takes a seed.
SEED_MAX = 2**32 - 1
# Every other integer option (counts, sizes, ranks, ports) fits 32 bits; a larger one would overflow in torch or C.
INT_MAX = 2**31 - 1

_N = TypeVar("_N")
# what signal.signal returns: the handler that was installed
SignalHandler = Callable[[int, FrameType | None], Any] | int | None

# argparse types. Text that is not a number raises ValueError (argparse: "invalid int value: 'x'"); a number out
# of range raises ArgumentTypeError with the reason.


def seed_value(text: str) -> int:
    """``type="seed"``: an integer in [0, SEED_MAX]."""
    value = int(text)
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"{text[:40]}: a seed must be an integer in [0, {SEED_MAX}] (2**32 - 1)")
    return value


def bounded_int(text: str) -> int:
    """What ``type=int`` means on daybreak's command line: an integer of at most 32 bits (each command checks
    its own lower bound)."""
    value = int(text)
    if abs(value) > INT_MAX:
        raise argparse.ArgumentTypeError(f"{text[:40]}: too large (at most {INT_MAX})")
    return value


def finite_float(text: str) -> float:
    """What ``type=float`` means on daybreak's command line: a number, never nan or inf."""
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: must be a finite number")
    return value


class Parser(argparse.ArgumentParser):
    """argparse with daybreak's conventions, for every command and subcommand (``add_parser`` makes subparsers of
    the same class):

    - a usage error is one line on stderr, ``daybreak: error: run: argument --seed: ... (see `daybreak run
      --help`)``, and exit status 2 (argparse's default prints the whole usage text first);
    - ``type=int`` refuses integers beyond 32 bits, ``type=float`` nan and inf; ``type="seed"`` takes an integer
      in [0, 2**32 - 1];
    - a command made of subcommands (``leaderboard``, ``analyze``) needs one.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("type", int, bounded_int)
        self.register("type", float, finite_float)
        self.register("type", "seed", seed_value)

    def add_subparsers(self, **kwargs: Any) -> argparse._SubParsersAction[Any]:
        kwargs.setdefault("required", True)
        return super().add_subparsers(**kwargs)

    @overload
    def parse_args(self, args: Iterable[str] | None = None, namespace: None = None) -> argparse.Namespace: ...
    @overload
    def parse_args(self, args: Iterable[str] | None, namespace: _N) -> _N: ...
    @overload
    def parse_args(self, *, namespace: _N) -> _N: ...

    def parse_args(self, args: Iterable[str] | None = None, namespace: Any = None) -> Any:
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:  # reported by the (sub)command they were given to, so its --help is the one named
            self.chosen(namespace).error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace

    def chosen(self, namespace: argparse.Namespace) -> argparse.ArgumentParser:
        """The parser of the (sub)command ``namespace`` holds (its ``prog`` names it: 'daybreak leaderboard
        serve')."""
        parser: argparse.ArgumentParser = self
        deeper = True
        while deeper:
            deeper = False
            for action in parser._actions:
                name = getattr(namespace, action.dest, None)
                if isinstance(action, argparse._SubParsersAction) and name in action.choices:
                    parser, deeper = action.choices[name], True
                    break
        return parser

    def error(self, message: str) -> NoReturn:
        command = self.prog.split(maxsplit=1)[1:]
        where = f"{command[0]}: " if command else ""
        self.exit(EXIT_USAGE, f"daybreak: error: {where}{message} (see `{self.prog} --help`)\n")


def build_parser(argv: list[str] | None = None) -> Parser:
    """daybreak's parser. Given the command line ``argv``, only the module of the command it names is imported
    (``daybreak run`` loads neither the leaderboard's web stack nor the analyses); every other command is listed
    by its name and help alone (daybreak.commands_index), so ``daybreak --help`` stays complete. Without ``argv``
    every command is registered in full (the tests walk every parser)."""
    parser = Parser(
        prog="daybreak",
        description="End-to-end deep-learning benchmark: time and cost to train to a fixed accuracy "
                    "(DAWNBench's metric), inference latency and cost, throughput sweeps, analyses and a leaderboard.",
        epilog="Run `daybreak run` with no arguments for the offline default (digits to 98%). "
               "`daybreak COMMAND --help` explains each command. Exit status: 0 success, 2 a usage or data error "
               "(one line on stderr), 130 interrupted; `daybreak run`: 3 below the target, 4 diverged, 5 failed.",
    )
    parser.add_argument("--version", action="version", version=f"daybreak {__version__}",
                        help="print daybreak's version and exit (every record carries it; CHANGELOG.md says what each "
                             "version changed)")
    parser.add_argument("--plugin", metavar="FILE", action="append",
                        help="a Python file that registers tasks, readers, models or recipes (repeatable; anywhere on "
                             "the command line before a --; also DAYBREAK_PLUGINS=FILE:FILE): no packaging needed")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=False)
    if argv is None:
        wanted = modules()
    else:
        named = next((a for a in argv if not a.startswith("-")), None)
        wanted = [BY_NAME[named].module] if named in BY_NAME else []
    for name in wanted:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:  # a command module that needs an extra at import time
            if (extra := extra_providing(e.name or "")) is None:
                raise
            command = next(c.name for c in COMMANDS if c.module == name)
            parser.exit(EXIT_USAGE, f"daybreak: error: {missing_extra_message(command, extra, e.name or '')}\n")
        module.register(sub)
    registered = sub.choices
    listed = {c.name: c.help for c in COMMANDS if c.name not in registered}
    for name, text in listed.items():  # named in the help and in "invalid choice" errors, never parsed further
        sub.add_parser(name, help=text, add_help=False)
    # the table's order in `daybreak --help`, whichever module was registered first
    order = {c.name: i for i, c in enumerate(COMMANDS)}
    sub._choices_actions.sort(key=lambda action: order.get(action.dest, len(order)))
    return parser


def _user_path(err: OSError, argv: list[str]) -> str | None:
    """The file an OSError is about, when that is a path given on the command line or inside one; else None."""
    given = []
    for token in argv:
        value = token.split("=", 1)[1] if token.startswith("--") and "=" in token else token
        if value and not value.startswith("-"):
            given.append(os.path.abspath(os.path.expanduser(value)))
    for name in (err.filename, err.filename2):
        if name is None or isinstance(name, int):
            continue
        path = os.path.abspath(os.fsdecode(name))
        if any(path == g or path.startswith(g.rstrip(os.sep) + os.sep) for g in given):
            return os.fsdecode(name)
    return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a == "--plugin" or a.startswith("--plugin=") for a in argv):
        from daybreak.plugins import take_plugin_flags

        try:
            argv = take_plugin_flags(argv)
        except DaybreakError as e:
            print(f"daybreak: error: {e}", file=sys.stderr)
            return e.exit_code
    parser = build_parser(argv)
    args = parser.parse_args(argv)  # a usage error: one line on stderr, SystemExit(2)
    args.argv = argv  # the command line as given (commands that re-launch themselves need it)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    if "daybreak.options" in sys.modules:  # a command with options: an unknown key names the command it belongs to
        from daybreak import install_option_hints

        install_option_hints()
    old_term = _sigterm_as_interrupt()
    try:
        return int(args.func(args) or 0)
    except DaybreakError as e:
        print(f"daybreak: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("daybreak: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0
    except ModuleNotFoundError as e:
        # A module of an optional extra (pyproject.toml) that is not installed, e.g. `daybreak leaderboard serve`
        # after `pip install daybreak` alone: one line naming the extra to install. Any other missing module is a
        # broken installation: the traceback.
        extra = extra_providing(e.name or "")
        if extra is None:
            raise
        command = parser.chosen(args).prog.removeprefix("daybreak ")
        print(f"daybreak: error: {missing_extra_message(command, extra, e.name or '')}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        # A path the user named that cannot be used (permission denied, read-only, not a directory, exists, ...)
        # is their mistake to fix: one line. Any other OSError is a bug or the machine's problem: the traceback.
        path = _user_path(e, argv)
        if path is None:
            raise
        print(f"daybreak: error: {path}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)


def _sigterm_as_interrupt() -> SignalHandler:
    """SIGTERM (schedulers, `timeout`, container stops) is handled like Ctrl-C by every command: what was measured
    is recorded (a run: ``interrupted``; a sweep: its finished configurations, workers stopped) and the exit status
    is 130. Commands with their own handler (a run, `daybreak time`, torchrun workers) install it over this one."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: FrameType | None) -> None:
        if _importing(frame):
            # Stopped inside an import, a C extension can stay half-initialized (pybind11 keeps its types
            # registered, so importing it again fails, as scipy.stats does when the summary written on the way out
            # imports it): let the import finish, then take the signal again.
            timer = threading.Timer(IMPORT_GRACE_S, os.kill, (os.getpid(), signum))
            timer.daemon = True
            timer.start()
            return
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):
        return None


IMPORT_GRACE_S = 0.05  # how often a SIGTERM that came during an import is taken again


def _importing(frame: FrameType | None) -> bool:
    """Whether ``frame`` (where a signal interrupted the main thread) is inside an import."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


if __name__ == "__main__":
    raise SystemExit(main())
