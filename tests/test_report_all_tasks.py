"""`daybreak analyze roofline` and `daybreak report` on a tiny run of every task (digits, mnist, cifar10, imagenet,
squad), the report's inference section, and `daybreak infer` / `evaluate` reading the run's own data folder."""

from __future__ import annotations

import json
import math
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest
import torch

from daybreak.cli import main
from daybreak.records.inference import INFERENCE_FILE
from daybreak.records.run import RunResult
from daybreak.train.runner import RunConfig, run

from conftest import single_line

TASKS = ("digits", "mnist", "cifar10", "imagenet", "squad")


@pytest.fixture(autouse=True)
def _isolated_peak_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DAYBREAK_CACHE", str(tmp_path_factory.mktemp("daybreak-cache")))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One tiny run of every task, its data in a folder of its own (custom data, so --allow-custom-data); reaching
    the target does not matter to a roofline (it then counts the steps to the last evaluation)."""
    from test_imagenet import write_tiny_imagenet
    from test_squad import TINY, write_tiny_squad

    from daybreak.data.synthetic import write_cifar10, write_mnist

    root = tmp_path_factory.mktemp("all-tasks")
    write_mnist(root / "mnist", 300, 100, seed=0)
    write_cifar10(root / "cifar10", 40, 60, seed=0)
    configs = {
        "digits": RunConfig(task="digits", target=0.5, overrides=dict(epochs=2)),
        "mnist": RunConfig(task="mnist", data_dir=root / "mnist", allow_custom_data=True, target=0.3,
                           overrides=dict(epochs=2, batch_size=32)),
        "cifar10": RunConfig(task="cifar10", data_dir=root / "cifar10", allow_custom_data=True, target=0.01,
                             overrides=dict(epochs=1, batch_size=50)),
        "imagenet": RunConfig(task="imagenet", data_dir=write_tiny_imagenet(root / "imagenet", n_train=4, n_val=1,
                                                                           flat=True),
                              allow_custom_data=True, target=0.01,
                              overrides=dict(image_size=32, eval_size=32, eval_resize=36, batch_size=8, epochs=1,
                                             warmup_epochs=0, workers=0, eval_batch_size=8)),
        "squad": RunConfig(task="squad", data_dir=write_tiny_squad(root / "squad", n_train=40, n_dev=6),
                           allow_custom_data=True, target=0.01, overrides=dict(TINY, epochs=1)),
    }
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = {}
        for task, config in configs.items():
            config.out, config.quiet = root / f"run-{task}", True
            result = run(config)
            assert result.status in ("reached", "not_reached") and result.history, (task, result.message)
            out[task] = config.out
    finally:
        torch.set_num_threads(old)
    return out


def _peak_file(path: Path) -> Path:
    from daybreak.records.throughput import PeakResult

    p = PeakResult(machine_key="test", device="cpu", device_name="Test CPU", torch="x", threads=1,
                   flops_per_s={"fp32": 5e10}, bandwidth_bytes_per_s=2e9, measured_at=datetime.now(timezone.utc))
    path.write_text(p.model_dump_json())
    return path


def _positive(x) -> bool:
    return x is not None and math.isfinite(x) and x > 0


def test_roofline_of_imagenet_and_squad_runs(runs, tmp_path, capsys):
    out = tmp_path / "an"
    assert main(["analyze", "roofline", str(runs["imagenet"]), str(runs["squad"]), "--peak",
                 str(_peak_file(tmp_path / "peak.json")), "--out", str(out)]) == 0
    capsys.readouterr()
    points = json.loads((out / "roofline.json").read_text())["points"]
    assert [p["source"] for p in points] == [str(runs["imagenet"]), str(runs["squad"])]
    for p in points:
        for key in ("flops_per_step", "bytes_per_step", "achieved_flops_per_s", "operational_intensity",
                    "attainable_flops_per_s", "utilization"):
            assert _positive(p[key]), (p["label"], key, p[key])
        assert p["flops_per_step"] / p["batch_size_per_device"] > 0
        assert p["operational_intensity"] == pytest.approx(p["flops_per_step"] / p["bytes_per_step"])
    inet = points[0]
    # ResNet-50 on 32x32 crops: ~0.17 GFLOP forward per image (8.2 GFLOP at 224, x (32/224)^2), ~3x with backward
    assert 2e8 < inet["flops_per_step"] / inet["batch_size_per_device"] < 1e9
    assert inet["batch_size_per_device"] == 8 and any("scaled linearly" in n for n in inet["notes"])


@pytest.mark.parametrize("task", TASKS)
def test_report_has_a_roofline_section_for_every_task(runs, task, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", str(runs[task]), "--peak", str(_peak_file(tmp_path / "peak.json")),
                 "--out", str(out)]) == 0
    capsys.readouterr()
    page, md = (out / "index.html").read_text(), (out / "report.md").read_text()
    for text in (page, md):
        assert "Traceback" not in text and "TypeError" not in text and "no roofline point" not in text
        assert "task data not found" not in text  # the run's own data folder was read again
    assert "## Roofline" in md and ">Roofline</h2>" in page and (out / "roofline.png").stat().st_size > 0
    point = json.loads((out / "roofline.json").read_text())["points"][0]
    assert _positive(point["flops_per_step"]) and _positive(point["achieved_flops_per_s"])
    assert "## Inference" in md and "daybreak infer RUN_DIR" in md  # no inference.json yet: how to make one


def test_report_section_that_fails_says_why_in_one_line(runs, tmp_path, capsys):
    bad = tmp_path / "bad"
    shutil.copytree(runs["digits"], bad)
    data = json.loads((bad / "result.json").read_text())
    data["recipe"] = "no_such_recipe"
    (bad / "result.json").write_text(json.dumps(data))
    (bad / INFERENCE_FILE).write_text("{not json")
    out = tmp_path / "report"
    assert main(["report", str(bad), "--out", str(out)]) == 0
    capsys.readouterr()
    md = (out / "report.md").read_text()
    roofline = md.split("## Roofline", 1)[1].split("## ", 1)[0]
    lines = [line for line in roofline.splitlines() if line.strip()]
    assert len(lines) == 1 and "no_such_recipe" in lines[0] and "Traceback" not in md
    inference = md.split("## Inference", 1)[1].split("## ", 1)[0]
    assert "inference.json" in inference and "Traceback" not in inference


def test_infer_reads_the_runs_own_custom_folder_and_the_report_shows_it(tmp_path, monkeypatch, capsys):
    from daybreak.data.synthetic import write_mnist

    assert not any(Path(os.environ["DAYBREAK_DATA"]).glob("*"))  # the cache is empty: nothing to fall back on
    monkeypatch.chdir(tmp_path)
    write_mnist(tmp_path / "mine", 600, 100, seed=0)
    out = tmp_path / "run"
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = run(RunConfig(task="mnist", data_dir=Path("mine"), allow_custom_data=True, target=0.5, quiet=True,
                               out=out, overrides=dict(epochs=4, batch_size=32)))
    finally:
        torch.set_num_threads(old)
    assert result.status == "reached", result.message
    assert result.data_source == str(tmp_path / "mine") and not result.official  # absolute, though given relative

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    args = ["infer", str(out), "--warmup", "1", "--throughput-repeats", "1", "--cost-per-hour", "3.6", "-q"]
    assert main(args) == 0  # no --data-dir, no --allow-custom-data
    capsys.readouterr()
    record = json.loads((out / INFERENCE_FILE).read_text())
    assert record["data_source"] == str(tmp_path / "mine") and record["data_official"] is False
    assert main(["evaluate", str(out), "--device", "cpu"]) == 0
    capsys.readouterr()
    entry = json.loads((out / "generalization.json").read_text())[-1]
    assert entry["data_default"] and entry["n"] == 100 and entry["difference"] == pytest.approx(0.0, abs=1e-9)

    from daybreak.analysis.report import _ms

    report = tmp_path / "report"
    assert main(["report", str(out), "--no-roofline", "--out", str(report)]) == 0
    capsys.readouterr()
    md, page = (report / "report.md").read_text(), (report / "index.html").read_text()
    lat = record["latency"]
    inference = md.split("## Inference", 1)[1].split("## ", 1)[0]
    for value in (lat["mean_ms"], lat["p50_ms"], lat["p90_ms"], lat["p99_ms"], lat["max_ms"]):
        assert _ms(value) in inference
    assert f"${record['cost_per_10k_usd']:.4g}" in inference and "examples/s" in inference
    assert f"{record['accuracy'] * 100:.2f}% top1" in inference and "| yes |" in inference
    assert ">Inference</h2>" in page and _ms(lat["p90_ms"]) in page
    record["latency"]["p90_ms"] = 7.25125  # the report shows the record's own number
    (out / INFERENCE_FILE).write_text(json.dumps(record))
    assert main(["report", str(out), "--no-roofline", "--out", str(report)]) == 0
    assert "7.251" in (report / "report.md").read_text() and "7.251" in (report / "index.html").read_text()
    capsys.readouterr()

    shutil.move(tmp_path / "mine", tmp_path / "moved")
    for argv in (args, ["evaluate", str(out)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert single_line(err) and str(tmp_path / "mine") in err and "--data-dir" in err
        assert "--allow-custom-data" in err
    assert main(args + ["--data-dir", str(tmp_path / "moved")]) == 2  # another folder: say which flag to add
    err = capsys.readouterr().err
    assert single_line(err) and "--allow-custom-data" in err
    assert main(args + ["--data-dir", str(tmp_path / "moved"), "--allow-custom-data"]) == 0


def test_readers_record_absolute_folders(runs, tmp_path, monkeypatch):
    from daybreak.data.digits import load_digits_task
    from daybreak.infer.run_data import recorded_folder
    from daybreak.tasks import get_task

    for task in ("mnist", "cifar10", "imagenet", "squad"):
        r = RunResult.load(runs[task])
        assert Path(r.data_source).is_absolute(), task
        assert recorded_folder(r) == runs[task].parent / task, task
    assert "bundled with scikit-learn" in load_digits_task().source
    assert recorded_folder(RunResult.load(runs["digits"])) is None
    monkeypatch.chdir(runs["cifar10"].parent)
    data = get_task("cifar10").load(Path("cifar10"), True, False)
    assert data.source == str(runs["cifar10"].parent / "cifar10" / "cifar-10-python.tar.gz")


def _as_if_on(run_dir: Path, dst: Path, gpu: str, amp: str = "bf16", model: str | None = None) -> Path:
    """A copy of a run whose record says it ran on ``gpu`` (what `daybreak run` records on a CUDA machine)."""
    shutil.copytree(run_dir, dst)
    data = json.loads((dst / "result.json").read_text())
    data["device"], data["amp"] = "cuda:0", amp
    data["system"]["gpus"] = [{"name": gpu, "memory_gb": 80.0, "capability": "9.0"}]
    data["system"]["gpu_count"] = 1
    if model:
        data["model"] = model
    (dst / "result.json").write_text(json.dumps(data))
    return dst


def test_roofline_gives_mfu_against_the_datasheet_next_to_utilization(runs, tmp_path, capsys):
    from daybreak.measure.datasheet import datasheet_peak

    h100 = "NVIDIA H100 80GB HBM3"
    bf16 = _as_if_on(runs["digits"], tmp_path / "h100-bf16", h100)
    fp32 = _as_if_on(runs["digits"], tmp_path / "h100-fp32", h100, amp="off")  # a CNN: convolutions in TF32
    unknown = _as_if_on(runs["digits"], tmp_path / "unknown", "NVIDIA GeForce GTX 480")
    out = tmp_path / "an"
    assert main(["analyze", "roofline", str(bf16), str(fp32), str(unknown), str(runs["digits"]), "--peak",
                 str(_peak_file(tmp_path / "peak.json")), "--out", str(out)]) == 0
    capsys.readouterr()
    p_bf16, p_fp32, p_unknown, p_cpu = json.loads((out / "roofline.json").read_text())["points"]
    peak = datasheet_peak(h100, "bf16").flops_per_s
    assert p_bf16["mfu"] == pytest.approx(p_bf16["achieved_flops_per_s"] / peak)
    assert p_bf16["mfu_precision"] == "bf16" and p_bf16["datasheet_peak_flops_per_s"] == pytest.approx(peak)
    assert _positive(p_fp32["utilization"]) and p_bf16["utilization"] is None  # the --peak file has fp32 only
    assert p_fp32["mfu_precision"] == "tf32" and p_fp32["mfu"] == pytest.approx(
        p_fp32["achieved_flops_per_s"] / datasheet_peak(h100, "tf32").flops_per_s)
    assert p_unknown["mfu"] is None and any("not in catalog" in n for n in p_unknown["notes"])
    assert p_cpu["mfu"] is None and any("NVIDIA GPUs only" in n for n in p_cpu["notes"])
    md = (out / "roofline.md").read_text()
    assert "| MFU (datasheet) |" in md and f"{p_bf16['mfu']:.2%} of H100" in md
