"""`daybreak throughput` and `daybreak peak`: reference models, FLOPs, sweeps (1 process and torchrun/gloo),
resume, failures and find-max-batch, on CPU with tiny step counts."""

from __future__ import annotations

import csv
import json
import os
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import torch

from daybreak.errors import ConfigError

from daybreak.measure.flops import count_flops, step_flops
from daybreak.models import count_parameters, create_model
from daybreak.records.throughput import (
    MFU_NOTE, PeakResult, ThroughputConfig, ThroughputResult, load_results, to_csv, to_markdown, with_scaling,
)
from daybreak.sweep.launch import LaunchSpec, build_command, cpu_cores, threads_per_process, worker_env
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
    from daybreak.sweep import peak

    monkeypatch.setenv("DAYBREAK_CACHE", str(tmp_path))
    result = peak.get_peak(torch.device("cpu"), size=128, repeats=2, precisions=("fp32", "bf16"),
                           copy_bytes=8 * 2**20, repeat_s=0.02)
    assert result.flops_per_s["fp32"] > 1e6 and len(result.flops_samples["fp32"]) == 2
    assert result.flops_per_s["fp32"] == statistics.median(result.flops_samples["fp32"])
    assert result.bandwidth_bytes_per_s > 1e6 and result.copy_bytes == 8 * 2**20
    cached = tmp_path / "peak" / f"{result.machine_key}.json"
    assert cached.exists() and "torch" in result.machine_key
    again = peak.get_peak(torch.device("cpu"), precisions=("fp32",))  # from the cache: not re-measured
    assert again.measured_at == result.measured_at
    assert peak.get_peak(torch.device("cpu"), force=True, size=128, repeats=1, precisions=("fp32",),
                         copy_bytes=2**20, repeat_s=0.02).measured_at > result.measured_at
    # a precision the cache lacks is measured and added; what was there stays
    calls = []
    real = peak.measure_peak
    monkeypatch.setattr(peak, "measure_peak", lambda *a, **k: calls.append(k["precisions"]) or real(*a, **k))
    more = peak.get_peak(torch.device("cpu"), precisions=("fp32", "fp16"), size=128, repeats=1, copy_bytes=2**20,
                         repeat_s=0.02)
    assert calls == [("fp16",)] and more.has("fp16") and more.has("fp32") and more.has("bf16")


