"""What a record says about itself is true: a `daybreak time` record shown, reported and handed to the commands
that need a daybreak model; a record without a thread count; an inference measured without energy."""

from __future__ import annotations

import json
import shutil

import pytest

from daybreak.cli import main
from daybreak.records.run import RunResult
from daybreak.records.summary import format_summary

from conftest import single_line


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A digits run, and a `daybreak time --log` record of its own mllog (an external program's record)."""
    root = tmp_path_factory.mktemp("records")
    assert main(["run", "digits", "--out", str(root / "run"), "-q"]) == 0
    assert main(["time", "--log", str(root / "run" / "mllog.log"), "--task", "digits", "--out", str(root / "timed"),
                 "--quiet"]) == 0
    return root


def test_a_time_record_is_shown_once_and_without_made_up_settings(runs, capsys):
    assert main(["show", str(runs / "timed")]) == 0
    text = capsys.readouterr().out
    assert text.count("analysed on") == 1 and "the run's system is what the log declares" in text
    assert "None" not in text and "compile off" not in text  # its threads, precision, compile are the program's
    assert "setup            an external program (its own device, precision and threads); seed 0, batch 64" in text
    assert "energy           unavailable: not measured: `daybreak time` times an external program" in text


def test_the_time_command_prints_analysed_on_once(runs, capsys):
    assert main(["time", "--log", str(runs / "run" / "mllog.log"), "--task", "digits",
                 "--out", str(runs / "timed-again")]) == 0
    assert capsys.readouterr().out.count("analysed on") == 1


def test_a_report_gives_a_fresh_time_record_the_true_reason_for_no_energy(runs, tmp_path, capsys):
    assert main(["report", str(runs / "timed"), "--out", str(tmp_path / "rep"), "--no-roofline"]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "before daybreak measured energy" not in md
    assert "No energy for timed: not measured: `daybreak time` times an external program" in md


@pytest.mark.parametrize("argv", [["infer", "{timed}"], ["evaluate", "{timed}"], ["analyze", "roofline", "{timed}"]])
def test_commands_that_need_a_daybreak_model_say_a_time_record_has_none(runs, tmp_path, capsys, argv):
    args = [a.format(timed=runs / "timed") for a in argv] + (["--out", str(tmp_path / "o")] if "analyze" in argv else [])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert single_line(err) and "`daybreak time` record of an external program" in err
    assert "unknown recipe" not in err


def test_roofline_of_a_run_beside_a_time_record_leaves_the_record_out_and_says_so(runs, tmp_path, capsys):
    from test_analysis import _peak_file

    out = tmp_path / "rf"
    assert main(["analyze", "roofline", str(runs / "run"), str(runs / "timed"), "--peak",
                 str(_peak_file(tmp_path / "peak.json")), "--out", str(out)]) == 0
    a = json.loads((out / "roofline.json").read_text())
    assert [p["kind"] for p in a["points"]] == ["run"]
    assert any("timed left out: a `daybreak time` record" in n for n in a["notes"])


def test_a_record_without_a_thread_count_shows_none_of_it(runs):
    r = RunResult.load(runs / "run").model_copy(update={"threads": None})
    setup = next(line for line in format_summary(r).splitlines() if line.lstrip().startswith("setup"))
    assert "threads" not in setup and "None" not in setup
    assert f"threads {RunResult.load(runs / 'run').threads}," in format_summary(RunResult.load(runs / "run"))


def test_an_inference_measured_without_energy_says_so(runs, tmp_path):
    from daybreak.infer.commands import energy_line
    from daybreak.infer.latency import InferConfig, infer

    run_dir = tmp_path / "copy"
    shutil.copytree(runs / "run", run_dir)
    result = infer(InferConfig(run_dir=run_dir, warmup=1, throughput_repeats=0, energy=False))
    assert energy_line(result) == "unavailable: not measured: asked without energy (energy=False)"
