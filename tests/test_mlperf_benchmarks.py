"""MLPerf's benchmarks as one table (daybreak.mlperf_benchmarks), and `daybreak time --log` on a log of each family.

The table is checked against mlperf-logging itself: every round's compliance-checker target expression, evaluated
on values around the target, says what the table's goal says; the benchmarks and result-file counts of each round
are benchmark_meta's; the initialization limit is common.yaml's.

The logs are small ones written here in the published layout (``training_results_v<round>/<submitter>/results/
<system>/<benchmark>/result_0.txt``) with the published keys, one per family: lower-is-better (Llama 2 70B LoRA's
eval loss), perplexity (Llama 3.1 405B), two-metric (Stable Diffusion's FID and CLIP, evaluated offline),
higher-is-better (R-GAT), aborted, and an initialization over the round's limit. Each is read by `daybreak time
--log --rules mlperf` and by mlperf-logging's result summarizer (its compliance check, then run_stop - run_start),
and both must say the same.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
import yaml
from mlperf_logging import benchmark_meta
from mlperf_logging.result_summarizer import result_summarizer as summarizer

from daybreak.cli import main
from daybreak.metrics import metric_named
from daybreak.mlperf_benchmarks import BENCHMARKS, ROUNDS, Goal, benchmark_of, init_limit, rounds_of, ruleset
from daybreak.records.run import RunResult

from conftest import single_line

CHECKER = Path(summarizer.__file__).parents[1] / "compliance_checker"


# --- the table against mlperf-logging ---------------------------------------------------------------------------
def _closed_check(round_: str, name: str) -> str:
    checks = yaml.load((CHECKER / f"training_{ruleset(round_)}" / f"closed_{name}.yaml").read_text(),
                       Loader=yaml.BaseLoader)
    found = [k["KEY"]["ATLEAST_ONE_CHECK"] for k in checks if "KEY" in k and "ATLEAST_ONE_CHECK" in k["KEY"]]
    assert len(found) == 1, (round_, name)
    return found[0]


def _probes(goal: Goal) -> list[dict]:
    """Values around every criterion's target and limit: each side, and exactly on them."""
    out = []
    for c in goal.criteria:
        for point in {c.target, c.limit if c.limit is not None else c.target}:
            for delta in (-1e-6, 0.0, 1e-6):
                values = {d.part: d.target for d in goal.criteria}  # the other parts exactly on their targets
                values[c.part] = point + delta
                out.append(values)
    return out


@pytest.mark.parametrize("round_", ROUNDS)
def test_every_target_is_the_checkers(round_):
    """The checker's ATLEAST_ONE_CHECK and the table's goal agree on values on both sides of every target and limit
    (Stable Diffusion's on the checker's aggregated FID and CLIP; v0.7 BERT's at both batch sizes)."""
    for b in BENCHMARKS:
        if b.span(round_) is None:
            continue
        check = _closed_check(round_, b.name)
        for gbs in (4096, 8192):
            goal = b.goal(round_, gbs)
            for values in _probes(goal):
                if goal.parts == (None,):
                    v = {"value": values[None]}
                else:  # one value of several parts (the checker aggregates Stable Diffusion's two records so)
                    v = {"value": dict(values)}
                expected = eval(check, {}, {"v": v, "s": {"global_batch_size": gbs}})  # the checker's own test
                assert goal.met(values) == bool(expected), (round_, b.name, gbs, values, check)
        assert check.strip() in b.span(round_).source, (round_, b.name)


@pytest.mark.parametrize("round_", ROUNDS)
def test_the_key_that_aggregates_a_goal_of_several_records_is_the_checkers(round_):
    """Stable Diffusion's checker aggregates its FID and CLIP records in a BEGIN block, by one metadata key (step_num
    in v3.1, samples_count from v4.0): the table's ``aggregate_by``. No other benchmark's goal aggregates records."""
    for b in BENCHMARKS:
        goal = b.goal(round_)
        if goal is None:
            continue
        checks = yaml.load((CHECKER / f"training_{ruleset(round_)}" / f"closed_{b.name}.yaml").read_text(),
                           Loader=yaml.BaseLoader)
        begin = next((k["BEGIN"]["CODE"] for k in checks if "BEGIN" in k), "")
        keys = set(re.findall(r"line\.value\['metadata'\]\['(\w+)'\]", begin)) - {"metric"}
        assert keys == ({goal.aggregate_by} if goal.aggregate_by else set()), (round_, b.name, keys)


@pytest.mark.parametrize("round_", ROUNDS)
def test_every_round_has_benchmark_metas_benchmarks_and_run_counts(round_):
    allowed = set(benchmark_meta.get_allowed_benchmarks("training", ruleset(round_)))
    ours = {b.name for b in BENCHMARKS if b.span(round_) is not None}
    assert ours == allowed
    counts = benchmark_meta.get_result_file_counts("training")
    for name in ours:
        assert benchmark_of(name, round_).runs(round_) == counts[name], (round_, name)


@pytest.mark.parametrize("round_", ROUNDS)
def test_the_initialization_limit_is_the_checkers(round_):
    common = (CHECKER / f"training_{ruleset(round_)}" / "common.yaml").read_text()
    fixed = re.search(r"ll\.timestamp - s\['first_init_start'\] < \((\d+)\*60\*1e3\)", common)
    by_division = re.search(r"s\['compile_time_mins'\] = (\d+) if v\['value'\] == 'open' else (\d+)", common)
    if fixed:
        limits = {"closed": int(fixed.group(1)), "open": int(fixed.group(1))}
    else:
        limits = {"open": int(by_division.group(1)), "closed": int(by_division.group(2))}
    for division, minutes in limits.items():
        assert init_limit(round_, division).seconds == minutes * 60, (round_, division)


