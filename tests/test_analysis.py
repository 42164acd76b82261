"""Analyses: repeat (stability), threshold, roofline, scaling, lesion, evaluate (generalization), compare, report.

The pure statistics are checked against numpy/scipy on hand-made numbers; the commands run real (short) digits
and mnist runs in this process.
"""

from __future__ import annotations

import math

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from daybreak.analysis import stats
from daybreak.analysis.compare import compare_times
from daybreak.analysis.roofline import bytes_estimate, roofline_numbers
from daybreak.cli import main
from daybreak.records.run import EpochRecord, RunResult

from conftest import single_line


@pytest.fixture(autouse=True)
def _isolated_peak_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DAYBREAK_CACHE", str(tmp_path_factory.mktemp("daybreak-cache")))


def _err_line(capsys) -> str:
    err = capsys.readouterr().err
    return err


# --- pure functions ------------------------------------------------------------------------------------------

TIMES = [12.0, 10.5, 11.2, 15.9, 9.8, 11.0]


def test_cv_std_ci_match_numpy_and_scipy():
    a = np.array(TIMES)
    assert stats.sample_std(TIMES) == pytest.approx(np.std(a, ddof=1))
    assert stats.coefficient_of_variation(TIMES) == pytest.approx(np.std(a, ddof=1) / np.mean(a))
    low, high = stats.confidence_interval(TIMES)
    exp = sps.t.interval(0.95, df=len(a) - 1, loc=np.mean(a), scale=sps.sem(a))
    assert (low, high) == pytest.approx(exp)
    ts = stats.time_stats(TIMES)
    assert ts.n == 6 and ts.mean_s == pytest.approx(np.mean(a)) and ts.median_s == pytest.approx(np.median(a))
    assert ts.cv == pytest.approx(np.std(a, ddof=1) / np.mean(a))
    logs = np.log(a)  # a time's interval is the geometric mean's: Student t on the log times, exponentiated
    log_exp = sps.t.interval(0.95, df=len(a) - 1, loc=np.mean(logs), scale=sps.sem(logs))
    assert (ts.ci_low_s, ts.ci_high_s) == pytest.approx(np.exp(log_exp))
    assert ts.geometric_mean_s == pytest.approx(sps.gmean(a))
    assert stats.confidence_interval([3.0]) is None and stats.coefficient_of_variation([3.0]) is None
    assert stats.confidence_interval([2.0, 2.0, 2.0]) == (2.0, 2.0)


def test_olympic_mean_drops_exactly_one_fastest_and_one_slowest():
    assert stats.olympic_mean([1.0, 2.0, 3.0, 100.0]) == pytest.approx(2.5)
    assert stats.olympic_mean([5.0, 1.0, 9.0]) == pytest.approx(5.0)
    # ties: only one copy of each extreme goes
    assert stats.olympic_mean([1.0, 1.0, 4.0, 7.0, 7.0]) == pytest.approx((1.0 + 4.0 + 7.0) / 3)
    assert stats.olympic_mean(TIMES) == pytest.approx(np.mean(sorted(TIMES)[1:-1]))
    assert stats.olympic_mean([1.0, 2.0]) is None


def test_a_time_interval_is_never_negative():
    """Three spread runs: the Student-t interval of the mean seconds goes below 0 ([-28.1, 108.2] s once); the
    interval of the geometric mean (t on the log times) cannot."""
    times = [12.0, 30.0, 78.0]
    low, _ = stats.confidence_interval(times, 0.99)
    assert low < 0
    t = stats.time_stats(times, 0.99)
    assert 0 < t.ci_low_s < t.geometric_mean_s < t.ci_high_s
    assert t.ci_low_s == pytest.approx(math.exp(sps.t.interval(0.99, 2, np.mean(np.log(times)),
                                                               sps.sem(np.log(times)))[0]))


@pytest.mark.parametrize("seed", range(30))
def test_mlperf_olympic_equals_mlperf_loggings_result_summarizer(seed):
    """MLPerf's rule for a set of runs (one non-converging run may be the slowest dropped; two make the set
    invalid) against mlperf-logging's own scoring: _compute_strong_score_standalone's drop count and
    _compute_olympic_average."""
    from mlperf_logging.result_summarizer import result_summarizer as rs

    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 11))
    times = [float(x) for x in rng.uniform(5, 20, n)]
    for i in rng.choice(n, size=int(rng.integers(0, 3)), replace=False):
        times[int(i)] = math.inf  # a run that did not converge
    failed = sum(math.isinf(t) for t in times)
    ours = stats.mlperf_olympic(times)
    if failed > 1:  # the summarizer: "CRITICAL ERROR: Too many non-converging runs" and no score
        assert ours == math.inf and stats.mlperf_score(times, n).valid is False
        return
    theirs = rs._compute_olympic_average([t for t in times if math.isfinite(t)], failed, 1)
    assert ours == pytest.approx(theirs)
    score = stats.mlperf_score(times, n)
    assert score.valid == (theirs is not None) and (score.score_s or None) == pytest.approx(theirs)


