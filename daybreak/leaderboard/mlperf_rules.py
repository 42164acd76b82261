"""MLPerf Training on the leaderboard: the boards of its benchmarks, what they say, and how a results tree is
scored.

The benchmarks, their targets, run counts and initialization limits per round are one table,
daybreak.mlperf_benchmarks, which `daybreak time --log` reads too; here is what the leaderboard adds: one board per
benchmark, the notes a board shows, the availability names of the systems JSON, and the scoring rule of
`daybreak leaderboard import-mlperf` (daybreak.leaderboard.mlperf_import), each fact with its source:

- RULES: the MLPerf Training rules, training_rules.adoc in github.com/mlcommons/training_policies ("Benchmark
  Results"; the "Scoring" section);
- SUMMARIZER: mlperf_logging/result_summarizer/result_summarizer.py (``_compute_strong_score_standalone``: a
  run's score is run_stop - run_start; a run whose log fails the compliance checks counts as a dropped,
  "non-converged" run; 4 runs dropped at each end for unet3d, 1 for every other benchmark; the score is multiplied
  by the ``scaling_factor`` of a ``scaling.json`` in the benchmark folder) and its config.yaml (availability names);
- PACKAGE: mlperf_logging/package_checker/package_checker.py (a benchmark folder must hold exactly the required
  number of ``result_*.txt`` files).

Scoring (RULES, "Benchmark Results"): "Each benchmark result is computed by dropping the fastest and slowest runs,
then taking the mean of the remaining times. For this purpose, a single non-converging run may be treated as the
slowest run and dropped. A benchmark result is invalid if there is more than one non-converging run." U-Net3D: "Out
of the 40 runs, the 4 fastest and 4 slowest are dropped. There can be maximum of 4 non-converging runs."
"""

from __future__ import annotations

from dataclasses import dataclass, field

from daybreak.metrics import Metric
from daybreak.mlperf_benchmarks import BENCHMARKS, ROUNDS, Benchmark, init_limit

# SUMMARIZER config.yaml "availability": the statuses a systems/*.json may give -> MLPerf's category. daybreak keeps
# "available", "preview" and "rdi" (Research, Development, or Internal); "cloud" says where it is available.
AVAILABILITY = {
    "available on-premise": ("available", False), "available onprem": ("available", False),
    "available on premise": ("available", False), "onprem": ("available", False),
    "on-premise": ("available", False), "available": ("available", False),
    "available cloud": ("available", True), "available in cloud": ("available", True), "cloud": ("available", True),
    "research, development, or internal (rdi)": ("rdi", False), "rdi": ("rdi", False),
    "research": ("rdi", False), "development": ("rdi", False), "internal": ("rdi", False),
    "preview": ("preview", False),
}
DIVISIONS = {"closed": "closed", "close": "closed", "open": "open"}


def init_limit_text(round_: str, division: str) -> str:
    """The round's initialization limit in words (daybreak.mlperf_benchmarks.init_limit)."""
    return init_limit(round_, division).text


# --- what a board says about its MLPerf entries ----------------------------------------------------------------
MLPERF_CLOCK = ("MLPerf's clock runs from run_start (before any part of the system touches the dataset; model "
                "initialization before it is excluded, up to 20 minutes in v0.7, 30 minutes since v1.0 and 4 hours in "
                "the open division since v2.0, and a run whose initialization took longer does not count) to "
                "run_stop, never paused, evaluation included")
DAWNBENCH_CLOCK = ("DAWNBench's clock runs from the start of the program (data loading and model initialization "
                   "included) to the first evaluation at or above the target, evaluation and checkpoints excluded")
MLPERF_SCORE = ("each MLPerf row is MLPerf's own score: the olympic mean of the round's required runs (the fastest "
                "and the slowest dropped; a single run that did not converge counts as the slowest), times the "
                "round's scaling factor where the review set one")

