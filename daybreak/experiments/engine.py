"""Running an experiment: every trial a fresh process, started exactly as ``daybreak run`` would be.

Why fresh processes: the first run in a process pays the imports, the allocator's growth, CUDA context creation,
cuDNN/cuBLAS handles and every compilation; the runs after it in the same process pay none of it. Repeating runs
in one warm process therefore measures the first run cold and the others warm (a 10x difference on digits), and
whichever arm runs first looks slow. A trial here is ``python -m daybreak run --config TRIAL.toml --out RUN_DIR``
(``daybreak time ... -- PROGRAM`` for an external program): the same cold start, the same clocks, the same record
as a run of its own. The executor (daybreak.executors: local subprocesses, or a Slurm job array)
starts them in the recorded, interleaved order.

The experiment directory::

    DIR/experiment.json           the plan (arms, seeds, order, executor) and every trial's state, after each trial
    DIR/<arm>/seed-<n>/           one ordinary run directory per trial (result.json, config.toml, ...)
    DIR/trials/<key>.toml         the options each trial ran with (daybreak run --config)
    DIR/trials/<key>.log          its output
    DIR/summary.json, ...         the command's summary (repeat: summary.json; lesion.json; ab.json)

A killed experiment resumes with ``--resume``: finished trials (reached, not reached, diverged, failed) are kept,
never run again; unfinished ones (killed, interrupted, lost) are cleared and run again, in the recorded order.

One writer at a time: the command holds ``DIR/experiment.lock`` (an exclusive ``flock``, released by the kernel when
the process ends, however it ends) from before it writes anything until it exits; a second command on the same
directory (a second ``--resume`` of a running experiment) is refused with one line naming the running one, its PID
and host, before it touches a file. An experiment whose trials were stopped before they finished (``scancel``, a
Slurm time limit, a killed process) ends with :class:`ExperimentStopped` (exit status 130) and a summary of what
stopped them; what finished is kept.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from daybreak.config import RunConfig
from daybreak.errors import ConfigError, DaybreakError, RecordError
import daybreak.executors as ex
from daybreak.experiments.plan import ExperimentConfig, trial_order
from daybreak.options import to_toml
from daybreak.records.experiment import Arm, Experiment, Trial
from daybreak.records.run import RunResult

FINISHED = ("reached", "not_reached", "diverged", "failed")
EXIT_USAGE = 2  # a trial that exits 2 was refused before it ran (a user mistake): the experiment stops
TRIALS_DIR = "trials"
LOCK_FILE = "experiment.lock"


class ExperimentStopped(DaybreakError):
    """Trials were stopped before they finished (scancel, a time limit, a killed process): what finished is kept,
    ``--resume`` runs the others again."""

    exit_code = 130


class TrialRefused(ConfigError):
    """A trial's own command refused to run (exit status 2): every trial would; stop and say why."""


def log(message: str) -> None:
    print(f"daybreak: {message}", file=sys.stderr, flush=True)


# --- the experiment directory -------------------------------------------------------------------------------------

class ExperimentLock:
    """``with ExperimentLock(out, invocation):`` -- the one writer of an experiment directory (see the module
    docstring). Creates ``out`` when it does not exist; if the command then writes nothing else there (it was
    refused), the folder it created is removed again."""

    def __init__(self, out: Path, invocation: list[str]):
        self.out, self.invocation = Path(out), invocation
        self.fd: int | None = None
        self.created = False

    def __enter__(self) -> "ExperimentLock":
        try:
            import fcntl
        except ImportError:  # no flock on this platform: no lock
            return self
        if self.out.exists() and not self.out.is_dir():
            raise ConfigError(f"--out {self.out}: exists and is not a directory")
        self.created = not self.out.exists()
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(fd)
            os.close(fd)
            raise ConfigError(f"--out {self.out}: another daybreak is writing this experiment: {holder}; wait for "
                              "it to finish (or stop it), then run again (with --resume to finish it)") from None
        self.fd = fd
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "command": " ".join(self.invocation)}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode("utf-8"), 0)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is None:
            return
        try:
            if self.created and [p.name for p in self.out.iterdir()] == [LOCK_FILE]:
                (self.out / LOCK_FILE).unlink()  # refused before it wrote anything: leave no folder behind
                self.out.rmdir()
        except OSError:
            pass
        finally:
            os.close(self.fd)  # releases the lock
            self.fd = None


