"""A tiny training program for the throughput protocol's tests: `python fake_throughput_program.py BEHAVIOUR`.

It "trains" by sleeping STEP_S per step and reports through throughput_log (importable because daybreak puts it on
PYTHONPATH). BEHAVIOUR: ok; liar (claims ten times the seconds each window took); silent (prints no window);
crash (exits 3 after the warm-up); unsupported; wrong-batch (runs another batch size than asked)."""

import sys
import time

import throughput_log as tl

STEP_S = 0.002


def main(behaviour: str) -> int:
    asked = tl.settings()
    batch = asked["batch_size"] * (2 if behaviour == "wrong-batch" else 1)
    if behaviour == "unsupported":
        tl.unsupported("fake: this configuration is not supported")
        return 0
    tl.start(framework="fake", version="1.0", compiler="none", batch_size=batch, devices=asked["devices"],
             flops_per_step=1000 * batch, input_shape=[4])
    if behaviour == "silent":
        print("training ... (no windows)")
        return 0
    if behaviour == "liar":
        real = tl.log

        def lying(key, value, **metadata):
            if key == "throughput_window":
                value = dict(value, seconds=value["seconds"] * 10 + 2.0)
            real(key, value, **metadata)

        tl.log = lying
    if behaviour == "crash":
        tl.time_steps(lambda: time.sleep(STEP_S), lambda: None, asked["warmup"], 0, asked["window"], batch)
        print("RuntimeError: the fake program fell over", file=sys.stderr)
        return 3
    tl.time_steps(lambda: time.sleep(STEP_S), lambda: None, asked["warmup"], asked["steps"], asked["window"],
                  batch * asked["devices"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
