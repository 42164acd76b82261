"""Typed result records and their file views (DAWNBench JSON/TSV, mllog, ...).

One family: each record has a ``kind`` (``daybreak.<name>``) and is read back by the one loader,
``daybreak.records.base.load_record``. On the ``Record`` base (file, ``save``, ``load``): run (result.json), repeat
(summary.json), lesion (lesion.json), generalization (generalization.json, a list of them), compare, threshold
(threshold.json), scaling (scaling.json), external (external.json); inference.json loads through ``load_record``
too, the throughput rows are lines of results.jsonl. The code that computes a record (daybreak.analysis,
daybreak.external, ...) imports it from here; the records only describe what is on disk.
"""

from daybreak.records.run import ClockRules, EpochRecord, RunResult, RunStatus  # noqa: F401