def _holder(fd: int) -> str:
    """Who holds the lock, from the lock file: "pid 123 on host node1, since ..., running `daybreak repeat ...`"."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace") or "{}")
        return (f"pid {info['pid']} on host {info['host']}, since {info['started_at']}, running "
                f"`{info['command'][:200]}`")
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not yet written its name into the lock file"


def open_experiment(out: Path, command: str, arms: list[Arm], seeds: list[int], config: ExperimentConfig,
                    executor: dict[str, Any], rules: str, invocation: list[str],
                    node: RunConfig | None = None) -> Experiment:
    """The experiment in ``out``: a new one (the directory must be new or empty), or with ``--resume`` the one
    recorded there, which must be the same experiment (same command, arms and options). ``node``: the options
    naming this node of a multi-node experiment (--node-rank, --rdzv-endpoint), recorded for this invocation."""
    record = _open(out, command, arms, seeds, config, executor, rules, invocation)
    if node is not None and node.nnodes > 1:
        record.node_rank, record.rdzv_endpoint = node.node_rank, node.rdzv_endpoint
        record.save(out)
    return record


def _open(out: Path, command: str, arms: list[Arm], seeds: list[int], config: ExperimentConfig,
          executor: dict[str, Any], rules: str, invocation: list[str]) -> Experiment:
    file = out / Experiment.FILE
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    if file.exists():
        record = Experiment.load(out)
        done = sum(1 for t in record.trials if t.state in ("done", "failed"))
        if not config.resume:
            raise ConfigError(f"--out {out} holds an experiment ({done} of {len(record.trials)} trials finished): add "
                              f"--resume to finish it, or choose another --out")
        _check_same(record, command, arms, seeds, rules)
        record.invocations.append(invocation)
        record.executor = executor
        record.effect, record.scored_runs = config.effect, config.scored_runs  # how it is summarized, not what ran
        extra = [s for s in seeds if s not in record.seeds]
        if extra:  # --resume with more --runs: the new seeds follow, interleaved the same way
            record.trials += trial_order(record.arms, extra, record.order, record.order_seed + len(record.seeds),
                                         start=len(record.trials))
            record.seeds += extra
            record.complete = False
        return record
    if config.resume:
        raise ConfigError(f"--resume: {out} holds no experiment ({Experiment.FILE} is missing)")
    if out.exists() and any(p.name != LOCK_FILE for p in out.iterdir()):
        raise ConfigError(f"--out {out}: not empty and holds no experiment; choose a new directory")
    record = Experiment(command=command, arms=arms, seeds=seeds, order=config.order, order_seed=config.order_seed,
                        rules=rules, trials=trial_order(arms, seeds, config.order, config.order_seed),
                        executor=executor, busy_policy=config.busy, confidence=config.confidence, effect=config.effect,
                        scored_runs=config.scored_runs,
                        created_at=datetime.now(timezone.utc), invocations=[invocation])
    out.mkdir(parents=True, exist_ok=True)
    record.save(out)
    return record


def _check_same(record: Experiment, command: str, arms: list[Arm], seeds: list[int], rules: str) -> None:
    where = f"the experiment in {Experiment.FILE}"
    if record.command != command:
        raise ConfigError(f"--resume: {where} is a `daybreak {record.command}`, not `{command}`")
    if [a.name for a in record.arms] != [a.name for a in arms]:
        raise ConfigError(f"--resume: {where} has arms {', '.join(a.name for a in record.arms)}, not "
                          f"{', '.join(a.name for a in arms)}")
    for old, new in zip(record.arms, arms):
        for key in sorted(set(old.config) | set(new.config)):
            if _norm(old.config.get(key)) != _norm(new.config.get(key)):
                raise ConfigError(f"--resume: arm {old.name} was recorded with {key}={old.config.get(key)!r}, not "
                                  f"{new.config.get(key)!r}; resume with the same options (or leave them out)")
        if old.program != new.program:
            raise ConfigError(f"--resume: arm {old.name} was recorded with another program")
    if record.seeds[:len(seeds)] != seeds[:len(record.seeds)]:
        raise ConfigError(f"--resume: {where} has seeds {_seeds(record.seeds)}, not {_seeds(seeds)}")
    if record.rules != rules:
        raise ConfigError(f"--resume: {where} uses --rules {record.rules}, not {rules}")


def _seeds(seeds: list[int]) -> str:
    return f"{seeds[0]}..{seeds[-1]}" if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)) else str(seeds)


def _norm(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


# --- one trial as a process ----------------------------------------------------------------------------------------

def trial_command(out: Path, arm: Arm, trial: Trial, record_node: Experiment | None = None) -> list[str]:
    """The trial's command line: a fresh `daybreak run` (or `daybreak time` for an external program)."""
    run_dir = out / trial.run_dir
    if arm.program:
        cfg = RunConfig(**arm.config)
        argv = [sys.executable, "-m", "daybreak", "time", "--task", cfg.task, "--rules", cfg.rules, "--quiet",
                "--out", str(run_dir)]
        if cfg.target is not None:
            argv += ["--target", repr(cfg.target)]
        if cfg.cost_per_hour is not None:
            argv += ["--cost-per-hour", repr(cfg.cost_per_hour)]
        if cfg.instance:
            argv += ["--instance", cfg.instance]
        return argv + ["--", *arm.program]
    config_file = out / TRIALS_DIR / f"{trial.key}.toml"
    argv = [sys.executable, "-m", "daybreak", "run", "--config", str(config_file), "--out", str(run_dir), "--quiet"]
    if record_node is not None and record_node.rdzv_endpoint:  # a trial over several nodes: this node's part
        argv += ["--node-rank", str(record_node.node_rank), "--rdzv-endpoint", record_node.rdzv_endpoint]
    return argv


