"""The records of an experiment (several runs): its plan and trials (``experiment.json``) and the paired comparison
of two arms (``ab.json``), written by daybreak.experiments.

An experiment directory holds one ordinary run directory per trial (each made by a fresh ``daybreak run``
process), the trial's config file and log, ``experiment.json`` (this plan, rewritten after every trial) and the
command's summary (``summary.json`` for repeat, ``lesion.json``, ``ab.json``).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from daybreak.records.base import Record
from daybreak.records.provenance import Provenance
from daybreak.records.repeat import TimeStats
from daybreak.records.significance import TargetSignificance

EXPERIMENT_FILE = "experiment.json"
AB_FILE = "ab.json"


class Arm(BaseModel):
    """One side of an experiment: a run configuration (or an external command) that its trials repeat."""

    name: str  # "baseline", "candidate", "full", "no-augment", "repeat"
    directory: str  # its folder in the experiment directory ("" for a one-arm repeat)
    config: dict[str, Any]  # daybreak.config.RunConfig options (by field name) every trial of this arm runs
    program: list[str] | None = None  # an external command, timed by `daybreak time` (config: its options)
    commit: str | None = None  # the git commit its recipe file was taken from
    switched_off: list[str] = Field(default_factory=list)  # lesion: the switches this arm turns off


class Trial(BaseModel):
    """One trial: a fresh process running one arm's configuration with one seed."""

    key: str  # "0003-candidate-s1": its position in the run order, arm and seed
    position: int  # 0-based, in the order trials are started
    arm: str
    seed: int
    run_dir: str  # relative to the experiment directory
    state: Literal["pending", "done", "failed", "lost", "interrupted"] = "pending"
    status: str | None = None  # the run's own status (reached, not_reached, diverged, failed, interrupted)
    exit_code: int | None = None
    host: str | None = None
    started_at: float | None = None  # time.time() on the host that ran it
    finished_at: float | None = None
    error: str | None = None  # the executor's one line when it could not run the trial
    reached: bool = False
    time_to_target_s: float | None = None  # under the experiment's headline rule set
    clocks_s: dict[str, float | None] = Field(default_factory=dict)  # every rule set's time-to-target
    final_accuracy: float | None = None
    cost_usd: float | None = None
    energy_j: float | None = None  # joules to target under the headline rule set, where counters exist
    data_load_s: float | None = None  # the cold-start phases, to check every trial paid them alike
    model_init_s: float | None = None
    busy: bool = False  # the machine was busy while it ran (other processes' CPU, load average)
    busy_reason: str | None = None
    excluded: bool = False  # left out of the statistics (--busy exclude, or replaced by a re-run)
    attempt: int = 1  # > 1: a re-run of a busy trial (--busy rerun)
    invocation: int = 0  # which of the experiment's invocations ran it (an index into Experiment.invocations)


class ArmStats(BaseModel):
    """One arm's trials, summarized."""

    arm: str
    n_trials: int  # counted (not excluded)
    n_reached: int
    reached_fraction: float | None
    n_busy: int = 0
    n_excluded: int = 0
    time_to_target: TimeStats
    accuracy: TargetSignificance | None = None  # mean final accuracy, its CI, and p of mean > target
    mean_cost_usd: float | None = None
    mean_energy_j: float | None = None
    cold_start_spread: float | None = None  # max / min of (data_load + model_init) over its trials


POWER = 0.8  # the power of the pairs-needed figures: the usual 80%
MAX_PAIRS = 100_000  # pairs needed beyond this are "more than 100,000" (None)


def format_ratio(x: float | None) -> str:
    return "-" if x is None else ("inf" if math.isinf(x) else f"{x:.3f}")


class PairsNeeded(BaseModel):
    """How many pairs the observed spread of the log ratios needs to tell a difference of ``effect`` (0.05: a
    ratio of 1.05) with a paired t-test at the comparison's confidence and this power; ``pairs_low`` and
    ``pairs_high`` are the same figure at the two ends of the spread's own confidence interval (the spread is an
    estimate from the pairs so far)."""

    effect: float
    power: float
    pairs: int | None  # None: more than 100,000
    pairs_low: int | None = None  # at the low end of the sd's interval
    pairs_high: int | None = None  # at its high end (None: more than 100,000)