def test_every_metric_has_its_own_name_direction_and_unit():
    assert benchmark_of("resnet", "v4.0").quality.name == "top1"  # ResNet-50's target is top-1, not top-5
    named = {b.name: (b.quality.name, b.quality.higher_is_better, b.quality.unit) for b in BENCHMARKS}
    assert named["llama2_70b_lora"] == ("eval_loss", False, "loss")
    assert named["gpt3"] == named["llama31_405b"] == named["llama31_8b"] == ("log_perplexity", False,
                                                                            "log perplexity")
    assert named["stable_diffusion"] == ("fid+clip", False, "score")
    assert named["dlrm_dcnv2"] == ("auc", True, "fraction") and named["bert"][0] == "masked_lm_accuracy"
    assert named["retinanet"][0] == "map" and named["rgat"][0] == "accuracy"
    assert metric_named("mlm_accuracy") is metric_named("masked_lm_accuracy")  # entries stored before the rename
    sd = benchmark_of("stable_diffusion", "v5.0").goal("v5.0")
    assert sd.label == "FID <= 90 and CLIP >= 0.15" and sd.parts == ("FID", "CLIP")
    assert rounds_of("ssd") == ROUNDS[ROUNDS.index("v0.7"):ROUNDS.index("v4.1") + 1]
    assert benchmark_of("ssd", "v1.1").title == "SSD-ResNet34" and benchmark_of("ssd", "v2.0").title == "RetinaNet"


# --- logs in the published layout -----------------------------------------------------------------------------
T0 = 1_745_000_000_000  # 2025-04-18, epoch milliseconds

HYPERPARAMETERS = {
    "llama2_70b_lora": [("global_batch_size", 8), ("opt_base_learning_rate", 0.0005),
                        ("opt_learning_rate_training_steps", 1024), ("opt_gradient_clip_norm", 0.3),
                        ("opt_adamw_weight_decay", 0.0001), ("gradient_accumulation_steps", 1), ("lora_alpha", 32),
                        ("lora_rank", 16), ("train_samples", 3901), ("eval_samples", 173)],
    "llama31_405b": [("global_batch_size", 1152), ("max_sequence_length", 8192), ("opt_name", "adamw"),
                     ("opt_base_learning_rate", 8e-05), ("opt_end_learning_rate", 8e-07),
                     ("opt_learning_rate_decay_steps", 1200000), ("opt_learning_rate_warmup_steps", 8000),
                     ("opt_learning_rate_decay_schedule", "cosine with linear warmup"), ("opt_adamw_beta_1", 0.9),
                     ("opt_adamw_beta_2", 0.95), ("opt_adamw_epsilon", 1e-05), ("opt_adamw_weight_decay", 0.1),
                     ("opt_gradient_clip_norm", 1.0), ("gradient_accumulation_steps", 1), ("eval_samples", 5760),
                     ("init_checkpoint_step", 0), ("train_samples", 1574207408)],
    "stable_diffusion": [("global_batch_size", 1024), ("opt_name", "adamw"), ("opt_adamw_beta_1", 0.9),
                         ("opt_adamw_beta_2", 0.999), ("opt_adamw_epsilon", 1e-08), ("opt_adamw_weight_decay", 0.01),
                         ("opt_base_learning_rate", 1.25e-07), ("opt_learning_rate_warmup_steps", 1000),
                         ("gradient_accumulation_steps", 1), ("train_samples", 6513144), ("eval_samples", 30000)],
    "rgat": [("global_batch_size", 16384), ("opt_name", "adam"), ("opt_base_learning_rate", 0.001),
             ("gradient_accumulation_steps", 1), ("train_samples", 157675969), ("eval_samples", 788379)],
    "resnet": [("global_batch_size", 3264), ("gradient_accumulation_steps", 1), ("train_samples", 1281167),
               ("eval_samples", 50000)],
    "dlrm_dcnv2": [("global_batch_size", 135168), ("opt_name", "adagrad"), ("opt_base_learning_rate", 0.0034),
                   ("opt_adagrad_learning_rate_decay", 0), ("opt_weight_decay", 0),
                   ("opt_adagrad_initial_accumulator_value", 0.0), ("opt_adagrad_epsilon", 1e-08),
                   ("opt_learning_rate_warmup_steps", 0), ("opt_learning_rate_decay_start_step", 0),
                   ("opt_learning_rate_decay_steps", 0), ("gradient_accumulation_steps", 1),
                   ("train_samples", 4195197692), ("eval_samples", 89137319)],
}
HYPERPARAMETERS["ssd"] = [("global_batch_size", 1024), ("train_samples", 117266), ("eval_samples", 5000)]
HYPERPARAMETERS["bert"] = [("global_batch_size", 4096), ("train_samples", 2621440), ("eval_samples", 10000)]
BY_EPOCH = ("rgat", "resnet", "dlrm_dcnv2", "ssd", "bert")  # their evaluations are numbered by epoch_num, the others' by samples_count


def record(key, value, time_ms, event_type="POINT_IN_TIME", metadata_text=None, **metadata) -> str:
    """One record as mllog writes it; ``metadata_text`` replaces the metadata object (HugeCTR logs "")."""
    md = metadata_text if metadata_text is not None else {"file": "train.py", "lineno": 1, **metadata}
    return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": time_ms, "event_type": event_type, "key": key,
                                     "value": value, "metadata": md})