@pytest.mark.parametrize("seed", range(12))
def test_scored_runs_sets_how_many_runs_mlperf_drops(seed):
    """--scored-runs 40 is UNET3D's set: the 4 fastest and 4 slowest dropped and up to 4 non-converging runs
    (mlperf-logging's _compute_olympic_average with max_dropped_scores 4); it used to drop one at each end whatever
    N was. The drop count follows every benchmark of daybreak's MLPerf table (5 and 10 runs: 1; 40: 4)."""
    from mlperf_logging.result_summarizer import result_summarizer as rs

    from daybreak.mlperf_benchmarks import BENCHMARKS

    assert all(stats.mlperf_dropped(b.runs(r)) == b.dropped for b in BENCHMARKS for r in b.rounds)
    rng = np.random.default_rng(seed)
    times = [float(x) for x in rng.uniform(5, 20, 40)]
    for i in rng.choice(40, size=int(rng.integers(0, 6)), replace=False):
        times[int(i)] = math.inf
    failed = sum(math.isinf(t) for t in times)
    score = stats.mlperf_score(times, 40)
    assert "the 4 fastest and 4 slowest dropped" in score.rule
    if failed > 4:
        assert not score.valid and "more than 4" in " ".join(score.notes)
        return
    theirs = rs._compute_olympic_average([t for t in times if math.isfinite(t)], failed, 4)
    assert score.valid and score.score_s == pytest.approx(theirs)
    assert score.score_s != pytest.approx(stats.mlperf_olympic(times, 1) or 0.0)  # not the one-each-end figure


def test_mlperf_window_of_consecutive_runs_closest_to_the_median():
    """M > N runs: each window of N consecutive runs is olympic-scored (an invalid one counts as infinite) and the
    median window is the result (MLPerf Training rules, "Scoring": 10 runs, N = 5 gives 6 windows)."""
    inf = math.inf
    times = [10.0, 11.0, 30.0, 12.0, inf, 13.0, 9.0, inf, 14.0, 10.5]
    # the six windows by hand: drop the fastest and the slowest (an inf is the slowest; two invalidate)
    by_hand = [(11 + 12 + 30) / 3, (12 + 13 + 30) / 3, (12 + 13 + 30) / 3, inf, inf, (10.5 + 13 + 14) / 3]
    assert [stats.mlperf_olympic(times[i:i + 5]) for i in range(6)] == pytest.approx(by_hand)
    score = stats.mlperf_score(times, 5)
    # sorted: 12.5 (5), 17.67 (0), 18.33 (1), 18.33 (2), inf (3), inf (4): an even count, the slower middle one
    assert score.valid and score.score_s == pytest.approx(55 / 3) and (score.first_run, score.stop_run) == (2, 7)
    assert "window of 5 consecutive runs" in score.rule and score.n_failed == 1
    score = stats.mlperf_score(times[:7], 5)  # 3 windows: 17.67, 18.33, 18.33 -> the middle one, window 1
    assert score.valid and score.score_s == pytest.approx(55 / 3) and score.first_run == 1
    invalid = stats.mlperf_score([inf, 10.0, inf, 11.0, 12.0, inf, 13.0], 5)  # every window has 2 failures
    assert not invalid.valid and invalid.score_s is None and "invalid" in " ".join(invalid.notes)
    few = stats.mlperf_score([10.0, inf, 12.0], 5)
    assert few.score_s == pytest.approx(12.0) and any("fewer than the 5" in n for n in few.notes)


def _history(points: list[tuple[float, float]]) -> list[EpochRecord]:
    return [EpochRecord(epoch=i + 1, step=10 * (i + 1), elapsed_s=t, accuracy=acc, top1=acc, eval_s=0.01)
            for i, (t, acc) in enumerate(points)]


def test_threshold_times_first_entry_at_or_above():
    h = _history([(1.0, 0.90), (2.0, 0.955), (3.0, 0.95), (4.0, 0.97), (5.0, 0.98)])
    thresholds = [0.90, 0.95, 0.955, 0.96, 0.98, 0.99]
    assert stats.threshold_times(h, thresholds) == [1.0, 2.0, 2.0, 4.0, 5.0, None]
    assert stats.threshold_epochs(h, thresholds) == [1, 2, 2, 4, 5, None]
    grid = stats.threshold_grid(94.0, 98.0, 0.5)
    assert len(grid) == 9 and grid[0] == 0.94 and grid[-1] == 0.98  # exact floats, as --target 98 gives
    with pytest.raises(ValueError):
        stats.threshold_grid(98, 94, 0.5)


def test_compare_p_values_equal_scipy():
    a = [10.1, 10.5, 9.8, 10.2, 10.9, 10.0]
    b = [10.4, 11.0, 10.2, 10.6, 10.3, 11.2, 10.8]
    res = compare_times(a, b)
    assert res["welch_p"] == pytest.approx(sps.ttest_ind(a, b, equal_var=False).pvalue, rel=1e-12)
    assert res["welch_t"] == pytest.approx(sps.ttest_ind(a, b, equal_var=False).statistic, rel=1e-12)
    assert res["mannwhitney_p"] == pytest.approx(sps.mannwhitneyu(a, b, alternative="two-sided").pvalue, rel=1e-12)
    na, nb = len(a), len(b)
    pooled = np.sqrt(((na - 1) * np.var(a, ddof=1) + (nb - 1) * np.var(b, ddof=1)) / (na + nb - 2))
    g = (np.mean(a) - np.mean(b)) / pooled * (1 - 3 / (4 * (na + nb) - 9))
    assert res["hedges_g"] == pytest.approx(g)

    fast, slow = [5.0, 5.2, 4.9, 5.1, 5.05], [8.0, 8.3, 7.9, 8.1, 8.2]
    clear = compare_times(fast, slow)
    assert clear["verdict"] == "A faster" and clear["welch_p"] < 0.05 and clear["hedges_g"] < 0
    assert compare_times(slow, fast)["verdict"] == "B faster"
    assert compare_times([1.0], [2.0, 3.0])["verdict"] == "not enough runs"


def test_compare_without_a_test_calls_no_side_faster():
    """[5, 5] against [6, 6]: every time on each side the same, so Welch's t is x / 0 and no test decides; compare
    used to call it "A faster" from the two means."""
    res = compare_times([5.0, 5.0], [6.0, 6.0])
    assert res["verdict"] == "no test" and res["welch_p"] is None
    assert any("Welch's t-test is undefined" in n for n in res["notes"])


