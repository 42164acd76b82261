"""Inference benchmark (`daybreak infer`): DAWNBench batch-1 latency, offline throughput and cost of a checkpoint.

See ``daybreak.infer.latency`` for the measurement functions and ``daybreak.infer.loadgen`` for the optional
MLCommons LoadGen backend.
"""

from daybreak.infer.latency import (  # noqa: F401
    EXIT_INVALID,
    InferConfig,
    LatencyRun,
    LoadedRun,
    accuracy_of,
    infer,
    latency_stats,
    load_for_inference,
    make_classifier,
    measure_latency,
    measure_throughput,
)
