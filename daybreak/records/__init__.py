"""Typed result records and their file views (DAWNBench JSON/TSV, mllog, ...)."""

from daybreak.records.run import ClockRules, EpochRecord, RunResult, RunStatus  # noqa: F401
