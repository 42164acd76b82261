"""`daybreak analyze score`: AlgoPerf's cross-task score (the integrated performance profile).

The arithmetic is checked on a constructed example computed by hand (3 submissions x 3 tasks, one task unsolved,
one ratio beyond r_max); the command runs on records cloned from a real digits run (chosen times) and end to end
on real digits and mnist runs made in this process.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from daybreak.analysis import stats
from daybreak.cli import main
from daybreak.records.run import ClockFigure, RunResult
from daybreak.records.score import ScoreAnalysis

from conftest import single_line
from doc_pages import section

REPO = Path(__file__).resolve().parents[1]
INF = math.inf

# The constructed example, r_max = 4. Times in seconds (inf: never reached the target):
#
#              cifar10          imagenet         squad
#   A          10  (r 1)        30  (r 2)        40  (r 1.6)
#   B          20  (r 2)        15  (r 1)       100  (r 4 = r_max)
#   C          50  (r 5 > r_max) inf (unsolved)   25  (r 1)
#
# task score max(0, (4 - r) / 3):
#   A: 1, 2/3, 0.8            -> (1 + 2/3 + 4/5) / 3 = 37/45 = 0.8222...
#   B: 2/3, 1, 0              -> (2/3 + 1 + 0) / 3   = 5/9   = 0.5555...
#   C: 0, 0, 1                -> 1/3
EXAMPLE = {"A": {"cifar10": 10.0, "imagenet": 30.0, "squad": 40.0},
           "B": {"cifar10": 20.0, "imagenet": 15.0, "squad": 100.0},
           "C": {"cifar10": 50.0, "imagenet": INF, "squad": 25.0}}
TASKS = ["cifar10", "imagenet", "squad"]
HAND_SCORES = {"A": 37 / 45, "B": 5 / 9, "C": 1 / 3}
HAND_RATIOS = {"A": [1.0, 2.0, 1.6], "B": [2.0, 1.0, 4.0], "C": [5.0, INF, 1.0]}


# --- the arithmetic ------------------------------------------------------------------------------------------------

def profile_area(profile, r_max):
    """AlgoPerf's integral definition of the score, the oracle for stats.algoperf_score's closed form: the area under
    the step profile (constant from each tau to the next) from 1 to r_max, divided by r_max - 1."""
    area = 0.0
    for (tau, rho), (next_tau, _) in zip(profile, profile[1:]):
        area += rho * (next_tau - tau)
    return area / (r_max - 1)


def test_hand_computed_algoperf_score():
    best = stats.best_times(EXAMPLE, TASKS)
    assert best == {"cifar10": 10.0, "imagenet": 15.0, "squad": 25.0}
    for name, row in EXAMPLE.items():
        ratios = [stats.performance_ratio(row[t], best[t]) for t in TASKS]
        assert ratios == pytest.approx(HAND_RATIOS[name])
        score = stats.algoperf_score(ratios, 4.0)
        assert score == pytest.approx(HAND_SCORES[name], abs=1e-12)
        # AlgoPerf's definition: the area under the performance profile from 1 to r_max, / (r_max - 1)
        profile = stats.performance_profile(ratios, 4.0)
        assert profile_area(profile, 4.0) == pytest.approx(score, abs=1e-12)
        assert profile[0][0] == 1.0 and profile[-1][0] == 4.0
    assert stats.performance_profile(HAND_RATIOS["A"], 4.0) == [(1.0, 1 / 3), (1.6, 2 / 3), (2.0, 1.0), (4.0, 1.0)]
    # C: r = 5 is beyond r_max and inf never counts: the profile stays at 1/3
    assert stats.performance_profile(HAND_RATIOS["C"], 4.0) == [(1.0, 1 / 3), (4.0, 1 / 3)]
    assert stats.task_score(4.0) == 0.0 and stats.task_score(5.0) == 0.0 and stats.task_score(INF) == 0.0
    assert stats.task_score(1.0) == 1.0 and stats.task_score(2.5, r_max=4.0) == pytest.approx(0.5)
    # a larger r_max gives the slow results some credit: B's squad (r 4) and C's cifar10 (r 5) at r_max 6
    assert stats.algoperf_score(HAND_RATIOS["C"], 6.0) == pytest.approx((1 / 5 + 0 + 1) / 3)


# --- AlgoPerf's own numerics ------------------------------------------------------------------------------------
# Three submissions on AlgoPerf's 8 base workloads, each workload's times one per study (inf: not reached). The
# expected scores were computed by the official code, algorithmic-efficiency at commit 2c90454f
# (scoring/performance_profile.py: compute_performance_profiles(time_col, min_tau=1.0, max_tau=4.0, num_points=100,
# scale="linear") and score_submissions.compute_leaderboard_score(normalize=True), as score_submissions.py calls
# them; numpy 1.26.4, pandas 2.2.3), on eval logs made to reach the target at exactly these times, with only the
# workload registry's target lookup replaced (it imports each workload's jax module). Run outside this repository.
WORKLOADS = ["criteo1tb", "fastmri", "imagenet_resnet", "imagenet_vit", "librispeech_conformer",
             "librispeech_deepspeech", "ogbg", "wmt"]
OFFICIAL_EXAMPLE = {
    "fast": dict(zip(WORKLOADS, [[100.0]] * 6 + [[200.0], [100.0]])),
    "steady": dict(zip(WORKLOADS, [[200.0], [250.0], [300.0], [400.0], [401.0], [INF], [100.0], [150.0]])),
    "medians": dict(zip(WORKLOADS, [[150.0, 170.0, INF], [120.0, INF], [INF, INF, 110.0], [130.0, 140.0], [180.0],
                                    [390.0], [260.0, 250.0, 240.0], [100.0]])),
}
OFFICIAL_SCORES = {"fast": 0.9589646464646465, "steady": 0.41856060606060647, "medians": 0.48926767676767735}
# Two submissions the two numerics order differently (found by a search, scored by the official code as above):
# the exact integral puts a first (0.89167 vs 0.89040), the official code b (0.89205 vs 0.89268).
FLIP = {"a": dict(zip(WORKLOADS, [150.0, 125.0, 125.0, 150.0, 300.0, 110.0, 300.0, 125.0])),
        "b": dict(zip(WORKLOADS, [125.0, 250.0, 200.0, 250.0, 150.0, 150.0, 125.0, 125.0]))}
FLIP_OFFICIAL = {"a": 0.8920454545454545, "b": 0.8926767676767677}


def test_the_readmes_score_figures_are_the_codes():
    """The figures of `analyze score` on the analyses' page (the README's section "Analyses" until 0.5.0)."""
    readme = " ".join(section("Analyses (after the DAWNBench analysis paper)")[1].split())
    assert "0.5 at 2.5x the fastest" in readme and stats.task_score(2.5) == 0.5
    assert "scores (0.5 + 0) / 2 = 0.25" in readme and stats.algoperf_score([2.5, INF]) == 0.25
    assert "r = 2 scores 0.6667 exactly, 0.6717 officially" in readme
    assert (round(stats.algoperf_score([2.0]), 4), round(stats.official_score([2.0]), 4)) == (0.6667, 0.6717)
    assert "scores 0 exactly and 0.00505 officially" in readme and round(stats.official_score([4.0]), 5) == 0.00505


def test_official_numerics_equal_the_official_codes_scores():
    times = {s: {w: stats.cell_time(ts) for w, ts in row.items()} for s, row in OFFICIAL_EXAMPLE.items()}
    ratios = stats.official_ratios(times, WORKLOADS)
    for name, expected in OFFICIAL_SCORES.items():
        assert stats.official_score(ratios[name]) == pytest.approx(expected, rel=1e-13)
    best = stats.best_times(times, WORKLOADS)
    exact = {s: stats.algoperf_score([stats.performance_ratio(times[s][w], best[w]) for w in WORKLOADS])
             for s in times}
    assert all(abs(exact[s] - OFFICIAL_SCORES[s]) <= 1 / 198 for s in exact)  # half a grid step at most
    assert ratios["steady"][4] == INF  # 401 s is above 4 x 100 s: cut before dividing, as the official code does
    flip = stats.official_ratios(FLIP, WORKLOADS)
    assert {s: stats.official_score(flip[s]) for s in FLIP} == pytest.approx(FLIP_OFFICIAL, rel=1e-13)
    best = stats.best_times(FLIP, WORKLOADS)
    flip_exact = {s: stats.algoperf_score([stats.performance_ratio(FLIP[s][w], best[w]) for w in WORKLOADS])
                  for s in FLIP}
    assert flip_exact["a"] > flip_exact["b"] and FLIP_OFFICIAL["a"] < FLIP_OFFICIAL["b"]


@pytest.mark.parametrize("seed", range(20))
def test_official_numerics_are_numpys_linspace_and_trapezoid(seed):
    """The grid is numpy.linspace(1, r_max, 100) to the last bit, and the score numpy's trapezoid of the profile
    over it (numpy.trapz in the official code; numpy.trapezoid in numpy 2)."""
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(seed)
    r_max = float(rng.choice([4.0, 6.0, 2.5]))
    assert stats.official_tau_grid(r_max) == list(np.linspace(1.0, r_max, 100))
    ratios = [float(x) for x in rng.choice([1.0, INF, *rng.uniform(1, r_max + 1, 5)], size=int(rng.integers(1, 9)))]
    profile = stats.official_profile(ratios, r_max)
    taus = np.array([p[0] for p in profile])
    rho = np.array([sum(1 for r in ratios if r <= t) / len(ratios) for t in taus])
    trapezoid = getattr(np, "trapezoid", None) or np.trapz
    assert stats.official_score(ratios, r_max) == pytest.approx(float(trapezoid(rho, x=taus)) / (r_max - 1),
                                                                abs=1e-14)


def test_the_time_of_several_runs_is_their_median_unreached_counting_as_infinite():
    assert stats.cell_time([9.0, 30.0, 10.0]) == 10.0
    assert stats.cell_time([15.0, INF, 15.0]) == 15.0  # 2 of 3 reached: solved
    assert stats.cell_time([10.0, INF, INF]) == INF  # 1 of 3: unsolved
    assert stats.cell_time([10.0, 14.0]) == 12.0
    assert stats.cell_time([10.0, INF]) == INF  # half is not more than half
    assert stats.cell_time([]) == INF
    for bad in (4.0, 1.0, 0.5, float("nan"), INF):
        if bad > 1 and math.isfinite(bad):
            assert stats.check_r_max(bad) == bad
        else:
            with pytest.raises(ValueError):
                stats.check_r_max(bad)


# --- the command on records with chosen times ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_runs(tmp_path_factory):
    """Real runs: digits (SGD, reaches 98%), digits with examples/recipes/digits_wide.py (AdamW), digits cut to one
    epoch (does not reach 98%), and mnist (SGD) on a small synthetic set to 50%."""
    from daybreak.data.synthetic import write_mnist

    root = tmp_path_factory.mktemp("score-runs")
    common = ["-q", "--threads", "1"]
    runs = {
        "digits_sgd": ["run", "digits", *common],
        "digits_adamw": ["run", "digits", "--recipe", str(REPO / "examples/recipes/digits_wide.py"), *common],
        "digits_short": ["run", "digits", "--set", "epochs=1", *common],
        "mnist_sgd": ["run", "mnist", "--data-dir", str(root / "mnist-data"), "--allow-custom-data", "--target",
                      "0.5", "--set", "epochs=4", "--set", "batch_size=32", *common],
    }
    write_mnist(root / "mnist-data", 600, 200, seed=0)
    for name, argv in runs.items():
        main([*argv, "--out", str(root / name)])  # digits_short exits 3 (below the target)
    return {name: root / name for name in runs} | {"root": root}


def _clone(template: Path, folder: Path, recipe: str, task: str, times: list[float]) -> Path:
    """Run records of ``recipe`` on ``task`` with the given DAWNBench times (inf: not reached), one per seed."""
    base = RunResult.load(template)
    for seed, t in enumerate(times):
        r = base.model_copy(deep=True)
        r.run_id, r.seed, r.recipe, r.task, r.rules = f"{recipe}-{task}-{seed}", seed, recipe, task, "dawnbench"
        reached = math.isfinite(t)
        r.reached, r.status = reached, "reached" if reached else "not_reached"
        r.time_to_target_s = t if reached else None
        r.clocks = {"dawnbench": ClockFigure(rules="dawnbench", time_to_target_s=t if reached else None),
                    "mlperf": ClockFigure(rules="mlperf", time_to_target_s=2 * t if reached else None)}
        d = folder / f"seed-{seed}"
        d.mkdir(parents=True)
        r.save(d)
    return folder


def _plot_area_is_the_score(a):
    """Read score.png's lines back: the area under each submission's drawn profile / (r_max - 1) is the score the
    table prints (a step line for the exact numerics, straight segments for the official ones)."""
    from daybreak.analysis import plots

    fig = plots.score_figure(a)
    try:
        lines = fig.axes[0].get_lines()
        assert len(lines) == len(a.submissions)
        for line, sub in zip(lines, a.submissions):
            x, y = (list(map(float, v)) for v in line.get_data())
            if a.numerics == "exact":
                assert line.get_drawstyle() == "steps-post"
                area = sum(y0 * (x1 - x0) for x0, x1, y0 in zip(x, x[1:], y))
            else:
                assert line.get_drawstyle() == "default" and len(x) == 100
                area = sum((x1 - x0) * (y0 + y1) / 2 for x0, x1, y0, y1 in zip(x, x[1:], y, y[1:]))
            assert area / (a.r_max - 1) == pytest.approx(sub.score, abs=1e-12)
            assert f"(score {sub.score:.3f})" in line.get_label()
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_score_command_matches_the_hand_computed_example(real_runs, tmp_path, capsys):
    template = real_runs["digits_sgd"]
    # A's cifar10 runs have the median 10 (9, 10, 30); B's imagenet runs 15 (one of three did not reach it)
    cells = {("A", "cifar10"): [9.0, 30.0, 10.0], ("A", "imagenet"): [30.0], ("A", "squad"): [40.0],
             ("B", "cifar10"): [20.0], ("B", "imagenet"): [15.0, INF, 15.0], ("B", "squad"): [100.0],
             ("C", "cifar10"): [50.0], ("C", "imagenet"): [INF], ("C", "squad"): [25.0]}
    paths = [str(_clone(template, tmp_path / "runs" / f"{s}-{t}", s, t, times)) for (s, t), times in cells.items()]
    out = tmp_path / "score"
    assert main(["analyze", "score", *paths, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "0.8222" in text and "0.5556" in text and "0.3333" in text
    assert "unsolved (0/1 reached)" in text and "median of 3" in text
    a = json.loads((out / "score.json").read_text())
    assert (out / "score.md").is_file() and (out / "score.png").stat().st_size > 1000
    assert a["kind"] == "daybreak.score" and a["r_max"] == 4.0 and a["rules"] == "dawnbench" and a["by"] == "recipe"
    assert a["tasks"] == TASKS and a["best_times_s"] == {"cifar10": 10.0, "imagenet": 15.0, "squad": 25.0}
    got = {s["name"]: s for s in a["submissions"]}
    assert [s["name"] for s in a["submissions"]] == ["A", "B", "C"] and [s["rank"] for s in a["submissions"]] == [1, 2, 3]
    for name in "ABC":
        assert got[name]["score"] == pytest.approx(HAND_SCORES[name], abs=1e-12)
        ratios = [INF if c["ratio"] is None else c["ratio"] for c in got[name]["cells"]]
        assert ratios == pytest.approx(HAND_RATIOS[name])
    b_imagenet = got["B"]["cells"][1]
    assert b_imagenet["n_runs"] == 3 and b_imagenet["n_reached"] == 2 and b_imagenet["times_s"] == [15.0, None, 15.0]
    assert got["C"]["cells"][1]["time_s"] is None and got["C"]["cells"][1]["task_score"] == 0.0
    assert got["C"]["tasks_solved"] == 2
    assert any("beyond r_max" in n and "C on cifar10 (r 5.00)" in n and "B on squad (r 4.00)" in n for n in a["notes"])
    # the profile in the record is the one the plot draws; the record loads back
    assert got["A"]["profile"] == [[1.0, 1 / 3], [1.6, 2 / 3], [2.0, 1.0], [4.0, 1.0]]
    assert ScoreAnalysis.load(out).submissions[0].profile[1] == (1.6, 2 / 3)

    # --rules mlperf: every time doubled, the same ratios; --r-max 6 gives the slow ones credit
    assert main(["analyze", "score", *paths, "--rules", "mlperf", "--r-max", "6", "--out", str(out), "--json"]) == 0
    a6 = json.loads(capsys.readouterr().out)
    assert a6["rules"] == "mlperf" and a6["best_times_s"]["cifar10"] == 20.0
    scores6 = {s["name"]: s["score"] for s in a6["submissions"]}
    assert scores6["C"] == pytest.approx((1 / 5 + 0 + 1) / 3) and scores6["B"] == pytest.approx((0.8 + 1 + 0.4) / 3)

    _plot_area_is_the_score(ScoreAnalysis.load(out))

    # --numerics official: AlgoPerf's code's trapezoid ranks; both scores are kept and the table shows both
    assert main(["analyze", "score", *paths, "--numerics", "official", "--out", str(out), "--json"]) == 0
    off = json.loads(capsys.readouterr().out)
    assert off["numerics"] == "official"
    for sub in off["submissions"]:
        assert sub["score_exact"] == pytest.approx(HAND_SCORES[sub["name"]], abs=1e-12)
        assert sub["score"] == sub["score_official"] == pytest.approx(stats.official_score(
            stats.official_ratios(EXAMPLE, TASKS)[sub["name"]]), abs=1e-15)
        assert len(sub["profile"]) == 100 and sub["profile"][-1][0] == 4.0
    # B's cifar10 ratio, 2, is a point of the official grid and its squad time exactly 4 x the fastest (no credit
    # in the integral): on each the official trapezoid gives half a grid step more, 1 / 198 of the task's share
    b = {x["name"]: x for x in off["submissions"]}["B"]
    assert b["score_official"] - b["score_exact"] == pytest.approx(2 / 198 / 3, abs=1e-12)
    _plot_area_is_the_score(ScoreAnalysis.load(out))

    # labels group across tasks whatever the recipe: A's and C's runs as one submission, B alone
    labelled = [f"{'B' if Path(p).name.startswith('B-') else 'AC'}={p}" for p in paths
                if Path(p).name != "C-imagenet"]
    assert main(["analyze", "score", *labelled, "--out", str(tmp_path / "lab"), "--json"]) == 0
    lab = json.loads(capsys.readouterr().out)
    assert lab["by"] == "label" and [s["name"] for s in lab["submissions"]] == ["AC", "B"]
    # AC's cifar10 runs: 9, 30, 10 (A) and 50 (C): the median of four is (10 + 30) / 2 = 20 = B's
    ac = {c["task"]: c for c in lab["submissions"][0]["cells"]}
    assert ac["cifar10"]["time_s"] == 20.0 and ac["cifar10"]["ratio"] == 1.0
    assert ac["squad"]["time_s"] == pytest.approx(32.5) and ac["squad"]["ratio"] == 1.0


def test_score_end_to_end_on_real_runs(real_runs, tmp_path, capsys):
    r = {name: RunResult.load(real_runs[name]) for name in ("digits_sgd", "digits_adamw", "digits_short", "mnist_sgd")}
    assert r["digits_sgd"].reached and r["digits_adamw"].reached and r["mnist_sgd"].reached
    assert not r["digits_short"].reached
    assert (r["digits_sgd"].optimizer, r["digits_adamw"].optimizer, r["mnist_sgd"].optimizer) == ("SGD", "AdamW", "SGD")
    paths = [str(real_runs[n]) for n in ("digits_sgd", "digits_adamw", "mnist_sgd")]

    # by optimizer: SGD ran on both tasks, AdamW on digits only (0 on mnist)
    assert main(["analyze", "score", *paths, "--by", "optimizer", "--out", str(tmp_path / "opt")]) == 0
    text = capsys.readouterr().out
    assert "no runs (scored 0): AdamW on mnist" in text
    a = json.loads((tmp_path / "opt" / "score.json").read_text())
    t_sgd, t_adamw = r["digits_sgd"].time_to_target_s, r["digits_adamw"].time_to_target_s
    best = min(t_sgd, t_adamw)
    expected = {"SGD": (stats.task_score(t_sgd / best) + 1.0) / 2, "AdamW": stats.task_score(t_adamw / best) / 2}
    assert {s["name"]: s["score"] for s in a["submissions"]} == pytest.approx(expected, abs=1e-12)
    assert a["tasks"] == ["digits", "mnist"] and a["best_times_s"]["mnist"] == r["mnist_sgd"].time_to_target_s

    # labelled, under the MLPerf clock: "fast" = digits SGD + mnist, "slow" = digits AdamW + the short digits run
    # (one of two runs reached: unsolved) and nothing on mnist
    argv = ["analyze", "score", f"fast={paths[0]}", f"fast={paths[2]}", f"slow={paths[1]}",
            f"slow={real_runs['digits_short']}", "--rules", "mlperf", "--out", str(tmp_path / "lab"), "--json"]
    assert main(argv) == 0
    lab = json.loads(capsys.readouterr().out)
    scores = {s["name"]: s["score"] for s in lab["submissions"]}
    assert scores == {"fast": 1.0, "slow": 0.0}
    slow_digits = lab["submissions"][1]["cells"][0]
    assert slow_digits["times_s"] == [r["digits_adamw"].clocks["mlperf"].time_to_target_s, None]
    assert slow_digits["time_s"] is None and any("1 of 2 runs reached" in n for n in lab["notes"])
    assert lab["best_times_s"]["digits"] == r["digits_sgd"].clocks["mlperf"].time_to_target_s

    # one task only: a score, and a note that it is trivial
    assert main(["analyze", "score", paths[0], paths[1], "--out", str(tmp_path / "one")]) == 0
    assert "one task only (digits): the score is trivial" in capsys.readouterr().out


def test_score_mistakes_are_one_line(real_runs, tmp_path, capsys):
    sgd, adamw = str(real_runs["digits_sgd"]), str(real_runs["digits_adamw"])
    old = tmp_path / "old"  # a record from before daybreak recorded the optimizer
    doc = json.loads((real_runs["digits_sgd"] / "result.json").read_text())
    doc.pop("optimizer")
    old.mkdir()
    (old / "result.json").write_text(json.dumps(doc))
    mlperf_headline = tmp_path / "mlperf-headline"
    mlperf_headline.mkdir()
    (mlperf_headline / "result.json").write_text(json.dumps(doc | {"rules": "mlperf"}))
    (tmp_path / "empty").mkdir()
    cases = [
        (["analyze", "score"], "the following arguments are required: RUNS"),
        (["analyze", "score", str(tmp_path / "empty")], "not a run, repeat, lesion or sweep directory"),
        (["analyze", "score", str(tmp_path / "missing")], "no such file or directory"),
        (["analyze", "score", sgd, "--by", "author"], "invalid choice: 'author'"),
        (["analyze", "score", sgd, "--r-max", "1"], "--r-max 1.0: must be a finite number > 1"),
        (["analyze", "score", sgd, "--r-max", "nan"], "'nan': must be a finite number"),
        (["analyze", "score", sgd, "--by", "label"], "--by label needs every path written NAME=PATH"),
        (["analyze", "score", str(old), "--by", "optimizer"], "the record names no optimizer"),
        (["analyze", "score", sgd, "--by", "arm"], "not a trial of an experiment"),
        (["analyze", "score", f"a={sgd}", f"b={sgd}"], "the same run is in two submissions, 'a' and 'b'"),
        (["analyze", "score", f"={sgd}"], "write a labelled path as NAME=PATH"),
        (["analyze", "score", sgd, str(mlperf_headline)], "the runs' headline clocks differ"),
    ]
    for argv, fragment in cases:
        try:
            status = main([*argv, "--out", str(tmp_path / "out")] if len(argv) > 2 else argv)
        except SystemExit as e:
            status = e.code
        err = capsys.readouterr().err
        assert status == 2 and single_line(err) and fragment in err, (argv, err)
        assert err.startswith("daybreak: error: "), err
    assert not (tmp_path / "out").exists()  # nothing written for a refused command
    assert main(["analyze", "score", sgd, adamw, "--out", str(tmp_path / "ok")]) == 0  # the same runs, accepted


def test_score_by_arm_reads_the_experiment(real_runs, tmp_path, capsys):
    """--by arm: the submission is the experiment arm a run is a trial of (experiment.json)."""
    from datetime import datetime, timezone

    from daybreak.records.experiment import Arm, Experiment, Trial

    root = tmp_path / "ab"
    for task, times in (("digits", {"base": 10.0, "cand": 5.0}), ("mnist", {"base": 4.0, "cand": 8.0})):
        folder = root / task
        trials = []
        for i, (arm, t) in enumerate(times.items()):
            _clone(real_runs["digits_sgd"], folder / arm, "digits" if task == "digits" else "mnist", task, [t])
            trials.append(Trial(key=f"{i:04d}-{arm}-s0", position=i, arm=arm, seed=0, run_dir=f"{arm}/seed-0",
                                state="done", status="reached", reached=True))
        Experiment(command="ab", arms=[Arm(name=a, directory=a, config={}) for a in times], seeds=[0],
                   trials=trials, created_at=datetime.now(timezone.utc)).save(folder)
    assert main(["analyze", "score", str(root / "digits"), str(root / "mnist"), "--by", "arm", "--json",
                 "--out", str(tmp_path / "out")]) == 0
    a = json.loads(capsys.readouterr().out)
    # base: digits r 2 (2/3), mnist r 1 (1); cand: digits r 1 (1), mnist r 2 (2/3): a tie at 5/6, by name
    assert [(s["name"], s["score"]) for s in a["submissions"]] == [("base", pytest.approx(5 / 6)),
                                                                   ("cand", pytest.approx(5 / 6))]
    # by recipe, both arms of each experiment are one submission: said in a note
    assert main(["analyze", "score", str(root / "digits"), str(root / "mnist"), "--json",
                 "--out", str(tmp_path / "out")]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any(n.startswith("digits on digits merges the arms base, cand of the experiment in") for n in notes)