def test_mann_whitney_names_its_method_as_scipy_1_10_chose_it():
    """Exact without ties when one side has at most 8 runs, asymptotic otherwise: named here rather than left to
    the installed scipy's "auto"."""
    a, b = [1.0, 2.5, 3.1], [4.0, 5.2, 6.3, 7.7]
    assert stats.mann_whitney(a, b)[1] == pytest.approx(sps.mannwhitneyu(a, b, method="exact").pvalue)
    tied = [5.0, 5.0, 6.0], [6.0, 7.0, 8.0]
    assert stats.mann_whitney(*tied)[1] == pytest.approx(sps.mannwhitneyu(*tied, method="asymptotic").pvalue)


def test_roofline_arithmetic():
    out = roofline_numbers(flops_per_step=4e9, bytes_per_step=1e8, achieved=2e11, peak_flops=1e12, bandwidth=1e10)
    assert out["operational_intensity"] == pytest.approx(40.0)
    assert out["attainable_flops_per_s"] == pytest.approx(min(1e12, 1e10 * 40.0))  # 4e11: memory-bound
    assert out["bound"] == "memory"
    assert out["utilization"] == pytest.approx(0.2)
    assert out["fraction_of_roofline"] == pytest.approx(2e11 / 4e11)
    out = roofline_numbers(4e9, 1e6, None, 1e12, 1e10)  # intensity 4000 > ridge 100
    assert out["attainable_flops_per_s"] == pytest.approx(1e12) and out["bound"] == "compute"
    est = bytes_estimate("train", input_bytes=10, activation_bytes=100, parameter_bytes=1000,
                         optimizer_state_bytes=1000)
    assert est.total_bytes == 10 + 2 * 100 + 4 * 1000 + 2 * 1000 + 2 * 1000
    assert bytes_estimate("infer", 10, 100, 1000, 0).total_bytes == 1110


# --- repeat ----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def repeat_dir(tmp_path_factory):
    """A 4-seed digits repeat, made as 3 seeds then resumed to 4 (every trial a fresh `daybreak run` process)."""
    out = tmp_path_factory.mktemp("repeat") / "rep"
    args = ["repeat", "digits", "--out", str(out), "--target", "0.9", "--threads", "1"]
    assert main(args + ["--runs", "3"]) == 0
    first = {p.name: (p / "result.json").read_text() for p in sorted(out.glob("seed-*"))}
    assert main(args + ["--runs", "4"]) == 2  # the directory holds an experiment: finishing it needs --resume
    assert main(args + ["--runs", "4", "--resume"]) == 0
    assert {p.name: (p / "result.json").read_text() for p in sorted(out.glob("seed-*")) if p.name in first} == first
    return out


def test_repeat_summary_statistics(repeat_dir):
    from daybreak.analysis.repeat import RepeatSummary

    s = RepeatSummary.load(repeat_dir)
    results = [RunResult.load(repeat_dir / f"seed-{i}") for i in range(4)]
    assert [r.seed for r in results] == [0, 1, 2, 3] and s.seeds == [0, 1, 2, 3]
    assert [r.reused for r in s.runs] == [True, True, True, False]
    reached = [r for r in results if r.reached]
    times = np.array([r.time_to_target_s for r in reached])
    assert s.n_runs == 4 and s.n_reached == len(reached)
    assert s.reached_fraction == pytest.approx(len(reached) / 4)
    t = s.time_to_target
    assert t.times_s == pytest.approx(list(times))
    assert t.mean_s == pytest.approx(np.mean(times))
    assert t.std_s == pytest.approx(np.std(times, ddof=1))
    assert t.cv == pytest.approx(np.std(times, ddof=1) / np.mean(times))
    assert t.confidence == 0.99  # the experiment default (--confidence)
    logs = np.log(times)
    exp = sps.t.interval(t.confidence, df=len(times) - 1, loc=np.mean(logs), scale=sps.sem(logs))
    assert (t.ci_low_s, t.ci_high_s) == pytest.approx(np.exp(exp))
    assert s.score is not None and s.score.rule.startswith("olympic mean")  # the DAWNBench clock: no MLPerf rule
    assert t.olympic_mean_s == pytest.approx(np.mean(np.sort(times)[1:-1]))
    epochs = [r.epochs_to_target for r in reached]
    assert s.epochs_to_target.values == epochs
    assert (s.epochs_to_target.min, s.epochs_to_target.median, s.epochs_to_target.max) == (
        min(epochs), float(np.median(epochs)), max(epochs))
    assert s.provenance.system is not None and len(s.provenance.inputs) == 4 and s.complete


def test_repeat_prints_the_mlperf_score_and_the_rule_it_used(repeat_dir):
    """Under --rules mlperf the summary's score is MLPerf's (the rule in words, the seeds scored); the text says so."""
    from daybreak.analysis.repeat import RepeatSummary, format_repeat

    s = RepeatSummary.load(repeat_dir)
    times = [r.time_to_target_s if r.reached else math.inf for r in s.runs]
    s = s.model_copy(update={"score": stats.mlperf_score(times + [math.inf, times[0]], 5)})
    s.seeds = s.seeds + [4, 5]
    text = format_repeat(s)
    assert "MLPerf score" in text and "rule           MLPerf: olympic mean" in text
    assert "window of 5 consecutive runs" in text and "over seeds" in text


