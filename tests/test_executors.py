"""Trial executors with real processes: local subprocesses, submitit's local executor and a real Slurm cluster.

The Slurm tests run when DAYBREAK_TEST_SLURM names a partition of a reachable cluster (CI starts a single-node
one with `.ci/start-slurm.sh` and exports what it prints); otherwise they are skipped, and the submitit code path
is still exercised through ``--executor submitit-local``.

The trials are small Python programs (TRIAL_PROGRAM below) that leave evidence instead of being timed: an
exclusive marker file proves that no two ran at once, a barrier proves that two did, a shared file records the
order in which they started, pid files let the tests check that an interrupted experiment left no process behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from daybreak.errors import ConfigError
from daybreak.executors import slurm
from daybreak.executors import (ExecutorOptions, LocalExecutor, Trial, TrialOutcome, check_options,
                                            make_executor)
from daybreak.executors.trials import sbatch_additional

SLURM_PARTITION = os.environ.get("DAYBREAK_TEST_SLURM")
needs_slurm = pytest.mark.skipif(
    not SLURM_PARTITION or shutil.which("sbatch") is None,
    reason="no Slurm cluster: set DAYBREAK_TEST_SLURM to a partition (CI: `bash .ci/start-slurm.sh` prints one)")
try:
    import submitit  # noqa: F401
    HAVE_SUBMITIT = True
except ImportError:
    HAVE_SUBMITIT = False
needs_submitit = pytest.mark.skipif(not HAVE_SUBMITIT, reason="submitit (daybreak[slurm]) is not installed")

TRIAL_PROGRAM = r'''
import argparse, os, subprocess, sys, time
p = argparse.ArgumentParser()
p.add_argument("--key", required=True)
p.add_argument("--exit", type=int, default=0)
p.add_argument("--order")          # append KEY to this file when starting
p.add_argument("--exclusive")      # create this marker exclusively while running (exit 7 if another holds it)
p.add_argument("--barrier", nargs=2)  # DIR N: wait until N trials have reached the barrier (exit 9 after 120 s)
p.add_argument("--hold")           # write pids (own, a child's, the parent's) to this file, then sleep long
p.add_argument("--sleep", type=float, default=0.0)
a = p.parse_args()
print(f"trial {a.key} starts; CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')} "
      f"EXTRA={os.environ.get('EXTRA')}", flush=True)
if a.order:
    with open(a.order, "a") as f:
        f.write(a.key + "\n")
if a.exclusive:
    try:
        fd = os.open(a.exclusive, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.close(fd)
    except FileExistsError:
        print("another trial is running", flush=True)
        sys.exit(7)
if a.barrier:
    folder, n = a.barrier[0], int(a.barrier[1])
    open(os.path.join(folder, a.key), "w").close()
    deadline = time.time() + 120
    while len(os.listdir(folder)) < n:
        if time.time() > deadline:
            sys.exit(9)
        time.sleep(0.05)
if a.hold:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(a.hold + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {child.pid} {os.getppid()}\n")
    os.replace(a.hold + ".tmp", a.hold)
    time.sleep(600)
time.sleep(a.sleep)
if a.exclusive:
    os.unlink(a.exclusive)
print(f"trial {a.key} ends with {a.exit}", flush=True)
sys.exit(a.exit)
'''


def make_trial(tmp_path: Path, key: str, *args: str, devices: int = 1, env: dict | None = None) -> Trial:
    program = tmp_path / "trial_program.py"
    if not program.exists():
        program.write_text(TRIAL_PROGRAM, encoding="utf-8")
    return Trial(key=key, argv=[sys.executable, str(program), "--key", key, *args], run_dir=tmp_path / "runs" / key,
                 log=tmp_path / "logs" / f"{key}.log", devices=devices, env=env or {})


def wait_for(predicate, timeout_s: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, parent not yet reaped) counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def fast(executor):
    """Poll a submitit-based executor often (the tests' trials last a second, not an hour)."""
    if isinstance(executor, slurm.SubmititExecutor):
        executor.poll_interval_s = 0.3
        executor.squeue_interval_s = 2.0
        executor.lost_grace_s = 2.0
    return executor


def executor_for(kind: str, tmp_path: Path, **options):
    if kind == "slurm":
        options.setdefault("slurm_partition", SLURM_PARTITION)
        options.setdefault("slurm_time_min", 5)
    return fast(make_executor(ExecutorOptions(executor=kind, **options), tmp_path / "experiment"))


KINDS = ["local", pytest.param("submitit-local", marks=needs_submitit),
         pytest.param("slurm", marks=[needs_submitit, needs_slurm])]


# --- the options --------------------------------------------------------------------------------------------------

def test_every_option_declares_its_flag_and_help():
    import dataclasses

    flags = [f.metadata["flag"] for f in dataclasses.fields(ExecutorOptions)]
    assert len(set(flags)) == len(flags) == len(dataclasses.fields(ExecutorOptions))
    for f in dataclasses.fields(ExecutorOptions):
        assert f.metadata["flag"] == "--" + f.name.replace("_", "-")
        assert len(f.metadata["help"]) > 15


@pytest.mark.parametrize("options, says", [
    (dict(executor="kubernetes"), "--executor 'kubernetes': choose one of local, slurm, submitit-local"),
    (dict(parallel=0), "--parallel 0"),
    (dict(executor="slurm", slurm_time_min=0), "--slurm-time-min 0"),
    (dict(executor="submitit-local", slurm_mem_gb=-1.0), "--slurm-mem-gb -1.0"),
    (dict(executor="slurm", slurm_array_parallelism=0), "--slurm-array-parallelism 0"),
    (dict(executor="slurm", slurm_additional=("account ml",)), "--slurm-additional 'account ml'"),
    (dict(executor="slurm", slurm_additional=("qos=",)), "--slurm-additional 'qos='"),
    (dict(slurm_partition="gpu"), "--slurm-partition applies to --executor slurm"),
    (dict(slurm_additional=("account=ml",)), "--slurm-additional applies to --executor slurm"),
])
def test_bad_options_are_one_line_config_errors(options, says):
    with pytest.raises(ConfigError) as err:
        check_options(ExecutorOptions(**options))
    assert says in str(err.value)
    assert "\n" not in str(err.value)


def test_slurm_without_the_slurm_commands_or_submitit_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch here
    if HAVE_SUBMITIT:
        with pytest.raises(ConfigError, match="sbatch, squeue, scancel, srun, sinfo not found on PATH"):
            check_options(ExecutorOptions(executor="slurm"))
    monkeypatch.setitem(sys.modules, "submitit", None)  # as if it were not installed
    for kind in ("slurm", "submitit-local"):
        with pytest.raises(ConfigError, match=r"needs submitit: pip install 'daybreak\[slurm\]'"):
            check_options(ExecutorOptions(executor=kind))
    with pytest.raises(ConfigError, match="--parallel applies to local executors"):
        check_options(ExecutorOptions(executor="slurm", parallel=2))


def test_sbatch_additional_and_gres_parsing():
    assert sbatch_additional(["account=ml", "--qos=high", "exclusive", "mail_type=END"]) == {
        "account": "ml", "qos": "high", "exclusive": True, "mail-type": "END"}
    assert slurm.gpus_per_node("(null)") == 0
    assert slurm.gpus_per_node("gpu:a100:8(S:0-1),nvme:1") == 8
    assert slurm.gpus_per_node("gpu:2,gpu:v100:4") == 4
    assert slurm.gpus_per_node("tmpdisk:100,gpu") == 1


# --- small trials through every executor --------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_exit_codes_logs_order_and_one_at_a_time(kind, tmp_path):
    """Three trials exiting 0, 3 and 5: each a separate outcome (a non-zero exit is not an executor error), each
    log holds its trial's output and environment, on_done sees every trial once, and they start in the given
    order one at a time (local default on CPU; an array throttled to 1 on Slurm)."""
    order, marker = tmp_path / "order.txt", tmp_path / "running"
    keys = ["0002-b-s1", "0000-a-s0", "0001-a-s1"]  # not sorted: the executor must keep the given order
    trials = [make_trial(tmp_path, key, "--exit", str(code), "--order", str(order), "--exclusive", str(marker),
                         "--sleep", "0.3", env={"EXTRA": f"x-{key}"})
              for key, code in zip(keys, (0, 3, 5))]
    options = {"slurm_array_parallelism": 1} if kind == "slurm" else {}
    seen: list[tuple[str, TrialOutcome]] = []
    outcomes = executor_for(kind, tmp_path, **options).run(trials, on_done=lambda t, o: seen.append((t.key, o)))

    assert [o.key for o in outcomes] == keys
    assert [o.exit_code for o in outcomes] == [0, 3, 5]
    assert all(o.error is None for o in outcomes)
    assert sorted(k for k, _ in seen) == sorted(keys) and all(o is dict(seen)[o.key] for o in outcomes)
    assert order.read_text().split() == keys
    for o, t in zip(outcomes, trials):
        assert o.host and o.started_at <= o.finished_at
        text = t.log.read_text()
        assert f"trial {t.key} starts" in text and f"EXTRA=x-{t.key}" in text
        assert f"trial {t.key} ends with {o.exit_code}" in text
        assert "another trial is running" not in text
    # one at a time: each started after the previous one finished (hosts' clocks agree: one machine)
    for before, after in zip(outcomes, outcomes[1:]):
        assert after.started_at >= before.finished_at


@pytest.mark.parametrize("kind", KINDS)
def test_parallel_trials_run_together(kind, tmp_path):
    """--parallel 2 (local) or two array tasks at once (Slurm): two trials meet at a barrier that neither could
    pass alone, the third then runs as well."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    trials = [make_trial(tmp_path, f"t{i}", "--barrier", str(barrier), "2") for i in range(2)]
    trials.append(make_trial(tmp_path, "t2", "--exit", "4"))
    options = {"slurm_array_parallelism": 2} if kind == "slurm" else {"parallel": 2}
    outcomes = executor_for(kind, tmp_path, **options).run(trials)
    assert [o.exit_code for o in outcomes] == [0, 0, 4]


def test_local_gpu_pool_hands_out_disjoint_slices(tmp_path):
    """A pool of three GPUs: a 2-device and a 1-device trial run together on disjoint slices; a 3-device trial
    waits for both and gets all three."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    trials = [make_trial(tmp_path, "two", "--barrier", str(barrier), "2", devices=2),
              make_trial(tmp_path, "one", "--barrier", str(barrier), "2", devices=1),
              make_trial(tmp_path, "three", devices=3)]
    executor = LocalExecutor(gpus=["4", "5", "7"])
    assert executor.parallel == 3
    outcomes = executor.run(trials)
    assert [o.exit_code for o in outcomes] == [0, 0, 0]

    def slice_of(t):
        return set(t.log.read_text().split("CUDA_VISIBLE_DEVICES=")[1].split()[0].split(","))

    two, one, three = (slice_of(t) for t in trials)
    assert len(two) == 2 and len(one) == 1 and not two & one and two | one <= {"4", "5", "7"}
    assert three == {"4", "5", "7"}
    assert outcomes[2].started_at >= max(outcomes[0].finished_at, outcomes[1].finished_at)
    with pytest.raises(ConfigError, match="a trial needs 4 GPUs but this machine shows 3"):
        executor.run([make_trial(tmp_path, "four", devices=4)])