def published_log(benchmark: str, evals: list, *, stop_s: float, status: str = "success", init_s: float = 60.0,
                  after_stop: list | None = None) -> str:
    """A closed-division log as a submitter's harness writes it: header, hyperparameters, init_start..init_stop,
    run_start, blocks with evaluations (``(seconds after run_start, value, step)``; a value of several parts is a
    dict {metric: value}, one record each), run_stop ``stop_s`` after run_start; ``after_stop`` evaluations are
    logged after run_stop."""
    start = T0 + int(init_s * 1000)
    lines = [record("cache_clear", True, T0), record("init_start", None, T0, "INTERVAL_START")]
    lines += [record(k, v, T0 + 1) for k, v in (("submission_benchmark", benchmark), ("submission_org", "Acme"),
                                                 ("submission_division", "closed"), ("submission_status", "onprem"),
                                                 ("submission_platform", "1xAcme-8x"), ("seed", 1234))]
    lines += [record(k, v, T0 + 2) for k, v in HYPERPARAMETERS[benchmark]]
    lines += [record("init_stop", None, start - 1, "INTERVAL_END"), record("run_start", None, start, "INTERVAL_START")]
    step = "epoch_num" if benchmark in BY_EPOCH else "samples_count"
    begin = 0
    for at_s, value, n in evals:
        at = start + int(at_s * 1000)
        lines.append(record("block_start", None, start + begin, "INTERVAL_START", **{step: n}, first_epoch_num=0,
                            epoch_count=1))
        lines.append(record("block_stop", None, at - 2000, "INTERVAL_END", **{step: n}, first_epoch_num=0))
        lines.append(record("eval_start", None, at - 2000, "INTERVAL_START", **{step: n}))
        for part, v in (value.items() if isinstance(value, dict) else [(None, value)]):
            lines.append(record("eval_accuracy", v, at, **{step: n}, **({"metric": part} if part else {})))
        lines.append(record("eval_stop", None, at, "INTERVAL_END", **{step: n}))
        begin = at_s * 1000
    lines.append(record("run_stop", None, start + int(stop_s * 1000), "INTERVAL_END", status=status))
    for at_s, value, n in after_stop or []:
        lines.append(record("eval_accuracy", value, start + int(at_s * 1000), **{step: n}))
    return "\n".join(lines) + "\n"


def write(tmp_path: Path, round_: str, benchmark: str, text: str, name: str = "result_0.txt") -> Path:
    path = tmp_path / f"training_results_{round_}" / "Acme" / "results" / "acme_1x8" / benchmark / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def timed(log: Path, tmp_path: Path, *flags: str) -> tuple[int, RunResult]:
    out = tmp_path / f"timed-{len(list(tmp_path.glob('timed-*')))}"
    rc = main(["time", "--rules", "mlperf", "--log", str(log), "--out", str(out), "-q", *flags])
    return rc, RunResult.load(out)


def summarized(log: Path, round_: str) -> tuple[bool, float | None]:
    """mlperf-logging's result summarizer on one run: (converged, run_stop - run_start in seconds)."""
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            lines = summarizer._read_result_file(str(log), "training", ruleset(round_))
        except ValueError:
            return False, None
        start, stop = summarizer._query_run_start_stop(lines)
    return True, (stop - start) / 1000.0


def agree(log: Path, round_: str, r: RunResult) -> None:
    converged, seconds = summarized(log, round_)
    assert (r.status == "reached") == converged
    if converged:
        assert r.time_to_target_s == pytest.approx(seconds, abs=1e-3)


# --- one log per family -----------------------------------------------------------------------------------------
def test_lower_is_better_eval_loss(tmp_path):
    """Llama 2 70B LoRA (v5.0): the target is an evaluation loss at or below 0.925. The first evaluation (0.9385)
    is above it: not a crossing; the time is MLPerf's, run_stop - run_start."""
    log = write(tmp_path, "v5.0", "llama2_70b_lora", published_log(
        "llama2_70b_lora", [(363.48, 0.9385, 1536), (462.66, 0.9363, 1920), (661.88, 0.9251, 2688),
                            (760.315, 0.9246, 3072)], stop_s=760.315))
    rc, r = timed(log, tmp_path)
    assert rc == 0 and r.status == "reached" and r.time_to_target_s == 760.315
    assert (r.task, r.metric, r.target) == ("mlperf:llama2_70b_lora", "eval_loss", 0.925)
    m = r.mlperf
    assert (m.round, m.round_from, m.division, m.reached, m.time_s) == ("v5.0", "the log's folder "
                                                                        "(training_results_v5.0)", "closed", True,
                                                                        760.315)
    assert m.criteria[0].label == "eval loss <= 0.925" and m.criteria[0].unit == "loss"
    assert "closed_llama2_70b_lora.yaml" in m.rules_source and "training_5.0.0" in m.rules_source
    # the DAWNBench reading: the first evaluation at or below 0.925, the fourth (the third, 0.9251, is above)
    assert r.history[3].clock_s["dawnbench"] == m.dawnbench_time_s and r.clocks["dawnbench"].time_to_target_s
    assert [h.metrics for h in r.history][0] == {"eval_loss": 0.9385} and r.best_accuracy == 0.9246
    rows = (tmp_path / "timed-0" / "dawnbench.tsv").read_text().splitlines()
    assert rows[0].split("\t") == ["epoch", "hours", "eval_loss"] and rows[1].split("\t")[2] == "0.9385"
    agree(log, "v5.0", r)
    assert main(["show", str(tmp_path / "timed-0")]) == 0


def test_log_perplexity(tmp_path, capsys):
    """Llama 3.1 405B (v5.0): a log perplexity at or below 5.6; a value above 1 is a perplexity, not a percent."""
    log = write(tmp_path, "v5.0", "llama31_405b", published_log(
        "llama31_405b", [(1500.0, 5.91, 368640), (3000.0, 5.71, 737280), (4400.25, 5.598, 1105920)],
        stop_s=4400.25))
    rc, r = timed(log, tmp_path)
    assert rc == 0 and r.status == "reached" and r.time_to_target_s == 4400.25
    assert r.metric == "log_perplexity" and [h.accuracy for h in r.history] == [5.91, 5.71, 5.598]
    agree(log, "v5.0", r)
    capsys.readouterr()
    assert main(["show", str(tmp_path / "timed-0")]) == 0
    text = capsys.readouterr().out
    assert "log perplexity <= 5.6" in text and "final log perplexity 5.598" in text
    assert "MLPerf verdict   REACHED, run_stop - run_start 4400.250 s" in text