BESIDE_DAWNBENCH = {
    "imagenet": ("MLPerf Training ResNet-50 v1.5 results (imported with `daybreak leaderboard import-mlperf`) are "
                 "ranked here beside DAWNBench's entries, under a different rule set: MLPerf's target is 75.9% "
                 "top-1 accuracy on the 50,000 validation images (DAWNBench: 93% top-5); " + MLPERF_CLOCK + " ("
                 + DAWNBENCH_CLOCK + "); " + MLPERF_SCORE + ". Each row says its rules; the two kinds of time are "
                 "not the same measurement."),
    "squad": ("MLPerf Training's BERT benchmark is not SQuAD: it pre-trains BERT-large on Wikipedia to 72.0% "
              "masked-LM accuracy (its own board, mlperf-bert); no MLPerf result is shown here."),
}


@dataclass(frozen=True)
class MlperfBoard:
    """A leaderboard task of MLPerf entries only (daybreak.leaderboard.tasks adds these after the catalog's)."""

    name: str
    title: str
    quality: Metric
    target: float  # the latest round's closed target (each entry carries its own round's)
    eval_split: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    goal_label: str = ""  # the latest round's whole target ("FID <= 90 and CLIP >= 0.15")


def _latest_target(board: str) -> tuple[Benchmark, float]:
    """The board's benchmark in its latest round, and that round's headline target."""
    bench, round_ = max(((b, r) for b in BENCHMARKS if b.board == board for r in b.rounds),
                        key=lambda br: ROUNDS.index(br[1]))
    return bench, bench.target(round_) or 0.0


def _spans(rounds: list[str]) -> str:
    return rounds[0] if len(rounds) == 1 else f"{rounds[0]} to {rounds[-1]}"


def _board_notes(name: str) -> tuple[str, ...]:
    bench, _ = _latest_target(name)
    mine = [b for b in BENCHMARKS if b.board == name]
    rounds = sorted({r for b in mine for r in b.rounds}, key=ROUNDS.index)
    spans: list[tuple[list[str], str]] = []  # consecutive rounds with the same target
    for b in mine:
        for span in b.spans:
            label = span.goal.label + (f" ({span.large_batch[1].label} from a global batch of {span.large_batch[0]})"
                                       if span.large_batch else "")
            if spans and spans[-1][1] == label:
                spans[-1][0].extend(span.rounds)
            else:
                spans.append((list(span.rounds), label))
    targets = "; ".join(f"{_spans(rs)}: {label}" for rs, label in spans)
    notes = [f"MLPerf Training {bench.title} ({bench.dataset}), round{'s' if len(rounds) > 1 else ''} "
             f"{_spans(rounds)}; the closed division's target: {targets}.",
             MLPERF_CLOCK[0].upper() + MLPERF_CLOCK[1:] + "; " + MLPERF_SCORE + "."]
    if name == "mlperf-bert":
        notes.insert(0, "Not SQuAD: MLPerf BERT pre-trains BERT-large from a given checkpoint on Wikipedia to 72.0% "
                        "masked-LM accuracy (71.2% / 70.6% in v0.7); DAWNBench's SQuAD task fine-tunes a model to F1 "
                        "0.75 on SQuAD v1.1's dev set. The times are not comparable and the boards are separate.")
    latest = bench.goal(rounds[-1])
    assert latest is not None  # _latest_target picked the benchmark that runs in the board's latest round
    if len(latest.criteria) > 1:
        notes.append(f"Two metrics: a run reaches the target when one evaluation meets both ({targets}); the value "
                     f"shown is its {latest.headline.metric.label}.")
    if name == "mlperf-stable-diffusion":
        notes.append("Stable Diffusion's checkpoints are evaluated offline: the evaluation time is not counted, and "
                     "run_stop carries the time of the first checkpoint that meets the target (MLPerf Training "
                     "rules).")
    return tuple(notes)


def mlperf_boards() -> list[MlperfBoard]:
    """One board per MLPerf benchmark that is not ranked beside a DAWNBench task, in BENCHMARKS' order."""
    out: dict[str, MlperfBoard] = {}
    for b in BENCHMARKS:
        if b.board in out or b.board in BESIDE_DAWNBENCH:
            continue
        bench, target = _latest_target(b.board)
        latest = bench.goal(bench.rounds[-1])
        out[b.board] = MlperfBoard(b.board, f"MLPerf {bench.title}", bench.quality, target,
                                   bench.dataset, _board_notes(b.board), latest.label if latest else "")
    return list(out.values())
