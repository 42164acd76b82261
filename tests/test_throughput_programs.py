"""`daybreak throughput --program` and `--frameworks`: any framework's training program timed by DLPerf's protocol.

The default suite drives the protocol with a fake program (tests/fake_throughput_program.py: sleeps as steps);
the slow tests run the reference programs (JAX, TensorFlow, Paddle, MXNet; their extras, or MXNet's interpreter,
installed) and check that they train the same models as daybreak's PyTorch ones: the same parameter count, FLOPs
per step within 2% of torch.utils.flop_counter's, and the same loss on the same batch from the same weights."""

from __future__ import annotations

import ast
import json
import os
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
STEP_S = 0.005  # the fake's time per step


def fake_peak() -> PeakResult:
    return PeakResult(machine_key="test", device="cpu", device_name="test CPU", torch=torch.__version__,
                      flops_per_s={"fp32": 1e12}, bandwidth_bytes_per_s=1e10, measured_at=datetime.now(timezone.utc))


def sweep(out: Path, behaviour: str, **overrides) -> SweepOptions:
    options = dict(model="fake_net", out=out, program=[sys.executable, str(FAKE), behaviour], batch_sizes=[4],
                   device="cpu", warmup=3, steps=10, repeats=3, quiet=True, peak=fake_peak(), log=lambda m: None,
                   timeout_s=120, plots=False, threads=1)
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
    """Every reference program but PyTorch's (whose model and step are daybreak's) runs where daybreak is not
    installed; the protocol module imports the standard library only."""
    files = sorted(prog.FRAMEWORKS_DIR.glob("*.py"))
    assert {f.name for f in files} >= {"throughput_log.py", "reference.py", "__init__.py",
                                       *(fw.program for fw in prog.FRAMEWORKS.values())}
    for f in files:
        assert ("daybreak" in _imports(f)) == (f.name == "pytorch_program.py"), f
    assert _imports(prog.FRAMEWORKS_DIR / "throughput_log.py") <= {"json", "math", "os", "sys", "time", "typing"}
    sys.path.insert(0, str(prog.FRAMEWORKS_DIR))
    try:
        import throughput_log
    finally:
        sys.path.remove(str(prog.FRAMEWORKS_DIR))
    assert throughput_log.SETTINGS_ENV == prog.SETTINGS_ENV and throughput_log.TOKEN == prog.TOKEN
    assert throughput_log.MIN_WINDOW_S == prog.MIN_WINDOW_S


def test_a_program_is_timed_into_the_same_rows_as_the_built_in_models(tmp_path):
    outcome = run_sweep(sweep(tmp_path, "ok"))
    [row] = load_results(tmp_path / "results.jsonl")
    assert row.status == "ok", row.error
    assert outcome.rows[0].key() == row.key() and row.config.framework == "program"
    assert row.framework == "fake" and row.framework_version == "1.0" and row.compiler == "none"
    assert len(row.times_s) == 3 and row.median_time_s == statistics.median(row.times_s)
    assert all(t >= 10 * STEP_S for t in row.times_s)  # 10 steps of STEP_S at least: only the timed steps
    assert row.samples_per_s == pytest.approx(4 * 10 / row.median_time_s, rel=1e-12)
    assert row.samples_per_s_min <= row.samples_per_s <= row.samples_per_s_max
    # daybreak has no model "fake_net": the program's own count is the row's, and the row says so
    assert row.flops_per_step == 4000 == row.own_flops_per_step and row.flops_source == "program"
    assert any("the program's own count" in n for n in row.notes)
    assert row.achieved_flops_per_s == pytest.approx(4000 * 10 / row.median_time_s)
    assert row.utilization == pytest.approx(row.achieved_flops_per_s / 1e12)  # the same peak as a built-in row
    assert row.input_shape == [4] and row.system is not None and row.init_s is not None
    assert row.threads_per_process == row.inter_op_threads == 1 and row.math_precision == "fp32"
    assert 0 <= row.cores_used < 1.5  # the fake's "device" sleeps
    assert any("fresh process" in n for n in row.notes)
    assert any("under the 1 s the clock check needs" in n for n in row.notes)  # 10 x 5 ms: one short window
    # how busy the machine was: this process's and the program's CPU time are ours, the rest is the others'
    assert row.context is not None and row.context.own_cpu_s > 0 and row.context.load_avg_before is not None
    assert 0 <= row.context.busy_fraction <= 1
    log = next((tmp_path / "logs").glob("*.log")).read_text()
    assert log.count("--- daybreak: repeat") == 3
    windows = [json.loads(line.split(prog.TOKEN, 1)[1])["value"] for line in log.splitlines()
               if "throughput_window" in line]
    assert all(isinstance(w["loss"], float) for w in windows) and len({w["loss"] for w in windows}) > 1
    md = (tmp_path / "results.md").read_text()
    assert "## Frameworks (DLPerf)" in md and "fake 1.0" in md
    again = run_sweep(sweep(tmp_path, "ok"))  # resumable like a built-in sweep
    assert again.measured == 0 and again.skipped == 1