def test_repeat_records_unreached_runs_and_goes_on(tmp_path, capsys):
    out = tmp_path / "rep"
    code = main(["repeat", "digits", "--runs", "2", "--out", str(out), "--target", "0.999", "--set", "epochs=1",
                 "--threads", "1"])
    assert code == 3  # none reached
    from daybreak.analysis.repeat import RepeatSummary

    s = RepeatSummary.load(out)
    assert s.n_runs == 2 and s.n_reached == 0 and s.reached_fraction == 0
    assert [r.status for r in s.runs] == ["not_reached", "not_reached"]
    assert s.time_to_target.mean_s is None and s.time_to_target.n == 0
    err = capsys.readouterr().err
    assert "[1/2] seed 0: not reached" in err and "[2/2] seed 1: not reached" in err
    # other settings in the same directory: a one-line error, nothing overwritten
    code = main(["repeat", "digits", "--runs", "2", "--out", str(out), "--target", "0.9", "--threads", "1"])
    assert code == 2 and single_line(capsys.readouterr().err)


def test_repeat_bad_inputs_one_line(tmp_path, capsys):
    assert main(["repeat", "digits", "--runs", "0", "--out", str(tmp_path / "r")]) == 2
    assert single_line(capsys.readouterr().err)
    assert main(["repeat", "nosuchtask", "--runs", "1", "--out", str(tmp_path / "r")]) == 2
    assert single_line(capsys.readouterr().err)
    assert main(["repeat", "digits", "--runs", "1", "--set", "nope=1", "--out", str(tmp_path / "r")]) == 2
    assert single_line(capsys.readouterr().err)


# --- threshold -----------------------------------------------------------------------------------------------

