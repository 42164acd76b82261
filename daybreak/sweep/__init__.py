"""`daybreak throughput`: DLPerf-style throughput sweeps over batch size, precision, compiler and devices.

- ``launch``: start a worker module in a fresh process (python -m, or torchrun with DDP); reusable.
- ``worker``: one measurement in that process (warm-up, timed repeats, FLOP count, memory).
- ``sweep``: the grid, resumable results.jsonl, CSV/Markdown views and plots.
- ``program``: any framework's training program timed by the same protocol (`--program`, `--frameworks`), one
  fresh process per repeat; ``frameworks/``: the JAX, TensorFlow and Paddle reference programs and the
  stand-alone protocol module they print with.
- ``commands``: the `throughput` and `peak` commands.
"""
