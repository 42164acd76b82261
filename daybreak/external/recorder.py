"""The run directory of `daybreak time`: result.json and the DAWNBench files (rewritten atomically as the program
logs), mllog.log and program.log (appended line by line), external.json (daybreak.records.external)."""

from __future__ import annotations

import getpass
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from daybreak.external.benchmark import TimedAgainst
from daybreak.external.config import TimeConfig
from daybreak.external.mllog_analysis import Analysis
from daybreak.external.mllog_reader import BadLine
from daybreak.external.mllog_verdict import ProgramEnd, verdict
from daybreak.measure.system import SystemInfo, host_info
from daybreak.mlperf_benchmarks import ruleset
from daybreak.pricing import cost_usd
from daybreak.records.mllog import C
from daybreak.records.dawnbench import write_dawnbench
from daybreak.records.external import ExternalRecord, MalformedRecord
from daybreak.records.mllog import MLLOG_FILE
from daybreak.records.run import ClockFigure, EpochRecord, MlperfCriterion, MlperfReading, PhaseInterval, RunResult
from daybreak.rules import DAWNBENCH, MLPERF


PROGRAM_LOG = "program.log"


# --- the run directory -------------------------------------------------------------------------------------
class ExternalRecorder:
    """Writes result.json + DAWNBench files (atomically), mllog.log and program.log (appended line by line)."""

    def __init__(self, run_dir: Path, result: RunResult, config: TimeConfig, *, mode: str, task_target: float,
                 against: TimedAgainst):
        self.run_dir = Path(run_dir)
        self.against = against
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.result = result
        self.config = config
        self.mode = mode  # "command" or "log"
        self.task_target = task_target
        # appended and flushed line by line (fsync'd at the end): a killed daybreak leaves whole lines behind
        self._mllog = open(self.run_dir / MLLOG_FILE, "ab")
        self._program = open(self.run_dir / PROGRAM_LOG, "ab") if mode == "command" else None
        self.program_lines = 0
        self.external: dict[str, Any] = {}  # the live child's fields of external.json (records.external.LIVE_FIELDS)
        self.analysis: Analysis | None = None
        self.bad_lines: list[BadLine] = []
        self.extra_notes: list[str] = []  # notes of daybreak's own (e.g. how the launch was placed)
        self.save()

    def mllog_line(self, text: str) -> None:
        self._mllog.write(text.rstrip("\n").encode("utf-8") + b"\n")
        self._mllog.flush()

    def program_line(self, raw: bytes) -> int:
        """Append one line of program output; returns its 1-based line number in program.log."""
        assert self._program is not None
        self._program.write(raw + b"\n")
        self._program.flush()
        self.program_lines += 1
        return self.program_lines

    def author(self) -> str:
        if self.config.author is not None:
            return self.config.author
        org = (self.analysis.submission.get(C.SUBMISSION_ORG) if self.analysis else None)
        if isinstance(org, str) and org.strip():
            return org.strip()
        try:
            return getpass.getuser()
        except Exception:  # noqa: BLE001 - no user name is fine
            return ""

    def save(self) -> None:
        self.result.author, self.result.author_email = self.author() or None, self.config.author_email or None
        self.result.save(self.run_dir)
        write_dawnbench(self.result, self.run_dir, author=self.author(), author_email=self.config.author_email)
        self.external_record().save(self.run_dir)

    def external_record(self) -> ExternalRecord:
        a = self.analysis
        first = self.bad_lines[0] if self.bad_lines else None
        return ExternalRecord(
            mode=self.mode,  # type: ignore[arg-type]
            command=self.config.command if self.mode == "command" else None,
            log_file=str(self.config.log) if self.config.log else None,
            program_log=PROGRAM_LOG if self.mode == "command" else None,
            stop_at_target=self.config.stop_at_target,
            grace_s=self.config.grace_s,
            rules=self.config.rule_set,
            count_eval=self.config.rule_set == MLPERF.name,  # deprecated alias of rules == "mlperf"
            warnings=list(self.result.warnings),
            accuracy_unit_option=self.config.unit,
            accuracy_unit=None if a is None else ("percent" if a.percent else "fraction"),
            clock_check=None if a is None else a.clock,
            mllog_records=0 if a is None else a.events,
            malformed_records=len(self.bad_lines),
            first_malformed=None if first is None else MalformedRecord(line=first.lineno, reason=first.reason,
                                                                       text=first.text[:500]),
            run_start_line=None if a is None or a.run_start is None else a.run_start.lineno,
            run_stop_status=None if a is None else a.run_stop_status,
            submission={} if a is None else a.submission,
            notes=[] if a is None else a.notes,
            **self.external,
        )

    def apply(self, a: Analysis, bad_lines: list[BadLine]) -> None:
        """Fill the record from an analysis (status stays as it is: see ``finish``)."""
        self.analysis = a
        self.bad_lines = list(bad_lines)
        r = self.result
        r.model = a.model or "external"
        r.framework = a.framework or "unknown"
        r.hyperparameters = dict(a.hyperparameters)
        r.seed = a.seed if a.seed is not None else 0  # the record's seed is an int: "the log has no seed" says so
        r.global_batch_size = a.global_batch_size
        self._apply_system(a)
        r.history = [self._epoch_record(ev, a) for ev in a.evaluations]
        r.final_accuracy = a.evaluations[-1].accuracy if a.evaluations else None
        r.best_accuracy = a.best_accuracy
        r.init_s = a.init_s
        r.train_s = a.train_s
        r.eval_s = a.eval_s
        r.rules = a.rules
        r.phases = [PhaseInterval(phase=i.phase, start_s=round(i.start_s, 6), end_s=round(i.end_s, 6))
                    for i in a.timeline]
        r.clocks = {name: ClockFigure(rules=name, time_to_target_s=c.target_s if a.clock.trusted else None,
                                      clock_s=c.clock_s, start_s=c.start_s, excluded_s=dict(c.excluded_s),
                                      notes=list(c.notes))
                    for name, c in a.clocks.items()}
        t = a.target_eval if a.reached else None
        r.reached = a.reached
        r.time_to_target_s = a.time_to_target_s
        r.epochs_to_target = t.epoch if t else None
        r.steps_to_target = t.step if t else None
        r.cost_usd = cost_usd(r.time_to_target_s, r.cost_per_hour)
        r.mlperf = self._mlperf_reading(a)
        notes = list(a.notes) + list(self.against.notes) + self.extra_notes
        if self.mode == "log":
            notes.append("timestamps read from a log file after the fact: not cross-checked against a wall clock")
        r.data_notes = notes
        r.warnings = list(a.warnings)
        reasons = []
        if r.target != self.task_target:
            reasons.append(f"target {r.target:.4f} differs from the task's {self.task_target:.4f}")
        if a.mlperf is not None and a.mlperf.division != "closed":
            reasons.append(f"the log's division is {a.mlperf.division!r}, not closed")
        if self.mode == "log":
            reasons.append("timestamps from a log file, not cross-checked against a wall clock")
        if not a.clock.trusted:
            reasons.append("the program's timestamps are not trusted (clock cross-check)")
        r.unofficial_reasons = reasons
        r.official = not reasons

    def _epoch_record(self, ev: Any, a: Analysis) -> EpochRecord:
        """One evaluation. The log's values fill the target's metric columns only, under their own names (top1 or
        top5; eval_loss; fid and clip), never another metric's."""
        metric = self.result.metric
        named = {c.metric.name: ev.values[c.part] for c in (a.goal.criteria if a.goal else ()) if c.part in ev.values}
        return EpochRecord(epoch=ev.epoch, step=ev.step or 0, elapsed_s=ev.elapsed_s, clock_s=dict(ev.clock_s),
                           accuracy=ev.accuracy, top1=ev.accuracy if metric == "top1" else None,
                           top5=ev.accuracy if metric == "top5" else None, metrics=named or {metric: ev.accuracy},
                           eval_s=ev.eval_s)

    def _mlperf_reading(self, a: Analysis) -> MlperfReading | None:
        """MLPerf's verdict and the DAWNBench reading of a log of an MLPerf benchmark, with the rules' source."""
        v, b = a.mlperf, self.against.benchmark
        if v is None or b is None or a.goal is None:
            return None
        dawnbench = a.clocks.get(DAWNBENCH.name)
        span = b.span(v.round)
        return MlperfReading(
            benchmark=b.name, title=b.title, round=v.round, round_from=self.against.round_from, division=v.division,
            criteria=[MlperfCriterion(metric=c.metric.name, part=c.part, target=c.target,
                                      higher_is_better=c.metric.higher_is_better, unit=c.metric.unit, label=c.label)
                      for c in a.goal.criteria],
            rules_source=span.source.replace("<round>", ruleset(v.round)) if span else "",
            run_stop_status=a.run_stop_status, init_s=v.init_s, init_limit_s=v.init_limit_s,
            init_limit_source=v.init_limit_source, reached=v.reached, reason=v.reason or None, time_s=v.time_s,
            target_met=v.target_met, dawnbench_reached=a.target_eval is not None and a.clock.trusted,
            dawnbench_time_s=dawnbench.target_s if dawnbench is not None and a.clock.trusted else None)

    def _apply_system(self, a: Analysis) -> None:
        """The system the program ran on. Live: this machine, measured, with what the program declared kept
        beside it. --log: what the log declares (submission_*); the analysing machine goes to ``analyzed_on``."""
        r = self.result
        declared = dict(a.submission)
        if self.mode == "command":
            r.system = r.system.model_copy(update={"declared_fields": declared})
            return
        if r.analyzed_on is None:
            r.analyzed_on = host_info()
        platform = declared.get(C.SUBMISSION_PLATFORM)
        hardware = platform.strip() if isinstance(platform, str) and platform.strip() else None
        r.system = SystemInfo.declared(hardware, framework=a.framework, fields=declared)
        if hardware is None:
            note = ("the log declares no submission_platform: the program's hardware is unknown (the machine that "
                    "analysed the log is in analyzed_on)")
            if note not in self.extra_notes:
                self.extra_notes.append(note)

    def finish(self, a: Analysis, bad_lines: list[BadLine], end: ProgramEnd | None, *, total_s: float | None,
               finished_at: datetime) -> None:
        self.apply(a, bad_lines)
        status, message = verdict(a, end, bad_lines=bad_lines,
                                  where=PROGRAM_LOG if self.mode == "command" else str(self.config.log))
        r = self.result
        r.status = status  # type: ignore[assignment]
        r.message = message
        if status != "reached":
            r.reached = False
            r.time_to_target_s = r.epochs_to_target = r.steps_to_target = r.cost_usd = None
            # an MLPerf benchmark's log keeps each rule set's own reading (MLPerf's verdict and the DAWNBench
            # reading can differ); otherwise no figure stands for a run that did not reach its target
            if r.mlperf is None or status != "not_reached":
                for figure in r.clocks.values():
                    figure.time_to_target_s = None
        r.total_s = total_s
        r.finished_at = finished_at
        self.save()

    def close(self) -> None:
        for f in (self._mllog, self._program):
            if f is not None and not f.closed:
                f.flush()
                try:
                    os.fsync(f.fileno())
                except OSError:
                    pass
                f.close()