def test_two_metrics_evaluated_offline(tmp_path):
    """Stable Diffusion (v4.1): FID <= 90 and CLIP >= 0.15 in one checkpoint's evaluation; its checkpoints are
    evaluated after the clock stopped (their records are timed after run_stop), so they are no crossing for the
    DAWNBench reading, while MLPerf's time is run_stop - run_start. A high FID is a score, never a percent."""
    evals = [(600.0, {"FID": 93.12, "CLIP": 0.158}, 3584000), (650.0, {"FID": 79.45, "CLIP": 0.178}, 4096000)]
    log = write(tmp_path, "v4.1", "stable_diffusion", published_log("stable_diffusion", evals, stop_s=104.465))
    rc, r = timed(log, tmp_path)
    assert rc == 0 and r.status == "reached" and r.time_to_target_s == 104.465
    assert r.metric == "fid+clip" and [h.metrics for h in r.history] == [{"fid": 93.12, "clip": 0.158},
                                                                          {"fid": 79.45, "clip": 0.178}]
    assert r.mlperf.criteria[0].label == "FID <= 90" and r.mlperf.criteria[1].label == "CLIP >= 0.15"
    assert not r.mlperf.dawnbench_reached and r.clocks["dawnbench"].time_to_target_s is None
    assert any("timed after run_stop" in n for n in r.data_notes)
    agree(log, "v4.1", r)
    # FID 93.12 with a CLIP above 0.15 meets no target (it would be 93.12% to a reader that guessed percents)
    one = write(tmp_path, "v4.1", "stable_diffusion", published_log("stable_diffusion", evals[:1], stop_s=50.0),
                "result_1.txt")
    rc, r = timed(one, tmp_path)
    assert rc == 3 and not r.mlperf.reached and "no evaluation in the log met the target FID <= 90 and CLIP >= 0.15" \
        in r.message
    agree(one, "v4.1", r)


def test_higher_is_better(tmp_path):
    """R-GAT (v5.0): node classification accuracy at or above 72%, logged as a fraction with epoch_num."""
    log = write(tmp_path, "v5.0", "rgat", published_log("rgat", [(120.0, 0.701, 1), (240.5, 0.7214, 2)],
                                                        stop_s=241.0))
    rc, r = timed(log, tmp_path)
    assert rc == 0 and r.time_to_target_s == 241.0 and r.metric == "accuracy" and r.target == 0.72
    assert r.mlperf.dawnbench_reached and r.epochs_to_target == 2
    agree(log, "v5.0", r)


def test_aborted_is_not_reached_whatever_an_evaluation_crossed(tmp_path):
    # a run that aborts below its target: both daybreak and mlperf-logging's summarizer drop it
    log = write(tmp_path, "v5.0", "llama2_70b_lora", published_log(
        "llama2_70b_lora", [(363.48, 0.9385, 1536), (462.66, 0.9363, 1920)], stop_s=500.0, status="aborted"))
    rc, r = timed(log, tmp_path)
    assert rc == 3 and r.status == "not_reached" and r.time_to_target_s is None
    assert r.message == "not MLPerf's result: run_stop status 'aborted', not 'success'"
    agree(log, "v5.0", r)
    # aborted after an evaluation met the target: still not MLPerf's result (the DAWNBench reading is beside it)
    crossed = write(tmp_path, "v5.0", "llama2_70b_lora", published_log(
        "llama2_70b_lora", [(363.48, 0.9385, 1536), (462.66, 0.921, 1920)], stop_s=500.0, status="aborted"),
        "result_1.txt")
    rc, r = timed(crossed, tmp_path)
    assert rc == 3 and not r.mlperf.reached and r.mlperf.dawnbench_reached
    assert r.clocks["mlperf"].time_to_target_s is None and r.clocks["dawnbench"].time_to_target_s is not None
    # where daybreak and mlperf-logging's summarizer part: its checker reads no run_stop status (no published log
    # of the sample is such a run; docs/how-to/mlperf-logs.md says so)
    assert summarized(crossed, "v5.0") == (True, 500.0)
    # ... under the DAWNBench headline, reached, with MLPerf's verdict recorded beside it
    rc, r = timed(crossed, tmp_path, "--rules", "dawnbench")
    assert rc == 0 and r.status == "reached" and not r.mlperf.reached


def test_an_evaluation_after_run_stop_is_no_crossing(tmp_path):
    log = write(tmp_path, "v5.0", "llama2_70b_lora", published_log(
        "llama2_70b_lora", [(363.48, 0.9385, 1536)], stop_s=400.0, status="aborted",
        after_stop=[(410.0, 0.91, 1920)]))
    rc, r = timed(log, tmp_path, "--rules", "dawnbench")
    assert rc == 3 and not r.mlperf.dawnbench_reached and r.mlperf.target_met  # the checker counts any line


def test_evaluations_relogged_with_earlier_timestamps(tmp_path):
    """Some submitters log Stable Diffusion's offline evaluations again, stamped with the checkpoint's time (before
    earlier records): MLPerf's verdict reads run_start and run_stop only; no DAWNBench reading is taken, with a
    warning, and the run is not 'failed' for it."""
    text = published_log("stable_diffusion", [(600.0, {"FID": 93.12, "CLIP": 0.158}, 3584000),
                                              (650.0, {"FID": 79.45, "CLIP": 0.178}, 4096000)], stop_s=146.615)
    relogged = [record("eval_accuracy", v, T0 + 60_000 + 146_615, samples_count=4096000, metric=m)
                for m, v in (("FID", 79.45), ("CLIP", 0.178))]
    lines = text.splitlines()
    log = write(tmp_path, "v4.1", "stable_diffusion", "\n".join(lines[:-1] + relogged + lines[-1:]) + "\n")
    rc, r = timed(log, tmp_path)
    assert rc == 0 and r.status == "reached" and r.time_to_target_s == 146.615
    assert not r.mlperf.dawnbench_reached and any("timestamps go backwards" in w for w in r.warnings)
    agree(log, "v4.1", r)


