"""DAWNBench v1 view of an inference measurement: ``dawnbench_inference.json``.

As in the competition's inference submissions: version, author, authorEmail, framework, codeURL, model,
hardware, latency (milliseconds per example, batch 1, mean over the eval set), cost (USD per example =
latency x price per hour; left out, as the submissions did, when no price is known), top1Accuracy and/or
top5Accuracy (percent), timestamp (YYYY-MM-DD), misc (with daybreak's energy figures: joules per 10,000 examples
at batch 1 and in the throughput passes, the kinds they cover, or why they are unavailable).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from daybreak.fileio import atomic_write_json
from daybreak.records.dawnbench import CODE_URL
from daybreak.records.dawnbench import JSON_FILE as TRAIN_JSON_FILE
from daybreak.records.inference import InferenceResult

JSON_FILE = "dawnbench_inference.json"


def _percent(fraction: float) -> float:
    return round(fraction * 100, 4)


def submission_author(run_dir: str | Path) -> tuple[str, str]:
    """The author and e-mail the run wrote in its DAWNBench training JSON ("" when absent or unreadable)."""
    try:
        data = json.loads((Path(run_dir) / TRAIN_JSON_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return "", ""
    if not isinstance(data, dict):
        return "", ""
    author, email = data.get("author"), data.get("authorEmail")
    return (author if isinstance(author, str) else ""), (email if isinstance(email, str) else "")


def inference_json(result: InferenceResult, *, author: str = "", author_email: str = "",
                   code_url: str = CODE_URL) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version": "v1.0",
        "author": author,
        "authorEmail": author_email,
        "framework": result.framework,
        "codeURL": code_url,
        "model": result.model,
        "hardware": result.system.hardware_summary(),
        "latency": result.latency.mean_ms,
    }
    if result.cost_per_example_usd is not None:
        out["cost"] = result.cost_per_example_usd
    if result.metric == "f1":  # SQuAD: F1 as a fraction, as the competition's SQuAD files have it
        out["f1Score"] = result.accuracy
    elif result.metric == "top5":
        out["top5Accuracy"] = _percent(result.top5 if result.top5 is not None else result.accuracy)
        if result.top1 is not None:
            out["top1Accuracy"] = _percent(result.top1)
    else:
        if result.top1 is not None:  # (a task scored by its own metric may measure no top-1)
            out["top1Accuracy"] = _percent(result.top1)
        if result.top5 is not None:
            out["top5Accuracy"] = _percent(result.top5)
    out["timestamp"] = result.created_at.strftime("%Y-%m-%d")
    s = result.settings
    out["misc"] = {
        "daybreakTask": result.task,
        "recipe": result.recipe,
        "runId": result.run_id,
        "valid": result.valid,
        "targetPercent": _percent(result.target),
        "examples": result.n_examples,
        "latencyBatchSize": 1,
        "latencyP50Ms": result.latency.p50_ms,
        "latencyP90Ms": result.latency.p90_ms,
        "latencyP99Ms": result.latency.p99_ms,
        "latencyMaxMs": result.latency.max_ms,
        "latencyTimed": result.clock_included,
        "latencyExcluded": result.clock_excluded,
        "throughputExamplesPerSecond": result.throughput.examples_per_s if result.throughput else None,
        "throughputBatchSize": result.throughput.batch_size if result.throughput else None,
        "costPerHour": result.cost_per_hour,
        "costPer10kExamples": result.cost_per_10k_usd,
        "instance": result.instance,
        "device": s.device,
        "amp": s.amp,
        "compile": s.compile,
        "threads": s.threads,
        "CUDA version": result.system.cuda,
        "CuDNN version": result.system.cudnn,
    }
    e = result.energy
    if e is not None:
        out["misc"]["energyJoulesPer10kExamples"] = e.latency.joules_per_10k if e.latency else None
        out["misc"]["energyThroughputJoulesPer10kExamples"] = (e.throughput.joules_per_10k if e.throughput
                                                               else None)
        out["misc"]["energyCovers"] = list(e.covers)
        out["misc"]["energyIdlePowerW"] = e.idle_power_w
        out["misc"]["energyUnavailable"] = None if e.available else dict(e.unavailable)
    if result.loadgen is not None:
        ss, off = result.loadgen.single_stream, result.loadgen.offline
        out["misc"]["loadgenSingleStreamP90Ms"] = ss.p90_ms if ss else None
        out["misc"]["loadgenOfflineSamplesPerSecond"] = off.samples_per_s if off else None
    return out


def write_dawnbench_inference(result: InferenceResult, run_dir: str | Path, **submission_fields: str) -> Path:
    return atomic_write_json(Path(run_dir) / JSON_FILE, inference_json(result, **submission_fields))
