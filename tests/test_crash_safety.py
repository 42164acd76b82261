"""SIGKILL at any moment leaves every file of the run directory parseable."""

import json
import signal
import subprocess
import sys
import time

import pytest
import torch
from mlperf_logging.compliance_checker.mlp_parser import ruleset_610 as mlp_parser

from daybreak.records.run import RunResult


def _start(out):
    cmd = [sys.executable, "-m", "daybreak", "run", "--full-schedule", "--set", "epochs=400", "--eval-every-steps", "2",
           "--target", "0.5", "--out", str(out), "-q"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _check_parseable(out):
    result = RunResult.load(out)  # raises if the JSON is torn
    json.loads((out / "dawnbench.json").read_text())
    rows = (out / "dawnbench.tsv").read_text().splitlines()
    assert rows[0].split("\t") == ["epoch", "hours", "top1Accuracy"]
    for row in rows[1:]:
        cells = row.split("\t")
        assert len(cells) == 3 and float(cells[1]) >= 0 and 0 <= float(cells[2]) <= 100
    lines, errors = mlp_parser.parse_file(str(out / "mllog.log"))
    assert errors == []
    if (out / "checkpoint.pt").exists():
        ckpt = torch.load(out / "checkpoint.pt", weights_only=True)
        assert ckpt["task"] == "digits"
    return result, lines


def _history_len(out):
    try:
        return len(json.loads((out / "result.json").read_text())["history"])
    except (OSError, ValueError, KeyError):
        return 0


# (phase, delay): killed during init, or while training (many rewrites of every file per second)
@pytest.mark.parametrize("phase, delay_s", [("init", 0.0), ("init", 0.5), ("training", 0.0), ("training", 0.37),
                                            ("training", 1.1), ("training", 2.3)])
def test_sigkill_leaves_parseable_files(tmp_path, phase, delay_s):
    out = tmp_path / "run"
    proc = _start(out)
    try:
        # kill at a point measured from the moment the directory exists, so the kill lands in different phases
        deadline = time.monotonic() + 60
        while not (out / "result.json").exists():
            assert proc.poll() is None, "run ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        while phase == "training" and _history_len(out) == 0:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(delay_s)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    result, lines = _check_parseable(out)
    assert result.status == "running"  # the process never got to finish its record
    assert [ll.key for ll in lines if ll.key == "run_stop"] == []
    if phase == "training":
        assert len(result.history) > 0


def test_the_saves_on_mlperfs_clock_write_the_record_only(tmp_path, monkeypatch):
    """Before the target, every evaluation's save is on MLPerf's clock: result.json only (one rename); the
    DAWNBench views derived from it are written when the run directory is created, at the target and at the end."""
    from daybreak.train import recorder as recorder_module
    from daybreak.train.runner import RunConfig, run

    calls = []
    original = recorder_module.write_dawnbench

    def counted(result, run_dir, **kwargs):
        calls.append((len(result.history), result.reached))
        return original(result, run_dir, **kwargs)

    monkeypatch.setattr(recorder_module, "write_dawnbench", counted)
    r = run(RunConfig(out=tmp_path / "r", quiet=True, device="cpu"))
    assert r.reached and len(r.history) >= 2  # at least one evaluation before the target
    assert all(n == 0 or reached for n, reached in calls), calls
    assert calls[0] == (0, False) and calls[-1] == (len(r.history), True)
    rows = (tmp_path / "r" / "dawnbench.tsv").read_text().splitlines()
    assert len(rows) == 1 + len(r.history)  # the final views hold every evaluation