# Programs that cannot be trusted, told apart from the honest one through `daybreak throughput --program`: 100 steps
# of 10 ms in windows of at least 1 s, so that a window misreported by half is 0.5 s off its arrival stamps.
@pytest.mark.parametrize("behaviour, status, reason", [
    ("ok", "ok", None),
    ("never-syncs", "failed", "carries no finite loss (loss=None): sync() must wait for the device"),
    ("stale-loss", "failed", "the loss is 6.5 in every window: it is not read from the steps that ran"),
    ("halves", "failed", "the program's clock disagrees with daybreak's"),
    ("liar", "failed", "the program's clock disagrees with daybreak's"),
    ("other-device", "failed", "asked for cpu, the program ran on cuda (fake device)"),
    ("other-threads", "failed", "asked for 1 thread per process, the program runs 2 intra-op threads"),
])
def test_the_honest_program_is_told_apart_from_one_that_never_syncs_or_misreports(tmp_path, behaviour, status,
                                                                                  reason, monkeypatch):
    from daybreak.cli import main

    monkeypatch.setenv("DAYBREAK_FAKE_STEP_S", "0.01")
    out = tmp_path / behaviour
    code = main(["throughput", "--model", "fake_net", "--program", f"{sys.executable} {FAKE} {behaviour}",
                 "--batch-sizes", "4", "--warmup", "5", "--steps", "100", "--repeats", "2" if status == "ok" else "1",
                 "--threads", "1", "--device", "cpu", "--peak-budget", "1", "--no-plots", "-q", "--out", str(out)])
    [row] = load_results(out / "results.jsonl")
    assert (code, row.status) == ((0, "ok") if status == "ok" else (1, "failed")), row.error
    if status == "ok":
        assert row.error is None and len(row.times_s) == 2
        assert all(t == pytest.approx(100 * 0.01, rel=0.5) for t in row.times_s)  # the fake's steps, at least
        assert not any("under the 1 s" in n for n in row.notes)  # windows of 1 s: the clock check judged them
    else:
        assert reason in row.error and "\n" not in row.error and row.samples_per_s is None


@pytest.mark.parametrize("behaviour, status, reason", [
    ("silent", "failed", "printed no throughput_window record"),
    ("crash", "failed", "exited with status 3: RuntimeError: the fake program fell over"),
    ("failed", "failed", "the program could not run it: fake: asked for cpu, which this machine does not have"),
    ("wrong-batch", "failed", "ran batch_size 8, not the 4 asked"),
    ("unsupported", "unsupported", "fake: this configuration is not supported"),
])
def test_a_program_that_cannot_be_trusted_is_recorded_with_one_line_of_reason(tmp_path, behaviour, status, reason):
    run_sweep(sweep(tmp_path, behaviour, repeats=2))
    [row] = load_results(tmp_path / "results.jsonl")
    assert row.status == status and reason in row.error and "\n" not in row.error
    assert row.samples_per_s is None and row.times_s == []
    assert status.upper() in (tmp_path / "results.md").read_text()


def test_a_program_asked_for_a_gpu_that_runs_on_the_cpu_is_failed_at_its_start_record(tmp_path):
    """The check needs no GPU: the configuration asks for cuda (as a CUDA sweep would), the fake runs on the CPU; it
    is stopped as soon as its start record says so, before any window."""
    config = ThroughputConfig(model="fake_net", batch_size=4, device="cuda", warmup=2, steps=4, repeats=2,
                              framework="program", program=[sys.executable, str(FAKE), "other-device-kind"],
                              protocol="program", threads=1)
    status, error, report, _, _ = prog.run_attempt(config, 4, 60, tmp_path / "log.txt", None)
    assert (status, report) == ("failed", None)
    assert "asked for cuda, the program ran on cpu (fake device)" in error and "\n" not in error
    log = (tmp_path / "log.txt").read_text()
    assert "throughput_start" in log and "throughput_window" not in log  # stopped before it timed anything


def test_channels_last_is_applied_by_a_program_or_refused(tmp_path, capsys):
    from daybreak.cli import main

    from conftest import single_line

    run_sweep(sweep(tmp_path / "nhwc", "ok", channels_last=True, repeats=1))  # the fake echoes channels_last
    [row] = load_results(tmp_path / "nhwc" / "results.jsonl")
    assert row.status == "ok" and row.config.channels_last
    assert prog.check_start({"batch_size": 4, "devices": 1, "device": "cpu", "threads": 1},
                            row.config, 4, 1).startswith("asked for channels_last, the program did not say")
    assert main(["throughput", "--model", "resnet50", "--frameworks", "pytorch,jax", "--channels-last", "--out",
                 str(tmp_path / "never")]) == 2
    err = capsys.readouterr().err
    assert single_line(err) and "--channels-last is PyTorch's memory format" in err and "jax NHWC" in err


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
                 ["throughput", "--model", "resnet50", "--frameworks", "jax", "--protocol", "worker"],
                 ["throughput", "--model", "resnet50", "--protocol", "program", "--mode", "infer"],
                 ["throughput", "--model", "resnet50", "--frameworks", "jax", "--min-window", "0"],
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