def test_threshold_command_uses_first_history_entry(repeat_dir, tmp_path, capsys):
    out = tmp_path / "an"
    assert main(["analyze", "threshold", str(repeat_dir), "--from", "85%", "--to", "0.9", "--step", "1",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    a = json.loads((out / "threshold.json").read_text())
    assert a["thresholds"] == [0.85, 0.86, 0.87, 0.88, 0.89, 0.90]
    assert (out / "threshold.png").stat().st_size > 0 and (out / "threshold.md").exists()
    for row in a["runs"]:
        hist = RunResult.load(row["run_dir"]).history
        for thr, got in zip(a["thresholds"], row["times_s"]):
            first = next((h for h in hist if h.accuracy >= thr), None)
            assert got == (None if first is None else first.elapsed_s)
    # the 90% column equals each run's own time-to-target
    for row in a["runs"]:
        r = RunResult.load(row["run_dir"])
        if r.reached:
            assert row["times_s"][-1] == pytest.approx(r.time_to_target_s)
    assert a["provenance"]["system"] and len(a["provenance"]["inputs"]) == 4
    # default range: 4 points below the target in 0.5 steps
    assert main(["analyze", "threshold", str(repeat_dir / "seed-0"), "--out", str(out), "--json"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert a["thresholds"][0] == pytest.approx(0.86) and a["thresholds"][-1] == 0.9 and len(a["thresholds"]) == 9


def test_analysis_bad_paths_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for args in (["analyze", "threshold", str(tmp_path / "missing")],
                 ["analyze", "threshold", str(tmp_path / "empty")],
                 ["analyze", "scaling", str(tmp_path / "empty")],
                 ["analyze", "roofline", str(tmp_path / "empty")],
                 ["report", str(tmp_path / "empty"), "--out", str(tmp_path / "rep")],
                 ["compare", str(tmp_path / "empty"), "--", str(tmp_path / "empty")],
                 ["compare", str(tmp_path / "a")],
                 ["evaluate", str(tmp_path / "missing"), "--data-dir", str(tmp_path)]):
        code = main(args)
        err = capsys.readouterr().err
        assert code == 2, args
        assert single_line(err), (args, err)


# --- lesion ----------------------------------------------------------------------------------------------------

def test_lesion_variants_pure():
    from daybreak.analysis.lesion import lesion_variants, parse_switches
    from daybreak.errors import ConfigError
    from daybreak.recipes import get_recipe

    r = get_recipe("cifar10")
    assert parse_switches("tta,whitening", r) == ["tta", "whitening"]
    assert parse_switches(None, r) == list(r.switches)
    assert parse_switches("", r) == []
    with pytest.raises(ConfigError):
        parse_switches("tta,warp_drive", r)
    variants = lesion_variants(r, [], {"epochs": 3})
    assert variants == [("full", [], {"epochs": 3})]
    assert r.hyperparameters(variants[0][2]) == r.hyperparameters({"epochs": 3})
    assert lesion_variants(r, ["tta"], {})[1] == ("no-tta", ["tta"], {"tta": False})


def _lesion_of(times: dict[str, list[float]], confidence: float = 0.95):
    """A LesionSummary of made-up times (inf: not reached), each variant's comparison the paired ratio to full."""
    from daybreak.analysis.paired import paired_ratio
    from daybreak.records.lesion import LesionSummary, LesionVariant
    from daybreak.records.provenance import Provenance

    full = times["full"]
    variants = []
    for name, ts in times.items():
        reached = [t for t in ts if math.isfinite(t)]
        variants.append(LesionVariant(
            name=name, switched_off=[] if name == "full" else [name[3:]], hyperparameters={}, directory=name,
            n_runs=len(ts), n_reached=len(reached), reached_fraction=len(reached) / len(ts),
            mean_time_to_target_s=stats.mean(reached) if reached else None, mean_final_accuracy=0.97,
            time_ratio=stats.mean(reached) / stats.mean(full) if reached else None,
            comparison=None if name == "full" else paired_ratio(full, ts, confidence=confidence)))
    return LesionSummary(task="digits", recipe="digits", target=0.95, metric="top1", switches=[], runs_per=5,
                         seeds=list(range(5)), variants=variants, confidence=confidence, provenance=Provenance())


def test_the_lesion_plot_draws_what_its_table_prints():
    """Read the bars back: each variant's height and label are the table's paired ratio (its text exactly), the
    error bar its interval; a variant that reached once in 8 s and missed 4 times against 5 x 10 s is "inf" in
    the table and a "not reached" bar, where the plot used to draw the unpaired mean of its one reached run, a
    flattering 0.80x."""
    from daybreak.analysis import plots
    from daybreak.analysis.lesion import table_rows

    inf = math.inf
    s = _lesion_of({"full": [10.0] * 5, "no-augment": [8.0, inf, inf, inf, inf],
                    "no-tta": [11.0, 12.0, 10.5, 11.5, 12.2]})
    header, body = table_rows(s)
    col = header.index("time ratio (paired)")
    fig = plots.lesion_figure(s)
    try:
        ax = fig.axes[0]
        bars = {p.get_gid(): p for p in ax.patches if p.get_gid()}
        labels = {t.get_gid(): t.get_text() for t in ax.texts}
        top = ax.get_ylim()[1]
        for row, v in zip(body, s.variants):
            if v.name == "full":
                assert bars["full"].get_height() == 1.0 and labels["label-full"] == "baseline"
                continue
            ratio = v.comparison.ratio
            if math.isinf(ratio):
                assert row[col] == "infx" and labels[f"label-{v.name}"] == "not reached (1/5)"
                assert bars[v.name].get_hatch() == "//" and bars[v.name].get_height() >= top / 1.1
                assert v.time_ratio == pytest.approx(0.8)  # the unpaired figure the plot no longer draws
            else:
                assert labels[f"label-{v.name}"] == row[col]
                assert bars[v.name].get_height() == pytest.approx(ratio)
                ci = next(c for c in ax.collections if c.get_gid() == f"ci-{v.name}")
                (_, low), (_, high) = ci.get_segments()[0]
                assert (low, high) == pytest.approx((v.comparison.ci_low, v.comparison.ci_high))
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_lesion_digits_augment(tmp_path, capsys):
    from daybreak.recipes import get_recipe

    out = tmp_path / "les"
    assert main(["lesion", "digits", "--without", "augment", "--runs-per", "1", "--target", "0.9",
                 "--threads", "1", "--out", str(out)]) == 0
    full = RunResult.load(out / "full" / "seed-0")
    lesioned = RunResult.load(out / "no-augment" / "seed-0")
    # nothing switched off: exactly the recipe's configuration
    assert full.hyperparameters == get_recipe("digits").hyperparameters({})
    assert full.hyperparameters["augment"] is True
    assert json.loads((out / "no-augment" / "seed-0" / "result.json").read_text())["hyperparameters"]["augment"] is False
    assert {k: v for k, v in lesioned.hyperparameters.items() if k != "augment"} == {
        k: v for k, v in full.hyperparameters.items() if k != "augment"}
    s = json.loads((out / "lesion.json").read_text())
    assert [v["name"] for v in s["variants"]] == ["full", "no-augment"]
    v_full, v_no = s["variants"]
    assert v_full["time_ratio"] == pytest.approx(1.0)
    if lesioned.reached and full.reached:
        assert v_no["time_ratio"] == pytest.approx(lesioned.time_to_target_s / full.time_to_target_s)
    assert v_no["final_accuracy_ratio"] == pytest.approx(lesioned.final_accuracy / full.final_accuracy)
    assert (out / "lesion.png").stat().st_size > 0 and "no-augment" in (out / "lesion.md").read_text()
    assert s["provenance"]["system"] and s["provenance"]["inputs"]
    capsys.readouterr()

    code = main(["lesion", "digits", "--without", "augment,warp", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and single_line(err) and "warp" in err and "augment" in err
    assert not (tmp_path / "x").exists()


# --- compare (hand-made run records) ----------------------------------------------------------------------------

def _fake_runs(template: Path, folder: Path, times: list[float | None], world_size: int = 1,
               per_epoch: float | None = None, threads: int | None = None) -> list[Path]:
    base = RunResult.load(template)
    dirs = []
    for i, t in enumerate(times):
        r = base.model_copy(deep=True)
        d = folder / f"seed-{i}"
        d.mkdir(parents=True)
        r.run_id, r.seed, r.world_size = d.name, i, world_size
        r.threads = threads or r.threads
        r.phases, r.clocks = [], {}  # the made-up times below are the whole story
        if t is None:
            r.reached, r.status, r.time_to_target_s, r.epochs_to_target = False, "not_reached", None, None
            r.history = _history([(1.0, 0.5), (2.0, 0.6)])
        else:
            r.reached, r.status, r.time_to_target_s = True, "reached", t
            epochs = 2 if per_epoch is None else max(1, round(t / per_epoch))
            step_t = t / epochs
            r.history = _history([(step_t * (k + 1), 0.5 + 0.45 * (k + 1) / epochs) for k in range(epochs)])
            r.epochs_to_target = float(epochs)
        r.save(d)
        dirs.append(d)
    return dirs


def test_compare_command(repeat_dir, tmp_path, capsys):
    _fake_runs(repeat_dir / "seed-0", tmp_path / "a", [5.0, 5.2, 4.9, 5.1, None])
    b = _fake_runs(repeat_dir / "seed-0", tmp_path / "b", [8.0, 8.3, 7.9, 8.1])
    assert main(["compare", "--out", str(tmp_path / "c.json"), str(tmp_path / "a"), "--", *map(str, b)]) == 0
    text = capsys.readouterr().out
    assert "A reaches the target faster than B" in text and "Hedges' g" in text
    c = json.loads((tmp_path / "c.json").read_text())
    ta, tb = [5.0, 5.2, 4.9, 5.1], [8.0, 8.3, 7.9, 8.1]
    assert c["verdict"] == "A faster" and c["welch_p"] < 0.05
    assert c["welch_p"] == pytest.approx(sps.ttest_ind(ta, tb, equal_var=False).pvalue)
    assert c["mannwhitney_p"] == pytest.approx(sps.mannwhitneyu(ta, tb, alternative="two-sided").pvalue)
    assert c["a"]["n_runs"] == 5 and c["a"]["n_reached"] == 4 and len(c["a"]["excluded"]) == 1
    assert c["a"]["times_s"] == ta
    assert main(["compare", "--json", "--a", str(tmp_path / "b"), "--b", str(tmp_path / "a")]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "B faster"
    # an --out that cannot be written: one line naming it, as every other command answers (was a traceback)
    assert main(["compare", "--out", "/proc/x.json", str(tmp_path / "a"), "--", *map(str, b)]) == 2
    assert single_line(err := capsys.readouterr().err) and "/proc/x.json: cannot write it" in err
    # every time the same on each side: no test, and the output says so
    same_a = _fake_runs(repeat_dir / "seed-0", tmp_path / "same-a", [5.0, 5.0])
    same_b = _fake_runs(repeat_dir / "seed-0", tmp_path / "same-b", [6.0, 6.0])
    assert main(["compare", *map(str, same_a), "--", *map(str, same_b)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no test: every run on each side has the same time-to-target") and "A faster" not in out
    assert "test                  Welch's t-test, two-sided" in out


# --- scaling -------------------------------------------------------------------------------------------------

def _sweep(folder: Path, per_device: float = 1000.0, efficiency: dict[int, float] | None = None) -> Path:
    from daybreak.measure.system import system_info
    from daybreak.records.throughput import ThroughputConfig, ThroughputResult

    folder.mkdir(parents=True)
    efficiency = efficiency or {1: 1.0, 2: 0.9, 4: 0.75}
    lines = []
    for devices, eff in efficiency.items():
        cfg = ThroughputConfig(model="digits_cnn", batch_size=64, devices=devices, steps=10)
        sps_ = per_device * devices * eff
        median = 64 * devices * 10 / sps_
        flops = 2.0e7 * devices
        lines.append(ThroughputResult(
            config=cfg, status="ok", batch_size=64, global_batch_size=64 * devices, world_size=devices,
            times_s=[median], median_time_s=median, samples_per_s=sps_, flops_per_step=int(flops),
            achieved_flops_per_s=flops * 10 / median, peak_precision="fp32", peak_flops_per_s=1e11 * devices,
            peak_bandwidth_bytes_per_s=1e10, device_name="Test CPU", system=system_info(),
        ).model_dump_json())
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_scaling_from_sweep_and_runs(repeat_dir, tmp_path, capsys):
    """CPU sweep rows and CPU runs are measured against the same ideal (ratio of total threads): here the runs
    kept their threads per process (2 x 2 threads against 1 x 2), so the ideal is 2x; the sweep's rows, older
    records without thread counts on the default split of the cores, 1x."""
    sweep = _sweep(tmp_path / "sweep")
    _fake_runs(repeat_dir / "seed-0", tmp_path / "w1", [10.0, 10.0], world_size=1, per_epoch=2.5, threads=2)
    _fake_runs(repeat_dir / "seed-0", tmp_path / "w2", [8.0, 8.0], world_size=2, per_epoch=1.0, threads=2)
    out = tmp_path / "an"
    assert main(["analyze", "scaling", str(sweep), str(tmp_path / "w1"), str(tmp_path / "w2"), "--out", str(out)]) == 0
    a = json.loads((out / "scaling.json").read_text())
    (g,) = a["throughput"]
    assert [r["world_size"] for r in g["rows"]] == [1, 2, 4]
    assert [r["speedup"] for r in g["rows"]] == pytest.approx([1.0, 1.8, 3.0])
    assert [r["efficiency"] for r in g["rows"]] == pytest.approx([1.0, 1.8, 3.0])  # ideal 1x: same total cores
    assert {r["efficiency_basis"] for r in g["rows"]} == {"same_total_cores"}
    (rg,) = a["runs"]
    r1, r2 = rg["rows"]
    assert (r1["world_size"], r2["world_size"]) == (1, 2)
    assert r2["tta_speedup"] == pytest.approx(10.0 / 8.0)
    assert r2["epoch_speedup"] == pytest.approx(r1["mean_time_per_epoch_s"] / r2["mean_time_per_epoch_s"])
    assert r2["epoch_speedup"] == pytest.approx(2.5)  # per epoch it scales; to the target it does not
    assert (r2["ideal_speedup"], r2["efficiency_basis"]) == (2.0, "same_threads_per_process")
    assert r2["tta_efficiency"] == pytest.approx(10.0 / 8.0 / 2) and r2["epoch_efficiency"] == pytest.approx(2.5 / 2)
    assert (out / "scaling.png").stat().st_size > 0
    text = capsys.readouterr().out
    assert "TTA speedup" in text
    # an efficiency above 100% is flagged in the record, the tables and scaling.md, never printed as a plain fact
    # (`analyze scaling` printed 402% unflagged): these sweep rows predate the sweep's own flags
    assert not g["rows"][0]["flags"] and "scaling efficiency 300% is above 100%" in g["rows"][2]["flags"][0]
    assert "time-per-epoch efficiency 125% is above 100%" in r2["flags"][0] and not r1["flags"]
    assert "300% (!)" in text and "125% (!)" in text and "(!) scaling efficiency 300%" in text
    assert "(!) time-per-epoch efficiency 125%" in (out / "scaling.md").read_text()


def test_cpu_runs_and_cpu_sweep_rows_share_the_ideal(repeat_dir, tmp_path):
    """Two processes of one thread against one of two threads (torchrun on a 2-core machine): the same cores, so
    the ideal is 1.00x, as for a sweep row on the default split of the cores, not the device count."""
    from daybreak.analysis.scaling import analyze_scaling
    from daybreak.records.throughput import ThroughputConfig, ThroughputResult, scaling_basis

    _fake_runs(repeat_dir / "seed-0", tmp_path / "w1", [10.0], world_size=1, threads=2)
    _fake_runs(repeat_dir / "seed-0", tmp_path / "w2", [8.0], world_size=2, threads=1)
    (group,) = analyze_scaling([tmp_path / "w1", tmp_path / "w2"]).runs
    r2 = group.rows[1]
    assert (r2.ideal_speedup, r2.efficiency_basis) == (1.0, "same_total_cores")
    assert r2.tta_efficiency == pytest.approx(10.0 / 8.0)
    rows = [ThroughputResult(config=ThroughputConfig(model="digits_cnn", batch_size=8, devices=d), status="ok",
                             batch_size=8, global_batch_size=8 * d, world_size=d, threads_per_process=2 // d)
            for d in (1, 2)]
    assert scaling_basis(rows[1], rows[0]) == ("same_total_cores", 1.0)


# --- roofline ----------------------------------------------------------------------------------------------------

def _peak_file(path: Path, flops: float = 5e10, bandwidth: float = 2e9) -> Path:
    from daybreak.records.throughput import PeakResult

    p = PeakResult(machine_key="test", device="cpu", device_name="Test CPU", torch="x", threads=1,
                   flops_per_s={"fp32": flops}, bandwidth_bytes_per_s=bandwidth, measured_at=datetime.now(timezone.utc))
    path.write_text(p.model_dump_json())
    return path


def test_a_utilization_above_100_percent_is_flagged_in_the_record():
    """A point whose achieved FLOP/s exceed the measured peak (a peak measured on a busy machine once gave
    50,998%): the record's notes carry the (!) flag with the reason, and the table marks the figure."""
    from daybreak.analysis.roofline import RooflineAnalysis, RooflinePoint, _fill, table_rows
    from daybreak.records.throughput import PeakResult

    peak = PeakResult(machine_key="k", device="cpu", device_name="x", torch="t", flops_per_s={"fp32": 7.7e6},
                      bandwidth_bytes_per_s=1e9, measured_at=datetime.now(timezone.utc))
    point = _fill(RooflinePoint(kind="sweep", label="p", source="s", precision="fp32", world_size=1,
                                achieved_flops_per_s=3.9e9), peak)
    assert point.utilization == pytest.approx(3.9e9 / 7.7e6)
    assert any(n.startswith("(!) utilization 50649% of the measured fp32 peak is above 100%") for n in point.notes)
    from daybreak.records.provenance import Provenance

    _, body = table_rows(RooflineAnalysis(points=[point], provenance=Provenance()))
    assert any("(!)" in cell for cell in body[0])


def test_roofline_of_a_run_and_a_sweep(repeat_dir, tmp_path, capsys):
    from daybreak.measure.flops import step_flops

    peak = _peak_file(tmp_path / "peak.json")
    sweep = _sweep(tmp_path / "sweep")
    out = tmp_path / "an"
    assert main(["analyze", "roofline", str(repeat_dir / "seed-0"), str(sweep), "--peak", str(peak),
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "estimate" in text
    a = json.loads((out / "roofline.json").read_text())
    run_pt = a["points"][0]
    r = RunResult.load(repeat_dir / "seed-0")
    assert run_pt["kind"] == "run" and run_pt["steps"] == r.steps_to_target
    # achieved FLOP/s over the training phases up to the target; the headline clock's figure beside it, labelled
    train_s = sum(p.end_s - p.start_s for p in r.phases if p.phase == "train"
                  and p.end_s <= [e for e in r.phases if e.phase == "eval"][len(r.history) - 1].end_s)
    assert run_pt["seconds"] == pytest.approx(train_s) and run_pt["seconds_basis"] == "training phases up to the target"
    assert run_pt["achieved_flops_per_s"] == pytest.approx(run_pt["flops_per_step"] * r.steps_to_target / train_s)
    assert run_pt["headline_achieved_flops_per_s"] == pytest.approx(
        run_pt["flops_per_step"] * r.steps_to_target / r.time_to_target_s)
    assert run_pt["headline_rules"] == r.rules and "training phases" in text
    assert run_pt["operational_intensity"] == pytest.approx(run_pt["flops_per_step"] / run_pt["bytes_per_step"])
    assert run_pt["attainable_flops_per_s"] == pytest.approx(min(5e10, 2e9 * run_pt["operational_intensity"]))
    assert run_pt["utilization"] == pytest.approx(run_pt["achieved_flops_per_s"] / 5e10)
    # the FLOPs are daybreak.measure.flops' count of the recipe's step at the run's batch
    import torch

    from daybreak.data.digits import load_digits_task
    from daybreak.recipes import get_recipe

    data = load_digits_task()
    setup = get_recipe("digits").build(r.hyperparameters, data, torch.device("cpu"))
    x = setup.prepare(data.train_x[:64])
    assert run_pt["flops_per_step"] == step_flops(setup.model, x, data.train_y[:64], setup.loss_fn, True)
    b = run_pt["bytes_breakdown"]
    params = sum(p.numel() * 4 for p in setup.model.parameters())
    assert b["parameter_bytes"] == params and b["optimizer_state_bytes"] == params  # SGD momentum buffers
    assert b["input_bytes"] == x.numel() * 4
    sweep_pts = a["points"][1:]
    assert len(sweep_pts) == 3 and all(p["kind"] == "sweep" for p in sweep_pts)
    for p in sweep_pts:
        assert p["peak_flops_per_s"] == pytest.approx(1e11 * p["world_size"])  # the sweep's own ceilings
        assert p["peak_bandwidth_bytes_per_s"] == pytest.approx(1e10 * p["world_size"])
        assert p["operational_intensity"] == pytest.approx(p["flops_per_step"] / p["bytes_per_step"])
    assert "estimated" in a["bytes_method"] and a["provenance"]["system"]
    assert (out / "roofline.png").stat().st_size > 0


# --- generalization ------------------------------------------------------------------------------------------

def test_evaluate_mnist_on_another_set(tmp_path, capsys):
    from daybreak.data.synthetic import write_mnist
    from daybreak.infer.latency import load_for_inference
    from daybreak.tasks.evaluate import evaluate

    write_mnist(tmp_path / "m1", 600, 200, seed=0)
    write_mnist(tmp_path / "m2", 20, 150, seed=1)
    run = tmp_path / "run"
    assert main(["run", "mnist", "--data-dir", str(tmp_path / "m1"), "--allow-custom-data", "--target", "0.5",
                 "--set", "epochs=4", "--set", "batch_size=32", "--threads", "1", "-q", "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(run), "--data-dir", str(tmp_path / "m2")]) == 2  # custom data needs the flag
    assert single_line(capsys.readouterr().err)
    assert main(["evaluate", str(run), "--data-dir", str(tmp_path / "m2"), "--allow-custom-data", "--device", "cpu"]) == 0
    entries = json.loads((run / "generalization.json").read_text())
    assert len(entries) == 1
    e = entries[0]
    loaded = load_for_inference(run, device="cpu", amp="off", data_dir=tmp_path / "m2", download=False,
                                allow_custom_data=True)
    top1, _ = evaluate(loaded.model, loaded.inputs, loaded.labels, device=loaded.device, predict=loaded.predict)
    assert e["n"] == 150 and e["accuracy"] == pytest.approx(top1)
    r = RunResult.load(run)
    assert e["original_accuracy"] == pytest.approx(r.history[-1].accuracy)
    assert e["difference"] == pytest.approx(top1 - e["original_accuracy"])
    assert e["system"]["torch"] and e["data_dir"] == str(tmp_path / "m2")
    # a second data dir appends
    assert main(["evaluate", str(run), "--data-dir", str(tmp_path / "m1"), "--allow-custom-data", "--device", "cpu"]) == 0
    entries = json.loads((run / "generalization.json").read_text())
    assert len(entries) == 2 and entries[1]["accuracy"] == pytest.approx(entries[1]["original_accuracy"])


def test_evaluate_digits_has_no_data_dir(repeat_dir, tmp_path, capsys):
    assert main(["evaluate", str(repeat_dir / "seed-0"), "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert single_line(err) and "digits" in err


# --- report ------------------------------------------------------------------------------------------------------

def test_report_html_tables_images_and_escaping(repeat_dir, tmp_path, capsys):
    evil = "<script>alert('x')</script>"
    bad = tmp_path / "evil"
    shutil.copytree(repeat_dir / "seed-0", bad)
    data = json.loads((bad / "result.json").read_text())
    data["recipe"], data["model"], data["run_id"] = evil, evil + "&", "evil<b>run</b>"
    (bad / "result.json").write_text(json.dumps(data))
    sweep = _sweep(tmp_path / "sweep")
    lesion = tmp_path / "les"  # a lesion directory with hand-made runs (no training)
    from daybreak.analysis.lesion import LesionSummary, LesionVariant, write_lesion_views
    from daybreak.analysis.sources import provenance

    _fake_runs(repeat_dir / "seed-0", lesion / "full", [2.0])
    _fake_runs(repeat_dir / "seed-0", lesion / "no-augment", [3.0])
    hp = RunResult.load(repeat_dir / "seed-0").hyperparameters
    summary = LesionSummary(task="digits", recipe="digits", target=0.9, metric="top1", switches=["augment"],
                            runs_per=1, seeds=[0], provenance=provenance([]), variants=[
                                LesionVariant(name="full", hyperparameters=hp, directory="full", n_runs=1, n_reached=1,
                                              reached_fraction=1, mean_time_to_target_s=2.0, time_ratio=1.0,
                                              mean_final_accuracy=0.95),
                                LesionVariant(name="no-augment", switched_off=["augment"], hyperparameters=hp,
                                              directory="no-augment", n_runs=1, n_reached=1, reached_fraction=1,
                                              mean_time_to_target_s=3.0, time_ratio=1.5, mean_final_accuracy=0.95)])
    summary.save(lesion)
    write_lesion_views(summary, lesion)
    out = tmp_path / "report"
    peak = _peak_file(tmp_path / "peak.json")
    assert main(["report", str(repeat_dir), str(bad), str(sweep), str(lesion), "--peak", str(peak),
                 "--out", str(out)]) == 0
    page = (out / "index.html").read_text()
    md = (out / "report.md").read_text()
    for title in ("Runs", "Stability", "Threshold sensitivity", "Lesion study", "Scaling", "Roofline"):
        assert f">{title}" in page and f"## {title}" in md, title
    assert page.count("<table>") >= 6
    for img in ("curves.png", "repeat-0.png", "threshold-0.png", "lesion-0.png", "scaling.png", "roofline.png"):
        assert f'<img src="{img}"' in page and (out / img).stat().st_size > 0, img
    assert "<script>" not in page and "<b>run</b>" not in page
    assert "<script>" not in md and "&lt;script&gt;" in md
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "evil&lt;b&gt;run&lt;/b&gt;" in page
    assert "Olympic mean".lower() in page.lower() and "coefficient of variation" in page
    rep = json.loads((out / "report.json").read_text())
    assert rep["provenance"]["system"] and len(rep["provenance"]["inputs"]) == 4
