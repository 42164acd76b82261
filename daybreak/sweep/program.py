"""Any framework's training program, timed by DLPerf's protocol: `daybreak throughput --program CMD` and the
reference programs of `--frameworks jax,tensorflow,paddle` (daybreak/sweep/frameworks).

The program is launched ``repeats`` times, each a fresh process, with what to run in the environment
(``DAYBREAK_THROUGHPUT``, JSON: model, batch_size, amp, compile, devices, warmup, steps, window, image_size,
seq_len, threads, device) and ``throughput_log`` (the protocol, stand-alone) importable. It reports through
``:::MLLOG`` lines on stdout: ``throughput_start`` (framework, version, compiler, batch size, devices, FLOPs per
step by its own cost analysis), then one ``throughput_window`` per window of steps (the steps, the samples and the
seconds by its own clock, the device synchronized at both ends), or ``throughput_unsupported`` with the reason.
daybreak stamps each line's arrival on its own clock and checks the program's window seconds against the time
between the arrivals; skips the windows of the first ``warmup`` steps; and takes the next ``steps`` steps' seconds
as the repeat's time. The median over the repeats makes the same ThroughputResult as a built-in model's (through
daybreak.sweep.attempt), with the framework, its version and its compiler.

A repeat that crashes, times out, prints no window, runs something other than what was asked, or whose clock
disagrees with the arrival stamps ends the configuration with that one-line reason.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable

from daybreak.errors import ConfigError
from daybreak.processes import end_process_group
from daybreak.records.throughput import AMP_TO_PRECISION, Status, ThroughputConfig
from daybreak.sweep.launch import cpu_cores, threads_per_process, worker_env

if TYPE_CHECKING:
    from daybreak.sweep.worker import WorkerReport

FRAMEWORKS_DIR = Path(__file__).resolve().parent / "frameworks"
SETTINGS_ENV = "DAYBREAK_THROUGHPUT"  # = throughput_log.SETTINGS_ENV
TOKEN = ":::MLLOG"
START, WINDOW, UNSUPPORTED = "throughput_start", "throughput_window", "throughput_unsupported"
WINDOW_STEPS = 10  # steps per reported window (fewer when --steps or --warmup is smaller)
# How far a window's seconds by the program's clock may differ from the time between the arrivals of its line and
# the previous one on daybreak's: 10% of that interval + 0.5 s (the pipe's and the scheduler's delays).
CLOCK_RELATIVE, CLOCK_ABSOLUTE_S = 0.10, 0.5


@dataclass(frozen=True)
class Framework:
    name: str
    modules: tuple[str, ...]  # what must be importable
    extra: str  # pip install 'daybreak[EXTRA]'
    program: str  # file in FRAMEWORKS_DIR
    several_devices: bool  # whether its reference program runs more than one device


FRAMEWORKS = {
    "jax": Framework("jax", ("jax", "flax", "optax"), "jax", "jax_program.py", True),
    "tensorflow": Framework("tensorflow", ("tensorflow", "keras"), "tensorflow", "tensorflow_program.py", False),
    "paddle": Framework("paddle", ("paddle",), "paddle", "paddle_program.py", False),
}
REFERENCE_MODELS = ("resnet50", "bert_base")


def check_framework(name: str) -> Framework:
    """The framework's reference program, or a one-line error naming the extra that installs it."""
    if name not in FRAMEWORKS:
        raise ConfigError(f"--frameworks {name}: choose from pytorch, {', '.join(FRAMEWORKS)}")
    fw = FRAMEWORKS[name]
    missing = [m for m in fw.modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"--frameworks {name}: {', '.join(missing)} not installed in {sys.executable}: "
                          f"pip install 'daybreak[{fw.extra}]'")
    return fw


def program_command(config: ThroughputConfig) -> list[str]:
    if config.framework == "program":
        return list(config.program or [])
    return [sys.executable, str(FRAMEWORKS_DIR / FRAMEWORKS[config.framework].program)]


def program_settings(config: ThroughputConfig, batch: int, threads: int) -> dict[str, Any]:
    return dict(model=config.model, batch_size=batch, amp=config.amp, compile=config.compile,
                devices=config.devices, warmup=config.warmup, steps=config.steps,
                window=max(1, min(WINDOW_STEPS, config.steps)), image_size=config.image_size, seq_len=config.seq_len,
                threads=threads, device=config.device)


# --- one launch ---------------------------------------------------------------------------------------------

@dataclass
class Line:
    key: str
    value: Any
    arrival: float  # time.monotonic() when daybreak read the line


@dataclass
class Launch:
    """What one process of the program printed and how it ended."""

    records: list[Line] = field(default_factory=list)
    malformed: int = 0
    returncode: int | None = None
    timed_out: bool = False
    spawned: float = 0.0  # time.monotonic()
    seconds: float = 0.0
    tail: list[str] = field(default_factory=list)  # the last lines of its output

    def first(self, key: str) -> Line | None:
        return next((r for r in self.records if r.key == key), None)

    @property
    def windows(self) -> list[Line]:
        return [r for r in self.records if r.key == WINDOW]


