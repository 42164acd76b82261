"""Energy in a real run: counters read at the clock's boundaries, joules-to-target under each rule set, MLPerf's
power keys in the mllog, and 'unavailable' with the reason where no counter exists."""

import pytest
from mlperf_logging.compliance_checker.mlp_parser import ruleset_610 as mlp_parser
from mlperf_logging.result_summarizer.result_summarizer import _compute_power_node

from daybreak.train.runner import RunConfig, run

from conftest import FAKE_WATTS as WATTS


def test_joules_follow_each_rule_sets_clock(fake_rapl, tmp_path):
    r = run(RunConfig(out=tmp_path / "r", quiet=True, idle_power_s=0.2))
    e = r.energy
    assert e.available and e.covers == ["cpu_package"] and e.idle_power_w == pytest.approx(WATTS, rel=0.02)
    for rules in ("dawnbench", "mlperf"):
        seconds = r.clocks[rules].time_to_target_s
        assert e.joules_to_target[rules] == pytest.approx(WATTS * seconds, rel=0.01, abs=0.05), rules
    # MLPerf counts evaluation and writes but not the model init and warm-up before the data; DAWNBench the other
    # way round: the difference in joules is the difference in seconds
    gap_s = r.clocks["mlperf"].time_to_target_s - r.clocks["dawnbench"].time_to_target_s
    assert e.joules_to_target["mlperf"] - e.joules_to_target["dawnbench"] == pytest.approx(WATTS * gap_s, abs=0.1)
    assert [h.energy_j["dawnbench"] for h in r.history] == sorted(h.energy_j["dawnbench"] for h in r.history)
    assert e.per_phase_j["train"] == pytest.approx(
        WATTS * sum(p.end_s - p.start_s for p in r.phases if p.phase == "train"), rel=0.02, abs=0.05)
    # MLPerf's own power arithmetic (mlperf-logging's result summarizer) on the run's mllog gives its joules
    lines, errors = mlp_parser.parse_file(str(tmp_path / "r" / "mllog.log"))
    assert errors == []
    stamps = {ll.key: ll.timestamp for ll in lines}
    ttt = stamps["power_measurement_stop"] - stamps["power_measurement_start"]
    assert ttt == pytest.approx(stamps["run_stop"] - stamps["run_start"], abs=1e-3)
    assert _compute_power_node(lines, ttt) == pytest.approx(e.joules_to_target["mlperf"], rel=0.02)


def test_no_counter_means_unavailable_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("DAYBREAK_POWERCAP_ROOT", str(tmp_path / "nothing-here"))
    r = run(RunConfig(out=tmp_path / "r", quiet=True, overrides={"epochs": 1}, full_schedule=True))
    e = r.energy
    assert not e.available and e.joules_to_target == {} and all(h.energy_j == {} for h in r.history)
    assert "does not exist" in e.unavailable["cpu_package"] and e.unavailable["gpu"]
    text = (tmp_path / "r" / "mllog.log").read_text()
    assert "power_reading" not in text and "power_measurement_start" not in text


def test_this_machine_records_energy_or_says_why(tmp_path):
    r = run(RunConfig(out=tmp_path / "r", quiet=True, overrides={"epochs": 1}, full_schedule=True, idle_power_s=0))
    e = r.energy
    if e.available:
        assert all(v is None or v >= 0 for v in e.joules_at_end.values())
    else:
        assert e.unavailable and all(reason for reason in e.unavailable.values())
