"""Inference benchmark (`daybreak infer`): DAWNBench batch-1 latency, offline throughput and cost of a checkpoint.

The package itself imports nothing heavy (the CLI registers its command without loading torch); see
``daybreak.infer.latency`` for the measurement functions and ``daybreak.infer.loadgen`` for the optional
MLCommons LoadGen backend.
"""
