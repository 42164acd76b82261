"""What an experiment is: its options (declared once, like a run's), its arms and the order of its trials.

Fair ordering: the trials of all arms are interleaved, never "all of A, then all of B". ``alternate`` runs seed
after seed, each seed once in every arm, the arms' order within a seed rotating (A B, B A, A B, ... for two arms;
for more arms each takes every place in turn), so neither arm always runs first after the previous seed; ``random``
shuffles the arms within each seed with ``--order-seed``. Either way the order is decided before the first trial
and recorded in experiment.json.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import model_validator

from daybreak.errors import ConfigError
from daybreak.options import Opt, OptionModel, int_at_least, number_in, one_of, parse_bool, parse_path, parse_seed
from daybreak.records.experiment import Arm, Trial

EXPERIMENT_COMMANDS = frozenset({"repeat", "lesion", "ab"})
DEFAULT_MAX_RUNS = 50  # --until-significant's bound on the pairs when --max-runs is not given
G_EXP = "experiment"
BUSY_POLICIES = ("keep", "exclude", "rerun")


class ExperimentConfig(OptionModel, init=False):
    """The options of an experiment itself (its trials take every run option: daybreak.config.RunConfig)."""

    out: Annotated[Path | None, Opt(
        "--out", "experiment directory: one run directory per trial, their configs and logs, experiment.json and "
        "the summary", parse=parse_path, commands=EXPERIMENT_COMMANDS, metavar="DIR", group=G_EXP)] = None
    runs: Annotated[int, Opt(
        "--runs", "trials per arm", parse=int_at_least(1), commands=EXPERIMENT_COMMANDS, metavar="N", group=G_EXP,
        also_in=(("lesion", "--runs-per"), ("ab", "--pairs")),
        help_in=(("repeat", "trials (seeds S, S+1, ...)"), ("lesion", "trials (seeds) per variant"),
                 ("ab", "pairs: each runs the baseline and the candidate with the same seed, one after the "
                        "other")))] = 5
    resume: Annotated[bool, Opt(
        "--resume", "finish the experiment in --out: run only its unfinished trials (a finished trial is never "
        "run again), in the recorded order, with the recorded options", parse=parse_bool,
        commands=EXPERIMENT_COMMANDS, kind="flag", group=G_EXP)] = False
    order: Annotated[Literal["alternate", "random"], Opt(
        "--order", "how the arms' trials are interleaved: alternate (each seed in every arm, the arms' order "
        "rotating from seed to seed) or random (shuffled within each seed by --order-seed)",
        parse=one_of("alternate", "random"), commands=frozenset({"lesion", "ab"}), choices=("alternate", "random"),
        group=G_EXP)] = "alternate"
    order_seed: Annotated[int, Opt(
        "--order-seed", "seed of --order random", parse=parse_seed, commands=frozenset({"lesion", "ab"}),
        metavar="N", group=G_EXP)] = 0
    busy: Annotated[str, Opt(
        "--busy", "trials run while the machine was busy (other processes took > 10% of the CPUs, or a high load "
        "average): keep them (flagged), exclude them from the statistics, or rerun them once at the end",
        parse=one_of(*BUSY_POLICIES), commands=EXPERIMENT_COMMANDS, choices=BUSY_POLICIES, group=G_EXP)] = "keep"
    confidence: Annotated[float, Opt(
        "--confidence", "of every interval; a difference is called when its interval excludes 1 (0.99: the nanoGPT "
        "speedrun's p < 0.01)", parse=number_in(0.5, 0.9999), commands=EXPERIMENT_COMMANDS, metavar="C",
        group=G_EXP)] = 0.99
    scored_runs: Annotated[int, Opt(
        "--scored-runs", "with --rules mlperf: N of MLPerf's scoring (the olympic mean of N runs, max(1, N // 10) "
        "dropped at each end as MLPerf drops 1 of 5 or 10 and 4 of UNET3D's 40; as many non-converging runs may be "
        "among the slowest dropped, more invalidate the set); more runs are scored by the window of N consecutive "
        "runs whose score is the median of all windows'", parse=int_at_least(3),
        commands=frozenset({"repeat"}), metavar="N", group=G_EXP,
        default_help="5, MLPerf's count for ResNet-50")] = 5
    effect: Annotated[float | None, Opt(
        "--effect", "a difference worth detecting, as a fraction (0.1: a ratio of 1.1): besides 5%, the output says "
        "how many pairs the observed spread of the log ratios needs to tell it (80% power at --confidence)",
        parse=number_in(0, 10, low_open=True), commands=frozenset({"lesion", "ab"}), metavar="E", group=G_EXP,
        default_help="5% only")] = None
    until_width: Annotated[float | None, Opt(
        "--until-significant", "keep adding pairs, one at a time, until the interval of the time ratio is at most W "
        "wide (its high / low - 1, e.g. 0.05), or --max-runs pairs or --budget seconds are spent. It does not stop "
        "when the interval first excludes 1 (stopping on significance would inflate false findings); each step "
        "says how many pairs the spread so far needs", parse=number_in(0, low_open=True),
        commands=frozenset({"ab"}), metavar="W", group=G_EXP)] = None
    max_runs: Annotated[int | None, Opt(
        "--max-runs", "with --until-significant: at most this many pairs (at least --runs)", parse=int_at_least(2),
        commands=frozenset({"ab"}), metavar="N", group=G_EXP, default_help=f"{DEFAULT_MAX_RUNS}")] = None
    budget_s: Annotated[float | None, Opt(
        "--budget", "with --until-significant: stop adding pairs after this many seconds", parse=number_in(0, low_open=True),
        commands=frozenset({"ab"}), metavar="S", group=G_EXP, default_help="none")] = None


    @model_validator(mode="after")
    def _stopping_rule(self) -> "ExperimentConfig":
        """--max-runs and --budget bound --until-significant: alone they would be ignored, so they are refused; and
        the first --runs pairs always run, so a --max-runs below them is refused too."""
        if self.until_width is None:
            for flag, value in (("--max-runs", self.max_runs), ("--budget", self.budget_s)):
                if value is not None:
                    raise ConfigError(f"{flag} {value:g} bounds --until-significant W (the pairs added until the "
                                      "interval is W wide) and does nothing without it: add --until-significant W, "
                                      "or drop it")
        elif self.max_runs is not None and self.max_runs < self.runs:
            raise ConfigError(f"--max-runs {self.max_runs} is below --runs {self.runs}: the first {self.runs} pairs "
                              f"always run; give --max-runs {self.runs} or more")
        return self

    @property
    def pair_limit(self) -> int:
        """The most pairs --until-significant runs: --max-runs, or DEFAULT_MAX_RUNS (never fewer than --runs)."""
        return self.max_runs if self.max_runs is not None else max(DEFAULT_MAX_RUNS, self.runs)


def seeds_for(first: int, runs: int) -> list[int]:
    return list(range(first, first + runs))


def trial_order(arms: list[Arm], seeds: list[int], order: str, order_seed: int, *, start: int = 0) -> list[Trial]:
    """Every (arm, seed) once, interleaved (see the module docstring); positions continue from ``start``."""
    rng = random.Random(order_seed)
    trials: list[Trial] = []
    n = len(arms)
    for i, seed in enumerate(seeds):
        if order == "random":
            names = [a for a in arms]
            rng.shuffle(names)
        else:
            shift = (start // max(n, 1) + i) % max(n, 1)
            names = arms[shift:] + arms[:shift]
        for arm in names:
            position = start + len(trials)
            key = f"{position:04d}-{arm.name}-s{seed}"
            run_dir = str(Path(arm.directory) / f"seed-{seed}") if arm.directory else f"seed-{seed}"
            trials.append(Trial(key=key, position=position, arm=arm.name, seed=seed, run_dir=run_dir))
    return trials


def arm_config(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of a RunConfig's options with ``changes``; ``overrides`` (the --set table) are merged, not replaced."""
    out = {k: v for k, v in base.items()}
    for key, value in changes.items():
        if key == "overrides":
            out["overrides"] = {**dict(base.get("overrides") or {}), **dict(value or {})}
        else:
            out[key] = value
    return out
