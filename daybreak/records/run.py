"""RunResult: the one typed record of a time-to-accuracy run. Everything downstream reads this, not logs."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, field_validator, model_validator

from daybreak.config import COMPILE_MODES
from daybreak.measure.system import SystemInfo
from daybreak.records.base import Record
from daybreak.records.fields import (
    Count, Fraction, Index, IsoDate, NonNegative, Positive, Seconds, one_of,
)
from daybreak.rules import PHASES, RULE_SETS

Phase = Annotated[str, AfterValidator(one_of(PHASES, "phase"))]
RuleSet = Annotated[str, AfterValidator(one_of(RULE_SETS, "rule set"))]
CompileMode = Annotated[str, AfterValidator(one_of(COMPILE_MODES, "compile mode"))]

# the task of a `daybreak time --log` record of an MLPerf benchmark's log: "mlperf:<submission_benchmark>"
MLPERF_TASK_PREFIX = "mlperf:"

RunStatus = Literal["running", "reached", "not_reached", "diverged", "failed", "interrupted"]
# The exit status of a command that records a run (`daybreak run`, `daybreak time`, wrappers such as `repeat`), by
# the run's status: declared beside the statuses, so a command that reads a record needs nothing of the runner
EXIT_REACHED = 0
EXIT_USER_ERROR = 2
EXIT_NOT_REACHED = 3
EXIT_DIVERGED = 4
EXIT_FAILED = 5
EXIT_INTERRUPTED = 130
EXIT_CODES = {"reached": EXIT_REACHED, "not_reached": EXIT_NOT_REACHED, "diverged": EXIT_DIVERGED,
              "failed": EXIT_FAILED, "interrupted": EXIT_INTERRUPTED}

RESULT_FILE = "result.json"
NON_FINITE_KEPT = 20  # non-finite loss readings a record keeps (the first ones)
# The recipe of a `daybreak time` record: an external program timed from its MLPerf log, not a daybreak recipe
EXTERNAL_RECIPE = "external"
# Why such a record has no energy: daybreak time reads no counters (the program measures, or not, on its own)
EXTERNAL_ENERGY = "not measured: `daybreak time` times an external program from its log and reads no energy counters"


def _known_rule_sets(by_rules: dict[str, Any]) -> dict[str, Any]:
    for name in by_rules:
        one_of(RULE_SETS, "rule set")(name)
    return by_rules


class EpochRecord(BaseModel):
    """One evaluation. ``elapsed_s`` is the headline rule set's clock when the evaluation finished;
    ``clock_s`` holds every rule set's clock at that instant (see daybreak.rules). The epoch, step and accuracies
    of a `daybreak time` record are the timed program's own (its log's), so they are not constrained here."""

    epoch: float  # epochs of training done when evaluated (fractional with --eval-every-steps)
    step: int  # optimizer steps done
    elapsed_s: Seconds
    clock_s: dict[str, Seconds] = Field(default_factory=dict)  # rule set name -> its clock at the end of this eval
    energy_j: dict[str, NonNegative | None] = Field(default_factory=dict)  # rule set -> joules counted up to it
    accuracy: float  # fraction 0..1 of the task's metric (top-1 unless the task says otherwise)
    top1: float | None = None
    top5: float | None = None
    metrics: dict[str, float] = Field(default_factory=dict)  # everything the evaluation measured (e.g. f1, exact_match)
    train_loss: float | None = None  # mean training loss since the previous evaluation
    eval_s: Seconds  # how long this evaluation took (wall, device synchronized)

    @field_validator("clock_s", "energy_j")
    @classmethod
    def _rule_sets(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _known_rule_sets(value)


class PhaseInterval(BaseModel):
    """One raw phase interval on the run's timeline: seconds since the command started (one monotonic timer,
    the device synchronized at both ends). Phases: daybreak.rules.PHASES."""

    phase: Phase
    start_s: float
    end_s: float


class ClockFigure(BaseModel):
    """Time-to-target under one rule set (daybreak.rules), computed from the phase intervals."""

    rules: RuleSet
    time_to_target_s: Seconds | None = None  # None until (unless) the target is reached
    clock_s: Seconds = 0.0  # the clock at the last evaluation (or at the end)
    start_s: float = 0.0  # where this rule set's clock starts on the timeline
    excluded_s: dict[str, Seconds] = Field(default_factory=dict)  # phase -> seconds left out
    notes: list[str] = Field(default_factory=list)


class EnergyRecord(BaseModel):
    """Energy from hardware counters (daybreak.measure.energy), read at the clock's own boundaries; never an
    estimate. ``available`` False: ``unavailable`` says why for each kind (gpu, cpu_package, dram)."""

    available: bool = False
    unavailable: dict[str, str] = Field(default_factory=dict)
    covers: list[str] = Field(default_factory=list)  # the kinds in the totals, e.g. ["gpu", "cpu_package"]
    joules_to_target: dict[str, NonNegative | None] = Field(default_factory=dict)  # rule set -> joules (all ranks)
    joules_at_end: dict[str, NonNegative | None] = Field(default_factory=dict)  # rule set -> joules to the last eval
    per_phase_j: dict[str, NonNegative | None] = Field(default_factory=dict)  # phase -> joules (this process's)
    per_source_j: dict[str, NonNegative | None] = Field(default_factory=dict)  # counter -> joules to target (rank 0)
    idle_power_w: NonNegative | None = None  # mean watts of the counted kinds before the run (the machine's floor)
    idle_seconds: Seconds | None = None
    # what the meter read (daybreak.measure.energy describe())
    counters: list[dict[Any, Any]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class MeasurementContext(BaseModel):
    """What else the machine was doing, and what exactly ran: so a slow result explains itself."""

    load_avg_before: list[NonNegative] | None = None  # 1, 5, 15-minute load averages before the run
    load_avg_after: list[NonNegative] | None = None
    other_cpu_s: NonNegative | None = None  # CPU seconds other processes took during the run (sampled)
    own_cpu_s: NonNegative | None = None  # CPU seconds this process took
    busy_fraction: Fraction | None = None  # other processes' CPU time / (wall x logical CPUs), at most 1
    threads_used: Count | None = None  # torch intra-op threads actually used
    interop_threads: Count | None = None
    git_commit: str | None = None  # the code that defined the recipe
    git_dirty: bool | None = None
    git_remote: str | None = None  # the work tree's remote (origin) URL, credentials removed; None without one
    packages: dict[str, str] = Field(default_factory=dict)  # torch, CUDA, cuDNN, numpy, daybreak, ...
    recipe_file: str | None = None
    recipe_sha256: str | None = None
    warnings: list[str] = Field(default_factory=list)


class PerformanceSettings(BaseModel):
    """The performance settings a run actually used, each one stated (daybreak.train.runner decides them)."""

    compile_mode: str = "off"  # off | default | reduce-overhead | max-autotune
    amp_reason: str = ""  # why this precision, e.g. "bf16: native on sm_80"
    compute_capability: str | None = None  # "sm_80" on CUDA, else None
    native_precision: str | None = None  # the recipe's network holds its own weights in this dtype (airbench fp16)
    tf32: bool | None = None  # torch.backends.cuda.matmul.allow_tf32 and cudnn.allow_tf32 as set for the run
    tf32_applies: bool = False  # the device has TF32 tensor cores (sm_80+); elsewhere the setting changes nothing
    cudnn_benchmark: bool | None = None  # torch.backends.cudnn.benchmark as set (the recipe's switch)
    init_before_data: bool = False  # model built, compiled and warmed up on synthetic tensors before the data
    warmup: str = ""  # what the warm-up ran, in words
    host_sync: str = ""  # when the loop reads the device (loss .item() / all-reduce)
    notes: list[str] = Field(default_factory=list)


class NonFiniteLoss(BaseModel):
    """A training loss sum that was not a finite number, and the training state when it was read
    (daybreak.train.divergence). ``diverged`` is the verdict: the state (weights, optimizer state, gradients the loss
    scaler does not skip) or the loss recomputed on float32 logits was non-finite too; otherwise only the loss
    value was (e.g. a loss summed in fp16 overflowed) and the run went on."""

    step: Count  # optimizer steps done when the sum was read
    steps_summed: Count = 1  # steps the sum covered (the non-finite one is among them)
    loss: Literal["inf", "-inf", "nan"]
    weights_finite: bool  # the model's parameters and floating buffers
    optimizer_state_finite: bool = True  # momentum buffers and the like
    gradients_finite: bool | None = None  # the last step's gradients; None: none held
    scaler_skips_nonfinite: bool = False  # an fp16 loss scaler was on: it skips steps with non-finite gradients
    float32_loss: float | None = None  # the last batch's loss on float32 logits with the current weights, if finite
    float32_loss_finite: bool | None = None  # None: not recomputed
    diverged: bool
    summary: str  # one line: "loss inf at step 4, weights finite, float32 loss 1734"


class ClockRules(BaseModel):
    starts: str = "when the training loop first touches training data (after dataset load, model build, warm-up)"
    init_excluded: bool = True  # dataset load, model construction, compile/warm-up: recorded as init_s
    eval_included: bool = False  # --count-eval: evaluation time counts toward time-to-target
    checkpoint_included: bool = False  # saving checkpoint.pt never counts
    stops: str = "at the end of the first evaluation whose accuracy is at or above the target"
    device_synchronized: bool = True  # the device is synchronized before every clock read
    timer: str = "time.perf_counter_ns"


class MlperfCriterion(BaseModel):
    """One condition of an MLPerf benchmark's target, as daybreak.mlperf_benchmarks defines it."""

    metric: str  # "log_perplexity", "fid", "clip", ...
    part: str | None = None  # which eval_accuracy records hold it (Stable Diffusion's metadata "metric": "FID")
    target: float
    higher_is_better: bool
    unit: str  # "fraction", "loss", "log perplexity", "score"
    label: str  # "log perplexity <= 2.69"


