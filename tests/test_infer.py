"""`daybreak infer` on a real digits run: latency statistics, accuracy, cost, records, LoadGen, bad inputs."""

import dataclasses
import json
import re
import shutil
import statistics
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from daybreak.cli import main
from daybreak.infer.latency import InferConfig, accuracy_of, infer, latency_stats, load_for_inference, measure_latency
from daybreak.infer.latency import nearest_rank
from daybreak.infer.loadgen import loadgen_available, parse_summary
from daybreak.records.dawnbench_inference import JSON_FILE as DAWN_INFER_FILE
from daybreak.records.inference import INFERENCE_FILE, InferenceResult
from daybreak.tasks import TASKS, get_task
from daybreak.tasks.evaluate import evaluate
from daybreak.train.runner import RunConfig, run

from conftest import FAKE_WATTS as WATTS, single_line

DAWNBENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "dawnbench-entries"
PRICE = 3.6


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Batch-1 queries of a tiny model: one intra-op thread is fastest and steadiest on a small shared machine."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="session")
def digits_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("infer-runs") / "digits"
    old = torch.get_num_threads()
    torch.set_num_threads(1)  # steadier on a small shared machine; restored for the rest of the session
    try:
        result = run(RunConfig(out=out, quiet=True, command=["pytest"]))
    finally:
        torch.set_num_threads(old)
    assert result.status == "reached" and (out / "checkpoint.pt").exists()
    return out


@pytest.fixture(scope="session")
def measured(digits_run):
    """One full `infer` through the Python API, as the CLI does it."""
    result = infer(InferConfig(run_dir=digits_run, cost_per_hour=PRICE, warmup=5, throughput_repeats=3))
    return digits_run, result


def clone(run_dir: Path, tmp_path: Path, name: str = "copy") -> Path:
    dst = tmp_path / name
    shutil.copytree(run_dir, dst)
    for f in (INFERENCE_FILE, DAWN_INFER_FILE):
        (dst / f).unlink(missing_ok=True)
    return dst


def edit_result(run_dir: Path, **changes) -> None:
    path = run_dir / "result.json"
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def one_line_error(capsys, argv: list[str]) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    assert code != 0
    assert single_line(err), err
    return code, err.strip()


# --- numbers -----------------------------------------------------------------------------------------------


def test_latency_stats_are_consistent(measured):
    _, r = measured
    lat = r.latency
    assert r.n_examples == 450 and lat.n == 450
    assert 0 < lat.min_ms <= lat.p50_ms <= lat.p90_ms <= lat.p99_ms <= lat.max_ms
    assert lat.min_ms <= lat.mean_ms <= lat.max_ms
    assert lat.mean_ms == pytest.approx(lat.total_s * 1000 / lat.n, rel=1e-12)
    assert lat.std_ms >= 0
    assert r.settings.warmup == 5 and r.settings.latency_batch_size == 1
    assert r.clock_included.startswith("per query, from a prepared input tensor")
    assert "reading and decoding the dataset files from disk" in r.clock_excluded


def test_percentiles_are_nearest_rank():
    values = list(range(1, 101))
    assert [nearest_rank(values, p) for p in (50, 90, 99)] == [50, 90, 99]
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 450, 1001):
        ns = sorted(int(v) for v in rng.integers(1, 10**6, size=n))
        for p in (50, 90, 99):
            assert nearest_rank(ns, p) == int(np.percentile(ns, p, method="inverted_cdf"))
    stats = latency_stats([3_000_000, 1_000_000, 2_000_000])
    assert (stats.min_ms, stats.p50_ms, stats.max_ms, stats.mean_ms) == (1.0, 2.0, 3.0, 2.0)


def test_accuracy_equals_an_independent_batched_evaluation(measured):
    run_dir, r = measured
    from daybreak.recipes import get_recipe
    from daybreak.tasks import get_task

    ckpt = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    data = get_task("digits").load(None, False, False)
    setup = get_recipe("digits").build(ckpt["hyperparameters"], data, torch.device("cpu"))
    setup.model.load_state_dict(ckpt["state_dict"])
    top1, _ = evaluate(setup.model, setup.prepare(data.eval_x), data.eval_y, device=torch.device("cpu"))
    assert r.top1 == top1 and r.accuracy == top1
    assert r.accuracy == r.checkpoint_accuracy  # what the run itself measured for this checkpoint
    assert r.valid and r.reason is None and r.target == 0.98 and r.top5 is None