# --- Stable Diffusion's evaluations, grouped as each round's checker groups them ------------------------------------
# (step, FID, CLIP) of the checkpoints of one NVIDIA run of v3.1 (its values, rounded); FID <= 90 and CLIP >= 0.15
# first at step 2000, where its run_stop is
SD_CHECKPOINTS = [(250, 427.95, 0.0357), (500, 309.49, 0.0273), (750, 253.29, 0.0573), (1000, 202.23, 0.0827),
                  (1250, 127.84, 0.1297), (1500, 116.71, 0.1433), (1750, 96.93, 0.1629), (2000, 79.34, 0.1834),
                  (2250, 77.47, 0.1795)]


def nvidia_sd_log(checkpoints: list, *, stop_s: float, stop_step: int, key: str = "step_num",
                  status: str = "success") -> str:
    """Stable Diffusion as NVIDIA's v3.1 harness logs it: every record numbered by ``key`` alone (step_num; no
    epoch_num, no samples_count); the checkpoints evaluated offline after training, timed after run_stop's time_ms
    but logged before the run_stop record: eval_start/eval_stop of each, then every FID (last checkpoint first),
    then every CLIP (the last checkpoint's first); the report script logs the FID and CLIP of ``stop_step`` again, stamped with
    run_stop's time, then run_stop."""
    head = published_log("stable_diffusion", [], stop_s=stop_s, status=status).splitlines()[:-1]
    start = T0 + 60_000
    stop = start + int(stop_s * 1000)
    lines = list(head)
    last = 0
    for step, _, _ in checkpoints:  # training blocks of 100 steps up to the checkpoint
        for s in range(last, step, 100):
            t = start + int(stop_s * 1000 * s / max(stop_step, 1) / 1.2)
            lines.append(record("block_start", "training_step", t, "INTERVAL_START", **{key: s}))
            lines.append(record("block_stop", "training_step", t + 1000, "INTERVAL_END", **{key: s + 100}))
        last = step
    t = stop + 200_000
    for step, _, _ in checkpoints:
        lines.append(record("eval_start", None, t, "INTERVAL_START", **{key: step}))
        lines.append(record("eval_stop", None, t + 400_000, "INTERVAL_END", **{key: step}))
        t += 470_000
    for step, fid, _ in reversed(checkpoints):
        t += 5_000
        lines.append(record("eval_accuracy", fid, t, **{key: step}, metric="FID", path="/nemologs/inference"))
    for step, _, clip in checkpoints[-1:] + checkpoints[:-1]:  # the last checkpoint's first, then the others
        t += 5_000
        lines.append(record("eval_accuracy", clip, t, **{key: step}, metric="CLIP", path="/nemologs/inference"))
    fid, clip = next((f, c) for s, f, c in checkpoints if s == stop_step)
    lines.append(record("eval_accuracy", fid, stop, **{key: stop_step}, metric="FID"))
    lines.append(record("eval_accuracy", clip, stop, **{key: stop_step}, metric="CLIP"))
    lines.append(record("run_stop", None, stop, "INTERVAL_END", status=status, **{key: stop_step}))
    return "\n".join(lines) + "\n"


def test_nvidia_stable_diffusion_v31_is_grouped_by_step_num(tmp_path):
    """v3.1's checker aggregates FID and CLIP by step_num: NVIDIA's logs, which carry nothing else and log every FID
    before every CLIP, reach the target at step 2000 (FID 79.34, CLIP 0.1834), as the summarizer says; pairing
    records by their order would have paired the FID of one checkpoint with the CLIP of another."""
    log = write(tmp_path, "v3.1", "stable_diffusion", nvidia_sd_log(SD_CHECKPOINTS, stop_s=610.738, stop_step=2000))
    rc, r = timed(log, tmp_path)
    assert rc == 0 and r.status == "reached" and r.time_to_target_s == 610.738 and r.mlperf.round == "v3.1"
    pairs = {(h.metrics["fid"], h.metrics["clip"], h.step) for h in r.history}
    assert pairs == {(f, c, s) for s, f, c in SD_CHECKPOINTS}  # (the report's pair again is the same checkpoint's)
    assert "aggregated" in r.mlperf.rules_source and "step_num" in r.mlperf.rules_source
    agree(log, "v3.1", r)
    # CLIP below 0.15 at every checkpoint whose FID is at most 90: no evaluation meets both, whatever the order
    short = [(s, f, c if f > 90 else 0.149) for s, f, c in SD_CHECKPOINTS]
    log = write(tmp_path, "v3.1", "stable_diffusion", nvidia_sd_log(short, stop_s=610.738, stop_step=2000),
                "result_1.txt")
    rc, r = timed(log, tmp_path)
    assert rc == 3 and "no evaluation in the log met the target FID <= 90 and CLIP >= 0.15" in r.message
    agree(log, "v3.1", r)


def test_stable_diffusion_from_v40_is_grouped_by_samples_count(tmp_path):
    """From v4.0 the checker aggregates by samples_count: the same layout numbered by samples_count is reached; a
    v3.1-numbered log (step_num only) cannot be aggregated by v4.0's checker, which stops on it (a KeyError in its
    BEGIN block), and daybreak says why instead of a time."""
    by_samples = [(s * 2048, f, c) for s, f, c in SD_CHECKPOINTS]
    log = write(tmp_path, "v4.0", "stable_diffusion", nvidia_sd_log(by_samples, stop_s=610.738, stop_step=2000 * 2048,
                                                                      key="samples_count"))
    rc, r = timed(log, tmp_path)
    assert rc == 0 and r.time_to_target_s == 610.738
    assert {(h.metrics["fid"], h.metrics["clip"]) for h in r.history} == {(f, c) for _, f, c in by_samples}
    agree(log, "v4.0", r)
    stepped = write(tmp_path, "v4.0", "stable_diffusion",
                    nvidia_sd_log(SD_CHECKPOINTS, stop_s=610.738, stop_step=2000), "result_1.txt")
    rc, r = timed(stepped, tmp_path)
    assert rc == 3 and "carries no samples_count, by which MLPerf's checker of this round aggregates FID and CLIP" \
        in r.message
    with pytest.raises(KeyError), contextlib.redirect_stdout(io.StringIO()):
        summarizer._read_result_file(str(stepped), "training", "4.0.0")


