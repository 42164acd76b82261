"""`daybreak throughput`: DLPerf-style throughput sweeps over batch size, precision, compiler and devices.

- ``launch``: start a worker module in a fresh process (python -m, or torchrun with DDP); reusable.
- ``worker``: one measurement in that process (warm-up, timed repeats, FLOP count, memory).
- ``sweep``: the grid, resumable results.jsonl, CSV/Markdown views and plots.
- ``commands``: the `throughput` and `peak` commands.
"""
