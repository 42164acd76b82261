"""What an experiment's trials say: per arm (times, reached fraction, accuracy against the target, cold starts) and
between two arms (the paired ratio with its interval). The arithmetic is daybreak.analysis.stats / .paired."""

from __future__ import annotations

from daybreak.analysis.paired import describe, paired_ratio
from daybreak.analysis.stats import fisher_reached, mean, target_significance, time_stats
from daybreak.records.experiment import ArmStats, Comparison, Experiment
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
        time_to_target=time_stats([t.time_to_target_s for t in reached], confidence=record.confidence),
        accuracy=target_significance(accuracies, target, alpha=1 - record.confidence) if accuracies else None,
        mean_cost_usd=mean(costs) if costs else None, mean_energy_j=mean(energies) if energies else None,
        cold_start_spread=(max(cold) / min(cold)) if cold and min(cold) > 0 else None,
    )


def compare(record: Experiment, baseline: str, candidate: str) -> Comparison:
    """Candidate vs baseline over their seed pairs."""
    both = pairs(record, baseline, candidate)
    conf = record.confidence

    def values(attr: str) -> tuple[list[float | None], list[float | None]]:
        a = [getattr(x, attr) if x.reached else None for x, _ in both]
        b = [getattr(y, attr) if y.reached else None for _, y in both]
        return a, b

    time = paired_ratio(*values("time_to_target_s"), confidence=conf, quantity="time_to_target_s")
    cost_a, cost_b = values("cost_usd")
    cost = paired_ratio(cost_a, cost_b, confidence=conf, quantity="cost_usd") if any(cost_a) and any(cost_b) else None
    en_a, en_b = values("energy_j")
    energy = paired_ratio(en_a, en_b, confidence=conf, quantity="energy_j") if any(en_a) and any(en_b) else None
    a_trials, b_trials = counted(record, baseline), counted(record, candidate)
    reached_p = fisher_reached(sum(t.reached for t in a_trials), len(a_trials), sum(t.reached for t in b_trials),
                               len(b_trials)) if a_trials and b_trials else None
    return Comparison(baseline=baseline, candidate=candidate, time=time, cost=cost, energy=energy,
                      reached_p_value=reached_p, summary=describe(time, baseline, candidate))
