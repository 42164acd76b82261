"""MLPerf Training's benchmarks as one table: for every round daybreak reads, each benchmark's quality metric (its
name, direction and unit), its closed-division target, the result files a submission needs, and the round's limit
on initialization before the clock, each row with its source.

One table, every reader: `daybreak time --log` (which benchmark a log is of and what its run must reach),
`daybreak check-mllog` (which compliance rules apply) and `daybreak leaderboard import-mlperf` (the boards and the
scores). A target that is lower-is-better (an evaluation loss, a log perplexity, FID), a target of two metrics
(Stable Diffusion's FID and CLIP; Mask R-CNN's box and mask mAP) and a target that changed between rounds are rows
here, not branches in a reader.

The sources each row names:

- CHECKER: mlperf-logging's compliance checker (github.com/mlcommons/logging), ``mlperf_logging/compliance_checker/
  training_<ruleset>/closed_<benchmark>.yaml``: the ``eval_accuracy`` ATLEAST_ONE_CHECK is the target a closed run
  must reach in some evaluation (with the limit its other side checks, e.g. ``v['value'] < 1.0``); ``common.yaml``
  the initialization limit (``init_stop`` less than N minutes after the first ``init_start``);
- META: ``mlperf_logging/benchmark_meta.py``: the benchmarks of each round and the result files a benchmark folder
  must hold;
- RULES: the MLPerf Training rules, training_rules.adoc in github.com/mlcommons/training_policies: the closed
  division's quality targets, "Benchmark Results" (runs; the deprecated benchmarks' table for retired ones) and
  "Run Results" (initialization before the clock), read at the commit before each round.

A lower layer: imports nothing from daybreak but the metrics (daybreak.metrics defines MLPerf's quality measures
beside daybreak's tasks' metrics, so every record's ``metric`` is one ``get_metric`` knows).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from daybreak.metrics import (
    ACCURACY, AUC, BLEU, BOX_MAP, BOX_MASK_MAP, CLIP, DICE, EVAL_LOSS, FID, FID_CLIP, LOG_PERPLEXITY, MAP, MASK_MAP,
    MLM_ACCURACY, TOP1, WER, WIN_RATE, Metric,
)

# Rounds whose published trees daybreak reads: v0.7 introduced the ``:::MLLOG {json}`` log format (v0.5 and v0.6
# logged ``:::MLL <seconds> key: {...}`` lines, which daybreak's reader does not read). v6.0's rules come from the
# checker's training_6.0.0 configs (no v6.0 results were published when this table was checked).
ROUNDS = ("v0.7", "v1.0", "v1.1", "v2.0", "v2.1", "v3.0", "v3.1", "v4.0", "v4.1", "v5.0", "v5.1", "v6.0")
OLD_FORMAT_ROUNDS = ("v0.5", "v0.6")
ROUND_FOLDER = re.compile(r"training_results_(v\d+\.\d+)", re.I)


def rounds_text() -> str:
    """The rounds daybreak reads, for help texts: 'v0.7 to v6.0'."""
    return f"{ROUNDS[0]} to {ROUNDS[-1]}"


def ruleset(round_: str) -> str:
    """'v4.0' -> '4.0.0', the name mlperf-logging gives the round's rules (its checker, RCPs, summarizer)."""
    return round_.lstrip("v") + ".0"


def normalize_round(text: str) -> str | None:
    """'4.0', 'v4.0', 'V4.0', '4.0.0' -> 'v4.0'; None for text that names no round."""
    m = re.fullmatch(r"\s*[vV]?(\d+)\.(\d+)(?:\.0)?\s*", text or "")
    return f"v{int(m.group(1))}.{int(m.group(2))}" if m else None


def _span(first: str, last: str) -> tuple[str, ...]:
    return ROUNDS[ROUNDS.index(first): ROUNDS.index(last) + 1]


