"""`daybreak throughput --program` and `--frameworks`: any framework's training program timed by DLPerf's protocol.

The default suite drives the protocol with a fake program (tests/fake_throughput_program.py: sleeps as steps);
the slow tests run the reference programs (JAX, TensorFlow, Paddle; the extras installed) and check that they train
the same models as daybreak's PyTorch ones: the same parameter count, FLOPs per step within 2% of
torch.utils.flop_counter's, and the same loss on the same batch from the same weights."""

from __future__ import annotations

import ast
import json
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
import torch

from daybreak.errors import ConfigError
from daybreak.records.throughput import PeakResult, ThroughputConfig, ThroughputResult, load_results, to_markdown
from daybreak.sweep import program as prog
from daybreak.sweep.remote import config_command, strip_driver_flags
from daybreak.sweep.sweep import SweepOptions, run_sweep

FAKE = Path(__file__).resolve().parent / "fake_throughput_program.py"
STEP_S = 0.002  # the fake's sleep per step


def fake_peak() -> PeakResult:
    return PeakResult(machine_key="test", device="cpu", device_name="test CPU", torch=torch.__version__,
                      flops_per_s={"fp32": 1e12}, bandwidth_bytes_per_s=1e10, measured_at=datetime.now(timezone.utc))


def sweep(out: Path, behaviour: str, **overrides) -> SweepOptions:
    options = dict(model="fake_net", out=out, program=[sys.executable, str(FAKE), behaviour], batch_sizes=[4],
                   device="cpu", warmup=3, steps=10, repeats=3, quiet=True, peak=fake_peak(), log=lambda m: None,
                   timeout_s=120, plots=False)
    options.update(overrides)
    return SweepOptions(**options)


# --- the protocol ---------------------------------------------------------------------------------------------


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_programs_are_stand_alone():
    files = sorted(prog.FRAMEWORKS_DIR.glob("*.py"))
    assert {f.name for f in files} >= {"throughput_log.py", "reference.py", "jax_program.py", "tensorflow_program.py",
                                       "paddle_program.py"}
    for f in files:
        assert "daybreak" not in _imports(f), f
    assert _imports(prog.FRAMEWORKS_DIR / "throughput_log.py") <= {"json", "os", "sys", "time", "typing"}
    sys.path.insert(0, str(prog.FRAMEWORKS_DIR))
    try:
        import throughput_log
    finally:
        sys.path.remove(str(prog.FRAMEWORKS_DIR))
    assert throughput_log.SETTINGS_ENV == prog.SETTINGS_ENV and throughput_log.TOKEN == prog.TOKEN


def test_a_program_is_timed_into_the_same_rows_as_the_built_in_models(tmp_path):
    outcome = run_sweep(sweep(tmp_path, "ok"))
    [row] = load_results(tmp_path / "results.jsonl")
    assert row.status == "ok", row.error
    assert outcome.rows[0].key() == row.key() and row.config.framework == "program"
    assert row.framework == "fake" and row.framework_version == "1.0" and row.compiler == "none"
    assert len(row.times_s) == 3 and row.median_time_s == statistics.median(row.times_s)
    assert all(t >= 10 * STEP_S for t in row.times_s)  # 10 sleeps of STEP_S at least: only the timed steps
    assert row.samples_per_s == pytest.approx(4 * 10 / row.median_time_s, rel=1e-12)
    assert row.samples_per_s_min <= row.samples_per_s <= row.samples_per_s_max
    assert row.flops_per_step == 4000 and row.achieved_flops_per_s == pytest.approx(4000 * 10 / row.median_time_s)
    assert row.utilization == pytest.approx(row.achieved_flops_per_s / 1e12)  # the same peak as a built-in row
    assert row.input_shape == [4] and row.system is not None and row.init_s is not None
    assert any("fresh process" in n for n in row.notes)
    log = next((tmp_path / "logs").glob("*.log")).read_text()
    assert log.count("--- daybreak: repeat") == 3 and log.count("throughput_window") == 3 * (1 + 1)  # warm-up + 10
    md = (tmp_path / "results.md").read_text()
    assert "## Frameworks (DLPerf)" in md and "fake 1.0" in md
    again = run_sweep(sweep(tmp_path, "ok"))  # resumable like a built-in sweep
    assert again.measured == 0 and again.skipped == 1


