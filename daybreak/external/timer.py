"""`daybreak time`: run any program as a child, stream its output, read its MLPerf log, record the run.

The child runs in its own process group (session), so ending it (``--stop-at-target``, Ctrl-C) ends its
children too: SIGTERM to the group, then SIGKILL after ``grace_s``. Its stdout and stderr are passed through
unchanged and appended, line by line and flushed, to ``program.log``; the ``:::MLLOG`` records in them go to
``mllog.log``. Each line's arrival is stamped with ``time.time()`` for the clock cross-check.

The run directory is the same as `daybreak run`'s (result.json, dawnbench.json/.tsv, mllog.log), plus
``program.log`` and ``external.json`` (how the program ended, the clock check, malformed records).

Here: the configuration, the checks before anything runs, ``--log FILE`` and the live session's loop. The
child's process group, pipes and terminal are daybreak.external.child; the files, daybreak.external.recorder;
reading and analysing the mllog stream, daybreak.external.mllog_reader / mllog_analysis / mllog_clock /
mllog_verdict.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from daybreak.errors import ConfigError, DataError
from daybreak.external.child import (
    ProcessGroup, Terminal, TimingTerminated, install_signal_handlers, read_pipe, restore_signal_handlers,
)
from daybreak.external.benchmark import TimedAgainst, declared_benchmark, mlperf_target, task_of_log
from daybreak.external.mllog_analysis import Analysis, analyze
from daybreak.external.mllog_reader import ACCURACY_UNITS, BadLine, MllogEvent, TargetWatch, parse_line, parse_log
from daybreak.external.config import TimeConfig
from daybreak.external.mllog_verdict import ProgramEnd, describe_exit
from daybreak.external.recorder import ExternalRecorder
from daybreak.measure.system import SystemInfo, host_info, system_info
from daybreak.metrics import get_metric
from daybreak.mlperf_benchmarks import Goal
from daybreak.pricing import resolve_price
from daybreak.records.mllog import CHECKPOINT_STOP, C
from daybreak.records.run import EXTERNAL_ENERGY, EXTERNAL_RECIPE, ClockRules, EnergyRecord, RunResult
from daybreak.rules import get_rules
from daybreak.tasks import get_task
from daybreak.train.rundir import check_out_dir, default_run_dir

RECIPE = EXTERNAL_RECIPE
MAX_LINE_BYTES = 1 << 20  # a "line" longer than this is cut (kept whole in program.log, in pieces)
_SAME_CLOCK_SLACK_MS = 1000.0  # time_ms this close to daybreak's wall clock is read as the same clock
_RECORD_KEYS = {C.RUN_START, C.RUN_STOP, C.EVAL_ACCURACY, C.EVAL_STOP, C.INIT_STOP, CHECKPOINT_STOP}


def _clock_rules(config: TimeConfig, mode: str, against: TimedAgainst) -> ClockRules:
    """What the headline clock counts, in words that name the rule set (every rule set is in ``clocks``)."""
    rules = get_rules(config.rule_set)
    timer = ("the program's own mllog time_ms, cross-checked against daybreak's wall clock (time.time at each "
             f"line's arrival, tolerance {config.tolerance})" if mode == "command"
             else "the program's own mllog time_ms, read from a log file: not cross-checked against a wall clock")
    named = f"{rules.title} rules (--rules {rules.name})"
    if rules.contiguous and against.benchmark is not None:  # MLPerf's own verdict on its benchmark's log
        return ClockRules(
            starts=f"{named}: at the log's run_start (initialization before it excluded, if it stayed under the "
                   f"limit of MLPerf Training {against.round})",
            init_excluded=True, eval_included=True, checkpoint_included=True,
            stops=f"{named}: at run_stop when its status is success, the initialization stayed under the round's "
                  "limit and (closed division) an evaluation met the target: MLPerf's result, run_stop - run_start; "
                  "otherwise not reached, whatever an evaluation crossed",
            device_synchronized=False, timer=timer)
    if rules.contiguous:  # MLPerf: from run_start, never paused
        return ClockRules(
            starts=f"{named}: at the program's run_start mllog event (its init before run_start is excluded, up "
                   f"to {(rules.max_init_excluded_s or 0) / 60:g} minutes)",
            init_excluded=True, eval_included=True, checkpoint_included=True,
            stops=f"{named}: at run_stop when the run stops with status success right after its target evaluation "
                  "(MLPerf's result, run_stop - run_start), else at the end of the first evaluation at or above the "
                  "target; evaluations and checkpoints inside the run count",
            device_synchronized=False, timer=timer)
    return ClockRules(
        starts=f"{named}: " + ("at the program's launch (its start-up, init and data loading count)"
                               if mode == "command" else
                               "at the log's init_start (the program's init and data loading count; at run_start "
                               "when the log has no init_start)"),
        init_excluded=False, eval_included=False, checkpoint_included=False,
        stops=f"{named}: at the end of the first evaluation meeting the target ({against.goal.label}), logged "
              "before run_stop; eval_start..eval_stop and checkpoint_start..checkpoint_stop intervals are excluded",
        device_synchronized=False, timer=timer)


def task_target(task_name: str, target: float | None) -> TimedAgainst:
    """A daybreak task's target: ``--target``, else the task's."""
    task = get_task(task_name)
    return TimedAgainst(task=task.name, goal=Goal.single(task.metric, task.target if target is None else target),
                        default_target=task.target)


def _prepare(config: TimeConfig, mode: str, started_at: datetime,
             against: TimedAgainst) -> tuple[RunResult, Path, float]:
    """Check everything a user can get wrong; build the initial record. Nothing is written yet."""
    price, instance, price_date = resolve_price(config.cost_per_hour, config.instance, config.price_file)
    if not (config.grace_s >= 0 and config.grace_s != float("inf")):
        raise ConfigError(f"--grace-s {config.grace_s}: must be a finite number of seconds >= 0")
    if config.unit not in ACCURACY_UNITS:
        raise ConfigError(f"--accuracy-unit {config.unit!r}: choose one of {', '.join(ACCURACY_UNITS)}")
    try:
        rules = config.rule_set
    except ValueError as e:
        raise ConfigError(f"--rules: {e}") from None
    out = config.out or default_run_dir(against.task.replace(":", "-"), RECIPE, started_at)
    check_out_dir(out)
    config.out = out
    result = RunResult(
        run_id=out.name, task=against.task, recipe=RECIPE, model="external", framework="unknown",
        metric=against.metric.name, target=against.target, target_is_default=against.target == against.default_target,
        official=True, hyperparameters={}, seed=0,
        device="external", amp="unknown", compile="off", threads=None, stop_at_target=config.stop_at_target,
        eval_every_epochs=None, eval_every_steps=None, cost_per_hour=price, instance=instance,
        price_date=price_date, clock=_clock_rules(config, mode, against), rules=rules,
        energy=EnergyRecord(unavailable={kind: EXTERNAL_ENERGY for kind in ("gpu", "cpu_package", "dram")}),
        # live: the program runs on this machine; --log: on whatever the log declares (filled in by ``apply``)
        system=system_info() if mode == "command" else SystemInfo.declared(None),
        analyzed_on=None if mode == "command" else host_info(),
        data_source="external program" if mode == "command" else f"mllog file {config.log}",
        started_at=started_at,
        command=list(config.command) if mode == "command" else list(config.invocation),
    )
    return result, out, against.default_target


# --- --log FILE --------------------------------------------------------------------------------------------
def time_log(config: TimeConfig) -> RunResult:
    """The record of a finished run from its mllog file (no wall clock: the record says so)."""
    assert config.log is not None
    path = Path(config.log)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DataError(f"--log {path}: cannot read it ({err.strerror or err})") from None
    events, bad = parse_log(data)  # what the log declares (its submission_benchmark), read leniently
    if not events and not bad:
        raise DataError(f"--log {path}: no :::MLLOG records in it")
    task = task_of_log(events, config.task)
    if task is None:  # a log of an MLPerf benchmark: read as mlperf-logging reads it; the table gives its target
        events, bad = parse_log(data, mlperf=True)
        against = mlperf_target(events, declared_benchmark(events) or "", config.round, path, bad)
        assert against.benchmark is not None  # (an MLPerf benchmark's target names it)
        if config.target is not None:
            raise ConfigError(f"--target: the target of MLPerf Training {against.round} {against.benchmark.name} is "
                              f"{against.goal.label} (daybreak/mlperf_benchmarks.py); --target applies to daybreak's "
                              "tasks")
        if config.unit != "auto":
            raise ConfigError(f"--accuracy-unit {config.unit}: the unit of {against.benchmark.name}'s "
                              f"{against.metric.label} is its definition's ({against.metric.unit}); --accuracy-unit "
                              "applies to daybreak's tasks")
        unit = "fraction"  # as logged: the table's unit, never converted
    else:
        if config.round is not None:
            raise ConfigError(f"--round applies to a log of an MLPerf Training benchmark; this one is of daybreak "
                              f"task {task!r}")
        against = task_target(task, config.target)
        unit = config.unit
    started_at = _from_ms(min((e.time_ms for e in events), default=None)) or datetime.now(timezone.utc)
    result, out, task_target_value = _prepare(config, "log", started_at, against)
    rec = ExternalRecorder(out, result, config, mode="log", task_target=task_target_value, against=against)
    try:
        for e in events:
            rec.mllog_line(e.text)
        a = analyze(events, target=against.target, rules=config.rule_set, tolerance=None, unit=unit,  # type: ignore[arg-type]
                    goal=against.goal, mlperf_round=against.round, malformed=bad)
        total = None if a.first_time_ms is None or a.last_time_ms is None else \
            (a.last_time_ms - a.first_time_ms) / 1000.0
        rec.finish(a, bad, None, total_s=total, finished_at=_from_ms(a.last_time_ms) or datetime.now(timezone.utc))
    finally:
        rec.close()
    return rec.result


def _from_ms(ms: float | None) -> datetime | None:
    if ms is None or not 946684800000 <= ms <= 32503680000000:  # 2000..3000: plausibly epoch milliseconds
        return None
    return datetime.fromtimestamp(ms / 1000.0, timezone.utc)


# --- a live child ------------------------------------------------------------------------------------------
def _check_command(command: list[str]) -> None:
    if not command:
        raise ConfigError("give the program to time after --, e.g. `daybreak time --task digits -- python train.py`"
                          ", or --log FILE")
    exe = command[0]
    if os.sep in exe or (os.altsep and os.altsep in exe):
        if not Path(exe).is_file():
            raise ConfigError(f"cannot run {exe!r}: no such file")
        if not os.access(exe, os.X_OK):
            raise ConfigError(f"cannot run {exe!r}: not executable")
    elif shutil.which(exe) is None:
        raise ConfigError(f"cannot run {exe!r}: not found on PATH")


def time_command(config: TimeConfig) -> RunResult:
    """Run ``config.command``, time it from its mllog stream, write the run directory; return the record."""
    _check_command(config.command)
    if config.task is None:
        raise ConfigError("--task is required for a program timed live: the task whose target applies (see `daybreak "
                          "tasks`); with --log FILE, the log's submission_benchmark names it")
    if config.round is not None:
        raise ConfigError("--round applies to --log FILE of an MLPerf Training benchmark")
    started_at = datetime.now(timezone.utc)
    against = task_target(config.task, config.target)
    result, out, task_target_value = _prepare(config, "command", started_at, against)
    rec = ExternalRecorder(out, result, config, mode="command", task_target=task_target_value, against=against)
    try:
        return _Session(config, rec).run()
    except Exception as e:  # a bug or an I/O error in daybreak itself: record it, then let the CLI report it
        rec.result.status = "failed"
        rec.result.message = (f"daybreak: {type(e).__name__}: {e}".splitlines() or [""])[0][:500]
        rec.result.finished_at = datetime.now(timezone.utc)
        try:
            rec.save()
        except Exception:  # noqa: BLE001 - the original error matters more
            pass
        raise
    finally:
        rec.close()


class _Session:
    def __init__(self, config: TimeConfig, rec: ExternalRecorder):
        self.config = config
        self.rec = rec
        self.events: list[MllogEvent] = []
        self.bad: list[BadLine] = []
        self.watch = TargetWatch(rec.result.target, config.unit, get_metric(rec.result.metric))  # type: ignore[arg-type]
        self.stop_requested = False
        self.term = Terminal(enabled=not config.quiet)
        self.wall0 = time.time()
        self.spawn_wall: float | None = None  # time.time() when the program was started
        self.run_start_wall: float | None = None
        self._partial = {"stdout": b"", "stderr": b""}

    def _analyze(self) -> Analysis:
        return analyze(self.events, target=self.rec.result.target, rules=self.config.rule_set,
                       tolerance=self.config.tolerance, unit=self.config.unit,  # type: ignore[arg-type]
                       launch_ms=self._launch_ms(), launch_wall=self.spawn_wall,
                       metric=get_metric(self.rec.result.metric))

    def _launch_ms(self) -> float | None:
        """The program's launch on its own clock (time_ms). A program that stamps its records with this
        machine's clock (time_ms between the launch and the record's arrival) gets the launch as is; any other
        clock is mapped through the first record's arrival (the pipe's delay then counts as start-up)."""
        if self.spawn_wall is None:
            return None
        spawn_ms = self.spawn_wall * 1000.0
        first = next((e for e in self.events if e.wall is not None), None)
        if first is None or first.wall is None:  # (none has a wall time)
            return spawn_ms
        arrival_ms = first.wall * 1000.0
        if spawn_ms - _SAME_CLOCK_SLACK_MS <= first.time_ms <= arrival_ms + _SAME_CLOCK_SLACK_MS:
            return min(spawn_ms, first.time_ms)
        note = ("the program's time_ms is not this machine's clock: its launch is placed on the program's clock by "
                "the arrival of its first record")
        if note not in self.rec.extra_notes:
            self.rec.extra_notes.append(note)
        return first.time_ms - (arrival_ms - spawn_ms)

    def _line(self, raw: bytes, wall: float) -> None:
        lineno = self.rec.program_line(raw)
        if b":::MLLOG" not in raw:
            return
        events, bad = parse_line(raw.decode("utf-8", errors="replace"), lineno, wall)
        self.bad.extend(bad)
        update = False
        for e in events:
            self.events.append(e)
            self.rec.mllog_line(e.text)
            if e.key == C.RUN_START and self.run_start_wall is None:
                self.run_start_wall = wall
            if self.watch.feed(e) and self.config.stop_at_target:
                self.stop_requested = True
            update = update or e.key in _RECORD_KEYS
        if update:
            self.rec.apply(self._analyze(), self.bad)
            self.rec.save()

    def _chunk(self, name: str, wall: float, chunk: bytes | None) -> None:
        if chunk is None:  # EOF: a last line without newline
            if self._partial[name]:
                self._line(self._partial[name], wall)
                self._partial[name] = b""
            return
        self.term.write(name, chunk)
        buf = self._partial[name] + chunk
        *lines, rest = buf.split(b"\n")
        for raw in lines:
            self._line(raw, wall)
        while len(rest) > MAX_LINE_BYTES:
            self._line(rest[:MAX_LINE_BYTES], wall)
            rest = rest[MAX_LINE_BYTES:]
        self._partial[name] = rest

    def _status_text(self) -> str:
        now = time.time()
        parts = [f"[daybreak time] {now - self.wall0:6.1f} s"]
        if self.run_start_wall is None:
            parts.append("waiting for run_start")
        else:
            parts.append(f"run {now - self.run_start_wall:.1f} s")
        if self.watch.last_accuracy is not None:
            epoch = f" (epoch {self.watch.last_epoch})" if self.watch.last_epoch is not None else ""
            parts.append(f"last accuracy {self.watch.last_accuracy * 100:.2f}%{epoch}")
        parts.append(f"target {self.rec.result.target * 100:.2f}%")
        if self.watch.reached_event is not None:
            parts.append("REACHED" + (", stopping" if self.config.stop_at_target else ""))
        return " | ".join(parts)

    def run(self) -> RunResult:
        config = self.config
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")  # Python children: every print arrives when printed
        spawn_wall = self.spawn_wall = time.time()
        spawn_t = time.monotonic()
        try:
            proc = subprocess.Popen(config.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env, start_new_session=os.name == "posix",
                                    bufsize=0)
        except OSError as e:
            a = self._analyze()
            self.rec.finish(a, self.bad, ProgramEnd(returncode=None), total_s=time.monotonic() - spawn_t,
                            finished_at=datetime.now(timezone.utc))
            self.rec.result.status = "failed"
            self.rec.result.message = f"cannot start {config.command[0]!r}: {e.strerror or e}"
            self.rec.save()
            return self.rec.result
        group = ProcessGroup(proc)
        q: queue.Queue[tuple[str, float, bytes | None]] = queue.Queue()
        readers = [threading.Thread(target=read_pipe, args=(proc.stdout, "stdout", q), daemon=True),
                   threading.Thread(target=read_pipe, args=(proc.stderr, "stderr", q), daemon=True)]
        for t in readers:
            t.start()
        self.rec.external.update(pid=proc.pid, spawned_at_wall=spawn_wall)

        interrupted: str | None = None
        old_handlers = install_signal_handlers()
        try:
            interrupted, stopped = self._pump(proc, group, q)
        finally:
            restore_signal_handlers(old_handlers)
            # whatever is left of the group (grandchildren, a program that ignored SIGTERM) goes now
            try:
                group.end(self.config.grace_s if not interrupted else min(self.config.grace_s, 2.0))
            except KeyboardInterrupt:
                group.kill()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            self.term.clear()

        total_s = time.monotonic() - spawn_t
        returncode = proc.returncode
        self.rec.external.update(returncode=returncode, exit=describe_exit(returncode), stopped_by_daybreak=stopped,
                                 interrupted=interrupted, program_lines=self.rec.program_lines)
        end = ProgramEnd(returncode=returncode, stopped_by_daybreak=stopped, interrupted=interrupted)
        self.rec.finish(self._analyze(), self.bad, end, total_s=total_s, finished_at=datetime.now(timezone.utc))
        return self.rec.result

    def _pump(self, proc: subprocess.Popen[bytes], group: ProcessGroup,
              q: queue.Queue[tuple[str, float, bytes | None]]) -> tuple[str | None, bool]:
        """Read until both pipes close and the child has exited; end it when asked. -> (interrupted, stopped)."""
        grace = self.config.grace_s
        eof = {"stdout": False, "stderr": False}
        term_at: float | None = None
        kill_at: float | None = None
        leader_exit: float | None = None
        interrupted: str | None = None
        stopped = False
        while True:
            try:
                try:
                    name, wall, chunk = q.get(timeout=0.1)
                    if chunk is None:
                        eof[name] = True
                    self._chunk(name, wall, chunk)
                    while True:  # drain what is there before looking at the clock again
                        name, wall, chunk = q.get_nowait()
                        if chunk is None:
                            eof[name] = True
                        self._chunk(name, wall, chunk)
                except queue.Empty:
                    pass
                now = time.monotonic()
                if self.stop_requested and term_at is None:
                    stopped = True
                    term_at = now
                    group.signal(signal.SIGTERM)
                if proc.poll() is not None and leader_exit is None:
                    leader_exit = now
                if all(eof.values()) and leader_exit is not None:
                    return interrupted, stopped
                if leader_exit is not None and term_at is None and now - leader_exit > 1.0:
                    term_at = now  # the program is gone but something in its group still holds the pipes
                    group.signal(signal.SIGTERM)
                if term_at is not None and kill_at is None and now - term_at >= grace:
                    kill_at = now
                    group.kill()
                if kill_at is not None and leader_exit is not None and now - kill_at > 2.0:
                    return interrupted, stopped  # something outside the group holds the pipes: stop reading
                self.term.status(self._status_text)
            except (KeyboardInterrupt, TimingTerminated) as e:
                if interrupted is not None:  # asked twice: no more grace
                    group.kill()
                    kill_at = kill_at or time.monotonic()
                    continue
                interrupted = ("interrupted by the user (Ctrl-C)" if isinstance(e, KeyboardInterrupt)
                               else "daybreak was terminated")
                term_at = time.monotonic()
                group.signal(signal.SIGTERM)


__all__ = ["TimeConfig", "time_command", "time_log"]
