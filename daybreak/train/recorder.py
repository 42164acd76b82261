"""Everything a run writes, hung off the training loop: result.json, DAWNBench JSON+TSV, mllog, checkpoint.

Crash safety: JSON/TSV/checkpoint are rewritten with temp + rename after every evaluation; mllog lines are
appended and flushed one by one. A SIGKILL at any moment leaves every file parseable.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from daybreak.errors import ConfigError
from daybreak.fileio import atomic_write_bytes, make_temp_dir
from daybreak.metrics import get_metric
from daybreak.pricing import cost_usd
from daybreak.records.dawnbench import write_dawnbench
from daybreak.records.mllog import MLLOG_FILE, C, RunMllog
from daybreak.records.run import (NON_FINITE_KEPT, ClockFigure, EpochRecord, NonFiniteLoss, PhaseInterval,
                                  RunResult, RunStatus)
from daybreak.rules import RULE_SETS, read_all
from daybreak.train.clock import Timeline

CHECKPOINT_FILE = "checkpoint.pt"


class _NoMllog:
    """Stands in for the mllog on ranks other than 0."""

    def start(self, *args: Any, **kwargs: Any) -> None: ...
    def end(self, *args: Any, **kwargs: Any) -> None: ...
    def event(self, *args: Any, **kwargs: Any) -> None: ...
    def close(self) -> None: ...
    def hold(self) -> None: ...
    def release(self) -> None: ...
    def release_after(self, *args: Any) -> None: ...
    holding = False


def _lowest_precision(amp: str, device: str, tf32: bool | None) -> str:
    """MLPerf's name for the lowest precision of the run's matmuls/convolutions."""
    if amp == "bf16":
        return "bfloat16"
    if amp == "fp16":
        return "fp16"
    if device.startswith("cuda") and tf32:
        return "tf32"  # fp32 matmuls and convolutions on TF32 tensor cores (the run's --tf32)
    return "fp32"


class RunRecorder:
    """Keeps the RunResult up to date on every rank; only the one with ``write=True`` (rank 0) writes files."""

    def __init__(self, run_dir: Path, result: RunResult, timeline: Timeline, *, author: str = "",
                 author_email: str = "", write: bool = True, benchmark: str | None = None,
                 replace_failed: bool = False, energy: Any = None, files: dict[str, str] | None = None):
        self.run_dir = Path(run_dir)
        self._files = dict(files or {})  # written once, with the directory (e.g. the run's config.toml)
        self.write = write
        self.result = result
        self.timeline = timeline
        self._submission = dict(author=author, author_email=author_email)
        self._open_epoch: int | None = None
        self._finished = False
        self._target_at_s: float | None = None  # timeline instant the target was reached (end of that eval)
        self._division_written = False
        self._non_finite_warned = False  # a non-finite loss that did not end the run is a warning once
        # mllog lines held while a train interval is open: (method, key, value, metadata, time_ms)
        self._deferred: list[tuple[str, str, Any, dict[str, Any] | None, float | None]] | None = None
        self._init_started = False  # init_start was logged before the data (MLPerf's order)
        self._init_pending = False  # ... at the start of the next phase
        self.energy = energy  # daybreak.train.energy.RunEnergy, or None
        self._benchmark = benchmark or f"daybreak_{result.task}"
        if write:
            self._create_run_dir(replace_failed)
        self.mllog: RunMllog | _NoMllog = RunMllog(self.run_dir / MLLOG_FILE) if write else _NoMllog()
        self._write_header()

    def _create_run_dir(self, replace_failed: bool) -> None:
        """The directory appears with every file already in it (built beside it, then renamed into place),
        so a kill at any moment never leaves a run directory with a file missing. ``replace_failed``: the
        directory holds a run that failed before training (see runner.reusable_out_dir) and is replaced."""
        parent = self.run_dir.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            staging = make_temp_dir(parent, prefix=f".{self.run_dir.name}.")
        except OSError as e:
            raise ConfigError(f"--out {self.run_dir}: cannot create the run directory there "
                              f"({e.strerror or type(e).__name__})") from None
        try:
            self.result.save(staging)
            write_dawnbench(self.result, staging, durable=True, **self._submission)
            (staging / MLLOG_FILE).touch()
            for name, text in self._files.items():
                (staging / name).write_text(text, encoding="utf-8")
            if replace_failed and self.run_dir.is_dir():
                old = Path(tempfile.mkdtemp(prefix=f".{self.run_dir.name}.failed.", dir=parent))
                os.replace(self.run_dir, old / "run")
                shutil.rmtree(old, ignore_errors=True)
            os.replace(staging, self.run_dir)  # replaces an empty directory of that name, if any
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    # --- files ----------------------------------------------------------------------------------------------
    def save(self, *, durable: bool = True, views: bool = True) -> None:
        """``durable=False`` during the run (no fsync on the clock: a killed process still leaves every file
        whole); the final save is fsync'd. ``views=False``: result.json only, not the DAWNBench files derived from
        it (the saves on MLPerf's clock: each file is a rename that the disk may make wait)."""
        self.result.phases = [PhaseInterval(phase=i.phase, start_s=round(i.start_s, 9), end_s=round(i.end_s, 9))
                              for i in self.timeline.intervals]
        if not self.write:
            return
        self.result.save(self.run_dir, durable=durable)
        if views:
            write_dawnbench(self.result, self.run_dir, durable=durable, **self._submission)

    def _timed_save(self, model: torch.nn.Module | None = None, record: EpochRecord | None = None) -> None:
        """Checkpoint (when given) and record files, as a ``record`` phase on the timeline and in the mllog."""
        t0 = self.timeline.begin("record")
        self.mllog.start("record", metadata={"phase": "checkpoint and record writes"}, time_ms=self.timeline.epoch_ms(t0))
        try:
            if model is not None and record is not None:
                self.save_checkpoint(model, record)
            # On MLPerf's clock (every evaluation before the target) only the record itself: the DAWNBench views
            # are written at the start, at the target (after both clocks stopped) and at the end.
            self.save(durable=False, views=record is not None)
        finally:
            t1 = self.timeline.end("record")
            self.mllog.end("record", time_ms=self.timeline.epoch_ms(t1))

    def close(self) -> None:
        self._write_deferred()
        self.mllog.close()

    def _write_header(self) -> None:
        r = self.result
        log = self.mllog
        log.event(C.SUBMISSION_BENCHMARK, self._benchmark)
        log.event(C.SUBMISSION_ORG, self._submission["author"] or "daybreak")
        log.event(C.SUBMISSION_STATUS, C.ONPREM)
        log.event(C.SUBMISSION_PLATFORM, r.system.hardware_summary())
        log.event("submission_framework", r.framework)
        log.event(C.SEED, r.seed)
        log.event(C.GLOBAL_BATCH_SIZE, r.global_batch_size)
        log.event(C.GRADIENT_ACCUMULATION_STEPS, 1)
        log.event("lowest_numerical_precision_in_comm", "fp32")  # DDP all-reduces fp32 gradients
        for key in ("tensor_parallelism", "pipeline_parallelism", "context_parallelism", "expert_parallelism"):
            log.event(key, 1)  # data parallel only
        log.event("micro_batch_size", r.per_device_batch_size or r.global_batch_size or 1)
        log.event("config_filename", f"daybreak/recipes ({r.recipe})")
        log.event("target_accuracy", r.target)
        log.event("eval_metric", r.metric)
        log.event("clock_rules", r.rules)
        for key, value in r.hyperparameters.items():
            log.event(f"hp_{key}", value)

    # --- phases ---------------------------------------------------------------------------------------------
    def precision_known(self, amp: str, tf32: bool | None) -> None:
        """The model is built: its precision is final (a recipe's own fp16 network overrides --amp)."""
        precision = _lowest_precision(amp, self.result.device, tf32)
        for key in ("lowest_numerical_precision_in_linear", "lowest_numerical_precision_in_attn"):
            self.mllog.event(key, precision)

    def init_start(self) -> None:
        """Model initialization comes before the dataset is touched (MLPerf's order): the next phase to start
        (model_init) logs init_start at its own instant. The mllog holds its lines from here until the data check
        has decided the division (see data_loaded), so that the division stands before init_stop, where MLPerf's
        checker needs it."""
        self._init_started = True
        self.mllog.hold()
        self._init_pending = True

    def run_start(self) -> None:
        """The first touch of the dataset: MLPerf's init_stop and run_start, and the start of data loading. When
        nothing was initialized before (a recipe that builds from the data), init_start is the same instant."""
        t = self.timeline.begin("data_load")
        ms = self.timeline.epoch_ms(t)
        if not self._init_started:
            self.mllog.hold()  # until the data check decides the division (see data_loaded)
            self.mllog.start(C.INIT_START, time_ms=ms)
        self.mllog.end(C.INIT_STOP, time_ms=ms)
        self.mllog.start(C.RUN_START, time_ms=ms)
        self.mllog.start("data_load", time_ms=ms)
        if self.energy is not None and self.energy.available:  # MLPerf's power keys: mean watts per interval
            self.mllog.start(C.POWER_MEASUREMENT_START, time_ms=ms)
            self.energy.power_log = lambda t_s, watts: self._line(
                "event", C.POWER_READING, round(watts, 6), time_ms=self.timeline.epoch_ms(t_s))
            self.energy._last_power = None
            self.energy.on_boundary(t)

    def data_loaded(self) -> None:
        """The data check is done: the division is decided and written before the lines held since run_start."""
        self.phase_end("data_load")
        self._write_division()

    def _write_division(self) -> None:
        if self._division_written:
            return
        self._division_written = True
        held = self.mllog.holding
        if held:  # written straight to the file, ahead of the held lines
            self.mllog.release_after(C.SUBMISSION_DIVISION, C.CLOSED if self.result.official else C.OPEN)
        else:
            self.mllog.event(C.SUBMISSION_DIVISION, C.CLOSED if self.result.official else C.OPEN)

    def phase_start(self, phase: str) -> None:
        t = self.timeline.begin(phase)
        if self._init_pending:
            self._init_pending = False
            self.mllog.start(C.INIT_START, time_ms=self.timeline.epoch_ms(t))
        self.mllog.start(phase, time_ms=self.timeline.epoch_ms(t))

    def phase_end(self, phase: str) -> None:
        t = self.timeline.end(phase)
        self.mllog.end(phase, time_ms=self.timeline.epoch_ms(t))

    def data_checked(self, mllog_events: dict[str, Any], *, train_samples: int | None, eval_samples: int) -> None:
        """After the data and target checks: the division can be decided, and the recipe's keys logged
        (train_samples and eval_samples, which MLPerf requires, from the data when the recipe has none)."""
        events = dict(mllog_events)
        if train_samples is not None:
            events.setdefault(C.TRAIN_SAMPLES, train_samples)
        events.setdefault(C.EVAL_SAMPLES, eval_samples)
        for key, value in events.items():
            self.mllog.event(key, value)

    def training_ready(self) -> None:
        """Init is over (data loaded, model built, warmed up): record the effective values and the init time."""
        r = self.result
        r.init_s = self.timeline.now_s()
        self.mllog.event(C.CACHE_CLEAR, True)

    def epoch_start(self, epoch: int) -> None:
        self._open_epoch = epoch
        self._line("start", C.EPOCH_START, metadata={C.EPOCH_NUM: epoch},
                   time_ms=self.timeline.epoch_ms(self.timeline.now_s(sync=False)))

    def epoch_stop(self, epoch: int) -> None:
        self._open_epoch = None
        self._line("end", C.EPOCH_STOP, metadata={C.EPOCH_NUM: epoch},
                   time_ms=self.timeline.epoch_ms(self.timeline.now_s(sync=False)))

    # --- the train interval: nothing written on it --------------------------------------------------------------
    # The mllog lines that fall inside a train interval (epoch_start / epoch_stop, and the power reading at its
    # start) keep the instant they were called at, but are formatted and written after the interval ends
    # (``train_pause``), so that the interval holds training only; a SIGKILL loses at most those lines.
    def _line(self, kind: str, key: str, value: Any = None, *, metadata: dict[str, Any] | None = None,
              time_ms: float | None = None) -> None:
        if self._deferred is not None:
            self._deferred.append((kind, key, value, metadata, time_ms))
        else:
            getattr(self.mllog, kind)(key, value, metadata=metadata, time_ms=time_ms)

    def _write_deferred(self) -> None:
        lines, self._deferred = self._deferred, None
        for kind, key, value, metadata, time_ms in lines or ():
            getattr(self.mllog, kind)(key, value, metadata=metadata, time_ms=time_ms)

    def train_start(self) -> None:
        if self._deferred is None:
            self._deferred = []  # before the boundary: its power reading is held too
        self.timeline.begin("train")

    def train_pause(self) -> float:
        t = self.timeline.end("train")
        self._write_deferred()
        return t

    def eval_start(self, epoch: float) -> float:
        t = self.timeline.begin("eval")
        self.mllog.start(C.EVAL_START, metadata={C.EPOCH_NUM: epoch}, time_ms=self.timeline.epoch_ms(t))
        return t

    def evaluated(self, epoch: float, step: int, metrics: dict[str, float], train_loss: float | None,
                  model: torch.nn.Module) -> EpochRecord:
        """End the evaluation phase, read every rule set's clock at its end, record, checkpoint at the target."""
        r = self.result
        t0 = self.timeline._open["eval"]
        t1 = self.timeline.end("eval")
        self.mllog.end(C.EVAL_STOP, metadata={C.EPOCH_NUM: epoch}, time_ms=self.timeline.epoch_ms(t1))
        readings = read_all(self.timeline.intervals, t1)
        clock_s = {name: round(reading.seconds, 9) for name, reading in readings.items()}
        energy_j = self._energy_at(t1)
        record = EpochRecord(epoch=epoch, step=step, elapsed_s=clock_s[r.rules], clock_s=clock_s, energy_j=energy_j,
                             accuracy=metrics[r.metric], top1=metrics.get("top1"), top5=metrics.get("top5"),
                             metrics=metrics, train_loss=train_loss, eval_s=t1 - t0)
        self.mllog.event(C.EVAL_ACCURACY, record.accuracy, metadata={C.EPOCH_NUM: epoch},
                         time_ms=self.timeline.epoch_ms(t1))
        r.history.append(record)
        r.train_s = self.timeline.total("train")
        r.eval_s = self.timeline.total("eval")
        r.final_accuracy = record.accuracy
        r.best_accuracy = max(r.best_accuracy or 0.0, record.accuracy)
        reached_now = not r.reached and get_metric(r.metric).reaches(record.accuracy, r.target)
        for name, reading in readings.items():
            fig = r.clocks.setdefault(name, ClockFigure(rules=name))
            if not r.reached:
                fig.clock_s, fig.start_s = clock_s[name], reading.start_s
                fig.excluded_s = {k: round(v, 9) for k, v in reading.excluded_s.items()}
                fig.notes = list(reading.notes)
            if reached_now:
                fig.time_to_target_s = clock_s[name]
        if energy_j:
            r.energy.joules_at_end = dict(energy_j)
        if reached_now:
            r.reached = True
            self._target_at_s = t1
            if energy_j:
                r.energy.joules_to_target = dict(energy_j)
            r.time_to_target_s = record.elapsed_s
            r.epochs_to_target = record.epoch
            r.steps_to_target = record.step
            r.cost_usd = cost_usd(record.elapsed_s, r.cost_per_hour)
            self._timed_save(model, record)
        else:
            self._timed_save()
        return record

    def _energy_at(self, t_s: float) -> dict[str, float | None]:
        """Joules every rule set counts up to ``t_s`` (all ranks); {} when no counter exists."""
        if self.energy is None:
            return {}
        out: dict[str, float | None] = {}
        covers: list[str] = []
        for name in RULE_SETS:
            d = self.energy.under(RULE_SETS[name], self.timeline.intervals, t_s)
            if d is None:
                return {}
            out[name] = None if d.total_j is None else round(d.total_j, 6)
            covers = d.total_covers
            if name == self.result.rules:
                self.result.energy.per_source_j = {src.source: src.joules for src in d.sources}
        self.result.energy.covers = list(covers)
        return out

    def save_checkpoint(self, model: torch.nn.Module, record: EpochRecord) -> None:
        r = self.result
        r.checkpoint = CHECKPOINT_FILE
        if not self.write:
            return
        payload: dict[str, Any] = {
            "format": "daybreak.checkpoint/1",
            "task": r.task,
            "recipe": r.recipe,
            "model": r.model,
            "hyperparameters": r.hyperparameters,
            "accuracy": record.accuracy,
            "epoch": record.epoch,
            "step": record.step,
            "seed": r.seed,
            "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        }
        buf = io.BytesIO()
        torch.save(payload, buf)
        atomic_write_bytes(self.run_dir / CHECKPOINT_FILE, buf.getvalue())

    def non_finite_loss(self, seen: NonFiniteLoss) -> None:
        """A non-finite loss sum and the verdict on it (daybreak.train.divergence): kept in the record (the first
        NON_FINITE_KEPT); the first one that did not end the run becomes a warning, so its one line is shown."""
        r = self.result
        if len(r.non_finite_loss) < NON_FINITE_KEPT:
            r.non_finite_loss.append(seen)
        if seen.diverged:
            r.message = f"training diverged: {seen.summary}"
        elif not self._non_finite_warned:
            self._non_finite_warned = True
            r.warnings.append(f"{seen.summary}: only the loss value was not finite, the training state was, so "
                              "training went on (a loss summed in fp16 overflows past 65,504: compute it on float32 "
                              "logits, daybreak.recipes.common.cross_entropy_float32)")

    def diverged(self) -> None:
        """End of a run whose training state became non-finite (``non_finite_loss`` said what was seen)."""
        self.result.train_s = self.timeline.total("train")
        if not self.result.message:
            self.result.message = "training diverged"
        self.result.status = "diverged"
        return None

    def mark_unofficial(self, reason: str) -> None:
        self.result.official = False
        self.result.unofficial_reasons.append(reason)

    def finish_from_history(self, wall_start_ns: int) -> None:
        r = self.result
        if r.status == "diverged":
            self.finish("diverged", r.message, wall_start_ns)
        elif r.reached:
            self.finish("reached", None, wall_start_ns)
        else:
            best = f"{(r.best_accuracy or 0) * 100:.2f}%"
            self.finish("not_reached", f"the schedule ended below the target: best {best} < {r.target * 100:.2f}%",
                        wall_start_ns)

    def finish(self, status: RunStatus, message: str | None, wall_start_ns: int) -> None:
        if self._finished:
            return
        self._finished = True
        r = self.result
        r.status = status
        r.message = message
        self.timeline.close_all()
        self._write_deferred()
        self._write_division()  # a run that failed while loading: the lines held since run_start are written
        r.train_s = self.timeline.total("train")
        r.eval_s = self.timeline.total("eval")
        r.total_s = (time.perf_counter_ns() - wall_start_ns) / 1e9
        r.finished_at = datetime.now(timezone.utc)
        if self._open_epoch is not None:
            self.epoch_stop(self._open_epoch)
        if self.timeline.intervals and not r.reached:  # the clocks at the end, for a run that never got there
            end = self.timeline.intervals[-1].end_s
            for name, reading in read_all(self.timeline.intervals, end).items():
                fig = r.clocks.setdefault(name, ClockFigure(rules=name))
                fig.clock_s, fig.start_s = round(reading.seconds, 9), reading.start_s
                fig.excluded_s = {k: round(v, 9) for k, v in reading.excluded_s.items()}
                fig.notes = list(reading.notes)
        # MLPerf's clock stops when the target is reached (the end of that evaluation); otherwise now
        stop_at = self._target_at_s if status == "reached" and self._target_at_s is not None else self.timeline.now_s()
        if self.energy is not None and self.energy.available:
            self.mllog.end(C.POWER_MEASUREMENT_STOP, time_ms=self.timeline.epoch_ms(stop_at))
            r.energy.per_phase_j = self.energy.per_phase(self.timeline.intervals)
        self.mllog.end(C.RUN_STOP, metadata={C.STATUS: C.SUCCESS if status == "reached" else C.ABORTED},
                       time_ms=self.timeline.epoch_ms(stop_at))
        self.save()

    # --- terminal -------------------------------------------------------------------------------------------
    def progress(self, total_steps: int, *, enabled: bool) -> "RunProgress":
        return RunProgress(total_steps, enabled=enabled and self.write and sys.stderr.isatty(), desc=self.result.task)


class RunProgress:
    """A tqdm bar on stderr (terminal only). Also paces the loop's loss reads (every ``every`` steps)."""

    def __init__(self, total_steps: int, *, enabled: bool, desc: str, every: int = 10):
        self.every = every
        self._bar = None
        self._accuracy: float | None = None
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total_steps, desc=desc, unit="step", file=sys.stderr, leave=False,
                             dynamic_ncols=True)

    @property
    def shown(self) -> bool:
        """A bar is on the terminal (the loop then reads the loss every ``every`` steps, a host sync)."""
        return self._bar is not None

    def due(self, step: int) -> bool:
        return step % self.every == 0

    def update(self, step: int, *, epoch: float, loss: float, elapsed_s: float, accuracy: float | None = None) -> None:
        if self._bar is None:
            return
        self._bar.n = step
        fields = {"epoch": f"{epoch:.2f}", "loss": f"{loss:.3f}", "train": f"{elapsed_s:.1f}s"}
        self._accuracy = accuracy if accuracy is not None else self._accuracy
        if self._accuracy is not None:
            fields["acc"] = f"{self._accuracy * 100:.2f}%"
        self._bar.set_postfix(fields, refresh=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
