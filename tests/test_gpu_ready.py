"""Ready for the first GPU hour (issue 21): MLPerf init before the clock, the GPU settings each run states, the
host syncs of the loop, a crash in a recipe recorded, run MFU from the training phases. CUDA is mocked where the
code asks the device (capability, bf16 support); everything else runs for real on the CPU."""

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
import torch
from mlperf_logging.compliance_checker.mlp_parser import ruleset_610 as mlp_parser

from daybreak.cli import main
from daybreak.measure import device as dev
from daybreak.recipes import get_recipe
from daybreak.records.run import PerformanceSettings, RunResult
from daybreak.tasks import get_task
from daybreak.train import runner
from daybreak.train.distributed import DistContext
from daybreak.train.recorder import _lowest_precision
from daybreak.train.spec import compile_mode, resolve_run_spec
from daybreak.train.step import Backend, TrainStep
from daybreak.train.views import SpecData
from daybreak.train.warmup import spec_warmup, spec_warmup_data, warm_up
from daybreak.tasks.batches import BatchPlan

from conftest import single_line
from mlperf_compliance import compliance_messages

CPU = torch.device("cpu")


def fake_gpu(monkeypatch, major: int, minor: int) -> torch.device:
    """A CUDA device of compute capability major.minor as far as daybreak asks: like torch's own answer,
    ``is_bf16_supported()`` counts emulation (True on every GPU) unless ``including_emulation=False``."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (major, minor))

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return True if including_emulation else major >= 8

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    return torch.device("cuda", 0)


# --- precision, TF32, cuDNN -------------------------------------------------------------------------------------

@pytest.mark.parametrize("capability,expected", [((7, 0), "fp16"), ((7, 5), "fp16"), ((8, 0), "bf16"),
                                                 ((8, 6), "bf16"), ((9, 0), "bf16")])
def test_auto_precision_is_bf16_only_where_it_is_native(monkeypatch, capability, expected):
    device = fake_gpu(monkeypatch, *capability)
    assert torch.cuda.is_bf16_supported()  # the default answer counts emulation: True even on a V100
    assert dev.resolve_amp("auto", device) == expected
    assert Backend.resolve("cuda", "auto", DistContext()).amp == expected
    reason = dev.amp_reason("auto", expected, device)
    sm = f"sm_{capability[0]}{capability[1]}"
    assert reason.startswith(expected) and sm in reason
    assert ("no native bf16" in reason) == (expected == "fp16")
    assert dev.resolve_amp("bf16", device) == "bf16"  # asked for explicitly: the user's choice stands
    assert dev.tf32_applies(device) == (capability[0] >= 8)
    assert dev.resolve_amp("auto", CPU) == "off"


@pytest.fixture
def restore_backend_flags():
    """The tests set torch's global TF32 / cuDNN switches: put them back afterwards."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark)
    yield
    dev.set_tf32(saved[0])
    torch.backends.cudnn.allow_tf32 = saved[1]
    dev.set_cudnn_benchmark(saved[2])


@pytest.mark.parametrize("capability", [(7, 0), (8, 0), (9, 0)])
@pytest.mark.parametrize("tf32,cudnn", [(True, True), (False, False)])
def test_gpu_settings_are_applied_and_recorded(monkeypatch, restore_backend_flags, capability, tf32, cudnn):
    device = fake_gpu(monkeypatch, *capability)
    spec = resolve_run_spec(runner.RunConfig(task="digits", tf32=tf32, device="cpu"))
    backend = Backend(device, dev.resolve_amp("auto", device))
    settings = PerformanceSettings()
    runner._apply_settings(spec, {"cudnn_benchmark": cudnn}, backend, settings)
    assert torch.backends.cuda.matmul.allow_tf32 is tf32 and torch.backends.cudnn.allow_tf32 is tf32
    assert torch.backends.cudnn.benchmark is cudnn
    assert settings.tf32 is tf32 and settings.cudnn_benchmark is cudnn
    assert settings.tf32_applies == (capability[0] >= 8)
    assert settings.compute_capability == f"sm_{capability[0]}{capability[1]}"
    assert settings.amp_reason.startswith("fp16" if capability[0] < 8 else "bf16")
    # the mllog's precision key follows the recorded setting, not torch's global flags
    assert _lowest_precision("off", "cuda:0", tf32) == ("tf32" if tf32 else "fp32")
    assert _lowest_precision("fp16", "cuda:0", tf32) == "fp16"


