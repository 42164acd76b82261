"""`daybreak throughput` and `daybreak peak`: reference models, FLOPs, sweeps (1 process and torchrun/gloo),
resume, failures and find-max-batch, on CPU with tiny step counts."""

from __future__ import annotations

import csv
import json
import os
import statistics
from datetime import datetime, timezone
from pathlib import Path

import pytest
import torch

from daybreak.errors import ConfigError

from daybreak.measure.flops import count_flops, step_flops
from daybreak.models import count_parameters, create_model
from daybreak.records.throughput import (
    PeakResult, ThroughputConfig, ThroughputResult, load_results, to_csv, to_markdown, with_scaling,
)
from daybreak.sweep.launch import LaunchSpec, build_command, threads_per_process, worker_env
from daybreak.sweep.sweep import SweepOptions, run_sweep

FAKE_PEAK_FP32 = 1e12  # a made-up ceiling so that sweeps never spend time measuring the real one


def fake_peak() -> PeakResult:
    return PeakResult(machine_key="test", device="cpu", device_name="test CPU", torch=torch.__version__,
                      flops_per_s={"fp32": FAKE_PEAK_FP32, "bf16": 2e12}, bandwidth_bytes_per_s=1e10,
                      measured_at=datetime.now(timezone.utc))


def small_sweep(out: Path, log: list[str], **overrides) -> SweepOptions:
    options = dict(model="digits_cnn", mode="train", out=out, batch_sizes=[8, 16], devices=[1], device="cpu",
                   warmup=1, steps=3, repeats=2, quiet=True, peak=fake_peak(), log=log.append, timeout_s=300)
    options.update(overrides)
    return SweepOptions(**options)


# --- reference models ---------------------------------------------------------------------------------------

def test_resnet50_has_exactly_the_reference_parameter_count():
    model = create_model("resnet50")
    assert count_parameters(model) == 25_557_032
    # v1.5: the stride of a downsampling bottleneck is in its 3x3 conv, not its first 1x1
    block = model.layer2[0]
    assert block.conv1.stride == (1, 1) and block.conv2.stride == (2, 2)
    assert model(torch.randn(2, 3, 64, 64)).shape == (2, 1000)


def test_bert_base_parameter_count_names_and_tied_decoder():
    model = create_model("bert_base")
    n = count_parameters(model)
    assert n == 109_514_298  # embeddings + 12 layers + MLM head; the tied decoder weight counted once
    assert 105e6 < n < 115e6
    names = dict(model.named_parameters())
    for name in ("bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
                 "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
                 "bert.encoder.layer.0.attention.self.query.weight", "bert.encoder.layer.11.attention.self.value.bias",
                 "bert.encoder.layer.3.attention.output.dense.weight", "bert.encoder.layer.3.attention.output.LayerNorm.bias",
                 "bert.encoder.layer.5.intermediate.dense.weight", "bert.encoder.layer.5.output.dense.weight",
                 "bert.encoder.layer.5.output.LayerNorm.weight", "cls.predictions.transform.dense.weight",
                 "cls.predictions.transform.LayerNorm.weight", "cls.predictions.bias"):
        assert name in names, name
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert model.config.layer_norm_eps == 1e-12 and model.config.max_position_embeddings == 512
    model.eval()
    ids = torch.randint(1, 30522, (2, 16))
    with torch.no_grad():
        assert model(ids).shape == (2, 16, 30522)
        assert model.bert(ids).shape == (2, 16, 768)  # the encoder alone: sequence output for task heads
        # padding mask: masked-out tokens do not change the real tokens' outputs
        mask = torch.ones(2, 16, dtype=torch.long)
        mask[:, 12:] = 0
        a = model.bert(ids, attention_mask=mask)[:, :12]
        b = model.bert(ids[:, :12])
        assert torch.allclose(a, b, atol=1e-4)


# --- FLOPs --------------------------------------------------------------------------------------------------

