"""Quality metrics as typed objects: what a task's target applies to, how it is shown and where it goes in a view.

Records store a metric by name (``RunResult.metric == "top1"``); everything that formats, compares or writes a
metric asks ``get_metric(name)`` instead of comparing strings: daybreak's tasks' metrics, and MLPerf Training's
quality measures (an evaluation loss, a log perplexity, FID and CLIP, ...; which benchmark has which is
daybreak.mlperf_benchmarks), each with its direction and unit. A lower layer: imports nothing from daybreak.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str  # stored in records: "top1", "top5", "f1"
    label: str  # "top-1 accuracy"
    short: str  # "top-1"
    computed_by: str  # how the evaluator computes it
    dawnbench_column: str  # the column of a DAWNBench v1 TSV (and field of its JSON) that holds it
    dawnbench_percent: bool  # DAWNBench's files write it in percent (accuracies) or as a fraction (F1)
    higher_is_better: bool = True
    show_percent: bool = True  # shown as 94.00% (accuracies) or as 0.750 (F1)
    # what a value is, by definition (never guessed from the values): "fraction" (of examples; shown as a percent
    # or, like F1 and AUC, as a number), "loss", "log perplexity" or "score" (FID, CLIP)
    unit: str = "fraction"
    # a value not shown as a percent: 3 decimals (F1 0.750), or this many significant figures (AUC 0.80275,
    # eval loss 0.924564, FID 79.4533: an MLPerf target is met or missed in the fourth digit)
    significant: int | None = None

    def format(self, value: float | None) -> str:
        """A fraction 0..1 as people read this metric: ``94.00%`` or ``F1 0.750``."""
        if value is None:
            return "-"
        if self.show_percent:
            return f"{value * 100:.2f}%"
        return f"{self.short} {value:.3f}" if self.significant is None else f"{self.short} {value:.{self.significant}g}"

    def target_label(self, target: float, split: str | None = None) -> str:
        where = f" on {split}" if split else ""
        if self.show_percent:
            return f"{target * 100:g}% {self.label}{where}"
        return f"{self.short} {'' if self.higher_is_better else '<= '}{target:g}{where}"

    def to_dawnbench(self, value: float) -> float:
        """A fraction in daybreak's records -> the number DAWNBench's files hold."""
        return value * 100 if self.dawnbench_percent else value

    def reaches(self, value: float, target: float) -> bool:
        return value >= target if self.higher_is_better else value <= target

    def best(self, values: Iterable[float]) -> float | None:
        """The best of ``values`` in this metric's direction (None for none)."""
        numbers = list(values)
        if not numbers:
            return None
        return max(numbers) if self.higher_is_better else min(numbers)


TOP1 = Metric("top1", "top-1 accuracy", "top-1", "argmax of the logits equals the label, over the eval split",
              "top1Accuracy", True)
TOP5 = Metric("top5", "top-5 accuracy", "top-5", "the label is among the 5 largest logits, over the eval split",
              "top5Accuracy", True)
F1 = Metric("f1", "F1 score", "F1", "the official SQuAD v1.1 token F1 (max over the ground truths), averaged over "
            "the questions", "f1Score", False, show_percent=False)

METRICS: dict[str, Metric] = {m.name: m for m in (TOP1, TOP5, F1)}


# --- MLPerf Training's quality measures (daybreak.mlperf_benchmarks says which benchmark has which) -------------
def quality(name: str, label: str, short: str, *, higher_is_better: bool = True, unit: str = "fraction",
            percent: bool = False) -> Metric:
    """A quality measure of an MLPerf benchmark, as MLPerf's reference evaluation computes it (not one of
    daybreak's tasks' metrics: no DAWNBench column)."""
    return Metric(name, label, short, "the benchmark's reference evaluation (MLPerf Training rules)", "", False,
                  higher_is_better=higher_is_better, show_percent=percent, unit=unit, significant=6)


MLM_ACCURACY = quality("masked_lm_accuracy", "masked-LM accuracy", "masked-LM accuracy", percent=True)
AUC = quality("auc", "ROC AUC", "AUC")
MAP = quality("map", "mAP", "mAP")
BOX_MAP = quality("box_map", "box mAP", "box mAP")
MASK_MAP = quality("mask_map", "mask mAP", "mask mAP")
BOX_MASK_MAP = quality("box+mask_map", "box and mask mAP", "box mAP")
DICE = quality("dice", "mean DICE score", "DICE")
WER = quality("wer", "word error rate", "WER", higher_is_better=False, percent=True)
WIN_RATE = quality("win_rate", "win rate against the reference", "win rate", percent=True)
BLEU = quality("bleu", "BLEU / 100", "BLEU/100")
ACCURACY = quality("accuracy", "node classification accuracy", "accuracy", percent=True)
EVAL_LOSS = quality("eval_loss", "evaluation loss", "eval loss", higher_is_better=False, unit="loss")
LOG_PERPLEXITY = quality("log_perplexity", "log perplexity", "log perplexity", higher_is_better=False,
                         unit="log perplexity")
FID = quality("fid", "FID", "FID", higher_is_better=False, unit="score")
CLIP = quality("clip", "CLIP score", "CLIP", unit="score")
FID_CLIP = quality("fid+clip", "FID and CLIP score", "FID", higher_is_better=False, unit="score")
MLPERF_METRICS: dict[str, Metric] = {m.name: m for m in (
    MLM_ACCURACY, AUC, MAP, BOX_MAP, MASK_MAP, BOX_MASK_MAP, DICE, WER, WIN_RATE, BLEU, ACCURACY, EVAL_LOSS,
    LOG_PERPLEXITY, FID, CLIP, FID_CLIP)}
# names entries were stored under before the metric was named as MLPerf names it
METRIC_ALIASES = {"mlm_accuracy": MLM_ACCURACY}


def metric_named(name: str | None) -> Metric | None:
    """The Metric a record's or an entry's ``metric`` names: one of daybreak's tasks' or an MLPerf benchmark's
    quality measure; None for another name."""
    name = name or ""
    return METRICS.get(name) or MLPERF_METRICS.get(name) or METRIC_ALIASES.get(name)


def get_metric(name: str) -> Metric:
    found = metric_named(name)
    if found is None:
        raise ValueError(f"unknown metric {name!r}; known: {', '.join([*METRICS, *MLPERF_METRICS])}")
    return found


def register_metric(metric: Metric) -> Metric:
    """For a task that brings its own metric (its task file calls this once)."""
    existing = METRICS.get(metric.name)
    if existing is not None and existing != metric:
        raise ValueError(f"metric {metric.name!r} is already registered differently")
    METRICS[metric.name] = metric
    return metric