def test_python_api_predictions_match_accuracy(digits_run):
    loaded = load_for_inference(digits_run, device="cpu", amp="off")
    assert loaded.n == 450 and loaded.inputs.device.type == "cpu" and not loaded.model.training
    lat = measure_latency(loaded, warmup=0)
    assert len(lat.ns) == 450 and all(t > 0 for t in lat.ns) and lat.predictions.shape == (450,)
    top1, top5 = accuracy_of(lat.predictions, loaded.labels)
    assert top5 is None and 0.98 <= top1 <= 1.0
    # top-5 form of the predictions: [argmax, top-5 ...]
    fake = torch.stack([loaded.labels, loaded.labels, (loaded.labels + 1) % 10], dim=1)
    fake[:, 0] = (loaded.labels + 2) % 10
    assert accuracy_of(fake, loaded.labels) == (0.0, 1.0)
    # a task that reports top-5: the timed query returns [argmax, top-5] and top-1 is unchanged
    lat5 = measure_latency(replace(loaded, top5=True, _queries=None), warmup=0)
    assert lat5.predictions.shape == (450, 6) and torch.equal(lat5.predictions[:, 0], lat.predictions)
    t1, t5 = accuracy_of(lat5.predictions, loaded.labels)
    assert t1 == top1 and t1 <= t5 <= 1.0
    # autocast (bf16 on this CPU): same machinery, accuracy close to fp32
    lat_bf16 = measure_latency(replace(loaded, amp="bf16", _queries=None), warmup=1)
    assert abs(accuracy_of(lat_bf16.predictions, loaded.labels)[0] - top1) < 0.02


def test_cost_is_latency_times_price(measured):
    _, r = measured
    assert r.cost_per_hour == PRICE
    assert r.cost_per_10k_usd == pytest.approx(r.latency.mean_ms / 1000 / 3600 * PRICE * 10_000, rel=1e-12)
    assert r.cost_per_example_usd == pytest.approx(r.latency.mean_ms / 1000 / 3600 * PRICE, rel=1e-12)


def test_throughput_is_the_median_pass(measured):
    _, r = measured
    t = r.throughput
    assert t is not None and t.batch_size == 256 and t.repeats == 3 and len(t.pass_s) == 3
    assert t.examples_per_s == pytest.approx(450 / statistics.median(t.pass_s), rel=1e-12)
    assert r.settings.throughput_batch_size == 256


# --- records -----------------------------------------------------------------------------------------------


def test_inference_json_round_trips(measured):
    run_dir, r = measured
    assert InferenceResult.load(run_dir) == r
    assert InferenceResult.load(run_dir / INFERENCE_FILE) == r
    data = json.loads((run_dir / INFERENCE_FILE).read_text())
    assert data["kind"] == "daybreak.inference" and data["run_id"] == "digits"
    assert InferenceResult.model_validate_json(r.model_dump_json()) == r


def test_inference_record_load_errors_are_one_line(tmp_path):
    from daybreak.errors import RecordError

    (tmp_path / INFERENCE_FILE).write_text("{not json")
    with pytest.raises(RecordError) as e:
        InferenceResult.load(tmp_path)
    assert single_line(str(e.value))
    (tmp_path / INFERENCE_FILE).write_text(json.dumps({"kind": "daybreak.run"}))
    with pytest.raises(RecordError, match="not a daybreak inference record"):
        InferenceResult.load(tmp_path)
    (tmp_path / INFERENCE_FILE).write_text(json.dumps({"kind": "daybreak.inference"}))
    with pytest.raises(RecordError, match="invalid inference record"):
        InferenceResult.load(tmp_path)