def test_a_cpu_run_records_its_settings_and_the_flags_parse(tmp_path, capsys, restore_backend_flags):
    assert main(["run", "--no-tf32", "--out", str(tmp_path / "a"), "-q"]) == 0
    r = RunResult.load(tmp_path / "a")
    p = r.performance
    assert p.tf32 is False and p.cudnn_benchmark is True and p.compile_mode == "off" and r.compile == "off"
    assert p.init_before_data and p.warmup.startswith("none (eager on a CPU") and p.compute_capability is None
    assert p.amp_reason.startswith("off") and any("no effect on cpu" in n for n in p.notes)
    assert p.host_sync == "at each evaluation only (the loss is summed on the device in between)"
    capsys.readouterr()
    assert main(["run", "--compile", "sometimes", "--out", str(tmp_path / "b"), "-q"]) == 2  # RunConfig's reader
    err = capsys.readouterr().err
    assert single_line(err) and "--compile sometimes: choose one of off, default, reduce-overhead, max-autotune" in err
    assert compile_mode(True) == "default" and compile_mode(False) == "off" and compile_mode("max-autotune")
    old = json.loads((tmp_path / "a" / "result.json").read_text())
    old["compile"] = True  # a record written before compile modes
    assert RunResult.model_validate(old).compile == "default"


# --- MLPerf's order: model initialization before the data -------------------------------------------------------

def test_init_runs_before_the_data_and_the_mllog_passes_the_checker(tmp_path):
    r = runner.run(runner.RunConfig(out=tmp_path / "r", quiet=True, rules="mlperf"))
    order = [p.phase for p in r.phases]
    assert order[:3] == ["model_init", "warmup", "data_load"]
    data_start = r.phases[2].start_s
    ml, dawn = r.clocks["mlperf"], r.clocks["dawnbench"]
    assert ml.start_s == data_start and dawn.start_s == r.phases[0].start_s and ml.notes == []
    lines, errors = mlp_parser.parse_file(str(tmp_path / "r" / "mllog.log"))
    assert errors == []
    at = {ll.key: ll.timestamp for ll in lines if ll.key in ("init_start", "init_stop", "run_start")}
    keys = [ll.key for ll in lines]
    assert keys.index("submission_division") < keys.index("init_start") < keys.index("init_stop")
    assert at["init_stop"] == at["run_start"] > at["init_start"]
    assert (at["run_start"] - at["init_start"]) / 1000 == pytest.approx(data_start - r.phases[0].start_s, abs=1e-3)
    assert compliance_messages(tmp_path / "r" / "mllog.log", tmp_path / "checker") == []


def test_a_recipe_that_builds_from_the_spec_cannot_read_the_data():
    view = SpecData(10, get_task("cifar10").input_spec, "mine")
    assert view.num_classes == 10 and view.input_shape == (3, 32, 32)
    with pytest.raises(AttributeError, match="init_from_data"):
        view.train_x


def test_the_warm_up_leaves_weights_optimizer_and_random_state_as_they_were():
    task, recipe = get_task("cifar10"), get_recipe("cifar10")
    hp = recipe.hyperparameters({"batch_size": 16})
    torch.manual_seed(0)
    setup = recipe.build(hp, SpecData(10, task.input_spec, "cifar10"), CPU)
    step = TrainStep(setup.model, setup.optimizer, setup.loss_fn, Backend(CPU, "off"))
    plan = BatchPlan(setup=setup, batch_size=16, epochs=1, seed=0, device=CPU, amp="off", ctx=DistContext())
    data = spec_warmup_data(task.input_spec, 10, 16, 1)
    assert data.train_x.dtype == torch.uint8 and tuple(data.train_x.shape) == (32, 3, 32, 32)
    assert len(data.eval_x) == 100  # padded to one evaluation chunk by the evaluator
    pairs, evaluator = spec_warmup(data, plan, top5=False)
    (x, y), = pairs
    assert x.shape == (16, 3, 32, 32) and x.is_contiguous(memory_format=torch.channels_last)
    before = {k: v.clone() for k, v in setup.model.state_dict().items()}
    rng = torch.get_rng_state()
    seen = []
    warm_up(setup, step, pairs, lambda: seen.append(evaluator(setup.evaluated_model())), CPU)
    assert seen and 0 <= seen[0]["top1"] <= 1
    after = setup.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert setup.optimizer.state_dict()["state"] == {} and torch.equal(torch.get_rng_state(), rng)


# --- host synchronisation ---------------------------------------------------------------------------------------

def _count_reads(monkeypatch) -> list[int]:
    calls: list[int] = []
    original = DistContext.all_reduce_sum

    def counted(self, tensor):
        calls.append(1)
        return original(self, tensor)

    monkeypatch.setattr(DistContext, "all_reduce_sum", counted)
    return calls