def _window(first: int, steps: int, seconds: float, arrival: float, loss: float | None = None,
            cpu_s: float | None = None) -> prog.Line:
    return prog.Line(prog.WINDOW, {"first_step": first, "steps": steps, "samples": 2 * steps, "seconds": seconds,
                                   "loss": 5.0 - first / 100 if loss is None else loss}, arrival, cpu_s)


def _launch(*windows: prog.Line) -> prog.Launch:
    start = prog.Line(prog.START, {"framework": "x", "batch_size": 2, "devices": 1, "device": "cpu", "threads": 1},
                      0.0)
    return prog.Launch(records=[start, *windows], returncode=0)


def test_the_warm_up_is_skipped_and_the_clock_checked_from_the_arrival_stamps():
    config = ThroughputConfig(model="x", batch_size=2, warmup=4, steps=6, framework="program", program=["x"])
    # windows back to back: each line arrives its window's seconds after the previous one
    ok = _launch(_window(0, 4, 9.0, 9.0), _window(4, 3, 1.0, 10.0), _window(7, 3, 1.5, 11.52))
    assert prog.timed_seconds(ok, config, 2, 1, "r").seconds == pytest.approx(2.5)  # the warm-up's 9 s not counted
    liar = _launch(_window(0, 4, 9.0, 9.0), _window(4, 3, 0.1, 10.0), _window(7, 3, 0.1, 11.0))
    with pytest.raises(prog.Refused, match=r"claims 0.100 s but its line arrived 1.000 s after"):
        prog.timed_seconds(liar, config, 2, 1, "r")
    # each window within its own tolerance, the sum of the timed ones not: 2 x 0.8 s claimed over 2.0 s
    drift = _launch(_window(0, 4, 9.0, 9.0), _window(4, 3, 0.86, 10.0), _window(7, 3, 0.86, 11.0))
    with pytest.raises(prog.Refused, match=r"its timed windows claim 1.720 s in all but their lines arrived over "
                                           r"2.000 s"):
        prog.timed_seconds(drift, config, 2, 1, "r")
    straddles = _launch(_window(0, 3, 1.0, 1.0), _window(3, 7, 1.0, 2.0))
    with pytest.raises(prog.Refused, match="straddles the end of the warm-up"):
        prog.timed_seconds(straddles, config, 2, 1, "r")
    short = _launch(_window(0, 4, 1.0, 1.0), _window(4, 3, 1.0, 2.0))
    with pytest.raises(prog.Refused, match="timed 3 steps after the 4 warm-up steps, not the 6 asked"):
        prog.timed_seconds(short, config, 2, 1, "r")
    gap = _launch(_window(0, 4, 1.0, 1.0), _window(5, 6, 1.0, 2.0))
    with pytest.raises(prog.Refused, match="malformed"):
        prog.timed_seconds(gap, config, 2, 1, "r")


def test_a_program_that_keeps_more_cores_busy_than_its_threads_is_failed():
    """The program's CPU time over the wall time of its timed windows (daybreak reads it at each window's arrival)."""
    config = ThroughputConfig(model="x", batch_size=2, warmup=4, steps=6, framework="program", program=["x"])
    one_core = _launch(_window(0, 4, 9.0, 9.0, cpu_s=9.0), _window(4, 3, 1.0, 10.0, cpu_s=10.0),
                       _window(7, 3, 1.0, 11.0, cpu_s=11.05))
    assert prog.timed_seconds(one_core, config, 2, 1, "r").cores_used == pytest.approx(1.025)
    two_cores = _launch(_window(0, 4, 9.0, 9.0, cpu_s=9.0), _window(4, 3, 1.0, 10.0, cpu_s=10.9),
                        _window(7, 3, 1.0, 11.0, cpu_s=12.8))
    with pytest.raises(prog.Refused, match=r"asked for 1 thread per process, the program kept 1.90 cores busy during "
                                           r"its timed steps"):
        prog.timed_seconds(two_cores, config, 2, 1, "r")
    two_threads = prog.Line(prog.START, {"batch_size": 2, "devices": 1, "device": "cpu", "threads": 2}, 0.0)
    asked_two = prog.Launch(records=[two_threads, *two_cores.windows], returncode=0)
    assert prog.timed_seconds(asked_two, config, 2, 2, "r").cores_used == pytest.approx(1.9)  # asked for 2: fine
    on_a_gpu = config.model_copy(update=dict(device="cuda"))  # a GPU's host threads spin: not judged
    start = prog.Line(prog.START, {"batch_size": 2, "devices": 1, "device": "cuda", "threads": 1}, 0.0)
    assert prog.timed_seconds(prog.Launch(records=[start, *two_cores.windows], returncode=0), on_a_gpu, 2, 1,
                              "r").seconds == pytest.approx(2.0)