def test_dawnbench_inference_json_matches_the_real_files(measured):
    run_dir, r = measured
    ours = json.loads((run_dir / DAWN_INFER_FILE).read_text())
    assert ours["version"] == "v1.0" and ours["author"] is not None
    assert ours["latency"] == r.latency.mean_ms  # milliseconds per example
    assert ours["cost"] == r.cost_per_example_usd  # USD per example
    assert ours["top1Accuracy"] == pytest.approx(r.top1 * 100, abs=1e-4)  # percent
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", ours["timestamp"])
    assert ours["misc"]["valid"] is True and ours["misc"]["latencyP90Ms"] == r.latency.p90_ms
    real_file = DAWNBENCH / "CIFAR10" / "inference" / "dawn_resnet164_b_16vCPUs-gc_pytorch.json"
    if not real_file.exists():
        pytest.skip("shared DAWNBench entries not available")
    real = json.loads(real_file.read_text())
    assert set(ours) == set(real)
    for key in ("latency", "cost", "top1Accuracy"):
        assert isinstance(ours[key], float) and isinstance(real[key], float)
    for key in ("version", "author", "authorEmail", "framework", "codeURL", "model", "hardware", "timestamp"):
        assert isinstance(ours[key], str)
    # the same convention: cost per example = latency (ms) / 1000 / 3600 x price per hour
    assert real["cost"] / (real["latency"] / 1000 / 3600) == pytest.approx(0.533, abs=0.01)


def test_no_price_means_no_cost(digits_run, tmp_path):
    d = clone(digits_run, tmp_path)
    r = infer(InferConfig(run_dir=d, warmup=0, throughput_repeats=0))
    assert r.cost_per_hour is None and r.cost_per_example_usd is None and r.cost_per_10k_usd is None
    assert r.throughput is None
    assert "cost" not in json.loads((d / DAWN_INFER_FILE).read_text())
    # the run's own price is the default
    edit_result(d, cost_per_hour=1.8)
    r = infer(InferConfig(run_dir=d, warmup=0, throughput_repeats=0))
    assert r.cost_per_hour == 1.8 and r.cost_per_10k_usd == pytest.approx(r.latency.mean_ms / 3.6e6 * 1.8 * 1e4)


# --- the command -------------------------------------------------------------------------------------------


