"""MXNet's reference program (daybreak/sweep/frameworks/mxnet_program.py) in its own interpreter.

MXNet 1.9.1 cannot be imported beside daybreak (it needs NumPy < 1.24), so `--frameworks mxnet` runs its program
with the Python that DAYBREAK_MXNET_PYTHON names (default .venv-mxnet/bin/python; scripts/mxnet-venv.sh makes it).
The default suite checks how that interpreter is found and refused, and runs the program's settings, threads and
what it cannot run against a stub ``mxnet`` package (no MXNet needed); the slow tests run the real program and skip,
saying why, when the MXNet interpreter is not there. The same equivalence and protocol checks as every other
framework's (tests/test_throughput_programs.py is parametrized over daybreak.sweep.program.FRAMEWORKS, MXNet
included) run at 224 px / sequence 128; here: a wrong model is told apart through MXNet too, and `--program`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from daybreak.errors import ConfigError
from daybreak.records.throughput import ThroughputConfig, load_results
from daybreak.sweep import program as prog

MXNET = prog.FRAMEWORKS["mxnet"]
PROGRAM = prog.FRAMEWORKS_DIR / MXNET.program
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MXNET_OMP_MAX_THREADS", "OPENBLAS_NUM_THREADS", "MXNET_CPU_WORKER_NTHREADS")

# A stand-in for the mxnet package: what mxnet_program.py touches before it decides what it can run, and a line
# saying which thread settings the environment held when it was imported.
STUB = {
    "mxnet/__init__.py": f"""
import json, os
__version__ = "0.0-stub"
print("stub-mxnet-imported " + json.dumps({{k: os.environ.get(k) for k in {THREAD_VARIABLES!r}}}), flush=True)


class context:
    @staticmethod
    def num_gpus():
        return int(os.environ.get("STUB_MXNET_GPUS", "0"))


class optimizer:
    class Optimizer:
        pass

    @staticmethod
    def register(klass):
        return klass


from . import autograd, gluon  # noqa: E402
""",
    "mxnet/autograd.py": "",
    "mxnet/gluon/__init__.py": """
from . import loss, nn


class Block:
    pass


class HybridBlock(Block):
    pass


class Trainer:
    pass
""",
    "mxnet/gluon/loss.py": "SoftmaxCrossEntropyLoss = object\n",
    "mxnet/gluon/nn.py": "Conv2D = BatchNorm = Dense = Embedding = LayerNorm = Dropout = HybridSequential = object\n",
}


@pytest.fixture
def stub_mxnet(tmp_path, monkeypatch):
    """daybreak's own Python as the 'MXNet interpreter', with the stub package on its path."""
    for name, text in STUB.items():
        (tmp_path / "stub" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "stub" / name).write_text(text)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "stub"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv(MXNET.python_env, sys.executable)
    return tmp_path / "stub"