def test_a_noisy_or_busy_peak_is_not_a_ceiling_and_is_measured_again(tmp_path, monkeypatch):
    """Repeats 115x apart (fp32 7.7 MFLOP/s once became the cached ceiling, and utilization read 50,998%), or a
    busy machine: recorded with the reason, not cached as a ceiling, measured again the next time."""
    from daybreak.records.throughput import PeakResult
    from daybreak.sweep import peak

    monkeypatch.delenv("DAYBREAK_PEAK_ACCEPT_NOISY")
    monkeypatch.setenv("DAYBREAK_CACHE", str(tmp_path))
    noisy = [7.7e6, 5e8, 8.9e8]
    p = PeakResult(machine_key="k", device="cpu", device_name="x", torch="t", flops_per_s={"fp32": 5e8, "bf16": 2e9},
                   flops_samples={"fp32": noisy, "bf16": [2e9, 2.1e9]}, bandwidth_bytes_per_s=1e10,
                   bandwidth_samples=[1e10, 1.1e10], measured_at=datetime.now(timezone.utc))
    peak.screen_ceilings(p, None)
    assert "fp32" not in p.flops_per_s and not p.has("fp32") and "115.6x apart" in p.unreliable["fp32"]
    assert p.flops_per_s["bf16"] == 2e9 and p.bandwidth_bytes_per_s == 1e10  # steady: ceilings
    busy = "the machine was busy: other processes took 3.0 CPU-s during the run's 2.0 s (75% of its 2 logical CPUs)"
    peak.screen_ceilings(p, busy)
    assert "bf16" not in p.flops_per_s and p.unreliable["bf16"].startswith("measured while the machine was busy")
    assert p.bandwidth_bytes_per_s is None and "bandwidth" in p.unreliable
    from daybreak.records.throughput import format_peak

    assert "fp32  NOT A CEILING: its 3 repeats are 115.6x apart" in format_peak(p)
    # through get_peak: the first measurement is noise, so the next call measures again and caches the steady one
    rounds = iter([noisy, [4e8, 4.1e8, 4.2e8]])
    monkeypatch.setattr(peak, "measure_matmul", lambda *a, **k: (128, next(rounds)))
    monkeypatch.setattr("daybreak.measure.context.ContextSampler.stop", lambda self: {"warnings": []})  # quiet
    first = peak.get_peak(torch.device("cpu"), precisions=("fp32",), repeats=3, copy_bytes=2**20, budget_s=5)
    assert not first.has("fp32") and "fp32" in first.unreliable
    assert not peak.load_cached(torch.device("cpu")).has("fp32")  # recorded with its reason, not as a ceiling
    second = peak.get_peak(torch.device("cpu"), precisions=("fp32",), repeats=3, copy_bytes=2**20, budget_s=5)
    assert second.flops_per_s["fp32"] == 4.1e8 and "fp32" not in second.unreliable
    monkeypatch.setenv("DAYBREAK_PEAK_ACCEPT_NOISY", "1")  # a machine that is never quiet: kept, with a note
    kept = peak.screen_ceilings(PeakResult(machine_key="k", device="cpu", device_name="x", torch="t",
                                           flops_per_s={"fp32": 5e8}, flops_samples={"fp32": noisy},
                                           measured_at=datetime.now(timezone.utc)), busy)
    assert kept.flops_per_s["fp32"] == 5e8 and "kept as a ceiling" in kept.notes[0]


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
    # CPU, default threads: both device counts share the node's cores, so perfect scaling is the ratio of threads
    assert two.efficiency_basis == "same_total_cores" and two.cpu_cores == cpu_cores()
    assert two.ideal_speedup == pytest.approx(2 * two.threads_per_process / one.threads_per_process)
    assert two.scaling_efficiency == pytest.approx(two.speedup / two.ideal_speedup)
    assert (two.scaling_efficiency > 1) == any("above 100%" in f for f in two.flags)
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
    assert outcome.measured == 2 and outcome.failed == 1, [(r.config.batch_size, r.status, r.error) for r in outcome.rows]
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
                 ["throughput", "--model", "digits_cnn", "--devices", "2", "--nodes", "2", "--out", str(tmp_path)],
                 ["throughput", "--model", "digits_cnn", "--steps", "0", "--out", str(tmp_path)],
                 ["throughput", "--model", "digits_cnn", "--peak-budget", "0", "--out", str(tmp_path)],
                 ["throughput", "--model", "digits_cnn", "--data-dir", str(tmp_path), "--out", str(tmp_path)],
                 ["throughput", "--model", "digits_cnn", "--no-download", "--out", str(tmp_path)],
                 ["peak", "--budget", "0"], ["peak", "--budget", "-5"], ["peak", "--precisions", "fp8"],
                 ["peak", "--repeats", "0"], ["peak", "--threads", "0"]):
        assert main(argv) == 2, argv
        assert single_line(capsys.readouterr().err), argv
    # argparse's own errors (not an int, a missing --model, a bad choice): one line and exit 2 too
    for argv in (["throughput", "--model", "digits_cnn", "--steps", "x"], ["throughput", "--steps", "3"],
                 ["throughput", "--model", "digits_cnn", "--mode", "fit"], ["peak", "--budget", "soon"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2, argv
        assert single_line(capsys.readouterr().err), argv
    assert not (tmp_path / "results.jsonl").exists()


def test_worker_report_reads_a_failing_rank(tmp_path):
    from daybreak.sweep.attempt import _read_report
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


# --- issue 13: bounded peak, emulated precisions, honest scaling, data flags --------------------------------

def test_peak_stays_within_its_budget_even_on_a_slow_device(tmp_path, monkeypatch):
    """A bound, not a performance claim: the whole measurement (all precisions and the bandwidth) ends within
    the budget plus a generous margin for a busy machine, on this CPU and on a simulated one 2 ms per product
    slower, by adapting n, the products per repeat and the repeats."""
    from daybreak.sweep import peak

    budget, margin = 2.0, 2.0
    start = time.perf_counter()
    result = peak.get_peak(torch.device("cpu"), force=True, threads=1, budget_s=budget)
    assert time.perf_counter() - start <= budget + margin
    assert result.budget_s == budget and result.seconds <= budget + margin
    assert result.flops_per_s["fp32"] > 0 and result.bandwidth_bytes_per_s > 0
    assert all(result.has(p) or p in result.skipped for p in ("fp32", "bf16", "fp16"))

    real = peak._time_products

    def slow(a, b, c, count, device):  # really slower: time passes
        time.sleep(0.002 * count)
        return real(a, b, c, count, device) + 0.002 * count

    monkeypatch.setattr(peak, "_time_products", slow)
    start = time.perf_counter()
    slow_result = peak.measure_peak(torch.device("cpu"), budget_s=budget)
    assert time.perf_counter() - start <= budget + margin
    assert slow_result.matmul_size["fp32"] < peak.DEFAULT_SIZE["cpu"]  # n adapted to the speed


def test_a_much_slower_precision_is_recorded_as_emulated_not_as_a_ceiling(monkeypatch):
    from daybreak.sweep import peak
    from daybreak.records.throughput import format_peak

    real = peak._time_products

    def bf16_emulated(a, b, c, count, device):  # bf16 matmuls report 1000x the time: no native support
        t = real(a, b, c, count, device)
        return t * 1000 if a.dtype == torch.bfloat16 else t

    monkeypatch.setattr(peak, "_time_products", bf16_emulated)
    with peak._threads(torch.device("cpu"), 1):  # one thread: steadier on a shared machine
        result = peak.measure_peak(torch.device("cpu"), precisions=("fp32", "bf16"), repeats=3, budget_s=4.0,
                                   bandwidth=False)
    assert "bf16" in result.emulated, (result.flops_per_s, result.probe_flops_per_s, result.skipped, result.notes)
    slow = result.emulated["bf16"]
    assert slow.emulated is True and slow.slowdown_vs_fp32 >= peak.EMULATED_SLOWDOWN
    assert "bf16 runs" in slow.note and "slower than fp32 on this CPU" in slow.note and "not a ceiling" in slow.note
    assert "bf16" not in result.flops_per_s and result.peak_for_amp("bf16") == ("bf16", None)
    assert result.flops_per_s["fp32"] > 0 and result.has("bf16")
    assert "EMULATED" in format_peak(result)
    # a sweep row in that precision gets no utilization, and says why
    from daybreak.sweep.attempt import _Attempt, _result_from
    from daybreak.sweep.worker import WorkerReport

    config = ThroughputConfig(model="digits_cnn", batch_size=8, amp="bf16", steps=2, repeats=2)
    report = WorkerReport(status="ok", batch_size=8, global_batch_size=8, times_s=[0.1, 0.1],
                          flops_per_step_per_device=10**9, threads=2, cpu_cores=2)
    row = _result_from(config, _Attempt("ok", None, report, [], 1.0), [], {2: result}, datetime.now(timezone.utc), 1.0)
    assert row.utilization is None and row.peak_flops_per_s is None
    assert any("no bf16 ceiling" in n and "not a ceiling" in n for n in row.notes)
    # a peak file written before emulation was recognized: the slow precision is no ceiling either
    old = PeakResult(schema_version=1, machine_key="old", device="cpu", device_name="x", torch="x",
                     flops_per_s={"fp32": 1e11, "bf16": 2e11, "fp16": 1e9}, measured_at=datetime.now(timezone.utc))
    assert set(old.flops_per_s) == {"fp32", "bf16"} and old.emulated["fp16"].slowdown_vs_fp32 == pytest.approx(100)


def test_a_sweep_measures_only_the_precisions_and_thread_counts_it_needs():
    from daybreak.sweep.grid import expand
    from daybreak.sweep.sweep import peak_needs, sweep_peaks

    options = small_sweep(Path("unused"), [], devices=[1, 2], amps=["off"], peak=None, peak_budget_s=3.0)
    configs = expand(options)
    threads = {threads_per_process(1, "cpu"), threads_per_process(2, "cpu")}
    assert peak_needs(configs) == {t: ["fp32"] for t in threads}
    log: list[str] = []
    peaks = sweep_peaks(options, configs, log.append)
    # the --peak-budget is shared out between the thread counts, the fewest threads first: an equal part of what is
    # left each (how long the measurements took depends on the machine's load, so the test checks the shares, not
    # the wall time)
    budgets = [peaks[t].budget_s for t in sorted(peaks)]
    assert budgets[0] <= 3.0 / len(budgets) and all(b is not None and 0 < b <= 3.0 for b in budgets)
    assert set(peaks) == threads
    for t, p in peaks.items():
        assert p.threads == t and set(p.flops_per_s) == {"fp32"}
        assert not p.emulated and not p.unsupported and set(p.probe_flops_per_s) == {"fp32"}
    assert peak_needs(expand(small_sweep(Path("unused"), [], amps=["off", "bf16"], threads=1))) == {1: ["fp32", "bf16"]}
    from daybreak.sweep.peak import DEFAULT_BUDGET_S
    from daybreak.sweep.grid import DEFAULT_PEAK_BUDGET_S

    assert DEFAULT_BUDGET_S == DEFAULT_PEAK_BUDGET_S == 60.0


def test_emulation_found_at_fewer_threads_holds_at_more(monkeypatch):
    from daybreak.sweep import peak
    from daybreak.records.throughput import SlowPrecision

    cpu = torch.device("cpu")
    slow = SlowPrecision(flops_per_s=1e9, slowdown_vs_fp32=60.0, matmul_size=256,
                         note="fp16 runs 60x slower than fp32 on this CPU: no native support; not a ceiling")
    one_thread = PeakResult(machine_key=peak.machine_key(cpu, threads=1), device="cpu",
                            device_name=peak.device_name(cpu), torch=torch.__version__, threads=1,
                            flops_per_s={"fp32": 6e10}, emulated={"fp16": slow}, measured_at=datetime.now(timezone.utc))
    peak.save(one_thread)
    real = peak.probe_matmul

    def no_fp16(device, dtype, n, limit_s):
        assert dtype != torch.float16, "fp16 is known to be emulated on this CPU: not measured again"
        return real(device, dtype, n, limit_s)

    monkeypatch.setattr(peak, "probe_matmul", no_fp16)
    result = peak.get_peak(cpu, precisions=("fp32", "fp16"), threads=2, budget_s=1.5)
    assert result.threads == 2 and "fp16" not in result.flops_per_s
    assert result.emulated["fp16"].note.endswith("(found at 1 thread)")


def _row(devices: int, sps: float, threads: int, device: str = "cpu", explicit_threads: bool = False,
         utilization: float | None = None) -> ThroughputResult:
    config = ThroughputConfig(model="resnet50", batch_size=8, devices=devices, amp="bf16", device=device,
                              threads=threads if explicit_threads else None)
    return ThroughputResult(config=config, status="ok", world_size=devices, batch_size=8, global_batch_size=8 * devices,
                            samples_per_s=sps, samples_per_s_min=sps, samples_per_s_max=sps,
                            threads_per_process=threads, cpu_cores=2, utilization=utilization,
                            peak_precision="bf16")


def test_impossible_figures_are_flagged_in_the_record_tables_and_plots(tmp_path):
    from daybreak.sweep.sweep import _summary
    from daybreak.sweep.views import SPEEDUP_PLOT, write_plots

    # the 2-core CPU: 1 process x 2 threads vs 2 processes x 1 thread, 4.72x "speedup", 450% of the peak
    one, two = with_scaling([_row(1, 10.0, 2, utilization=1.28), _row(2, 47.2, 1, utilization=4.5)])
    assert two.efficiency_basis == "same_total_cores" and two.ideal_speedup == pytest.approx(1.0)
    assert two.scaling_efficiency == pytest.approx(4.72)
    assert any("scaling efficiency 472% is above 100%" in f for f in two.flags)
    assert any("speedup 4.72x is above the 2 devices" in f for f in two.flags)
    assert any("utilization 450%" in f and "above 100%" in f for f in two.flags)
    assert any("utilization 128%" in f for f in one.flags)
    md = to_markdown([one, two])
    assert "472% (!)" in md and "4.72x (!)" in md and "450.0% of bf16 (!)" in md and "(4.72x !)" in md
    assert "Flags (figures marked (!), not facts):" in md and "same_total_cores" in md
    table = list(csv.DictReader(to_csv([one, two]).splitlines()))
    assert table[1]["efficiency_basis"] == "same_total_cores" and "above 100%" in table[1]["flags"]
    assert "(!)" in _summary(two)
    written = write_plots(tmp_path, [one, two])
    assert tmp_path / SPEEDUP_PLOT in written
    # plausible figures carry no flag
    a, b = with_scaling([_row(1, 10.0, 2, utilization=0.5), _row(2, 9.0, 1, utilization=0.4)])
    assert b.scaling_efficiency == pytest.approx(0.9) and not a.flags and not b.flags
    assert "(!)" not in to_markdown([a, b]).split("## All configurations")[1]


def test_the_efficiency_basis_is_recorded():
    # --threads 1: the baseline is one process with the same threads, so perfect scaling is the process count
    _, two = with_scaling([_row(1, 10.0, 1, explicit_threads=True), _row(2, 18.0, 1, explicit_threads=True)])
    assert two.efficiency_basis == "same_threads_per_process" and two.ideal_speedup == pytest.approx(2.0)
    assert two.scaling_efficiency == pytest.approx(0.9) and not two.flags
    # GPUs: each process its own device
    _, gpu = with_scaling([_row(1, 100.0, 8, device="cuda"), _row(4, 360.0, 8, device="cuda")])
    assert gpu.efficiency_basis == "devices" and gpu.ideal_speedup == pytest.approx(4.0)
    # the same 2 cores split unevenly (3 cores, 2 processes x 1 thread): perfect scaling is 2/3
    _, uneven = with_scaling([_row(1, 30.0, 3), _row(2, 18.0, 1)])
    assert uneven.ideal_speedup == pytest.approx(2 / 3) and uneven.scaling_efficiency == pytest.approx(0.9)


def test_throughput_reads_a_data_folder_with_the_same_flags_as_run(tmp_path, capsys):
    import re

    from daybreak.cli import build_parser, main
    from daybreak.data.synthetic import write_mnist

    from conftest import single_line

    data = tmp_path / "mnist"
    write_mnist(data, 64, 16, seed=0)
    out = tmp_path / "sweep"
    base = ["throughput", "--model", "mnist_cnn", "--data", "mnist", "--batch-sizes", "8", "--warmup", "1",
            "--steps", "2", "--repeats", "1", "--device", "cpu", "--threads", "1", "--no-plots", "--quiet",
            "--peak-budget", "1", "--out", str(out)]
    throughput_flags = {o for a in build_parser()._subparsers._group_actions[0].choices["throughput"]._actions
                        for o in a.option_strings}
    # custom files without --allow-custom-data, a folder without the files: one line, naming real flags only
    for extra in (["--data-dir", str(data), "--no-download"], ["--data-dir", str(tmp_path / "empty"), "--no-download"]):
        assert main(base + extra) == 2
        err = capsys.readouterr().err
        assert single_line(err) and "daybreak: error:" in err
        named = set(re.findall(r"--[a-z][a-z-]+", err))
        assert named and named <= throughput_flags, named - throughput_flags
    assert main(base + ["--data-dir", str(data), "--allow-custom-data", "--no-download"]) == 0
    [row] = load_results(out / "results.jsonl")
    assert row.status == "ok", row.error
    assert row.config.data_dir == str(data.resolve()) and row.config.allow_custom_data
    assert row.data_official is False and row.input_shape == [1, 28, 28] and row.samples_per_s > 0


# --- MFU against the datasheet, and energy per sample -------------------------------------------------------

def _gpu_row(name: str | None, achieved: float | None, *, amp: str = "bf16", devices: int = 1, device: str = "cuda",
             math_precision: str | None = None) -> ThroughputResult:
    config = ThroughputConfig(model="resnet50", batch_size=64, devices=devices, amp=amp, device=device)
    return ThroughputResult(config=config, status="ok", world_size=devices, batch_size=64,
                            global_batch_size=64 * devices, samples_per_s=1000.0, achieved_flops_per_s=achieved,
                            device_name=name, math_precision=math_precision, peak_precision="bf16",
                            utilization=0.5, peak_flops_per_s=2 * (achieved or 1.0))


def test_mfu_against_the_datasheet_peak_of_the_gpu_the_row_records():
    from daybreak.measure.datasheet import datasheet_peak

    h100 = "NVIDIA H100 80GB HBM3"
    bf16 = datasheet_peak(h100, "bf16").flops_per_s
    # two H100s: the model FLOP/s of both against twice the per-GPU peak
    (row,) = with_scaling([_gpu_row(h100, 0.8 * bf16, devices=2)])
    assert row.mfu == pytest.approx(0.4) and row.mfu_precision == "bf16"
    assert row.datasheet_peak_flops_per_s == pytest.approx(2 * bf16) and row.datasheet_gpu.startswith("H100")
    assert not row.flags and not any(n.startswith(MFU_NOTE) for n in row.notes)
    # fp32 math that ran in TF32 is measured against the TF32 column
    a100 = "NVIDIA A100-SXM4-80GB"
    tf32 = datasheet_peak(a100, "tf32").flops_per_s
    (row,) = with_scaling([_gpu_row(a100, 0.25 * tf32, amp="off", math_precision="tf32")])
    assert row.mfu == pytest.approx(0.25) and row.mfu_precision == "tf32"
    # an impossible MFU is flagged like every other figure above its ceiling
    (row,) = with_scaling([_gpu_row(h100, 1.5 * bf16)])
    assert row.mfu == pytest.approx(1.5) and any("MFU 150%" in f and "above 100%" in f for f in row.flags)
    md = to_markdown([row])
    assert "150.0% of H100" in md and "(!)" in md.split("## All configurations")[1]
    table = list(csv.DictReader(to_csv([row]).splitlines()))
    assert float(table[0]["mfu"]) == pytest.approx(1.5) and table[0]["mfu_precision"] == "bf16"
    # reading the record again recomputes it, never piling up notes
    again = with_scaling(with_scaling([row]))[0]
    assert again.mfu == row.mfu and again.notes == row.notes


@pytest.mark.parametrize("name, device, reason", [
    ("Intel(R) Xeon(R) Platinum 8480+", "cpu", "NVIDIA GPUs only and this ran on a CPU"),
    ("NVIDIA GeForce GTX 480", "cuda", "not in catalog/datasheet_peaks.json"),
    ("Tesla V100-SXM2-16GB", "cuda", "no bf16 peak"),
    (None, "cuda", "does not name its GPU"),
])
def test_no_mfu_without_a_datasheet_figure_and_the_row_says_why(name, device, reason):
    (row,) = with_scaling([_gpu_row(name, 1e12, device=device)])
    assert row.mfu is None and row.datasheet_peak_flops_per_s is None
    assert row.utilization == 0.5  # the measured-peak figure is untouched
    notes = [n for n in row.notes if n.startswith(MFU_NOTE)]
    assert len(notes) == 1 and reason in notes[0], notes
    assert "| - |" in to_markdown([row]).split("## All configurations")[1]


def test_the_worker_reads_the_energy_counters_at_each_timed_repeat(tmp_path, monkeypatch):
    """The worker's own measurement (in this process) against a package counter that advances at exactly 40 W."""
    from daybreak.measure import energy as en
    from daybreak.sweep.worker import WorkerSpec, measure

    watts = 40.0
    zone = tmp_path / "powercap" / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text(str(2**40) + "\n")
    (zone / "energy_uj").write_text("0\n")
    monkeypatch.setenv("DAYBREAK_POWERCAP_ROOT", str(tmp_path / "powercap"))
    monkeypatch.setattr(en, "_file_reader", lambda path: (lambda: int(time.perf_counter() * watts * 1e6)))
    for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    config = ThroughputConfig(model="digits_cnn", batch_size=16, device="cpu", warmup=1, steps=20, repeats=3)
    threads = torch.get_num_threads()
    try:
        report = measure(WorkerSpec(config=config, batch_size=16, threads=1))
    finally:
        torch.set_num_threads(threads)
    assert report.energy_covers == ["cpu_package"] and "no GPU selected" in report.energy_unavailable["gpu"]
    assert len(report.energy_j) == 3
    for joules, seconds in zip(report.energy_j, report.times_s):
        assert joules == pytest.approx(watts * seconds, rel=0.02, abs=2e-3)
    fields = report.row_fields(config.steps)
    per_repeat = [j / (16 * 20) for j in report.energy_j]
    assert fields["joules_per_sample"] == pytest.approx(statistics.median(per_repeat))
    assert fields["joules_per_sample"] == pytest.approx(watts * statistics.median(report.times_s) / (16 * 20),
                                                        rel=0.05)
    assert fields["mean_power_w"] == pytest.approx(watts, rel=0.02) and fields["math_precision"] == "fp32"
    row = ThroughputResult(config=config, status="ok", world_size=1, batch_size=16, global_batch_size=16,
                           samples_per_s=1.0, **fields)
    assert "mJ (cpu_package)" in to_markdown([row]) and float(
        list(csv.DictReader(to_csv([row]).splitlines()))[0]["joules_per_sample"]) == pytest.approx(
        fields["joules_per_sample"])


def test_a_sweep_records_energy_or_says_why(sweep_dir):
    out, *_ = sweep_dir
    for r in load_results(out / "results.jsonl"):
        if r.joules_per_sample is not None:
            assert r.joules_per_sample > 0 and len(r.energy_j) == len(r.times_s) and r.energy_covers
        else:
            assert r.energy_unavailable and all(r.energy_unavailable.values()) and r.energy_j == []
        assert r.mfu is None and any("NVIDIA GPUs only" in n for n in r.notes)  # a CPU sweep


def test_compile_on_compiles_the_whole_training_step():
    """torch.compile over forward, loss, backward and the optimizer's update (as XLA compiles JAX's step): the
    graphs Dynamo hands the compiler hold all four, and the step trains as the eager TrainStep does."""
    import torch.nn.functional as F

    from daybreak.sweep.worker import compile_whole_step, make_optimizer
    from daybreak.train.step import Backend, TrainStep

    def tiny() -> torch.nn.Module:
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                   torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 10))

    graphs = []

    def record(gm, inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    x, y = torch.randn(4, 1, 8, 8, generator=torch.Generator().manual_seed(1)), torch.arange(4)
    model = tiny()
    step = compile_whole_step(model, make_optimizer(torch.optim.SGD, model, fused=False, lr=0.1, momentum=0.9),
                              F.cross_entropy, torch.device("cpu"), "off", backend=record)
    compiled = [float(step(x, y)) for _ in range(4)]
    eager_model = tiny()
    eager = TrainStep(eager_model, torch.optim.SGD(eager_model.parameters(), lr=0.1, momentum=0.9), F.cross_entropy,
                      Backend(torch.device("cpu"), "off"))
    assert compiled == pytest.approx([float(eager(x, y)) for _ in range(4)], rel=1e-5)
    def names(g) -> set[str]:
        return {str(getattr(n.target, "__name__", n.target)) for n in g.graph.nodes
                if n.op in ("call_function", "call_method")}

    assert any({"conv2d", "cross_entropy", "grad"} <= names(g) for g in graphs)  # forward, loss, backward: one graph
    updates = [g for g in graphs if any(n.op == "get_attr" and "param_groups" in str(n.target) for n in g.graph.nodes)]
    assert updates and any(any(name.endswith("add_") for name in names(g)) for g in updates)  # the optimizer's update
    assert all(p.grad is None for p in model.parameters())  # released in the step
    torch._dynamo.reset()
