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
