"""daybreak: an end-to-end deep-learning benchmark (time-to-accuracy, cost-to-accuracy, inference latency)."""

__version__ = "0.1.0"