def test_intel_stable_diffusion_v31_evaluates_inside_the_run(tmp_path):
    """Intel's v3.1 logs number FID and CLIP by epoch_num and step_num and evaluate inside the run: the DAWNBench
    reading is the evaluation at step 5000, where run_stop is."""
    text = published_log("stable_diffusion", [], stop_s=1376.856).splitlines()
    start = T0 + 60_000
    lines = text[:-1]
    for epoch, (fid, clip) in enumerate([(246.72, 0.0476), (147.82, 0.1073), (102.98, 0.1296), (90.87, 0.1520),
                                         (78.59, 0.1690)], start=1):
        t = start + int(1376.856 * 1000 * epoch / 5)
        at = {"epoch_num": epoch, "step_num": epoch * 1000}
        lines.append(record("block_start", None, t - 250_000, "INTERVAL_START", **at))
        lines.append(record("block_stop", None, t - 20_000, "INTERVAL_END", **at))
        lines.append(record("eval_start", None, t - 20_000, "INTERVAL_START", **at))
        for metric, value in (("FID", fid), ("CLIP", clip)):
            lines.append(record("eval_accuracy", value, t, **at, metric=metric))
        lines.append(record("eval_stop", None, t, "INTERVAL_END", **at))
    lines.append(text[-1])
    log = write(tmp_path, "v3.1", "stable_diffusion", "\n".join(lines) + "\n")
    rc, r = timed(log, tmp_path)
    assert rc == 0 and r.time_to_target_s == 1376.856 and r.mlperf.dawnbench_reached
    assert [h.metrics["fid"] for h in r.history] == [246.72, 147.82, 102.98, 90.87, 78.59]
    assert r.history[-1].clock_s["dawnbench"] == r.mlperf.dawnbench_time_s
    agree(log, "v3.1", r)


def test_records_with_empty_metadata_are_records(tmp_path, capsys):
    """NVIDIA's v6.0 HugeCTR DLRM-DCNv2 logs open with seven records whose metadata is an empty string, which
    mlperf-logging's parser reads (none failed) and its checker passes: the run is reached, run_stop - run_start."""
    from mlperf_logging.compliance_checker import mlp_parser

    text = published_log("dlrm_dcnv2", [(2.267, 0.7858, 0.0499), (4.454, 0.7909, 0.0999), (45.582, 0.80276, 0.9989)],
                         stop_s=45.582).splitlines()
    empty = [record(k, v, T0, metadata_text="") for k, v in (
        ("lowest_numerical_precision_in_comm", "fp16"), ("lowest_numerical_precision_in_attn", "fp16"),
        ("lowest_numerical_precision_in_linear", "fp16"), ("expert_parallelism", 1), ("context_parallelism", 1),
        ("pipeline_parallelism", 1), ("tensor_parallelism", 1))]
    log = write(tmp_path, "v6.0", "dlrm_dcnv2", "\n".join(text[:2] + empty + text[2:]) + "\n")
    assert log.read_text().count('"metadata": ""') == 7
    loglines, failed = mlp_parser.parse_file(str(log), ruleset="6.0.0")
    assert not failed and sum(1 for x in loglines if x.value["metadata"] == "") == 7
    rc, r = timed(log, tmp_path)
    assert rc == 0 and r.status == "reached" and r.time_to_target_s == 45.582 and r.mlperf.round == "v6.0"
    assert r.seed == 1234 and r.hyperparameters["tensor_parallelism"] == 1
    agree(log, "v6.0", r)
    capsys.readouterr()
    assert main(["check-mllog", str(log)]) == 0 and "PASSES" in capsys.readouterr().out


def test_a_log_with_a_malformed_record_is_not_converged(tmp_path):
    """A record cut in two (as in a published log whose opt_name line is broken): the summarizer drops the run."""
    text = published_log("rgat", [(120.0, 0.701, 1), (240.5, 0.7214, 2)], stop_s=241.0)
    log = write(tmp_path, "v5.0", "rgat", text.replace('"value": "adam", ', '"value": "adam"Acme', 1))
    rc, r = timed(log, tmp_path)
    assert rc == 3 and "its log has 1 malformed record(s)" in r.message and not r.mlperf.reached
    agree(log, "v5.0", r)


def test_an_initialization_over_the_rounds_limit_is_not_converged(tmp_path):
    """32.3 minutes from init_start to init_stop in the closed division (30 allowed since v1.0): MLPerf's checker
    rejects the run and its summarizer counts it as not converged; so does daybreak."""
    log = write(tmp_path, "v5.0", "rgat", published_log("rgat", [(120.0, 0.701, 1), (240.5, 0.7214, 2)],
                                                        stop_s=241.0, init_s=32.3 * 60))
    rc, r = timed(log, tmp_path)
    assert rc == 3 and not r.mlperf.reached and r.mlperf.init_limit_s == 1800.0
    assert "initialization took 32.3 minutes" in r.message and "not less than the 30 minutes" in r.message
    agree(log, "v5.0", r)


