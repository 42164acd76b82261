"""Any framework's training program, timed by DLPerf's protocol: `daybreak throughput --program CMD` and the
reference programs of `--frameworks pytorch,jax,tensorflow,paddle,mxnet` (daybreak/sweep/frameworks; MXNet's in
its own interpreter, ``DAYBREAK_MXNET_PYTHON``).

The protocol itself (what a program is asked, what it must report, the windows) is described once, in
daybreak/sweep/frameworks/throughput_log.py; this module launches programs and checks them against it. The
program is launched ``repeats`` times, each a fresh process with its own warm-up, with the settings in the
environment (``DAYBREAK_THROUGHPUT``) and ``throughput_log`` importable. daybreak stamps each record's arrival on
its own clock and, on a CPU, reads the process's CPU time at each window. A repeat is refused, and the
configuration ends with that one-line reason, when the program:

- runs something other than what was asked: another batch size, device count, precision, device kind or thread
  count in its start record (the program is stopped as soon as that record arrives);
- crashes, times out, says it failed, or prints no start record or no window;
- reports windows that do not follow each other from step 0, straddle the end of the warm-up, or time another
  number of steps or samples than asked;
- reports a window without a finite loss read from the device, or the same loss in every window (a program that
  never waits for its device has no loss to report);
- has a clock that disagrees with the arrival stamps: a window's seconds against the time between its line and
  the previous one (CLOCK_RELATIVE x that interval + CLOCK_ABSOLUTE_S), and the timed windows' sum against the
  span of their arrivals (CLOCK_TOTAL_RELATIVE + CLOCK_ABSOLUTE_S); windows last at least MIN_WINDOW_S, so the
  slack is a fraction of a window;
- on a CPU, kept more cores busy during its timed windows than its threads (CPU time / wall time above
  threads x CORES_RELATIVE + CORES_ABSOLUTE).

The median over the repeats makes the same ThroughputResult as a built-in model's (through daybreak.sweep.attempt),
with the framework, its version and compiler, the device and threads it reported, and daybreak's model FLOPs for
the (model, shape, batch) beside the program's own count.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import queue
import statistics
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
START, WINDOW, UNSUPPORTED, FAILED = ("throughput_start", "throughput_window", "throughput_unsupported",
                                      "throughput_failed")
MIN_WINDOW_S = 1.0  # = throughput_log.MIN_WINDOW_S: each window lasts at least this long (or the rest of its phase)
# A window's seconds by the program's clock may differ from the time between the arrivals of its line and the
# previous one on daybreak's by CLOCK_RELATIVE of that interval + CLOCK_ABSOLUTE_S (the difference of two lines'
# delays in the pipe and the scheduler, on a busy machine tens of milliseconds); the timed windows' sum from the span
# of their arrivals by CLOCK_TOTAL_RELATIVE + CLOCK_ABSOLUTE_S (only the two ends' delays count). At the 1 s window
# floor the slack is 0.25 s: a program that reports half of each window is 0.5 s off.
CLOCK_RELATIVE, CLOCK_TOTAL_RELATIVE, CLOCK_ABSOLUTE_S = 0.10, 0.05, 0.15
# A CPU process asked for T threads may keep at most T x 1.25 + 0.25 cores busy over its timed windows (its
# framework's housekeeping threads and the interpreter take a little): 1.5 cores for 1 thread.
CORES_RELATIVE, CORES_ABSOLUTE = 1.25, 0.25
DEVICE_KINDS = {"gpu": "cuda", "cuda": "cuda", "cpu": "cpu", "mps": "mps", "rocm": "cuda"}  # what programs say


@dataclass(frozen=True)
class Framework:
    """A reference program in FRAMEWORKS_DIR (see daybreak/sweep/frameworks/__init__.py to add one)."""

    name: str
    modules: tuple[str, ...]  # what must be importable
    extra: str | None  # pip install 'daybreak[EXTRA]' (None: daybreak's own dependencies)
    program: str  # file in FRAMEWORKS_DIR
    several_devices: bool  # whether its reference program runs more than one device
    layout: str  # the image layout its ResNet-50 trains in
    # a framework that cannot share daybreak's interpreter runs its program with its own: the one this environment
    # variable names, else ``python_default`` (relative to the working directory); ``setup`` says how to make it
    python_env: str | None = None
    python_default: str | None = None
    setup: str | None = None


FRAMEWORKS = {
    "pytorch": Framework("pytorch", ("torch",), None, "pytorch_program.py", False, "NCHW"),
    "jax": Framework("jax", ("jax", "flax", "optax"), "jax", "jax_program.py", True, "NHWC"),
    "tensorflow": Framework("tensorflow", ("tensorflow", "keras"), "tensorflow", "tensorflow_program.py", False,
                            "NHWC"),
    "paddle": Framework("paddle", ("paddle",), "paddle", "paddle_program.py", False, "NCHW"),
    # mxnet 1.9.1 uses NumPy aliases that NumPy 1.24 removed; daybreak has NumPy >= 2
    "mxnet": Framework("mxnet", ("mxnet",), None, "mxnet_program.py", False, "NCHW",
                       python_env="DAYBREAK_MXNET_PYTHON", python_default=".venv-mxnet/bin/python",
                       setup="bash scripts/mxnet-venv.sh, or python3.11 -m venv DIR && DIR/bin/pip install "
                             "numpy==1.23.5 mxnet==1.9.1"),
}
REFERENCE_MODELS = ("resnet50", "bert_base")


def framework_python(fw: Framework) -> str:
    """The interpreter that runs the framework's program: daybreak's, or the framework's own (``python_env``)."""
    if fw.python_env is None:
        return sys.executable
    return os.environ.get(fw.python_env) or str(Path(fw.python_default or "python").absolute())


