"""daybreak: an end-to-end deep-learning benchmark (time-to-accuracy, cost-to-accuracy, inference latency).

In a notebook::

    import daybreak
    result = daybreak.run("digits", seed=3, hyperparameters={"lr": 0.05}, out="runs/lr005")
    result.time_to_target_s, result.clocks["mlperf"].time_to_target_s
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from daybreak.version import __version__

if TYPE_CHECKING:
    from daybreak.records.run import RunResult


def run(task: str = "digits", recipe: str | None = None, *, hyperparameters: dict[str, Any] | None = None,
        **options: Any) -> "RunResult":
    """One timed run, as `daybreak run` does it; returns the ``RunResult`` (also written to its run directory).

    ``recipe``: a registered name or the path of your own recipe file; ``hyperparameters``: overrides of the
    recipe's; ``options``: any field of ``daybreak.train.spec.RunConfig`` (seed, target, rules, out, data_dir,
    allow_custom_data, device, amp, compile, threads, full_schedule, cost_per_hour, instance, quiet, ...).
    Mistakes raise ``daybreak.errors.ConfigError`` with a one-line message before any work."""
    from pathlib import Path

    from daybreak.train.runner import run as _run
    from daybreak.train.spec import RunConfig

    options.setdefault("quiet", True)
    for key in ("out", "data_dir", "price_file"):
        if options.get(key) is not None:
            options[key] = Path(options[key])
    return _run(RunConfig(task=task, recipe=recipe, overrides=dict(hyperparameters or {}), **options))


__all__ = ["run", "__version__"]
