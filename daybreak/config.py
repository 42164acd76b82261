"""``RunConfig``: every option of a timed run, declared once.

Each field is one option: its type and default here, its flag, help, reader/range and the commands that take it in
its :class:`daybreak.options.Opt`. The flags of ``daybreak run``, ``repeat``, ``lesion`` and ``ab``, the shared
subset of ``time``, ``infer``, ``throughput``, ``evaluate`` and ``leaderboard reproduce``, the ``--config`` TOML
file, a run's own ``config.toml`` and the Python API (``daybreak.run(seed=3)``) are all generated from this class,
so they cannot disagree. ``daybreak.train.spec.resolve_run_spec`` turns a RunConfig into the frozen ``RunSpec``
(the same fields, resolved, plus what resolving adds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import Field, model_validator

from daybreak.errors import ConfigError
from daybreak.options import (Opt, OptionModel, int_at_least, number_in, one_of, parse_assignments, parse_bool,
                              parse_path, parse_seed, parse_target, parse_text)
from daybreak.rules import DEFAULT_RULES, RULE_SETS

# Who takes what. A trial of an experiment is a `daybreak run`, so the experiment commands take every run option
# (but --out, which names the experiment's directory there; tests/test_options.py diffs the parsers).
RUN = frozenset({"run"})
EXPERIMENTS = frozenset({"repeat", "lesion", "ab"})
TRIAL = RUN | EXPERIMENTS

DEVICES = "auto|cpu|cuda|cuda:N|mps"
COMPILE_MODES = ("off", "default", "reduce-overhead", "max-autotune")
# TF32 on by default: cuDNN already runs fp32 convolutions in TF32 unless told otherwise, so this makes fp32
# matmuls agree with them (one stated precision for the run); it only matters for math outside autocast (and for
# --amp off), on sm_80 and later, and every record says which setting ran.
DEFAULT_TF32 = True
AMP_MODES = ("auto", "off", "bf16", "fp16")
DEFAULT_TIMEOUT_S = 300.0
G_DATA, G_DEVICE, G_CLOCK, G_PRICE, G_RECORD, G_LAUNCH = (
    "data", "device and precision", "evaluation and clock", "price and energy", "record",
    "several devices or nodes (launches itself under torchrun; DDP with NCCL on CUDA, gloo on CPU)")


def parse_device(value: Any) -> str:
    text = str(value).strip() if isinstance(value, str) else ""
    if text in ("auto", "cpu", "cuda", "mps") or (text.startswith("cuda:") and text[5:].isdigit()):
        return text
    raise ValueError(f"choose {DEVICES}")


def compile_mode(value: Any) -> str:
    """``--compile`` as a mode: True -> "default", False/None -> "off" (older callers and records)."""
    if value is None or value is False:
        return "off"
    if value is True:
        return "default"
    return one_of(*COMPILE_MODES, aliases={"on": "default", "true": "default", "false": "off"})(
        str(value).strip().lower())


def parse_endpoint(value: Any) -> str:
    text = parse_text(value).strip()
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("expected HOST:PORT")
    return text


def parse_sha256(value: Any) -> str:
    text = parse_text(value).strip().lower()
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        raise ValueError("expected 64 hexadecimal digits")
    return text


def parse_rules(value: Any) -> str:
    return one_of(*RULE_SETS)(value)


class RunConfig(OptionModel, init=False):
    """A run as asked for. Everything but the task is optional; ``resolve_run_spec`` checks what depends on
    several options (the recipe's hyperparameters, the price) before any work."""

    FILE_TITLE: ClassVar[str] = "run"

    task: Annotated[str, Opt(
        "--task", "task name (see `daybreak tasks`)", parse=parse_text,
        commands=TRIAL | {"time"}, metavar="TASK",
        help_in=(("time", "the task whose target applies (see `daybreak tasks`; with --log, default: the log's "
                          "submission_benchmark, a daybreak task or an MLPerf benchmark)"),))] = "digits"
    recipe: Annotated[str | None, Opt(
        "--recipe", "a recipe name (default: the task's reference recipe; see `daybreak recipes`) or the path of your "
        "own recipe file (see examples/recipes/)", parse=parse_text, commands=TRIAL, metavar="NAME|FILE",
        help_in=(("lesion", "the recipe (or give it as TASK_OR_RECIPE)"),))] = None
    recipe_sha256: Annotated[str | None, Opt(
        "--recipe-sha256", "refuse a recipe file whose SHA-256 is not this (a run's config.toml pins its file so)",
        parse=parse_sha256, commands=TRIAL, metavar="HEX")] = None
    overrides: Annotated[dict[str, Any], Opt(
        "--set", "override a recipe hyperparameter, e.g. --set epochs=20 (repeatable; in a file: a [overrides] table)",
        parse=parse_assignments, commands=TRIAL, kind="append")] = Field(default_factory=dict)
    init_from: Annotated[Path | None, Opt(
        "--init-from", "start from a local Hugging Face model folder (sets the recipe's init_from; squad_bert_base)",
        parse=parse_path, commands=TRIAL, metavar="DIR")] = None
    seed: Annotated[int, Opt(
        "--seed", "seeds every RNG, 0..2**32-1; the same seed gives the same data order", parse=parse_seed,
        commands=TRIAL, metavar="N", also_in=(("repeat", "--seed-start"), ("lesion", "--seed-start")),
        help_in=(("repeat", "first seed, 0..2**32-1: the trials use seeds S, S+1, ..."),
                 ("lesion", "first seed: each variant runs seeds S, S+1, ..."),
                 ("ab", "first seed: pair i runs seed S+i in both arms")))] = 0
    target: Annotated[float | None, Opt(
        "--target", "target accuracy: a fraction in (0, 1] (0.97) or a percent with % (97%); a non-default target "
        "makes the run unofficial", parse=parse_target, commands=TRIAL | {"time"}, metavar="X",
        default_help="the task's")] = None
    data_dir: Annotated[Path | None, Opt(
        "--data-dir", "folder holding the task's files themselves", parse=parse_path,
        commands=TRIAL | {"infer", "throughput", "evaluate", "roofline"}, metavar="DIR", group=G_DATA,
        default_help="$DAYBREAK_DATA/<task> or the user cache dir",
        help_in=(("infer", "folder holding the task's files (default: the folder the run read, from its "
                           "result.json's data_source; the cache folder for runs that recorded none)"),
                 ("evaluate", "folder with the other set's files (default: the folder the run read)"),
                 ("roofline", "the task's files, to rebuild a run's input batch (default: where the run read them; "
                              "synthetic shapes otherwise)"),
                 ("throughput", "with --data: folder holding the task's files themselves (default: "
                                "$DAYBREAK_DATA/<task> or the user cache dir)")))] = None
    allow_custom_data: Annotated[bool, Opt(
        "--allow-custom-data", "accept files that do not match the official checksums (recorded official: false)",
        parse=parse_bool, commands=TRIAL | {"infer", "throughput", "evaluate"}, kind="flag", group=G_DATA)] = False
    download: Annotated[bool, Opt(
        "--no-download", "never download; fail if the files are missing", parse=parse_bool,
        commands=TRIAL | {"infer", "throughput"}, kind="negated", group=G_DATA)] = True
    out: Annotated[Path | None, Opt(
        "--out", "run directory", parse=parse_path, commands=frozenset({"run", "time"}), metavar="DIR",
        default_help="runs/<task>-<recipe>-<timestamp>", recorded=False,
        help_in=(("time", "run directory (default: runs/<task>-external-<timestamp>)"),))] = None
    device: Annotated[str, Opt(
        "--device", f"{DEVICES} (auto: CUDA > MPS > CPU)", parse=parse_device,
        commands=TRIAL | {"infer", "throughput", "evaluate", "peak"}, group=G_DEVICE)] = "auto"
    amp: Annotated[str, Opt(
        "--amp", "autocast precision (auto: bf16 where the GPU has it natively, else fp16; off on CPU)",
        parse=one_of(*AMP_MODES), commands=TRIAL | {"infer", "evaluate"}, choices=AMP_MODES, group=G_DEVICE)] = "auto"
    compile: Annotated[str, Opt(
        "--compile", "torch.compile the model: default, reduce-overhead (CUDA graphs) or max-autotune; a bare --compile "
        "is default. Compiled and warmed up on synthetic tensors before the data is touched where the recipe builds "
        "from the task's input spec (outside MLPerf's clock; DAWNBench counts it)", parse=compile_mode,
        commands=TRIAL | {"infer"}, kind="optional", const="default", metavar="MODE", choices=COMPILE_MODES,
        group=G_DEVICE,
        help_in=(("infer", "torch.compile the model: default, reduce-overhead or max-autotune (compiled during "
                           "warm-up, untimed)"),))] = "off"
    tf32: Annotated[bool, Opt(
        "--tf32", "fp32 matmuls and convolutions on TF32 tensor cores (sm_80 and later); recorded. --no-tf32: full "
        "fp32", parse=parse_bool, commands=TRIAL, kind="boolean", group=G_DEVICE)] = DEFAULT_TF32
    threads: Annotated[int | None, Opt(
        "--threads", "torch intra-op CPU threads", parse=int_at_least(1),
        commands=TRIAL | {"infer", "throughput", "evaluate", "peak"}, metavar="N", group=G_DEVICE,
        default_help="torch's choice",
        help_in=(("throughput", "torch threads per process (default: cores / processes on CPU)"),
                 ("peak", "torch threads on CPU (part of the cache key)")))] = None
    eval_every_epochs: Annotated[int, Opt(
        "--eval-every", "evaluate every N epochs", parse=int_at_least(1), commands=TRIAL, metavar="N",
        group=G_CLOCK)] = 1
    eval_every_steps: Annotated[int | None, Opt(
        "--eval-every-steps", "evaluate every N optimizer steps instead", parse=int_at_least(1), commands=TRIAL,
        metavar="N", group=G_CLOCK)] = None
    rules: Annotated[str, Opt(
        "--rules", "clock rule set of the headline figures: dawnbench counts data loading, model init and "
        "compile/warm-up and excludes evaluation and record writes; mlperf runs from the first touch of the dataset "
        "without pausing (evaluation included). Every record holds both figures", parse=parse_rules,
        commands=TRIAL | {"time"}, choices=tuple(RULE_SETS), aliases=(("--count-eval", "mlperf"),),
        group=G_CLOCK)] = DEFAULT_RULES
    full_schedule: Annotated[bool, Opt(
        "--full-schedule", "train the whole schedule instead of stopping at the target (thresholds above it)",
        parse=parse_bool, commands=TRIAL, kind="flag", group=G_CLOCK)] = False
    cost_per_hour: Annotated[float | None, Opt(
        "--cost-per-hour", "price of the machine per hour", parse=number_in(0), metavar="USD",
        commands=TRIAL | {"time", "infer", "reproduce", "worker"}, group=G_PRICE,
        help_in=(("infer", "price of the machine per hour (default: the run's own price, if it has one)"),
                 ("reproduce", "this machine's price per hour, for train-cost"),
                 ("worker", "this machine's price per hour, for train-cost")))] = None
    instance: Annotated[str | None, Opt(
        "--instance", "take the price from the catalog (see `daybreak instances`)", parse=parse_text,
        commands=TRIAL | {"time", "infer"}, metavar="NAME", group=G_PRICE)] = None
    price_file: Annotated[Path | None, Opt(
        "--price-file", "your own price catalog (the JSON schema of `daybreak instances`), searched before ours",
        parse=parse_path, commands=TRIAL | {"time", "infer", "instances"}, metavar="FILE", group=G_PRICE,
        help_in=(("instances", "also list your own catalog (its entries first)"),))] = None
    idle_power_s: Annotated[float, Opt(
        "--idle-power-seconds", "seconds of idle power sampled before the run where energy counters exist (0: skip)",
        parse=number_in(0, 60), commands=TRIAL | {"infer"}, metavar="S", group=G_PRICE)] = 2.0
    quiet: Annotated[bool, Opt(
        "--quiet", "no progress bar, no summary", parse=parse_bool, short="-q",
        commands=TRIAL | {"time", "infer", "throughput", "evaluate-squad", "import"}, kind="flag", group=G_RECORD,
        recorded=False, help_in=(("throughput", "no progress, no per-configuration lines"),
                                 ("evaluate-squad", "no per-question messages on stderr"),
                                 ("import", "print only problems and the summary")))] = False
    author: Annotated[str | None, Opt(
        "--author", "author for the DAWNBench JSON and the leaderboard", parse=parse_text,
        commands=TRIAL | {"time"}, metavar="NAME", group=G_RECORD, default_help="your user name",
        help_in=(("time", "author for the DAWNBench JSON (default: the log's submission_org, else your user "
                          "name)"),))] = None
    author_email: Annotated[str, Opt(
        "--author-email", "author e-mail for the DAWNBench JSON", parse=parse_text, commands=TRIAL | {"time"},
        metavar="EMAIL", group=G_RECORD)] = ""
    nproc_per_node: Annotated[int, Opt(
        "--nproc-per-node", "processes (devices) on this node", parse=int_at_least(1), commands=TRIAL,
        metavar="N", group=G_LAUNCH)] = 1
    nnodes: Annotated[int, Opt(
        "--nnodes", "number of nodes", parse=int_at_least(1), commands=TRIAL, metavar="M", group=G_LAUNCH,
        help_in=tuple((c, "number of nodes each trial spans: run the same command on every node with its "
                          "--node-rank; node 0 records the experiment, the others take part in each trial in "
                          "the same order") for c in EXPERIMENTS))] = 1
    node_rank: Annotated[int, Opt(
        "--node-rank", "this node's rank, 0..M-1", parse=int_at_least(0), commands=TRIAL | {"throughput"},
        metavar="R", group=G_LAUNCH, recorded=False,
        help_in=(("throughput", "this node's rank (node 0 records the results)"),))] = 0
    rdzv_endpoint: Annotated[str | None, Opt(
        "--rdzv-endpoint", "rendezvous address (node 0) when M > 1", parse=parse_endpoint,
        commands=TRIAL | {"throughput"}, metavar="HOST:PORT", group=G_LAUNCH, recorded=False,
        help_in=(("throughput", "with --nodes > 1: node 0's address and a free port"),))] = None
    dist_timeout_s: Annotated[float, Opt(
        "--dist-timeout", "seconds a collective may wait for a slow or dead rank before the run fails",
        parse=number_in(0, low_open=True), commands=TRIAL, metavar="S", group=G_LAUNCH)] = DEFAULT_TIMEOUT_S
    command: list[str] = Field(default_factory=list)  # the command line that asked for it (recorded; not an option)

    @model_validator(mode="after")
    def _one_evaluation_schedule(self) -> "RunConfig":
        """--eval-every N epochs or --eval-every-steps N steps: one schedule, never both silently."""
        if self.eval_every_steps is not None and self.eval_every_epochs != 1:
            raise ConfigError(f"--eval-every {self.eval_every_epochs} and --eval-every-steps {self.eval_every_steps} "
                              "are two evaluation schedules: give one")
        return self