class RatioEstimate(BaseModel):
    """A paired ratio candidate / baseline with its confidence interval; ``method`` says how it was computed
    (daybreak.analysis.paired: the geometric mean with a Student-t interval of the mean log ratio and the paired
    t-test when every pair reached the target; the Hodges-Lehmann estimate with the exact Wilcoxon signed-rank test
    and the interval inverted from it when a trial did not, an unreached trial counting as infinitely slow). The
    verdict is the test's (p <= 1 - confidence), and the interval holds the ratios the same test keeps, so the two
    agree. Infinite values are written as "Infinity"."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    quantity: str  # "time_to_target_s", "cost_usd", "energy_j"
    n_pairs: int  # pairs in the estimate (those with one arm unreached included)
    n_censored: int = 0  # pairs where one arm did not reach the target: an infinite log ratio
    n_neither_reached: int = 0  # pairs where neither arm reached the target: no ratio, left out
    ratio: float | None = None  # the estimate of candidate/baseline
    ci_low: float | None = None
    ci_high: float | None = None  # may be infinite
    ci_low_excluded: bool = False  # the end itself is rejected by the test (rank method: a Walsh average counts
    ci_high_excluded: bool = False  # half at a shift equal to it); it matters only where an end is exactly 1
    confidence: float
    method: str = ""
    p_value: float | None = None  # two-sided, H0: ratio 1 (paired t-test, or exact Wilcoxon signed-rank): the verdict's
    interval_note: str | None = None
    bootstrap_ci_low: float | None = None  # a percentile bootstrap check, where enough distinct resamples exist
    bootstrap_ci_high: float | None = None
    bootstrap_note: str | None = None  # why there is no bootstrap check
    log_ratio_sd: float | None = None  # spread of the finite per-pair log ratios
    log_ratio_sd_low: float | None = None  # its confidence interval (chi-square, at ``confidence``)
    log_ratio_sd_high: float | None = None
    pairs_needed: list[PairsNeeded] = Field(default_factory=list)
    power_note: str | None = None  # why there is no pairs-needed figure
    verdict: str = ""  # "not distinguishable", "candidate better", "candidate worse", "too few pairs"

    def power_words(self) -> str:
        """The pairs-needed figures in words, each with its range over the sd's interval, e.g. for 5 pairs with an
        sd of the log ratios of 0.08 at 99% confidence: 'the spread of 5 pairs (sd of the log ratios 0.080, 99%
        interval 0.042-0.352) needs 35 pairs for 5% (12-611 over the sd's interval) to tell the difference (80%
        power at 99% confidence)' (tests/test_experiments.py computes this example); '' without a spread (fewer
        than 2 pairs where both arms reached); the power note where a censored pair makes the figure inapplicable."""
        if not self.pairs_needed or self.log_ratio_sd is None:
            return self.power_note or ""
        finite = self.n_pairs - self.n_censored

        def count(pairs: int | None) -> str:
            return "more than " + format(MAX_PAIRS, ",") if pairs is None else format(pairs, ",")

        def one(p: PairsNeeded) -> str:
            spread = ("" if p.pairs_low is None and p.pairs_high is None else
                      f" ({count(p.pairs_low)}-{count(p.pairs_high)} over the sd's interval)")
            return f"{count(p.pairs)} pairs for {p.effect * 100:g}%{spread}"

        interval = ("" if self.log_ratio_sd_low is None or self.log_ratio_sd_high is None else
                    f", {self.confidence * 100:g}% interval {self.log_ratio_sd_low:.3f}-{self.log_ratio_sd_high:.3f}")
        return (f"the spread of {finite} pairs (sd of the log ratios {self.log_ratio_sd:.3f}{interval}) needs "
                f"{', '.join(one(p) for p in self.pairs_needed)} to tell the difference ({POWER * 100:g}% power "
                f"at {self.confidence * 100:g}% confidence)")


class Comparison(BaseModel):
    """Candidate vs baseline over the seed pairs (same seed, run one after the other); an unreached trial counts as
    infinitely slow (see RatioEstimate.method)."""

    baseline: str
    candidate: str
    time: RatioEstimate
    cost: RatioEstimate | None = None
    energy: RatioEstimate | None = None
    reached_p_value: float | None = None  # Fisher's exact test of the reached fractions
    summary: str = ""  # one line in words


class Experiment(Record):
    """experiment.json: what the experiment is (arms, seeds, order, executor) and the state of every trial."""

    FILE = EXPERIMENT_FILE
    WHAT = "experiment"

    schema_version: int = 1
    kind: Literal["daybreak.experiment"] = "daybreak.experiment"
    command: str  # "repeat", "lesion", "ab"
    arms: list[Arm]
    seeds: list[int]
    order: Literal["alternate", "random"] = "alternate"
    order_seed: int = 0
    rules: str = "dawnbench"  # the headline rule set of the statistics
    trials: list[Trial] = Field(default_factory=list)
    executor: dict[str, Any] = Field(default_factory=dict)
    busy_policy: str = "keep"
    confidence: float = 0.99
    scored_runs: int = 5  # --scored-runs: N of MLPerf's scoring (repeat under --rules mlperf)
    effect: float | None = None  # --effect: a difference (0.1 = 10%) whose pairs-needed figure is reported
    created_at: datetime
    updated_at: datetime | None = None
    complete: bool = False
    invocations: list[list[str]] = Field(default_factory=list)  # every command line that worked on it
    node_rank: int = 0  # --nnodes > 1: this node's rank; a node other than 0 takes part in each trial, records none
    rdzv_endpoint: str | None = None  # --nnodes > 1: node 0's HOST:PORT, passed to every trial
    method: str = ("each trial is a fresh `daybreak run` process (the same cold start, clocks and record as a run "
                   "of its own); arms are interleaved; trials whose machine was busy are flagged")


class AbSummary(Record):
    """ab.json: `daybreak ab`'s result."""

    FILE = AB_FILE
    WHAT = "ab"

    schema_version: int = 1
    kind: Literal["daybreak.ab"] = "daybreak.ab"
    task: str
    metric: str
    target: float
    rules: str
    arms: list[ArmStats]
    comparison: Comparison
    stop_reason: str = ""  # why the trials stopped (all pairs run, interval narrow enough, budget spent)
    complete: bool = True
    provenance: Provenance