def test_the_start_record_must_say_what_ran():
    config = ThroughputConfig(model="x", batch_size=2, framework="program", program=["x"], device="cuda")
    good = {"batch_size": 2, "devices": 1, "device": "gpu", "device_name": "NVIDIA H200", "threads": 4}
    assert prog.check_start(good, config, 2, 4) is None  # JAX's "gpu" is a CUDA device
    assert "does not say which threads" in prog.check_start({**good, "threads": None}, config, 2, 4)
    assert "does not say which device" in prog.check_start({**good, "device": None}, config, 2, 4)
    assert "asked for cuda, the program ran on cpu" in prog.check_start({**good, "device": "cpu"}, config, 2, 4)
    assert "runs 8 inter-op threads" in prog.check_start({**good, "inter_op_threads": 8}, config, 2, 4)
    assert "ran amp bf16, not the off asked" in prog.check_start({**good, "amp": "bf16"}, config, 2, 4)


def test_the_framework_table_is_relative_to_pytorch_eager():
    def row(name: str, compiled: bool, samples_per_s: float, **more) -> ThroughputResult:
        config = ThroughputConfig(model="resnet50", batch_size=8, compile=compiled, framework=name,
                                  protocol="program")
        return ThroughputResult(config=config, status="ok", samples_per_s=samples_per_s, samples_per_s_min=samples_per_s
                                * 0.9, samples_per_s_max=samples_per_s * 1.1, batch_size=8, global_batch_size=8,
                                **more)

    rows = [row("pytorch", False, 100.0), row("pytorch", True, 120.0), row("jax", True, 150.0, framework="jax",
                                                                         framework_version="0.10.2", compiler="XLA"),
            ThroughputResult(config=ThroughputConfig(model="resnet50", batch_size=8, framework="jax",
                                                     protocol="program"),
                             status="unsupported", error="JAX always compiles with XLA")]
    md = to_markdown(rows)
    table = md[md.index("## Frameworks (DLPerf)"):md.index("## resnet50")]
    lines = [line for line in table.splitlines() if line.startswith("| resnet50")]
    assert [line.split(" | ")[1:3] + [line.split(" | ")[9]] for line in lines] == [
        ["jax", "none", "-"], ["jax 0.10.2", "XLA", "1.50x"], ["pytorch", "none", "1.00x"],
        ["pytorch", "torch.compile", "1.20x"]]
    assert "unsupported: JAX always compiles with XLA" in table
    assert "90.0-110.0" in table  # the spread of the repeats


def test_slurm_configurations_carry_their_framework():
    base = strip_driver_flags(["throughput", "--model", "resnet50", "--frameworks", "pytorch,jax", "--executor",
                               "slurm", "--batch-sizes", "8", "--protocol", "program"])
    assert base == ["throughput", "--model", "resnet50"]
    jax = ThroughputConfig(model="resnet50", batch_size=8, framework="jax", protocol="program")
    cmd = config_command(base, jax, Path("part"))
    assert cmd[cmd.index("--frameworks") + 1] == "jax" and cmd[cmd.index("--batch-sizes") + 1] == "8"
    # PyTorch's row of a comparison is a program too, alone in its job
    torch_row = ThroughputConfig(model="resnet50", batch_size=8, protocol="program")
    cmd = config_command(base, torch_row, Path("part"))
    assert cmd[cmd.index("--frameworks") + 1] == "pytorch" and cmd[cmd.index("--protocol") + 1] == "program"
    program = ThroughputConfig(model="m", batch_size=8, framework="program", program=["python", "t.py"])
    assert "--frameworks" not in config_command(["throughput", "--program", "python t.py"], program, Path("p"))
    # a PyTorch configuration keeps the key (and file names) it had before frameworks existed
    assert ThroughputConfig(model="resnet50", batch_size=8).key() == (
        "resnet50", "train", 8, "off", False, 1, 1, None, None, None, False, "cpu", None)
    assert jax.key() != ThroughputConfig(model="resnet50", batch_size=8).key()
    assert torch_row.key() != ThroughputConfig(model="resnet50", batch_size=8).key()  # another protocol


# --- equivalence: the same model, trained the same way ------------------------------------------------------------

REFERENCE = {"resnet50": 25_557_032, "bert_base": 109_514_298}  # parameters, the MLM head included



def _load(model: torch.nn.Module, weights: dict) -> torch.nn.Module:
    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    return model