def _run_program(settings: dict, extra_env: dict[str, str] | None = None) -> tuple[dict, list[tuple[str, object]]]:
    """The program once with these settings: (the thread settings the stub saw, the protocol records)."""
    env = dict(os.environ, DAYBREAK_THROUGHPUT=json.dumps(settings), **(extra_env or {}))
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(prog.FRAMEWORKS_DIR)])
    proc = subprocess.run([prog.framework_python(MXNET), str(PROGRAM)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = next(json.loads(line.split(" ", 1)[1]) for line in proc.stdout.splitlines()
                if line.startswith("stub-mxnet-imported "))
    return seen, [r for r in map(prog.parse_record, proc.stdout.splitlines()) if r is not None]


# --- the interpreter -------------------------------------------------------------------------------------------


def test_mxnet_runs_with_the_interpreter_its_variable_names(tmp_path, monkeypatch, stub_mxnet):
    assert MXNET.python_env == "DAYBREAK_MXNET_PYTHON" and MXNET.program == "mxnet_program.py"
    assert prog.check_framework("mxnet") is MXNET  # the stub is found by that interpreter, without importing it
    config = ThroughputConfig(model="resnet50", batch_size=2, framework="mxnet", protocol="program")
    assert prog.program_command(config) == [sys.executable, str(PROGRAM)]
    # unset: .venv-mxnet/bin/python under the working directory (where scripts/mxnet-venv.sh puts it)
    monkeypatch.delenv(MXNET.python_env)
    monkeypatch.chdir(tmp_path)
    assert prog.framework_python(MXNET) == str(tmp_path / ".venv-mxnet" / "bin" / "python")
    # the other frameworks keep daybreak's interpreter
    assert prog.framework_python(prog.FRAMEWORKS["jax"]) == sys.executable


def test_a_missing_mxnet_interpreter_is_one_line_saying_how_to_make_it(tmp_path, monkeypatch, capsys):
    from daybreak.cli import main

    monkeypatch.setenv(MXNET.python_env, str(tmp_path / "nowhere" / "python"))
    with pytest.raises(ConfigError, match=r"--frameworks mxnet: its program runs in its own interpreter, .*nowhere"
                                          r"/python is not there .*scripts/mxnet-venv.sh.*DAYBREAK_MXNET_PYTHON"):
        prog.check_framework("mxnet")
    monkeypatch.setenv(MXNET.python_env, sys.executable)  # a Python without mxnet: daybreak's own
    with pytest.raises(ConfigError, match=rf"--frameworks mxnet: mxnet not installed in {sys.executable}: make it"):
        prog.check_framework("mxnet")
    broken = tmp_path / "broken-python"
    broken.write_text("#!/bin/sh\necho 'no such interpreter' >&2\nexit 3\n")
    broken.chmod(0o755)
    monkeypatch.setenv(MXNET.python_env, str(broken))
    with pytest.raises(ConfigError, match="exited with status 3: no such interpreter"):
        prog.check_framework("mxnet")
    argv = ["throughput", "--model", "resnet50", "--frameworks", "pytorch,mxnet", "--out", str(tmp_path / "never")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "DAYBREAK_MXNET_PYTHON" in err, err
    assert not (tmp_path / "never" / "results.jsonl").exists()


# --- the program's settings (the stub) ---------------------------------------------------------------------------


def test_the_program_sets_the_threads_before_mxnet_starts_and_says_what_it_cannot_run(stub_mxnet):
    base = dict(model="resnet50", batch_size=2, amp="off", compile=False, devices=1, device="cpu", threads=3,
                warmup=1, steps=1)
    # the threads asked, in MXNet's variables before its import (not the 1 of the environment it was started in)
    seen, records = _run_program({**base, "amp": "fp16"}, {"OMP_NUM_THREADS": "1"})
    assert seen == {name: "3" for name in THREAD_VARIABLES}
    assert records == [("throughput_unsupported", "MXNet: AMP fp16 on a CPU: mxnet.contrib.amp casts to bfloat16 "
                                                  "on CPUs (oneDNN) and to float16 on GPUs only")]
    _, records = _run_program({**base, "devices": 2})
    assert records[0][0] == "throughput_unsupported" and "runs one device" in str(records[0][1])
    # a GPU asked where MXNet sees none: failed, one line; a GPU build with a GPU: bf16 is not MXNet AMP's there
    _, records = _run_program({**base, "device": "cuda"})
    assert records[0][0] == "throughput_failed" and str(records[0][1]).startswith("asked for cuda: mxnet 0.0-stub "
                                                                                   "sees no GPU")
    _, records = _run_program({**base, "device": "cuda", "amp": "bf16"}, {"STUB_MXNET_GPUS": "1"})
    assert records == [("throughput_unsupported", "MXNet: AMP bf16 on a GPU: mxnet.contrib.amp casts to bfloat16 on "
                                                  "CPUs (oneDNN) and to float16 on GPUs only")]
    _, records = _run_program({**base, "device": "mps"})
    assert records[0][0] == "throughput_failed" and "no Apple GPU backend" in str(records[0][1])


def test_a_sweep_records_what_the_mxnet_program_cannot_run(tmp_path, stub_mxnet):
    """Through daybreak's launcher (run_attempt: the interpreter, PYTHONPATH, the settings): one-line rows."""
    config = ThroughputConfig(model="resnet50", batch_size=2, image_size=32, amp="fp16", warmup=1, steps=1,
                              repeats=2, framework="mxnet", protocol="program", threads=1)
    status, error, report, cmd, _ = prog.run_attempt(config, 2, 120, tmp_path / "log.txt", None)
    assert (status, report, cmd) == ("unsupported", None, [sys.executable, str(PROGRAM)])
    assert error.startswith("MXNet: AMP fp16 on a CPU") and "\n" not in error
    config = config.model_copy(update=dict(amp="off", device="cuda"))
    status, error, report, _, _ = prog.run_attempt(config, 2, 120, tmp_path / "log.txt", None)
    assert (status, report) == ("failed", None) and "asked for cuda: mxnet 0.0-stub sees no GPU" in error


# --- the real program (slow; the MXNet interpreter made by scripts/mxnet-venv.sh) -------------------------------


def _skip_without_mxnet() -> str:
    try:
        prog.check_framework("mxnet")
    except ConfigError as e:
        pytest.skip(str(e))
    return prog.framework_python(MXNET)


def _describe(case, weights: Path | None = None):
    from daybreak.sweep import equivalence as eq
    from daybreak.sweep.launch import worker_env

    cmd = [_skip_without_mxnet(), str(PROGRAM), "--model", case.model, "--batch-size", str(case.batch_size),
           "--describe", "--weights", str(weights or case.weights), "--batch", str(case.batch), "--image-size",
           str(case.image_size), "--seq-len", str(case.seq_len), "--threads", "1"]
    env = worker_env(1, {"PYTHONPATH": str(prog.FRAMEWORKS_DIR)})
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = json.loads(proc.stdout.strip().splitlines()[-1])
    assert said["framework"] == "mxnet" and said["version"] == "1.9.1"
    return eq.Figures(params=said["params"], losses=said["losses"], flops_per_step=said["flops_per_step"])



@pytest.mark.slow
def test_the_equivalence_check_tells_a_wrong_model_from_mxnets(tmp_path, one_thread):
    """MXNet's ResNet-50 (v1.5) passes against daybreak's, and fails against a v1 reference and with its weights'
    bottlenecks scrambled. 64 px, batch 4: at 32 px and batch 2 the last stage's BatchNorm normalizes 2 values per
    channel and the frameworks' roundings of that near-zero variance differ by 1e-3 of the loss (measured)."""
    from daybreak.models.resnet50 import ResNet50
    from daybreak.sweep import equivalence as eq
    from test_throughput_programs import _scrambled

    _skip_without_mxnet()
    right = eq.reference_case("resnet50", tmp_path / "v15", batch_size=4, image_size=64)
    said = _describe(right)
    print(f"mxnet resnet50 64 px: losses {said.losses} vs {right.figures.losses}; own FLOPs "
          f"{said.flops_per_step / right.figures.flops_per_step - 1:+.2%}")
    assert eq.compare(right.figures, said) == []
    assert said.flops_per_step == pytest.approx(right.figures.flops_per_step, rel=0.03)
    v1 = eq.reference_case("resnet50", tmp_path / "v1", batch_size=4, image_size=64,
                           build=lambda: ResNet50(stride_in_1x1=True))
    assert eq.compare(v1.figures, _describe(v1))[0].startswith("loss at initialization")
    scrambled = tmp_path / "scrambled.npz"
    np.savez(scrambled, **_scrambled(dict(np.load(right.weights))))
    assert eq.compare(right.figures, _describe(right, scrambled))[0].startswith("loss at initialization")


@pytest.mark.slow
def test_the_mxnet_program_applies_the_threads_it_is_asked_for(tmp_path):
    """Started with OMP_NUM_THREADS=1 and asked for 2: MXNet runs (and OpenMP reports) 2, and 1 when asked for 1."""
    python = _skip_without_mxnet()
    for threads in (2, 1):
        settings = dict(model="resnet50", batch_size=2, image_size=32, amp="off", compile=True, devices=1,
                        device="cpu", threads=threads, warmup=1, steps=1, min_window_s=0.01)
        env = dict(os.environ, DAYBREAK_THROUGHPUT=json.dumps(settings), PYTHONPATH=str(prog.FRAMEWORKS_DIR),
                   OMP_NUM_THREADS="1")
        proc = subprocess.run([python, str(PROGRAM)], capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        records = [r for r in map(prog.parse_record, proc.stdout.splitlines()) if r is not None]
        start = dict(records)[prog.START]
        assert (start["threads"], start["inter_op_threads"], start["device"]) == (threads, threads, "cpu")
        assert start["compiler"] == "hybridize" and start["math_precision"] == "fp32" and start["layout"] == "NCHW"
        assert [k for k, _ in records].count(prog.WINDOW) == 2


@pytest.mark.slow
def test_the_mxnet_program_runs_through_the_program_flag(tmp_path):
    """`daybreak throughput --program "MXNET_PYTHON mxnet_program.py"`: the same checks, a row named by the program."""
    from test_throughput_programs import fake_peak

    from daybreak.sweep.sweep import SweepOptions, run_sweep
    from daybreak.sweep.worker import model_step_flops

    python = _skip_without_mxnet()
    run_sweep(SweepOptions(model="resnet50", out=tmp_path, program=[python, str(PROGRAM)], batch_sizes=[2],
                           image_size=32, device="cpu", warmup=1, steps=2, repeats=1, threads=1, quiet=True,
                           peak=fake_peak(), log=lambda m: None, timeout_s=600, plots=False))
    [row] = load_results(tmp_path / "results.jsonl")
    assert row.status == "ok", row.error
    assert row.config.framework == "program" and row.framework == "mxnet" and row.framework_version == "1.9.1"
    assert row.flops_per_step == model_step_flops(row.config, 2) and row.flops_source == "daybreak"
    assert row.threads_per_process == 1 and row.cores_used < 1.5 and row.compiler == "none"
