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