def test_a_command_that_cannot_start_is_an_outcome_with_an_error(tmp_path):
    trial = Trial(key="missing", argv=[str(tmp_path / "no-such-program")], run_dir=tmp_path / "r",
                  log=tmp_path / "logs" / "missing.log")
    [outcome] = LocalExecutor().run([trial, ])
    assert outcome.exit_code is None and outcome.started_at is None
    assert outcome.error.startswith("cannot start") and "no-such-program" in outcome.error
    assert "cannot start" in trial.log.read_text()


# --- stopping -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_keyboard_interrupt_stops_everything(kind, tmp_path):
    """Ctrl-C (here raised from on_done once the first trial is done) ends the running trial's process group,
    its grandchild included, starts no further trial, and re-raises. On Slurm the array is cancelled: squeue
    shows none of its tasks any more."""
    hold = tmp_path / "hold.pids"
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    trials = [make_trial(tmp_path, "quick", "--barrier", str(barrier), "2"),
              make_trial(tmp_path, "holder", "--barrier", str(barrier), "2", "--hold", str(hold)),
              make_trial(tmp_path, "never")]
    options = {"slurm_array_parallelism": 2} if kind == "slurm" else {"parallel": 2}
    executor = executor_for(kind, tmp_path, **options)
    submitted_before = set(_our_jobs()) if kind == "slurm" else set()

    def interrupt(trial, outcome):
        assert trial.key == "quick" and outcome.exit_code == 0
        wait_for(hold.exists, what="the holder's pid file")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        executor.run(trials, on_done=interrupt)
    pids = [int(p) for p in hold.read_text().split()[:2]]
    wait_for(lambda: not any(alive(p) for p in pids), 30.0, "the holder and its child to end")
    if kind == "slurm":
        wait_for(lambda: not (set(_our_jobs()) - submitted_before), 60.0, "squeue to show none of the array")
    assert "trial never starts" not in (trials[2].log.read_text() if trials[2].log.exists() else "")