def test_resnet50_forward_flops_match_the_published_4_11_gmacs():
    model = create_model("resnet50").eval()
    x = torch.randn(1, 3, 224, 224)
    flops = step_flops(model, x, None, None, train=False)
    assert flops == pytest.approx(2 * 4.11e9, rel=0.02)
    # training counts the backward too: about 3x the forward (at 64x64 to keep the test quick)
    small = torch.randn(1, 3, 64, 64)
    y = torch.tensor([3])
    small_flops = step_flops(model, small, None, None, train=False)
    model.train()
    train_flops = step_flops(model, small, y, torch.nn.functional.cross_entropy, train=True)
    assert 2.8 * small_flops < train_flops < 3.2 * small_flops
    assert all(p.grad is None for p in model.parameters())


def test_cpu_attention_flops_are_counted():
    q = torch.randn(2, 4, 32, 16, requires_grad=True)
    forward = 2 * (2 * 2 * 4 * 32 * 32 * 16)  # Q K^T and P V
    assert count_flops(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q)) == forward

    def both():
        torch.nn.functional.scaled_dot_product_attention(q, q, q).sum().backward()

    assert count_flops(both) == 3 * forward


# --- launcher -----------------------------------------------------------------------------------------------

def test_launch_builds_plain_and_torchrun_commands():
    single = build_command("daybreak.sweep.worker", ["--spec", "s.json"], LaunchSpec())
    assert single[1:] == ["-m", "daybreak.sweep.worker", "--spec", "s.json"]
    multi = build_command("daybreak.sweep.worker", ["--x"], LaunchSpec(nproc_per_node=2))
    assert multi[1:3] == ["-m", "torch.distributed.run"] and "--standalone" in multi
    assert "--nproc-per-node=2" in multi and multi[-3:] == ["-m", "daybreak.sweep.worker", "--x"]
    nodes = build_command("m", [], LaunchSpec(nproc_per_node=4, nnodes=2, node_rank=1, rdzv_endpoint="10.0.0.1:29500"))
    assert "--nnodes=2" in nodes and "--node-rank=1" in nodes and "--rdzv-endpoint=10.0.0.1:29500" in nodes
    with pytest.raises(ConfigError):
        build_command("m", [], LaunchSpec(nproc_per_node=1, nnodes=2))
    assert threads_per_process(2, "cpu", None) == max(1, threads_per_process(1, "cpu", None) // 2)
    assert threads_per_process(4, "cpu", 3) == 3
    env = worker_env(threads=1)
    assert env["OMP_NUM_THREADS"] == "1"
    assert str(Path(__file__).resolve().parents[1]) in env["PYTHONPATH"].split(os.pathsep)


# --- peak ---------------------------------------------------------------------------------------------------

def test_peak_is_measured_and_cached(tmp_path, monkeypatch):
    from daybreak.measure import peak

    monkeypatch.setenv("DAYBREAK_CACHE", str(tmp_path))
    result = peak.get_peak(torch.device("cpu"), size=128, repeats=2, precisions=("fp32", "bf16"),
                           copy_bytes=8 * 2**20, repeat_s=0.02)
    assert result.flops_per_s["fp32"] > 1e6 and len(result.flops_samples["fp32"]) == 2
    assert result.flops_per_s["fp32"] == statistics.median(result.flops_samples["fp32"])
    assert result.bandwidth_bytes_per_s > 1e6 and result.copy_bytes == 8 * 2**20
    cached = tmp_path / "peak" / f"{result.machine_key}.json"
    assert cached.exists() and "torch" in result.machine_key
    again = peak.get_peak(torch.device("cpu"))  # from the cache: not re-measured
    assert again.measured_at == result.measured_at
    assert peak.get_peak(torch.device("cpu"), force=True, size=128, repeats=1, precisions=("fp32",),
                         copy_bytes=2**20, repeat_s=0.02).measured_at > result.measured_at


# --- sweeps -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """digits_cnn train, batch 8 and 16 on one process, then batch 8 on two (torchrun + gloo) in the same folder."""
    out = tmp_path_factory.mktemp("sweep")
    log: list[str] = []
    first = run_sweep(small_sweep(out, log))
    second = run_sweep(small_sweep(out, log, batch_sizes=[8], devices=[1, 2]))
    return out, first, second, log


def test_sweep_writes_every_output_with_consistent_numbers(sweep_dir):
    out, first, _, _ = sweep_dir
    assert first.measured == 2 and first.skipped == 0
    for name in ("results.jsonl", "results.csv", "results.md", "throughput_vs_batch.png", "speedup_vs_devices.png"):
        assert (out / name).exists() and (out / name).stat().st_size > 0, name
    rows = {(r.config.batch_size, r.config.devices): r for r in load_results(out / "results.jsonl")}
    assert set(rows) == {(8, 1), (16, 1), (8, 2)}
    for (batch, devices), r in rows.items():
        assert r.status == "ok", r.error
        assert r.global_batch_size == batch * devices and len(r.times_s) == 2
        assert r.median_time_s == statistics.median(r.times_s)
        assert r.samples_per_s == pytest.approx(r.global_batch_size * 3 / r.median_time_s, rel=1e-12)
        assert r.samples_per_s_min <= r.samples_per_s <= r.samples_per_s_max
        assert r.flops_per_step > 0 and r.flops_per_sample == pytest.approx(r.flops_per_step / r.global_batch_size)
        assert r.achieved_flops_per_s == pytest.approx(r.flops_per_step * 3 / r.median_time_s)
        assert r.utilization == pytest.approx(r.achieved_flops_per_s / FAKE_PEAK_FP32)  # CPU: the node's peak
        assert r.peak_host_rss_bytes > 0 and r.system is not None and r.input_shape == [1, 8, 8]
        assert r.optimizer and r.optimizer.startswith("SGD")
    # FLOPs scale with the batch
    assert rows[(16, 1)].flops_per_step == 2 * rows[(8, 1)].flops_per_step
    with open(out / "results.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 3
    for line in table:
        r = rows[(int(line["batch_size"]), int(line["devices"]))]
        assert float(line["samples_per_s"]) == pytest.approx(r.samples_per_s)
    md = (out / "results.md").read_text()
    assert "| 1 device | 2 devices |" in md and f"{rows[(16, 1)].samples_per_s:,.1f}" in md


def test_torchrun_configuration_scales_the_global_batch_and_reports_speedup(sweep_dir):
    out, _, second, log = sweep_dir
    assert second.measured == 1 and second.skipped == 1  # batch 8 on one device was already there
    assert any(m.startswith("skip digits_cnn train bs=8") for m in log)
    by_devices = {r.config.devices: r for r in second.rows}
    one, two = by_devices[1], by_devices[2]
    assert two.status == "ok", two.error
    assert two.world_size == 2 and two.backend == "gloo"
    assert two.global_batch_size == 2 * two.batch_size == 16
    assert two.threads_per_process == threads_per_process(2, "cpu", None)
    assert two.flops_per_step == 2 * one.flops_per_step  # both ranks' work
    assert two.speedup == pytest.approx(two.samples_per_s / one.samples_per_s)
    assert two.scaling_efficiency == pytest.approx(two.speedup / 2)
    assert one.speedup == pytest.approx(1.0)
    assert "torch.distributed.run" in two.command


def test_rerunning_the_same_sweep_measures_nothing(sweep_dir, capsys):
    from daybreak.cli import main

    out, _, _, _ = sweep_dir
    records = out / "results.jsonl"
    lines, mtime = records.read_text().count("\n"), records.stat().st_mtime_ns
    code = main(["throughput", "--model", "digits_cnn", "--batch-sizes", "8,16", "--devices", "1", "--device", "cpu",
                 "--warmup", "1", "--steps", "3", "--repeats", "2", "--out", str(out), "--no-plots"])
    assert code == 0
    captured = capsys.readouterr()
    assert "0 measured, 2 already there" in captured.out
    assert captured.err.count("daybreak: skip digits_cnn") == 2
    assert records.read_text().count("\n") == lines and records.stat().st_mtime_ns == mtime


def test_failures_are_recorded_and_find_max_batch_halves_until_it_fits(tmp_path, monkeypatch):
    # Injected in the workers: batch 3 raises; any batch above 8 is "out of memory".
    monkeypatch.setenv("DAYBREAK_SWEEP_FAIL_BATCH", "3")
    monkeypatch.setenv("DAYBREAK_SWEEP_OOM_ABOVE", "8")
    log: list[str] = []
    outcome = run_sweep(small_sweep(tmp_path, log, batch_sizes=[3, 20], data="digits", find_max_batch=True,
                                    steps=2, plots=False))
    assert outcome.measured == 2 and outcome.failed == 1
    rows = {r.config.batch_size: r for r in load_results(tmp_path / "results.jsonl")}
    failed, fitted = rows[3], rows[20]
    assert failed.status == "failed" and "injected failure" in failed.error and "\n" not in failed.error
    assert fitted.status == "ok" and fitted.batch_size == 5 and fitted.global_batch_size == 5
    assert [(a.batch_size, a.status) for a in fitted.attempts] == [(20, "oom"), (10, "oom"), (5, "ok")]
    assert fitted.config.data == "digits" and fitted.samples_per_s > 0
    assert any("out of memory at batch 20; trying 10" in m for m in log)
    md = (tmp_path / "results.md").read_text()
    assert "FAILED" in md and "(bs=5)" in md
    # without --find-max-batch an OOM is recorded as such, and the sweep goes on
    monkeypatch.delenv("DAYBREAK_SWEEP_FAIL_BATCH")
    outcome = run_sweep(small_sweep(tmp_path / "plain", [], batch_sizes=[16], steps=1, repeats=1, plots=False))
    [row] = outcome.rows
    assert row.status == "oom" and "simulated out of memory" in row.error and not row.attempts
    assert outcome.failed == 1 and "OOM" in (tmp_path / "plain" / "results.md").read_text()


def test_views_and_scaling_from_records_alone():
    def row(devices: int, sps: float, status: str = "ok") -> ThroughputResult:
        config = ThroughputConfig(model="resnet50", batch_size=32, devices=devices, amp="bf16", device="cuda")
        return ThroughputResult(config=config, status=status, world_size=devices, batch_size=32,
                                global_batch_size=32 * devices, samples_per_s=sps if status == "ok" else None,
                                error=None if status == "ok" else "CUDA out of memory | really")

    rows = with_scaling([row(1, 100.0), row(4, 360.0), row(8, 0, "oom")])
    assert rows[1].speedup == pytest.approx(3.6) and rows[1].scaling_efficiency == pytest.approx(0.9)
    assert rows[2].speedup is None
    md = to_markdown(rows)
    assert "360.0 (3.60x)" in md and "OOM" in md and "\\|" in md  # the pipe in the error is escaped
    assert to_csv(rows).count("\n") == 4
    with pytest.raises(Exception):
        ThroughputConfig(model="x", batch_size=1, amp="fp8")


def test_user_errors_are_one_line(tmp_path, capsys):
    from daybreak.cli import main

    from conftest import single_line

    for argv in (["throughput", "--model", "nope", "--out", str(tmp_path)],
                 ["throughput", "--model", "digits_cnn", "--batch-sizes", "8,x", "--out", str(tmp_path)],
                 ["throughput", "--model", "bert_base", "--data", "digits", "--out", str(tmp_path)],
                 ["throughput", "--model", "resnet50", "--data", "squad", "--out", str(tmp_path)],
                 ["throughput", "--model", "resnet50", "--data", "nope", "--out", str(tmp_path)],
                 ["throughput", "--model", "digits_cnn", "--amp", "fp8", "--out", str(tmp_path)],
                 ["throughput", "--model", "digits_cnn", "--devices", "2", "--nodes", "2", "--out", str(tmp_path)]):
        assert main(argv) == 2
        assert single_line(capsys.readouterr().err)
    assert not (tmp_path / "results.jsonl").exists()


def test_worker_report_reads_a_failing_rank(tmp_path):
    from daybreak.sweep.sweep import _read_report
    from daybreak.sweep.worker import WorkerReport

    result = tmp_path / "result.json"
    late = WorkerReport(status="failed", error="peer closed", batch_size=4, global_batch_size=8, finished_at=2.0)
    oom = WorkerReport(status="oom", error="CUDA out of memory", batch_size=4, global_batch_size=8, finished_at=3.0)
    (tmp_path / "result.json.rank1").write_text(late.model_dump_json())
    (tmp_path / "result.json.rank2").write_text(oom.model_dump_json())
    assert _read_report(result).status == "oom"
    assert not list(tmp_path.glob("result.json.rank*"))
    assert _read_report(result) is None
    json.loads(late.model_dump_json())