def test_cli_prints_a_summary_and_exits_zero(digits_run, tmp_path, capsys):
    d = clone(digits_run, tmp_path)
    code = main(["infer", str(d), "--warmup", "2", "--throughput-repeats", "1", "--batch-size", "100",
                 "--cost-per-hour", "2"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""  # no progress bar when stderr is not a terminal
    assert "VALID" in out and "latency (ms)" in out and "throughput" in out and "per 10,000" in out
    r = InferenceResult.load(d)
    assert r.throughput.batch_size == 100 and r.cost_per_hour == 2.0 and r.command[:2] == ["daybreak", "infer"]
    code = main(["infer", str(d), "--warmup", "0", "--throughput-repeats", "0", "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["kind"] == "daybreak.inference"


def test_target_above_accuracy_is_invalid_with_exit_3(digits_run, tmp_path, capsys):
    d = clone(digits_run, tmp_path)
    edit_result(d, target=0.999)
    code, err = one_line_error(capsys, ["infer", str(d), "-q", "--warmup", "0", "--throughput-repeats", "0"])
    assert code == 3 and "invalid" in err and "99.90%" in err
    r = InferenceResult.load(d)
    assert r.valid is False and r.target == 0.999 and r.accuracy < 0.999 and "below" in r.reason
    assert json.loads((d / DAWN_INFER_FILE).read_text())["misc"]["valid"] is False


# --- bad input ---------------------------------------------------------------------------------------------


def test_missing_run_directory(tmp_path, capsys):
    code, err = one_line_error(capsys, ["infer", str(tmp_path / "nope")])
    assert code == 2 and "no such run directory" in err
    code, err = one_line_error(capsys, ["infer", str(tmp_path)])
    assert "no result.json" in err


def test_missing_checkpoint(digits_run, tmp_path, capsys):
    d = clone(digits_run, tmp_path)
    (d / "checkpoint.pt").unlink()
    _, err = one_line_error(capsys, ["infer", str(d)])
    assert "checkpoint missing" in err


def test_run_that_never_reached_the_target_says_so(digits_run, tmp_path, capsys):
    d = clone(digits_run, tmp_path)
    (d / "checkpoint.pt").unlink()
    edit_result(d, status="not_reached", reached=False, checkpoint=None, best_accuracy=0.9)
    _, err = one_line_error(capsys, ["infer", str(d)])
    assert "never reached its target" in err and "90.00%" in err


def test_corrupt_checkpoint(digits_run, tmp_path, capsys):
    d = clone(digits_run, tmp_path)
    data = (d / "checkpoint.pt").read_bytes()
    (d / "checkpoint.pt").write_bytes(data[: len(data) // 2] + b"\x00garbage" * 10)
    _, err = one_line_error(capsys, ["infer", str(d)])
    assert "not a readable checkpoint" in err
    (d / "checkpoint.pt").write_bytes(b"hello")
    _, err = one_line_error(capsys, ["infer", str(d)])
    assert "not a readable checkpoint" in err


def test_checkpoint_of_another_task(digits_run, tmp_path, capsys):
    d = clone(digits_run, tmp_path)
    ckpt = torch.load(d / "checkpoint.pt", weights_only=True)
    ckpt["task"], ckpt["recipe"] = "mnist", "mnist"
    torch.save(ckpt, d / "checkpoint.pt")
    _, err = one_line_error(capsys, ["infer", str(d)])
    assert "task 'mnist'" in err and "task 'digits'" in err
    # a result.json of another task over this run's recipe
    d2 = clone(digits_run, tmp_path, "other")
    edit_result(d2, task="mnist")
    _, err = one_line_error(capsys, ["infer", str(d2)])
    assert "recipe digits is for task digits" in err
    edit_result(d2, task="digits", recipe="no_such_recipe")
    _, err = one_line_error(capsys, ["infer", str(d2)])
    assert "unknown recipe 'no_such_recipe'" in err


def test_state_dict_that_does_not_fit_the_model(digits_run, tmp_path, capsys):
    d = clone(digits_run, tmp_path)
    ckpt = torch.load(d / "checkpoint.pt", weights_only=True)
    key = next(iter(ckpt["state_dict"]))
    ckpt["state_dict"].pop(key)
    torch.save(ckpt, d / "checkpoint.pt")
    _, err = one_line_error(capsys, ["infer", str(d)])
    assert "the model cannot load it" in err and key in err
    # weights of another architecture (width 16) under this run's hyperparameters
    ckpt = torch.load(digits_run / "checkpoint.pt", weights_only=True)
    ckpt["state_dict"] = {k: v[: v.shape[0] // 2] if v.dim() else v for k, v in ckpt["state_dict"].items()}
    torch.save(ckpt, d / "checkpoint.pt")
    _, err = one_line_error(capsys, ["infer", str(d)])
    assert "the model cannot load it" in err and "size mismatch" in err


def test_bad_flags(digits_run, tmp_path, capsys):
    d = clone(digits_run, tmp_path)
    for argv, expect in ((["--warmup", "-1"], "--warmup"), (["--batch-size", "0"], "--batch-size"),
                         (["--cost-per-hour", "-1"], "--cost-per-hour"), (["--instance", "nope"], "--instance"),
                         (["--device", "tpu"], "--device"), (["--compile", "--warmup", "0"], "--compile")):
        _, err = one_line_error(capsys, ["infer", str(d), *argv])
        assert expect in err


# --- LoadGen -----------------------------------------------------------------------------------------------


def test_loadgen_missing_is_one_line(digits_run, tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "mlperf_loadgen", None)  # import now raises ImportError
    _, err = one_line_error(capsys, ["infer", str(digits_run), "--backend", "loadgen"])
    assert "mlcommons-loadgen" in err


def test_parse_loadgen_summary():
    text = ("Scenario : SingleStream\nMode     : PerformanceOnly\n90.0th percentile latency (ns) : 197828\n"
            "Result is : VALID\n * Processed at least 64 queries (200).\nQPS w/ loadgen overhead         : 4896.92\n"
            "Mean latency (ns)               : 200854\n90.00 percentile latency (ns)   : 197828\n")
    assert parse_summary(text) == {"scenario": "SingleStream", "valid": True, "p90_ms": 0.197828,
                                   "mean_ms": 0.200854, "samples_per_s": 4896.92, "queries": 200}
    text = "Scenario : Offline\nSamples per second: 5168.28\nResult is : INVALID\nsamples_per_query : 200\n"
    got = parse_summary(text)
    assert got["samples_per_s"] == 5168.28 and got["valid"] is False and got["queries"] == 200


@pytest.mark.skipif(not loadgen_available(), reason="mlcommons-loadgen (daybreak[loadgen]) is not installed")
def test_loadgen_backend_runs_both_scenarios(digits_run, tmp_path):
    d = clone(digits_run, tmp_path)
    r = infer(InferConfig(run_dir=d, warmup=2, throughput_repeats=1, backend="loadgen", loadgen_min_queries=64))
    lg = r.loadgen
    assert lg is not None and lg.min_query_count == 64 and r.settings.backend == "loadgen"
    ss, off = lg.single_stream, lg.offline
    assert ss.valid is True and ss.queries >= 64 and ss.p90_ms > 0 and ss.samples_per_s > 0
    assert off.valid is True and off.queries >= 64 and off.samples_per_s > 0 and off.p90_ms is None
    for s in (ss, off):
        summary = d / s.log_dir / "mlperf_log_summary.txt"
        assert summary.exists() and f"Scenario : {s.scenario}" in summary.read_text()
    assert InferenceResult.load(d) == r
    misc = json.loads((d / DAWN_INFER_FILE).read_text())["misc"]
    assert misc["loadgenSingleStreamP90Ms"] == ss.p90_ms


# --- energy ------------------------------------------------------------------------------------------------




@pytest.mark.parametrize("progress", [False, True])
def test_joules_per_10k_examples_follow_the_timed_loops(fake_rapl, digits_run, tmp_path, progress, capsys):
    run_dir = clone(digits_run, tmp_path)
    r = infer(InferConfig(run_dir=run_dir, warmup=5, throughput_repeats=3, idle_power_s=0.2, progress=progress))
    e = r.energy
    assert e.available and e.covers == ["cpu_package"] and e.idle_power_w == pytest.approx(WATTS, rel=0.02)
    assert "no GPU selected" in e.unavailable["gpu"]
    lat, thr = e.latency, e.throughput
    # batch 1: 40 W x the measured seconds, scaled from the eval set's 450 examples to 10,000
    assert lat.examples == 450 and lat.timed_s == pytest.approx(r.latency.total_s)
    assert lat.joules_per_10k == pytest.approx(WATTS * lat.seconds / 450 * 10_000, rel=0.01)
    # the counters' stretches hold every timed query (what they leave out, the warm-up and the progress updates,
    # is tested below by where the stretches lie, which no load on the machine can change)
    assert lat.timed_s <= lat.seconds, (lat.seconds, lat.timed_s)
    assert lat.joules_per_10k >= WATTS * r.latency.total_s / 450 * 10_000 * (1 - 1e-9)
    assert lat.mean_power_w == pytest.approx(WATTS, rel=0.01)
    assert abs(lat.joules_per_10k_above_idle) < 0.05 * lat.joules_per_10k
    # offline: the timed passes only (the warm-up pass is left out)
    assert thr.examples == 3 * 450
    assert thr.joules_per_10k == pytest.approx(WATTS * thr.seconds / (3 * 450) * 10_000, rel=0.01)
    assert thr.joules_per_10k >= WATTS * sum(r.throughput.pass_s) / (3 * 450) * 10_000 * (1 - 1e-9)
    misc = json.loads((run_dir / DAWN_INFER_FILE).read_text())["misc"]
    assert misc["energyJoulesPer10kExamples"] == pytest.approx(lat.joules_per_10k)
    assert misc["energyThroughputJoulesPer10kExamples"] == pytest.approx(thr.joules_per_10k)
    assert misc["energyCovers"] == ["cpu_package"] and misc["energyUnavailable"] is None
    assert InferenceResult.load(run_dir).energy == e
    from daybreak.infer.commands import format_inference_summary

    text = format_inference_summary(r)
    assert re.search(r"energy +[\d.]+ J per 10,000 examples at batch 1 \((39|40)\.\d W, .* above idle\)", text), text
    assert "; CPU package, idle" in text


def test_progress_updates_and_the_warm_up_are_left_out_of_the_energy_windows(fake_rapl, digits_run):
    """Where the energy stretches lie, by the instants they were read: after the last warm-up query, around every
    timed query and never across a progress update (a slow terminal). Compared by position in time, not by
    durations, so that a busy machine cannot change the verdict."""
    from daybreak.measure.energy import EnergyMeter

    loaded = load_for_inference(digits_run, device="cpu")
    updates, spans, calls = [], [], []
    model = loaded.model

    class Timed(torch.nn.Module):  # when each query ran: the warm-up's are the first two
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, x):
            start = time.perf_counter()
            out = self.inner(x)
            calls.append((start, time.perf_counter()))
            return out

    loaded.model = Timed().eval()

    def progress(done):
        start = time.perf_counter()
        updates.append(done)
        time.sleep(0.02)  # a slow terminal: not part of any measured stretch
        spans.append((start, time.perf_counter()))

    with EnergyMeter(gpus=(), poll_s=None) as meter:
        lat = measure_latency(loaded, warmup=2, progress=progress, progress_every=64, meter=meter)
    assert len(lat.energy_windows) == 8 and updates[-1] == 450  # 450 queries: 7 updates inside, then the last
    windows = [(a.perf_counter_s, b.perf_counter_s) for a, b in lat.energy_windows]
    assert len(calls) == 2 + 450 and windows[0][0] >= calls[1][1]  # after the warm-up
    for start, end in spans[:-1]:  # no stretch overlaps an update
        assert all(b <= start or a >= end for a, b in windows), (start, end)
    for start, end in calls[2:]:  # every timed query inside a stretch
        assert any(a <= start and end <= b for a, b in windows)
    seconds = sum(b - a for a, b in windows)
    assert sum(lat.ns) / 1e9 <= seconds


def test_no_counter_means_energy_unavailable_with_the_reason(digits_run, tmp_path, monkeypatch):
    monkeypatch.setenv("DAYBREAK_POWERCAP_ROOT", str(tmp_path / "nothing-here"))
    run_dir = clone(digits_run, tmp_path)
    r = infer(InferConfig(run_dir=run_dir, warmup=2, throughput_repeats=1))
    e = r.energy
    assert not e.available and e.latency is None and e.throughput is None and e.idle_power_w is None
    assert "does not exist" in e.unavailable["cpu_package"] and e.unavailable["gpu"]
    misc = json.loads((run_dir / DAWN_INFER_FILE).read_text())["misc"]
    assert misc["energyJoulesPer10kExamples"] is None and "does not exist" in misc["energyUnavailable"]["cpu_package"]
    from daybreak.infer.commands import format_inference_summary

    assert re.search(r"energy +unavailable: .*does not exist", format_inference_summary(r))


def test_infer_refuses_a_data_dir_it_would_ignore(digits_run, tmp_path, capsys):
    """digits reads no folder: `infer --data-dir` was silently ignored; a file is no folder for a task with files."""
    (tmp_path / "notes.txt").write_text("x")
    assert main(["infer", str(digits_run), "--data-dir", str(tmp_path / "notes.txt")]) == 2
    err = capsys.readouterr().err
    assert single_line(err) and "task digits reads no data folder" in err
    with_files = dataclasses.replace(get_task("digits"), has_data_dir=True)
    with TASKS.override("digits", with_files):
        assert main(["infer", str(digits_run), "--data-dir", str(tmp_path / "notes.txt")]) == 2
    err = capsys.readouterr().err
    assert single_line(err) and "notes.txt: not a folder" in err
