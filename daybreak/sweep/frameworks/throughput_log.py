"""daybreak's throughput protocol, stand-alone: no daybreak import, so any framework's training program can speak
it (under `daybreak throughput` this file is importable as is; elsewhere copy it beside the program). This
docstring is the protocol's one description; daybreak.sweep.program checks every rule below.

    import throughput_log as tl

    asked = tl.settings()        # what daybreak asks for (see SETTINGS)
    ...                          # apply it: the device, the threads, the precision, the compiler
    tl.start(framework="jax", version=jax.__version__, compiler="XLA", batch_size=asked["batch_size"], devices=1,
             device="cpu", device_name="cpu", threads=1, inter_op_threads=1, math_precision="fp32")
    tl.time_steps(step, sync, asked["warmup"], asked["steps"], samples_per_step=asked["batch_size"],
                  min_window_s=asked["min_window_s"])
    # or, before start(), when it cannot run what was asked:
    tl.unsupported("JAX always compiles with XLA")        # a configuration the program does not have
    tl.failed("asked for cuda: this jaxlib has no CUDA")  # a configuration it should run but cannot here

SETTINGS (the JSON in the environment variable DAYBREAK_THROUGHPUT): model, batch_size (per device), amp (off,
bf16, fp16), compile (true: the framework's compiler over the whole training step; false: eager), devices,
device (cpu, cuda, mps), threads (intra-op and inter-op threads of the process, to be set by the framework's own
API), warmup, steps, min_window_s, image_size, seq_len, channels_last.

THE PROGRAM
1. Applies the settings, then calls ``start`` once, with what it really runs, read back from the framework where it
   can be (not copied from the settings): framework, version, compiler ("none" for eager), batch_size, devices,
   device (the kind it runs on: cpu, cuda, ...), device_name, threads (intra-op), inter_op_threads, math_precision
   (what the matmuls and convolutions run in: fp32, tf32, bf16 or fp16; fp32 with TF32 allowed is tf32), and
   optionally flops_per_step (one device's, by the framework's own count: a diagnostic beside daybreak's model
   FLOPs), optimizer, input_shape, layout (NCHW / NHWC), channels_last (echoed when asked and applied), notes.
2. Times its steps with ``time_steps(step, sync, ...)``: ``step()`` runs one training step (forward, loss,
   backward, optimizer); ``sync()`` waits until the device has finished every step so far and returns the LAST
   step's loss as a Python float. Reading the loss to the host is the proof that the work was done: a window
   without a finite loss, or losses that never change, are rejected.

THE RECORDS: each is one ``:::MLLOG {json}`` line on stdout, flushed at once: ``throughput_start``, then one
``throughput_window`` per window of steps ({"first_step", "steps", "samples", "seconds", "loss"}: the seconds by
``time.perf_counter`` between two synchronizations, the loss read at the end), or ``throughput_unsupported`` /
``throughput_failed`` with the reason.

THE WINDOWS are back to back (a window's line is printed inside the next window's time) and each lasts at least
``min_window_s`` (1 s by default: the rest of the phase in equal windows, sized from the previous window's time per
step; the first window is one step) or all the steps left in its phase, with a boundary at the end of the warm-up.
daybreak stamps each line's arrival on its own clock and checks every window's seconds, and the sum of the timed
ones, against the time between arrivals; it skips the warm-up's windows and takes the next ``steps`` steps as the
repeat's time.

DAYBREAK'S CHECKS (a failure is the row's one-line reason): the start record's batch size, devices, precision,
device kind and threads are the ones asked; the windows cover the warm-up and then exactly ``steps`` steps with
every sample; each carries a finite loss and the losses change; the clock agrees with the arrival stamps; on a
CPU, the process used no more cores than its threads during the timed windows (its CPU time over the wall time).
"""

import json
import math
import os
import sys
import time
from typing import Any, Callable

TOKEN = ":::MLLOG"
SETTINGS_ENV = "DAYBREAK_THROUGHPUT"
MIN_WINDOW_S = 1.0  # a window lasts at least this long, unless fewer steps are left in its phase


def settings() -> dict[str, Any]:
    """What daybreak asks this run for (an empty dict when not run by daybreak)."""
    asked: dict[str, Any] = json.loads(os.environ.get(SETTINGS_ENV) or "{}")
    return asked


def log(key: str, value: Any, **metadata: Any) -> None:
    record = {"namespace": "daybreak.throughput", "time_ms": time.time() * 1000.0, "event_type": "POINT_IN_TIME",
              "key": key, "value": value, "metadata": metadata}
    sys.stdout.write(f"{TOKEN} {json.dumps(record)}\n")
    sys.stdout.flush()


def start(**what: Any) -> None:
    """What the program runs (see THE PROGRAM, 1)."""
    log("throughput_start", what)


def unsupported(reason: str) -> None:
    """A configuration this program does not have (JAX without XLA, AMP fp16, ...): recorded, not a failure."""
    log("throughput_unsupported", reason)


def failed(reason: str) -> None:
    """A configuration the program should run but cannot here (the device asked is missing, ...): a failure."""
    log("throughput_failed", reason)


def _loss(value: object) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        loss = float(value)  # type: ignore[arg-type]  # a framework's scalar: reading it waits for the device
    except (TypeError, ValueError):
        return None
    return loss if math.isfinite(loss) else None


def time_steps(step: Callable[[], object], sync: Callable[[], object], warmup: int, steps: int,
               samples_per_step: int, min_window_s: float = MIN_WINDOW_S) -> None:
    """``warmup + steps`` calls of ``step()`` in back-to-back windows of at least ``min_window_s`` seconds (or the
    rest of the phase), one boundary at ``warmup``; ``sync()`` ends each window (see THE PROGRAM, 2)."""
    sync()
    t0, done, total, per_step = time.perf_counter(), 0, warmup + steps, None
    while done < total:
        left = (warmup if done < warmup else total) - done
        # the rest of the phase in equal windows of at least min_window_s at the last window's pace
        windows = 1 if per_step is None else max(1, math.floor(left * per_step / min_window_s))
        n = 1 if per_step is None else max(1, min(left, math.ceil(left / windows)))
        for _ in range(n):
            step()
        loss = _loss(sync())
        t1 = time.perf_counter()
        seconds = t1 - t0
        log("throughput_window", {"first_step": done, "steps": n, "samples": n * samples_per_step,
                                  "seconds": seconds, "loss": loss})
        done, t0, per_step = done + n, t1, seconds / n