def write_trial_config(out: Path, arm: Arm, trial: Trial) -> Path:
    values = dict(arm.config, seed=trial.seed)
    values.pop("out", None)
    for key in ("data_dir", "price_file", "init_from"):  # a trial may run elsewhere (a Slurm node): absolute paths
        if values.get(key):
            values[key] = str(Path(values[key]).expanduser().resolve())
    recipe = values.get("recipe")
    if recipe and (str(recipe).endswith(".py") or "/" in str(recipe)):
        values["recipe"] = str(Path(recipe).expanduser().resolve())
    RunConfig(**values)  # checked before any trial runs
    path = out / TRIALS_DIR / f"{trial.key}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = [f"trial {trial.key} of {out}: arm {arm.name}, seed {trial.seed}",
              f"run it alone: daybreak run --config {path.name} --out SOMEWHERE"]
    path.write_text(to_toml(values, RunConfig, header), encoding="utf-8")
    return path


def devices_of(arm: Arm) -> int:
    return int(arm.config.get("nproc_per_node") or 1)


# --- reading a finished trial --------------------------------------------------------------------------------------

def read_trial(out: Path, trial: Trial, rules: str) -> RunResult | None:
    """Fill ``trial`` from its run directory; the record, or None when the directory holds none."""
    try:
        result = RunResult.load(out / trial.run_dir)
    except RecordError:
        return None
    trial.status = result.status
    trial.reached = bool(result.reached)
    trial.clocks_s = {name: c.time_to_target_s for name, c in result.clocks.items()}
    trial.time_to_target_s = trial.clocks_s.get(rules, result.time_to_target_s) if result.reached else None
    trial.final_accuracy = result.final_accuracy
    trial.cost_usd = result.cost_usd if result.rules == rules else _cost(result, trial.time_to_target_s)
    trial.energy_j = result.energy.joules_to_target.get(rules) if result.energy.available else None
    phases: dict[str, float] = {}
    for p in result.phases:
        phases[p.phase] = phases.get(p.phase, 0.0) + (p.end_s - p.start_s)
    trial.data_load_s = phases.get("data_load")
    trial.model_init_s = phases.get("model_init")
    reasons = list(result.context.warnings)
    trial.busy = bool(reasons)
    trial.busy_reason = reasons[0] if reasons else None
    return result


def _cost(result: RunResult, seconds: float | None) -> float | None:
    from daybreak.pricing import cost_usd

    return cost_usd(seconds, result.cost_per_hour)


def describe_trial(trial: Trial) -> str:
    if trial.state in ("lost", "interrupted") or trial.status is None:
        return f"{trial.state}" + (f": {trial.error}" if trial.error else "")
    if trial.reached and trial.time_to_target_s is not None:
        text = f"reached in {trial.time_to_target_s:.3f} s"
    else:
        acc = "-" if trial.final_accuracy is None else f"{trial.final_accuracy * 100:.2f}%"
        text = f"{trial.status.replace('_', ' ')} (final {acc})"
    return text + (f"  [busy: {trial.busy_reason}]" if trial.busy else "")