@pytest.mark.parametrize("behaviour, status, reason", [
    ("liar", "failed", "the program's clock disagrees with daybreak's"),
    ("silent", "failed", "printed no throughput_window record"),
    ("crash", "failed", "exited with status 3: RuntimeError: the fake program fell over"),
    ("wrong-batch", "failed", "ran batch_size 8, not the 4 asked"),
    ("unsupported", "unsupported", "fake: this configuration is not supported"),
])
def test_a_program_that_cannot_be_trusted_is_recorded_with_one_line_of_reason(tmp_path, behaviour, status, reason):
    run_sweep(sweep(tmp_path, behaviour, repeats=2))
    [row] = load_results(tmp_path / "results.jsonl")
    assert row.status == status and reason in row.error and "\n" not in row.error
    assert row.samples_per_s is None and row.times_s == []
    assert status.upper() in (tmp_path / "results.md").read_text()


def test_the_command_line_exit_status_and_one_line_errors(tmp_path, capsys):
    from daybreak.cli import main

    from conftest import single_line

    base = ["throughput", "--model", "fake_net", "--batch-sizes", "2", "--warmup", "2", "--steps", "4", "--repeats",
            "2", "--device", "cpu", "--peak-budget", "1", "--no-plots", "-q"]
    assert main(base + ["--program", f"{sys.executable} {FAKE} ok", "--out", str(tmp_path / "ok")]) == 0
    assert main(base + ["--program", f"{sys.executable} {FAKE} crash", "--out", str(tmp_path / "crash")]) == 1
    assert main(base + ["--program", f"{sys.executable} {FAKE} unsupported", "--out", str(tmp_path / "u")]) == 0
    capsys.readouterr()
    for argv in (["throughput", "--model", "resnet50", "--frameworks", "nope"],
                 ["throughput", "--model", "digits_cnn", "--frameworks", "pytorch,jax"],
                 ["throughput", "--model", "resnet50", "--frameworks", "jax", "--program", "python x.py"],
                 ["throughput", "--model", "resnet50", "--frameworks", "jax", "--mode", "infer"],
                 ["throughput", "--model", "resnet50", "--frameworks", "jax", "--data", "digits"],
                 ["throughput", "--model", "x", "--program", "python 'unclosed"],
                 ["throughput", "--model", "x", "--program", ""]):
        assert main(argv + ["--out", str(tmp_path / "never")]) == 2, argv
        assert single_line(capsys.readouterr().err), argv
    assert not (tmp_path / "never" / "results.jsonl").exists()


def test_a_framework_that_is_not_installed_is_one_line_naming_its_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "paddle" else real(name, *a))
    with pytest.raises(ConfigError, match=r"paddle not installed .*pip install 'daybreak\[paddle\]'"):
        prog.check_framework("paddle")


def _window(first: int, steps: int, seconds: float, arrival: float) -> prog.Line:
    return prog.Line(prog.WINDOW, {"first_step": first, "steps": steps, "samples": 2 * steps, "seconds": seconds},
                     arrival)


def _launch(*windows: prog.Line) -> prog.Launch:
    start = prog.Line(prog.START, {"framework": "x", "batch_size": 2, "devices": 1}, 0.0)
    return prog.Launch(records=[start, *windows], returncode=0)


