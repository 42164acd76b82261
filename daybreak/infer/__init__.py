"""Inference benchmark (`daybreak infer`): DAWNBench batch-1 latency, offline throughput and cost of a checkpoint.

The package itself imports nothing heavy (the CLI registers its command without loading torch); see
``daybreak.infer.latency`` for the measurement functions and ``daybreak.infer.loadgen`` for the optional
MLCommons LoadGen backend.
"""

import sys as _sys
import types as _types
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from daybreak.records.inference import InferenceResult


class _CallableModule(_types.ModuleType):
    """``daybreak.infer`` is both this package and the Python API's function: importing the package replaces the
    function on ``daybreak``, so the package itself can be called the same way (see ``daybreak.infer_run``)."""

    def __call__(self, run_dir: str | Path, /, **options: Any) -> "InferenceResult":
        from daybreak import infer_run

        return infer_run(run_dir, **options)


_sys.modules[__name__].__class__ = _CallableModule