@pytest.mark.parametrize("shown", [False, True])
def test_the_loss_is_read_at_evaluations_only_unless_progress_is_shown(monkeypatch, tmp_path, shown):
    from daybreak.train.recorder import RunProgress, RunRecorder

    monkeypatch.setattr(RunRecorder, "progress", lambda self, total, enabled: RunProgress(total, enabled=shown,
                                                                                           desc="t", every=5))
    calls = _count_reads(monkeypatch)
    r = runner.run(runner.RunConfig(out=tmp_path / "r", quiet=True, full_schedule=True, overrides={"epochs": 2}))
    evals = len(r.history)  # each evaluation: the mean loss since the last one, and the evaluator's counts
    steps = r.steps_per_epoch * 2
    assert r.performance.warmup.startswith("none")  # eager on a CPU: no warm-up evaluation
    assert len(calls) == 2 * evals + (steps // 5 if shown else 0)
    assert r.performance.host_sync.startswith("every 5 steps" if shown else "at each evaluation only")


# --- a crash in a user's recipe: recorded, exit 5 ---------------------------------------------------------------

def test_a_crash_in_a_recipes_build_is_a_recorded_failure_with_exit_5(tmp_path, capsys):
    bad = tmp_path / "crash.py"
    bad.write_text(
        "from daybreak.recipes import RECIPES, Recipe\n"
        "def build(hp, data, device):\n"
        "    raise RuntimeError('my recipe is broken')\n"
        "RECIPES.add('crashes', Recipe(name='crashes', task='digits', model='digits_cnn', summary='x',\n"
        "                              defaults=dict(batch_size=8, epochs=1), build=build))\n")
    out = tmp_path / "r"
    assert main(["run", "--recipe", str(bad), "--out", str(out), "-q"]) == 5
    err = capsys.readouterr().err
    assert single_line(err) and "failed: RuntimeError: my recipe is broken" in err and "Traceback" not in err
    r = RunResult.load(out)
    assert r.status == "failed" and "my recipe is broken" in r.message and "traceback.txt" in r.message
    assert "raise RuntimeError('my recipe is broken')" in (out / "traceback.txt").read_text()


# --- fractional schedules and per-group learning rates ----------------------------------------------------------

def test_fractional_epochs_and_per_group_lr_factors():
    from daybreak.recipes import TrainSetup

    opt = torch.optim.SGD([dict(params=[torch.nn.Parameter(torch.zeros(1))], lr=1.0),
                           dict(params=[torch.nn.Parameter(torch.zeros(1))], lr=2.0)])
    setup = TrainSetup(model=torch.nn.Linear(1, 1), optimizer=opt, lr_multiplier=lambda s, t: (0.5, s / t),
                       loss_fn=None, prepare=None, train_epochs=9.9)  # type: ignore[arg-type]
    assert runner._total_steps(setup, 48, 10) == 476  # airbench94: ceil(9.9 x 48)
    setup.train_epochs = None
    assert runner._total_steps(setup, 48, 10) == 480
    runner._set_lrs(setup, [1.0, 2.0], 10, 40)
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.5]
    setup.lr_multiplier = lambda s, t: 0.1
    runner._set_lrs(setup, [1.0, 2.0], 10, 40)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.1, 0.2])


# --- compile outside MLPerf's clock (slow: compiles on the CPU) -------------------------------------------------

@pytest.mark.slow
def test_a_compiled_digits_run_keeps_compile_time_out_of_mlperfs_clock(tmp_path):
    eager = runner.run(runner.RunConfig(out=tmp_path / "eager", quiet=True, threads=1))
    compiled = runner.run(runner.RunConfig(out=tmp_path / "compiled", quiet=True, threads=1, compile=True))
    assert eager.status == compiled.status == "reached" and compiled.recompiles_under_clock == 0
    ml_eager, ml_compiled = (r.clocks["mlperf"].time_to_target_s for r in (eager, compiled))
    assert ml_compiled <= max(3 * ml_eager, ml_eager + 2.0), (ml_compiled, ml_eager)
    warmup_s = sum(p.end_s - p.start_s for p in compiled.phases if p.phase == "warmup")
    assert warmup_s > sum(p.end_s - p.start_s for p in compiled.phases if p.phase == "train")  # compile is there
    assert compiled.clocks["dawnbench"].time_to_target_s > warmup_s  # ... and DAWNBench's clock counts it
    assert compiled.clocks["mlperf"].start_s - compiled.phases[0].start_s >= warmup_s  # MLPerf's does not
    assert main(["show", str(tmp_path / "compiled")]) == 0


