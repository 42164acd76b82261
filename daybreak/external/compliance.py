"""MLPerf's own compliance checker (mlperf-logging) on an mllog: `daybreak check-mllog RUN_OR_LOG`.

A log of an MLPerf Training benchmark is checked against its round's rules as they ship with mlperf-logging
(``compliance_checker/training_<ruleset>/common.yaml``). A `daybreak run`'s own mllog names a benchmark MLPerf does
not define (``daybreak_<task>``), which the checker's closed and open configs refuse; for those, daybreak writes a
checker configuration of its own and runs the same checker with it:

- ``common.yaml``: the round's, as mlperf-logging ships it, its division config taken from the folder written;
- ``closed_common.yaml`` / ``open_common.yaml``: the round's, with ``submission_benchmark`` checked against
  daybreak's tasks (``daybreak_<task>``) instead of MLPerf's benchmarks, and the task's config enqueued;
- ``closed_daybreak_<task>.yaml`` / ``open_daybreak_<task>.yaml``: written from the task registry: the target
  (an ``eval_accuracy`` at or beyond the task's target, in its metric's direction, in the closed division), the
  ``target_accuracy`` and ``eval_metric`` the run declares, a positive ``global_batch_size`` and a ``seed``.

``--write-config DIR`` keeps the configuration, so mlperf-logging's own command runs with it:
``python -m mlperf_logging.compliance_checker --config DIR/common.yaml RUN/mllog.log``.
"""

from __future__ import annotations

import logging
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from daybreak.errors import ConfigError, DataError
from daybreak.external.benchmark import (
    DAYBREAK_PREFIX, declared_benchmark, fitting_rounds, round_in_path, round_list,
)
from daybreak.external.mllog_reader import log_info, parse_log
from daybreak.mlperf_benchmarks import ROUNDS, normalize_round, rounds_of, ruleset
from daybreak.records.mllog import MLLOG_FILE, C

USAGE = "training"
_BLOCK = re.compile(r"(?m)^(?=- KEY:|- BEGIN:|- END:)")


@dataclass
class ComplianceResult:
    log: Path
    benchmark: str | None
    ruleset: str
    config: str  # the checker configuration used: mlperf-logging's own, or daybreak's for its tasks
    messages: list[str] = field(default_factory=list)  # empty: the log passes
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.messages


def installed_rulesets() -> list[str]:
    """The training rulesets the installed mlperf-logging checks, oldest first ('4.0.0', ...)."""
    from mlperf_logging.compliance_checker import mlp_compliance

    names = [r for r in mlp_compliance.rule_choices()
             if (_checker_dir() / f"{USAGE}_{r}" / "common.yaml").is_file()]
    return sorted(names, key=lambda r: tuple(int(p) for p in r.split(".")))


def _checker_dir() -> Path:
    import mlperf_logging.compliance_checker as cc

    return Path(cc.__file__).parent


def _ruleset_of(text: str) -> str:
    m = re.fullmatch(r"\s*[vV]?(\d+)\.(\d+)(?:\.(\d+))?\s*", text or "")
    if not m:
        raise ConfigError(f"--ruleset {text!r}: give an mlperf-logging training ruleset such as 6.1.0")
    name = f"{int(m.group(1))}.{int(m.group(2))}.{int(m.group(3) or 0)}"
    known = installed_rulesets()
    if name not in known:
        raise ConfigError(f"--ruleset {name}: the installed mlperf-logging checks none such (it has "
                          f"{', '.join(known)})")
    return name


