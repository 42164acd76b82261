"""A throughput sweep through an executor (``daybreak throughput ... --executor slurm``): every configuration a
job of its own, each measured by a `daybreak throughput` of just that configuration on its node.

Each configuration's command is the user's own command line with the swept axes (--batch-sizes, --amp, --compile,
--devices) narrowed to that configuration's values and its own results folder (``OUT/parts/<slug>``), so the node
measures its own peak ceilings and records its own system. As each job ends its row is appended to
``OUT/results.jsonl`` (with the speedup over the one-device row where there is one) and the views are rewritten;
configurations already in the folder are skipped as in a local sweep. The local executor keeps the ordinary
loop (daybreak.sweep.sweep), whose configurations are fresh processes already.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import daybreak.executors as ex
from daybreak.errors import ConfigError
from daybreak.fileio import AppendLog
from daybreak.records.throughput import RESULTS_FILE, ThroughputConfig, latest_by_key, load_results, with_scaling
from daybreak.sweep.grid import SweepOptions, expand
from daybreak.sweep.sweep import SweepOutcome
from daybreak.sweep.views import current_rows, write_views

PARTS = "parts"
# flags that the per-configuration command sets itself, or that belong to this driver only: (flag, takes a value)
DRIVER_FLAGS = {"--frameworks": True, "--protocol": True, "--batch-sizes": True, "--amp": True, "--compile": True, "--devices": True, "--out": True,
                "--force": False, "--retry-failed": False, "--json": False, "--quiet": False, "-q": False,
                "--no-plots": False, "--executor": True, "--parallel": True, "--slurm-partition": True,
                "--slurm-time-min": True, "--slurm-cpus-per-trial": True, "--slurm-mem-gb": True,
                "--slurm-array-parallelism": True, "--slurm-additional": True, "--slurm-folder": True}


def strip_driver_flags(argv: list[str]) -> list[str]:
    """The command line without the flags of DRIVER_FLAGS (``--flag V`` and ``--flag=V`` forms)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in DRIVER_FLAGS:
            skip = DRIVER_FLAGS[name] and "=" not in arg
            continue
        out.append(arg)
    return out


def config_command(base: list[str], config: ThroughputConfig, part: Path) -> list[str]:
    frameworks = [] if config.framework == "program" else ["--frameworks", config.framework]  # --program stays in base
    if config.framework == "pytorch":  # alone in its job: the protocol of the comparison it belongs to
        frameworks += ["--protocol", config.protocol]
    return [sys.executable, "-m", "daybreak", *base, *frameworks, "--batch-sizes", str(config.batch_size),
            "--amp", config.amp,
            "--compile", "on" if config.compile else "off", "--devices", str(config.devices), "--out", str(part),
            "--quiet", "--no-plots", "--force"]


def run_sweep_remote(options: SweepOptions, exec_options: "ex.ExecutorOptions", argv: list[str],
                     log: Callable[[str], None]) -> SweepOutcome:
    if options.nodes > 1:
        raise ConfigError("--executor with --nodes > 1: a configuration that spans nodes is launched by hand on each "
                          "node (docs/how-to/throughput.md); the executor places single-node configurations")
    configs = expand(options)
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    known = latest_by_key(load_results(out / RESULTS_FILE, warn=log))
    todo = [c for c in configs if options.force or c.key() not in known
            or (options.retry_failed and known[c.key()].status in ("failed", "timeout"))]
    executor = ex.make_executor(exec_options, out)
    base = strip_driver_flags(argv)
    trials = []
    for config in todo:
        part = out / PARTS / config.slug()
        trials.append(ex.Trial(key=config.slug(), argv=config_command(base, config, part), run_dir=part,
                               log=out / PARTS / f"{config.slug()}.log", devices=config.devices))
    by_key = {c.slug(): c for c in todo}
    measured = failed = 0
    with AppendLog(out / RESULTS_FILE) as appender:
        def on_done(trial: "ex.Trial", outcome: "ex.TrialOutcome") -> None:
            nonlocal measured, failed
            config = by_key[trial.key]
            rows = [r for r in load_results(trial.run_dir / RESULTS_FILE, warn=log) if r.config.key() == config.key()]
            if not rows:
                failed += 1
                log(f"{config.label()}: no result (exit status {outcome.exit_code}; {outcome.error or trial.log})")
                return
            base_row = known.get(config.baseline_key()) if config.world_size > 1 else None
            row = with_scaling([rows[-1]] + ([base_row] if base_row is not None else []))[0]
            appender.write_line(row.model_dump_json())
            known[config.key()] = row
            measured += 1
            failed += row.status != "ok"
            log(f"{config.label()}: {row.status}" + (f", {row.samples_per_s:,.1f} samples/s on {outcome.host}"
                                                     if row.status == "ok" else f": {row.error}"))
            write_views(out, plots=False, log=log)

        log(f"{len(todo)} configuration(s) to {exec_options.executor}, {len(configs) - len(todo)} already in {out}")
        executor.run(trials, on_done)
    write_views(out, plots=options.plots, log=log)
    rows = {r.key(): r for r in current_rows(out)}
    return SweepOutcome(rows=[rows[c.key()] for c in configs if c.key() in rows], measured=measured,
                        skipped=len(configs) - len(todo), failed=failed, out=out)