def test_the_warm_up_is_skipped_and_the_clock_checked_from_the_arrival_stamps():
    config = ThroughputConfig(model="x", batch_size=2, warmup=4, steps=6, framework="program", program=["x"])
    # windows back to back: each line arrives its window's seconds after the previous one
    ok = _launch(_window(0, 4, 9.0, 9.0), _window(4, 3, 1.0, 10.0), _window(7, 3, 1.5, 11.52))
    assert prog.timed_seconds(ok, config, 2, "r") == pytest.approx(2.5)  # the warm-up's 9 s are not counted
    liar = _launch(_window(0, 4, 9.0, 9.0), _window(4, 3, 0.1, 10.0), _window(7, 3, 0.1, 11.0))
    with pytest.raises(prog.Refused, match=r"claims 0.100 s but its line arrived 1.000 s after"):
        prog.timed_seconds(liar, config, 2, "r")
    straddles = _launch(_window(0, 3, 1.0, 1.0), _window(3, 7, 1.0, 2.0))
    with pytest.raises(prog.Refused, match="straddles the end of the warm-up"):
        prog.timed_seconds(straddles, config, 2, "r")
    short = _launch(_window(0, 4, 1.0, 1.0), _window(4, 3, 1.0, 2.0))
    with pytest.raises(prog.Refused, match="timed 3 steps after the 4 warm-up steps, not the 6 asked"):
        prog.timed_seconds(short, config, 2, "r")
    gap = _launch(_window(0, 4, 1.0, 1.0), _window(5, 6, 1.0, 2.0))
    with pytest.raises(prog.Refused, match="malformed"):
        prog.timed_seconds(gap, config, 2, "r")


def test_the_framework_table_is_relative_to_pytorch_eager():
    def row(name: str, compiled: bool, samples_per_s: float, **more) -> ThroughputResult:
        config = ThroughputConfig(model="resnet50", batch_size=8, compile=compiled, framework=name)
        return ThroughputResult(config=config, status="ok", samples_per_s=samples_per_s, samples_per_s_min=samples_per_s
                                * 0.9, samples_per_s_max=samples_per_s * 1.1, batch_size=8, global_batch_size=8,
                                **more)

    rows = [row("pytorch", False, 100.0), row("pytorch", True, 120.0), row("jax", True, 150.0, framework="jax",
                                                                         framework_version="0.10.2", compiler="XLA"),
            ThroughputResult(config=ThroughputConfig(model="resnet50", batch_size=8, framework="jax"),
                             status="unsupported", error="JAX always compiles with XLA")]
    md = to_markdown(rows)
    table = md[md.index("## Frameworks (DLPerf)"):md.index("## resnet50")]
    lines = [line for line in table.splitlines() if line.startswith("| resnet50")]
    assert [line.split(" | ")[1:3] + [line.split(" | ")[8]] for line in lines] == [
        ["pytorch", "none", "1.00x"], ["pytorch", "torch.compile", "1.20x"], ["jax", "none", "-"],
        ["jax 0.10.2", "XLA", "1.50x"]]
    assert "unsupported: JAX always compiles with XLA" in table
    assert "90.0-110.0" in table  # the spread of the repeats


def test_slurm_configurations_carry_their_framework():
    base = strip_driver_flags(["throughput", "--model", "resnet50", "--frameworks", "pytorch,jax", "--executor",
                               "slurm", "--batch-sizes", "8"])
    assert base == ["throughput", "--model", "resnet50"]
    jax = ThroughputConfig(model="resnet50", batch_size=8, framework="jax")
    cmd = config_command(base, jax, Path("part"))
    assert cmd[cmd.index("--frameworks") + 1] == "jax" and cmd[cmd.index("--batch-sizes") + 1] == "8"
    program = ThroughputConfig(model="m", batch_size=8, framework="program", program=["python", "t.py"])
    assert "--frameworks" not in config_command(["throughput", "--program", "python t.py"], program, Path("p"))
    # a PyTorch configuration keeps the key (and file names) it had before frameworks existed
    assert ThroughputConfig(model="resnet50", batch_size=8).key() == (
        "resnet50", "train", 8, "off", False, 1, 1, None, None, None, False, "cpu", None)
    assert jax.key() != ThroughputConfig(model="resnet50", batch_size=8).key()


# --- the reference programs (slow; the extras installed) ---------------------------------------------------------