def parse_record(text: str) -> tuple[str, Any] | None:
    """(key, value) of a ``:::MLLOG {json}`` line; None for any other line; ValueError when it is malformed."""
    at = text.find(TOKEN)
    if at < 0:
        return None
    record = json.loads(text[at + len(TOKEN):])
    if not isinstance(record, dict) or not isinstance(record.get("key"), str):
        raise ValueError("not an object with a key")
    return record["key"], record.get("value")


def launch(cmd: list[str], env: dict[str, str], timeout_s: float, log: IO[bytes],
           on_record: Callable[[Line], None]) -> Launch:
    """Run the program once; every line goes to ``log`` (an open binary file), each record is stamped on arrival."""
    out = Launch(spawned=time.monotonic())
    try:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=hasattr(os, "killpg"))
    except OSError as e:
        out.returncode, out.tail = 127, [f"cannot start {cmd[0]!r}: {e.strerror or e}"]
        return out
    lines: queue.Queue[tuple[float, bytes | None]] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            lines.put((time.monotonic(), raw))
        lines.put((time.monotonic(), None))

    threading.Thread(target=read, daemon=True).start()
    deadline = out.spawned + timeout_s
    try:
        while True:
            try:
                arrival, raw = lines.get(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    out.timed_out = True
                    end_process_group(proc, grace_s=5.0)
                    break
                continue
            if raw is None:
                break
            log.write(raw)
            text = raw.decode("utf-8", errors="replace").rstrip("\n")
            out.tail = (out.tail + [text])[-20:]
            try:
                parsed = parse_record(text)
            except ValueError:
                out.malformed += 1
                continue
            if parsed is not None:
                record = Line(parsed[0], parsed[1], arrival)
                out.records.append(record)
                on_record(record)
    except BaseException:
        end_process_group(proc, grace_s=3.0)
        raise
    finally:
        log.flush()
    proc.wait()
    out.returncode = None if out.timed_out else proc.returncode
    out.seconds = time.monotonic() - out.spawned
    return out


# --- what a launch says -------------------------------------------------------------------------------------

class Refused(Exception):
    """A launch that gives no time: ``status`` (failed / oom / timeout / unsupported) and a one-line reason."""

    def __init__(self, status: Status, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        else None


def _last_words(run: Launch) -> str:
    words = [line.strip() for line in run.tail if line.strip() and TOKEN not in line]
    return words[-1][:300] if words else "(no output)"


def check_clock(windows: list[Line]) -> str | None:
    """Why the program's window seconds disagree with daybreak's arrival stamps (None: they agree). Windows are
    back to back, so the time between two window lines' arrivals is the second window's seconds plus the
    difference of the two lines' delays in the pipe."""
    worst, why = 0.0, None
    for before, window in zip(windows, windows[1:]):
        claimed, between = float(window.value["seconds"]), window.arrival - before.arrival
        excess = abs(claimed - between) - (CLOCK_RELATIVE * between + CLOCK_ABSOLUTE_S)
        if excess > worst:
            worst = excess
            why = (f"the program's clock disagrees with daybreak's: the window from step {window.value['first_step']} "
                   f"claims {claimed:.3f} s but its line arrived {between:.3f} s after the previous one (tolerance "
                   f"{CLOCK_RELATIVE:.0%} + {CLOCK_ABSOLUTE_S:g} s)")
    return why


def timed_seconds(run: Launch, config: ThroughputConfig, batch: int, where: str) -> float:
    """The seconds of the ``steps`` steps after the warm-up in one launch, or Refused with the reason."""
    if run.timed_out:
        raise Refused("timeout", f"{where}: did not finish within --timeout")
    unsupported = run.first(UNSUPPORTED)
    if unsupported is not None:
        raise Refused("unsupported", str(unsupported.value)[:300])
    if run.returncode != 0:
        last = _last_words(run)
        oom = any(s in last.lower() for s in ("out of memory", "resource_exhausted", "resourceexhausted",
                                               "cannot allocate memory", "memoryerror"))
        code = run.returncode
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with status {code}"
        raise Refused("oom" if oom else "failed", f"{where}: the program {how}: {last}")
    start = run.first(START)
    if start is None or not isinstance(start.value, dict):
        raise Refused("failed", f"{where}: the program printed no {START} record (throughput_log.start); "
                                f"last output: {_last_words(run)}")
    for name, asked in (("batch_size", batch), ("devices", config.devices), ("amp", config.amp)):
        said = start.value.get(name)
        if said is not None and said != asked:
            raise Refused("failed", f"{where}: the program ran {name} {said}, not the {asked} asked (it must read "
                                    "throughput_log.settings())")
    windows = run.windows
    if not windows:
        raise Refused("failed", f"{where}: the program printed no {WINDOW} record (throughput_log.time_steps); "
                                f"last output: {_last_words(run)}")
    expected_first, timed, steps, samples = 0, 0.0, 0, 0
    for w in windows:
        v = w.value if isinstance(w.value, dict) else {}
        first, n, seconds = v.get("first_step"), v.get("steps"), _number(v.get("seconds"))
        if first != expected_first or not isinstance(n, int) or n < 1 or seconds is None or seconds < 0:
            raise Refused("failed", f"{where}: a malformed {WINDOW} record ({json.dumps(v)[:120]}): windows must "
                                    f"follow each other from step 0 with steps >= 1 and seconds >= 0")
        if first < config.warmup < first + n:
            raise Refused("failed", f"{where}: the window of steps {first}..{first + n - 1} straddles the end of the "
                                    f"warm-up (step {config.warmup})")
        if first >= config.warmup:
            timed, steps, samples = timed + seconds, steps + n, samples + int(v.get("samples") or 0)
        expected_first = first + n
    if steps != config.steps:
        raise Refused("failed", f"{where}: the program timed {steps} steps after the {config.warmup} warm-up "
                                f"steps, not the {config.steps} asked")
    if samples != batch * config.devices * steps:
        raise Refused("failed", f"{where}: the timed windows hold {samples} samples, not {steps} steps x batch "
                                f"{batch} x {config.devices} device(s)")
    clock = check_clock(windows)
    if clock:
        raise Refused("failed", f"{where}: {clock}")
    return timed


# --- one configuration --------------------------------------------------------------------------------------

def run_attempt(config: ThroughputConfig, batch: int, timeout_s: float, log_path: Path,
                on_progress: Callable[[dict[str, Any]], None] | None
                ) -> tuple[Status, str | None, WorkerReport | None, list[str], float]:
    """Every repeat of the program at ``batch``: (status, one-line error, WorkerReport or None, command, seconds),
    what daybreak.sweep.attempt makes a row of."""
    from daybreak.measure.system import system_info
    from daybreak.sweep.worker import WorkerReport

    threads = threads_per_process(1, config.device, config.threads)  # one process, whatever its devices
    cmd = program_command(config)
    path = os.pathsep.join(p for p in (str(FRAMEWORKS_DIR), os.environ.get("PYTHONPATH", "")) if p)
    env = worker_env(threads, {SETTINGS_ENV: json.dumps(program_settings(config, batch, threads)),
                               "PYTHONPATH": path})
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(env["PYTHONPATH"].split(os.pathsep)))
    total = (config.warmup + config.steps) * config.repeats
    started = time.monotonic()
    times: list[float] = []
    starts: list[dict[str, Any]] = []
    init_s: float | None = None
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        for r in range(config.repeats):
            where = f"repeat {r + 1}/{config.repeats} (log: {log_path})"
            log.write(f"--- daybreak: repeat {r + 1}/{config.repeats}: {' '.join(cmd)}\n".encode())
            done_before = r * (config.warmup + config.steps)

            def progress(record: Line, done_before: int = done_before, r: int = r) -> None:
                if on_progress is not None and record.key == WINDOW and isinstance(record.value, dict):
                    done = done_before + int(record.value.get("first_step", 0)) + int(record.value.get("steps", 0))
                    on_progress({"phase": f"repeat {r + 1}/{config.repeats}", "done": done, "total": total})

            left = timeout_s - (time.monotonic() - started)
            run = launch(cmd, env, max(left, 0.0), log, progress)
            try:
                times.append(timed_seconds(run, config, batch, where))
            except Refused as e:
                return e.status, e.reason, None, cmd, time.monotonic() - started
            start = run.first(START)
            assert start is not None, "timed_seconds checked it"
            starts.append(start.value)
            if init_s is None:
                warm = [w for w in run.windows if w.value["first_step"] + w.value["steps"] <= config.warmup]
                init_s = (warm[-1].arrival if warm else start.arrival) - run.spawned
    said = starts[0]
    system = system_info().model_dump(mode="json")
    flops = _number(said.get("flops_per_step"))
    notes = [f"each of the {config.repeats} repeats is a fresh process of the program; its first {config.warmup} "
             f"steps are skipped (DLPerf), the next {config.steps} timed by its own clock, checked against "
             "daybreak's arrival stamps"]
    report = WorkerReport(
        status="ok", world_size=config.devices, batch_size=batch, global_batch_size=batch * config.devices,
        times_s=times, flops_per_step_per_device=int(flops) if flops else None,
        input_shape=[int(n) for n in said.get("input_shape") or []], threads=said.get("threads") or threads,
        device_name=system["cpu_model"] if config.device == "cpu" else str(said.get("device_name") or ""),
        optimizer=said.get("optimizer"), init_s=init_s, cpu_cores=cpu_cores(),
        math_precision=AMP_TO_PRECISION[config.amp], system=system,
        energy_unavailable={"total": "not read for programs (`--program`, `--frameworks`)"},
        framework=str(said.get("framework") or config.framework), framework_version=said.get("version"),
        compiler=said.get("compiler"), notes=notes)
    return "ok", None, report, cmd, time.monotonic() - started