def test_a_killed_experiment_leaves_no_trial_running(tmp_path):
    """SIGKILL to the process running the local executor (nothing can be cleaned up then): the trial, in a
    process group of its own, still receives SIGTERM (Linux's parent-death signal) instead of running on."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux's")
    hold = tmp_path / "hold.pids"
    trial = make_trial(tmp_path, "orphan", "--hold", str(hold))
    runner = subprocess.Popen([sys.executable, "-c", f"""
import sys; from pathlib import Path
from daybreak.executors import LocalExecutor, Trial
LocalExecutor().run([Trial(key="orphan", argv={trial.argv!r}, run_dir=Path("r"), log=Path({str(trial.log)!r}))])
"""])
    try:
        wait_for(hold.exists, what="the trial's pid file")
        trial_pid, child_pid, parent_pid = (int(p) for p in hold.read_text().split())
        assert parent_pid == runner.pid
        runner.kill()
        runner.wait()
        wait_for(lambda: not alive(trial_pid), 30.0, "the orphaned trial to end")
    finally:
        runner.kill()
        for pid in (int(p) for p in (hold.read_text().split()[:2] if hold.exists() else ())):
            if alive(pid):
                os.kill(pid, 9)


def _our_jobs() -> list[str]:
    """Job ids squeue lists as pending or running (any user: the test cluster is ours)."""
    out = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True, check=True).stdout
    return out.split()


# --- Slurm only ---------------------------------------------------------------------------------------------------

@needs_submitit
@needs_slurm
def test_slurm_gives_each_trial_its_gpus_and_checks_the_partition(tmp_path):
    """The array reserves the largest trial's GPU count (gpus_per_node); each trial sees only its own slice."""
    trials = [make_trial(tmp_path, "one-gpu", devices=1), make_trial(tmp_path, "two-gpus", devices=2)]
    outcomes = executor_for("slurm", tmp_path).run(trials)
    assert [o.exit_code for o in outcomes] == [0, 0]
    partitions = slurm.partitions()
    if slurm.gpus_per_node(partitions[SLURM_PARTITION]) >= 2:
        assert "CUDA_VISIBLE_DEVICES=0 " in trials[0].log.read_text()
        assert "CUDA_VISIBLE_DEVICES=0,1 " in trials[1].log.read_text()
    with pytest.raises(ConfigError, match="--slurm-partition no-such-partition: no such partition; sinfo lists"):
        check_options(ExecutorOptions(executor="slurm", slurm_partition="no-such-partition"))