def test_the_round_from_the_log_or_the_command(tmp_path, capsys):
    text = published_log("rgat", [(120.0, 0.701, 1), (240.5, 0.7214, 2)], stop_s=241.0)
    log = tmp_path / "result_0.txt"
    log.write_text(text)
    # no round anywhere: R-GAT's rounds (v5.0, v5.1) agree on the log, read by the latest's rules, said so
    rc, r = timed(log, tmp_path)
    assert rc == 0 and r.mlperf.round == "v5.1" and any("names no round" in n for n in r.data_notes)
    rc, r = timed(log, tmp_path, "--round", "5.0")
    assert rc == 0 and (r.mlperf.round, r.mlperf.round_from) == ("v5.0", "--round")
    # 25 minutes of init: v0.7 allowed 20, later rounds 30, so a ResNet log must say its round
    resnet = tmp_path / "resnet.txt"
    resnet.write_text(published_log("resnet", [(120.0, 0.701, 4), (240.5, 0.7614, 8)], stop_s=241.0, init_s=25 * 60))
    capsys.readouterr()
    assert main(["time", "--rules", "mlperf", "--log", str(resnet), "--out", str(tmp_path / "x"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "names no round, and the rounds' rules disagree on it" in err and "give --round" in err
    assert single_line(err.strip())
    rc, r = timed(resnet, tmp_path, "--round", "v4.0")
    assert rc == 0 and r.metric == "top1" and r.target == 0.759


def test_the_round_hint_names_only_rounds_whose_target_fits(tmp_path, capsys):
    """A log that names no round, read differently by its benchmark's rounds: the hint names the rounds whose target
    fits where the run's evaluations stopped, never one under which the log is not reached for its target."""
    def refused(text: str) -> str:
        log = tmp_path / "result_0.txt"
        log.write_text(text)
        capsys.readouterr()
        assert main(["time", "--rules", "mlperf", "--log", str(log), "--out", str(tmp_path / "x"), "-q"]) == 2
        err = capsys.readouterr().err.strip()
        assert single_line(err) and "names no round, and the rounds' rules disagree on it" in err
        return err

    # SSD-ResNet34 (v0.7 to v1.1, mAP 0.23), stopped at 0.2305: the "ssd" folder's RetinaNet rounds (0.34) do not fit
    ssd = published_log("ssd", [(300.0, 0.2201, 40), (330.5, 0.2305, 45)], stop_s=331.0)
    err = refused(ssd)
    assert "v2.0 to v4.1: not reached" in err and "give --round, one of v0.7 to v1.1" in err and "v4.1)" not in err
    # v0.7 BERT (0.712 below a global batch of 8192), stopped at 0.7125: only v0.7 fits (v1.0 to v5.0: 0.720)
    bert = published_log("bert", [(900.0, 0.7093, 1), (1000.0, 0.7125, 2)], stop_s=1000.5)
    err = refused(bert)
    assert "give --round v0.7 (the round whose target, 71.2% masked-LM accuracy" in err and "v5.0" not in \
        err.split("give --round")[1]
    # a run that went on past every target (0.715 met v0.7's, 0.721 v1.0's, and it trained on): no round fits
    on = published_log("bert", [(900.0, 0.715, 1), (1000.0, 0.721, 2), (1100.0, 0.725, 3)], stop_s=1100.5,
                       init_s=25 * 60)
    assert "give --round: daybreak cannot tell which round's rules apply" in refused(on)
    # check-mllog, given no round either, checks the log by the latest round whose target fits (not v4.1's RetinaNet)
    (tmp_path / "result_0.txt").write_text(ssd)
    capsys.readouterr()
    main(["check-mllog", str(tmp_path / "result_0.txt"), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["ruleset"] == "1.1.0" and "whose target fits" in report["notes"][0]


@pytest.mark.parametrize("flags, message", [
    (["--task", "digits"], "--task digits, but the log is of MLPerf Training benchmark 'rgat' (R-GAT)"),
    (["--target", "0.9"], "--target: the target of MLPerf Training v5.0 rgat is 72% node classification accuracy"),
    (["--accuracy-unit", "percent"], "--accuracy-unit percent: the unit of rgat's node classification accuracy"),
    (["--round", "v4.0"], "MLPerf Training v4.0 has no benchmark 'rgat' (it ran in v5.0 to v5.1)"),
    (["--round", "latest"], "--round 'latest': give an MLPerf Training round"),
])
def test_mistakes_are_one_line(tmp_path, capsys, flags, message):
    log = write(tmp_path, "v5.0", "rgat", published_log("rgat", [(240.5, 0.7214, 2)], stop_s=241.0))
    assert main(["time", "--log", str(log), "--out", str(tmp_path / "x"), "-q", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("daybreak: error: ") and message in err and single_line(err.strip()), err


def test_a_log_of_no_known_benchmark_needs_a_task(tmp_path, capsys):
    log = tmp_path / "result_0.txt"
    log.write_text(published_log("rgat", [(240.5, 0.7214, 2)], stop_s=241.0).replace('"rgat"', '"my_gnn"'))
    assert main(["time", "--log", str(log), "--out", str(tmp_path / "x"), "-q"]) == 2
    assert "submission_benchmark 'my_gnn' is neither an MLPerf Training benchmark" in capsys.readouterr().err
    assert main(["time", "--task", "digits", "--target", "0.7", "--log", str(log), "--out", str(tmp_path / "y"),
                 "-q"]) == 0


# --- import-mlperf on a tree of these families ------------------------------------------------------------------
def test_import_scores_every_family_as_the_summarizer(tmp_path):
    """A v5.0 tree of Llama 2 70B LoRA (one run's initialization over the limit: counted as not converged, the
    slowest dropped) and Stable Diffusion (offline evaluations): each folder's score is the summarizer's, and the
    RCP check is mlperf-logging's own on the same files."""
    import shutil

    from mlperf_logging.rcp_checker import rcp_checker

    from daybreak.leaderboard.mlperf_import import import_mlperf
    from daybreak.leaderboard.store.database import Store

    lora = [700.0 + 13.5 * i for i in range(10)]
    sd = [100.0 + 7.25 * i for i in range(10)]
    for i, stop in enumerate(lora):
        write(tmp_path, "v5.0", "llama2_70b_lora", published_log(
            "llama2_70b_lora", [(stop - 300, 0.9385, 1536), (stop, 0.9246, 3072)], stop_s=stop,
            init_s=31 * 60 if i == 0 else 60.0), f"result_{i}.txt")
    for i, stop in enumerate(sd):
        write(tmp_path, "v5.0", "stable_diffusion", published_log(
            "stable_diffusion", [(600.0, {"FID": 93.1, "CLIP": 0.158}, 3584000),
                                 (650.0, {"FID": 79.4, "CLIP": 0.178}, 4096000)], stop_s=stop), f"result_{i}.txt")
    root = tmp_path / "training_results_v5.0"
    (root / "Acme" / "systems").mkdir()
    (root / "Acme" / "systems" / "acme_1x8.json").write_text(json.dumps({
        "submitter": "Acme", "division": "closed", "status": "available", "system_name": "acme_1x8",
        "number_of_nodes": "1", "accelerators_per_node": "8", "accelerator_model_name": "Acme X1",
        "host_processor_model_name": "Acme CPU", "framework": "PyTorch 2.6.0"}))
    with Store(f"sqlite:///{tmp_path / 'lb.sqlite'}") as store:
        _, report = import_mlperf(store, root)
        entries = {e.source.split("/")[-1]: e for e in store.entries()}
        for bench in ("llama2_70b_lora", "stable_diffusion"):
            folder = root / "Acme" / "results" / "acme_1x8" / bench
            with contextlib.redirect_stdout(io.StringIO()):
                minutes, _, _ = summarizer._compute_strong_score_standalone(bench, "acme_1x8", False, str(folder),
                                                                             "training", "5.0.0")
            e = entries[bench]
            assert e.task == benchmark_of(bench, "v5.0").board and e.time_to_target_s == pytest.approx(minutes * 60)
            copy = tmp_path / "rcp" / bench
            shutil.copytree(folder, copy)
            passed, message, norm = rcp_checker.check_directory(str(copy), "training", "5.0.0", False, False,
                                                                rcp_pass="pruned_rcps", set_scaling=True)
            assert e.document["rcp"] == {"passed": passed, "message": message, "normalization": norm}
            assert "RCP check" in e.provenance_detail and not (folder / "scaling.json").exists()
            assert any(n.startswith("timed by the rules of MLPerf Training v5.0") for n in e.notes)
        lora_entry = entries["llama2_70b_lora"]
        assert lora_entry.metric == "eval_loss" and lora_entry.accuracy == 0.9246 and lora_entry.runs_reached == 9
        assert any("result_0.txt did not converge: its initialization took 31.0 minutes" in n for n in lora_entry.notes)
        assert entries["stable_diffusion"].metric == "fid+clip" and entries["stable_diffusion"].accuracy == 79.4


def test_import_scores_an_nvidia_stable_diffusion_v31_folder_as_the_summarizer(tmp_path):
    """A v3.1 folder of ten NVIDIA-format Stable Diffusion logs (step_num only, FIDs before CLIPs): every run
    converged and the folder's score is the summarizer's (it was left unscored: '10 of 10 runs did not converge')."""
    from daybreak.leaderboard.mlperf_import import import_mlperf
    from daybreak.leaderboard.store.database import Store

    stops = [2806.8 + 37.25 * i for i in range(10)]
    for i, stop in enumerate(stops):
        write(tmp_path, "v3.1", "stable_diffusion", nvidia_sd_log(SD_CHECKPOINTS, stop_s=stop, stop_step=2000),
              f"result_{i}.txt")
    root = tmp_path / "training_results_v3.1"
    (root / "Acme" / "systems").mkdir()
    (root / "Acme" / "systems" / "acme_1x8.json").write_text(json.dumps({
        "submitter": "Acme", "division": "closed", "status": "available", "system_name": "acme_1x8",
        "number_of_nodes": "1", "accelerators_per_node": "8", "accelerator_model_name": "Acme X1",
        "framework": "NeMo 23.09"}))
    folder = root / "Acme" / "results" / "acme_1x8" / "stable_diffusion"
    with contextlib.redirect_stdout(io.StringIO()):
        minutes, _, _ = summarizer._compute_strong_score_standalone("stable_diffusion", "acme_1x8", False, str(folder),
                                                                     "training", "3.1.0")
    with Store(f"sqlite:///{tmp_path / 'lb.sqlite'}") as store:
        import_mlperf(store, root)
        (entry,) = store.entries()
    assert entry.runs_reached == 10 and entry.time_to_target_s == pytest.approx(minutes * 60, abs=1e-6)
    assert entry.time_to_target_s == pytest.approx(sum(sorted(stops)[1:-1]) / 8, abs=1e-6)
    assert entry.accuracy == 79.34  # the FID of the first checkpoint that met both (step 2000; 2250 met them too)


def test_check_mllog_runs_the_rounds_own_checker_on_an_mlperf_log(tmp_path, capsys):
    good = write(tmp_path, "v5.0", "llama2_70b_lora", published_log(
        "llama2_70b_lora", [(363.48, 0.9385, 1536), (760.315, 0.9246, 3072)], stop_s=760.315))
    assert main(["check-mllog", str(good)]) == 0
    assert "llama2_70b_lora PASSES mlperf-logging's compliance checker, ruleset 5.0.0" in capsys.readouterr().out
    below = write(tmp_path, "v5.0", "llama2_70b_lora", published_log(
        "llama2_70b_lora", [(363.48, 0.9385, 1536)], stop_s=400.0, status="aborted"), "result_1.txt")
    assert main(["check-mllog", str(below), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert not report["passed"] and any("(v['value'] <= 0.925)" in m for m in report["messages"])
    assert main(["check-mllog", str(tmp_path / "nothing")]) == 2
    assert "no such file or run directory" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["leaderboard", "import-mlperf"], ["time"], ["check-mllog"]])
def test_help_texts_list_the_rounds_of_the_table(command, capsys):
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"{ROUNDS[0]} to {ROUNDS[-1]}" in text and "v5.1)" not in text