# --- targets -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Criterion:
    """One condition of a target: ``metric`` at or beyond ``target`` in its direction, and short of ``limit`` (the
    checker's sanity check on the other side: ``v['value'] < 1.0``, ``> 0.0``) where there is one."""

    metric: Metric
    target: float
    # which eval_accuracy records hold it: their metadata "metric" (Stable Diffusion's "FID", "CLIP") or the key of
    # an object value (Mask R-CNN's "BBOX", "SEGM"); None: every eval_accuracy record
    part: str | None = None
    limit: float | None = None
    limit_inclusive: bool = False

    def met(self, value: float) -> bool:
        if not self.metric.reaches(value, self.target):
            return False
        if self.limit is None:
            return True
        if self.metric.higher_is_better:
            return value <= self.limit if self.limit_inclusive else value < self.limit
        return value >= self.limit if self.limit_inclusive else value > self.limit

    @property
    def label(self) -> str:
        """'75.9% top-1 accuracy', 'log perplexity <= 2.69', 'FID <= 90', 'AUC >= 0.80275'."""
        if self.metric.show_percent and self.metric.higher_is_better:
            return f"{self.target * 100:g}% {self.metric.label}"
        if self.metric.show_percent:
            return f"{self.metric.label} <= {self.target * 100:g}%"
        return f"{self.metric.short} {'>=' if self.metric.higher_is_better else '<='} {self.target:g}"


@dataclass(frozen=True)
class Goal:
    """What a run must reach: every criterion in one evaluation (Stable Diffusion: FID and CLIP of one checkpoint)."""

    criteria: tuple[Criterion, ...]
    # a goal whose parts are logged as separate eval_accuracy records (each naming its part in its metadata
    # "metric"): the metadata key by which the round's checker aggregates them into one evaluation (Stable Diffusion:
    # step_num in v3.1, samples_count from v4.0); None: each eval_accuracy record is one evaluation
    aggregate_by: str | None = None

    @classmethod
    def single(cls, metric: Metric, target: float) -> "Goal":
        return cls((Criterion(metric, target),))

    @property
    def headline(self) -> Criterion:
        return self.criteria[0]

    @property
    def parts(self) -> tuple[str | None, ...]:
        return tuple(c.part for c in self.criteria)

    def met(self, values: Mapping[str | None, float]) -> bool:
        return all(c.part in values and c.met(values[c.part]) for c in self.criteria)

    @property
    def label(self) -> str:
        return " and ".join(c.label for c in self.criteria)


def _fraction_target(metric: Metric, target: float, *, limit: float | None = 1.0, inclusive: bool = False) -> Goal:
    return Goal((Criterion(metric, target, limit=limit, limit_inclusive=inclusive),))


def _lower_target(metric: Metric, target: float, *, limit: float = 0.0) -> Goal:
    return Goal((Criterion(metric, target, limit=limit),))


# --- the table -----------------------------------------------------------------------------------------------
RUNS = "result files: META _ALL_RESULT_FILE_COUNTS and RULES 'Benchmark Results'"


@dataclass(frozen=True)
class Span:
    """A benchmark's closed-division rules over consecutive rounds, with their source."""

    first: str
    last: str
    goal: Goal
    runs: int  # result files a benchmark folder must hold
    source: str
    # a target that depends on the run's global batch size (v0.7 BERT): (from this batch size on, this goal)
    large_batch: tuple[int, Goal] | None = None

    @property
    def rounds(self) -> tuple[str, ...]:
        return _span(self.first, self.last)

    def goal_for(self, global_batch_size: int | None = None) -> Goal:
        if self.large_batch is not None and global_batch_size is not None and \
                global_batch_size >= self.large_batch[0]:
            return self.large_batch[1]
        return self.goal


