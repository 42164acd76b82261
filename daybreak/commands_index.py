"""Every `daybreak` command: its name, the module that registers it and its one-line help, declared once here.

The command line imports only the module of the command it runs (``daybreak run`` never imports the leaderboard's
web stack); ``daybreak --help`` lists every command from this table alone, without importing any of them. Each
module's ``register(subparsers)`` takes its commands' help from :func:`help_of`, and a test checks that the
modules register exactly the commands this table gives them.

The optional parts of the package are declared here too (:data:`EXTRAS`: each extra of ``pyproject.toml`` with
the modules it brings), so that a command whose extra is not installed says in one line which to install
(``daybreak leaderboard serve`` without ``daybreak[leaderboard]``) instead of a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    name: str
    module: str  # defines register(subparsers), which adds this command (and the module's others)
    help: str
    extra: str | None = None  # the extra (a name in EXTRAS) it needs beyond the core install; None: the core's


@dataclass(frozen=True)
class Extra:
    """An optional part of the package: ``pip install 'daybreak[NAME]'``."""

    name: str  # the extra's name in pyproject.toml [project.optional-dependencies]
    modules: tuple[str, ...]  # the top-level modules its packages provide (what a failed import names)
    purpose: str  # what it is for, in a few words


EXTRAS: tuple[Extra, ...] = (
    Extra("leaderboard", ("fastapi", "starlette", "uvicorn", "sqlalchemy", "jinja2", "multipart", "python_multipart",
                          "psycopg"), "the leaderboard's web server and database"),
    Extra("loadgen", ("mlperf_loadgen",), "MLCommons LoadGen for `daybreak infer --backend loadgen`"),
    Extra("slurm", ("submitit",), "the Slurm and submitit-local executors"),
    Extra("energy", ("pynvml",), "GPU energy through NVML"),
    Extra("jax", ("jax", "jaxlib", "flax", "optax"), "the JAX reference programs of `daybreak throughput`"),
    Extra("tensorflow", ("tensorflow", "keras"), "the TensorFlow reference programs of `daybreak throughput`"),
    Extra("paddle", ("paddle",), "the Paddle reference programs of `daybreak throughput`"),
)


COMMANDS: tuple[Command, ...] = (
    Command("run", "daybreak.train.commands",
            "train a reference recipe to the task's target accuracy and record time and cost to reach it"),
    Command("show", "daybreak.train.commands", "print the summary of a run directory"),
    Command("tasks", "daybreak.train.commands", "list tasks with their targets"),
    Command("recipes", "daybreak.train.commands", "list recipes with their hyperparameters"),
    Command("instances", "daybreak.train.commands",
            "list the price catalog used by --instance, with each price's date, source and note"),
    Command("leaderboard", "daybreak.leaderboard.commands",
            "import submissions, rank them, serve the leaderboard web site", extra="leaderboard"),
    Command("time", "daybreak.external.commands",
            "time any framework's training program to the target accuracy from its MLPerf log (`-- CMD ...`)"),
    Command("check-mllog", "daybreak.external.commands",
            "run MLPerf's compliance checker (mlperf-logging) on a run's mllog: its round's rules for an MLPerf "
            "benchmark's log, daybreak's checker configuration for daybreak's own tasks"),
    Command("infer", "daybreak.infer.commands",
            "measure inference latency (batch 1), throughput and cost of a run's checkpoint"),
    Command("throughput", "daybreak.sweep.commands",
            "DLPerf-style throughput sweep: samples/s over batch size, precision, compile and devices"),
    Command("peak", "daybreak.sweep.commands",
            "measure the device's peak matmul FLOP/s per precision and its memory copy bandwidth (cached)"),
    Command("analyze", "daybreak.analysis.commands",
            "analyses of runs and sweeps: threshold, roofline, scaling, score"),
    Command("evaluate", "daybreak.analysis.commands",
            "evaluate a run's checkpoint on another labelled set (generalization)"),
    Command("compare", "daybreak.analysis.commands",
            "is A faster to the target than B? Welch's t-test, Mann-Whitney U, Hedges' g"),
    Command("report", "daybreak.analysis.commands",
            "HTML + Markdown report with every table and plot for runs, repeats, lesions and sweeps"),
    Command("repeat", "daybreak.experiments.cli",
            "run a recipe over N seeds, each a fresh process, and summarize the stability of its time-to-target"),
    Command("lesion", "daybreak.experiments.cli",
            "the recipe with each optimization switched off in turn, against the full recipe (paired ratios)"),
    Command("ab", "daybreak.experiments.cli",
            "is B faster than A on this machine, and by how much? Interleaved pairs, a ratio with its interval"),
    Command("evaluate-squad", "daybreak.squad_commands",
            "score SQuAD v1.1 predictions: exact match and F1, as the official v1.1 evaluation does"),
)
BY_NAME: dict[str, Command] = {c.name: c for c in COMMANDS}


def help_of(name: str) -> str:
    """The one-line help of command ``name`` (what ``daybreak --help`` lists)."""
    return BY_NAME[name].help


def modules() -> list[str]:
    """The command modules, each once, in the table's order."""
    return list(dict.fromkeys(c.module for c in COMMANDS))


def extra_providing(module: str) -> Extra | None:
    """The extra whose packages provide ``module`` (a dotted name: its top-level package counts), or None."""
    top = module.split(".", 1)[0]
    return next((e for e in EXTRAS if top in e.modules), None)


def missing_extra_message(command: str, extra: Extra, module: str) -> str:
    """The one line for a command that needs ``extra`` when ``module`` (one of its modules) cannot be imported."""
    return (f"`daybreak {command}` needs daybreak's {extra.name} extra ({extra.purpose}; {module.split('.', 1)[0]} "
            f"is not installed): pip install 'daybreak[{extra.name}]'")