# --- run MFU from the training phases: a cold and a warm run agree ----------------------------------------------

@pytest.mark.slow
def test_run_flops_from_training_phases_agree_between_a_cold_and_a_warm_run(tmp_path, capsys):
    from daybreak.records.throughput import PeakResult

    # an empty compile cache: the first run is cold (compiles everything), the second finds it warm; one compile
    # thread, so no compile worker processes compete with the training that follows
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "TORCHINDUCTOR_COMPILE_THREADS": "1"}
    for name in ("cold", "warm"):
        cmd = [sys.executable, "-m", "daybreak", "run", "digits", "--compile", "--threads", "1", "--target", "100%",
               "--set", "epochs=6", "--out", str(tmp_path / name), "-q"]
        assert subprocess.run(cmd, env=env, capture_output=True, timeout=900).returncode == 3  # 100%: not reached
    peak = tmp_path / "peak.json"
    peak.write_text(PeakResult(machine_key="t", device="cpu", device_name="Test CPU", torch="x", threads=1,
                               flops_per_s={"fp32": 5e10}, bandwidth_bytes_per_s=2e9,
                               measured_at=datetime.now(timezone.utc)).model_dump_json())
    assert main(["analyze", "roofline", str(tmp_path / "cold"), str(tmp_path / "warm"), "--peak", str(peak),
                 "--out", str(tmp_path / "an")]) == 0
    cold, warm = json.loads((tmp_path / "an" / "roofline.json").read_text())["points"]
    assert cold["seconds_basis"] == warm["seconds_basis"] == "training phases up to the target"
    if warm["utilization"] != pytest.approx(cold["utilization"], rel=0.2):
        busy = [RunResult.load(tmp_path / n).context.busy_fraction or 0.0 for n in ("cold", "warm")]
        if max(busy) > 0.25:  # the records say other processes took the CPUs: a timing, not a finding
            pytest.skip(f"machine busy ({max(busy):.0%} of the CPUs taken by others): utilization "
                        f"{cold['utilization']:.3f} cold vs {warm['utilization']:.3f} warm")
    assert warm["utilization"] == pytest.approx(cold["utilization"], rel=0.2)
    # over the headline clock the two differ by the compile time a warm cache saves (shown, labelled)
    assert cold["headline_achieved_flops_per_s"] < cold["achieved_flops_per_s"]


# --- peak: a TF32 ceiling, and how long a re-measurement took ---------------------------------------------------

def test_tf32_is_a_peak_precision_measured_only_where_tensor_cores_have_it(monkeypatch, restore_backend_flags):
    from daybreak.sweep import peak

    assert peak.check_precisions(["tf32", "off"]) == ("fp32", "tf32")
    assert "NVIDIA GPUs" in peak._supported(CPU, "tf32")
    assert peak._supported(fake_gpu(monkeypatch, 7, 0), "tf32") == "no TF32 tensor cores before sm_80 (this GPU is sm_70)"
    assert "no native bf16" in peak._supported(torch.device("cuda", 0), "bf16")  # sm_70: bf16 would be emulated
    dev.set_tf32(False)
    with peak._matmul_mode("tf32"):
        assert torch.backends.cuda.matmul.allow_tf32 is True
        with peak._matmul_mode("fp32"):  # the fp32 ceiling is the CUDA cores', TF32 off
            assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.backends.cuda.matmul.allow_tf32 is False


def test_peak_on_a_cpu_records_tf32_as_unsupported_and_force_reports_its_own_time(tmp_path, monkeypatch):
    from daybreak.records.throughput import format_peak
    from daybreak.sweep import peak

    monkeypatch.setenv("DAYBREAK_CACHE", str(tmp_path))
    measured = []
    original = peak.measure_peak

    def spy(*args, **kwargs):
        measured.append(original(*args, **kwargs))
        return measured[-1]

    monkeypatch.setattr(peak, "measure_peak", spy)
    first = peak.get_peak(CPU, force=True, precisions=("fp32", "tf32"), size=128, repeats=1, budget_s=2.0)
    assert first.has("tf32") and "fp32" in first.flops_per_s and "tf32" in first.unsupported
    again = peak.get_peak(CPU, force=True, precisions=("fp32",), size=128, repeats=1, budget_s=2.0)
    assert len(measured) == 2
    assert again.seconds == measured[1].seconds  # this measurement's time, not the sum of both
    assert peak.load_cached(CPU).seconds == measured[1].seconds and "tf32" in again.unsupported  # kept, merged
    assert f"took {measured[1].seconds:.1f} s" in format_peak(again) and "tf32  not measured" in format_peak(again)