@needs_submitit
@needs_slurm
def test_slurm_task_lost_without_a_result_is_an_outcome_error(tmp_path):
    """The task's wrapper (submitit's process on the node) dies by SIGKILL: no result is written; squeue shows the
    task FAILED and the outcome says so, and the trial does not run on without its wrapper."""
    hold = tmp_path / "hold.pids"
    trial = make_trial(tmp_path, "victim", "--hold", str(hold))

    def kill_the_wrapper():
        wait_for(hold.exists, what="the trial's pid file")
        os.kill(int(hold.read_text().split()[2]), 9)

    killer = threading.Thread(target=kill_the_wrapper, daemon=True)
    killer.start()
    [outcome] = executor_for("slurm", tmp_path).run([trial])
    killer.join()
    trial_pid, child_pid, _ = (int(p) for p in hold.read_text().split())
    try:
        assert outcome.exit_code is None
        assert "ended without a result: Slurm state FAILED" in outcome.error
        wait_for(lambda: not alive(trial_pid), 30.0, "the trial to end with its wrapper")
    finally:
        for pid in (trial_pid, child_pid):  # the trial's own child is not the parent-death signal's business
            if alive(pid):
                os.kill(pid, 9)


@needs_submitit
@needs_slurm
def test_slurm_refusing_the_array_is_an_outcome_error_per_trial(tmp_path):
    trials = [make_trial(tmp_path, f"t{i}") for i in range(2)]
    seen = []
    executor = executor_for("slurm", tmp_path, slurm_additional=("constraint=no-such-feature",))
    outcomes = executor.run(trials, on_done=lambda t, o: seen.append(t.key))
    assert seen == ["t0", "t1"]
    for o in outcomes:
        assert o.exit_code is None and o.started_at is None
        assert o.error.startswith("sbatch refused the trials:") and "\n" not in o.error