REFERENCE = {"resnet50": 25_557_032, "bert_base": 109_514_298}  # parameters, the MLM head included
# The FLOP counts compared at a realistic size (ResNet-50 at 224 px, BERT at sequence 128, batch 8): at a tiny size
# XLA's count is dominated by what PyTorch's counter leaves out (elementwise ops, the optimizer update) and by its
# other convention for padded convolutions (it counts only the multiply-adds that touch the input).
FLOPS_SIZE = {"resnet50": dict(image_size=224), "bert_base": dict(seq_len=128)}
FLOPS_TOLERANCE = 0.02
# The same weights and the same batch give the same loss up to float32 rounding: the frameworks add up in other
# orders (oneDNN, Eigen, XLA kernels; BatchNorm statistics over 8 x 112 x 112 values), each operation's result
# within a few float32 ulps (1e-7 relative) of another's. Measured here: at most 1.8e-7 relative (README). 1e-4
# leaves room for other CPUs' kernels, and is still far below what a different model or loss gives (Paddle's
# cross_entropy averaging over the ignored tokens too, a bug this test caught, was 85% off).
LOSS_TOLERANCE = 1e-4


def _torch_reference(model_name: str, folder: Path) -> dict:
    import torch.nn.functional as F

    from daybreak.measure.flops import step_flops
    from daybreak.models import count_parameters, create_model

    torch.manual_seed(0)
    model = create_model(model_name)
    g = torch.Generator().manual_seed(7)
    if model_name == "resnet50":
        x = torch.randn(8, 3, 224, 224, generator=g)
        y = torch.randint(0, 1000, (8,), generator=g)
        loss_fn = F.cross_entropy
    else:
        x = torch.randint(1, 30522, (8, 128), generator=g)
        y = torch.where(torch.rand(8, 128, generator=g) < 0.15, x, torch.full_like(x, -100))

        def loss_fn(logits, target):
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=-100)
    weights, batch = folder / f"{model_name}-weights.npz", folder / f"{model_name}-batch.npz"
    np.savez(weights, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
    np.savez(batch, x=x.numpy().astype(np.float32 if model_name == "resnet50" else np.int32),
             y=y.numpy().astype(np.int32))
    flops = step_flops(model, x, y, loss_fn, True)
    model.train(model_name == "resnet50")  # BatchNorm in training mode; BERT without dropout, as the programs do
    with torch.no_grad():
        loss = float(loss_fn(model(x), y))
    return dict(params=count_parameters(model), flops=flops, loss=loss, weights=weights, batch=batch)


@pytest.fixture(scope="module")
def torch_reference(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reference")
    return {name: _torch_reference(name, folder) for name in REFERENCE}


def _skip_unless_installed(framework: str) -> None:
    """Skip when the framework's extra is not installed; never import it here (paddle beside torch segfaults)."""
    import importlib.util

    missing = [m for m in prog.FRAMEWORKS[framework].modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (pip install -e '.[{prog.FRAMEWORKS[framework].extra}]')")


def _describe(framework: str, model_name: str, ref: dict) -> dict:
    fw = prog.FRAMEWORKS[framework]
    _skip_unless_installed(framework)
    size = FLOPS_SIZE[model_name]
    cmd = [sys.executable, str(prog.FRAMEWORKS_DIR / fw.program), "--model", model_name, "--batch-size", "8",
           "--describe", "--weights", str(ref["weights"]), "--batch", str(ref["batch"])]
    cmd += ["--image-size", str(size["image_size"])] if "image_size" in size else ["--seq-len", str(size["seq_len"])]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("model_name", list(REFERENCE))
@pytest.mark.parametrize("framework", list(prog.FRAMEWORKS))
def test_a_reference_program_trains_the_same_model(torch_reference, framework, model_name):
    ref = torch_reference[model_name]
    said = _describe(framework, model_name, ref)
    print(f"{framework} {model_name}: params {said['params']:,}; FLOPs/step {said['flops_per_step']:.4e} vs torch "
          f"{ref['flops']:.4e} ({said['flops_per_step'] / ref['flops'] - 1:+.2%}); loss {said['loss']:.6f} vs "
          f"{ref['loss']:.6f} ({said['loss'] / ref['loss'] - 1:+.2e})")
    assert ref["params"] == REFERENCE[model_name]
    assert said["params"] == REFERENCE[model_name]
    assert said["flops_per_step"] == pytest.approx(ref["flops"], rel=FLOPS_TOLERANCE)
    assert said["loss"] == pytest.approx(ref["loss"], rel=LOSS_TOLERANCE)


@pytest.mark.slow
@pytest.mark.parametrize("framework", list(prog.FRAMEWORKS))
def test_each_reference_program_is_measured_through_the_protocol(tmp_path, framework):
    """Each framework at a tiny size through `daybreak throughput --frameworks`: its rows, what it cannot run."""
    _skip_unless_installed(framework)
    # ResNet-50 over the whole grid; BERT fp32 on one device, with and without the compiler
    for model_name, size, amps, devices in (("resnet50", dict(image_size=32), ["off", "bf16"], [1, 2]),
                                            ("bert_base", dict(seq_len=16), ["off"], [1])):
        out = tmp_path / model_name
        run_sweep(SweepOptions(model=model_name, out=out, frameworks=[framework], batch_sizes=[2], compiles=[False,
                               True], amps=amps, devices=devices, device="cpu", warmup=2, steps=2, repeats=2,
                               quiet=True, peak=fake_peak(), log=lambda m: None, timeout_s=900, plots=False, **size))
        rows = {(r.config.compile, r.config.amp, r.config.devices): r for r in load_results(out / "results.jsonl")}
        assert len(rows) == 2 * len(amps) * len(devices)
        for (compiled, amp, n), r in rows.items():
            assert r.config.framework == framework and r.status in ("ok", "unsupported"), (r.config.label(), r.error)
            if r.status == "ok":
                assert r.framework == framework and r.framework_version and len(r.times_s) == 2
                assert r.compiler == ("XLA" if framework != "paddle" else "CINN") if compiled else r.compiler == "none"
                assert r.flops_per_step > 0 and r.global_batch_size == 2 * n and r.samples_per_s > 0
        supported = {k for k, r in rows.items() if r.status == "ok"}
        can = {"jax": lambda c, a, n: c, "tensorflow": lambda c, a, n: n == 1,  # JAX: XLA only; TF: one device
               "paddle": lambda c, a, n: not c and a == "off" and n == 1}[framework]  # no CINN, no CPU AMP
        assert supported == {k for k in rows if can(*k)}, {k: rows[k].error for k in rows}


@pytest.mark.slow  # 20-30 s of jobs; test_slurm_configurations_carry_their_framework covers the commands quickly
def test_program_configurations_run_as_executor_jobs(tmp_path):
    """`--executor slurm` (submitit-local without a cluster: the same submitit code path) runs a program's
    configurations like the built-in ones, each job one `daybreak throughput` narrowed to its configuration."""
    import os

    pytest.importorskip("submitit")
    from daybreak.cli import main

    partition = os.environ.get("DAYBREAK_TEST_SLURM")
    executor = ["--executor", "slurm", "--slurm-partition", partition] if partition else \
        ["--executor", "submitit-local"]
    out = tmp_path / "jobs"
    argv = ["throughput", "--model", "fake_net", "--program", f"{sys.executable} {FAKE} ok", "--batch-sizes", "2,4",
            "--warmup", "2", "--steps", "4", "--repeats", "2", "--device", "cpu", "--peak-budget", "1", "--out",
            str(out), "--no-plots", "-q", *executor]
    assert main(argv) == 0
    rows = load_results(out / "results.jsonl")
    assert sorted(r.config.batch_size for r in rows) == [2, 4]
    assert all(r.status == "ok" and r.framework == "fake" and len(r.times_s) == 2 for r in rows), rows