# --- daybreak's checker configuration for its own tasks --------------------------------------------------------
def task_config(task_name: str, division: str) -> str:
    """The checker config of one daybreak task (``closed_daybreak_<task>.yaml`` / ``open_...``), from its registry
    entry: what MLPerf's benchmark configs check, for daybreak's target."""
    from daybreak.tasks import get_task

    task = get_task(task_name)
    metric = task.metric
    reached = "v['value'] >= {t}" if metric.higher_is_better else "v['value'] <= {t}"
    keys = [_key(C.EVAL_ACCURACY, "AT_LEAST_ONE", [f"'{C.EPOCH_NUM}' in v['metadata']"],
                 (reached.format(t=repr(task.target)) + " and v['value'] <= 1.0") if division == C.CLOSED else None),
            _key("eval_metric", "EXACTLY_ONE", [f"v['value'] == {metric.name!r}"]),
            _key(C.GLOBAL_BATCH_SIZE, "EXACTLY_ONE", ["v['value'] > 0"]),
            _key(C.SEED, "EXACTLY_ONE", ["'value' in v"])]
    if division == C.CLOSED:  # the closed division: the task's own target, declared
        keys.insert(1, _key("target_accuracy", "EXACTLY_ONE", [f"v['value'] == {task.target!r}"]))
    head = (f"# daybreak task {task.name} ({division} division), written by daybreak.external.compliance from the "
            f"task registry: {metric.name} {'at or above' if metric.higher_is_better else 'at or below'} "
            f"{task.target:g} in some evaluation\n")
    return head + "\n".join(keys)


def _key(name: str, req: str, checks: list[str], at_least_one: str | None = None) -> str:
    lines = ["- KEY:", f"    NAME:  {name}", f"    REQ:   {req}", "    CHECK:"]
    lines += [f'        - "{c}"' for c in checks]
    if at_least_one is not None:
        lines.append(f'    ATLEAST_ONE_CHECK: "{at_least_one}"')
    return "\n".join(lines) + "\n"


def write_config(folder: Path, rules: str) -> Path:
    """daybreak's checker configuration for every task, in ``folder`` (absolute paths inside, so the checker can
    be run with it from anywhere); returns its top-level config, ``folder/common.yaml``."""
    from daybreak.tasks import TASKS

    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    src = _checker_dir() / f"{USAGE}_{rules}"
    common = (src / "common.yaml").read_text(encoding="utf-8")
    division_configs = f"{USAGE}_{rules}/{{}}_common.yaml"
    if division_configs not in common:
        raise DataError(f"mlperf-logging's {USAGE}_{rules}/common.yaml does not enqueue {division_configs}: this "
                        "version of the checker is not one daybreak can configure for its tasks")
    (folder / "common.yaml").write_text(common.replace(division_configs, f"{folder}/{{}}_common.yaml"),
                                        encoding="utf-8")
    benchmarks = [DAYBREAK_PREFIX + t for t in TASKS.names()]
    for division in (C.CLOSED, C.OPEN):
        blocks = _BLOCK.split((src / f"{division}_common.yaml").read_text(encoding="utf-8"))
        ours = ("- KEY:\n    NAME:  submission_benchmark\n    REQ:   EXACTLY_ONE\n"
                f"    CHECK: \" v['value'] in {benchmarks!r} \"\n"
                f"    POST:  \" enqueue_config('{folder}/{division}_{{}}.yaml'.format(v['value'])) \"\n\n")
        kept = [b if not re.search(r"NAME:\s+submission_benchmark\b", b) else ours for b in blocks]
        if ours not in kept:
            raise DataError(f"mlperf-logging's {USAGE}_{rules}/{division}_common.yaml checks no submission_benchmark")
        (folder / f"{division}_common.yaml").write_text("".join(kept), encoding="utf-8")
        for task in TASKS.names():
            (folder / f"{division}_{DAYBREAK_PREFIX}{task}.yaml").write_text(task_config(task, division),
                                                                             encoding="utf-8")
    return folder / "common.yaml"


