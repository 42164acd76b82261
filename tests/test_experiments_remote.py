"""Experiments and sweeps through the Slurm code path: `--executor slurm` against the real single-node cluster CI
starts (DAYBREAK_TEST_SLURM), and `--executor submitit-local` (the same submitit code path) everywhere."""

from __future__ import annotations

import os

import pytest

from daybreak.cli import main
from daybreak.records.experiment import Experiment
from daybreak.records.repeat import RepeatSummary
from daybreak.records.throughput import RESULTS_FILE, load_results
from daybreak.records.run import RunResult
from daybreak.sweep.remote import strip_driver_flags

SLURM_PARTITION = os.environ.get("DAYBREAK_TEST_SLURM")
try:
    import submitit  # noqa: F401
    HAVE_SUBMITIT = True
except ImportError:
    HAVE_SUBMITIT = False
needs_slurm = pytest.mark.skipif(not SLURM_PARTITION, reason="no Slurm cluster: set DAYBREAK_TEST_SLURM (CI: "
                                                             "`bash .ci/start-slurm.sh` prints one)")
needs_submitit = pytest.mark.skipif(not HAVE_SUBMITIT, reason="submitit (daybreak[slurm]) is not installed")


def test_strip_driver_flags():
    argv = ["throughput", "--model", "m", "--batch-sizes", "8,16", "--amp=bf16", "--executor", "slurm", "-q",
            "--slurm-additional", "qos=x", "--steps", "5", "--out", "o", "--no-plots"]
    assert strip_driver_flags(argv) == ["throughput", "--model", "m", "--steps", "5"]


@needs_slurm
def test_repeat_trials_run_as_a_slurm_job_array_and_a_killed_one_resumes(tmp_path):
    out = tmp_path / "rep"
    args = ["repeat", "digits", "--runs", "2", "--out", str(out), "--threads", "1", "--target", "0.9",
            "--executor", "slurm", "--slurm-partition", SLURM_PARTITION]
    assert main(args) == 0
    exp = Experiment.load(out)
    assert exp.executor["executor"] == "slurm" and all(t.host for t in exp.trials)
    assert all(RunResult.load(out / t.run_dir).status == "reached" for t in exp.trials)
    # resuming with more seeds runs only the new trial, again on Slurm
    assert main(args[:3] + ["3"] + args[4:] + ["--resume"]) == 0
    exp = Experiment.load(out)
    assert [t.invocation for t in exp.trials] == [0, 0, 1] and RepeatSummary.load(out).n_runs == 3
    assert (out / "slurm").is_dir()


@needs_submitit
def test_throughput_configurations_as_jobs(tmp_path, capsys):
    out = tmp_path / "tp"
    executor = ["--executor", "slurm", "--slurm-partition", SLURM_PARTITION] if SLURM_PARTITION else \
        ["--executor", "submitit-local"]
    argv = ["throughput", "--model", "digits_cnn", "--batch-sizes", "16,32", "--steps", "5", "--repeats", "2",
            "--warmup", "2", "--out", str(out), "--no-plots", "--peak-budget", "5", *executor]
    assert main(argv) == 0
    rows = load_results(out / RESULTS_FILE)
    assert sorted(r.config.batch_size for r in rows) == [16, 32] and all(r.status == "ok" for r in rows)
    assert (out / "results.md").exists()
    capsys.readouterr()
    assert main(argv) == 0  # everything already in the folder: nothing is submitted again
    assert "0 configuration(s) to" in capsys.readouterr().err and len(load_results(out / RESULTS_FILE)) == 2


def test_a_local_trial_past_its_time_limit_is_ended_and_says_why(tmp_path):
    import sys

    from daybreak.executors import LocalExecutor, Trial

    trial = Trial(key="slow", argv=[sys.executable, "-c", "import time; time.sleep(60)"], run_dir=tmp_path / "r",
                  log=tmp_path / "slow.log", timeout_s=1.5)
    [outcome] = LocalExecutor().run([trial])
    assert outcome.exit_code not in (0, None) and "time limit" in outcome.error
    assert outcome.finished_at - outcome.started_at < 30


@needs_submitit
def test_a_leaderboard_reproduction_runs_through_the_slurm_code_path(tmp_path, capsys):
    """`leaderboard reproduce --executor slurm` (submitit-local without a cluster): the entry's run is a trial of the
    same executors as the experiments', and the reproduction is stored and linked."""
    from daybreak.leaderboard.store.database import Store

    run = tmp_path / "run"
    assert main(["run", "--out", str(run), "-q", "--threads", "1"]) == 0
    url = f"sqlite:///{tmp_path / 'lb.sqlite'}"
    assert main(["leaderboard", "import", str(run), "--db", url, "-q"]) == 0
    executor = ["--executor", "slurm", "--slurm-partition", SLURM_PARTITION] if SLURM_PARTITION else \
        ["--executor", "submitit-local"]
    code = main(["leaderboard", "reproduce", "1", "--db", url, "--work-dir", str(tmp_path / "w"), *executor])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "entry 1: reproduced: entry 2 reached the target" in out.out
    folder = next((tmp_path / "w").iterdir())
    assert (folder / "slurm").is_dir() and RunResult.load(folder / "run").status == "reached"
    with Store(url) as store:
        assert store.get(1).reproduction_status == "reproduced" and store.get(2).reproduction_of == 1
    assert main(["leaderboard", "reproduce", "1", "--db", url, "--slurm-time-min", "5"]) == 2  # needs --executor slurm
    assert "--slurm-time-min applies to --executor slurm" in capsys.readouterr().err


@needs_slurm
def test_a_lesion_runs_its_arms_as_one_slurm_job_array(tmp_path):
    out = tmp_path / "les"
    assert main(["lesion", "digits", "--without", "augment", "--runs", "2", "--threads", "1",
                 "--out", str(out), "--executor", "slurm", "--slurm-partition", SLURM_PARTITION]) == 0
    exp = Experiment.load(out)
    assert exp.executor["executor"] == "slurm" and len(exp.trials) == 4 and all(t.host for t in exp.trials)
    assert [t.arm for t in exp.trials][:2] != [exp.trials[0].arm] * 2  # arms interleaved, not all of one first
