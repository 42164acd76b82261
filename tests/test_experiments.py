"""Experiments: every trial a fresh `daybreak run` process, arms interleaved, resumable; paired ratios with their
intervals (checked against scipy)."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from conftest import single_line
from daybreak.analysis.paired import (bootstrap_is_meaningful, distinct_resamples, paired_ratio, pairs_needed,
                                      power_of, relative_width, signed_rank_critical, walsh_averages)
from daybreak.cli import main
from daybreak.experiments.engine import counted, pairs, rerun_busy
from daybreak.experiments.plan import trial_order
from daybreak.records.experiment import AbSummary, Arm, Experiment, Trial
from daybreak.records.repeat import RepeatSummary
from daybreak.records.run import RunResult

FAST = ["--threads", "1", "--target", "0.9"]


def _arms(*names: str) -> list[Arm]:
    return [Arm(name=n, directory=n, config={}) for n in names]


# --- order ----------------------------------------------------------------------------------------------------------

def test_alternate_order_interleaves_and_rotates():
    order = trial_order(_arms("A", "B"), [0, 1, 2], "alternate", 0)
    assert [(t.arm, t.seed) for t in order] == [("A", 0), ("B", 0), ("B", 1), ("A", 1), ("A", 2), ("B", 2)]
    assert [t.position for t in order] == list(range(6)) and order[3].key == "0003-A-s1"
    assert order[0].run_dir == "A/seed-0"
    three = trial_order(_arms("x", "y", "z"), [5, 6, 7], "alternate", 0)
    firsts = [three[i].arm for i in (0, 3, 6)]
    assert firsts == ["x", "y", "z"]  # each arm takes the first place in turn


def test_random_order_is_seeded_and_complete():
    a = trial_order(_arms("A", "B", "C"), list(range(10)), "random", 3)
    b = trial_order(_arms("A", "B", "C"), list(range(10)), "random", 3)
    c = trial_order(_arms("A", "B", "C"), list(range(10)), "random", 4)
    assert [t.key for t in a] == [t.key for t in b] != [t.key for t in c]
    assert sorted((t.arm, t.seed) for t in a) == sorted((x, s) for x in "ABC" for s in range(10))
    for i in range(10):  # every seed runs in every arm before the next seed starts
        assert {t.arm for t in a[3 * i:3 * i + 3]} == {"A", "B", "C"}


# --- paired ratios ----------------------------------------------------------------------------------------------------

def test_paired_ratio_matches_scipy():
    rng = np.random.default_rng(1)
    base = rng.uniform(2, 4, 12)
    cand = base * rng.lognormal(math.log(0.8), 0.05, 12)
    est = paired_ratio(list(base), list(cand), confidence=0.99)
    logs = np.log(cand / base)
    assert est.ratio == pytest.approx(math.exp(logs.mean()))
    assert est.p_value == pytest.approx(sps.ttest_rel(np.log(cand), np.log(base)).pvalue)
    low, high = sps.t.interval(0.99, len(logs) - 1, loc=logs.mean(), scale=sps.sem(logs))
    assert (est.ci_low, est.ci_high) == pytest.approx((math.exp(low), math.exp(high)))
    assert est.bootstrap_ci_low < est.ratio < est.bootstrap_ci_high
    assert est.verdict == "candidate better" and est.n_pairs == 12
    assert relative_width(est) == pytest.approx(est.ci_high / est.ci_low - 1)


def test_paired_ratio_of_identical_arms_holds_one_and_missing_pairs_are_left_out():
    rng = np.random.default_rng(2)
    base = list(rng.uniform(2, 4, 8))
    noisy = [b * float(rng.lognormal(0, 0.02)) for b in base]
    est = paired_ratio(base, noisy, confidence=0.99)
    assert est.ci_low <= 1 <= est.ci_high and est.verdict == "not distinguishable"
    est = paired_ratio([1.0, None, 2.0, 3.0], [2.0, 5.0, None, 6.0], confidence=0.95)
    assert est.n_pairs == 2 and est.ratio == pytest.approx(2.0)  # zero spread: see test_experiments_stats
    assert paired_ratio([1.0], [2.0], confidence=0.95).verdict == "too few pairs"


def _walsh_by_hand(d):
    """Walsh averages with +inf and -inf cancelling (each written as a large number of the same size, M -> inf)."""
    big = 1e12
    w = sorted((max(-big, min(big, a)) + max(-big, min(big, b))) / 2 for i, a in enumerate(d) for b in d[i:])
    return [math.inf if x >= big / 4 else -math.inf if x <= -big / 4 else x for x in w]


def _critical_by_enumeration(n, confidence):
    """The largest c with P(T+ <= c) <= (1 - confidence) / 2, counting all 2**n sign patterns."""
    import itertools

    sums = [sum(r for r, s in zip(range(1, n + 1), signs) if s) for signs in itertools.product((0, 1), repeat=n)]
    c = None
    for t in range(n * (n + 1) // 2 + 1):
        if sum(x <= t for x in sums) / 2 ** n <= (1 - confidence) / 2:
            c = t
    return c


def test_an_unreached_trial_is_infinitely_slow_and_the_ratio_stays_defined():
    """9 pairs; the candidate missed the target in 2, the baseline in 1: the estimate and interval are rank-based
    (Hodges-Lehmann, Wilcoxon signed-rank), computed here by hand and by enumeration (the p-value and the interval
    against an enumeration of the test itself: tests/test_experiments_stats.py)."""
    inf = math.inf
    base = [10.0, 11.0, 9.5, 10.2, inf, 10.8, 9.9, 10.4, 10.1]
    cand = [11.0, 12.5, 10.1, inf, 10.0, 11.9, inf, 11.2, 10.6]
    est = paired_ratio(base, cand, confidence=0.95)
    d = [math.log(b / a) if math.isfinite(a) and math.isfinite(b) else (inf if math.isinf(b) else -inf)
         for a, b in zip(base, cand)]
    walsh = _walsh_by_hand(d)
    assert len(walsh) == 45 and walsh == pytest.approx(walsh_averages(d))
    assert est.ratio == pytest.approx(math.exp(walsh[22]))  # the median of 45 Walsh averages
    c = _critical_by_enumeration(9, 0.95)
    assert c == signed_rank_critical(9, 0.95) == 5  # the published table: n = 9, two-sided 0.05 -> 5
    assert (est.ci_low, est.ci_high) == pytest.approx((math.exp(walsh[c]), math.exp(walsh[44 - c])))
    assert (est.ci_low, est.ci_high) == (0.0, math.inf) and est.interval_note is None  # the misses, not n
    assert (est.n_pairs, est.n_censored, est.n_neither_reached) == (9, 3, 0) and "Hodges-Lehmann" in est.method
    assert est.bootstrap_ci_low is None
    # dropping the unreached pairs instead would flatter the candidate, which failed more often
    kept = [(a, b) for a, b in zip(base, cand) if math.isfinite(a) and math.isfinite(b)]
    assert est.ratio > math.exp(np.mean([math.log(b / a) for a, b in kept])) * 0.999
    # a pair where neither reached is left out and counted; the JSON keeps the infinite bound
    est = paired_ratio(base + [inf], cand + [inf], confidence=0.95)
    assert est.n_neither_reached == 1 and est.n_pairs == 9
    from daybreak.records.experiment import RatioEstimate

    few = paired_ratio([1.0, 2.0, 3.0], [1.1, inf, 3.3], confidence=0.99)
    assert (few.ci_low, few.ci_high) == (0.0, math.inf) and few.verdict == "not distinguishable"
    assert RatioEstimate.model_validate_json(few.model_dump_json()).ci_high == math.inf


def test_signed_rank_critical_values_match_the_published_table():
    # two-sided 0.05: n = 6..12 -> 0, 2, 3, 5, 8, 10, 13; two-sided 0.01: n = 8..12 -> 0, 1, 3, 5, 7
    assert [signed_rank_critical(n, 0.95) for n in range(6, 13)] == [0, 2, 3, 5, 8, 10, 13]
    assert [signed_rank_critical(n, 0.99) for n in range(8, 13)] == [0, 1, 3, 5, 7]
    assert signed_rank_critical(5, 0.95) is None and signed_rank_critical(7, 0.99) is None
    assert [_critical_by_enumeration(n, 0.99) for n in range(8, 13)] == [0, 1, 3, 5, 7]


def test_pairs_needed_matches_a_hand_computation():
    """The paired t-test's sample size for 80% power: Cohen's effect size d = delta / sd gives, two-sided 0.05, 34
    pairs for d = 0.5, 15 for 0.8 and 199 for 0.2 (G*Power's figures); each is the smallest n whose power, from
    scipy's noncentral t, reaches 0.8."""
    for d, n in ((0.5, 34), (0.8, 15), (0.2, 199)):
        sd = math.log(1.05) / d
        assert pairs_needed(sd, 0.05, 0.95) == n
        assert power_of(n, sd, math.log(1.05), 0.95) >= 0.8 > power_of(n - 1, sd, math.log(1.05), 0.95)
    # the normal approximation ((z_0.995 + z_0.8) sd / delta)**2 is a little below the t figure
    sd = 0.1
    approx = ((sps.norm.ppf(0.995) + sps.norm.ppf(0.8)) * sd / math.log(1.05)) ** 2
    assert approx < pairs_needed(sd, 0.05, 0.99) <= approx + 4
    rng = np.random.default_rng(3)
    base = list(rng.uniform(2, 4, 5))
    cand = [b * float(rng.lognormal(0.3, 0.2)) for b in base]  # 1.35x slower, noisy
    est = paired_ratio(base, cand, confidence=0.99, effects=(0.05, 0.5))
    sd = float(np.std(np.log(np.array(cand) / np.array(base)), ddof=1))
    assert est.log_ratio_sd == pytest.approx(sd)
    assert [p.pairs for p in est.pairs_needed] == [pairs_needed(sd, 0.05, 0.99), pairs_needed(sd, 0.5, 0.99)]
    assert f"needs {est.pairs_needed[0].pairs} pairs for 5%" in est.power_words()


def test_the_bootstrap_check_needs_enough_distinct_resamples():
    """3 pairs have 10 distinct resamples: no percentile tails at 99%, so no bootstrap interval, and the record
    says why; 12 pairs have over a million."""
    est = paired_ratio([1.0, 2.0, 3.0], [1.1, 2.5, 3.2], confidence=0.99)
    assert est.bootstrap_ci_low is None and "only 10 distinct resamples" in est.bootstrap_note
    assert distinct_resamples(3) == 10 and distinct_resamples(12) == math.comb(23, 12)
    assert not bootstrap_is_meaningful(6, 0.99) and bootstrap_is_meaningful(7, 0.99)
    assert not bootstrap_is_meaningful(5, 0.95) and bootstrap_is_meaningful(6, 0.95)


# --- the record: busy trials, pairs -------------------------------------------------------------------------------------

def _record(policy: str = "keep") -> Experiment:
    arms = _arms("A", "B")
    trials = trial_order(arms, [0, 1, 2], "alternate", 0)
    for t in trials:
        t.state, t.status, t.reached, t.time_to_target_s = "done", "reached", True, 2.0 if t.arm == "A" else 1.0
    trials[2].busy, trials[2].busy_reason = True, "load"
    return Experiment(command="ab", arms=arms, seeds=[0, 1, 2], trials=trials, busy_policy=policy,
                      created_at=datetime.now(timezone.utc))


def test_busy_policies():
    keep, exclude = _record("keep"), _record("exclude")
    assert len(counted(keep, "B")) == 3 and len(counted(exclude, "B")) == 2
    assert [a.seed for a, _ in pairs(exclude, "A", "B")] == [0, 2]
    rerun = _record("rerun")
    added = rerun_busy(Path("."), rerun)
    assert [(t.arm, t.seed, t.attempt) for t in added] == [("B", 1, 2)] and rerun.trials[2].excluded
    assert added[0].run_dir == "B/seed-1-rerun" and added[0].position == 6


def test_compare_counts_unreached_trials_as_infinitely_slow_and_says_so():
    """An ab record where the candidate missed the target in 2 of 9 pairs: the time ratio is rank-based with the
    unreached pairs in it, the cost ratio too (cost to target of an unreached trial: infinite), the reached
    fractions keep Fisher's test, and ab's output names the method and the pairs needed."""
    from daybreak.experiments.stats import compare
    from daybreak.records.ab_views import format_ab
    from daybreak.records.experiment import ArmStats, AbSummary
    from daybreak.records.provenance import Provenance
    from daybreak.records.repeat import TimeStats

    arms = _arms("A", "B")
    seeds = list(range(9))
    trials = trial_order(arms, seeds, "alternate", 0)
    rng = np.random.default_rng(5)
    for t in trials:
        base = 10.0 + t.seed * 0.3
        t.state, t.status, t.reached = "done", "reached", True
        t.time_to_target_s = base * (1.0 if t.arm == "A" else float(rng.lognormal(0.1, 0.03)))
        t.cost_usd = t.time_to_target_s / 3600
        if t.arm == "B" and t.seed in (2, 6):
            t.status, t.reached, t.time_to_target_s, t.cost_usd = "not_reached", False, None, None
    record = Experiment(command="ab", arms=arms, seeds=seeds, trials=trials, confidence=0.95, effect=0.2,
                        created_at=datetime.now(timezone.utc))
    c = compare(record, "A", "B")
    assert (c.time.n_pairs, c.time.n_censored) == (9, 2) and "Hodges-Lehmann" in c.time.method
    a = {t.seed: t.time_to_target_s for t in trials if t.arm == "A"}
    b = {t.seed: (t.time_to_target_s if t.reached else math.inf) for t in trials if t.arm == "B"}
    assert c.time.ratio == pytest.approx(paired_ratio([a[s] for s in seeds], [b[s] for s in seeds],
                                                      confidence=0.95).ratio)
    assert c.cost is not None and c.cost.n_censored == 2
    assert c.reached_p_value == pytest.approx(sps.fisher_exact([[9, 0], [7, 2]]).pvalue)
    assert c.time.pairs_needed == [] and "no pairs-needed figure" in (c.time.power_note or "")  # rank-based
    summary = AbSummary(task="digits", metric="top1", target=0.98, rules="dawnbench", comparison=c,
                        arms=[ArmStats(arm=x, n_trials=9, n_reached=9, reached_fraction=1.0,
                                       time_to_target=TimeStats(n=0)) for x in ("A", "B")],
                        provenance=Provenance())
    text = format_ab(summary)
    assert "2 with one arm unreached (infinitely slow)" in text and "Wilcoxon signed-rank" in text
    assert "95% CI" in text and "no pairs-needed figure: 2 of 9 pairs" in text


def test_trials_of_a_multi_node_experiment_carry_this_nodes_rank(tmp_path):
    """--nnodes 2: a trial's config records the node count, its command line this node's rank and node 0's
    address; on a node other than 0 a finished trial is its part done (node 0 records the run)."""
    from daybreak.config import RunConfig
    from daybreak.experiments.commands import arm_options
    from daybreak.experiments.engine import trial_command, write_trial_config

    config = RunConfig(task="digits", nnodes=2, node_rank=1, rdzv_endpoint="node0:29500")
    arm = Arm(name="repeat", directory="", config=arm_options(config))
    assert arm.config["nnodes"] == 2 and "node_rank" not in arm.config  # resumable from any node
    trial = trial_order([arm], [0], "alternate", 0)[0]
    record = Experiment(command="repeat", arms=[arm], seeds=[0], trials=[trial], node_rank=1,
                        rdzv_endpoint="node0:29500", created_at=datetime.now(timezone.utc))
    argv = trial_command(tmp_path, arm, trial, record)
    assert argv[-4:] == ["--node-rank", "1", "--rdzv-endpoint", "node0:29500"]
    assert "nnodes = 2" in write_trial_config(tmp_path, arm, trial).read_text()
    assert "--node-rank" not in trial_command(tmp_path, arm, trial)  # one node: nothing added


# --- end to end: fresh processes, resume, ab -------------------------------------------------------------------------

def test_repeat_trials_are_fresh_daybreak_run_processes(tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["repeat", "digits", "--runs", "2", "--out", str(out), *FAST]) == 0
    exp = Experiment.load(out)
    assert [t.state for t in exp.trials] == ["done", "done"] and exp.complete
    for t in exp.trials:
        r = RunResult.load(out / t.run_dir)
        # each trial is its own `daybreak run --config ... --out ...` command line, run by the executor
        assert r.command[:3] == ["daybreak", "run", "--config"] and str(out / t.run_dir) in r.command
        assert (out / t.run_dir / "config.toml").exists() and (out / "trials" / f"{t.key}.log").exists()
        assert t.data_load_s is not None and t.model_init_s is not None and t.exit_code == 0
    s = RepeatSummary.load(out)
    assert s.trials and "fresh processes" in s.trials and s.accuracy is not None and s.accuracy.n == 2
    assert s.cold_start_spread is not None and s.cold_start_spread >= 1
    err = capsys.readouterr().err
    assert "repeat [1/2] seed 0:" in err and "repeat [2/2] seed 1:" in err


def test_a_killed_experiment_resumes_without_rerunning_finished_trials(tmp_path):
    out = tmp_path / "rep"
    cmd = [sys.executable, "-m", "daybreak", "repeat", "digits", "--runs", "3", "--out", str(out), *FAST]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if out.joinpath("experiment.json").exists() and \
                sum(t.state == "done" for t in Experiment.load(out).trials) >= 1:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    first = Experiment.load(out)
    done = [t for t in first.trials if t.state == "done"]
    assert 1 <= len(done) < 3 and not first.complete
    kept = {t.key: (out / t.run_dir / "result.json").read_bytes() for t in done}
    assert main(["repeat", "digits", "--runs", "3", "--out", str(out), *FAST]) == 2  # needs --resume
    assert main(["repeat", "digits", "--runs", "3", "--out", str(out), *FAST, "--resume"]) == 0
    second = Experiment.load(out)
    assert second.complete and len(second.invocations) == 2
    assert {t.key: (out / t.run_dir / "result.json").read_bytes() for t in second.trials if t.key in kept} == kept
    assert {t.key for t in second.trials if t.invocation == 0} == set(kept)  # never run again
    assert main(["repeat", "digits", "--runs", "3", "--out", str(out), "--resume", "--threads", "2",
                 "--target", "0.9"]) == 2  # other options than recorded: refused


def test_a_sigterm_during_an_import_lets_the_import_finish_first(tmp_path):
    """The test above once failed so: SIGTERM came while the summary was importing scipy.stats for the first time,
    its C extension stopped half-initialized, and the summary written on the way out could not import it again (a
    traceback, exit 1). Every command's SIGTERM handler lets an import finish, then interrupts."""
    (tmp_path / "slow_module.py").write_text("import os, signal, time\nos.kill(os.getpid(), signal.SIGTERM)\n"
                                             "time.sleep(0.5)\nFINISHED = True\n")
    script = ("import sys, time\n"
              "from daybreak.cli import _sigterm_as_interrupt\n"
              "_sigterm_as_interrupt()\n"
              "try:\n"
              "    import slow_module\n"
              "    print('imported', slow_module.FINISHED, flush=True)\n"
              "    time.sleep(30)\n"
              "    print('not interrupted')\n"
              "except KeyboardInterrupt:\n"
              "    print('interrupted', 'slow_module' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.stdout.splitlines() == ["imported True", "interrupted True"], r.stdout + r.stderr


def test_ab_on_digits_prints_ratio_interval_and_verdict(tmp_path, capsys):
    out = tmp_path / "ab"
    assert main(["ab", "digits", "--a-set", "lr=0.1", "--b-set", "lr=0.2", "--runs", "2", "--out", str(out),
                 *FAST]) == 0
    text = capsys.readouterr().out
    assert "time to target" in text and "% CI" in text and "verdict" in text
    s = AbSummary.load(out)
    exp = Experiment.load(out)
    assert [t.arm for t in exp.trials] == ["baseline", "candidate", "candidate", "baseline"]
    for t in exp.trials:
        lr = RunResult.load(out / t.run_dir).hyperparameters["lr"]
        assert lr == (0.1 if t.arm == "baseline" else 0.2)
    paired = pairs(exp, "baseline", "candidate")
    both = [(a.time_to_target_s, b.time_to_target_s) for a, b in paired if a.reached and b.reached]
    if len(both) == len(paired):  # every pair reached: the geometric mean of the ratios
        expected = math.exp(sum(math.log(b / a) for a, b in both) / len(both))
        assert s.comparison.time.ratio == pytest.approx(expected) and "Student-t" in s.comparison.time.method
    else:  # an unreached trial is infinitely slow: rank-based
        assert "Hodges-Lehmann" in s.comparison.time.method
    assert s.comparison.time.verdict in ("not distinguishable", "candidate better", "candidate worse",
                                         "too few pairs")
    assert (out / "ab.md").exists() and s.provenance.inputs


def test_a_trial_that_is_refused_stops_the_experiment_with_its_line(tmp_path, capsys):
    out = tmp_path / "rep"
    code = main(["repeat", "mnist", "--runs", "2", "--no-download", "--data-dir", str(tmp_path / "none"),
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "trial 0000-repeat-s0 was refused" in err and "mnist" in err.lower()
    assert [t.state for t in Experiment.load(out).trials] == ["pending", "pending"]  # nothing counted as run


@pytest.mark.slow
def test_lesion_arms_are_interleaved_fresh_processes(tmp_path):
    out = tmp_path / "les"
    assert main(["lesion", "digits", "--without", "augment", "--runs", "2", "--out", str(out), *FAST]) == 0
    exp = Experiment.load(out)
    assert [(t.arm, t.seed) for t in exp.trials] == [("full", 0), ("no-augment", 0), ("no-augment", 1), ("full", 1)]
    data = json.loads((out / "lesion.json").read_text())
    assert data["variants"][1]["comparison"]["n_pairs"] <= 2
    assert RepeatSummary.load(out / "full").n_runs == 2


def test_target_significance_is_scipys_one_sided_t_test_and_stays_inside_the_accuracy_range():
    from scipy import stats as sps

    from daybreak.analysis.stats import target_significance

    finals = [0.985, 0.99, 0.983, 0.992, 0.987]
    sig = target_significance(finals, 0.98, alpha=0.01, confidence=0.99)
    expected = sps.ttest_1samp(finals, 0.98, alternative="greater")
    interval = sps.t.interval(0.99, len(finals) - 1, loc=sum(finals) / 5, scale=sps.sem(finals))
    assert sig.p_value == pytest.approx(expected.pvalue) and sig.significant == (expected.pvalue < 0.01)
    assert (sig.ci_low, sig.ci_high) == pytest.approx(interval) and sig.n_at_or_above_target == 5
    wide = target_significance([0.97, 1.0, 1.0], 0.98, confidence=0.99)  # the t-interval would pass 100%
    assert wide.ci_high == 1.0 and wide.ci_low >= 0.0 and "clipped" in wide.note and not wide.significant


# --- issue 29: options before writes, one writer, stopped trials, ab's seed, pairs not side by side --------------------

class _StoppedExecutor:
    """Stands in for an executor whose every trial was stopped from outside (scancel, a Slurm time limit): the
    outcomes the Slurm executor reports for them, no run directory. Records the options it was made with."""

    name = "fake"
    made: list = []

    def __init__(self, options):
        self.options = options
        _StoppedExecutor.made.append(options)

    def run(self, trials, on_done=None, cancel=None):
        out = []
        for i, trial in enumerate(trials):
            from daybreak.executors import TrialOutcome

            why = ("signal SIGTERM (scancel, preemption or the time limit; if it was the limit, raise "
                   "--slurm-time-min)") if i % 2 == 0 else "its time limit was near (submitit's warning signal; " \
                                                         "raise --slurm-time-min)"
            outcome = TrialOutcome(trial.key, None, "node7", 1.0, 13.0, f"stopped on node7 after 12 s: {why}")
            out.append(outcome)
            if on_done:
                on_done(trial, outcome)
        return out


@pytest.fixture
def stopped_trials(monkeypatch):
    import daybreak.experiments.commands as commands

    _StoppedExecutor.made = []
    monkeypatch.setattr(commands.ex, "make_executor", lambda options, out: _StoppedExecutor(options))
    return _StoppedExecutor


@pytest.mark.parametrize("bad, fragment", [
    (["--executor", "local", "--slurm-partition", "x"], "--slurm-partition applies to --executor slurm"),
    (["--parallel", "0"], "--parallel 0: give a number of at least 1"),
])
@pytest.mark.parametrize("command", ["repeat", "ab", "lesion"])
def test_every_option_is_checked_before_anything_is_written(tmp_path, capsys, command, bad, fragment):
    """Issue 29: these wrote experiment.json before refusing, so the corrected command was then refused ("add
    --resume"). Now nothing is written: the directory does not exist afterwards."""
    out = tmp_path / "exp"
    assert main([command, "digits", "--runs", "2", "--out", str(out), *bad]) == 2
    err = capsys.readouterr().err
    assert fragment in err and single_line(err) and not out.exists()


def test_a_second_writer_is_refused_naming_the_running_one(tmp_path, capsys):
    """One writer per experiment directory: a second `--resume` of a running experiment (which cleared the live
    trial's folder, then failed) is one line naming the running command, its PID and host, and touches nothing."""
    import os
    import socket

    from daybreak.experiments.engine import ExperimentLock

    out = tmp_path / "exp"
    out.mkdir()
    (out / "seed-0").mkdir()
    (out / "seed-0" / "live.txt").write_text("a trial is writing here")
    (out / "experiment.json").write_text("{}")
    with ExperimentLock(out, ["daybreak", "repeat", "digits", "--runs", "3", "--out", str(out)]):
        assert main(["repeat", "digits", "--runs", "3", "--out", str(out), "--resume", *FAST]) == 2
        err = capsys.readouterr().err
        assert f"--out {out}: another daybreak is writing this experiment: pid {os.getpid()} on host " \
               f"{socket.gethostname()}" in err and "`daybreak repeat digits --runs 3" in err and single_line(err)
        assert (out / "seed-0" / "live.txt").exists() and (out / "experiment.json").read_text() == "{}"
    # released with its holder: the next writer goes on (here: to the next refusal, the bad experiment.json)
    assert main(["repeat", "digits", "--runs", "3", "--out", str(out), "--resume", *FAST]) == 2
    assert "another daybreak" not in capsys.readouterr().err


def test_all_trials_stopped_is_exit_130_with_what_stopped_them(tmp_path, capsys, stopped_trials):
    """Issue 29: every trial stopped (scancel, a Slurm time limit) ended "no summary.json here", exit 2; the
    documentation promises 130. Now 130 with one line that counts what stopped them; --resume runs them again."""
    out = tmp_path / "rep"
    assert main(["repeat", "digits", "--runs", "3", "--out", str(out), *FAST]) == 130
    err = capsys.readouterr().err
    line = [x for x in err.splitlines() if x.startswith("daybreak: error:")]
    assert line == [f"daybreak: error: repeat: 3 of 3 trials were stopped before they finished (2 signal SIGTERM "
                    f"(scancel, preemption or the time limit; if it was the limit, raise --slurm-time-min) on node7; "
                    f"1 its time limit was near (submitit's warning signal; raise --slurm-time-min) on node7); none "
                    f"finished; `--resume` runs the stopped ones again"], err
    assert [t.state for t in Experiment.load(out).trials] == ["lost"] * 3
    assert main(["repeat", "digits", "--runs", "3", "--out", str(out), *FAST, "--resume"]) == 130  # resumable


def test_ab_takes_its_first_seed_from_seed(tmp_path, stopped_trials):
    """Issue 29: `daybreak ab --seed 10` ran seeds 0, 1, 2."""
    out = tmp_path / "ab"
    assert main(["ab", "digits", "--seed", "10", "--runs", "3", "--out", str(out), *FAST]) == 130
    exp = Experiment.load(out)
    assert exp.seeds == [10, 11, 12] and sorted({t.seed for t in exp.trials}) == [10, 11, 12]
    assert "seed = 10" in (out / "trials" / f"{exp.trials[0].key}.toml").read_text()
    assert main(["ab", "digits", "--seed", "10", "--runs", "3", "--out", str(out), *FAST, "--resume"]) == 130
    assert main(["ab", "digits", "--seed", "11", "--runs", "3", "--out", str(out), *FAST, "--resume"]) == 2


def test_the_arms_of_a_pair_never_run_side_by_side_unless_asked(tmp_path, monkeypatch, stopped_trials):
    """On a machine with 2 GPUs the local executor runs one trial per GPU at once: a repeat's seeds may, but the
    two arms of an ab or lesion pair would then time each other's load. One at a time unless --parallel says."""
    import daybreak.executors as ex

    monkeypatch.setattr(ex, "visible_gpus", lambda: ["0", "1"])
    runs = ["--runs", "1", *FAST]
    assert main(["repeat", "digits", "--out", str(tmp_path / "r"), *runs]) == 130
    assert main(["ab", "digits", "--out", str(tmp_path / "a"), *runs]) == 130
    assert main(["lesion", "digits", "--without", "augment", "--out", str(tmp_path / "l"), *runs]) == 130
    assert main(["ab", "digits", "--out", str(tmp_path / "p"), "--parallel", "2", *runs]) == 130
    assert main(["ab", "digits", "--out", str(tmp_path / "s"), "--executor", "submitit-local", *runs]) == 130
    assert [o.parallel for o in stopped_trials.made] == [None, 1, 1, 2, 1]
    assert Experiment.load(tmp_path / "a").executor["parallel"] == 1  # recorded as it ran


@pytest.mark.slow
def test_a_running_experiment_refuses_a_second_resume_and_ends_130_when_its_trials_are_killed(tmp_path):
    """End to end, with real trials: while `daybreak repeat` runs, a second `--resume` is refused naming its PID
    (the live trial's folder untouched); then every trial is killed from outside (SIGTERM to its process group, as
    scancel would): the experiment exits 130 with a line saying what stopped them."""
    import os
    import socket

    import psutil

    out = tmp_path / "rep"
    cmd = [sys.executable, "-m", "daybreak", "repeat", "digits", "--runs", "2", "--out", str(out), *FAST]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def trial():
        for p in psutil.process_iter(["cmdline"]):
            line = p.info["cmdline"] or []
            if str(out / "trials") in " ".join(line) and "run" in line:
                return p
        return None

    killed = set()
    try:
        deadline = time.monotonic() + 240
        while (found := trial()) is None:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
            time.sleep(0.05)
        second = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=120)
        assert second.returncode == 2 and f"pid {proc.pid} on host {socket.gethostname()}" in second.stderr, \
            second.stderr
        assert (out / "experiment.json").exists() and found.is_running()
        while proc.poll() is None and time.monotonic() < deadline:
            found = trial()
            if found is not None and found.pid not in killed:
                os.killpg(os.getpgid(found.pid), signal.SIGTERM)
                killed.add(found.pid)
            time.sleep(0.05)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and len(killed) == 2, err
    assert "repeat: 2 of 2 trials were stopped before they finished" in err and "`--resume` runs the stopped" in err
    assert [t.state for t in Experiment.load(out).trials] in (["interrupted"] * 2, ["lost"] * 2,
                                                               ["interrupted", "lost"], ["lost", "interrupted"])


def test_ab_of_a_recipe_file_at_two_commits_writes_it_only_into_an_open_experiment(tmp_path, capsys, stopped_trials):
    """The recipe files read with `git show` are checked from a temporary copy and written into the experiment
    directory once it is open (they were written first, so a new directory was "not empty" and refused), named by
    the commit's hash (a --resume after HEAD moved is refused for its other recipe, not run with it)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    recipe = repo / "my_recipe.py"
    source = (Path(__file__).resolve().parents[1] / "examples" / "recipes" / "digits_wide.py").read_text()

    def git(*args):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                       env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
                            "GIT_COMMITTER_EMAIL": "t@x", "PATH": "/usr/bin:/bin"})

    git("init", "-q")
    recipe.write_text(source)
    git("add", ".")
    git("commit", "-qm", "one")
    # the candidate changes a hyperparameter and keeps the recipe's name: both versions load in this process
    assert '"digits_wide"' in source and "lr=0.004," in source
    candidate = source.replace("lr=0.004,", "lr=0.002,") + "\n# the candidate's change\n"
    recipe.write_text(candidate)
    git("commit", "-qam", "two")
    out = tmp_path / "ab"
    args = ["ab", "digits", "--recipe", str(recipe), "--a-commit", "HEAD~1", "--b-commit", "HEAD", "--runs", "1",
            "--out", str(out), *FAST]
    assert main(args + ["--parallel", "0"]) == 2 and not out.exists()  # nothing read into it, nothing written
    assert main(args) == 130, capsys.readouterr().err
    written = sorted(p.name for p in (out / "recipes").iterdir())
    assert len(written) == 2 and all(p.endswith("-my_recipe.py") for p in written)
    texts = {p.name.split("-")[0]: p.read_text() for p in (out / "recipes").iterdir()}
    assert texts["a"] == source and texts["b"].endswith("# the candidate's change\n")
    recipe.write_text(candidate.replace("lr=0.002,", "lr=0.001,"))
    git("commit", "-qam", "three")
    capsys.readouterr()
    assert main(args + ["--resume"]) == 2  # HEAD moved: another recipe than the one recorded
    assert "was recorded with recipe=" in capsys.readouterr().err


@pytest.mark.slow
def test_a_two_node_repeat_on_one_machine(tmp_path):
    """`daybreak repeat --nnodes 2`: the same command on each "node" (two processes here), node 1 taking part in
    every trial in step and node 0 recording each 2-process run (rank 0 lives on node 0: static rendezvous)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    common = ["repeat", "digits", "--runs", "2", "--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{port}",
              "--threads", "1"]
    follower = subprocess.Popen([sys.executable, "-m", "daybreak", *common, "--node-rank", "1", "--out",
                                 str(tmp_path / "n1")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lead = subprocess.run([sys.executable, "-m", "daybreak", *common, "--node-rank", "0", "--out",
                           str(tmp_path / "n0")], capture_output=True, text=True, timeout=900)
    _, err = follower.communicate(timeout=300)
    assert lead.returncode == 0, lead.stderr
    assert follower.returncode == 0 and "node 1: took part in 2 trials" in err, err
    s = RepeatSummary.load(tmp_path / "n0")
    assert s.n_runs == 2 and s.n_reached == 2
    for row in s.runs:
        r = RunResult.load(tmp_path / "n0" / row.run_dir)
        assert (r.world_size, r.nodes) == (2, 2)
    assert not list((tmp_path / "n1").glob("seed-*/result.json"))  # node 1 records nothing
    assert [t.state for t in Experiment.load(tmp_path / "n1").trials] == ["done", "done"]