def _scrambled(weights: dict) -> dict:
    """Every bottleneck's 3x3 convolution with its input and output channels swapped (OIHW read as IOHW): a
    weight-mapping bug of the same shape."""
    return {k: v.transpose(1, 0, 2, 3).copy() if k.startswith("layer") and k.endswith("conv2.weight") else v
            for k, v in weights.items()}


def test_the_equivalence_check_sees_the_whole_network(tmp_path, one_thread):
    """A scrambled bottleneck and a v1 stride are rejected; with the zero-initialized last BatchNorm scales (the
    old check's weights) both gave the very same loss, which is why every constant-initialized parameter is
    perturbed; another update rule is rejected by the change of the loss over the updates."""
    from daybreak.models import create_model
    from daybreak.models.resnet50 import ResNet50
    from daybreak.sweep import equivalence as eq

    case = eq.reference_case("resnet50", tmp_path, batch_size=2, image_size=32)
    assert case.figures.params == REFERENCE["resnet50"] and len(case.figures.losses) == eq.CHECK_STEPS + 1
    weights, batch = dict(np.load(case.weights)), dict(np.load(case.batch))
    assert all(weights[f"layer{i}.0.bn3.weight"].min() > 0 for i in range(1, 5))  # no branch is invisible
    same = eq.torch_figures("resnet50", _load(create_model("resnet50"), weights), batch)
    assert eq.compare(case.figures, same) == [] and same.losses == case.figures.losses
    v1 = eq.compare(case.figures, eq.torch_figures("resnet50", _load(ResNet50(stride_in_1x1=True), weights), batch))
    scrambled = eq.compare(case.figures, eq.torch_figures("resnet50", _load(create_model("resnet50"),
                                                                            _scrambled(weights)), batch))
    for problems in (v1, scrambled):
        assert problems and problems[0].startswith("loss at initialization"), problems
    # the old check's weights: every residual branch outputs zero, so neither wrong model changes the loss
    torch.manual_seed(0)
    zero = create_model("resnet50").state_dict()
    x, y = torch.from_numpy(batch["x"]), torch.from_numpy(batch["y"]).long()

    def first_loss(model: torch.nn.Module, state: dict) -> float:
        model.load_state_dict(state)
        with torch.no_grad():
            return float(torch.nn.functional.cross_entropy(model.train()(x), y))

    blind = first_loss(create_model("resnet50"), zero)
    assert first_loss(ResNet50(stride_in_1x1=True), zero) == blind
    assert first_loss(create_model("resnet50"), {k: torch.from_numpy(v) for k, v in _scrambled(
        {k: t.numpy() for k, t in zero.items()}).items()}) == blind
    # another update rule: the same first loss, another change over the updates
    other = eq.torch_figures("resnet50", _load(create_model("resnet50"), weights), batch,
                             optimizer_kwargs=dict(momentum=0.8))
    problems = eq.compare(case.figures, other)
    assert other.losses[0] == case.figures.losses[0] and problems
    assert all(p.startswith("the loss changed by") for p in problems), problems


def test_bert_scores_the_masked_positions_only_and_counts_what_runs(one_thread):
    """The head's logits at the masked positions are those of the whole sequence at those positions; the FLOPs
    counted are the head's on B x P tokens."""
    from daybreak.models import create_model
    from daybreak.records.throughput import ThroughputConfig
    from daybreak.sweep.worker import masked_count, model_step_flops, synthetic_tokens

    assert [masked_count(n) for n in (1, 8, 16, 32, 128, 512)] == [1, 1, 2, 5, 19, 77]
    torch.manual_seed(0)
    bert = create_model("bert_base", num_hidden_layers=1).eval()
    ids, positions, labels = synthetic_tokens(2, 16, 30522, torch.Generator().manual_seed(1))
    assert positions.shape == (2, 2) and (labels == ids.gather(1, positions)).all()
    assert (positions.diff(dim=1) > 0).all()  # sorted, distinct
    with torch.no_grad():
        full = bert(ids)
        masked = bert(ids, masked_positions=positions)
    assert torch.allclose(masked, full.gather(1, positions[..., None].expand(-1, -1, full.shape[-1])), atol=1e-5)
    # counted: the head (transform dense 768 x 768 and decoder 768 x 30522, forward and backward) on the B x P
    # scored tokens, not on all B x L: the difference from a head over every token is exactly the skipped tokens'
    from daybreak.measure.flops import step_flops

    batch, seq = 4, 32
    scored = model_step_flops(ThroughputConfig(model="bert_base", batch_size=batch, seq_len=seq), batch)
    with torch.device("meta"):
        every = create_model("bert_base")
        ids_meta = torch.zeros(batch, seq, dtype=torch.long)
    whole = step_flops(every.train(), ids_meta, ids_meta,
                       lambda logits, y: torch.nn.functional.cross_entropy(logits.reshape(-1, 30522), y.reshape(-1)),
                       True)
    per_token = 3 * 2 * (768 * 768 + 768 * 30522)
    assert whole - scored == batch * (seq - masked_count(seq)) * per_token


