"""DAWNBench v1 view of a run: the training submission JSON and its per-epoch TSV.

Format as in the competition's submissions: JSON with version, author, authorEmail, framework, codeURL,
model, hardware, costPerHour, timestamp (YYYY-MM-DD), misc; a tab-separated TSV with the header
``epoch  hours  top1Accuracy[  top5Accuracy]`` and accuracies in percent.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from daybreak.fileio import atomic_write_json, atomic_write_text
from daybreak.records.run import EpochRecord, RunResult

JSON_FILE = "dawnbench.json"
TSV_FILE = "dawnbench.tsv"
CODE_URL = "https://pypi.org/project/daybreak/"


def dawnbench_hours(result: RunResult, h: EpochRecord) -> float:
    """The DAWNBench v1 clock at an evaluation, in hours: this view follows DAWNBench's rules whatever the
    run's headline rule set (records older than the rule sets hold only ``elapsed_s``)."""
    return h.clock_s.get("dawnbench", h.elapsed_s) / 3600.0


def _epoch_cell(epoch: float) -> str:
    return str(int(epoch)) if float(epoch).is_integer() else f"{epoch:.4f}"


def tsv_text(result: RunResult) -> str:
    """Classification: top1Accuracy [top5Accuracy] in percent. F1 tasks (SQuAD): f1Score as a fraction, as the
    competition's SQuAD files have it. A log of an MLPerf benchmark: a column per metric of its target, named as
    the metric is (eval_loss; fid and clip), with the values as logged."""
    out = io.StringIO()
    if result.mlperf is not None and result.metric not in ("top1", "top5"):  # an MLPerf metric no DAWNBench column holds
        names = list(dict.fromkeys(name for h in result.history for name in h.metrics)) or [result.metric]
        out.write("\t".join(["epoch", "hours", *names]) + "\n")
        for h in result.history:
            cells = ["" if h.metrics.get(n) is None else f"{h.metrics[n]:.6g}" for n in names]
            out.write("\t".join([_epoch_cell(h.epoch), f"{dawnbench_hours(result, h):.8f}", *cells]) + "\n")
        return out.getvalue()
    if result.metric == "f1":
        out.write("epoch\thours\tf1Score\n")
        for h in result.history:
            out.write(f"{_epoch_cell(h.epoch)}\t{dawnbench_hours(result, h):.8f}\t{h.accuracy:.6f}\n")
        return out.getvalue()
    # only the columns measured: a top-5-only history (e.g. a log with one metric) never copies it into top-1
    has_top5 = any(h.top5 is not None for h in result.history)
    has_top1 = any(h.top1 is not None for h in result.history) or result.metric == "top1" or not has_top5
    columns = (["top1Accuracy"] if has_top1 else []) + (["top5Accuracy"] if has_top5 else [])
    out.write("\t".join(["epoch", "hours", *columns]) + "\n")
    for h in result.history:
        row = [_epoch_cell(h.epoch), f"{dawnbench_hours(result, h):.8f}"]
        if has_top1:
            top1 = h.top1 if h.top1 is not None else (h.accuracy if result.metric == "top1" else None)
            row.append("" if top1 is None else f"{top1 * 100:.2f}")
        if has_top5:
            row.append("" if h.top5 is None else f"{h.top5 * 100:.2f}")
        out.write("\t".join(row) + "\n")
    return out.getvalue()


def submission_json(result: RunResult, *, author: str = "", author_email: str = "",
                    code_url: str = CODE_URL) -> dict[str, Any]:
    return {
        "version": "v1.0",
        "author": author,
        "authorEmail": author_email,
        "framework": result.framework,
        "codeURL": code_url,
        "model": result.model,
        "hardware": result.system.hardware_summary(),
        "costPerHour": result.cost_per_hour,
        "timestamp": result.started_at.strftime("%Y-%m-%d"),
        "misc": {
            "daybreakTask": result.task,
            "recipe": result.recipe,
            "seed": result.seed,
            **({"targetPercent": round(result.target * 100, 4)} if result.mlperf is None else
               {"metric": result.metric, "target": result.target, "mlperfBenchmark": result.mlperf.benchmark,
                "mlperfRound": result.mlperf.round, "mlperfReached": result.mlperf.reached}),
            "official": result.official,
            "status": result.status,
            "device": result.device,
            "amp": result.amp,
            "worldSize": result.world_size,
            "batchSize": result.global_batch_size,
            "hyperparameters": result.hyperparameters,
            "instance": result.instance,
            "commandLine": " ".join(result.command),
            "clockRules": "dawnbench",  # the hours in the TSV: data loading + init + training; no eval, no writes
            "timeToTargetSeconds": {name: fig.time_to_target_s for name, fig in result.clocks.items()},
            "headlineRules": result.rules,
            "energyJoulesToTarget": dict(result.energy.joules_to_target) if result.energy.available else None,
            "energyCovers": list(result.energy.covers),
            "energyUnavailable": None if result.energy.available else dict(result.energy.unavailable),
        },
    }


def write_dawnbench(result: RunResult, run_dir: str | Path, *, durable: bool = True, **submission_fields: str) -> None:
    run_dir = Path(run_dir)
    atomic_write_json(run_dir / JSON_FILE, submission_json(result, **submission_fields), durable=durable)
    atomic_write_text(run_dir / TSV_FILE, tsv_text(result), durable=durable)