# --- running ---------------------------------------------------------------------------------------------------------

Summarize = Callable[[Experiment], None]


def pending_trials(out: Path, record: Experiment) -> list[Trial]:
    """The trials still to run, in order; an unfinished trial's leftovers are cleared (it runs again from scratch)."""
    todo = []
    for trial in record.trials:
        if trial.state in ("done", "failed") and record.node_rank != 0:
            continue  # a follower node records no run: its trial took part, node 0 holds the result
        if trial.state in ("done", "failed"):
            result = read_trial(out, trial, record.rules)
            if result is not None and result.status in FINISHED:
                continue
        trial.state, trial.status, trial.exit_code, trial.error = "pending", None, None, None
        run_dir = out / trial.run_dir
        if run_dir.exists():
            shutil.rmtree(run_dir)
        todo.append(trial)
    return todo


def run_pending(out: Path, record: Experiment, executor: "ex.Executor", summarize: Summarize, label: str) -> None:
    """Run every pending trial through ``executor``; experiment.json and the summary are rewritten after each."""
    arms = {a.name: a for a in record.arms}
    todo = pending_trials(out, record)
    if not todo:
        return
    total = len(record.trials)
    by_key = {t.key: t for t in todo}
    jobs = []
    for trial in todo:
        arm = arms[trial.arm]
        if not arm.program:
            write_trial_config(out, arm, trial)
        jobs.append(ex.Trial(key=trial.key, argv=trial_command(out, arm, trial, record), run_dir=out / trial.run_dir,
                             log=out / TRIALS_DIR / f"{trial.key}.log", devices=devices_of(arm)))
    record.save(out)
    refused: list[str] = []

    def on_done(job: "ex.Trial", outcome: "ex.TrialOutcome") -> None:
        trial = by_key[job.key]
        trial.invocation = len(record.invocations) - 1
        trial.exit_code, trial.host = outcome.exit_code, outcome.host
        trial.started_at, trial.finished_at, trial.error = outcome.started_at, outcome.finished_at, outcome.error
        result = None if record.node_rank != 0 else read_trial(out, trial, record.rules)
        if outcome.exit_code == EXIT_USAGE:  # refused before it trained (a user mistake): every trial would be
            trial.state = "pending"
            refused.append(f"trial {trial.key} was refused: {last_line(job.log)}")
        elif result is not None and result.status in FINISHED:
            trial.state = "done" if result.status != "failed" else "failed"
        elif record.node_rank != 0 and outcome.exit_code is not None:  # a follower: its part ended, node 0 records
            trial.state = "done" if outcome.exit_code == 0 else "failed"
        else:
            trial.state = "interrupted" if result is not None else "lost"
            if trial.error is None:
                trial.error = f"exit status {outcome.exit_code}; see {job.log}"
        record.updated_at = datetime.now(timezone.utc)
        record.save(out)
        if record.node_rank == 0:
            summarize(record)
        done = sum(1 for t in record.trials if t.state in ("done", "failed"))
        arm_label = "" if len(record.arms) == 1 else f" {trial.arm}"
        log(f"{label} [{done}/{total}]{arm_label} seed {trial.seed}: {describe_trial(trial)}")
        if refused:
            raise TrialRefused(refused[0])

    executor.run(jobs, on_done)
    if refused:
        raise TrialRefused(refused[0])


def last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return f"(no log at {path})"
    errors = [line for line in lines if line.startswith("daybreak: error:")]
    return (errors or lines or ["(empty log)"])[-1].removeprefix("daybreak: error: ")


def rerun_busy(out: Path, record: Experiment) -> list[Trial]:
    """``--busy rerun``: a new trial for each busy one (which is then excluded), once, appended to the order."""
    added = []
    for trial in list(record.trials):
        if trial.busy and not trial.excluded and trial.attempt == 1 and trial.state == "done":
            trial.excluded = True
            position = len(record.trials)
            again = Trial(key=f"{position:04d}-{trial.arm}-s{trial.seed}-rerun", position=position, arm=trial.arm,
                          seed=trial.seed, run_dir=f"{trial.run_dir}-rerun", attempt=2)
            record.trials.append(again)
            added.append(again)
    return added


