"""daybreak: an end-to-end deep-learning benchmark (time-to-accuracy, cost-to-accuracy, inference latency).

In a notebook::

    import daybreak
    from daybreak import RunConfig

    result = daybreak.run("digits", seed=3, overrides={"lr": 0.05}, out="runs/lr005")
    result.time_to_target_s, result.clocks["mlperf"].time_to_target_s

    base = RunConfig(task="digits", target="97%")
    summary = daybreak.repeat(base, runs=5, out="exp/digits5")         # 5 fresh processes
    ab = daybreak.ab(base, base.with_(overrides={"lr": 0.2}), runs=5, out="exp/lr")
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
    from daybreak.config import RunConfig
    from daybreak.records.experiment import AbSummary
    from daybreak.records.inference import InferenceResult
    from daybreak.records.repeat import RepeatSummary
    from daybreak.records.run import RunResult


def __getattr__(name: str) -> Any:
    """``daybreak.RunConfig`` is imported on first use (PEP 562), so that ``import daybreak`` (and with it every
    ``daybreak`` command, even ``--help``) does not pay for pydantic before it needs it."""
    if name == "RunConfig":
        from daybreak.config import RunConfig

        return RunConfig
    raise AttributeError(f"module 'daybreak' has no attribute {name!r}")


def _config(config: "RunConfig | str | None", overrides: dict[str, Any], **defaults: Any) -> "RunConfig":
    from daybreak.config import RunConfig

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


def _experiment(command: str, kwargs: dict[str, Any]):
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
    return _repeat(_config(config, rest), exp, executor, invocation)


def ab(baseline: "RunConfig", candidate: "RunConfig", /, *, runs: int = 5, out: str | Path,
       names: tuple[str, str] = ("baseline", "candidate"), **options: Any) -> "AbSummary":
    """Candidate vs baseline over ``runs`` interleaved seed pairs (see `daybreak ab`); the paired ratio of
    time-to-target with its interval is ``result.comparison.time``."""
    from daybreak.experiments.commands import ab as _ab, arm_options
    from daybreak.records.experiment import Arm

    exp, executor, invocation, rest = _experiment("ab", {**options, "runs": runs, "out": out})
    arms = [Arm(name=n, directory=n, config=arm_options(_config(c, rest))) for n, c in zip(names, (baseline, candidate))]
    return _ab(arms, exp, executor, invocation)


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


def _checked(cls: type, options: dict[str, Any], command: str) -> dict[str, Any]:
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
