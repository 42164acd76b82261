"""daybreak: an end-to-end deep-learning benchmark (time-to-accuracy, cost-to-accuracy, inference latency).

In a notebook::

    import daybreak
    from daybreak import RunConfig

    result = daybreak.run("digits", seed=3, overrides={"lr": 0.05}, out="runs/lr005")
    result.time_to_target_s, result.clocks["mlperf"].time_to_target_s

    base = RunConfig(task="digits", target="97%")
    summary = daybreak.repeat(base, runs=2, out="exp/digits2")         # 2 fresh processes
    ab = daybreak.ab(base, base.with_(overrides={"lr": 0.2}), runs=2, out="exp/lr")
    ab.comparison.time.ratio, ab.comparison.time.ci_low, ab.comparison.time.verdict

Every keyword is a field of ``RunConfig`` (the same options as the command line, checked by the same readers:
``target=0.98`` or ``"98%"``); a mistyped name raises ``daybreak.errors.ConfigError`` naming the nearest valid
one, before any work.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from daybreak.errors import ConfigError, DaybreakError
from daybreak.version import __version__

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from daybreak.config import RunConfig
    from daybreak.executors import ExecutorOptions
    from daybreak.experiments.plan import ExperimentConfig
    from daybreak.records.experiment import AbSummary
    from daybreak.records.inference import InferenceResult
    from daybreak.records.repeat import RepeatSummary
    from daybreak.records.run import RunResult


def __getattr__(name: str) -> Any:
    """``daybreak.RunConfig`` is imported on first use (PEP 562), so that ``import daybreak`` (and with it every
    ``daybreak`` command, even ``--help``) does not pay for pydantic before it needs it."""
    if name == "RunConfig":
        from daybreak.config import RunConfig

        install_option_hints()
        return RunConfig
    raise AttributeError(f"module 'daybreak' has no attribute {name!r}")


def other_commands_option(key: str) -> str | None:
    """Which commands take ``key`` as an option (for an unknown key's message: ``runs = 5`` in a run config is
    `daybreak repeat`'s --runs, not a misspelt 'rules'); None if none does."""
    import dataclasses

    from daybreak.config import RunConfig
    from daybreak.executors import ExecutorOptions
    from daybreak.experiments.plan import ExperimentConfig

    for model in (RunConfig, ExperimentConfig):
        opt = model.options().get(key)
        if opt is not None and opt.commands:
            names = [f"`daybreak {c}`" for c in sorted(opt.commands)]
            where = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
            return f"that is {opt.flag} of {where}; give it to {'that command' if len(names) == 1 else 'those'}"
    field = next((f for f in dataclasses.fields(ExecutorOptions) if f.name == key), None)
    if field is not None and field.metadata.get("flag"):
        return (f"that is {field.metadata['flag']} of the experiment commands (`daybreak repeat`, `lesion`, `ab`), "
                f"where their trials run; give it to them")
    return None


def install_option_hints() -> None:
    """Let an unknown option's message name the command it belongs to (daybreak.options.UNKNOWN_KEY_HINTS)."""
    from daybreak.options import UNKNOWN_KEY_HINTS

    if other_commands_option not in UNKNOWN_KEY_HINTS:
        UNKNOWN_KEY_HINTS.append(other_commands_option)


def _config(config: "RunConfig | str | None", overrides: dict[str, Any], **defaults: Any) -> "RunConfig":
    from daybreak.config import RunConfig

    install_option_hints()

    if isinstance(config, str):
        config = RunConfig(task=config)
    base = config if config is not None else RunConfig()
    if not isinstance(base, RunConfig):
        raise ConfigError(f"expected a RunConfig or a task name, not {type(base).__name__}")
    values = {**defaults, **{k: v for k, v in base.model_dump().items() if k in base.model_fields_set}, **overrides}
    return RunConfig(**values)


def run(config: "RunConfig | str | None" = None, /, **overrides: Any) -> "RunResult":
    """One timed run, as `daybreak run` does it (in this process); returns the ``RunResult`` (also written to its
    run directory, with its config.toml). ``config``: a RunConfig or a task name; ``overrides``: RunConfig fields."""
    from daybreak.train.runner import run as _run

    return _run(_config(config, overrides, quiet=True))


def _experiment(command: str, kwargs: dict[str, Any]
                ) -> tuple["ExperimentConfig", "ExecutorOptions", list[str], dict[str, Any]]:
    from daybreak.executors import ExecutorOptions
    from daybreak.experiments.plan import ExperimentConfig

    exp_keys = set(ExperimentConfig.model_fields)
    exec_keys = set(ExecutorOptions.__dataclass_fields__)
    exp = ExperimentConfig(**{k: kwargs.pop(k) for k in list(kwargs) if k in exp_keys})
    executor = ExecutorOptions(**{k: kwargs.pop(k) for k in list(kwargs) if k in exec_keys})
    return exp, executor, ["python", f"daybreak.{command}()"], kwargs  # what is left: run options


def repeat(config: "RunConfig | str | None" = None, /, *, runs: int = 5, out: str | Path, **options: Any) -> "RepeatSummary":
    """``runs`` seeds of a configuration, each a fresh `daybreak run` process (see `daybreak repeat`). ``options``:
    RunConfig fields, experiment options (resume, busy, confidence) and executor options (executor, parallel, ...)."""
    from daybreak.experiments.commands import repeat as _repeat

    exp, executor, invocation, rest = _experiment("repeat", {**options, "runs": runs, "out": out})
    summary = _repeat(_node_zero(_config(config, rest)), exp, executor, invocation)
    assert summary is not None  # node 0 records it
    return summary


def ab(baseline: "RunConfig", candidate: "RunConfig", /, *, runs: int = 5, out: str | Path,
       names: tuple[str, str] = ("baseline", "candidate"), **options: Any) -> "AbSummary":
    """Candidate vs baseline over ``runs`` interleaved seed pairs (see `daybreak ab`); the paired ratio of
    time-to-target with its interval is ``result.comparison.time``."""
    from daybreak.experiments.commands import ab as _ab, arm_options
    from daybreak.records.experiment import Arm

    exp, executor, invocation, rest = _experiment("ab", {**options, "runs": runs, "out": out})
    configs = [_node_zero(_config(c, rest)) for c in (baseline, candidate)]
    arms = [Arm(name=n, directory=n, config=arm_options(c)) for n, c in zip(names, configs)]
    summary = _ab(arms, exp, executor, invocation, node=configs[0])
    assert summary is not None  # node 0 records it
    return summary


def _node_zero(config: "RunConfig") -> "RunConfig":
    """The API drives node 0 of a multi-node experiment; the other nodes join with the command line."""
    if config.node_rank != 0:
        raise ConfigError(f"node_rank={config.node_rank}: the Python API runs node 0 (which records the experiment); "
                          f"start node {config.node_rank} with `daybreak repeat|ab ... --node-rank "
                          f"{config.node_rank}`")
    return config


def infer_run(run_dir: str | Path, /, **options: Any) -> "InferenceResult":
    """Batch-1 latency, throughput and cost of a run's checkpoint (see `daybreak infer`). ``options``: fields of
    ``daybreak.infer.latency.InferConfig`` (device, amp, warmup, batch_size, cost_per_hour, ...)."""
    from daybreak.infer.latency import InferConfig, infer as _infer

    return _infer(InferConfig(run_dir=Path(run_dir), **_checked(InferConfig, options, "infer")))


def time(task: str, command: list[str] | None = None, /, *, log: str | Path | None = None,
         **options: Any) -> "RunResult":
    """Time an external program (``command``) or an existing MLPerf log (``log``) to the task's target (see
    `daybreak time`). ``options``: fields of ``daybreak.external.config.TimeConfig`` (target, rules, out, ...)."""
    from daybreak.external.config import TimeConfig
    from daybreak.external.timer import time_command, time_log

    values = _checked(TimeConfig, options, "time")
    config = TimeConfig(task=task, command=list(command or []), log=Path(log) if log else None, quiet=True, **values)
    if (config.log is None) == (not config.command):
        raise ConfigError("give either a command or log=FILE")
    return time_log(config) if config.log is not None else time_command(config)


infer = infer_run  # (once the package daybreak.infer is imported, it is this attribute, and callable the same way)


def _checked(cls: "type[DataclassInstance]", options: dict[str, Any], command: str) -> dict[str, Any]:
    """Keyword options of a config dataclass: unknown names are one ConfigError naming the nearest; the options it
    shares with RunConfig are read by RunConfig's own readers."""
    from daybreak.config import RunConfig
    from daybreak.options import unknown_key_message

    fields = set(cls.__dataclass_fields__)
    for key in options:
        if key not in fields:
            raise ConfigError(unknown_key_message(key, sorted(fields), "option"))
    shared = RunConfig.options_of(command)
    out = dict(options)
    for key, value in options.items():
        if key in shared:
            out[key] = shared[key].check(value)
    return out


__all__ = ["RunConfig", "ConfigError", "DaybreakError", "run", "repeat", "ab", "infer", "infer_run", "time", "__version__"]
