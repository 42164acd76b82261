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

# A stand-in with airbench's interface, not airbench: it reads cifar10/train.pt and test.pt from the working folder
# as airbench's CifarLoader does, normalizes with torchvision.transforms.Normalize, trains a linear model for two
# epochs on the CPU and prints airbench's table (print_columns), the cumulative time in total_time_seconds.
STAND_IN = '''
import os, time
import torch
import torchvision.transforms as T

hyp = {"opt": {"train_epochs": 2, "batch_size": 50}}
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
    total = 0.0
    print_columns(logging_columns_list, is_head=True)
    for epoch in range(hyp["opt"]["train_epochs"]):
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
    assert airbench_parity.per_epoch(cumulative) == [1.25, 0.75]


@pytest.mark.slow  # two full cifar10-recipe schedules on the CPU: about 2 minutes
def test_parity_runs_both_loops_interleaved_and_reports_the_ratio(cifar, stand_in, tmp_path, capsys):
    out = tmp_path / "parity"
    code = airbench_parity.main(["--airbench", str(stand_in), "--data-dir", str(cifar), "--repeats", "2",
                                 "--device", "cpu", "--recipe", "cifar10", "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    s = json.loads((out / "parity.json").read_text())
    assert s["repeats"] == 2 and len(s["airbench_epoch_s"]) == len(s["daybreak_epoch_s"]) == 2
    assert all(len(e) == 2 for e in s["airbench_epoch_s"])  # the stand-in's two epochs, parsed from its table
    ratios = [sum(d[:2]) / sum(a[:2]) for a, d in zip(s["airbench_epoch_s"], s["daybreak_epoch_s"])]
    assert s["ratio_total"] == pytest.approx(sorted(ratios)[0] / 2 + sorted(ratios)[1] / 2)
    assert [r["epoch"] for r in s["epochs"]] == [1, 2] and "training time ratio daybreak / airbench" in text
    assert not s["real_data"] and "not compared (synthetic data" in text  # no accuracies on synthetic data


def test_parity_mistakes_are_one_line(cifar, tmp_path, capsys):
    bad = tmp_path / "nomain.py"
    bad.write_text("x = 1\n")
    for script, fragment in ((tmp_path / "missing.py", "no such file"), (bad, "has no main(run)")):
        assert airbench_parity.main(["--airbench", str(script), "--data-dir", str(cifar), "--dry-run"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and fragment in err, err
    assert airbench_parity.main(["--airbench", str(bad), "--data-dir", str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


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


def test_the_suite_dry_run_resolves_every_step_on_the_cpu(stand_in, tmp_path):
    env = {**os.environ, "DAYBREAK_SUITE_NO_BOOTSTRAP": "1", "PYTHON": sys.executable}
    proc = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_suite.sh"), "--dry-run", "--results",
                           str(tmp_path / "results"), "--airbench", str(stand_in), "--keep", str(tmp_path / "work")],
                          env=env, capture_output=True, text=True, timeout=900, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (json_file,) = (tmp_path / "results").glob("*-dry-run.json")
    assert json_file.with_suffix(".md").exists()
    s = json.loads(json_file.read_text())
    assert s["dry_run"] and set(s["steps"]) == {"digits", "digits_compile", "mnist", "cifar10", "cifar10_muon",
                                                "peak", "throughput_resnet50", "throughput_bert_base",
                                                "throughput_jax_resnet50", "infer", "parity"}
    ran = {name for name, r in s["steps"].items() if r["status"] == "ok"}
    assert ran == {"digits", "mnist", "cifar10", "peak", "infer", "parity"}, s["steps"]
    assert all(r["status"] == "parsed" for name, r in s["steps"].items() if name not in ran)
    assert s["steps"]["peak"]["figures"]["unsupported"]["tf32"]  # a CPU has no TF32: said, not measured
    assert s["steps"]["cifar10"]["figures"]["time_to_target_s"]["mlperf"] is not None
    assert s["steps"]["infer"]["figures"]["p50_ms"] > 0
    assert list((tmp_path / "work" / "cache" / "peak").glob("*.json"))  # the dry run's own peak cache