def _missing_in(python: str, modules: tuple[str, ...]) -> list[str] | str:
    """The modules another interpreter cannot find (importing none of them), or why it cannot be asked."""
    probe = ("import importlib.util, sys\n"
             "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))")
    try:
        out = subprocess.run([python, "-c", probe, *modules], capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        return f"cannot run {python}: {e}"
    if out.returncode != 0:
        return f"{python} exited with status {out.returncode}: {(out.stderr.strip().splitlines() or [''])[-1][:200]}"
    return out.stdout.split()


def check_framework(name: str) -> Framework:
    """The framework's reference program, or a one-line error naming the extra (or the interpreter) it needs."""
    if name not in FRAMEWORKS:
        raise ConfigError(f"--frameworks {name}: choose from {', '.join(FRAMEWORKS)}")
    fw = FRAMEWORKS[name]
    if fw.python_env is not None:
        python = framework_python(fw)
        how = f"make it with {fw.setup}, or set {fw.python_env} to a Python that has {', '.join(fw.modules)}"
        if not (os.path.isfile(python) and os.access(python, os.X_OK)):
            raise ConfigError(f"--frameworks {name}: its program runs in its own interpreter, {python} is not "
                              f"there ({fw.python_env} unset or wrong): {how}")
        missing = _missing_in(python, fw.modules)
        if isinstance(missing, str) or missing:
            said = missing if isinstance(missing, str) else f"{', '.join(missing)} not installed in {python}"
            raise ConfigError(f"--frameworks {name}: {said}: {how}")
        return fw
    missing = [m for m in fw.modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"--frameworks {name}: {', '.join(missing)} not installed in {sys.executable}: "
                          f"pip install 'daybreak[{fw.extra}]'")
    return fw


def program_command(config: ThroughputConfig) -> list[str]:
    if config.framework == "program":
        return list(config.program or [])
    fw = FRAMEWORKS[config.framework]
    return [framework_python(fw), str(FRAMEWORKS_DIR / fw.program)]


def program_settings(config: ThroughputConfig, batch: int, threads: int) -> dict[str, Any]:
    return dict(model=config.model, batch_size=batch, amp=config.amp, compile=config.compile,
                devices=config.devices, device=config.device, threads=threads, warmup=config.warmup,
                steps=config.steps, min_window_s=config.min_window_s, image_size=config.image_size,
                seq_len=config.seq_len, channels_last=config.channels_last)


# --- one launch ---------------------------------------------------------------------------------------------

@dataclass
class Line:
    key: str
    value: Any
    arrival: float  # time.monotonic() when daybreak read the line
    cpu_s: float | None = None  # the program's CPU seconds then (its process tree; windows only)


@dataclass
class Launch:
    """What one process of the program printed and how it ended."""

    records: list[Line] = field(default_factory=list)
    malformed: int = 0
    returncode: int | None = None
    timed_out: bool = False
    stopped: str | None = None  # why daybreak stopped the program early (what its start record said)
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


def _tree_cpu_s(pid: int) -> float | None:
    """CPU seconds of the process and its live descendants (psutil), None when it cannot be read."""
    try:
        import psutil

        root = psutil.Process(pid)
        total = 0.0
        for p in [root, *root.children(recursive=True)]:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total
    except Exception:  # noqa: BLE001 - the process exited, or no psutil: no reading
        return None


def launch(cmd: list[str], env: dict[str, str], timeout_s: float, log: IO[bytes],
           on_record: Callable[[Line], str | None]) -> Launch:
    """Run the program once; every line goes to ``log`` (an open binary file), each record is stamped on arrival
    (a window also with the program's CPU time). ``on_record`` returning a reason stops the program."""
    out = Launch(spawned=time.monotonic())
    try:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=hasattr(os, "killpg"))
    except OSError as e:
        out.returncode, out.tail = 127, [f"cannot start {cmd[0]!r}: {e.strerror or e}"]
        return out
    lines: queue.Queue[tuple[float, float | None, bytes | None]] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            arrival = time.monotonic()
            lines.put((arrival, _tree_cpu_s(proc.pid) if b"throughput_window" in raw else None, raw))
        lines.put((time.monotonic(), None, None))

    threading.Thread(target=read, daemon=True).start()
    deadline = out.spawned + timeout_s
    try:
        while True:
            try:
                arrival, cpu_s, raw = lines.get(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
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
                record = Line(parsed[0], parsed[1], arrival, cpu_s)
                out.records.append(record)
                reason = on_record(record)
                if reason is not None and out.stopped is None:
                    out.stopped = reason
                    end_process_group(proc, grace_s=3.0)
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


def device_kind(said: Any) -> str | None:
    """A program's device (``cpu``, ``cuda``, JAX's ``gpu``, TensorFlow's ``GPU`` ...) as daybreak's kind."""
    return DEVICE_KINDS.get(str(said).lower().split(":")[0]) if said else None


def check_start(value: Any, config: ThroughputConfig, batch: int, threads: int) -> str | None:
    """Why the start record shows the program running something other than what was asked (None: it does not)."""
    if not isinstance(value, dict):
        return f"a malformed {START} record ({json.dumps(value)[:120]})"
    hint = "(it must apply throughput_log.settings() and report what it runs)"
    for name, asked in (("batch_size", batch), ("devices", config.devices), ("amp", config.amp)):
        said = value.get(name)
        if said is not None and said != asked:
            return f"the program ran {name} {said}, not the {asked} asked {hint}"
    for name in ("device", "threads"):
        if value.get(name) is None:
            return f"the program's {START} record does not say which {name} it runs on {hint}"
    kind = device_kind(value.get("device"))
    if kind != config.device:
        device_name = value.get("device_name")
        return (f"asked for {config.device}, the program ran on {value.get('device')}"
                + (f" ({device_name})" if device_name else "") + f" {hint}")
    for name in ("threads", "inter_op_threads"):
        said = value.get(name)
        if said is not None and said != threads:
            return (f"asked for {threads} thread{'s' if threads > 1 else ''} per process, the program runs {said} "
                    f"{'intra-op' if name == 'threads' else 'inter-op'} thread{'s' if said != 1 else ''} {hint}")
    if config.channels_last and value.get("channels_last") is not True:
        return f"asked for channels_last, the program did not say it applied it (channels_last=True) {hint}"
    return None


def check_clock(windows: list[Line], timed: list[Line]) -> str | None:
    """Why the program's window seconds disagree with daybreak's arrival stamps (None: they agree). Windows are
    back to back, so the time between two window lines' arrivals is the second window's seconds plus the
    difference of the two lines' delays in the pipe; ``timed`` (the windows after the warm-up) also as a sum."""
    worst, why = 0.0, None
    for before, window in zip(windows, windows[1:]):
        claimed, between = float(window.value["seconds"]), window.arrival - before.arrival
        excess = abs(claimed - between) - (CLOCK_RELATIVE * between + CLOCK_ABSOLUTE_S)
        if excess > worst:
            worst = excess
            why = (f"the program's clock disagrees with daybreak's: the window from step {window.value['first_step']} "
                   f"claims {claimed:.3f} s but its line arrived {between:.3f} s after the previous one (tolerance "
                   f"{CLOCK_RELATIVE:.0%} + {CLOCK_ABSOLUTE_S:g} s)")
    if why:
        return why
    index = {id(w): i for i, w in enumerate(windows)}
    judged = [w for w in timed if index[id(w)] > 0]
    if judged:
        claimed = sum(float(w.value["seconds"]) for w in judged)
        span = judged[-1].arrival - windows[index[id(judged[0])] - 1].arrival
        if abs(claimed - span) > CLOCK_TOTAL_RELATIVE * span + CLOCK_ABSOLUTE_S:
            return (f"the program's clock disagrees with daybreak's: its timed windows claim {claimed:.3f} s in all "
                    f"but their lines arrived over {span:.3f} s (tolerance {CLOCK_TOTAL_RELATIVE:.0%} + "
                    f"{CLOCK_ABSOLUTE_S:g} s)")
    return None


def check_losses(windows: list[Line]) -> str | None:
    """Why the windows' losses do not prove the steps ran (None: every one is finite and they change)."""
    for w in windows:
        loss = _number(w.value.get("loss"))
        if loss is None:
            return (f"the window from step {w.value['first_step']} carries no finite loss "
                    f"(loss={w.value.get('loss')!r}): sync() must wait for the device and return the last step's loss, read to the host")
    losses = {float(w.value["loss"]) for w in windows}
    if len(windows) > 1 and len(losses) == 1:
        return (f"the loss is {losses.pop():.9g} in every window: it is not read from the steps that ran (sync() "
                "must return the last step's loss)")
    return None


@dataclass
class Timed:
    """One repeat's timed steps."""

    seconds: float
    cores_used: float | None  # the program's CPU time / wall time over its timed windows (CPU runs)
    window_s: float  # the shortest timed window


def timed_seconds(run: Launch, config: ThroughputConfig, batch: int, threads: int, where: str) -> Timed:
    """The seconds of the ``steps`` steps after the warm-up in one launch, or Refused with the reason."""
    if run.timed_out:
        raise Refused("timeout", f"{where}: did not finish within --timeout")
    unsupported = run.first(UNSUPPORTED)
    if unsupported is not None:
        raise Refused("unsupported", str(unsupported.value)[:300])
    failed = run.first(FAILED)
    if failed is not None:
        raise Refused("failed", f"{where}: the program could not run it: {str(failed.value)[:300]}")
    if run.stopped:
        raise Refused("failed", f"{where}: {run.stopped}")
    if run.returncode != 0:
        last = _last_words(run)
        oom = any(s in last.lower() for s in ("out of memory", "resource_exhausted", "resourceexhausted",
                                               "cannot allocate memory", "memoryerror"))
        code = run.returncode
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with status {code}"
        raise Refused("oom" if oom else "failed", f"{where}: the program {how}: {last}")
    start = run.first(START)
    if start is None:
        raise Refused("failed", f"{where}: the program printed no {START} record (throughput_log.start); "
                                f"last output: {_last_words(run)}")
    reason = check_start(start.value, config, batch, threads)
    if reason:
        raise Refused("failed", f"{where}: {reason}")
    windows = run.windows
    if not windows:
        raise Refused("failed", f"{where}: the program printed no {WINDOW} record (throughput_log.time_steps); "
                                f"last output: {_last_words(run)}")
    expected_first, steps, samples = 0, 0, 0
    timed: list[Line] = []
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
            timed.append(w)
            steps, samples = steps + n, samples + int(v.get("samples") or 0)
        expected_first = first + n
    if steps != config.steps:
        raise Refused("failed", f"{where}: the program timed {steps} steps after the {config.warmup} warm-up "
                                f"steps, not the {config.steps} asked")
    if samples != batch * config.devices * steps:
        raise Refused("failed", f"{where}: the timed windows hold {samples} samples, not {steps} steps x batch "
                                f"{batch} x {config.devices} device(s)")
    for why in (check_losses(windows), check_clock(windows, timed)):
        if why:
            raise Refused("failed", f"{where}: {why}")
    cores = cores_used(windows, timed)
    if config.device == "cpu" and cores is not None and cores > threads * CORES_RELATIVE + CORES_ABSOLUTE:
        raise Refused("failed", f"{where}: asked for {threads} thread{'s' if threads > 1 else ''} per process, the "
                                f"program kept {cores:.2f} cores busy during its timed steps (CPU time / wall time; "
                                f"at most {threads * CORES_RELATIVE + CORES_ABSOLUTE:g})")
    return Timed(seconds=sum(float(w.value["seconds"]) for w in timed), cores_used=cores,
                 window_s=min(float(w.value["seconds"]) for w in timed))


def cores_used(windows: list[Line], timed: list[Line]) -> float | None:
    """The program's CPU seconds per wall second from the line before its first timed window to its last one."""
    first = windows.index(timed[0]) if timed else 0
    if first == 0 or timed[-1].cpu_s is None or windows[first - 1].cpu_s is None:
        return None
    wall = timed[-1].arrival - windows[first - 1].arrival
    return (timed[-1].cpu_s - windows[first - 1].cpu_s) / wall if wall > 0 else None  # type: ignore[operator]


# --- one configuration --------------------------------------------------------------------------------------

def _model_flops(config: ThroughputConfig, batch: int) -> int | None:
    """daybreak's count of the model's FLOPs per step on one device, when daybreak has the model."""
    from daybreak.models import model_names

    if config.model not in model_names():
        return None
    from daybreak.sweep.worker import model_step_flops

    return model_step_flops(config, batch)


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
    model_flops = _model_flops(config, batch)
    repeats: list[Timed] = []
    starts: list[dict[str, Any]] = []
    init_s: float | None = None
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        for r in range(config.repeats):
            where = f"repeat {r + 1}/{config.repeats} (log: {log_path})"
            log.write(f"--- daybreak: repeat {r + 1}/{config.repeats}: {' '.join(cmd)}\n".encode())
            done_before = r * (config.warmup + config.steps)

            def on_record(record: Line, done_before: int = done_before, r: int = r) -> str | None:
                if record.key == START:
                    return check_start(record.value, config, batch, threads)
                if on_progress is not None and record.key == WINDOW and isinstance(record.value, dict):
                    done = done_before + int(record.value.get("first_step", 0)) + int(record.value.get("steps", 0))
                    on_progress({"phase": f"repeat {r + 1}/{config.repeats}", "done": done, "total": total})
                return None

            left = timeout_s - (time.monotonic() - started)
            run = launch(cmd, env, max(left, 0.0), log, on_record)
            try:
                repeats.append(timed_seconds(run, config, batch, threads, where))
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
    own = _number(said.get("flops_per_step"))
    flops = model_flops if model_flops is not None else (int(own) if own else None)
    notes = [f"each of the {config.repeats} repeats is a fresh process of the program with its own {config.warmup} "
             f"warm-up steps (skipped, as DLPerf), the next {config.steps} timed by its own clock, checked against "
             "daybreak's arrival stamps and the loss it read at the end of each window"]
    shortest = min(t.window_s for t in repeats)
    if shortest < config.min_window_s * 0.9:
        notes.append(f"the timed steps took {shortest:.3f} s in a window, under the {config.min_window_s:g} s the "
                     f"clock check needs to catch a program that misreports its windows (tolerance "
                     f"{CLOCK_RELATIVE:.0%} + {CLOCK_ABSOLUTE_S:g} s): raise --steps")
    if model_flops is None and own:
        notes.append(f"FLOPs: the program's own count (daybreak has no model named {config.model!r})")
    cores = [t.cores_used for t in repeats if t.cores_used is not None]
    report = WorkerReport(
        status="ok", world_size=config.devices, batch_size=batch, global_batch_size=batch * config.devices,
        times_s=[t.seconds for t in repeats], flops_per_step_per_device=flops,
        own_flops_per_step_per_device=int(own) if own else None,
        flops_source="daybreak" if model_flops is not None else ("program" if own else None),
        input_shape=[int(n) for n in said.get("input_shape") or []], threads=int(said["threads"]),
        inter_op_threads=said.get("inter_op_threads"), cores_used=statistics.median(cores) if cores else None,
        device_name=system["cpu_model"] if config.device == "cpu" else str(said.get("device_name") or ""),
        optimizer=said.get("optimizer"), init_s=init_s, cpu_cores=cpu_cores(),
        math_precision=str(said.get("math_precision") or AMP_TO_PRECISION[config.amp]), system=system,
        energy_unavailable={"total": "not read for programs (`--program`, `--frameworks`)"},
        framework=str(said.get("framework") or config.framework), framework_version=said.get("version"),
        compiler=said.get("compiler"), layout=said.get("layout"),
        notes=notes + [str(n) for n in said.get("notes") or []])
    return "ok", None, report, cmd, time.monotonic() - started