# --- running the checker --------------------------------------------------------------------------------------
def run_checker(log: Path, config: Path | str, rules: str) -> list[str]:
    """mlperf-logging's compliance checker on ``log`` with ``config`` (a path, or one relative to the checker's own
    folder): every message it has (empty = the log passes)."""
    from mlperf_logging.compliance_checker import mlp_compliance

    checker = mlp_compliance.make_checker(USAGE, rules, True, False)
    mlp_compliance.enqueued_configs.clear()
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)  # the checker logs each config and its messages; they are returned instead
    try:
        checker.check_file(str(log), str(config))
    finally:
        logging.disable(previous)
        mlp_compliance.enqueued_configs.clear()
    return [" ".join(str(m).split()) for m in (*checker.overwritable.values(), *checker.not_overwritable)]


def log_of(path: Path) -> Path:
    """A run directory's mllog, or the log file given."""
    if path.is_dir():
        if not (path / MLLOG_FILE).is_file():
            raise ConfigError(f"{path}: no {MLLOG_FILE} here; give a daybreak run directory or an mllog file")
        return path / MLLOG_FILE
    if not path.is_file():
        raise ConfigError(f"{path}: no such file or run directory")
    return path


def check_mllog(path: Path, *, round_option: str | None = None, ruleset_option: str | None = None,
                config_dir: Path | None = None) -> ComplianceResult:
    """The compliance checker on a run's mllog (or a log file): MLPerf's config for its benchmarks, daybreak's for
    its tasks (written to ``config_dir`` when given, else to a temporary folder)."""
    chosen = _ruleset_of(ruleset_option) if ruleset_option is not None else None
    round_given = normalize_round(round_option) if round_option is not None else None
    if round_option is not None and round_given not in ROUNDS:
        raise ConfigError(f"--round {round_option!r}: give an MLPerf Training round, one of {', '.join(ROUNDS)}")
    log = log_of(path)
    try:
        events, _ = parse_log(log.read_bytes(), mlperf=True)
    except OSError as e:
        raise DataError(f"{log}: cannot read it ({e.strerror or e})") from None
    name = declared_benchmark(events)
    if name is None:
        raise DataError(f"{log}: the log names no submission_benchmark; MLPerf's checker needs one")
    known = installed_rulesets()
    notes: list[str] = []
    if rounds_of(name):  # an MLPerf benchmark: its round's rules, as mlperf-logging ships them
        if chosen is not None:
            rules = chosen
        else:
            round_ = round_given or round_in_path(log)
            if round_ is None:
                rounds = rounds_of(name)
                fitting = fitting_rounds(events, name, rounds, log_info(events).global_batch_size)
                round_ = (fitting or rounds)[-1]
                notes.append(f"the log names no round: checked by the rules of {round_}, the latest with {name}"
                             + (f" whose target fits where the run's evaluations stopped ({round_list(fitting)})"
                                if fitting and fitting[-1] != rounds[-1] else "") + " (--round to choose)")
            rules = ruleset(round_)
            if rules not in known:
                raise ConfigError(f"the installed mlperf-logging has no checker for MLPerf Training {round_} "
                                  f"(it has {', '.join(known)})")
        return ComplianceResult(log, name, rules, f"mlperf-logging {USAGE}_{rules}/common.yaml",
                                run_checker(log, f"{USAGE}_{rules}/common.yaml", rules), notes)
    if not name.startswith(DAYBREAK_PREFIX):
        raise DataError(f"{log}: submission_benchmark {name[:60]!r} is neither an MLPerf Training benchmark nor a "
                        "daybreak task (daybreak_<task>): no checker configuration applies")
    rules = chosen or known[-1]
    if config_dir is not None:
        top = write_config(config_dir, rules)
        return ComplianceResult(log, name, rules, f"daybreak's, {top}", run_checker(log, top, rules), notes)
    with tempfile.TemporaryDirectory(prefix="daybreak-checker-") as tmp:
        top = write_config(Path(tmp), rules)
        return ComplianceResult(log, name, rules, f"daybreak's for its tasks, on mlperf-logging's {USAGE}_{rules}",
                                run_checker(log, top, rules), notes)
