"""Defaults of `daybreak infer`, importable without torch (the CLI shows them in --help)."""

DEFAULT_WARMUP = 10  # untimed batch-1 queries before the timed ones
DEFAULT_BATCH_SIZE = 256  # offline throughput batch
DEFAULT_REPEATS = 3  # timed passes of the offline throughput measurement