class MlperfReading(BaseModel):
    """`daybreak time --log` on a log of an MLPerf Training benchmark: the benchmark and round whose rules apply
    (and their source), and MLPerf's own verdict beside the DAWNBench reading of the same log."""

    benchmark: str  # the log's submission_benchmark
    title: str
    round: str  # "v5.0"
    round_from: str  # "--round", the log's folder, or not given (the latest round with the benchmark)
    division: str
    criteria: list[MlperfCriterion]
    rules_source: str
    run_stop_status: str | None = None
    init_s: Seconds | None = None  # first init_start to init_stop, as MLPerf's checker measures it
    init_limit_s: Seconds
    init_limit_source: str
    reached: bool  # MLPerf's verdict
    reason: str | None = None  # why not
    time_s: Seconds | None = None  # run_stop - run_start, MLPerf's result, when reached
    target_met: bool  # some evaluation in the log met the target (MLPerf's checker requires it in the closed division)
    dawnbench_reached: bool  # the DAWNBench reading: an evaluation before run_stop met the target
    dawnbench_time_s: Seconds | None = None


class RunResult(Record):
    """The record of one run (result.json); ``save``/``load`` from daybreak.records.base."""

    FILE = RESULT_FILE
    WHAT = "run"

    schema_version: Count = 2  # 2: rules, phases, clocks, context (1 still loads)
    kind: Literal["daybreak.run"] = "daybreak.run"
    run_id: str
    task: str
    recipe: str
    model: str
    optimizer: str | None = None  # the class of the recipe's optimizer (SGD, AdamW, Muon); None before it was recorded
    framework: str  # e.g. "PyTorch 2.13.0"
    metric: str  # "top1" / "top5"; a log of an MLPerf benchmark: its metric ("eval_loss", "fid+clip", ...)
    target: Annotated[float, Field(gt=0.0, allow_inf_nan=False)]  # a fraction; an MLPerf metric's own unit
    target_is_default: bool
    official: bool
    unofficial_reasons: list[str] = Field(default_factory=list)
    hyperparameters: dict[str, Any]
    seed: int
    device: str
    amp: str
    compile: CompileMode = "off"  # off | default | reduce-overhead | max-autotune (records before modes: true -> default)
    threads: Count | None = None
    world_size: Count = 1
    nodes: Count = 1
    backend: str | None = None
    per_device_batch_size: Count | None = None
    global_batch_size: Count | None = None  # per-device batch x world size
    lr_scaling: str = "linear"  # the recipe's rule for the learning rate on several devices
    lr_scale: Positive = 1.0  # the factor applied to the recipe's learning rates (e.g. world size for linear)
    stop_at_target: bool = True
    steps_per_epoch: Count | None = None  # what the data source actually did
    train_examples: Count | None = None  # examples in one epoch of the training data (all ranks)
    effective_batch_size: Count | None = None  # per-device batch the data source used (<= the recipe's)
    eval_every_epochs: Count | None = 1
    eval_every_steps: Count | None = None

    status: RunStatus = "running"
    reached: bool = False
    message: str | None = None
    time_to_target_s: float | None = None
    epochs_to_target: float | None = None
    steps_to_target: int | None = None
    final_accuracy: float | None = None
    best_accuracy: float | None = None
    init_s: Seconds | None = None
    train_s: Seconds = 0.0  # training clock so far (excludes eval unless eval_included)
    eval_s: Seconds = 0.0  # total evaluation time
    total_s: Seconds | None = None  # wall time of the whole command, init included
    history: list[EpochRecord] = Field(default_factory=list)
    # each non-finite loss sum read (at most NON_FINITE_KEPT), diverged or not: what was non-finite
    non_finite_loss: list[NonFiniteLoss] = Field(default_factory=list)

    cost_per_hour: NonNegative | None = None
    instance: str | None = None
    price_date: IsoDate | None = None  # the price's date, YYYY-MM-DD (daybreak.pricing)
    cost_usd: NonNegative | None = None  # time_to_target hours x cost_per_hour

    clock: ClockRules = Field(default_factory=ClockRules)
    rules: RuleSet = "dawnbench"  # the rule set of the headline figures (time_to_target_s, elapsed_s, cost_usd)
    phases: list[PhaseInterval] = Field(default_factory=list)  # raw phase intervals (daybreak.rules.PHASES)
    clocks: dict[str, ClockFigure] = Field(default_factory=dict)  # every rule set's figures
    setup_notes: list[str] = Field(default_factory=list)  # what the recipe's build reported (derived values, ...)
    performance: PerformanceSettings = Field(default_factory=PerformanceSettings)  # precision, TF32, cuDNN, compile, sync
    energy: EnergyRecord = Field(default_factory=EnergyRecord)
    recompiles_under_clock: Index | None = None  # torch.compile recompilations during training/eval (0 = clean)
    context: MeasurementContext = Field(default_factory=MeasurementContext)
    warnings: list[str] = Field(default_factory=list)
    system: SystemInfo  # the system the program ran on
    analyzed_on: SystemInfo | None = None  # daybreak time --log: the machine that analysed the log, when different
    data_source: str = ""
    data_notes: list[str] = Field(default_factory=list)
    started_at: datetime
    finished_at: datetime | None = None
    command: list[str] = Field(default_factory=list)
    checkpoint: str | None = None  # file name in the run dir of the model at first target reach
    author: str | None = None  # --author (as in dawnbench.json): who ran it, for the leaderboard
    author_email: str | None = None
    mlperf: MlperfReading | None = None  # `daybreak time --log` on a log of an MLPerf Training benchmark

    @model_validator(mode="after")
    def _target_in_its_unit(self) -> "RunResult":
        """A daybreak task's target is a fraction in (0, 1]; an MLPerf benchmark's is in its metric's unit."""
        if not self.task.startswith(MLPERF_TASK_PREFIX) and self.target > 1.0:
            raise ValueError(f"target {self.target:g}: a task's target is a fraction in (0, 1]")
        return self

    @field_validator("compile", mode="before")
    @classmethod
    def _compile_mode(cls, value: Any) -> Any:
        """Records written before compile modes hold a bool."""
        if value is True:
            return "default"
        if value is False:
            return "off"
        return value

    @field_validator("clocks")
    @classmethod
    def _clocks(cls, value: dict[str, ClockFigure]) -> dict[str, ClockFigure]:
        for name, figure in value.items():
            if figure.rules != name:
                raise ValueError(f"the figure under {name[:40]!r} is for rule set {figure.rules!r}")
        return value

    @property
    def compiled(self) -> bool:
        return self.compile != "off"

    @property
    def is_external(self) -> bool:
        """A `daybreak time` record: no daybreak recipe, model or checkpoint to rebuild (infer, roofline)."""
        return self.recipe == EXTERNAL_RECIPE

    @property
    def time_to_target_hours(self) -> float | None:
        return None if self.time_to_target_s is None else self.time_to_target_s / 3600.0
