"""MLPerf Training's rules as data: the rounds, their benchmarks, quality targets, required runs and scoring.

What `daybreak leaderboard import-mlperf` (daybreak.leaderboard.mlperf_import) needs to score a published results
tree the way MLPerf does, each fact with its source:

- RULES: the MLPerf Training rules, training_rules.adoc in github.com/mlcommons/training_policies ("Benchmark
  Results" table of minimum runs per benchmark, read at the commit before each round; the "Scoring" section);
- CHECKER: the closed-division compliance checker of each round, mlperf_logging/compliance_checker/training_<round>/
  closed_<benchmark>.yaml in github.com/mlcommons/logging (the ``eval_accuracy`` ATLEAST_ONE_CHECK is the target
  a run must reach; ``common.yaml`` the initialization limit);
- SUMMARIZER: mlperf_logging/result_summarizer/result_summarizer.py (``_compute_strong_score_standalone``: a
  run's score is run_stop - run_start; a run whose log fails the checks counts as a dropped, "non-converged" run;
  4 runs dropped at each end for unet3d, 1 for every other benchmark; the score is multiplied by the
  ``scaling_factor`` of a ``scaling.json`` in the benchmark folder) and its config.yaml (availability names);
- PACKAGE: mlperf_logging/package_checker/package_checker.py (a benchmark folder must hold exactly the required
  number of ``result_*.txt`` files) and mlperf_logging/benchmark_meta.py (required files per benchmark, allowed
  benchmarks per round).

Scoring (RULES, "Benchmark Results"): "Each benchmark result is computed by dropping the fastest and slowest runs,
then taking the mean of the remaining times. For this purpose, a single non-converging run may be treated as the
slowest run and dropped. A benchmark result is invalid if there is more than one non-converging run." U-Net3D: "Out
of the 40 runs, the 4 fastest and 4 slowest are dropped. There can be maximum of 4 non-converging runs."

This module imports nothing from daybreak but the metric type: the importer, the leaderboard's boards
(daybreak.leaderboard.tasks) and the pages read the same facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from daybreak.metrics import METRICS, TOP1, Metric

# Rounds whose published trees daybreak reads: v0.7 introduced the ``:::MLLOG {json}`` log format daybreak's mllog
# reader reads (v0.5 and v0.6 logged ``:::MLL <seconds> key: {...}`` lines, which it does not).
ROUNDS = ("v0.7", "v1.0", "v1.1", "v2.0", "v2.1", "v3.0", "v3.1", "v4.0", "v4.1", "v5.0", "v5.1")
OLD_FORMAT_ROUNDS = ("v0.5", "v0.6")
ROUND_FOLDER = re.compile(r"training_results_(v\d+\.\d+)", re.I)


def metric(name: str, label: str, short: str, higher_is_better: bool = True, percent: bool = True) -> Metric:
    """A quality measure of an MLPerf benchmark (never a DAWNBench column; not registered in daybreak.metrics)."""
    return Metric(name, label, short, "the benchmark's reference evaluation (MLPerf Training rules)", "", False,
                  higher_is_better=higher_is_better, show_percent=percent)


MLM_ACCURACY = metric("mlm_accuracy", "masked-LM accuracy", "MLM accuracy")
AUC = metric("auc", "ROC AUC", "AUC", percent=False)
MAP = metric("map", "mAP", "mAP", percent=False)
DICE = metric("dice", "mean DICE score", "DICE", percent=False)
WER = metric("wer", "word error rate", "WER", higher_is_better=False)
WIN_RATE = metric("win_rate", "win rate against the reference", "win rate")
BLEU = metric("bleu", "BLEU / 100", "BLEU/100", percent=False)
ACCURACY = metric("accuracy", "accuracy", "accuracy")
EVAL_LOSS = metric("eval_loss", "evaluation loss", "eval loss", higher_is_better=False, percent=False)


@dataclass(frozen=True)
class Benchmark:
    """One MLPerf Training benchmark as its results folder names it (``results/<system>/<name>/``)."""

    name: str  # the folder name: "resnet", "bert", ...
    title: str  # "ResNet-50 v1.5"
    board: str  # the leaderboard task its entries go to ("imagenet", "mlperf-bert")
    quality: Metric
    targets: dict[str, float]  # round -> the closed division's target (CHECKER); a round not listed: not in it
    runs: int  # result files a benchmark folder holds (RULES table; PACKAGE)
    dropped: int = 1  # runs dropped at each end of the sorted times (SUMMARIZER: 4 for unet3d)
    # a target that depends on what the log says (v0.7 BERT: 71.2% below a global batch of 8192, else 70.6%)
    target_rule: Callable[[str, int | None], float | None] | None = None
    dataset: str = ""

    def target(self, round_: str, global_batch_size: int | None = None) -> float | None:
        if self.target_rule is not None:
            found = self.target_rule(round_, global_batch_size)
            if found is not None:
                return found
        return self.targets.get(round_)

    @property
    def max_failed(self) -> int:
        """Non-converging runs a valid result may have: each counts as one of the slowest, dropped."""
        return self.dropped


def _rounds(first: str, last: str, target: float) -> dict[str, float]:
    return {r: target for r in ROUNDS[ROUNDS.index(first): ROUNDS.index(last) + 1]}


def _bert_v07(round_: str, global_batch_size: int | None) -> float | None:
    # CHECKER training_0.7.0/closed_bert.yaml: "v['value'] >= 0.712 if s['global_batch_size'] < 8192 else
    # v['value'] >= 0.706"
    if round_ != "v0.7":
        return None
    return 0.712 if global_batch_size is None or global_batch_size < 8192 else 0.706


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("resnet", "ResNet-50 v1.5", "imagenet", TOP1, _rounds("v0.7", "v4.0", 0.759), runs=5,
              dataset="ImageNet, ILSVRC2012"),
    Benchmark("bert", "BERT-large", "mlperf-bert", MLM_ACCURACY, {"v0.7": 0.712, **_rounds("v1.0", "v5.0", 0.720)},
              runs=10,
              target_rule=_bert_v07, dataset="Wikipedia, 2020/01/01 dump"),
    Benchmark("dlrm", "DLRM", "mlperf-dlrm", AUC, _rounds("v0.7", "v2.1", 0.8025), runs=5,
              dataset="Criteo Terabyte click logs"),
    Benchmark("dlrm_dcnv2", "DLRM-DCNv2", "mlperf-dlrm-dcnv2", AUC, _rounds("v3.0", "v5.1", 0.80275), runs=10,
              dataset="Criteo Terabyte, multi-hot"),
    # the "ssd" folder held SSD-ResNet34 on COCO up to v1.1 and RetinaNet on OpenImages from v2.0 (named
    # "retinanet" from v5.0): two tasks, two boards
    Benchmark("ssd", "SSD-ResNet34", "mlperf-ssd", MAP, _rounds("v0.7", "v1.1", 0.230), runs=5,
              dataset="COCO 2017"),
    Benchmark("ssd", "RetinaNet", "mlperf-retinanet", MAP, _rounds("v2.0", "v4.1", 0.340), runs=5,
              dataset="OpenImages, MLPerf's subset"),
    Benchmark("retinanet", "RetinaNet", "mlperf-retinanet", MAP, _rounds("v5.0", "v5.1", 0.340), runs=5,
              dataset="OpenImages, MLPerf's subset"),
    Benchmark("unet3d", "3D U-Net", "mlperf-unet3d", DICE, _rounds("v1.0", "v4.0", 0.908), runs=40, dropped=4,
              dataset="KiTS19"),
    Benchmark("rnnt", "RNN-T", "mlperf-rnnt", WER, _rounds("v1.0", "v3.1", 0.058), runs=10,
              dataset="LibriSpeech"),
    Benchmark("minigo", "MiniGo", "mlperf-minigo", WIN_RATE, _rounds("v0.7", "v2.1", 0.5), runs=10,
              dataset="Go 9x9 self-play"),
    Benchmark("gnmt", "GNMT", "mlperf-gnmt", BLEU, {"v0.7": 0.240}, runs=10, dataset="WMT16 English-German"),
    Benchmark("transformer", "Transformer", "mlperf-transformer", BLEU, {"v0.7": 0.250}, runs=10,
              dataset="WMT17 English-German"),
    Benchmark("gnn", "R-GAT", "mlperf-rgat", ACCURACY, _rounds("v4.0", "v4.1", 0.72), runs=10, dataset="IGBH-Full"),
    Benchmark("rgat", "R-GAT", "mlperf-rgat", ACCURACY, _rounds("v5.0", "v5.1", 0.72), runs=10, dataset="IGBH-Full"),
    Benchmark("llama2_70b_lora", "Llama 2 70B LoRA", "mlperf-llama2-70b-lora", EVAL_LOSS,
              _rounds("v4.0", "v5.1", 0.925), runs=10, dataset="SCROLLS GovReport"),
    Benchmark("flux1", "FLUX.1", "mlperf-flux1", EVAL_LOSS, {"v5.1": 0.586}, runs=10, dataset="CC12M"),
)
BENCHMARK_NAMES = tuple(dict.fromkeys(b.name for b in BENCHMARKS))


def benchmark_of(folder: str, round_: str) -> Benchmark | None:
    """The benchmark a ``results/<system>/<folder>/`` of ``round_`` holds; None when ``folder`` names none of it."""
    for b in BENCHMARKS:
        if b.name == folder and b.target(round_) is not None:
            return b
    return None


# Benchmarks of the published rounds that have no board here, and why (one line each when a tree holds them).
NOT_ON_A_BOARD = {
    "maskrcnn": "its quality (COCO box and mask mAP) is logged as an object of two values, which daybreak's mllog "
                "reader does not take as one accuracy",
    "mask": "MLPerf v0.6's name for Mask R-CNN, whose quality (box and mask mAP) is two values",
    "gpt3": "its target is a log perplexity of 2.69 (lower is better), not a fraction the leaderboard stores",
    "stable_diffusion": "its quality is two metrics (FID and CLIP score), evaluated from checkpoints after the clock "
                        "stops",
    "llama31_405b": "its target is a log perplexity of 5.6 (lower is better), not a fraction the leaderboard stores",
    "llama31_8b": "its target is a log perplexity of 3.3 (lower is better), not a fraction the leaderboard stores",
}

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
    """CHECKER common.yaml: init_stop less than 20 minutes after init_start (v0.7), 30 (v1.0 on; 4 hours in the
    open division from v2.0)."""
    if round_ == "v0.7":
        return "20 minutes"
    if division == "open" and ROUNDS.index(round_) >= ROUNDS.index("v2.0"):
        return "4 hours"
    return "30 minutes"


# --- what a board says about its MLPerf entries ----------------------------------------------------------------
MLPERF_CLOCK = ("MLPerf's clock runs from run_start (before any part of the system touches the dataset; model "
                "initialization before it is excluded, up to 20 minutes in v0.7 and 30 minutes since) to run_stop, "
                "never paused, evaluation included")
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


def _latest_target(board: str) -> tuple[Benchmark, float]:
    best: tuple[int, Benchmark, float] | None = None
    for b in BENCHMARKS:
        if b.board != board:
            continue
        for r, t in b.targets.items():
            if best is None or ROUNDS.index(r) > best[0]:
                best = (ROUNDS.index(r), b, t)
    assert best is not None
    return best[1], best[2]


def _spans(rounds: list[str]) -> str:
    return rounds[0] if len(rounds) == 1 else f"{rounds[0]} to {rounds[-1]}"


def _board_notes(name: str) -> tuple[str, ...]:
    bench, _ = _latest_target(name)
    mine = [b for b in BENCHMARKS if b.board == name]
    rounds = sorted({r for b in mine for r in b.targets}, key=ROUNDS.index)
    spans: list[tuple[list[str], str]] = []  # consecutive rounds with the same target
    for b in mine:
        for r in sorted(b.targets, key=ROUNDS.index):
            label = b.quality.target_label(b.targets[r])
            if spans and spans[-1][1] == label:
                spans[-1][0].append(r)
            else:
                spans.append(([r], label))
    targets = "; ".join(f"{_spans(rs)}: {label}" for rs, label in spans)
    notes = [f"MLPerf Training {bench.title} ({bench.dataset}), round{'s' if len(rounds) > 1 else ''} "
             f"{_spans(rounds)}; the closed division's target: {targets}.",
             MLPERF_CLOCK[0].upper() + MLPERF_CLOCK[1:] + "; " + MLPERF_SCORE + "."]
    if name == "mlperf-bert":
        notes.insert(0, "Not SQuAD: MLPerf BERT pre-trains BERT-large from a given checkpoint on Wikipedia to 72.0% "
                        "masked-LM accuracy (71.2% / 70.6% in v0.7); DAWNBench's SQuAD task fine-tunes a model to F1 "
                        "0.75 on SQuAD v1.1's dev set. The times are not comparable and the boards are separate.")
    return tuple(notes)


def mlperf_boards() -> list[MlperfBoard]:
    """One board per MLPerf benchmark that is not ranked beside a DAWNBench task, in BENCHMARKS' order."""
    out: dict[str, MlperfBoard] = {}
    for b in BENCHMARKS:
        if b.board in out or b.board in BESIDE_DAWNBENCH:
            continue
        bench, target = _latest_target(b.board)
        out[b.board] = MlperfBoard(b.board, f"MLPerf {bench.title}", bench.quality, target,
                                   bench.dataset, _board_notes(b.board))
    return list(out.values())


QUALITY_METRICS: dict[str, Metric] = {b.quality.name: b.quality for b in BENCHMARKS}


def metric_named(name: str | None) -> Metric | None:
    """The Metric an entry's ``metric`` names: an MLPerf benchmark's quality measure or one of daybreak's; None
    for another name."""
    return QUALITY_METRICS.get(name or "") or METRICS.get(name or "")
