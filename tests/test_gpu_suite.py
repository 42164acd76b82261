"""benchmarks/airbench_parity.py and benchmarks/gpu_suite.sh on the CPU: the parity tool's plumbing against a
stand-in script with airbench's interface (airbench itself is never vendored, and needs CUDA), and the suite's
--dry-run, which resolves every step (the one check of the suite that runs without a GPU)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import airbench_parity  # noqa: E402
import gpu_suite  # noqa: E402
import gpu_wheels  # noqa: E402

# A stand-in with airbench94's interface, not airbench: the hyperparameters that identify legacy/airbench94.py
# (9.9 epochs, a 64-wide first block, main(run)); it reads cifar10/train.pt and test.pt from the working folder
# as airbench's CifarLoader does, normalizes with torchvision.transforms.Normalize, trains a linear model for two
# epochs on the CPU and prints airbench's table rows (print_columns), the cumulative time in total_time_seconds;
# like airbench, its header row is printed by its __main__ block only (an H200 run found that out).
STAND_IN = '''
import os, time
import torch
import torchvision.transforms as T

hyp = {"opt": {"train_epochs": 9.9, "batch_size": 50}, "net": {"widths": {"block1": 64}}}
EPOCHS = 2
logging_columns_list = ["run   ", "epoch", "train_loss", "train_acc", "val_acc", "tta_val_acc", "total_time_seconds"]

def print_columns(columns_list, is_head=False, is_final_entry=False):
    print_string = ""
    for col in columns_list:
        print_string += "|  %s  " % col
    print(print_string + "|")

def row(values):
    print_columns([str(values.get(c.strip(), "")).rjust(len(c)) for c in logging_columns_list])

def load(name):
    data = torch.load(os.path.join("cifar10", name))
    x = data["images"].float().permute(0, 3, 1, 2) / 255
    return T.Normalize((0.49, 0.48, 0.45), (0.25, 0.24, 0.26))(x), data["labels"]

def main(run):
    x, y = load("train.pt")
    xt, yt = load("test.pt")
    torch.manual_seed(0)
    net = torch.nn.Linear(3 * 32 * 32, 10)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    total = 0.0  # no header row here: airbench prints it in __main__, which the parity tool does not run
    for epoch in range(EPOCHS):
        t0 = time.perf_counter()
        for i in range(0, len(x), hyp["opt"]["batch_size"]):
            loss = torch.nn.functional.cross_entropy(net(x[i:i + 50].flatten(1)), y[i:i + 50])
            opt.zero_grad(); loss.backward(); opt.step()
        total += time.perf_counter() - t0
        row(dict(run=run, epoch=epoch, train_loss="%.4f" % loss.item(), total_time_seconds="%.4f" % total))
    acc = (net(xt.flatten(1)).argmax(1) == yt).float().mean().item()
    row(dict(epoch="eval", tta_val_acc="%.4f" % acc, total_time_seconds="%.4f" % total))
    return acc

if __name__ == "__main__":
    raise SystemExit("the parity tool imports this file; its __main__ block must not run")
'''


@pytest.fixture(scope="module")
def cifar(tmp_path_factory):
    from daybreak.data.synthetic import write_cifar10

    folder = tmp_path_factory.mktemp("cifar")
    write_cifar10(folder, 20, 40, as_tarball=True)  # 100 training, 40 test images in the real format
    return folder


@pytest.fixture
def stand_in(tmp_path):
    path = tmp_path / "airbench_standin.py"
    path.write_text(STAND_IN)
    return path


def test_airbench_format_data_and_table_parsing(cifar, tmp_path):
    from daybreak.tasks import get_task

    data = get_task("cifar10").load(cifar, True, False)
    folder = airbench_parity.write_airbench_data(data, tmp_path)
    train = torch.load(folder / "train.pt")
    assert train["images"].shape == (100, 32, 32, 3) and train["images"].dtype == torch.uint8
    assert torch.equal(train["images"].permute(0, 3, 1, 2), data.train_x) and torch.equal(train["labels"], data.train_y)
    table = ("|  run   |  epoch  |  train_acc  |  tta_val_acc  |  time_seconds  |\n"
             "|     0  |      0  |     0.5000  |               |        1.2500  |\n"
             "|        |      1  |     0.6000  |               |        2.0000  |\n"
             "|        |   eval  |             |       0.9400  |        2.5000  |\n")  # airbench94_muon's columns
    cumulative, tta = airbench_parity.parse_table(table)
    assert cumulative == [1.25, 2.0] and tta == 0.94
    # an imported script prints no header (its __main__ does): the script's logging_columns_list stands for it
    rows = table.split("\n", 1)[1]
    assert airbench_parity.parse_table(rows) == ([], None)
    columns = ["run   ", "epoch", "train_acc", "tta_val_acc", "time_seconds"]
    assert airbench_parity.parse_table(rows, columns) == ([1.25, 2.0], 0.94)
    assert airbench_parity.per_epoch(cumulative) == [1.25, 0.75]


def spy_children(monkeypatch):
    """Every fresh process the parity tool starts, in order (then run for real)."""
    started = []
    real = airbench_parity.subprocess.run

    def run(cmd, *args, **kwargs):
        started.append("airbench" if "--side" in cmd else "daybreak" if cmd[1:4] == ["-m", "daybreak", "run"] else cmd)
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(airbench_parity.subprocess, "run", run)
    return started


def test_parity_runs_each_side_as_fresh_processes_abba_with_an_interval(cifar, stand_in, tmp_path, capsys,
                                                                        monkeypatch):
    from daybreak.analysis.paired import paired_ratio

    started = spy_children(monkeypatch)
    out = tmp_path / "parity"
    code = airbench_parity.main(["--airbench", str(stand_in), "--data-dir", str(cifar), "--pairs", "2",
                                 "--device", "cpu", "--set", "epochs=1", "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert started == ["airbench", "daybreak", "daybreak", "airbench"]  # ABBA, one process each
    s = json.loads((out / "parity.json").read_text())
    assert s["mode"] == "fresh-processes" and s["order"] == "ABBA" and s["repeats"] == 2
    assert [(t["pair"], t["side"], t["position"]) for t in s["trials"]] == [
        (0, "airbench", 0), (0, "daybreak", 1), (1, "daybreak", 0), (1, "airbench", 1)]
    assert len({t["threads"] for t in s["trials"]}) == 1 and {t["device"] for t in s["trials"]} == {"cpu"}
    assert all(isinstance(t["load_avg_before"], list) for t in s["trials"])
    expected = paired_ratio(s["airbench_total_s"], s["daybreak_total_s"], confidence=0.99, quantity="train_s")
    assert s["ratio"]["ratio"] == pytest.approx(expected.ratio) and s["ratio"]["ci_low"] == pytest.approx(
        expected.ci_low) and s["ratio_total"] == pytest.approx(expected.ratio)
    assert s["daybreak_overrides"] == ["epochs=1"] and "a rehearsal, not the parity" in text
    assert "daybreak / airbench training time:" in text and "99% CI" in text and "over 2 pairs" in text
    assert [r["epoch"] for r in s["epochs"]] == [1]  # daybreak's 1 epoch against the stand-in's 2: the common one
    assert not s["real_data"] and "not compared (synthetic data" in text


@pytest.mark.slow  # five pairs of fresh processes, two cifar10 epochs each on the CPU: about 2 minutes
def test_parity_default_is_five_pairs(cifar, stand_in, tmp_path):
    out = tmp_path / "parity"
    assert airbench_parity.main(["--airbench", str(stand_in), "--data-dir", str(cifar), "--device", "cpu",
                                 "--set", "epochs=2", "--out", str(out)]) == 0
    s = json.loads((out / "parity.json").read_text())
    assert s["ratio"]["n_pairs"] == 5 and s["ratio"]["ci_low"] <= s["ratio"]["ratio"] <= s["ratio"]["ci_high"]
    assert [t["side"] for t in s["trials"] if t["position"] == 0] == ["airbench", "daybreak"] * 2 + ["airbench"]


def test_the_old_in_process_mode_only_when_asked_and_labelled(cifar, stand_in, tmp_path, capsys):
    out = tmp_path / "parity"
    assert airbench_parity.main(["--airbench", str(stand_in), "--data-dir", str(cifar), "--device", "cpu",
                                 "--in-process", "--pairs", "1", "--set", "epochs=1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    s = json.loads((out / "parity.json").read_text())
    assert s["mode"] == "in-process" and "not an experiment" in s["note"] and "ratio" not in s
    assert "IN-PROCESS" in text and "no interval" in text


def test_airbench_side_alone_records_its_own_loss(cifar, tmp_path, capsys):
    # airbench94_muon's loss: summed in fp16 it is inf while training goes on (the diagnose step shows it on CUDA)
    script = tmp_path / "fp16_loss.py"
    script.write_text(STAND_IN.replace("import torch\n", "import torch\nimport torch.nn.functional as F\n", 1)
                      .replace("lr=0.01)", "lr=1e-6)")
                      .replace("torch.nn.functional.cross_entropy(net(x[i:i + 50].flatten(1)), y[i:i + 50])",
                               "F.cross_entropy((net(x[i:i + 50].flatten(1)) * 300).half(), y[i:i + 50], "
                               "label_smoothing=0.2, reduction='sum')"))
    out = tmp_path / "side"
    assert airbench_parity.main(["--airbench", str(script), "--data-dir", str(cifar), "--device", "cpu", "--side",
                                 "airbench", "--record-loss", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    s = json.loads((out / "parity.json").read_text())
    loss = s["loss"]
    assert loss["steps"] == 4 and loss["dtype"] == "float16" and loss["own"] == ["inf"] * 4
    assert loss["non_finite_steps"] == 4 and loss["first_non_finite_step"] == 1
    assert loss["float32_non_finite_steps"] == 0 and all(65504 / 50 < v < float("inf") for v in loss["float32"])
    assert "airbench's own loss (float16): 4 of 4 steps non-finite (first at step 1)" in text
    assert "the same loss on float32 logits: finite at every step" in text
    assert airbench_parity.main(["--airbench", str(script), "--data-dir", str(cifar), "--record-loss"]) == 2


def test_parity_mistakes_are_one_line(cifar, tmp_path, capsys):
    bad = tmp_path / "nomain.py"
    bad.write_text("x = 1\n")
    for script, fragment in ((tmp_path / "missing.py", "no such file"), (bad, "has no main(run)")):
        assert airbench_parity.main(["--airbench", str(script), "--data-dir", str(cifar), "--dry-run"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and fragment in err, err
    assert airbench_parity.main(["--airbench", str(bad), "--data-dir", str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert airbench_parity.main(["--airbench", str(bad), "--data-dir", str(cifar), "--pairs", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--pairs 1: at least 2" in err


def test_a_daybreak_run_that_diverges_is_one_line_not_an_empty_table():
    # on an H200, cifar10_muon's fp16 network "diverged" and the tool printed "0 interleaved repeat(s)" with no rows
    from types import SimpleNamespace

    diverged = SimpleNamespace(status="diverged", message="training diverged: loss nan by step 25, weights non-finite")
    with pytest.raises(airbench_parity.ParityError, match="cifar10_muon run diverged: training diverged.*step 25"):
        airbench_parity._check_run(diverged, "cifar10_muon")


def test_the_sides_must_report_the_same_device_and_threads():
    trial = lambda side, threads, name="cpu": airbench_parity.Trial(  # noqa: E731
        pair=0, side=side, position=0, epoch_s=[1.0], total_s=1.0, accuracy=None, device="cpu", device_name=name,
        threads=threads, seconds=2.0, load_avg_before=None, busy_fraction=None, warnings=[])
    airbench_parity.verify_same([trial("airbench", 2), trial("daybreak", 2)])
    with pytest.raises(airbench_parity.ParityError, match="not run on the same device and threads"):
        airbench_parity.verify_same([trial("airbench", 2), trial("daybreak", 1)])
    args = airbench_parity.parse_args(["--airbench", "a.py", "--data-dir", "d", "--recipe", "cifar10", "--compile",
                                       "off", "--device", "cpu", "--set", "epochs=2"])
    cmd = airbench_parity.daybreak_command(args, Path("/tmp/out"), seed=3)
    assert gpu_suite.parse_only(cmd[3:]) is None  # daybreak's own parser takes the daybreak side's command
    assert cmd[cmd.index("--threads") + 1] == str(args.threads) and "--set" in cmd


def test_every_gpu_step_parses_with_daybreaks_own_parser(tmp_path):
    for step in gpu_suite.steps(tmp_path, tmp_path / "airbench.py"):
        if step.daybreak_cli:
            assert gpu_suite.parse_only(step.argv) is None, step.name
            if step.tiny is not None:
                assert gpu_suite.parse_only(step.tiny) is None, step.name
    assert "--compile never: choose one of" in gpu_suite.parse_only(["run", "--compile", "never"])
    assert "invalid choice" in gpu_suite.parse_only(["rnu"])


def test_the_compile_verdict_is_issue_21s_bound():
    eager = {"clock_s": {"mlperf": 1.5}}
    assert gpu_suite.compile_verdict(eager, {"clock_s": {"mlperf": 3.4}, "recompiles_under_clock": 0}) == {
        "mlperf_eager_s": 1.5, "mlperf_compiled_s": 3.4, "mlperf_bound_s": 4.5, "mlperf_within_bound": True,
        "zero_recompilations": True}
    assert not gpu_suite.compile_verdict(eager, {"clock_s": {"mlperf": 4.6}})["mlperf_within_bound"]


MUON_STAND_IN = '''
import torch

class Muon(torch.optim.Optimizer):
    def __init__(self, params, lr=0.02):
        super().__init__(params, dict(lr=lr))

class CifarNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(3 * 32 * 32, 10)

def main(run, model):
    return 0.0
'''


@pytest.mark.parametrize("script, kind, recipe, compile_mode", [
    (STAND_IN, "airbench94", "cifar10", "off"),
    (MUON_STAND_IN, "airbench94_muon", "cifar10_muon", "max-autotune"),
    (STAND_IN.replace("9.9", "37.0").replace('"block1": 64', '"block1": 128'), "airbench96", "cifar10_96", "off"),
])
def test_parity_pairs_each_airbench_script_with_its_recipe_and_compile_mode(cifar, tmp_path, capsys, script, kind,
                                                                          recipe, compile_mode):
    path = tmp_path / "script.py"
    path.write_text(script)
    assert airbench_parity.main(["--airbench", str(path), "--data-dir", str(cifar), "--dry-run", "--device", "cpu",
                                 "--out", str(tmp_path / "p")]) == 0
    assert f"is {kind} " in capsys.readouterr().out
    assert json.loads((tmp_path / "p" / "parity.json").read_text()) == {
        "dry_run": True, "script_kind": kind, "recipe": recipe, "compile": compile_mode}
    other = "cifar10" if recipe != "cifar10" else "cifar10_muon"
    assert airbench_parity.main(["--airbench", str(path), "--data-dir", str(cifar), "--dry-run", "--device", "cpu",
                                 "--recipe", other]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--recipe {other} does not match" in err and f"its recipe is {recipe}" in err


@pytest.mark.parametrize("script", [
    STAND_IN.replace("9.9", "15"),  # airbench95: no daybreak recipe
    "def main(run, model_trainbias, model_freezebias):\n    pass\n",  # legacy/airbench94_compiled.py's main
    MUON_STAND_IN.replace("def main(run, model)", "def main(run)"),
])
def test_parity_refuses_an_unknown_script_in_one_line(cifar, tmp_path, capsys, script):
    path = tmp_path / "other.py"
    path.write_text(script)
    assert airbench_parity.main(["--airbench", str(path), "--data-dir", str(cifar), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not an airbench script daybreak has a recipe for" in err, err


def test_the_wheels_brought_are_derived_from_pyproject_and_the_image():
    import gpu_wheels

    decl = gpu_wheels.declaration()
    assert gpu_wheels.derived_bring(decl) == {gpu_wheels.normalized(n) for n in decl["bring"]["distributions"]}
    assert "pydantic" in gpu_wheels.to_bring(decl) and "torch" not in gpu_wheels.to_bring(decl)
    text = (REPO / ".gitignore").read_text().split()
    assert ".gpu/" in text


def fake_steps(*specs):
    """Steps that run plain Python (argv also for the dry run)."""
    return lambda work, airbench, dry_run=False, **scripts: [
        gpu_suite.Step(name, [sys.executable, "-c", code], tiny=[sys.executable, "-c", code], timeout_s=timeout,
                       tiny_timeout_s=timeout, daybreak_cli=False) for name, code, timeout in specs]


def test_the_summary_names_a_step_before_it_runs_and_keeps_the_finished_ones(monkeypatch, tmp_path):
    results = tmp_path / "results"
    check = (  # the second step reads the summary as it stands while it runs
        "import json, glob, sys\n"
        f"(f,) = [p for p in glob.glob({str(results)!r} + '/*.json')]\n"
        "s = json.load(open(f))\n"
        "ok = s['running'] == 'second' and s['steps']['first']['status'] == 'ok' and "
        "s['steps']['second']['status'] == 'running' and s['steps']['second']['marker'].startswith('DAYBREAK_SUITE_STEP=')\n"
        "sys.exit(0 if ok else 1)\n")
    monkeypatch.setattr(gpu_suite, "steps", fake_steps(("first", "print(1)", 60), ("second", check, 60)))
    assert gpu_suite.main(["--dry-run", "--results", str(results)]) == 0
    (summary,) = results.glob("*-dry-run.json")
    s = json.loads(summary.read_text())
    assert s["running"] is None and {k: v["status"] for k, v in s["steps"].items()} == {"first": "ok", "second": "ok"}
    assert summary.with_suffix(".md").exists() and (results / (summary.stem + "-records.tar.gz")).exists()


def test_a_step_past_its_limit_is_stopped_with_everything_it_started(monkeypatch, tmp_path):
    pidfile = tmp_path / "pids"
    spawn = (  # a child in a session of its own (outside the step's process group), then hang
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(600)\n")
    monkeypatch.setattr(gpu_suite, "steps", fake_steps(("hang", spawn, 3)))
    monkeypatch.setattr(gpu_suite, "GRACE_S", 1.0)
    assert gpu_suite.main(["--dry-run", "--results", str(tmp_path / "r")]) == 1
    s = json.loads(next((tmp_path / "r").glob("*.json")).read_text())
    assert s["steps"]["hang"]["status"] == "timeout" and "SIGTERM" in s["steps"]["hang"]["reason"]
    child = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        for _ in range(50):  # reaped by init once killed
            os.kill(child, 0)
            import time

            time.sleep(0.1)


def test_the_suite_dry_run_resolves_its_steps_on_the_cpu(stand_in, tmp_path):
    env = {**os.environ, "DAYBREAK_SUITE_NO_BOOTSTRAP": "1", "PYTHON": sys.executable}
    proc = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_suite.sh"), "--dry-run", "--results",
                           str(tmp_path / "results"), "--airbench", str(stand_in), "--keep", str(tmp_path / "work"),
                           "--steps", "digits,peak,digits_compile,parity"],
                          env=env, capture_output=True, text=True, timeout=900, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (json_file,) = (tmp_path / "results").glob("*-dry-run.json")
    assert json_file.with_suffix(".md").exists()
    s = json.loads(json_file.read_text())
    assert s["dry_run"] and {k: v["status"] for k, v in s["steps"].items()} == {
        "digits": "ok", "peak": "ok", "digits_compile": "parsed", "parity": "ok"}
    assert s["steps"]["peak"]["figures"]["unsupported"]["tf32"]  # a CPU has no TF32: said, not measured
    assert s["steps"]["digits"]["figures"]["warmup"].startswith("none (eager on a CPU")
    assert s["steps"]["parity"]["figures"]["script_kind"] == "airbench94"
    assert list((tmp_path / "work" / "cache" / "peak").glob("*.json"))  # the dry run's own peak cache
    assert gpu_suite.main(["--dry-run", "--steps", "digits,nope", "--results", str(tmp_path / "x")]) == 2


def test_steps_and_step_sets_are_chosen_in_the_order_given(tmp_path):
    every = gpu_suite.steps(tmp_path, tmp_path / "a.py", airbench_muon=tmp_path / "m.py")
    names = [s.name for s in gpu_suite.chosen(every, "diagnose")]
    assert names == list(gpu_suite.STEP_SETS["diagnose"]) and names[:3] == ["loss_overflow", "cifar10_muon",
                                                                             "airbench_muon_loss"]
    assert [s.name for s in gpu_suite.chosen(every, "peak,digits,peak")] == ["peak", "digits"]
    with pytest.raises(gpu_suite.SuiteError, match="no step or step set named nope.*the sets: diagnose"):
        gpu_suite.chosen(every, "diagnose,nope")
    for step in every:  # every step of the set resolves: daybreak's parser, or a benchmark script that exists
        if step.daybreak_cli:
            assert gpu_suite.parse_only(step.argv) is None, step.name
        else:
            assert Path(step.argv[1]).exists(), step.name
    bert = next(s for s in every if s.name == "throughput_bert_base").argv
    assert bert[bert.index("--batch-sizes") + 1] == "128,256"  # not launch-bound (32 was, on the H200)
    compiled = next(s for s in every if s.name == "throughput_resnet50_compiled").argv
    assert compiled[compiled.index("--compile") + 1] == "on" and "--frameworks" not in compiled
    missing = {s.name: s.missing for s in gpu_suite.steps(tmp_path, None)}
    assert missing["parity"] and missing["profile_airbench"] and "--airbench-muon" in missing["airbench_muon_loss"]
    assert missing["loss_overflow"] is None and missing["profile_daybreak"] is None


def test_the_loss_overflow_script_shows_the_fp16_sum_overflow_and_the_recipes_finite_loss(tmp_path, capsys):
    import loss_overflow

    assert loss_overflow.main(["--device", "cpu", "--out", str(tmp_path / "o.json")]) == 0
    s = json.loads((tmp_path / "o.json").read_text())
    assert s["overflows"] == [3.4, 3.7136] and s["recipe_loss_finite"]
    for row, f32 in zip(s["rows"], (1749.28, 1733.79)):  # the issue's figures for torch 2.13 on a CPU
        assert row["fp16_sum"] == float("inf") and row["fp16_gradient_finite"]
        assert row["float32"] == pytest.approx(f32, abs=0.01) and row["cifar10_muon_loss_fn"] == pytest.approx(
            row["float32"], rel=1e-4)
    assert "the fp16 sum overflows at gaps [3.4, 3.7136]" in capsys.readouterr().out


def test_the_boundary_script_measures_a_real_recorders_boundary(tmp_path):
    import phase_boundary

    s = phase_boundary.measure(torch.device("cpu"), boundaries=5, repeats=2)
    assert s["boundaries"] == 5 and s["repeats"] == 2 and s["claim_ms"] == 0.5
    assert 0 < s["inside_train_interval_ms"] <= s["daybreak_ms"] and s["bare_ms"] > 0  # (no timed claim)
    assert s["extra_ms"] == pytest.approx(s["daybreak_ms"] - s["bare_ms"]) and len(s["load_avg_before"]) == 3
    assert "inside the train interval" in phase_boundary.report(s)


def test_the_step_profile_figures_from_profiler_events():
    from types import SimpleNamespace

    import step_profile

    cuda, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU
    ev = lambda name, start, end, device=cpu: SimpleNamespace(  # noqa: E731
        name=name, device_type=device, time_range=SimpleNamespace(start=start, end=end))
    window = SimpleNamespace(steps=2, skip=3, marks=6, times=[1.0, 1.010, 1.030], events=[
        ev("gemm", 0, 400, cuda), ev("relu", 600, 700, cuda), ev("gemm", 1000, 1400, cuda),
        ev("cudaLaunchKernel", 0, 5), ev("cudaLaunchKernel", 10, 15), ev("cudaLaunchKernel", 20, 25),
        ev("aten::_local_scalar_dense", 30, 40), ev("cudaStreamSynchronize", 40, 900)])
    f = step_profile.figures(window, torch.device("cpu"))
    assert f["wall_ms_per_step"] == pytest.approx(15.0) and f["device_ms_per_step"] == pytest.approx(0.45)
    assert f["device_span_ms_per_step"] == pytest.approx(0.7) and f["device_busy"] == pytest.approx(900 / 1400)
    assert f["kernel_launches_per_step"] == 1.5 and f["host_syncs_per_step"] == {
        "cudaStreamSynchronize": 0.5, "aten::_local_scalar_dense": 0.5} and f["host_syncs_per_step_total"] == 1.0
    assert list(f["top_kernels_ms_per_step"]) == ["gemm", "relu"] and f["top_kernels_ms_per_step"]["gemm"] == 0.4
    with pytest.raises(Exception, match="fewer than --skip 3"):
        step_profile.figures(SimpleNamespace(steps=2, skip=3, marks=4, times=[], events=None), torch.device("cpu"))


def test_the_diagnose_steps_run_at_a_tiny_size_on_the_cpu(stand_in, tmp_path):
    muon = tmp_path / "airbench94_muon.py"
    muon.write_text(MUON_STAND_IN)
    results = tmp_path / "results"
    code = gpu_suite.main(["--dry-run", "--results", str(results), "--airbench", str(stand_in), "--airbench-muon",
                           str(muon), "--keep", str(tmp_path / "work"),
                           "--steps", "loss_overflow,airbench_muon_loss,boundary,parity"])
    assert code == 0
    s = json.loads(next(results.glob("*-dry-run.json")).read_text())
    assert {k: v["status"] for k, v in s["steps"].items()} == dict.fromkeys(
        ["loss_overflow", "airbench_muon_loss", "boundary", "parity"], "ok")
    f = s["steps"]
    assert f["loss_overflow"]["figures"]["overflows"] and f["boundary"]["figures"]["claim_ms"] == 0.5
    assert "--dry-run" in f["parity"]["command"] and "--pairs 5" in f["parity"]["command"]
    md = next(results.glob("*-dry-run.md")).read_text()
    assert "gap 3.71: fp16 sum inf" in md and "inside the train interval" in md


def test_a_window_of_airbenchs_steps_is_profiled(cifar, stand_in, tmp_path, capsys):
    import step_profile

    out = tmp_path / "profile.json"
    assert step_profile.main(["--side", "airbench", "--airbench", str(stand_in), "--data-dir", str(cifar), "--device",
                              "cpu", "--skip", "1", "--steps", "2", "--out", str(out)]) == 0
    f = json.loads(out.read_text())
    assert (f["side"], f["script_kind"], f["steps"], f["skipped"]) == ("airbench", "airbench94", 2, 1)
    assert f["wall_ms_per_step"] > 0 and f["device_ms_per_step"] is None  # a CPU: no device kernels
    assert "steps 2-3" in capsys.readouterr().out
    assert step_profile.main(["--side", "airbench", "--airbench", str(stand_in), "--data-dir", str(cifar), "--device",
                              "cpu", "--skip", "10", "--steps", "2"]) == 2  # the stand-in makes 4 steps
    assert "fewer than --skip 10" in capsys.readouterr().err


# --- the rehearsal: the lent machine's conditions on this CPU ---------------------------------------------------

def image_venv(folder: Path) -> Path:
    """A virtual environment holding what the GPU image holds (benchmarks/gpu_packages.toml [image], as far as
    they are installed here, with what they require) and nothing of daybreak's own dependencies: this
    environment's distributions linked into a fresh venv's site-packages (offline, instant)."""
    import gpu_wheels
    from importlib import metadata

    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=300)
    (site,) = folder.glob("lib/python*/site-packages")
    decl = gpu_wheels.declaration()
    names = []
    for name in [*decl["image"]["distributions"], *decl["image"]["their_dependencies"]]:
        try:
            metadata.distribution(name)
            names.append(name)
        except metadata.PackageNotFoundError:
            pass
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for name in gpu_wheels.runtime_closure(names, version):
        dist = metadata.distribution(name)
        base = Path(dist.locate_file(""))
        for top in {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            if not (site / top).exists() and (base / top).exists():
                (site / top).symlink_to(base / top)
    return folder / "bin" / "python"


def offline_suite(python: Path, wheels: Path, results: Path, *extra: str) -> list[str]:
    return ["unshare", "-n", "env", f"PYTHON={python}", "bash", str(REPO / "benchmarks" / "gpu_suite.sh"),
            "--offline", "--dry-run", "--wheels", str(wheels), "--results", str(results), *extra]


@pytest.mark.slow  # a venv, the wheels from PyPI, and the whole dry run twice: about 4 minutes
def test_rehearsal_prepare_then_offline_in_a_network_namespace_with_the_images_packages_only(tmp_path):
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -n is not permitted here (a network namespace needs CAP_SYS_ADMIN)")
    wheels = tmp_path / "wheels"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    env = {**os.environ, "DAYBREAK_SUITE_NO_BOOTSTRAP": "1", "PYTHON": sys.executable}
    prep = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_suite.sh"), "--prepare", "--python", version,
                           "--wheels", str(wheels)], env=env, capture_output=True, text=True, timeout=900, cwd=REPO)
    assert prep.returncode == 0, prep.stderr[-2000:]
    size = sum(p.stat().st_size for p in wheels.iterdir())
    assert size < 60 * 2**20 and (wheels / "manifest.json").exists()
    python = image_venv(tmp_path / "image")
    assert subprocess.run([str(python), "-c", "import pydantic"], capture_output=True).returncode != 0
    assert subprocess.run([str(python), "-c", "import torch, numpy, scipy, sklearn"]).returncode == 0

    results = tmp_path / "results"
    proc = subprocess.run(offline_suite(python, wheels, results), capture_output=True, text=True, timeout=1200,
                          cwd=REPO, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (summary,) = results.glob("*-dry-run.json")
    s = json.loads(summary.read_text())
    assert s["offline"] and "pydantic" in s["installed"] and "(installed)" in s["installed"]
    statuses = {k: v["status"] for k, v in s["steps"].items()}
    needs_airbench = {"parity", "airbench_muon_loss", "profile_airbench"}
    assert set(statuses) == {"digits", "mnist", "cifar10", "cifar10_muon", "peak", "throughput_resnet50",
                             "throughput_bert_base", "throughput_resnet50_compiled", "infer", "digits_compile",
                             "throughput_jax_resnet50", *gpu_suite.STEP_SETS["diagnose"]}
    assert all(v in ("ok", "parsed") for k, v in statuses.items() if k not in needs_airbench), statuses
    assert {statuses[k] for k in needs_airbench} == {"skipped"} and {k for k, v in statuses.items() if v == "ok"} >= {
        "digits", "mnist", "cifar10", "cifar10_muon", "peak", "infer", "loss_overflow", "boundary",
        "profile_daybreak"}
    assert s["env"]["torch"].startswith(__import__("torch").__version__.split("+")[0])

    # the one GPU call of issue 37, offline, with stand-ins for the airbench scripts the lent machine will have
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "airbench94.py").write_text(STAND_IN)
    (scripts / "airbench94_muon.py").write_text(MUON_STAND_IN)
    diagnose = tmp_path / "diagnose"
    proc = subprocess.run(offline_suite(python, wheels, diagnose, "--steps", "diagnose", "--airbench",
                                        str(scripts / "airbench94.py"), "--airbench-muon",
                                        str(scripts / "airbench94_muon.py")),
                          capture_output=True, text=True, timeout=1200, cwd=REPO,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    d = json.loads(next(diagnose.glob("*-dry-run.json")).read_text())
    assert list(d["steps"]) == list(gpu_suite.STEP_SETS["diagnose"])
    assert all(v["status"] in ("ok", "parsed") for v in d["steps"].values()), d["steps"]

    # SIGKILL in the middle: every finished step is in the summary, the running one is named
    killed = tmp_path / "killed"
    suite = subprocess.Popen(offline_suite(python, wheels, killed), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, cwd=REPO,
                             env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    import time

    seen = None
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and suite.poll() is None:
        files = list(killed.glob("*-dry-run.json"))
        if files:
            try:
                seen = json.loads(files[0].read_text())
            except json.JSONDecodeError:  # never: the file is replaced whole
                raise
            if seen["steps"].get("digits", {}).get("status") == "ok" and seen["running"] == "mnist":
                break
        time.sleep(0.05)
    suite.kill()
    suite.wait()
    after = json.loads(next(killed.glob("*-dry-run.json")).read_text())
    assert after["steps"]["digits"]["status"] == "ok" and after["steps"]["digits"]["figures"]["status"]
    assert after["running"] == "mnist" and after["steps"]["mnist"]["status"] == "running"
    assert (killed / (next(killed.glob("*-dry-run.json")).stem + ".md")).read_text().count("Running when") == 1
    token = after["steps"]["mnist"]["marker"].split("=", 1)[1]
    gpu_suite.stop_all(None, token, 2.0)  # the orphaned step, found by its marker
    assert gpu_suite.marked_processes(token) == []


def _wheel(folder: Path, name: str, version: str, module: str) -> dict:
    import hashlib
    import zipfile

    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{module}.py", f"VERSION = {version!r}\n")
        z.writestr(f"{name}-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return {"name": name, "version": version, "file": path.name, "bytes": path.stat().st_size,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def test_install_skips_what_the_machine_has_and_unpacks_without_pip(tmp_path, monkeypatch):
    import gpu_wheels

    from importlib import metadata

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    have = metadata.version("numpy")
    entries = [_wheel(wheels, "daybreak_fake_dep", "1.0", "daybreak_fake_dep"), _wheel(wheels, "numpy", "1.0", "np1")]
    (wheels / "manifest.json").write_text(json.dumps({"python": "3.99", "wheels": entries}))  # pure wheels only
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python-here"))  # no pip: unpacked
    done = {d.name: d.action for d in gpu_wheels.install(wheels, tmp_path / "site")}
    assert done == {"daybreak_fake_dep": "unpacked", "numpy": f"image has {have}"}
    assert (tmp_path / "site" / "daybreak_fake_dep.py").exists() and not (tmp_path / "site" / "np1.py").exists()
    (wheels / entries[0]["file"]).write_bytes(b"broken")
    with pytest.raises(gpu_wheels.WheelError, match="SHA-256 differs"):
        gpu_wheels.install(wheels, tmp_path / "site2")
    with pytest.raises(gpu_wheels.WheelError, match="--prepare"):
        gpu_wheels.install(tmp_path / "nothing", tmp_path / "site3")


def test_an_old_torch_or_no_gpu_is_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(gpu_suite, "probe_env", lambda env: {"torch": "2.0.1+cu118", "cuda_available": True})
    assert gpu_suite.main(["--results", str(tmp_path / "a")]) == 2
    assert "torch 2.0.1+cu118 is older than 2.1" in capsys.readouterr().err
    monkeypatch.setattr(gpu_suite, "probe_env", lambda env: {"torch": "2.11.0", "cuda_available": False})
    assert gpu_suite.main(["--results", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no CUDA GPU is visible" in err
    assert json.loads(next((tmp_path / "b").glob("*.json")).read_text())["error"].startswith("no CUDA GPU")


@pytest.mark.parametrize("where, travels", [("inside", True), ("outside", False)])
def test_prepare_says_what_travels_only_for_a_folder_inside_the_checkout(monkeypatch, tmp_path, capsys, where,
                                                                         travels):
    monkeypatch.setattr(gpu_wheels, "prepare", lambda version, dest: {"wheels": [], "bytes": 0})
    dest = gpu_wheels.REPO / ".gpu-test-dest" if where == "inside" else tmp_path / "wheels"
    assert gpu_wheels.main(["prepare", "--dest", str(dest)]) == 0
    out = capsys.readouterr().out
    if travels:
        assert 'carry=[".gpu-test-dest"]' in out and "--wheels .gpu-test-dest" in out, out
    else:
        assert "outside the repository" in out and "carry=" not in out, out