# --- the reference programs (slow; the extras installed) ---------------------------------------------------------

# The equivalence at a realistic size (ResNet-50 at 224 px, BERT at sequence 128, batch 8). Each framework's own
# FLOP count, a diagnostic beside daybreak's model FLOPs, within OWN_FLOPS_TOLERANCE of PyTorch's: XLA's counts
# elementwise ops and the optimizer update, and only the multiply-adds of a padded convolution that touch the input.
EQUIVALENCE_SIZE = {"resnet50": dict(image_size=224), "bert_base": dict(seq_len=128)}
OWN_FLOPS_TOLERANCE = 0.03


@pytest.fixture(scope="module")
def reference_cases(tmp_path_factory):
    from daybreak.sweep import equivalence as eq

    folder = tmp_path_factory.mktemp("reference")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {name: eq.reference_case(name, folder, batch_size=8, **EQUIVALENCE_SIZE[name]) for name in REFERENCE}
    finally:
        torch.set_num_threads(before)


def _skip_unless_installed(framework: str) -> None:
    """Skip when the framework's extra (or its own interpreter: MXNet) is not installed, saying what is missing;
    never import it here (paddle beside torch segfaults)."""
    try:
        prog.check_framework(framework)
    except ConfigError as e:
        pytest.skip(str(e))


def _describe(framework: str, case, weights: Path | None = None) -> "eq.Figures":
    from daybreak.sweep import equivalence as eq
    from daybreak.sweep.launch import worker_env

    _skip_unless_installed(framework)
    fw = prog.FRAMEWORKS[framework]
    cmd = [prog.framework_python(fw), str(prog.FRAMEWORKS_DIR / fw.program), "--model", case.model,
           "--batch-size", str(case.batch_size), "--describe", "--weights", str(weights or case.weights), "--batch",
           str(case.batch), "--image-size", str(case.image_size), "--seq-len", str(case.seq_len), "--threads", "1"]
    env = worker_env(1, {"PYTHONPATH": os.pathsep.join([str(prog.FRAMEWORKS_DIR), os.environ.get("PYTHONPATH", "")])})
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=worker_env(1, env))
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = json.loads(proc.stdout.strip().splitlines()[-1])
    return eq.Figures(params=said["params"], losses=said["losses"], flops_per_step=said["flops_per_step"])


@pytest.mark.slow
@pytest.mark.parametrize("model_name", list(REFERENCE))
@pytest.mark.parametrize("framework", list(prog.FRAMEWORKS))
def test_a_reference_program_trains_the_same_model(reference_cases, framework, model_name):
    from daybreak.sweep import equivalence as eq

    case = reference_cases[model_name]
    said = _describe(framework, case)
    ref = case.figures
    print(f"{framework} {model_name}: params {said.params:,}; own FLOPs/step {said.flops_per_step:.4e} vs "
          f"{ref.flops_per_step:.4e} ({said.flops_per_step / ref.flops_per_step - 1:+.2%}); losses {said.losses} vs "
          f"{ref.losses}")
    assert ref.params == REFERENCE[model_name]
    assert eq.compare(ref, said) == []
    assert said.flops_per_step == pytest.approx(ref.flops_per_step, rel=OWN_FLOPS_TOLERANCE)


@pytest.mark.slow
def test_the_equivalence_check_rejects_a_wrong_model_against_another_framework(reference_cases, tmp_path):
    """JAX's program (v1.5) against a v1 PyTorch reference, and against its own weights scrambled."""
    from daybreak.models.resnet50 import ResNet50
    from daybreak.sweep import equivalence as eq

    right = reference_cases["resnet50"]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        v1 = eq.reference_case("resnet50", tmp_path / "v1", batch_size=8, image_size=224,
                               build=lambda: ResNet50(stride_in_1x1=True))
    finally:
        torch.set_num_threads(before)
    assert eq.compare(v1.figures, _describe("jax", v1))[0].startswith("loss at initialization")
    scrambled = tmp_path / "scrambled.npz"
    np.savez(scrambled, **_scrambled(dict(np.load(right.weights))))
    assert eq.compare(right.figures, _describe("jax", right, scrambled))[0].startswith("loss at initialization")


