"""What an experiment's trials say: per arm (times, reached fraction, accuracy against the target, cold starts) and
between two arms (the paired ratio with its interval). The arithmetic is daybreak.analysis.stats / .paired."""

from __future__ import annotations

import math

from daybreak.analysis.paired import DEFAULT_EFFECT, describe, paired_ratio
from daybreak.analysis.stats import fisher_reached, mean, target_significance, time_stats
from daybreak.records.experiment import ArmStats, Comparison, Experiment, RatioEstimate, Trial
from daybreak.experiments.engine import counted, pairs


def arm_stats(record: Experiment, arm: str, target: float) -> ArmStats:
    trials = counted(record, arm)
    everyone = [t for t in record.trials if t.arm == arm and t.state in ("done", "failed")]
    reached = [t for t in trials if t.reached and t.time_to_target_s is not None]
    accuracies = [t.final_accuracy for t in trials if t.final_accuracy is not None]
    cold = [(t.data_load_s or 0.0) + (t.model_init_s or 0.0) for t in trials if t.data_load_s is not None]
    costs = [t.cost_usd for t in reached if t.cost_usd is not None]
    energies = [t.energy_j for t in reached if t.energy_j is not None]
    return ArmStats(
        arm=arm, n_trials=len(trials), n_reached=len(reached),
        reached_fraction=len(reached) / len(trials) if trials else None,
        n_busy=sum(1 for t in everyone if t.busy), n_excluded=len(everyone) - len(trials),
        time_to_target=time_stats([t.time_to_target_s for t in reached if t.time_to_target_s is not None],
                                  confidence=record.confidence),
        accuracy=target_significance(accuracies, target, alpha=1 - record.confidence,
                                     confidence=record.confidence) if accuracies else None,
        mean_cost_usd=mean(costs) if costs else None, mean_energy_j=mean(energies) if energies else None,
        cold_start_spread=(max(cold) / min(cold)) if cold and min(cold) > 0 else None,
    )


def effects(record: Experiment) -> tuple[float, ...]:
    """The differences whose pairs-needed figure is reported: 5%, and --effect."""
    return (DEFAULT_EFFECT,) + ((record.effect,) if record.effect is not None else ())


def compare(record: Experiment, baseline: str, candidate: str) -> Comparison:
    """Candidate vs baseline over their seed pairs; a trial that did not reach the target is infinitely slow (and
    costly): inf in the ratio (daybreak.analysis.paired), its reached fraction in Fisher's test."""
    both = pairs(record, baseline, candidate)
    conf = record.confidence

    def value(trial: Trial, attr: str) -> float | None:
        if not (trial.reached and trial.time_to_target_s is not None):
            return math.inf
        got: float | None = getattr(trial, attr)
        return got

    def ratio(attr: str) -> RatioEstimate | None:
        a = [value(x, attr) for x, _ in both]
        b = [value(y, attr) for _, y in both]
        if attr != "time_to_target_s" and not (any(v is not None and math.isfinite(v) for v in a)
                                               and any(v is not None and math.isfinite(v) for v in b)):
            return None  # not measured in both arms
        return paired_ratio(a, b, confidence=conf, quantity=attr, effects=effects(record))

    time = ratio("time_to_target_s")
    assert time is not None
    a_trials, b_trials = counted(record, baseline), counted(record, candidate)
    reached_p = fisher_reached(sum(t.reached for t in a_trials), len(a_trials), sum(t.reached for t in b_trials),
                               len(b_trials)) if a_trials and b_trials else None
    return Comparison(baseline=baseline, candidate=candidate, time=time, cost=ratio("cost_usd"),
                      energy=ratio("energy_j"), reached_p_value=reached_p,
                      summary=describe(time, baseline, candidate))
