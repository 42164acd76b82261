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

from daybreak.fileio import atomic_write_bytes
from daybreak.pricing import cost_usd
from daybreak.records.dawnbench import write_dawnbench
from daybreak.records.mllog import MLLOG_FILE, C, RunMllog
from daybreak.records.run import EpochRecord, RunResult, RunStatus

CHECKPOINT_FILE = "checkpoint.pt"


class _NoMllog:
    """Stands in for the mllog on ranks other than 0."""

    def start(self, *args: Any, **kwargs: Any) -> None: ...
    def end(self, *args: Any, **kwargs: Any) -> None: ...
    def event(self, *args: Any, **kwargs: Any) -> None: ...
    def close(self) -> None: ...


class RunRecorder:
    """Keeps the RunResult up to date on every rank; only the one with ``write=True`` (rank 0) writes files."""

    def __init__(self, run_dir: Path, result: RunResult, *, author: str = "", author_email: str = "",
                 write: bool = True, benchmark: str | None = None):
        self.run_dir = Path(run_dir)
        self.write = write
        self.result = result
        self._submission = dict(author=author, author_email=author_email)
        self._open_epoch: int | None = None
        self._finished = False
        self._benchmark = benchmark or result.task
        if write:
            self._create_run_dir()
        self.mllog: RunMllog | _NoMllog = RunMllog(self.run_dir / MLLOG_FILE) if write else _NoMllog()
        self._write_header()

    def _create_run_dir(self) -> None:
        """The directory appears with every file already in it (built beside it, then renamed into place),
        so a kill at any moment never leaves a run directory with a file missing."""
        parent = self.run_dir.parent
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{self.run_dir.name}.", dir=parent))
        try:
            self.result.save(staging)
            write_dawnbench(self.result, staging, **self._submission)
            (staging / MLLOG_FILE).touch()
            os.replace(staging, self.run_dir)  # replaces an empty directory of that name, if any
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    # --- files ----------------------------------------------------------------------------------------------
    def save(self) -> None:
        if not self.write:
            return
        self.result.save(self.run_dir)
        write_dawnbench(self.result, self.run_dir, **self._submission)

    def close(self) -> None:
        self.mllog.close()

    def _write_header(self) -> None:
        r = self.result
        log = self.mllog
        log.event(C.SUBMISSION_BENCHMARK, self._benchmark)
        log.event(C.SUBMISSION_ORG, self._submission["author"] or "daybreak")
        log.event(C.SUBMISSION_DIVISION, C.CLOSED if r.official else C.OPEN)
        log.event(C.SUBMISSION_STATUS, C.ONPREM)
        log.event(C.SUBMISSION_PLATFORM, r.system.hardware_summary())
        log.event(C.SEED, r.seed)
        log.event(C.GLOBAL_BATCH_SIZE, r.global_batch_size)
        log.event("target_accuracy", r.target)
        for key, value in r.hyperparameters.items():
            log.event(f"hp_{key}", value)

    # --- phases ---------------------------------------------------------------------------------------------
    def init_start(self) -> None:
        self.mllog.start(C.INIT_START)

    def init_stop(self, init_ns: int) -> None:
        self.result.init_s = init_ns / 1e9
        self.mllog.end(C.INIT_STOP)
        self.save()

    def run_start(self) -> None:
        self.mllog.start(C.RUN_START)

    def epoch_start(self, epoch: int) -> None:
        self._open_epoch = epoch
        self.mllog.start(C.EPOCH_START, metadata={C.EPOCH_NUM: epoch})

    def epoch_stop(self, epoch: int) -> None:
        self._open_epoch = None
        self.mllog.end(C.EPOCH_STOP, metadata={C.EPOCH_NUM: epoch})

    def eval_start(self, epoch: float) -> None:
        self.mllog.start(C.EVAL_START, metadata={C.EPOCH_NUM: epoch})

    def evaluated(self, record: EpochRecord, model: torch.nn.Module) -> None:
        r = self.result
        self.mllog.end(C.EVAL_STOP, metadata={C.EPOCH_NUM: record.epoch})
        self.mllog.event(C.EVAL_ACCURACY, record.accuracy, metadata={C.EPOCH_NUM: record.epoch})
        r.history.append(record)
        r.train_s = record.elapsed_s
        r.eval_s += record.eval_s
        r.final_accuracy = record.accuracy
        r.best_accuracy = max(r.best_accuracy or 0.0, record.accuracy)
        if not r.reached and record.accuracy >= r.target:
            r.reached = True
            r.time_to_target_s = record.elapsed_s
            r.epochs_to_target = record.epoch
            r.steps_to_target = record.step
            r.cost_usd = cost_usd(record.elapsed_s, r.cost_per_hour)
            self.save_checkpoint(model, record)
        self.save()

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

    def diverged(self, step: int, elapsed_s: float) -> None:
        self.result.train_s = elapsed_s
        self.result.message = f"training diverged: the loss became NaN/inf by step {step}"
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
        r.total_s = (time.perf_counter_ns() - wall_start_ns) / 1e9
        r.finished_at = datetime.now(timezone.utc)
        if self._open_epoch is not None:
            self.epoch_stop(self._open_epoch)
        self.mllog.end(C.RUN_STOP, metadata={C.STATUS: C.SUCCESS if status == "reached" else C.ABORTED})
        self.save()

    # --- terminal -------------------------------------------------------------------------------------------
    def progress(self, total_steps: int, *, enabled: bool) -> "Progress":
        return Progress(total_steps, enabled=enabled and self.write and sys.stderr.isatty(), desc=self.result.task)


class Progress:
    """A tqdm bar on stderr (terminal only). Also paces the loop's loss reads (every ``every`` steps)."""

    def __init__(self, total_steps: int, *, enabled: bool, desc: str, every: int = 10):
        self.every = every
        self._bar = None
        self._accuracy: float | None = None
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total_steps, desc=desc, unit="step", file=sys.stderr, leave=False,
                             dynamic_ncols=True)

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