@dataclass(frozen=True)
class Benchmark:
    """One MLPerf Training benchmark as its logs (``submission_benchmark``) and results folders name it."""

    name: str  # "resnet", "llama2_70b_lora", ...
    title: str  # "ResNet-50 v1.5"
    board: str  # the leaderboard task its entries go to ("imagenet", "mlperf-bert")
    quality: Metric  # the headline metric: records' ``metric`` and the value a board shows
    spans: tuple[Span, ...]
    dataset: str = ""
    dropped: int = 1  # runs dropped at each end of the sorted times (the summarizer: 4 for unet3d)

    @property
    def rounds(self) -> tuple[str, ...]:
        return tuple(r for s in self.spans for r in s.rounds)

    def span(self, round_: str) -> Span | None:
        return next((s for s in self.spans if round_ in s.rounds), None)

    def goal(self, round_: str, global_batch_size: int | None = None) -> Goal | None:
        s = self.span(round_)
        return s.goal_for(global_batch_size) if s is not None else None

    def target(self, round_: str, global_batch_size: int | None = None) -> float | None:
        """The headline criterion's target in ``round_`` (None: not a benchmark of that round)."""
        goal = self.goal(round_, global_batch_size)
        return goal.headline.target if goal is not None else None

    def runs(self, round_: str) -> int | None:
        s = self.span(round_)
        return s.runs if s is not None else None

    @property
    def max_failed(self) -> int:
        """Non-converging runs a valid result may have: each counts as one of the slowest, dropped."""
        return self.dropped


def _checker(yaml: str, check: str, runs: int) -> str:
    return f"CHECKER training_<round>/{yaml}: eval_accuracy ATLEAST_ONE_CHECK \"{check}\"; {runs} {RUNS}"


def _sd_goal(aggregate_by: str) -> Goal:
    return Goal((Criterion(FID, 90.0, "FID", 0.0, True), Criterion(CLIP, 0.15, "CLIP", 1.0, True)), aggregate_by)