# --- a real `daybreak run` ----------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_daybreak_run_trial_through_each_executor(kind, tmp_path):
    run_dir = tmp_path / "runs" / "digits"
    trial = Trial(key="0000-digits-s0", argv=[sys.executable, "-m", "daybreak", "run", "digits", "--quiet", "--out",
                                              str(run_dir)], run_dir=run_dir, log=tmp_path / "logs" / "digits.log")
    [outcome] = executor_for(kind, tmp_path).run([trial])
    assert outcome.exit_code == 0, trial.log.read_text()[-2000:]
    result = __import__("json").loads((run_dir / "result.json").read_text())
    assert result["status"] == "reached"


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS[1:])
def test_a_trial_past_its_time_limit_is_stopped_and_says_why(kind, tmp_path):
    """--slurm-time-min 1 and a trial that would sleep for 10 minutes: submitit's warning signal arrives before
    the limit (Slurm may send it up to a minute early), the trial's process group is ended, and the outcome
    carries host, times and the reason."""
    hold = tmp_path / "hold.pids"
    trial = make_trial(tmp_path, "sleeper", "--hold", str(hold))
    [outcome] = executor_for(kind, tmp_path, slurm_time_min=1).run([trial])
    assert outcome.exit_code is not None and outcome.exit_code < 0  # ended by a signal
    assert outcome.host and outcome.finished_at - outcome.started_at < 70
    # submitit's warning signal, or Slurm's own SIGTERM at the limit when it reaches the trial first (a busy node)
    assert ("its time limit was near" in outcome.error or "or the time limit" in outcome.error) \
        and "--slurm-time-min" in outcome.error, outcome.error
    pids = [int(p) for p in hold.read_text().split()[:2]]
    wait_for(lambda: not any(alive(p) for p in pids), 30.0, "the trial and its child to end")


def test_a_stop_signal_that_comes_while_a_trial_starts_still_stops_it(tmp_path, monkeypatch):
    """Ctrl-C (or a scheduler's SIGTERM, which daybreak handles alike) landing just after the trial's process was
    forked, before the executor recorded it as running: the executor holds the signal back until the trial is
    recorded, so the trial is stopped with the experiment instead of running on beside its resumption (a CI run
    saw such an orphan write into the run directory a `--resume` had just cleared). The trial takes SIGTERM again:
    it ends by SIGTERM, not by the SIGKILL that follows a signal it could not take."""
    import daybreak.executors as executors
    import signal as signals

    real_start = executors.start_trial_process
    previous = signals.getsignal(signals.SIGINT)
    started = []

    def start_then_interrupt(*args, **kwargs):
        proc = real_start(*args, **kwargs)
        started.append(proc)
        os.kill(os.getpid(), signals.SIGINT)  # arrives here, between the fork and the record
        return proc

    monkeypatch.setattr(executors, "start_trial_process", start_then_interrupt)
    signals.signal(signals.SIGINT, signals.default_int_handler)  # Ctrl-C's own (restored below)
    # another thread, as in an experiment with trials running (their waiters) or a test suite's leftovers: the
    # kernel hands a process-directed signal to it when the main thread holds the signal back by a mask
    bystander_done = threading.Event()
    bystander = threading.Thread(target=bystander_done.wait, daemon=True)
    bystander.start()
    trial = make_trial(tmp_path, "orphan", "--sleep", "600")
    try:
        with pytest.raises(KeyboardInterrupt):
            LocalExecutor(parallel=1, gpus=[]).run([trial])
    finally:
        bystander_done.set()
        signals.signal(signals.SIGINT, previous)
    [proc] = started
    assert proc.wait(timeout=30) == -signals.SIGTERM  # stopped by the executor, and it could take SIGTERM


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGKILL"])
def test_a_slurm_task_whose_trial_dies_of_a_signal_says_why(tmp_path, signame):
    """At its time limit Slurm sends SIGTERM to every process of the job, then SIGKILL after its KillWait: on a busy
    node the trial can die of either before the task's own handler runs (a CI rehearsal saw an outcome with no
    reason). Either way the outcome names the signal and the likely causes."""
    import signal as signals

    code = f"import os, signal; os.kill(os.getpid(), signal.{signame})"
    result = slurm.run_trial_on_node([sys.executable, "-c", code], str(tmp_path / "trial.log"), {}, 0)
    assert result["exit_code"] == -getattr(signals, signame)
    assert f"signal {signame} (scancel, preemption or the time limit" in result["error"]
    assert "--slurm-time-min" in result["error"]
