"""daybreak's throughput protocol, stand-alone: no daybreak import, so any framework's training program can use it
(under `daybreak throughput` it is importable as is; elsewhere copy this file beside the program).

    import throughput_log as tl

    asked = tl.settings()  # what daybreak asks for: model, batch_size, amp, compile, devices, warmup, steps, window
    tl.start(framework="jax", version=jax.__version__, compiler="XLA", batch_size=32, devices=1)
    tl.time_steps(step, sync, asked["warmup"], asked["steps"], asked["window"], samples_per_step=32)
    # or, when the program cannot run what was asked:
    tl.unsupported("JAX always compiles with XLA")

Every record is one ``:::MLLOG {json}`` line on stdout, flushed at once. ``time_steps`` synchronizes the device
(``sync()``) at every window boundary and reports each window's seconds by ``time.perf_counter``; the windows are
back to back (a window's line is printed inside the next window's time), so daybreak can check their sum against
the arrival times it stamps on the lines.
"""

import json
import os
import sys
import time
from typing import Any, Callable

TOKEN = ":::MLLOG"
SETTINGS_ENV = "DAYBREAK_THROUGHPUT"


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
    """framework, version, compiler, batch_size (per device), devices; optionally amp, flops_per_step (one device's,
    from the framework's own cost analysis), optimizer, device_name, input_shape, threads."""
    log("throughput_start", what)


def unsupported(reason: str) -> None:
    log("throughput_unsupported", reason)


def time_steps(step: Callable[[], object], sync: Callable[[], object], warmup: int, steps: int, window: int,
               samples_per_step: int) -> None:
    """``warmup + steps`` calls of ``step()`` in windows of at most ``window`` steps (one boundary at ``warmup``)."""
    sync()
    t0, done, total = time.perf_counter(), 0, warmup + steps
    while done < total:
        n = min(window, (warmup if done < warmup else total) - done)
        for _ in range(n):
            step()
        sync()
        t1 = time.perf_counter()
        log("throughput_window", {"first_step": done, "steps": n, "samples": n * samples_per_step,
                                  "seconds": t1 - t0})
        done, t0 = done + n, t1
