"""Clock rule sets (daybreak.rules) on synthetic timelines, and `daybreak run`'s records, views and mllog under both.

Every expected figure here is recomputed independently from the raw phase intervals or from the mllog's own
timestamps (plain arithmetic, not daybreak.rules), so a wrong rule cannot agree with itself.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlperf_logging.compliance_checker.mlp_parser import ruleset_610 as mlp_parser

from daybreak.cli import main
from daybreak.errors import ConfigError
from daybreak.records.run import RunResult
from daybreak.rules import DAWNBENCH, MLPERF, RULE_SETS, Interval, read_clock, rules_table_markdown
from daybreak.options import parse_target
from daybreak.train.runner import RunConfig, run

from conftest import single_line
from mlperf_compliance import RULESET, compliance_messages


# --- rule sets on synthetic event sequences -----------------------------------------------------------------------

def _timeline(*spec):
    return [Interval(p, a, b) for p, a, b in spec]


LOAD_FIRST = _timeline(("data_load", 1.0, 3.0), ("model_init", 3.0, 4.0), ("warmup", 4.0, 9.0),
                       ("train", 9.0, 19.0), ("eval", 19.0, 21.0), ("record", 21.0, 21.5),
                       ("train", 21.5, 31.5), ("eval", 31.5, 33.5), ("record", 33.5, 34.0))
INIT_FIRST = _timeline(("model_init", 0.0, 2.0), ("warmup", 2.0, 7.0), ("data_load", 7.0, 8.0),
                       ("train", 8.0, 18.0), ("eval", 18.0, 20.0), ("record", 20.0, 20.5),
                       ("train", 20.5, 30.5), ("eval", 30.5, 32.5))


def test_dawnbench_counts_load_init_warmup_and_training_not_eval_or_records():
    r = read_clock(DAWNBENCH, LOAD_FIRST, 33.5)  # the end of the 2nd evaluation
    # 2 load + 1 init + 5 warm-up + 10 + 10 training = 28; evals (4) and the record write (0.5) are out
    assert r.seconds == pytest.approx(28.0) and r.start_s == 1.0
    assert r.excluded_s == pytest.approx({"eval": 4.0, "record": 0.5})
    # the same on a timeline that initializes first: DAWNBench counts init wherever it happens
    assert read_clock(DAWNBENCH, INIT_FIRST, 32.5).seconds == pytest.approx(2 + 5 + 1 + 10 + 10)


def test_mlperf_starts_at_the_first_touch_of_the_data_and_never_pauses():
    # init before the data: excluded; from the load on everything counts (evals and record writes too)
    r = read_clock(MLPERF, INIT_FIRST, 32.5)
    assert r.start_s == 7.0 and r.seconds == pytest.approx(32.5 - 7.0) and r.excluded_s == {} and not r.notes
    # init after the data was touched cannot be excluded: the clock may not pause
    r = read_clock(MLPERF, LOAD_FIRST, 33.5)
    assert r.start_s == 1.0 and r.seconds == pytest.approx(32.5)
    assert any("may not pause" in n for n in r.notes)


def test_mlperf_excludes_at_most_30_minutes_of_initialization():
    # the closed division's limit since v2.0 (20 minutes in v0.7): 35 minutes of init put 5 on the clock
    long_init = _timeline(("model_init", 0.0, 2100.0), ("data_load", 2100.0, 2101.0), ("train", 2101.0, 2200.0),
                          ("eval", 2200.0, 2201.0))
    r = read_clock(MLPERF, long_init, 2201.0)
    assert r.start_s == 1800.0 and r.seconds == pytest.approx(401.0) and "2100.0 s" in r.notes[0]


def test_every_phase_of_every_rule_set_has_a_rule_and_a_source():
    for rules in RULE_SETS.values():
        assert set(rules.inside) == set(rules.sources) == {"data_load", "model_init", "warmup", "train", "eval",
                                                           "record"}
        assert all(len(src) > 20 for src in rules.sources.values())
    table = rules_table_markdown()
    assert "| evaluation | out | in |" in table and "| data loading | in | in |" in table


def test_an_interval_that_ends_before_it_starts_is_refused():
    with pytest.raises(ValueError):
        Interval("train", 2.0, 1.0)
    with pytest.raises(ValueError):
        Interval("lunch", 0.0, 1.0)


# --- --target -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,value", [("0.97", 0.97), ("1", 1.0), ("97%", 0.97), (" 94.5% ", 0.945), ("100%", 1.0)])
def test_target_syntax(text, value):
    assert parse_target(text) == pytest.approx(value)


@pytest.mark.parametrize("text,fragment", [("1.5", "1.5%"), ("97", "97%"), ("0", "(0, 1]"), ("-0.5", "(0, 1]"),
                                           ("nan", "(0, 1]"), ("150%", "100%"), ("abc", "fraction"), ("0%", "100%")])
def test_ambiguous_or_impossible_targets_are_one_line_errors(text, fragment, capsys):
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        RunConfig(target=text)
    assert main(["run", "--target", text, "-q"]) == 2
    assert single_line(capsys.readouterr().err)


# --- a real run: record, views and mllog ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("rules") / "digits"
    return out, run(RunConfig(out=out, quiet=True, cost_per_hour=3.6))


def _sum(phases, name, upto):
    return sum(min(p.end_s, upto) - p.start_s for p in phases if p.phase == name and p.start_s < upto)


def test_the_record_holds_raw_phases_and_both_figures(digits_run):
    out, r = digits_run
    assert r.status == "reached" and r.rules == "dawnbench"
    phases = r.phases
    # MLPerf's order: the model is built and warmed up on synthetic tensors before the data is touched
    assert [p.phase for p in phases[:3]] == ["model_init", "warmup", "data_load"]
    assert all(b.start_s >= a.end_s for a, b in zip(phases, phases[1:]))  # in order, never overlapping
    target_eval_end = [p for p in phases if p.phase == "eval"][len(r.history) - 1].end_s
    start = phases[0].start_s
    dawn = target_eval_end - start - _sum(phases, "eval", target_eval_end) - _sum(phases, "record", target_eval_end)
    assert r.clocks["dawnbench"].time_to_target_s == pytest.approx(dawn, abs=1e-6)
    first_touch = phases[2].start_s  # MLPerf's clock starts at the data, so the init before it is outside
    assert r.clocks["mlperf"].start_s == first_touch and r.clocks["dawnbench"].start_s == start
    assert r.clocks["mlperf"].time_to_target_s == pytest.approx(target_eval_end - first_touch, abs=1e-6)
    # the headline follows the named rule set; cost = headline hours x price
    assert r.time_to_target_s == r.clocks["dawnbench"].time_to_target_s == r.history[-1].elapsed_s
    assert r.cost_usd == pytest.approx(r.time_to_target_s / 3600 * 3.6, rel=1e-12)
    # DAWNBench counts init: on digits it is most of the time; MLPerf's clock does not
    assert r.clocks["dawnbench"].time_to_target_s > _sum(phases, "train", target_eval_end)
    assert r.clocks["mlperf"].notes == [] and r.performance.init_before_data
    # effective values and context
    assert r.steps_per_epoch == 1347 // 64 and r.effective_batch_size == 64 and r.train_examples == 1347
    c = r.context
    assert c.threads_used >= 1 and c.packages["torch"] and c.load_avg_before is not None
    assert c.other_cpu_s is not None and 0.0 <= c.busy_fraction <= 1.0
    assert c.recipe_file.endswith("digits.py") and len(c.recipe_sha256) == 64
    assert RunResult.load(out) == r


def test_the_mllog_reproduces_both_figures_within_a_millisecond(digits_run):
    out, r = digits_run
    lines, errors = mlp_parser.parse_file(str(out / "mllog.log"))
    assert errors == []
    t = {}
    intervals = {"eval": [], "record": []}
    open_ = {}
    for ll in lines:
        key, kind, ms = ll.key, json.loads(ll.full_string.split(" ", 1)[1])["event_type"], ll.timestamp
        if key in ("init_start", "run_start", "run_stop"):
            t[key] = ms
        for name, (a, b) in {"eval": ("eval_start", "eval_stop"), "record": ("record", "record")}.items():
            if key == a and kind == "INTERVAL_START":
                open_[name] = ms
            elif key == b and kind == "INTERVAL_END":
                intervals[name].append((open_.pop(name), ms))
    stop = t["run_stop"]
    mlperf_ms = stop - t["run_start"]
    # DAWNBench counts from init_start (model init and warm-up come before the data), less evals and records
    dawn_ms = stop - t["init_start"] - sum(min(b, stop) - a for a, b in intervals["eval"] + intervals["record"]
                                           if a < stop)
    assert abs(mlperf_ms / 1000 - r.clocks["mlperf"].time_to_target_s) < 1e-3
    assert abs(dawn_ms / 1000 - r.clocks["dawnbench"].time_to_target_s) < 1e-3
    # run_stop is the end of the evaluation that reached the target: the record write after it is not timed
    assert stop == intervals["eval"][-1][1]


def test_the_mllog_is_truthful_and_passes_the_compliance_checker(digits_run, tmp_path):
    out, r = digits_run
    lines, _ = mlp_parser.parse_file(str(out / "mllog.log"))
    values = {ll.key: ll.value["value"] for ll in lines}
    keys = [ll.key for ll in lines]
    assert values["submission_benchmark"] == "daybreak_digits"  # not an MLPerf benchmark: no MLPerf name
    assert values["submission_division"] == "closed" and keys.index("submission_division") < keys.index("init_stop")
    for key in ("cache_clear", "train_samples", "eval_samples", "gradient_accumulation_steps"):
        assert key in values, key
    assert values["train_samples"] == 1347 and values["eval_samples"] == 450 and values["eval_metric"] == "top1"
    assert compliance_messages(out / "mllog.log", tmp_path / "checker") == []
    # mlperf-logging's own command, with the checker configuration daybreak wrote for its tasks
    proc = subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "training",
                           "--ruleset", RULESET, "--config", str(tmp_path / "checker" / "common.yaml"),
                           "--log_output", str(tmp_path / "checker.log"), str(out / "mllog.log")],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout + proc.stderr
    # the task's checks are real: a log that never reaches digits' 98% fails, as does one declaring another task
    text = (out / "mllog.log").read_text()
    below = tmp_path / "below.log"
    below.write_text(re.sub(r'("key": "eval_accuracy", "value": )[0-9.]+', r"\g<1>0.5", text))
    assert [m for m in compliance_messages(below, tmp_path / "checker") if "eval_accuracy" in m]
    other = tmp_path / "other.log"
    other.write_text(text.replace('"daybreak_digits"', '"daybreak_mnist"'))
    assert [m for m in compliance_messages(other, tmp_path / "checker") if "target_accuracy" in m]
    assert main(["check-mllog", str(out)]) == 0


def test_custom_data_logs_the_open_division(tmp_path):
    from daybreak.data.synthetic import write_mnist

    write_mnist(tmp_path / "m", 300, 100)
    r = run(RunConfig(task="mnist", data_dir=tmp_path / "m", allow_custom_data=True, out=tmp_path / "r", quiet=True,
                      overrides={"epochs": 1}))
    assert not r.official
    lines, _ = mlp_parser.parse_file(str(tmp_path / "r" / "mllog.log"))
    assert [ll.value["value"] for ll in lines if ll.key == "submission_division"] == ["open"]
    assert compliance_messages(tmp_path / "r" / "mllog.log", tmp_path / "checker") == []
    assert main(["check-mllog", str(tmp_path / "r")]) == 0


def test_dawnbench_view_uses_dawnbench_rules_under_an_mlperf_headline(tmp_path):
    r = run(RunConfig(out=tmp_path / "r", quiet=True, rules="mlperf"))
    tsv = (tmp_path / "r" / "dawnbench.tsv").read_text().splitlines()[1:]
    assert [float(row.split("\t")[1]) * 3600 for row in tsv] == pytest.approx(
        [h.clock_s["dawnbench"] for h in r.history], abs=2e-5)
    misc = json.loads((tmp_path / "r" / "dawnbench.json").read_text())["misc"]
    assert misc["clockRules"] == "dawnbench" and misc["headlineRules"] == "mlperf"
    assert misc["timeToTargetSeconds"]["mlperf"] == r.time_to_target_s


def test_summary_prints_both_figures(digits_run, capsys):
    out, r = digits_run
    assert main(["show", str(out)]) == 0
    text = capsys.readouterr().out
    assert "DAWNBench v1" in text and "MLPerf Training" in text
    assert f"{r.clocks['mlperf'].time_to_target_s:.3f} s" in text
    assert f"{r.clocks['dawnbench'].time_to_target_s:.3f} s" in text


def test_effective_batch_and_steps_are_what_the_data_source_used(tmp_path):
    r = run(RunConfig(out=tmp_path / "r", quiet=True, full_schedule=True, overrides={"batch_size": 4096, "epochs": 1}))
    assert r.effective_batch_size == 1347 and r.steps_per_epoch == 1 and r.global_batch_size == 1347
    assert any("smaller than one batch" in w for w in r.warnings)


def test_rules_flag_and_count_eval_alias(tmp_path, capsys):
    assert main(["run", "--rules", "mlperf", "--out", str(tmp_path / "a"), "-q"]) == 0
    assert RunResult.load(tmp_path / "a").rules == "mlperf"
    assert main(["run", "--count-eval", "--out", str(tmp_path / "b"), "-q"]) == 0
    assert RunResult.load(tmp_path / "b").rules == "mlperf"
    assert "--count-eval is deprecated" in capsys.readouterr().err
    assert main(["run", "--count-eval", "--rules", "dawnbench", "--out", str(tmp_path / "c"), "-q"]) == 2
    assert single_line(capsys.readouterr().err)


# --- signals and failed starts -------------------------------------------------------------------------------------

def test_sigterm_is_recorded_like_ctrl_c(tmp_path):
    out = tmp_path / "r"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "daybreak", "run", "--set", "epochs=400", "--full-schedule",
                             "--out", str(out), "-q"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until it trains (an evaluation is recorded)
        try:
            if RunResult.load(out).history:
                break
        except Exception:  # noqa: BLE001 - not written yet
            pass
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    r = RunResult.load(out)
    assert r.status == "interrupted" and "SIGTERM" in r.message and r.finished_at is not None
    lines, errors = mlp_parser.parse_file(str(out / "mllog.log"))
    assert errors == [] and [ll.value["metadata"]["status"] for ll in lines if ll.key == "run_stop"] == ["aborted"]


def test_a_failed_start_does_not_poison_out(tmp_path, capsys):
    out = tmp_path / "r"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["run", "mnist", "--data-dir", str(empty), "--no-download", "--out", str(out), "-q"]) == 2
    assert single_line(capsys.readouterr().err)
    assert RunResult.load(out).status == "failed"  # recorded, nothing lost
    # the suggested fix with the same --out works, and replaces the failed record
    from daybreak.data.synthetic import write_mnist

    write_mnist(empty, 300, 100)
    assert main(["run", "mnist", "--data-dir", str(empty), "--allow-custom-data", "--set", "epochs=1",
                 "--out", str(out), "-q"]) in (0, 3)
    assert RunResult.load(out).history
    # a run that trained is never overwritten
    assert main(["run", "--out", str(out), "-q"]) == 2
    assert "not empty" in capsys.readouterr().err


def test_out_that_cannot_be_created_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["run", "--out", str(blocker / "sub"), "-q"]) == 2
    assert single_line(capsys.readouterr().err)
    assert main(["run", "--out", "/proc/x", "-q"]) == 2
    assert single_line(capsys.readouterr().err)


# --- compile outside the training phase ----------------------------------------------------------------------------

@pytest.mark.slow
def test_compile_happens_in_warm_up_with_no_recompilation_under_the_clock(tmp_path):
    import torch._dynamo

    from daybreak.train.warmup import compile_count

    torch._dynamo.reset()  # an earlier test in this process may have compiled the same frames at the same shapes
    before = compile_count()
    r = run(RunConfig(out=tmp_path / "r", quiet=True, compile=True))
    assert r.status == "reached" and r.recompiles_under_clock == 0
    # dynamo compiled frames in this run, none of them after the warm-up: every compilation was in the warm-up
    # (how long it took depends on the compile caches, so no time is compared)
    assert compile_count() > before
    assert [p.phase for p in r.phases[:3]] == ["model_init", "warmup", "data_load"]


def test_daybreak_time_on_the_runs_own_mllog_gives_the_same_figures(digits_run, tmp_path):
    out, r = digits_run
    for rules in ("dawnbench", "mlperf"):
        # no --task: the log's submission_benchmark (daybreak_digits) names it
        assert main(["time", "--log", str(out / "mllog.log"), "--rules", rules,
                     "--out", str(tmp_path / rules), "-q"]) == 0
        t = RunResult.load(tmp_path / rules)
        assert t.rules == rules and t.task == "digits" and t.mlperf is None
        for name in ("dawnbench", "mlperf"):
            assert abs(t.clocks[name].time_to_target_s - r.clocks[name].time_to_target_s) < 1e-3, name


@pytest.mark.parametrize("command", [["repeat", "digits", "--runs", "3", "--set", "epochs=300", "--full-schedule"],
                                     ["throughput", "--model", "digits_cnn", "--batch-sizes", "8,16,32,64",
                                      "--steps", "400", "--repeats", "7", "-q"]])
def test_sigterm_ends_other_commands_like_ctrl_c(command, tmp_path):
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "daybreak", *command, "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    wanted = "result.json" if command[0] == "repeat" else "*.json*"  # repeat: a trial's run directory exists
    while time.monotonic() < deadline and not (out.exists() and any(out.rglob(wanted))):
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    if command[0] == "repeat":
        statuses = [RunResult.load(p.parent).status for p in out.rglob("result.json")]
        assert "interrupted" in statuses
