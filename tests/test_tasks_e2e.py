"""`daybreak run` end to end on each task's real file format (small generated files)."""

import subprocess
import sys

import pytest

from daybreak.cli import main
from daybreak.data.synthetic import write_cifar10, write_mnist
from daybreak.records.run import RunResult

from conftest import single_line


def test_mnist_run_on_idx_files(tmp_path, capsys):
    write_mnist(tmp_path / "mnist", 600, 200, seed=0)
    out = tmp_path / "run"
    code = main(["run", "mnist", "--data-dir", str(tmp_path / "mnist"), "--allow-custom-data", "--target", "0.95",
                 "--set", "epochs=4", "--set", "batch_size=32", "--out", str(out), "-q"])
    assert code == 0
    r = RunResult.load(out)
    assert r.task == "mnist" and r.reached and not r.official
    assert any("official" in reason for reason in r.unofficial_reasons)
    assert r.data_notes and "allow-custom-data" in r.data_notes[0]
    assert (out / "checkpoint.pt").exists()


def test_mnist_custom_data_refused_without_flag(tmp_path, capsys):
    write_mnist(tmp_path / "mnist", 100, 50, seed=0, gzip=False)
    code = main(["run", "mnist", "--data-dir", str(tmp_path / "mnist"), "--out", str(tmp_path / "run"), "-q"])
    assert code == 2
    err = capsys.readouterr().err
    assert single_line(err) and "--allow-custom-data" in err


def test_mnist_offline_error_names_files_and_folder(tmp_path, capsys, monkeypatch):
    import daybreak.data.download as download

    def no_network(*args, **kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr(download, "urlopen", no_network)
    code = main(["run", "mnist", "--data-dir", str(tmp_path / "empty"), "--out", str(tmp_path / "run"), "-q"])
    assert code == 2
    err = capsys.readouterr().err
    assert single_line(err) and "train-images-idx3-ubyte.gz" in err and str(tmp_path / "empty") in err
    r = RunResult.load(tmp_path / "run")  # the failed run is still recorded
    assert r.status == "failed" and "cannot download" in r.message


def test_cifar10_run_on_python_tarball(tmp_path):
    write_cifar10(tmp_path / "cifar", 20, 40, as_tarball=True, seed=0)
    out = tmp_path / "run"
    code = main(["run", "cifar10", "--data-dir", str(tmp_path / "cifar"), "--allow-custom-data", "--target", "0.01",
                 "--set", "batch_size=50", "--set", "epochs=1", "--out", str(out), "-q"])
    assert code == 0
    r = RunResult.load(out)
    assert r.task == "cifar10" and r.model == "airbench_net" and len(r.history) == 1
    assert r.hyperparameters["batch_size"] == 50


def test_python_dash_m_and_help():
    proc = subprocess.run([sys.executable, "-m", "daybreak", "run", "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    for flag in ("--data-dir", "--allow-custom-data", "--count-eval", "--full-schedule", "--eval-every-steps",
                 "--cost-per-hour", "--instance", "--amp", "--compile", "--threads", "--device", "--seed", "--target"):
        assert flag in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "daybreak", "--version"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("daybreak ")


@pytest.mark.slow
def test_compile_counts_as_init(tmp_path):
    from daybreak.train.runner import RunConfig, run

    r = run(RunConfig(out=tmp_path / "r", quiet=True, compile=True))
    assert r.compile == "default" and r.status == "reached" and r.recompiles_under_clock == 0
    warmup = [p for p in r.phases if p.phase == "warmup"]
    assert len(warmup) == 1 and r.init_s >= warmup[0].end_s  # compiling is charged to init (before training) ...
    assert r.clocks["dawnbench"].start_s <= warmup[0].start_s  # ... which DAWNBench counts
    assert r.clocks["mlperf"].start_s >= warmup[0].end_s  # and MLPerf does not: it came before the data