def _sd_source(aggregate_by: str) -> str:
    return ("CHECKER training_<round>/closed_stable_diffusion.yaml: the FID and CLIP eval_accuracy records of one "
            f"{aggregate_by} aggregated (BEGIN: agg_eval_lines[line.value['metadata']['{aggregate_by}']]), "
            "ATLEAST_ONE_CHECK \"(0.0 <= v['value']['FID'] <= 90.0) and (0.15 <= v['value']['CLIP'] <= 1.0)\"; "
            f"10 {RUNS}; RULES: FID<=90 and CLIP>=0.15, evaluated offline (the evaluation time is not counted)")


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("resnet", "ResNet-50 v1.5", "imagenet", TOP1, (
        Span("v0.7", "v4.0", _fraction_target(TOP1, 0.759), 5,
             _checker("closed_resnet.yaml", "v['value'] >= 0.7590 and v['value'] < 1.0", 5)
             + "; RULES: 75.90% classification (top-1)"),), dataset="ImageNet, ILSVRC2012"),
    Benchmark("bert", "BERT-large", "mlperf-bert", MLM_ACCURACY, (
        Span("v0.7", "v0.7", _fraction_target(MLM_ACCURACY, 0.712), 10,
             _checker("closed_bert.yaml", "(v['value'] >= 0.712 if s['global_batch_size'] < 8192 else v['value'] >= "
                      "0.706) and v['value'] < 1.0", 10),
             large_batch=(8192, _fraction_target(MLM_ACCURACY, 0.706))),
        Span("v1.0", "v5.0", _fraction_target(MLM_ACCURACY, 0.720), 10,
             _checker("closed_bert.yaml", "(v['value'] >= 0.720) and v['value'] < 1.0", 10)
             + "; RULES: 0.720 Mask-LM accuracy")), dataset="Wikipedia, 2020/01/01 dump"),
    Benchmark("dlrm", "DLRM", "mlperf-dlrm", AUC, (
        Span("v0.7", "v2.1", _fraction_target(AUC, 0.8025), 5,
             _checker("closed_dlrm.yaml", "v['value'] >= 0.8025 and v['value'] < 1.0", 5)),),
              dataset="Criteo Terabyte click logs"),
    Benchmark("dlrm_dcnv2", "DLRM-DCNv2", "mlperf-dlrm-dcnv2", AUC, (
        Span("v3.0", "v6.0", _fraction_target(AUC, 0.80275, inclusive=True), 10,
             _checker("closed_dlrm_dcnv2.yaml", "v['value'] >= 0.80275 and v['value'] <= 1.0", 10)
             + "; RULES: 0.80275 AUC"),), dataset="Criteo Terabyte, multi-hot"),
    # the "ssd" folder held SSD-ResNet34 on COCO up to v1.1 and RetinaNet on OpenImages from v2.0 (named
    # "retinanet" from v5.0): two tasks, two boards
    Benchmark("ssd", "SSD-ResNet34", "mlperf-ssd", MAP, (
        Span("v0.7", "v1.1", _fraction_target(MAP, 0.230), 5,
             _checker("closed_ssd.yaml", "v['value'] >= 0.230 and v['value'] < 1.0", 5)),), dataset="COCO 2017"),
    Benchmark("ssd", "RetinaNet", "mlperf-retinanet", MAP, (
        Span("v2.0", "v4.1", _fraction_target(MAP, 0.340), 5,
             _checker("closed_ssd.yaml", "v['value'] >= 0.340 and v['value'] < 1.0", 5)),),
              dataset="OpenImages, MLPerf's subset"),
    Benchmark("retinanet", "RetinaNet", "mlperf-retinanet", MAP, (
        Span("v5.0", "v5.1", _fraction_target(MAP, 0.340), 5,
             _checker("closed_retinanet.yaml", "v['value'] >= 0.340 and v['value'] < 1.0", 5)
             + "; RULES: 34.0% mAP"),), dataset="OpenImages, MLPerf's subset"),
    Benchmark("maskrcnn", "Mask R-CNN", "mlperf-maskrcnn", BOX_MASK_MAP, (
        Span("v0.7", "v3.1", Goal((Criterion(BOX_MAP, 0.377, "BBOX", 1.0), Criterion(MASK_MAP, 0.339, "SEGM", 1.0))),
             5, _checker("closed_maskrcnn.yaml", "v['value']['BBOX'] >= 0.377 and v['value']['BBOX'] < 1.0 and "
                         "v['value']['SEGM'] >= 0.339 and v['value']['SEGM'] < 1.0", 5)
             + "; RULES: 0.377 Box min AP and 0.339 Mask min AP"),), dataset="COCO 2017"),
    Benchmark("unet3d", "3D U-Net", "mlperf-unet3d", DICE, (
        Span("v1.0", "v4.0", Goal((Criterion(DICE, 0.908),)), 40,
             _checker("closed_unet3d.yaml", " v['value'] >= 0.908", 40)
             + "; RULES: 4 fastest and 4 slowest of 40 dropped"),), dataset="KiTS19", dropped=4),
    Benchmark("rnnt", "RNN-T", "mlperf-rnnt", WER, (
        Span("v1.0", "v3.1", _lower_target(WER, 0.058), 10,
             _checker("closed_rnnt.yaml", "v['value'] <= 0.058 and v['value'] > 0.0", 10)),), dataset="LibriSpeech"),
    Benchmark("minigo", "MiniGo", "mlperf-minigo", WIN_RATE, (
        Span("v0.7", "v2.1", _fraction_target(WIN_RATE, 0.5), 10,
             _checker("closed_minigo.yaml", "v['value'] >= 0.5 and v['value'] < 1.0", 10)),),
              dataset="Go 9x9 self-play"),
    Benchmark("gnmt", "GNMT", "mlperf-gnmt", BLEU, (
        Span("v0.7", "v0.7", _fraction_target(BLEU, 0.240), 10,
             _checker("closed_gnmt.yaml", "v['value'] >= 0.240 and v['value'] < 1", 10)),),
              dataset="WMT16 English-German"),
    Benchmark("transformer", "Transformer", "mlperf-transformer", BLEU, (
        Span("v0.7", "v0.7", _fraction_target(BLEU, 0.250), 10,
             _checker("closed_transformer.yaml", "v['value'] >= 0.2500 and v['value'] < 1", 10)),),
              dataset="WMT17 English-German"),
    Benchmark("gpt3", "GPT-3 175B", "mlperf-gpt3", LOG_PERPLEXITY, (
        Span("v3.0", "v4.1", _lower_target(LOG_PERPLEXITY, 2.69, limit=2.6), 3,
             _checker("closed_gpt3.yaml", "(v['value'] <= 2.69) and v['value'] > 2.6", 3)
             + "; RULES: 2.69 log perplexity"),), dataset="C4, c4/en/3.0.1"),
    # the checker aggregates the FID and CLIP records of one checkpoint by their step_num in v3.1 (NVIDIA's logs carry
    # nothing else, and log every FID before every CLIP), by their samples_count from v4.0
    Benchmark("stable_diffusion", "Stable Diffusion v2", "mlperf-stable-diffusion", FID_CLIP, (
        Span("v3.1", "v3.1", _sd_goal("step_num"), 10, _sd_source("step_num")),
        Span("v4.0", "v5.0", _sd_goal("samples_count"), 10, _sd_source("samples_count"))),
              dataset="LAION-400M-filtered"),
    Benchmark("gnn", "R-GAT", "mlperf-rgat", ACCURACY, (
        Span("v4.0", "v4.1", _fraction_target(ACCURACY, 0.72), 10,
             _checker("closed_gnn.yaml", "v['value'] >= 0.72 and v['value'] < 1.0", 10)),), dataset="IGBH-Full"),
    Benchmark("rgat", "R-GAT", "mlperf-rgat", ACCURACY, (
        Span("v5.0", "v5.1", _fraction_target(ACCURACY, 0.72), 10,
             _checker("closed_rgat.yaml", "v['value'] >= 0.72 and v['value'] < 1.0", 10)
             + "; RULES: 72.0 % classification"),), dataset="IGBH-Full"),
    Benchmark("llama2_70b_lora", "Llama 2 70B LoRA", "mlperf-llama2-70b-lora", EVAL_LOSS, (
        Span("v4.0", "v6.0", _lower_target(EVAL_LOSS, 0.925), 10,
             _checker("closed_llama2_70b_lora.yaml", "(v['value'] <= 0.925) and v['value'] > 0.0", 10)
             + "; RULES: 0.925 Eval loss"),), dataset="SCROLLS GovReport"),
    Benchmark("llama31_405b", "Llama 3.1 405B", "mlperf-llama31-405b", LOG_PERPLEXITY, (
        Span("v5.0", "v6.0", _lower_target(LOG_PERPLEXITY, 5.6), 3,
             _checker("closed_llama31_405b.yaml", "(v['value'] <= 5.6) and v['value'] > 0.0", 3)
             + "; RULES: 5.6 log perplexity"),), dataset="C4, c4/en/3.0.1"),
    Benchmark("llama31_8b", "Llama 3.1 8B", "mlperf-llama31-8b", LOG_PERPLEXITY, (
        Span("v5.1", "v6.0", _lower_target(LOG_PERPLEXITY, 3.3), 10,
             _checker("closed_llama31_8b.yaml", "(v['value'] <= 3.3) and v['value'] > 0.0", 10)
             + "; RULES: 3.3 log perplexity"),), dataset="C4, c4/en/3.0.1"),
    Benchmark("flux1", "FLUX.1", "mlperf-flux1", EVAL_LOSS, (
        Span("v5.1", "v6.0", _lower_target(EVAL_LOSS, 0.586), 10,
             _checker("closed_flux1.yaml", "v['value'] <= 0.586 and v['value'] > 0.0", 10)
             + "; RULES: 0.586 Eval loss"),), dataset="CC12M"),
    Benchmark("gpt_oss_20b", "GPT-OSS 20B", "mlperf-gpt-oss-20b", LOG_PERPLEXITY, (
        Span("v6.0", "v6.0", _lower_target(LOG_PERPLEXITY, 3.34), 10,
             _checker("closed_gpt_oss_20b.yaml", "(v['value'] <= 3.34) and v['value'] > 0.0", 10)
             + "; RULES: 3.34 log perplexity"),), dataset="C4, c4/en/3.0.1"),
    Benchmark("deepseekv3_671b", "DeepSeek-V3 671B", "mlperf-deepseekv3-671b", LOG_PERPLEXITY, (
        Span("v6.0", "v6.0", _lower_target(LOG_PERPLEXITY, 3.6), 3,
             _checker("closed_deepseekv3_671b.yaml", "(v['value'] <= 3.6) and v['value'] > 0.0", 3)
             + "; RULES: 3.6 log perplexity"),), dataset="C4, c4/en/3.0.1"),
)
BENCHMARK_NAMES = tuple(dict.fromkeys(b.name for b in BENCHMARKS))
# the folder name MLPerf v0.6 gave Mask R-CNN (the summarizer's _benchmark_alias)
ALIASES = {"mask": "maskrcnn"}


