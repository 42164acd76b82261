"""`daybreak time`: timing external programs from their MLPerf log stream (issue 9)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from daybreak.cli import main
from daybreak.external.mllog_analysis import analyze
from daybreak.external.mllog_clock import Tolerance, parse_tolerance
from daybreak.external.mllog_reader import MllogEvent, TargetWatch, parse_line, parse_log
from daybreak.external.mllog_verdict import ProgramEnd, verdict
from daybreak.errors import ConfigError
from daybreak.records.run import RunResult

REPO = Path(__file__).resolve().parents[1]

# --- helpers -----------------------------------------------------------------------------------------------
PRELUDE = '''\
import json, os, signal, subprocess, sys, time
T0 = int(time.time() * 1000)

def log(key, value=None, dt=None, etype="POINT_IN_TIME", stream=None, prefix="", **md):
    """One mllog record; dt: milliseconds after T0 (default: the real clock)."""
    t = int(time.time() * 1000) if dt is None else T0 + dt
    rec = {"namespace": "", "time_ms": t, "event_type": etype, "key": key, "value": value, "metadata": md}
    s = stream or sys.stdout
    s.write(prefix + ":::MLLOG " + json.dumps(rec) + "\\n")
    s.flush()
'''


def write_child(tmp_path: Path, body: str, name: str = "child.py") -> Path:
    path = tmp_path / name
    path.write_text(PRELUDE + textwrap.dedent(body), encoding="utf-8")
    return path


def time_cli(tmp_path: Path, script: Path, *flags: str, out: str = "run") -> tuple[int, Path]:
    run_dir = tmp_path / out
    rc = main(["time", "--task", "digits", "--out", str(run_dir), "-q", *flags, "--", sys.executable, str(script)])
    return rc, run_dir


def load(run_dir: Path) -> tuple[RunResult, dict]:
    return RunResult.load(run_dir), json.loads((run_dir / "external.json").read_text())


def tsv_rows(run_dir: Path) -> list[list[str]]:
    return [line.split("\t") for line in (run_dir / "dawnbench.tsv").read_text().splitlines()]


def ev(key: str, t: float, value=None, lineno: int = 0, wall: float | None = None, **md) -> MllogEvent:
    return MllogEvent(key=key, value=value, time_ms=t, event_type="POINT_IN_TIME", metadata=md, namespace="",
                      lineno=lineno, text="", wall=wall)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# A program that reaches the target: run_start at +100 ms, evals at +600 (50%) and +1050 (99%), each eval
# interval 100 ms; the second eval logs its accuracy inside its interval (before eval_stop).
REACHING = '''
log("submission_org", "acme")
log("framework", "TinyFlow 0.3")
log("model", "mlp-2")
log("global_batch_size", 32)
log("seed", 7)
log("init_start", dt=0, etype="INTERVAL_START")
print("loading data...", flush=True)
log("init_stop", dt=100, etype="INTERVAL_END")
log("run_start", dt=100, etype="INTERVAL_START")
log("eval_start", dt=500, etype="INTERVAL_START", epoch_num=1)
log("eval_stop", dt=600, etype="INTERVAL_END", epoch_num=1)
log("eval_accuracy", 0.5, dt=600, epoch_num=1)
print("epoch 1 done", file=sys.stderr, flush=True)
log("eval_start", dt=1000, etype="INTERVAL_START", epoch_num=2)
log("eval_accuracy", 0.99, dt=1050, epoch_num=2, prefix="[rank0] ")
log("eval_stop", dt=1100, etype="INTERVAL_END", epoch_num=2)
log("run_stop", dt=1150, etype="INTERVAL_END", status="success")
'''


# --- parsing -----------------------------------------------------------------------------------------------
def test_parse_line_finds_records_anywhere_and_reports_malformed():
    rec = {"namespace": "", "time_ms": 1000, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", "value": 0.5,
           "metadata": {"epoch_num": 1}}
    events, bad = parse_line("[1,0]<stdout>: :::MLLOG " + json.dumps(rec), 3, wall=12.5)
    assert not bad and len(events) == 1
    e = events[0]
    assert (e.key, e.value, e.time_ms, e.metadata, e.lineno, e.wall) == ("eval_accuracy", 0.5, 1000, {"epoch_num": 1},
                                                                          3, 12.5)
    assert e.text == ":::MLLOG " + json.dumps(rec)

    two = ":::MLLOG " + json.dumps({**rec, "time_ms": 1}) + " :::MLLOG " + json.dumps({**rec, "time_ms": 2})
    assert [e.time_ms for e in parse_line(two, 1)[0]] == [1, 2]
    assert parse_line("no token here", 1) == ([], [])

    cases = {
        ":::MLLOG {not json": "invalid JSON",
        ":::MLLOG [1, 2]": "not a JSON object",
        ':::MLLOG {"time_ms": 5, "value": 1}': "no string 'key'",
        ':::MLLOG {"key": "run_start", "time_ms": "soon"}': "'time_ms' is not a number",
        ':::MLLOG {"key": "eval_accuracy", "time_ms": 5, "value": "high"}': "eval_accuracy value",
        ':::MLLOG {"key": "eval_accuracy", "time_ms": 5, "value": 250}': "eval_accuracy value",
        ':::MLLOG {"key": "eval_accuracy", "time_ms": 5, "value": NaN}': "eval_accuracy value",
        ':::MLLOG {"key": "run_start", "time_ms": 5} trailing': "text after the JSON",
    }
    for line, reason in cases.items():
        events, bad = parse_line(line, 9)
        assert events == [] and len(bad) == 1 and bad[0].lineno == 9 and reason in bad[0].reason, line
    # lenient where mlperf's logger output is not at stake: no value/metadata, numeric-string time_ms
    events, bad = parse_line(':::MLLOG {"key": "run_start", "time_ms": "1234.5"}', 1)
    assert not bad and events[0].time_ms == 1234.5 and events[0].metadata == {} and events[0].value is None
    # a metadata that is not an object carries none, as mlperf-logging's parser allows ("" in HugeCTR's logs)
    events, bad = parse_line(':::MLLOG {"key": "run_start", "time_ms": 5, "metadata": ""}', 1)
    assert not bad and events[0].metadata == {}


RECORD = {"namespace": "", "time_ms": 1000, "event_type": "POINT_IN_TIME", "key": "seed", "value": 7,
          "metadata": {"file": "train.py", "lineno": 1}}


def _line(**change) -> str:
    return ":::MLLOG " + json.dumps({k: v for k, v in {**RECORD, **change}.items() if v is not _DROP})


_DROP = object()


@pytest.mark.parametrize("line", [
    _line(),
    _line(metadata=""),  # NVIDIA's v6.0 HugeCTR header records
    _line(metadata=None), _line(metadata=[1, 2]), _line(metadata=3),
    _line(metadata=_DROP), _line(value=_DROP), _line(key=_DROP), _line(time_ms=_DROP),
    _line(time_ms="1234.5"), _line(time_ms="soon"), _line(time_ms=None), _line(time_ms=[1]),
    _line(key=5), _line(key="eval_accuracy", value="high"), _line(key="eval_accuracy", value={"BBOX": 0.4}),
    _line() + " trailing", "[1,0]<stdout>: " + _line(), ":::MLLOG {not json", ":::MLLOG [1, 2]", ":::MLLOG 5",
    ':::MLLOG {"key": "run_start", "time_ms": 1' + " " + _line(time_ms=2),  # a record cut off by another
    _line(time_ms=1) + " " + _line(time_ms=2),  # two whole records on one line: mlperf reads the last
    ":::MLLOG" + json.dumps(RECORD), ":::MLLOG\t" + json.dumps(RECORD),  # no space after the token: no record
    _line() + "\rprogress 50%", "progress 50%\r" + _line(time_ms=3),  # a carriage return ends a line
    _line(time_ms=4) + "\r\n",
])
def test_an_mlperf_log_is_read_as_mlperf_loggings_parser_reads_it(tmp_path, line):
    """Malformed exactly where mlperf-logging's parser fails on a record (its 'failed' lines, or an exception:
    its summarizer then reads nothing of the log); where it reads one, the same key, time and value."""
    from mlperf_logging.compliance_checker import mlp_parser

    path = tmp_path / "result_0.txt"
    path.write_bytes(line.encode() + b"\n")
    try:
        loglines, failed = mlp_parser.parse_file(str(path), ruleset="6.0.0")
        parses = not failed
    except (KeyError, TypeError):
        loglines, parses = [], False
    for rules in ("0.7.0", "3.1.0"):  # the same reading in every round
        try:
            older = mlp_parser.parse_file(str(path), ruleset=rules)
            assert [(x.key, x.timestamp) for x in older[0]] == [(x.key, x.timestamp) for x in loglines]
        except (KeyError, TypeError):
            assert not parses
    events, bad = parse_log(path.read_bytes(), mlperf=True)
    assert (not bad) == parses, (line, bad)
    if parses:
        wanted = [(x.key, x.timestamp, x.value["value"]) for x in loglines if isinstance(x.key, str) and x.key]
        assert [(e.key, e.time_ms, e.value) for e in events] == wanted


def test_parse_tolerance():
    assert parse_tolerance("5%+2s") == Tolerance(0.05, 2.0)
    assert parse_tolerance(" 2.5% + 0.5s ") == Tolerance(0.025, 0.5)
    assert parse_tolerance("10%") == Tolerance(0.10, 0.0)
    assert parse_tolerance("3s") == Tolerance(0.0, 3.0)
    assert Tolerance().allowed(100.0) == pytest.approx(7.0)
    for bad in ("", "fast", "5", "-1s", "5%%"):
        with pytest.raises(ConfigError):
            parse_tolerance(bad)


# --- the time-to-target rules (pure) -----------------------------------------------------------------------
def _timeline():
    return [
        ev("init_start", 0), ev("init_stop", 2000), ev("run_start", 2000),
        ev("eval_start", 12000), ev("eval_stop", 13000), ev("eval_accuracy", 12999, 0.80, epoch_num=1),
        ev("eval_start", 23000), ev("eval_accuracy", 23500, 0.95, epoch_num=2), ev("eval_stop", 24000),
        ev("eval_start", 34000), ev("eval_stop", 35000), ev("eval_accuracy", 35000, 0.97, epoch_num=3),
        ev("run_stop", 35500, status="success"),
    ]


def test_analyze_dawnbench_counts_init_and_excludes_eval_intervals():
    a = analyze(_timeline(), target=0.95)
    assert a.rules == "dawnbench" and a.init_s == 2.0
    assert [e.epoch for e in a.evaluations] == [1, 2, 3]
    # clock: time since init_start minus completed evaluations (and the target eval's own interval)
    # eval 1: 12.999 - 0 (init_start) - 0.999 (its interval up to the accuracy's timestamp)
    assert [e.elapsed_s for e in a.evaluations] == pytest.approx([12.0, 22.0, 32.0])
    assert [e.eval_s for e in a.evaluations] == pytest.approx([0.999, 1.001, 1.0])
    assert a.reached and a.target_eval.index == 2
    assert a.time_to_target_s == pytest.approx(22.0)  # 24 (eval 2's eval_stop) - 0 (init_start) - 2 x 1.0 (evals)
    assert a.train_s == pytest.approx(20.0) and a.eval_s == pytest.approx(2.0)
    assert a.clocks["dawnbench"].excluded_s == {"eval": pytest.approx(2.0)}
    assert [(i.phase, i.start_s, i.end_s) for i in a.timeline[:3]] == [("model_init", 0.0, 2.0), ("train", 2.0, 12.0),
                                                                       ("eval", 12.0, 13.0)]
    assert a.warnings == []


def test_analyze_mlperf_counts_evaluation_from_run_start():
    a = analyze(_timeline(), target=0.95, rules="mlperf")
    # the target evaluation is not the run's last, so the clock stops at its end, not at run_stop
    assert a.time_to_target_s == pytest.approx(22.0)  # eval_stop at 24000 - run_start at 2000
    assert [e.elapsed_s for e in a.evaluations] == pytest.approx([10.999, 22.0, 33.0])
    assert [e.clock_s["dawnbench"] for e in a.evaluations] == pytest.approx([12.0, 22.0, 32.0])
    assert a.clocks["mlperf"].start_s == 2.0 and a.clocks["mlperf"].excluded_s == {}


# init 10 s, then a run with three evaluations of 2 s each; the third reaches the target; run_stop 250 ms later
T0_MS = 1_712_345_678_901
SYNTHETIC = [
    ("init_start", 0, None, {}), ("init_stop", 10_000, None, {}), ("run_start", 10_000, None, {}),
    ("eval_start", 30_000, None, {"epoch_num": 1}), ("eval_stop", 32_000, None, {"epoch_num": 1}),
    ("eval_accuracy", 32_000, 0.90, {"epoch_num": 1}),
    ("eval_start", 52_000, None, {"epoch_num": 2}), ("eval_stop", 54_000, None, {"epoch_num": 2}),
    ("eval_accuracy", 54_000, 0.95, {"epoch_num": 2}),
    ("eval_start", 74_000, None, {"epoch_num": 3}), ("eval_stop", 76_000, None, {"epoch_num": 3}),
    ("eval_accuracy", 76_000, 0.985, {"epoch_num": 3}),
    ("run_stop", 76_253, None, {"status": "success"}),
]


def mllog_text(records, t0_ms: int = T0_MS) -> str:
    """MLPerf result-log lines as mlperf-logging writes them: (key, ms after t0, value, metadata)."""
    kinds = {"start": "INTERVAL_START", "stop": "INTERVAL_END"}
    out = []
    for key, dt_ms, value, md in records:
        rec = {"namespace": "", "time_ms": t0_ms + dt_ms, "event_type": kinds.get(key.rsplit("_", 1)[-1],
               "POINT_IN_TIME"), "key": key, "value": value, "metadata": {"file": "train.py", "lineno": 7, **md}}
        out.append(":::MLLOG " + json.dumps(rec))
    return "\n".join(out) + "\n"


def parsed(text: str) -> list[MllogEvent]:
    return [e for n, line in enumerate(text.splitlines(), 1) for e in parse_line(line, n)[0]]


def test_rule_sets_on_a_synthetic_run():
    events = parsed(mllog_text(SYNTHETIC))
    run_start_ms, run_stop_ms = T0_MS + 10_000, T0_MS + 76_253
    mlperf = analyze(events, target=0.98, rules="mlperf")
    dawnbench = analyze(events, target=0.98, rules="dawnbench")
    # MLPerf's own result, exactly: run_stop - run_start (the run stopped, successfully, after its target eval)
    assert mlperf.time_to_target_s == (run_stop_ms - run_start_ms) / 1000.0 == 66.253
    # DAWNBench: init_start to the end of the target evaluation, less the three 2 s evaluations
    assert dawnbench.time_to_target_s == 76.0 - 0.0 - 3 * 2.0 == 70.0
    for a in (mlperf, dawnbench):  # both clocks are computed whatever the headline
        assert {n: c.target_s for n, c in a.clocks.items()} == {"dawnbench": 70.0, "mlperf": 66.253}
        assert [e.clock_s for e in a.evaluations] == [{"dawnbench": 30.0, "mlperf": 22.0},
                                                      {"dawnbench": 50.0, "mlperf": 44.0},
                                                      {"dawnbench": 70.0, "mlperf": 66.253}]
        assert [(i.phase, i.start_s, i.end_s) for i in a.timeline] == [
            ("model_init", 0.0, 10.0), ("train", 10.0, 30.0), ("eval", 30.0, 32.0), ("train", 32.0, 52.0),
            ("eval", 52.0, 54.0), ("train", 54.0, 74.0), ("eval", 74.0, 76.0), ("train", 76.0, 76.253)]
    assert [e.elapsed_s for e in mlperf.evaluations] == [22.0, 44.0, 66.253]
    assert [e.elapsed_s for e in dawnbench.evaluations] == [30.0, 50.0, 70.0]
    assert dawnbench.clocks["dawnbench"].excluded_s == {"eval": 6.0} and dawnbench.clocks["mlperf"].start_s == 10.0
    assert any("run_stop - run_start" in n for n in mlperf.clocks["mlperf"].notes)
    # a run that ends without status success: MLPerf's clock stops at the target evaluation's end
    failed = [r if r[0] != "run_stop" else ("run_stop", 76_253, None, {"status": "aborted"}) for r in SYNTHETIC]
    assert analyze(parsed(mllog_text(failed)), target=0.98, rules="mlperf").time_to_target_s == 66.0


def test_mlperf_result_with_an_init_longer_than_the_rules_allow():
    # 35 minutes of init on a daybreak task's log (MLPerf's rules allow 30 before the clock): the figure is measured
    # from run_start as MLPerf reports a run, and a warning gives the rules' own reading and the checker's verdict
    long_init = [(k, t + (35 * 60_000 - 10_000 if t >= 10_000 else 0), v, md) for k, t, v, md in SYNTHETIC]
    a = analyze(parsed(mllog_text(long_init)), target=0.98, rules="mlperf")
    assert a.time_to_target_s == 66.253 and [e.elapsed_s for e in a.evaluations] == [22.0, 44.0, 66.253]
    assert len(a.warnings) == 1 and "more than the 30 minutes the MLPerf Training rules allow" in a.warnings[0]
    assert "rejects such a run" in a.warnings[0]
    assert "would read 366.253 s" in a.warnings[0]  # started at 30 minutes: 5 minutes of init on the clock


@pytest.mark.parametrize("rules", ["dawnbench", "mlperf"])
def test_time_log_records_both_rule_sets(tmp_path, rules):
    log = tmp_path / "result_0.txt"
    log.write_text(mllog_text(SYNTHETIC))
    run_dir = tmp_path / "run"
    rc = main(["time", "--task", "digits", "--log", str(log), "--out", str(run_dir), "-q", "--rules", rules,
               "--cost-per-hour", "36"])
    r, ext = load(run_dir)
    headline = {"dawnbench": 70.0, "mlperf": 66.253}[rules]
    assert rc == 0 and r.status == "reached" and r.rules == rules and ext["rules"] == rules
    assert r.time_to_target_s == headline and r.cost_usd == pytest.approx(headline / 100)
    assert {n: c.time_to_target_s for n, c in r.clocks.items()} == {"dawnbench": 70.0, "mlperf": 66.253}
    assert r.clocks["dawnbench"].excluded_s == {"eval": 6.0} and r.clocks["mlperf"].start_s == 10.0
    assert [h.elapsed_s for h in r.history] == [h.clock_s[rules] for h in r.history]
    assert [h.clock_s["mlperf"] for h in r.history] == [22.0, 44.0, 66.253]
    assert [(p.phase, p.start_s, p.end_s) for p in r.phases][:3] == [("model_init", 0.0, 10.0), ("train", 10.0, 30.0),
                                                                     ("eval", 30.0, 32.0)]
    title = {"dawnbench": "DAWNBench v1", "mlperf": "MLPerf Training"}[rules]
    assert r.clock.starts.startswith(title) and r.clock.eval_included == (rules == "mlperf")
    assert r.warnings == [] and ext["warnings"] == []
    assert float(tsv_rows(run_dir)[3][1]) == pytest.approx(70.0 / 3600, abs=1e-8)  # DAWNBench's view, always


def test_analyze_unclosed_eval_cannot_hide_training():
    events = [ev("run_start", 0), ev("eval_start", 1000), ev("eval_accuracy", 1200, 0.5),
              ev("eval_accuracy", 9000, 0.99)]  # the eval_start is never closed
    a = analyze(events, target=0.98)
    assert [e.elapsed_s for e in a.evaluations] == pytest.approx([1.0, 8.8])
    assert a.time_to_target_s == pytest.approx(8.8)


def test_analyze_percent_samples_and_not_reached():
    events = [ev("train_samples", 0, 1000), ev("global_batch_size", 0, 100), ev("run_start", 0),
              ev("eval_accuracy", 1000, 0.9, samples_count=500),  # read as 0.9 % because the log is in percent
              ev("eval_accuracy", 2000, 97.5, samples_count=1000)]
    a = analyze(events, target=0.98)
    assert a.percent and [e.accuracy for e in a.evaluations] == pytest.approx([0.009, 0.975])
    assert [e.epoch for e in a.evaluations] == [0.5, 1.0] and [e.step for e in a.evaluations] == [5, 10]
    assert not a.reached and a.time_to_target_s is None and a.best_accuracy == pytest.approx(0.975)
    assert a.hyperparameters == {"train_samples": 1000, "global_batch_size": 100}
    assert verdict(a, ProgramEnd(0))[0] == "not_reached"
    assert verdict(a, ProgramEnd(1))[0] == "failed"
    assert not analyze(events, target=0.98, unit="fraction").percent
    # without epoch_num or train_samples: epochs are counted as evaluations, and the record says so
    b = analyze([ev("run_start", 0), ev("eval_accuracy", 5, 0.1), ev("eval_accuracy", 9, 0.2)], target=0.9)
    assert [e.epoch for e in b.evaluations] == [1.0, 2.0] and any("counted as evaluations" in n for n in b.notes)


def test_target_watch_is_live_and_needs_run_start():
    w = TargetWatch(0.9)
    assert not w.feed(ev("eval_accuracy", 0, 0.95))  # before run_start: ignored
    assert not w.feed(ev("run_start", 1))
    assert not w.feed(ev("eval_accuracy", 2, 0.85))
    assert w.feed(ev("eval_accuracy", 3, 91.0)) and w.percent_seen
    assert not w.feed(ev("eval_accuracy", 4, 95.0))  # only the first time


def test_clock_cross_check_against_wall_arrival_times():
    honest = [ev("run_start", 0, wall=100.0), ev("eval_accuracy", 60000, 0.99, lineno=7, wall=160.5)]
    a = analyze(honest, target=0.98, tolerance=Tolerance())
    assert a.clock.checked and a.clock.trusted and a.reached
    assert a.clock.max_deviation_s == pytest.approx(0.5)

    fast_liar = [ev("run_start", 0, wall=100.0), ev("eval_accuracy", 10000, 0.99, lineno=7, wall=160.0)]
    a = analyze(fast_liar, target=0.98, tolerance=Tolerance())
    assert not a.clock.trusted and not a.reached and a.time_to_target_s is None
    assert a.target_claimed and a.clock.worst_lineno == 7
    status, message = verdict(a, ProgramEnd(0))
    assert status == "failed" and "disagree with the wall clock" in message
    assert "claims the target at 10.000 s" in message

    # events after the target do not matter; without a tolerance (--log) nothing is checked
    late = fast_liar[:1] + [ev("eval_accuracy", 60000, 0.99, wall=160.0), ev("run_stop", 10 ** 9, wall=161.0)]
    assert analyze(late, target=0.98, tolerance=Tolerance()).clock.trusted
    unchecked = analyze(fast_liar, target=0.98, tolerance=None)
    assert not unchecked.clock.checked and unchecked.reached

    backwards = [ev("run_start", 5000), ev("eval_accuracy", 1000, 0.99, lineno=4)]
    a = analyze(backwards, target=0.98)
    assert not a.clock.trusted and "backwards" in a.clock.reason


def test_verdicts():
    none = analyze([ev("init_start", 0)], target=0.9)
    assert verdict(none, ProgramEnd(0)) == ("failed", "the program never logged run_start (1 :::MLLOG record(s) read)")
    reached = analyze([ev("run_start", 0), ev("eval_accuracy", 10, 0.95)], target=0.9)
    assert verdict(reached, ProgramEnd(-15, stopped_by_daybreak=True)) == ("reached", None)
    assert verdict(reached, ProgramEnd(-11))[1] == "the program was killed by SIGSEGV after reaching the target"
    assert verdict(reached, ProgramEnd(None, interrupted="interrupted by the user (Ctrl-C)"))[0] == "reached"
    short = analyze([ev("run_start", 0), ev("eval_accuracy", 10, 0.5)], target=0.9)
    assert verdict(short, ProgramEnd(-2, interrupted="interrupted by the user (Ctrl-C)"))[0] == "interrupted"
    assert verdict(short, None)[1] == ("the program ended below the target: best 50.00% < 90.00%; "
                                       "the log has no run_stop (cut off?)")


# --- `daybreak time -- CMD` --------------------------------------------------------------------------------
def test_time_reaching_program(tmp_path, capfd):
    script = write_child(tmp_path, REACHING + 'print("finished", flush=True)\n')
    rc, run_dir = time_cli(tmp_path, script, "--cost-per-hour", "3.6")
    captured = capfd.readouterr()
    assert rc == 0
    assert "loading data..." in captured.out and "epoch 1 done" in captured.err  # streamed through

    r, ext = load(run_dir)
    assert r.status == "reached" and r.reached and r.message is None
    assert r.recipe == "external" and r.framework == "TinyFlow 0.3" and r.model == "mlp-2"
    assert r.command == [sys.executable, str(script)]
    assert r.global_batch_size == 32 and r.seed == 7
    assert r.official and r.target == 0.98 and r.target_is_default
    # the timeline starts at the program's launch: model_init runs from there to init_stop (start-up + 100 ms)
    assert r.rules == "dawnbench" and [p.phase for p in r.phases] == ["model_init", "train", "eval", "train", "eval",
                                                                      "train"]
    init_end = r.phases[0].end_s
    assert r.phases[0].start_s == 0.0 and 0.1 < init_end < 10
    # DAWNBench: launch to eval 2's eval_stop (1100 ms) less the two 100 ms evaluations
    assert r.time_to_target_s == pytest.approx(init_end + 0.8, abs=1e-6)
    assert r.clocks["dawnbench"].start_s == 0.0 and r.clocks["dawnbench"].excluded_s == {"eval": pytest.approx(0.2)}
    # MLPerf: run_start (100 ms) to run_stop (1150 ms, status success right after the target evaluation)
    assert r.clocks["mlperf"].time_to_target_s == pytest.approx(1.05, abs=1e-6)
    assert r.epochs_to_target == 2 and r.init_s == pytest.approx(0.1)
    assert [h.elapsed_s for h in r.history] == pytest.approx([init_end + 0.4, init_end + 0.8], abs=1e-6)
    assert [h.clock_s["mlperf"] for h in r.history] == pytest.approx([0.5, 1.05], abs=1e-6)
    assert [h.eval_s for h in r.history] == pytest.approx([0.1, 0.1])
    assert r.cost_usd == pytest.approx(r.time_to_target_s / 3600 * 3.6)
    assert r.clock.eval_included is False and "cross-checked" in r.clock.timer and "launch" in r.clock.starts
    rows = tsv_rows(run_dir)
    assert rows[0] == ["epoch", "hours", "top1Accuracy"] and [row[2] for row in rows[1:]] == ["50.00", "99.00"]
    assert float(rows[2][1]) == pytest.approx((init_end + 0.8) / 3600, abs=1e-8)
    # live: the program ran here, so the system is this machine's; what the program declared is kept beside it
    assert r.system.source == "measured" and r.analyzed_on is None
    assert r.system.declared_fields == {"submission_org": "acme"}
    assert ext["rules"] == "dawnbench" and ext["warnings"] == []
    assert json.loads((run_dir / "dawnbench.json").read_text())["author"] == "acme"  # the log's submission_org

    program_lines = (run_dir / "program.log").read_text().splitlines()
    assert "loading data..." in program_lines and "epoch 1 done" in program_lines and "finished" in program_lines
    assert len(program_lines) == 18
    mllog_lines = (run_dir / "mllog.log").read_text().splitlines()
    assert len(mllog_lines) == 15 and all(line.startswith(":::MLLOG {") for line in mllog_lines)
    assert ext["clock_check"]["checked"] and ext["clock_check"]["trusted"]
    assert ext["returncode"] == 0 and ext["malformed_records"] == 0 and ext["mllog_records"] == 15


def test_time_count_eval_is_an_alias_for_rules_mlperf(tmp_path, capfd):
    rc, run_dir = time_cli(tmp_path, write_child(tmp_path, REACHING), "--count-eval")
    r, ext = load(run_dir)
    # MLPerf's result: run_stop (1150 ms, status success after the target evaluation) - run_start (100 ms)
    assert rc == 0 and r.rules == "mlperf" and r.time_to_target_s == pytest.approx(1.05, abs=1e-6)
    assert r.clock.eval_included and r.clock.starts.startswith("MLPerf Training")
    assert ext["rules"] == "mlperf" and ext["count_eval"]
    assert "--count-eval is deprecated: use --rules mlperf" in capfd.readouterr().err
    assert main(["time", "--task", "digits", "--count-eval", "--rules", "dawnbench", "--", "true"]) == 2


def test_time_never_reaching(tmp_path):
    script = write_child(tmp_path, '''
        log("run_start", dt=0)
        for epoch in range(1, 4):
            log("eval_accuracy", 0.5 + epoch / 10, dt=epoch * 100, epoch_num=epoch)
        log("run_stop", dt=400, status="aborted")
    ''')
    rc, run_dir = time_cli(tmp_path, script)
    r, ext = load(run_dir)
    assert rc == 3 and r.status == "not_reached" and not r.reached and r.time_to_target_s is None
    assert r.message == "the program ended below the target: best 80.00% < 98.00%"
    assert r.best_accuracy == pytest.approx(0.8) and r.final_accuracy == pytest.approx(0.8)
    assert [row[0] for row in tsv_rows(run_dir)[1:]] == ["1", "2", "3"]
    assert ext["run_stop_status"] == "aborted"
    assert r.train_s == pytest.approx(0.4)


def test_time_crashing_program(tmp_path, capfd):
    script = write_child(tmp_path, '''
        log("run_start", dt=0)
        log("eval_accuracy", 0.6, dt=100, epoch_num=1)
        print("Traceback (most recent call last):", file=sys.stderr, flush=True)
        print("RuntimeError: CUDA out of memory", file=sys.stderr, flush=True)
        sys.exit(3)
    ''')
    rc, run_dir = time_cli(tmp_path, script)
    r, ext = load(run_dir)
    assert rc == 5 and r.status == "failed"
    assert r.message == "the program exited with status 3 before reaching the target (best 60.00% < 98.00%)"
    assert "RuntimeError: CUDA out of memory" in (run_dir / "program.log").read_text()
    assert ext["returncode"] == 3 and len(r.history) == 1
    assert "daybreak: failed: the program exited with status 3" in capfd.readouterr().err


def test_time_program_without_run_start(tmp_path):
    script = write_child(tmp_path, '''
        log("init_start", dt=0)
        print("forgot to log run_start", flush=True)
        log("eval_accuracy", 0.99, dt=10)
    ''')
    rc, run_dir = time_cli(tmp_path, script)
    r, _ = load(run_dir)
    assert rc == 5 and r.status == "failed" and not r.reached
    assert r.message.startswith("the program never logged run_start (2 :::MLLOG record(s) read)")
    assert "1 eval_accuracy line(s) ignored: no run_start" in r.data_notes


def test_time_garbage_and_malformed_lines(tmp_path):
    script = write_child(tmp_path, r'''
        print("\x00\x01 binary-ish junk \xff", flush=True)
        sys.stdout.buffer.write(b"not utf-8: \xff\xfe\n"); sys.stdout.flush()
        log("run_start", dt=0)
        print(":::MLLOG {this is not json", flush=True)
        print('noise :::MLLOG {"key": "eval_accuracy", "time_ms": 1, "value": "n/a"}', flush=True)
        log("eval_accuracy", 0.99, dt=200, epoch_num=1)
        sys.stdout.write("progress 10%\rprogress 100%\r"); sys.stdout.flush()
        log("run_stop", dt=300)
        sys.stdout.write("last line without newline"); sys.stdout.flush()
    ''')
    rc, run_dir = time_cli(tmp_path, script, "--rules", "mlperf")
    r, ext = load(run_dir)
    assert rc == 0 and r.status == "reached" and r.time_to_target_s == pytest.approx(0.2)
    assert ext["malformed_records"] == 2 and ext["first_malformed"]["line"] == 4
    assert r.message.startswith("2 malformed :::MLLOG record(s) skipped (first at program.log line 4: invalid JSON")
    program = (run_dir / "program.log").read_bytes()
    assert b"not utf-8: \xff\xfe\n" in program and program.endswith(b"last line without newline\n")
    assert program.count(b"\n") == 8
    assert len((run_dir / "mllog.log").read_text().splitlines()) == 3  # only well-formed records


def test_time_lying_timestamps_too_slow(tmp_path):
    # claims 100 s between run_start and the target evaluation; really a few milliseconds
    script = write_child(tmp_path, '''
        log("run_start", dt=0)
        log("eval_accuracy", 0.99, dt=100_000, epoch_num=1)
        log("run_stop", dt=100_001)
    ''')
    rc, run_dir = time_cli(tmp_path, script, "--rules", "mlperf")
    r, ext = load(run_dir)
    assert rc == 5 and r.status == "failed" and not r.reached and r.time_to_target_s is None
    assert all(c.time_to_target_s is None for c in r.clocks.values())
    assert "disagree with the wall clock" in r.message and "claims the target at 100.000 s, not trusted" in r.message
    assert not r.official and any("not trusted" in why for why in r.unofficial_reasons)
    check = ext["clock_check"]
    assert check["checked"] and not check["trusted"] and check["worst_key"] == "eval_accuracy"
    assert check["worst_program_s"] == pytest.approx(100.0) and check["worst_wall_s"] < 5
    assert r.cost_usd is None


def test_time_lying_timestamps_too_fast(tmp_path):
    # sleeps 1.2 s of "training" but logs 10 ms; a tight tolerance catches it
    script = write_child(tmp_path, '''
        log("run_start", dt=0)
        time.sleep(1.2)
        log("eval_accuracy", 0.99, dt=10, epoch_num=1)
    ''')
    rc, run_dir = time_cli(tmp_path, script, "--clock-tolerance", "1%+0.5s")
    r, ext = load(run_dir)
    assert rc == 5 and r.status == "failed" and "disagree with the wall clock" in r.message
    assert ext["clock_check"]["worst_wall_s"] >= 1.1 and ext["clock_check"]["worst_program_s"] < 0.3


def test_time_backdated_start_up_is_caught(tmp_path):
    # 1.2 s of start-up, then run_start stamped as if at the program's start: DAWNBench's clock, which starts at
    # the launch, would lose that time; the launch is checked against the wall clock too
    script = write_child(tmp_path, '''
        time.sleep(1.2)
        log("run_start", dt=0)
        log("eval_accuracy", 0.99, dt=10, epoch_num=1)
    ''')
    rc, run_dir = time_cli(tmp_path, script, "--clock-tolerance", "1%+0.5s")
    r, ext = load(run_dir)
    assert rc == 5 and r.status == "failed" and "after the program's launch" in r.message
    assert ext["clock_check"]["worst_key"] == "run_start" and ext["clock_check"]["worst_wall_s"] >= 1.1


def test_time_honest_slow_program_passes_tight_tolerance(tmp_path):
    script = write_child(tmp_path, '''
        log("run_start")
        time.sleep(0.6)
        log("eval_accuracy", 0.99, epoch_num=1)
    ''')
    rc, run_dir = time_cli(tmp_path, script, "--clock-tolerance", "10%+0.3s")
    r, ext = load(run_dir)
    assert rc == 0 and r.status == "reached" and r.clocks["mlperf"].time_to_target_s == pytest.approx(0.6, abs=0.15)
    # DAWNBench's clock also holds the program's start-up (launch to run_start)
    assert r.time_to_target_s == pytest.approx(r.clocks["mlperf"].time_to_target_s + r.phases[0].end_s, abs=1e-5)
    assert ext["clock_check"]["trusted"] and ext["clock_check"]["max_deviation_s"] < 0.3


STOPPABLE = '''
if IGNORE_TERM:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the grandchild too
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with open(sys.argv[1], "w") as f:
    f.write(f"{os.getpid()} {grandchild.pid}")
log("run_start")
log("eval_accuracy", 0.5, epoch_num=1)
log("eval_accuracy", 0.99, epoch_num=2)
time.sleep(60)
log("eval_accuracy", 1.0, epoch_num=3)
'''


@pytest.mark.parametrize("ignore_term", [False, True])
def test_time_stop_at_target_ends_the_process_group(tmp_path, ignore_term):
    script = write_child(tmp_path, f"IGNORE_TERM = {ignore_term}\n" + STOPPABLE)
    pids = tmp_path / "pids"
    run_dir = tmp_path / "run"
    t0 = time.monotonic()
    rc = main(["time", "--task", "digits", "--out", str(run_dir), "-q", "--stop-at-target", "--grace-s", "1",
               "--", sys.executable, str(script), str(pids)])
    elapsed = time.monotonic() - t0
    assert elapsed < 15
    child, grandchild = map(int, pids.read_text().split())
    assert gone(child) and gone(grandchild)
    r, ext = load(run_dir)
    assert rc == 0 and r.status == "reached" and r.epochs_to_target == 2 and r.stop_at_target
    assert ext["stopped_by_daybreak"] and len(r.history) == 2
    assert ext["returncode"] == (-9 if ignore_term else -15)


def test_time_stray_grandchild_holding_the_pipes(tmp_path):
    # the program exits but leaves a child that keeps stdout open: daybreak must not wait for it
    script = write_child(tmp_path, '''
        stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open(sys.argv[1], "w").write(str(stray.pid))
        log("run_start", dt=0)
        log("eval_accuracy", 0.99, dt=10, epoch_num=1)
    ''')
    pid_file = tmp_path / "pid"
    t0 = time.monotonic()
    rc = main(["time", "--task", "digits", "--out", str(tmp_path / "run"), "-q", "--grace-s", "1",
               "--", sys.executable, str(script), str(pid_file)])
    assert time.monotonic() - t0 < 10
    assert rc == 0 and gone(int(pid_file.read_text()))


def test_time_from_log_file(tmp_path):
    t0 = 1_700_000_000_000
    lines = [
        {"key": "submission_benchmark", "time_ms": t0, "value": "tinyflow_classifier"},
        {"key": "init_start", "time_ms": t0}, {"key": "init_stop", "time_ms": t0 + 60_000},
        {"key": "run_start", "time_ms": t0 + 60_000},
        {"key": "eval_start", "time_ms": t0 + 660_000}, {"key": "eval_stop", "time_ms": t0 + 690_000},
        {"key": "eval_accuracy", "time_ms": t0 + 690_000, "value": 91.5, "metadata": {"epoch_num": 1}},
        {"key": "eval_start", "time_ms": t0 + 1_290_000}, {"key": "eval_stop", "time_ms": t0 + 1_320_000},
        {"key": "eval_accuracy", "time_ms": t0 + 1_320_000, "value": 98.25, "metadata": {"epoch_num": 2}},
        {"key": "run_stop", "time_ms": t0 + 1_321_000, "metadata": {"status": "success"}},
    ]
    log = tmp_path / "result_0.txt"
    log.write_text("some banner\n" + "\n".join("INFO: :::MLLOG " + json.dumps(rec) for rec in lines)
                   + "\n:::MLLOG {broken\n")
    run_dir = tmp_path / "run"
    rc = main(["time", "--task", "digits", "--log", str(log), "--out", str(run_dir), "-q"])
    r, ext = load(run_dir)
    assert rc == 0 and r.status == "reached"
    assert r.time_to_target_s == 1_320.0 - 60.0  # from init_start, minus two 30 s evaluations
    assert r.clocks["mlperf"].time_to_target_s == 1_321.0 - 60.0  # run_stop - run_start
    assert r.init_s == pytest.approx(60.0) and r.epochs_to_target == 2
    assert [h.accuracy for h in r.history] == pytest.approx([0.915, 0.9825])
    assert tsv_rows(run_dir)[1:] == [["1", f"{660 / 3600:.8f}", "91.50"], ["2", f"{1260 / 3600:.8f}", "98.25"]]
    assert not r.official and any("not cross-checked" in why for why in r.unofficial_reasons)
    assert "not cross-checked" in r.clock.timer and r.framework == "unknown" and r.model == "external"
    # the log declares no platform: the program's hardware is unknown, not the analysing machine's
    assert r.system.source == "declared" and r.system.hardware_summary() == "unknown (not declared)"
    assert r.analyzed_on is not None and r.analyzed_on.source == "measured"
    assert any("declares no submission_platform" in n for n in r.data_notes)
    assert "the log has no seed" in r.data_notes
    assert r.started_at.year == 2023 and r.total_s == pytest.approx(1321.0)
    assert ext["mode"] == "log" and not ext["clock_check"]["checked"] and ext["submission"] == {
        "submission_benchmark": "tinyflow_classifier"}
    assert ext["first_malformed"]["line"] == 13 and "first at " + str(log) + " line 13" in r.message
    assert not (run_dir / "program.log").exists()
    assert r.command == ["daybreak", "time", "--task", "digits", "--log", str(log), "--out", str(run_dir), "-q"]
    assert len((run_dir / "mllog.log").read_text().splitlines()) == len(lines)


# A result log in the format of MLPerf Training's published results (v4.0): what the program declares about the
# system it ran on (submission_*), its seed, one accuracy metric (eval_accuracy), blocks of evaluations.
PLATFORM = "8xNVIDIA H100-SXM5-80GB"
MLPERF_RESULT = [
    ("cache_clear", 0, True, {}), ("init_start", 5, None, {}),
    ("submission_benchmark", 6, "resnet", {}), ("submission_division", 6, "closed", {}),
    ("submission_org", 6, "Acme Systems", {}), ("submission_platform", 6, PLATFORM, {}),
    ("submission_status", 6, "onprem", {}), ("submission_framework", 6, "PyTorch NVIDIA Release 24.04", {}),
    ("submission_poc_name", 6, "A. Person", {}), ("submission_poc_email", 6, "a.person@example.com", {}),
    ("seed", 7, 4242, {}), ("global_batch_size", 7, 3264, {}), ("train_samples", 7, 1_281_167, {}),
    ("init_stop", 181_337, None, {}), ("run_start", 181_337, None, {}),
    ("block_start", 181_340, None, {"first_epoch_num": 1, "epoch_count": 4}),
    ("eval_start", 300_000, None, {"epoch_num": 4}), ("eval_stop", 303_211, None, {"epoch_num": 4}),
    ("eval_accuracy", 303_212, 0.6125, {"epoch_num": 4}), ("block_stop", 303_213, None, {"first_epoch_num": 1}),
    ("block_start", 303_214, None, {"first_epoch_num": 5, "epoch_count": 4}),
    ("eval_start", 420_000, None, {"epoch_num": 8}), ("eval_stop", 423_105, None, {"epoch_num": 8}),
    ("eval_accuracy", 423_106, 0.9812, {"epoch_num": 8}), ("block_stop", 423_107, None, {"first_epoch_num": 5}),
    ("run_stop", 423_109, None, {"status": "success"}),
]


def test_time_log_of_a_published_mlperf_result(tmp_path):
    from daybreak.measure.system import system_info

    log = tmp_path / "result_0.txt"
    log.write_text("+ python train.py --seed 4242\n" + mllog_text(MLPERF_RESULT) + "ENDING TIMING RUN\n")
    run_dir = tmp_path / "run"
    # no --task: the log's submission_benchmark (resnet) names MLPerf's ResNet-50, 75.9% top-1
    rc = main(["time", "--log", str(log), "--out", str(run_dir), "-q", "--rules", "mlperf"])
    r, ext = load(run_dir)
    assert rc == 0 and r.status == "reached"
    assert (r.task, r.metric, r.target) == ("mlperf:resnet", "top1", 0.759) and r.mlperf.round == "v4.0"
    # MLPerf's own result, exactly
    assert r.time_to_target_s == (423_109 - 181_337) / 1000.0
    # DAWNBench: init_start to the target evaluation's accuracy line, less the two evaluations
    assert r.clocks["dawnbench"].time_to_target_s == pytest.approx((423_106 - 5 - 3_211 - 3_105) / 1000.0, abs=1e-6)
    # the program's system is the one the log declares; the machine that read the log is analyzed_on
    assert r.system.source == "declared" and r.system.hardware_summary() == PLATFORM
    assert r.system.framework == r.framework == "PyTorch NVIDIA Release 24.04"
    assert r.system.declared_fields["submission_org"] == "Acme Systems"
    assert r.system.declared_fields["submission_poc_name"] == "A. Person"
    assert r.analyzed_on is not None and r.analyzed_on.source == "measured"
    # (read without torch: this machine's CPU and torch's version, its accelerators not probed)
    here = system_info()
    assert (r.analyzed_on.cpu_model, r.analyzed_on.torch) == (here.cpu_model, here.torch)
    assert r.analyzed_on.hardware_summary().endswith("(accelerators not probed)")
    assert json.loads((run_dir / "dawnbench.json").read_text())["hardware"] == PLATFORM
    assert r.seed == 4242 and "the log has no seed" not in r.data_notes
    # one accuracy metric in the log: one accuracy column (ResNet-50's target is top-1)
    assert all(h.top1 == h.accuracy and h.top5 is None for h in r.history)
    rows = tsv_rows(run_dir)
    assert rows[0] == ["epoch", "hours", "top1Accuracy"] and all(len(row) == 3 for row in rows)
    assert [row[2] for row in rows[1:]] == ["61.25", "98.12"]
    assert r.warnings == [] and r.epochs_to_target == 8

    # the same log of a program of one's own, for a top-5 task: the accuracy goes to top5 only, never into top1
    log.write_text(mllog_text([r if r[0] != "submission_benchmark" else (r[0], r[1], "acme_resnet", r[3])
                               for r in MLPERF_RESULT]))
    rc = main(["time", "--task", "imagenet", "--target", "0.9", "--log", str(log), "--out", str(tmp_path / "top5"),
               "-q"])
    r5 = RunResult.load(tmp_path / "top5")
    assert rc == 0 and r5.metric == "top5" and all(h.top5 == h.accuracy and h.top1 is None for h in r5.history)


def test_time_log_without_eval_intervals_warns(tmp_path, capsys):
    no_intervals = [r for r in SYNTHETIC if r[0] not in ("eval_start", "eval_stop")]
    log = tmp_path / "result_0.txt"
    log.write_text(mllog_text(no_intervals))
    run_dir = tmp_path / "run"
    rc = main(["time", "--task", "digits", "--log", str(log), "--out", str(run_dir), "-q"])
    r, ext = load(run_dir)
    assert rc == 0 and len(r.warnings) == 1 and "no eval_start/eval_stop intervals" in r.warnings[0]
    assert ext["warnings"] == r.warnings
    assert f"daybreak: warning: {r.warnings[0]}" in capsys.readouterr().err
    # evaluation could not be excluded: under dawnbench it counts as training
    assert r.time_to_target_s == 76.0 and r.clocks["dawnbench"].excluded_s == {}
    assert any("count as training" in n for n in r.clocks["dawnbench"].notes)
    # --count-eval is still there, as --rules mlperf
    rc = main(["time", "--task", "digits", "--log", str(log), "--out", str(tmp_path / "alias"), "-q", "--count-eval"])
    alias = RunResult.load(tmp_path / "alias")
    assert rc == 0 and alias.rules == "mlperf" and alias.time_to_target_s == 66.253


def test_time_usage_errors(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["time", "--task", "digits"]) == 2
    assert "give the program to time after --" in capsys.readouterr().err
    assert main(["time", "--task", "digits", "--log", "x", "--", "true"]) == 2
    assert main(["time", "--task", "digits", "--", "no-such-program-xyz"]) == 2
    assert "not found on PATH" in capsys.readouterr().err
    assert main(["time", "--task", "digits", "--clock-tolerance", "lots", "--", "true"]) == 2
    assert main(["time", "--task", "nope", "--", "true"]) == 2
    assert main(["time", "--task", "digits", "--log", str(tmp_path / "missing.log")]) == 2
    assert not list(tmp_path.iterdir())  # nothing ran, nothing written (not even runs/)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_time_interrupted_ends_the_program(tmp_path, sig):
    script = write_child(tmp_path, '''
        open(sys.argv[1], "w").write(str(os.getpid()))
        log("run_start", dt=0)
        log("eval_accuracy", 0.5, dt=10, epoch_num=1)
        time.sleep(60)
    ''')
    run_dir, pid_file = tmp_path / "run", tmp_path / "pid"
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "daybreak", "time", "--task", "digits", "--out", str(run_dir),
                             "-q", "--grace-s", "2", "--", sys.executable, str(script), str(pid_file)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            mllog = run_dir / "mllog.log"
            if mllog.exists() and "eval_accuracy" in mllog.read_text():
                break
            time.sleep(0.05)
        t0 = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert time.monotonic() - t0 < 10
    assert proc.returncode == 130, err
    r, ext = load(run_dir)
    why = "interrupted by the user (Ctrl-C)" if sig == signal.SIGINT else "daybreak was terminated"
    assert r.status == "interrupted" and r.message == f"{why} before the target was reached (best 50.00%)"
    assert ext["interrupted"] == why and gone(int(pid_file.read_text()))


# --- a real PyTorch program logging with mlperf-logging -----------------------------------------------------
TORCH_CHILD = '''
import torch
from sklearn.datasets import load_digits
from mlperf_logging import mllog
from mlperf_logging.mllog import constants as C

torch.set_num_threads(1)
torch.manual_seed(0)
ml = mllog.get_mllogger()  # logs to stdout
ml.event(key="framework", value=f"PyTorch {torch.__version__}")
ml.event(key="model", value="digits-mlp")
ml.event(key=C.GLOBAL_BATCH_SIZE, value=64)
ml.start(key=C.INIT_START)
x, y = load_digits(return_X_y=True)
x = torch.tensor(x, dtype=torch.float32) / 16.0
y = torch.tensor(y)
perm = torch.randperm(len(x))
train, test = perm[:1347], perm[1347:]
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
ml.end(key=C.INIT_STOP)
ml.start(key=C.RUN_START)
for epoch in range(1, 7):
    ml.start(key=C.EPOCH_START, metadata={C.EPOCH_NUM: epoch})
    for i in range(0, len(train), 64):
        idx = train[i:i + 64]
        loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad(); loss.backward(); opt.step()
    ml.end(key=C.EPOCH_STOP, metadata={C.EPOCH_NUM: epoch})
    ml.start(key=C.EVAL_START, metadata={C.EPOCH_NUM: epoch})
    with torch.no_grad():
        acc = (model(x[test]).argmax(1) == y[test]).float().mean().item()
    ml.end(key=C.EVAL_STOP, metadata={C.EPOCH_NUM: epoch})
    ml.event(key=C.EVAL_ACCURACY, value=acc, metadata={C.EPOCH_NUM: epoch})
ml.end(key=C.RUN_STOP, metadata={C.STATUS: C.SUCCESS})
'''


def test_time_real_pytorch_program_with_mlperf_logging(tmp_path):
    from mlperf_logging.compliance_checker.mlp_parser import ruleset_610 as mlp_parser

    script = tmp_path / "train_digits.py"
    script.write_text(TORCH_CHILD, encoding="utf-8")
    rc, run_dir = time_cli(tmp_path, script, "--target", "0.9")
    r, ext = load(run_dir)
    assert rc == 0 and r.status == "reached", r.message
    assert r.framework.startswith("PyTorch ") and r.model == "digits-mlp" and r.global_batch_size == 64
    assert not r.official and r.unofficial_reasons == ["target 0.9000 differs from the task's 0.9800"]
    assert ext["clock_check"]["trusted"] and len(r.history) == 6

    # mllog.log is readable by mlperf-logging's own parser; recompute the rules from it independently
    loglines, errors = mlp_parser.parse_file(str(run_dir / "mllog.log"))
    assert not errors
    by_key = lambda k: [ll for ll in loglines if ll.key == k]  # noqa: E731
    run_start = by_key("run_start")[0].timestamp
    starts, stops = by_key("eval_start"), by_key("eval_stop")
    accs = by_key("eval_accuracy")
    k = next(i for i, ll in enumerate(accs) if ll.value["value"] >= 0.9)
    excluded = sum(stop.timestamp - start.timestamp for start, stop in zip(starts[:k + 1], stops[:k + 1]))
    since_run_start = (accs[k].timestamp - run_start - excluded) / 1000.0
    # DAWNBench's clock starts at the launch: add the time from there to run_start on the record's timeline
    run_start_s = next(p.start_s for p in r.phases if p.phase == "train")
    expected = run_start_s + since_run_start
    assert r.time_to_target_s == pytest.approx(expected, abs=1e-5)
    assert r.epochs_to_target == accs[k].value["metadata"]["epoch_num"]
    assert [round(h.accuracy, 6) for h in r.history] == [round(ll.value["value"], 6) for ll in accs]
    rows = tsv_rows(run_dir)
    assert len(rows) == 7 and rows[k + 1][2] == f"{accs[k].value['value'] * 100:.2f}"
    assert float(rows[k + 1][1]) == pytest.approx(expected / 3600, abs=1e-8)
    assert r.warnings == []  # it logs its eval intervals
    program = (run_dir / "program.log").read_text()
    assert program.count(":::MLLOG") == len(loglines)