@pytest.mark.slow
@pytest.mark.parametrize("framework", list(prog.FRAMEWORKS))
def test_each_reference_program_is_measured_through_the_protocol(tmp_path, framework):
    """Each framework at a tiny size through `daybreak throughput --frameworks`: its rows, what it cannot run,
    the device and threads it reports, daybreak's model FLOPs in every row."""
    _skip_unless_installed(framework)
    from daybreak.sweep.worker import model_step_flops

    # ResNet-50 over the whole grid; BERT fp32 on one device, with and without the compiler
    for model_name, size, amps, devices in (("resnet50", dict(image_size=32), ["off", "bf16"], [1, 2]),
                                            ("bert_base", dict(seq_len=16), ["off"], [1])):
        out = tmp_path / model_name
        run_sweep(SweepOptions(model=model_name, out=out, frameworks=[framework], batch_sizes=[2], compiles=[False,
                               True], amps=amps, devices=devices, device="cpu", warmup=2, steps=2, repeats=2,
                               threads=1, protocol="program", quiet=True, peak=fake_peak(), log=lambda m: None,
                               timeout_s=1800, plots=False, **size))
        rows = {(r.config.compile, r.config.amp, r.config.devices): r for r in load_results(out / "results.jsonl")}
        assert len(rows) == 2 * len(amps) * len(devices)
        for (compiled, amp, n), r in rows.items():
            assert r.config.framework == framework and r.status in ("ok", "unsupported"), (r.config.label(), r.error)
            if r.status == "ok":
                assert r.framework == framework and r.framework_version and len(r.times_s) == 2
                compiler = {"pytorch": "torch.compile", "paddle": "CINN", "mxnet": "hybridize"}.get(framework, "XLA")
                assert r.compiler == (compiler if compiled else "none")
                assert r.flops_per_step == model_step_flops(r.config, 2) * n and r.flops_source == "daybreak"
                assert r.own_flops_per_step > 0 and r.global_batch_size == 2 * n and r.samples_per_s > 0
                assert r.threads_per_process == 1 and r.cores_used is not None and r.cores_used < 1.5
                assert r.math_precision == ("bf16" if amp == "bf16" else "fp32") and r.layout
        supported = {k for k, r in rows.items() if r.status == "ok"}
        can = {"jax": lambda c, a, n: c, "tensorflow": lambda c, a, n: n == 1,  # JAX: XLA only; TF: one device
               "pytorch": lambda c, a, n: n == 1,  # one device per program (several: the worker protocol)
               "paddle": lambda c, a, n: not c and a == "off" and n == 1,  # no CINN, no CPU AMP
               "mxnet": lambda c, a, n: n == 1}[framework]  # one device (bf16 on a CPU: MXNet's AMP)
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


def test_the_load_counts_the_measured_processes_as_ours(tmp_path):
    """LoadMeter: a child's CPU time, once it has been waited for, is ours, not another tenant's."""
    from daybreak.sweep.load import LoadMeter

    meter = LoadMeter().start()
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    subprocess.run([sys.executable, "-c", burn], check=True)
    context = meter.stop()
    assert context.own_cpu_s >= 0.3 and context.load_avg_before is not None and context.load_avg_after is not None
    assert context.other_cpu_s is not None and 0 <= context.busy_fraction <= 1
    assert bool(context.warnings) == (context.busy_fraction > 0.10)


def test_a_framework_table_states_its_protocol_and_how_busy_the_machine_was():
    from daybreak.records.run import MeasurementContext
    from daybreak.records.throughput import protocol_text

    assert protocol_text(20, 100, 7) == ("20 warm-up + 100 timed steps, median of 7 repeats, each a fresh process "
                                         "(DLPerf's protocol)")
    assert "smaller than DLPerf's 20 + 100 x 7" in protocol_text(3, 6, 3)

    def row(name: str, busy: float) -> ThroughputResult:
        config = ThroughputConfig(model="resnet50", batch_size=8, framework=name, protocol="program", warmup=3,
                                  steps=6, repeats=3)
        return ThroughputResult(config=config, status="ok", samples_per_s=10.0, samples_per_s_min=9.0,
                                samples_per_s_max=11.0, batch_size=8, global_batch_size=8, flops_per_step=10**9,
                                own_flops_per_step=int(1.05e9), flops_source="daybreak", math_precision="tf32",
                                context=MeasurementContext(busy_fraction=busy, load_avg_before=[3.0, 2.0, 1.0]))

    quiet = to_markdown([row("pytorch", 0.02), row("jax", 0.05)])
    table = quiet[quiet.index("## Frameworks (DLPerf)"):]
    assert "Protocol: 3 warm-up + 6 timed steps, median of 3 repeats, each a fresh process (smaller than" in table
    assert "busy machine" not in table and "| tf32 |" in table and "(+5.0%)" in table and "| 5% |" in table
    busy = to_markdown([row("pytorch", 0.02), row("jax", 0.35)])
    assert "**Measured on a busy machine**: other processes took up to 35% of the CPUs during 1 of these 2 rows" in busy


