"""A tiny training program for the throughput protocol's tests: `python fake_throughput_program.py BEHAVIOUR`.

Its "device" is a thread that works through the queued steps, STEP_S seconds each, and computes each step's loss;
``step()`` queues a step and returns at once (as a GPU framework's does), ``sync()`` waits for the queue and
returns the last step's loss. It reports through throughput_log (importable because daybreak puts it on
PYTHONPATH). BEHAVIOUR:

- ok: honest;
- never-syncs: sync() neither waits nor reads a loss (the work runs on behind the clock);
- stale-loss: sync() returns the same loss every time without waiting;
- halves: reports half of each window's seconds; liar: claims ten times each window's seconds;
- other-device: runs on a GPU whatever was asked; other-device-kind: reports the device it was asked for as
  "gpu" or "cpu" the other way round (runs on the CPU when asked for cuda);
- other-threads: runs twice the threads asked;
- silent (no window), crash (exits 3 after the warm-up), failed (throughput_log.failed), unsupported,
  wrong-batch (runs another batch size than asked).
"""

import os
import queue
import sys
import threading
import time

import throughput_log as tl

STEP_S = float(os.environ.get("DAYBREAK_FAKE_STEP_S") or 0.005)


class FakeDevice:
    def __init__(self) -> None:
        self.queue: "queue.Queue[int]" = queue.Queue()
        self.done = 0
        self.loss = None
        threading.Thread(target=self._work, daemon=True).start()

    def _work(self) -> None:
        while True:
            self.queue.get()
            time.sleep(STEP_S)
            self.done += 1
            self.loss = 7.0 / (1.0 + 0.01 * self.done)  # each step's loss is its own
            self.queue.task_done()

    def step(self) -> None:
        self.queue.put(1)

    def sync(self) -> float | None:
        self.queue.join()
        return self.loss


def main(behaviour: str) -> int:
    asked = tl.settings()
    batch = asked["batch_size"] * (2 if behaviour == "wrong-batch" else 1)
    if behaviour == "unsupported":
        tl.unsupported("fake: this configuration is not supported")
        return 0
    if behaviour == "failed":
        tl.failed(f"fake: asked for {asked['device']}, which this machine does not have")
        return 0
    device = {"other-device": "cuda", "other-device-kind": "cpu" if asked["device"] == "cuda" else "gpu"}.get(
        behaviour, asked["device"])
    threads = asked["threads"] * (2 if behaviour == "other-threads" else 1)
    tl.start(framework="fake", version="1.0", compiler="none", batch_size=batch, devices=asked["devices"],
             device=device, device_name="fake device", threads=threads, inter_op_threads=threads,
             math_precision="fp32", flops_per_step=1000 * batch, input_shape=[4],
             **({"channels_last": True} if asked.get("channels_last") else {}))
    if behaviour == "silent":
        print("training ... (no windows)")
        return 0
    fake = FakeDevice()
    sync = fake.sync
    if behaviour == "never-syncs":
        sync = lambda: None  # noqa: E731
    elif behaviour == "stale-loss":
        sync = lambda: 6.5  # noqa: E731
    if behaviour in ("liar", "halves"):
        real = tl.log

        def lying(key, value, **metadata):
            if key == "throughput_window":
                value = dict(value, seconds=value["seconds"] * 10 if behaviour == "liar" else value["seconds"] / 2)
            real(key, value, **metadata)

        tl.log = lying
    window = asked.get("min_window_s", tl.MIN_WINDOW_S)
    if behaviour == "crash":
        tl.time_steps(fake.step, sync, asked["warmup"], 0, batch, window)
        print("RuntimeError: the fake program fell over", file=sys.stderr)
        return 3
    tl.time_steps(fake.step, sync, asked["warmup"], asked["steps"], batch * asked["devices"], window)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