def execute(out: Path, record: Experiment, executor: "ex.Executor", summarize: Summarize, label: str, *,
            more: Callable[[Experiment], list[int]] | None = None) -> Experiment:
    """Run the experiment to its end: the pending trials, then (``more``) further seeds while it asks for them,
    then the busy re-runs; mark it complete. KeyboardInterrupt: experiment.json says what finished; re-raised."""
    try:
        run_pending(out, record, executor, summarize, label)
        while more is not None and not stopped(record):
            seeds = more(record)
            if not seeds:
                break
            record.seeds += seeds
            record.trials += trial_order(record.arms, seeds, record.order, record.order_seed + len(record.seeds),
                                         start=len(record.trials))
            run_pending(out, record, executor, summarize, label)
        if record.busy_policy == "rerun" and rerun_busy(out, record):
            run_pending(out, record, executor, summarize, label)
        if record.busy_policy == "exclude":
            for trial in record.trials:
                trial.excluded = trial.excluded or trial.busy
        record.complete = all(t.state in ("done", "failed") for t in record.trials)
    finally:
        record.updated_at = datetime.now(timezone.utc)
        record.save(out)
        if record.node_rank == 0:
            summarize(record)
    return record


def stopped(record: Experiment) -> list[Trial]:
    """The trials that were stopped (or lost) before they finished."""
    return [t for t in record.trials if t.state in ("lost", "interrupted")]


def why_stopped(trial: Trial) -> str:
    """What stopped a trial, in words that group: "SIGTERM on node1 (scancel, preemption or the time limit)"."""
    error = trial.error or ""
    m = re.match(r"stopped on (\S+) after [0-9.]+ s: (.*)$", error)
    if m:  # the Slurm task's own account (daybreak.executors.slurm)
        return f"{m.group(2)} on {m.group(1)}"
    m = re.match(r"job \S+ (ended without a result: [^;]*)", error)
    if m:
        return m.group(1)
    if trial.exit_code is not None and trial.exit_code < 0:
        try:
            name = signal.Signals(-trial.exit_code).name
        except ValueError:
            name = f"signal {-trial.exit_code}"
        return f"{name}" + (f" on {trial.host}" if trial.host else "") + " (killed from outside the experiment)"
    if trial.state == "interrupted":
        return "interrupted (its record says so)" + (f" on {trial.host}" if trial.host else "")
    first = error.split("; see ", 1)[0]
    return first or "lost: no record and no exit status"


def raise_if_stopped(out: Path, record: Experiment, label: str, summary_file: str) -> None:
    """ExperimentStopped with a summary of what stopped the unfinished trials, if there are any."""
    unfinished = stopped(record)
    if not unfinished:
        return
    reasons = Counter(why_stopped(t) for t in unfinished)
    causes = "; ".join(f"{n} {why}" for why, n in reasons.most_common(4))
    finished = sum(1 for t in record.trials if t.state in ("done", "failed"))
    kept = (f"the {finished} finished are summarised in {out / summary_file}" if finished and
            (out / summary_file).exists() else f"{finished} finished" if finished else "none finished")
    raise ExperimentStopped(f"{label}: {len(unfinished)} of {len(record.trials)} trials were stopped before they "
                            f"finished ({causes}); {kept}; `--resume` runs the stopped ones again")


def counted(record: Experiment, arm: str) -> list[Trial]:
    """The trials of ``arm`` that the statistics count: finished, not excluded (busy policy, replaced re-runs)."""
    excluded_busy = record.busy_policy == "exclude"
    return [t for t in record.trials if t.arm == arm and t.state in ("done", "failed") and not t.excluded
            and not (excluded_busy and t.busy)]


def pairs(record: Experiment, baseline: str, candidate: str) -> list[tuple[Trial, Trial]]:
    """(baseline, candidate) trials with the same seed, both counted; ordered by seed."""
    a = {t.seed: t for t in counted(record, baseline)}
    b = {t.seed: t for t in counted(record, candidate)}
    return [(a[s], b[s]) for s in record.seeds if s in a and s in b]


def wall_elapsed_s(record: Experiment) -> float:
    starts = [t.started_at for t in record.trials if t.started_at]
    ends = [t.finished_at for t in record.trials if t.finished_at]
    return (max(ends) - min(starts)) if starts and ends else 0.0

