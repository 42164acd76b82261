"""Quality metrics as typed objects: what a task's target applies to, how it is shown and where it goes in a view.

Records store a metric by name (``RunResult.metric == "top1"``); everything that formats, compares or writes a
metric asks ``get_metric(name)`` instead of comparing strings. A lower layer: imports nothing from daybreak.
"""

from __future__ import annotations

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

    def best(self, values) -> float | None:  # noqa: ANN001 - any iterable of numbers
        """The best of ``values`` in this metric's direction (None for none)."""
        values = list(values)
        if not values:
            return None
        return max(values) if self.higher_is_better else min(values)


TOP1 = Metric("top1", "top-1 accuracy", "top-1", "argmax of the logits equals the label, over the eval split",
              "top1Accuracy", True)
TOP5 = Metric("top5", "top-5 accuracy", "top-5", "the label is among the 5 largest logits, over the eval split",
              "top5Accuracy", True)
F1 = Metric("f1", "F1 score", "F1", "the official SQuAD v1.1 token F1 (max over the ground truths), averaged over "
            "the questions", "f1Score", False, show_percent=False)

METRICS: dict[str, Metric] = {m.name: m for m in (TOP1, TOP5, F1)}


def get_metric(name: str) -> Metric:
    try:
        return METRICS[name]
    except KeyError:
        raise ValueError(f"unknown metric {name!r}; known: {', '.join(METRICS)}") from None


def register_metric(metric: Metric) -> Metric:
    """For a task that brings its own metric (its task file calls this once)."""
    existing = METRICS.get(metric.name)
    if existing is not None and existing != metric:
        raise ValueError(f"metric {metric.name!r} is already registered differently")
    METRICS[metric.name] = metric
    return metric