def benchmark_of(name: str, round_: str) -> Benchmark | None:
    """The benchmark a log (``submission_benchmark``) or a ``results/<system>/<name>/`` folder of ``round_`` is of;
    None when ``name`` is none of that round's."""
    name = ALIASES.get(name, name)
    return next((b for b in BENCHMARKS if b.name == name and b.span(round_) is not None), None)


def rounds_of(name: str) -> tuple[str, ...]:
    """Every round that has a benchmark called ``name``, oldest first."""
    name = ALIASES.get(name, name)
    return tuple(r for r in ROUNDS if benchmark_of(name, r) is not None)


# --- initialization before the clock -------------------------------------------------------------------------
@dataclass(frozen=True)
class InitLimit:
    """The most a run may take from its first ``init_start`` to ``init_stop`` (strictly less), and why."""

    seconds: float
    source: str

    @property
    def text(self) -> str:
        minutes = self.seconds / 60
        return f"{minutes / 60:g} hours" if minutes >= 120 else f"{minutes:g} minutes"


def init_limit(round_: str, division: str = "closed") -> InitLimit:
    """CHECKER common.yaml of each round: 20 minutes in v0.7 (RULES then: "a maximum of 20 minutes of model
    initialization time"); 30 in v1.0 (RULES: "For v1.0 only, the allowed untimed compile time is increased from 20
    minutes to 30 minutes") and v1.1 (the checker; the rules' text still said 20); from v2.0 30 minutes in the
    closed division and 4 hours in the open (RULES since v2.0: "a maximum model initialization time of 30 minutes
    for Closed division and 4 hours for Open division"; CHECKER: compile_time_mins 30 / 240)."""
    if round_ == "v0.7":
        return InitLimit(20 * 60.0, "CHECKER training_0.7.0/common.yaml: init_stop - first init_start < 20*60*1e3 "
                                    "ms; RULES v0.7: 'a maximum of 20 minutes of model initialization time'")
    if ROUNDS.index(round_) < ROUNDS.index("v2.0"):
        return InitLimit(30 * 60.0, f"CHECKER training_{ruleset(round_)}/common.yaml: init_stop - first init_start "
                                    "< 30*60*1e3 ms (RULES: 'For v1.0 only, the allowed untimed compile time is "
                                    "increased from 20 minutes to 30 minutes')")
    open_ = division == "open"
    return InitLimit((240 if open_ else 30) * 60.0,
                     f"CHECKER training_{ruleset(round_)}/common.yaml: init_stop - first init_start < "
                     f"compile_time_mins*60*1e3 ms, compile_time_mins {240 if open_ else 30} in the "
                     f"{'open' if open_ else 'closed'} division; RULES 'Run Results': 'a maximum model initialization "
                     "time of 30 minutes for Closed division and 4 hours for Open division'")