def test_the_benchmark_merges_its_rounds_and_pairs_them_by_round():
    """benchmarks/frameworks.py: each configuration's rounds (one fresh process each) become one row; the ratio to
    PyTorch eager is paired by round (daybreak.analysis.paired); no "fastest" over a busy machine's rows."""
    from conftest import REPO
    from daybreak.records.run import MeasurementContext

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import frameworks as bench
    finally:
        sys.path.remove(str(REPO / "benchmarks"))

    def row(name: str, seconds: float, busy: float) -> ThroughputResult:
        config = ThroughputConfig(model="resnet50", batch_size=8, framework=name, protocol="program", warmup=2,
                                  steps=5, repeats=1, compile=name == "jax")
        return ThroughputResult(config=config, status="ok", times_s=[seconds], median_time_s=seconds,
                                samples_per_s=40 / seconds, samples_per_s_min=40 / seconds,
                                samples_per_s_max=40 / seconds, batch_size=8, global_batch_size=8,
                                flops_per_step=10**9, own_flops_per_step=10**9, flops_source="daybreak",
                                framework_version="1", context=MeasurementContext(busy_fraction=busy,
                                                                                  load_avg_before=[1.0, 1.0, 1.0]))

    def rounds(busy: float) -> list[dict]:
        out = []
        for seconds in (4.0, 5.0, 4.5):  # a slow spell in round 2 hits both frameworks
            rows = [row("pytorch", seconds, busy), row("jax", seconds / 2, busy)]
            out.append({r.key(): r for r in rows})
        return out

    [torch_row, jax_row] = bench.merged_rows(rounds(0.02))
    assert torch_row.config.repeats == 3 and torch_row.times_s == [4.0, 5.0, 4.5] and torch_row.median_time_s == 4.5
    assert torch_row.samples_per_s == pytest.approx(40 / 4.5) and torch_row.samples_per_s_min == pytest.approx(8.0)
    quiet = "\n".join(bench.model_table("resnet50", "64 px, batch 8", 1, rounds(0.02)))
    assert "median of 3 repeats, each a fresh process (smaller than DLPerf's" in quiet
    # every round's ratio is 2: 3 pairs are too few for the exact signed-rank test (p = 0.25), so no "fastest"
    assert "| jax 1 | XLA | fp32 | 17.78 | 16.00-20.00 | 2.00x (not distinguishable) |" in quiet
    assert "Fastest" not in quiet and ("No fastest: the highest median, jax (XLA, fp32), 17.78 samples/s, is not "
                                       "distinguishable from pytorch (none, fp32) at 95% over 3 rounds") in quiet
    seven = [{r.key(): r for r in (row("pytorch", s, 0.02), row("jax", s / (2 + 0.01 * i), 0.02))}
             for i, s in enumerate((4.0, 5.0, 4.5, 4.2, 4.8, 4.1, 4.4))]
    assert ("Fastest: jax (XLA, fp32), 18.73 samples/s, distinguishable from every other row at 95% (paired by "
            "round); other processes took at most 2% of the CPUs.") in "\n".join(
        bench.model_table("resnet50", "64 px, batch 8", 1, seven))
    busy = "\n".join(bench.model_table("resnet50", "64 px, batch 8", 1, rounds(0.4)))
    assert "Fastest" not in busy and "Measured on a busy machine: other processes took up to 40%" in busy


@pytest.mark.slow
@pytest.mark.parametrize("framework", list(prog.FRAMEWORKS))
def test_a_reference_program_asked_for_a_gpu_it_does_not_have_fails_with_one_line(tmp_path, framework):
    """A CUDA sweep's row on a machine (or a build) without CUDA: one line, never a CPU run under the GPU's name."""
    _skip_unless_installed(framework)
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    config = ThroughputConfig(model="resnet50", batch_size=2, image_size=32, device="cuda", warmup=1, steps=1,
                              repeats=1, framework=framework, protocol="program", threads=1, compile=True)
    status, error, report, _, _ = prog.run_attempt(config, 2, 600, tmp_path / "log.txt", None)
    assert (status, report) == ("failed", None), error
    assert "asked for cuda" in error and "\n" not in error
    assert "throughput_window" not in (tmp_path / "log.txt").read_text()


def test_a_program_of_a_model_daybreak_knows_carries_daybreaks_model_flops(tmp_path):
    """One FLOPs figure per (model, shape, batch) whoever trains it: daybreak's count, the program's own beside it."""
    from daybreak.sweep.worker import model_step_flops

    run_sweep(sweep(tmp_path, "ok", model="resnet50", image_size=32, batch_sizes=[2, 4], repeats=1))
    rows = {r.config.batch_size: r for r in load_results(tmp_path / "results.jsonl")}
    for batch, r in rows.items():
        assert r.status == "ok" and r.flops_source == "daybreak"
        assert r.flops_per_step == model_step_flops(r.config, batch) and r.own_flops_per_step == 1000 * batch
    assert rows[4].flops_per_step == 2 * rows[2].flops_per_step  # 2.03 GFLOP per step at batch 4 and 32 px
    assert not any("the program's own count" in n for n in rows[4].notes)
    md = (tmp_path / "results.md").read_text()
    assert "| 2.03 GFLOP | 4 kFLOP (-100.0%) |" in md  # the program's own count, a diagnostic beside daybreak's
