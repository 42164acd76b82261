"""Strict submission schemas, fuzzed against the running leaderboard.

Every upload format (a daybreak result.json, an inference.json, a `daybreak repeat` summary with its runs, a
DAWNBench v1 training JSON + TSV and inference JSON) starts from a valid upload; each case replaces ONE field (or
TSV cell) by a value that is wrong for it: a boolean or a string where a number belongs, a negative or zero count,
an accuracy outside [0, 1], a date in the far future or before 2017, an empty required section, control
characters or a bidi override in text, a wrong type, a number beyond the bounds. The field kinds below are written
by hand from the record models' meaning (not read from the models), so the test is an oracle of its own.

Asserted against the running app (a real uvicorn, once on SQLite and once on PostgreSQL): no response is a 5xx,
every bad upload is a 422 whose one-line message names the mutated field, no row is stored from bad input, and
every good upload (the originals and legitimately varied ones) is stored. The cases are a seeded sample
(random.Random(SEED)) of the full enumeration, with every class represented; ``python tests/test_leaderboard_fuzz.py``
runs the whole enumeration against a fresh SQLite server and prints what was stored, by class.
"""

from __future__ import annotations

import copy
import json
import random
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from test_leaderboard_trust import (  # noqa: E402
    AUTH, dawnbench_doc, dawnbench_tsv, make_store, serving, synth_run,
)

httpx = pytest.importorskip("httpx")

SEED = 20261125
SAMPLE = 500  # bad cases per server (one of every format x class, the rest drawn at random)

# --- good uploads -------------------------------------------------------------------------------------------

GPU_SYSTEM = {
    "os": "Linux 6.8.0-48-generic", "platform": "Linux-6.8.0-48-generic-x86_64-with-glibc2.39", "python": "3.11.7",
    "torch": "2.13.0+cu126", "daybreak": "0.1.0", "numpy": "2.4.6", "cpu_model": "AMD EPYC 7B13 64-Core Processor",
    "cpu_cores_physical": 16, "cpu_threads_logical": 32, "torch_threads": 16, "ram_gb": 125.7, "gpu_count": 1,
    "gpus": [{"name": "NVIDIA H100 80GB HBM3", "memory_gb": 79.19, "capability": "9.0"}], "cuda": "12.6",
    "cudnn": "91002", "accelerator": "cuda", "source": "measured", "hardware": None, "framework": None,
    "declared_fields": {},
}


_BUILT: dict[str, str] = {}


def _cached(build):
    """``build``'s documents made once per set of arguments (JSON text), a fresh copy for each caller."""
    def cached(*args, **kwargs):
        key = json.dumps([build.__name__, args, kwargs], default=str, sort_keys=True)
        if key not in _BUILT:
            _BUILT[key] = json.dumps(build(*args, **kwargs))
        return json.loads(_BUILT[key])

    cached.__name__ = build.__name__
    cached.__doc__ = build.__doc__
    return cached


@_cached
def good_run(seed: int = 0, *, started: datetime | None = None, system: dict | None = None, device: str = "cuda:0",
             instance: str | None = "aws-p3.2xlarge", price_date: str | None = "2025-01-15", cost: float | None = 3.06,
             author: str = "A. Person", epoch_s: float = 1.0, watts: float = 300.0) -> dict:
    """A result.json with every field a real run fills: consistent (synth_run's phases, clocks and history), with
    batch sizes, accuracies, times, price, context, performance settings and energy counted at ``watts``."""
    started = started or datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc) + timedelta(minutes=seed)
    r = synth_run(seed=seed, epoch_s=epoch_s, cost=cost, run_id=f"fuzz-{seed}-{epoch_s:g}", started=started)
    doc = json.loads(r.model_dump_json())
    history = doc["history"]
    for h in history:
        h["energy_j"] = {"dawnbench": round(h["clock_s"]["dawnbench"] * watts, 6)}
        h["metrics"] = {"top1": h["accuracy"]}
        h["train_loss"] = round(1.0 - h["accuracy"], 6)
    joules = history[-1]["energy_j"]["dawnbench"]
    doc.update(
        device=device, threads=16, nodes=1, backend=None, per_device_batch_size=64, global_batch_size=64,
        steps_per_epoch=21, train_examples=1347, effective_batch_size=64, message=None,
        final_accuracy=history[-1]["accuracy"], best_accuracy=max(h["accuracy"] for h in history),
        train_s=round(len(history) * epoch_s, 6), eval_s=round(0.05 * len(history), 6),
        instance=instance, price_date=price_date,
        cost_usd=None if cost is None else doc["time_to_target_s"] / 3600 * cost, recompiles_under_clock=0,
        warnings=["the machine was busy: 12% of its CPU time went to other processes"],
        setup_notes=["batch 64: the recipe's own"], data_source="scikit-learn's bundled digits",
        data_notes=["a fixed seeded 25% split (450 images)"],
        command=["daybreak", "run", "digits", "--seed", str(seed)], author=author, author_email="a@example.com",
        system=copy.deepcopy(system or GPU_SYSTEM), hyperparameters={**doc["hyperparameters"], "note": "baseline"},
    )
    doc["energy"].update(
        available=True, covers=["gpu"], unavailable={"cpu_package": "powercap: not readable"},
        joules_to_target={"dawnbench": joules}, joules_at_end={"dawnbench": joules},
        per_phase_j={"train": round(joules * 0.9, 6), "eval": round(joules * 0.1, 6)},
        per_source_j={"gpu0": joules}, idle_power_w=60.0, idle_seconds=2.0,
        counters=[{"name": "gpu0", "kind": "gpu", "how": "nvml total energy"}],
        notes=["energy from NVML's total energy counter"])
    doc["context"].update(
        load_avg_before=[0.5, 0.4, 0.3], load_avg_after=[1.2, 0.6, 0.4], other_cpu_s=0.4, own_cpu_s=5.1,
        busy_fraction=0.012, threads_used=16, interop_threads=16,
        git_commit="0a3c27a2750b61dcf6f990dbe2f2b90ec7027959", git_dirty=False,
        git_remote="https://github.com/example/daybreak.git", packages={"torch": "2.13.0+cu126", "numpy": "2.4.6"},
        recipe_file="daybreak/recipes/digits.py", recipe_sha256="e3dc7c48c545b539931c9c312732102f2636133eb5d5361f03b7"
                                                                "1683cd824098",
        warnings=["load average 1.2 after the run"])
    doc["performance"].update(amp_reason="off: digits is fp32", compute_capability="sm_90", tf32=True,
                              tf32_applies=True, cudnn_benchmark=True, warmup="3 synthetic steps",
                              host_sync="at each evaluation only", notes=["TF32 on"])
    for name, fig in doc["clocks"].items():
        fig["excluded_s"] = {"record": 0.03} if name == "dawnbench" else {}
        fig["notes"] = [f"{name} clock"]
    return doc


@_cached
def good_inference(seed: int = 0, *, created: datetime | None = None, system: dict | None = None,
                   instance: str | None = "aws-p3.2xlarge", price_date: str | None = "2025-01-15") -> dict:
    """An inference.json as `daybreak infer` writes it (batch-1 latency over the 450 digits, throughput, price)."""
    n, mean_ms = 450, 1.0 + (seed % 100) / 1000
    created = created or datetime(2026, 1, 3, tzinfo=timezone.utc) + timedelta(minutes=seed)
    return {
        "schema_version": 1, "kind": "daybreak.inference", "run_id": f"fuzz-{seed}", "task": "digits",
        "recipe": "digits", "model": "digits_cnn", "framework": "PyTorch 2.13.0", "metric": "top1",
        "checkpoint": "checkpoint.pt", "checkpoint_epoch": 3.0, "checkpoint_accuracy": 0.99, "n_examples": n,
        "latency": {"n": n, "total_s": round(n * mean_ms / 1000, 9), "mean_ms": mean_ms, "min_ms": 0.5,
                    "p50_ms": mean_ms, "p90_ms": 1.4, "p99_ms": 1.9, "max_ms": 2.5, "std_ms": 0.2,
                    "percentile_method": "nearest-rank"},
        "throughput": {"examples_per_s": 90000.0, "batch_size": 450, "repeats": 5, "warmup_passes": 2,
                       "pass_s": [0.005, 0.005, 0.0049, 0.0051, 0.005], "timed": "full passes"},
        "accuracy": 0.99, "top1": 0.99, "top5": None, "metrics": {"top1": 0.99}, "target": 0.98, "valid": True,
        "reason": None, "cost_per_hour": 3.06, "instance": instance, "price_date": price_date,
        "cost_per_example_usd": mean_ms / 3.6e6 * 3.06, "cost_per_10k_usd": mean_ms / 3.6e6 * 3.06 * 10_000,
        "settings": {"device": "cuda:0", "amp": "off", "compile": False, "threads": 16, "warmup": 10,
                     "latency_batch_size": 1, "throughput_batch_size": 450, "throughput_repeats": 5,
                     "backend": "daybreak", "pinned_memory": True, "prepared_on": "cuda:0",
                     "test_time_predict": False},
        "clock_included": "per query", "clock_excluded": "reading the dataset", "timer": "time.perf_counter_ns",
        "system": copy.deepcopy(system or GPU_SYSTEM), "data_source": "scikit-learn's bundled digits",
        "data_official": True, "created_at": created.isoformat().replace("+00:00", "Z"), "duration_s": 4.2,
        "command": ["daybreak", "infer", f"runs/fuzz-{seed}"], "loadgen": None, "energy": None,
    }


def good_dawnbench(seed: int = 0, *, date: str = "2019-01-01", hardware: str = "8 x V100 (AWS p3.16xlarge)",
                   model: str | None = None) -> tuple[dict, str]:
    doc = dawnbench_doc(model or f"ResNet-{seed}", date=date, cost=24.48, hardware=hardware,
                        commitHash="0a3c27a", misc={"gpus": 8, "note": "one-cycle schedule", "fp16": True})
    return doc, dawnbench_tsv()


def good_dawnbench_inference(seed: int = 0, *, date: str = "2019-01-01", hardware: str = "1 x V100") -> dict:
    doc = dawnbench_doc(f"ResNet-{seed} inference", date=date, hardware=hardware, misc={"batch": 1})
    del doc["costPerHour"]
    doc.update(latency=1.5 + seed / 100, cost=1e-6, top1Accuracy=95.0)
    return doc


@_cached
def good_repeat(seed: int = 0, *, name: str | None = None) -> tuple[dict, list[tuple[str, dict]]]:
    """A `daybreak repeat` upload: summary.json (daybreak's own summarize) and the result.json of its 3 runs."""
    from daybreak.analysis.repeat import seed_dir_name, summarize
    from daybreak.records.run import RunResult

    name = name or f"rep{seed}"
    runs = []
    for i, speed in enumerate((0.5, 0.6, 0.7)):
        doc = good_run(seed + i, epoch_s=speed)
        doc["run_id"] = f"{name}-seed-{seed + i}"
        runs.append((seed_dir_name(seed + i), doc))
    summary = summarize([(d, RunResult.model_validate(doc), False) for d, doc in runs], inputs=[name],
                        command=["daybreak", "repeat", "digits", "--seeds", "3"])
    out = json.loads(summary.model_dump_json())
    out["provenance"].update(created_at="2026-01-03T00:00:00Z", system=copy.deepcopy(GPU_SYSTEM))
    out.update(n_busy=0, cold_start_spread=1.1, trials="fresh processes (experiment.json)")
    out["accuracy"] = {"n": 3, "n_at_or_above_target": 3, "mean": 0.99, "ci_low": 0.985, "ci_high": 0.995,
                       "confidence": 0.95, "t_statistic": 9.0, "p_value": 0.006, "alpha": 0.01, "significant": True,
                       "note": None}
    for row in out["runs"]:
        row.update(data_load_s=0.3, model_init_s=0.2)
    return out, runs


# --- what each field is (by hand: the oracle) -----------------------------------------------------------------
# Kinds: count (an integer >= 1), index (an integer >= 0), int (any integer), fraction (a number in [0, 1]),
# positive (> 0), nonneg (>= 0), number (any finite number), bool, datetime (ISO 8601 date-time), date
# (YYYY-MM-DD), text, enum (text from a fixed set), section (a required object or list), object / list (an
# optional or defaulted one), free (free-form JSON: any value; only its text and its number bounds are checked).
# A trailing "?" marks a field that may be null. "*" is any list index, or any key of a map.

SYSTEM_KINDS = {
    "system": "section", "system.os": "text", "system.platform": "text", "system.python": "text",
    "system.torch": "text", "system.daybreak": "text", "system.numpy": "text?", "system.cpu_model": "text",
    "system.cpu_cores_physical": "count?", "system.cpu_threads_logical": "count?", "system.torch_threads": "index",
    "system.ram_gb": "positive?", "system.gpu_count": "index", "system.gpus": "list", "system.gpus.*": "object",
    "system.gpus.*.name": "text", "system.gpus.*.memory_gb": "nonneg", "system.gpus.*.capability": "text?",
    "system.cuda": "text?", "system.cudnn": "text?", "system.accelerator": "text", "system.source": "enum",
    "system.hardware": "text?", "system.framework": "text?", "system.declared_fields": "free",
}

RUN_KINDS = {
    "daybreak_version": "text?", "schema_version": "count", "kind": "enum", "run_id": "text", "task": "enum", "recipe": "text", "model": "text",
    "framework": "text", "metric": "enum", "target": "fraction", "target_is_default": "bool", "official": "bool",
    "unofficial_reasons": "list", "unofficial_reasons.*": "text", "hyperparameters": "free", "seed": "seed",
    "device": "text", "amp": "text", "compile": "enum", "threads": "count?", "world_size": "count", "nodes": "count",
    # a reached run of a task whose data sits in memory states its batches, its examples and its steps (issue 29)
    "backend": "text?", "per_device_batch_size": "count", "global_batch_size": "count", "lr_scaling": "text",
    "lr_scale": "positive", "stop_at_target": "bool", "steps_per_epoch": "count", "train_examples": "count",
    "effective_batch_size": "count", "eval_every_epochs": "count?", "eval_every_steps": "count?", "status": "enum",
    "reached": "bool", "message": "text?", "time_to_target_s": "nonneg", "epochs_to_target": "nonneg",
    "steps_to_target": "index", "final_accuracy": "fraction?", "best_accuracy": "fraction?", "init_s": "nonneg?",
    "train_s": "nonneg", "eval_s": "nonneg", "total_s": "nonneg?",
    "history": "section", "history.*": "object", "history.*.epoch": "nonneg", "history.*.step": "index",
    "history.*.elapsed_s": "nonneg", "history.*.clock_s": "object", "history.*.clock_s.*": "nonneg",
    "history.*.energy_j": "object", "history.*.energy_j.*": "nonneg?", "history.*.accuracy": "fraction",
    "history.*.top1": "fraction?", "history.*.top5": "fraction?", "history.*.metrics": "object",
    "history.*.metrics.*": "number", "history.*.train_loss": "number?", "history.*.eval_s": "nonneg",
    "non_finite_loss": "list",  # a run whose loss was never non-finite (issue 37's verdict) has none
    "cost_per_hour": "price?", "instance": "text?", "price_date": "date?", "cost_usd": "nonneg?",
    "clock": "section", "clock.starts": "text", "clock.init_excluded": "bool", "clock.eval_included": "bool",
    "clock.checkpoint_included": "bool", "clock.stops": "text", "clock.device_synchronized": "bool",
    "clock.timer": "text", "rules": "enum", "phases": "section", "phases.*": "object", "phases.*.phase": "enum",
    "phases.*.start_s": "nonneg", "phases.*.end_s": "nonneg", "clocks": "section", "clocks.*": "object",
    "clocks.*.rules": "enum", "clocks.*.time_to_target_s": "nonneg?", "clocks.*.clock_s": "nonneg",
    "clocks.*.start_s": "nonneg", "clocks.*.excluded_s": "object", "clocks.*.excluded_s.*": "nonneg",
    "clocks.*.notes": "list", "clocks.*.notes.*": "text", "setup_notes": "list", "setup_notes.*": "text",
    "performance": "object", "performance.compile_mode": "text", "performance.amp_reason": "text",
    "performance.compute_capability": "text?", "performance.native_precision": "text?", "performance.tf32": "bool?",
    "performance.tf32_applies": "bool", "performance.cudnn_benchmark": "bool?", "performance.init_before_data": "bool",
    "performance.warmup": "text", "performance.host_sync": "text", "performance.notes": "list",
    "performance.notes.*": "text", "energy": "object", "energy.available": "bool", "energy.unavailable": "object",
    "energy.unavailable.*": "text", "energy.covers": "list", "energy.covers.*": "text",
    "energy.joules_to_target": "object", "energy.joules_to_target.*": "nonneg?", "energy.joules_at_end": "object",
    "energy.joules_at_end.*": "nonneg?", "energy.per_phase_j": "object", "energy.per_phase_j.*": "nonneg?",
    "energy.per_source_j": "object", "energy.per_source_j.*": "nonneg?", "energy.idle_power_w": "nonneg?",
    "energy.idle_seconds": "nonneg?", "energy.counters": "free", "energy.notes": "list", "energy.notes.*": "text",
    "recompiles_under_clock": "index?", "context": "object", "context.load_avg_before": "list?",
    "context.load_avg_before.*": "nonneg", "context.load_avg_after": "list?", "context.load_avg_after.*": "nonneg",
    "context.other_cpu_s": "nonneg?", "context.own_cpu_s": "nonneg?", "context.busy_fraction": "nonneg?",
    "context.threads_used": "count?", "context.interop_threads": "count?", "context.git_commit": "text?",
    "context.git_dirty": "bool?", "context.git_remote": "text?", "context.packages": "object",
    "context.packages.*": "text", "context.recipe_file": "text?", "context.recipe_sha256": "text?",
    "context.warnings": "list", "context.warnings.*": "text", "warnings": "list", "warnings.*": "text",
    **SYSTEM_KINDS, "analyzed_on": "object?", "data_source": "text", "data_notes": "list", "data_notes.*": "text",
    "started_at": "datetime", "finished_at": "datetime?", "command": "list", "command.*": "text",
    "checkpoint": "text?", "author": "text?", "author_email": "text?", "optimizer": "text?",
    "mlperf": "object?",  # `daybreak time --log` of an MLPerf benchmark's log only (runs_import refuses its task)
}

INFERENCE_KINDS = {
    "daybreak_version": "text?", "schema_version": "count", "kind": "enum", "run_id": "text", "task": "enum", "recipe": "text", "model": "text",
    "framework": "text", "metric": "enum", "checkpoint": "text", "checkpoint_epoch": "nonneg?",
    "checkpoint_accuracy": "fraction?", "n_examples": "count", "latency": "section", "latency.n": "count",
    "latency.total_s": "positive", "latency.mean_ms": "positive", "latency.min_ms": "nonneg",
    "latency.p50_ms": "nonneg", "latency.p90_ms": "nonneg", "latency.p99_ms": "nonneg", "latency.max_ms": "nonneg",
    "latency.std_ms": "nonneg", "latency.percentile_method": "text", "throughput": "object?",
    "throughput.examples_per_s": "positive", "throughput.batch_size": "count", "throughput.repeats": "count",
    "throughput.warmup_passes": "index", "throughput.pass_s": "list", "throughput.pass_s.*": "positive",
    "throughput.timed": "text", "accuracy": "fraction", "top1": "fraction?", "top5": "fraction?",
    "metrics": "object", "metrics.*": "number", "target": "fraction", "valid": "bool", "reason": "text?",
    "cost_per_hour": "price?", "instance": "text?", "price_date": "date?", "cost_per_example_usd": "nonneg?",
    "cost_per_10k_usd": "nonneg?", "settings": "section", "settings.device": "text", "settings.amp": "text",
    "settings.compile": "bool", "settings.threads": "count", "settings.warmup": "index",
    "settings.latency_batch_size": "count", "settings.throughput_batch_size": "count?",
    "settings.throughput_repeats": "index", "settings.backend": "enum", "settings.pinned_memory": "bool",
    "settings.prepared_on": "text", "settings.test_time_predict": "bool", "clock_included": "text",
    "clock_excluded": "text", "timer": "text", **SYSTEM_KINDS, "data_source": "text", "data_official": "bool",
    "created_at": "datetime", "duration_s": "nonneg?", "command": "list", "command.*": "text",
    "loadgen": "object?", "energy": "object?",
}

REPEAT_KINDS = {
    "daybreak_version": "text?", "schema_version": "count", "kind": "enum", "task": "enum", "recipe": "text", "model": "text", "metric": "enum",
    "target": "fraction", "hyperparameters": "free", "overrides": "free", "seeds": "list", "seeds.*": "int",
    "n_runs": "count", "n_reached": "index", "reached_fraction": "fraction?", "time_to_target": "object",
    "time_to_target.n": "index", "time_to_target.times_s": "list", "time_to_target.times_s.*": "nonneg",
    "time_to_target.mean_s": "nonneg?", "time_to_target.std_s": "nonneg?", "time_to_target.cv": "nonneg?",
    "time_to_target.confidence": "fraction", "time_to_target.ci_low_s": "number?",
    "time_to_target.ci_high_s": "number?", "time_to_target.olympic_mean_s": "nonneg?",
    "time_to_target.min_s": "nonneg?", "time_to_target.median_s": "nonneg?", "time_to_target.max_s": "nonneg?",
    "time_to_target.geometric_mean_s": "nonneg?", "score": "object?", "score.rule": "text", "score.score_s": "nonneg?",
    "score.valid": "bool", "score.first_run": "index", "score.stop_run": "index", "score.n_failed": "index",
    "score.notes": "list", "score.notes.*": "text", "epochs_to_target": "object", "epochs_to_target.values": "list", "epochs_to_target.values.*": "nonneg",
    "epochs_to_target.min": "nonneg?", "epochs_to_target.median": "nonneg?", "epochs_to_target.max": "nonneg?",
    "unreached_policy": "text", "complete": "bool", "runs": "section", "runs.*": "object", "runs.*.seed": "int",
    "runs.*.run_dir": "text", "runs.*.run_id": "text", "runs.*.status": "enum", "runs.*.reached": "bool",
    "runs.*.time_to_target_s": "nonneg?", "runs.*.epochs_to_target": "nonneg?", "runs.*.final_accuracy": "fraction?",
    "runs.*.best_accuracy": "fraction?", "runs.*.train_s": "nonneg?", "runs.*.device": "text?",
    "runs.*.reused": "bool", "runs.*.busy": "bool", "runs.*.excluded": "bool", "runs.*.data_load_s": "nonneg?",
    "runs.*.model_init_s": "nonneg?", "accuracy": "object?", "accuracy.n": "index",
    "accuracy.n_at_or_above_target": "index", "accuracy.mean": "fraction?", "accuracy.ci_low": "number?",
    "accuracy.ci_high": "number?", "accuracy.confidence": "fraction", "accuracy.t_statistic": "number?",
    "accuracy.p_value": "fraction?", "accuracy.alpha": "fraction", "accuracy.significant": "bool",
    "accuracy.note": "text?", "n_busy": "index", "cold_start_spread": "nonneg?", "trials": "text?",
    "provenance": "object", "provenance.created_at": "datetime", "provenance.command": "list",
    "provenance.command.*": "text", "provenance.inputs": "list", "provenance.inputs.*": "text",
    **{k.replace("system", "provenance.system", 1): v for k, v in SYSTEM_KINDS.items() if k != "system"},
    "provenance.system": "object?",
}

DAWNBENCH_KINDS = {
    "version": "enum?", "author": "text", "authorEmail": "text?", "framework": "text", "codeURL": "text?",
    "model": "text", "hardware": "text", "timestamp": "date", "costPerHour": "dprice?", "commitHash": "text?",
    "misc": "free", "latency": "positive", "cost": "dprice?", "top1Accuracy": "percent",
}
# map fields: their keys are data, not field names
MAPS = {"history.*.clock_s", "history.*.energy_j", "history.*.metrics", "clocks", "clocks.*.excluded_s",
        "energy.unavailable", "energy.joules_to_target", "energy.joules_at_end", "energy.per_phase_j",
        "energy.per_source_j", "context.packages", "metrics"}

# --- the bad values -------------------------------------------------------------------------------------------

TEXT_BAD = [  # for every string anywhere in a document (free-form ones included): f(good value)
    ("control-characters", lambda v: v + "\x00\x01\x1f"),
    ("escape-sequence", lambda v: "\x1b[2J\x1b[H" + v),
    ("bidi-override", lambda v: "\u202e" + v),
    ("c1-control", lambda v: v + "\x85\x9b"),
    ("newline", lambda v: v + "\nforged line"),
    # invisible text (issue 29): format characters, fillers, tags; and text over the 1,000-character limit
    ("zero-width-space", lambda v: v[:1] + "\u200b" + v[1:]), ("byte-order-mark", lambda v: "\ufeff" + v),
    ("soft-hyphen", lambda v: v + "\u00ad"), ("word-joiner", lambda v: v + "\u2060"),
    ("mongolian-vowel-separator", lambda v: "\u180e" + v), ("hangul-filler", lambda v: v + "\u3164"),
    ("tag-character", lambda v: v + "\U000e0041"), ("too-long-text", lambda v: v + "x" * 1001),  # > 1,000 even from ""
]
BAD = {  # kind -> (class, value): a value that is wrong for a field of that kind
    "count": [("zero-count", 0), ("negative", -1), ("boolean-for-number", True), ("string-for-number", "2"),
              ("fraction-for-integer", 1.5)],
    "index": [("negative", -1), ("boolean-for-number", False), ("string-for-number", "1"),
              ("fraction-for-integer", 0.5)],
    "int": [("boolean-for-number", True), ("string-for-number", "7"), ("fraction-for-integer", 0.5)],
    "seed": [("boolean-for-number", True), ("string-for-number", "7"), ("fraction-for-integer", 0.5),
             ("negative-seed", -1), ("seed-above-2**32-1", 2**32)],
    "price": [("negative", -1.0), ("boolean-for-number", True), ("string-for-number", "1.5"),
              ("below-any-price", 1e-300)],
    "dprice": [("zero", 0), ("negative", -1), ("boolean-for-number", True), ("below-any-price", 1e-300)],
    "fraction": [("negative", -0.5), ("out-of-range", 1.5), ("boolean-for-number", True),
                 ("string-for-number", "0.99")],
    "percent": [("negative", -1), ("out-of-range", 101), ("boolean-for-number", True), ("nan-like-string", "NaN")],
    "positive": [("zero", 0), ("negative", -1), ("boolean-for-number", True), ("string-for-number", "1")],
    "nonneg": [("negative", -1.0), ("boolean-for-number", True), ("string-for-number", "1.5")],
    "number": [("boolean-for-number", True), ("nan-like-string", "NaN")],
    "bool": [("number-for-boolean", 1), ("string-for-boolean", "true")],
    "datetime": [("future-date", "2999-01-01T00:00:00Z"), ("pre-2017-date", "2016-12-31T23:00:00Z"),
                 ("not-a-date", "yesterday"), ("number-for-date", 1767225600)],
    "date": [("future-date", "2999-01-01"), ("pre-2017-date", "2016-06-01"), ("not-a-date", "01/15/2025"),
             ("not-a-date", "2025-13-01"), ("boolean-for-date", True)],
    "text": [("number-for-text", 1)],
    "enum": [("unknown-value", "bogus"), ("number-for-text", 1)],
    "section": [("empty-section", None), ("wrong-type", "x")],  # None: the empty object or list
    "object": [("wrong-type", 7)],
    "list": [("wrong-type", {"a": 1})],
}
# DAWNBench files may write a number as a plain decimal string ("3.06"); strings that are no number are bad.
DAWNBENCH_STRING = [("nan-like-string", "NaN"), ("nan-like-string", "Infinity"), ("nan-like-string", "0x1F")]
HUGE = [("huge-number", 1e16), ("huge-number", -(10 ** 20))]
TSV_BAD = {  # column -> (class, cell)
    "epoch": [("negative", "-1"), ("nan-like-string", "NaN"), ("boolean-for-number", "true")],
    "hours": [("negative", "-0.5"), ("nan-like-string", "NaN"), ("huge-number", "1e999"), ("out-of-range", "1e7"),
              ("boolean-for-number", "true"), ("nan-like-string", "0x10")],
    "top1Accuracy": [("negative", "-1"), ("out-of-range", "101"), ("nan-like-string", "nan"),
                     ("boolean-for-number", "false")],
}


@dataclass(frozen=True)
class Case:
    fmt: str  # run, inference, repeat (the summary), repeat-run (its first run), dawnbench-train, -inference, tsv
    path: tuple  # JSON path (keys and list indices) or, for tsv, (row, column)
    klass: str
    value: Any
    key: bool = False  # the value replaces the key at ``path`` (free-form objects), not the value

    @property
    def field(self) -> str:
        """What the refusal must name: the path as the messages write it (``history[0].clock_s.dawnbench``)."""
        if self.fmt == "tsv":
            return self.path[1]
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
        return out

    @property
    def name(self) -> str:
        """The last key of the path: the least a message must say."""
        return self.path[-1] if self.fmt == "tsv" else next(str(p) for p in reversed(self.path)
                                                            if isinstance(p, str))

    def __str__(self) -> str:
        return f"{self.fmt}:{self.field}{' (key)' if self.key else ''} <- {self.klass} {self.value!r}"


def _pattern(path: tuple) -> str:
    parts: list[str] = []
    for p in path:
        parts.append("*" if isinstance(p, int) or ".".join(parts) in MAPS else str(p))
    return ".".join(parts)


def _kind(kinds: dict, path: tuple) -> tuple[str, bool]:
    pattern = _pattern(path)
    if pattern not in kinds:
        raise KeyError(f"no kind for {pattern!r}: add it to the tables")
    kind = kinds[pattern]
    return kind.rstrip("?"), kind.endswith("?")


def _walk(obj: Any, path: tuple = ()):
    yield path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _walk(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, (*path, i))


def _free_cases(fmt: str, obj: Any, path: tuple) -> list[Case]:
    """Inside a free-form value: its text, its keys and its numbers are still checked."""
    out = []
    for sub, value in _walk(obj, path):
        if isinstance(value, str):
            out += [Case(fmt, sub, klass, f(value)) for klass, f in TEXT_BAD]
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out += [Case(fmt, sub, klass, v) for klass, v in HUGE]
        elif isinstance(value, dict):
            out += [Case(fmt, (*sub, k), "control-character-key", k + "\x1b[2J", key=True) for k in list(value)[:1]]
            out += [Case(fmt, (*sub, k), "invisible-key", k + "\u200b", key=True) for k in list(value)[:1]]
    return out


def document_cases(fmt: str, doc: dict, kinds: dict) -> list[Case]:
    """Every (field, bad value) of one document."""
    out: list[Case] = []
    free_below: set[tuple] = set()
    for path, value in _walk(doc):
        if not path or any(path[:i] in free_below for i in range(1, len(path) + 1)):
            continue
        kind, nullable = _kind(kinds, path)
        if kind == "free":
            free_below.add(path)
            # a daybreak record's free-form object is still an object; DAWNBench's misc may be a list or a string
            wrong = [] if isinstance(value, dict) and not fmt.startswith("dawnbench") else 7
            out.append(Case(fmt, path, "wrong-type", wrong))
            out += _free_cases(fmt, value, path)
            continue
        if value is None and kind in ("object", "list"):
            out += [Case(fmt, path, "wrong-type", "x")]
            continue
        for klass, bad in BAD[kind]:
            if kind == "section" and bad is None:
                bad = {} if isinstance(value, dict) else []
            if fmt.startswith("dawnbench") and klass == "string-for-number":
                continue  # a plain decimal string is a number in a DAWNBench file (see DAWNBENCH_STRING)
            out.append(Case(fmt, path, klass, bad))
        if fmt.startswith("dawnbench") and kind in ("positive", "percent", "dprice"):
            out += [Case(fmt, path, klass, v) for klass, v in DAWNBENCH_STRING]
        if fmt.startswith("dawnbench") and kind == "text" and not nullable:
            out += [Case(fmt, path, "empty-text", ""), Case(fmt, path, "empty-text", "   ")]
        if not nullable:
            out.append(Case(fmt, path, "null-required", None))
        if kind in ("text", "enum", "date", "datetime") and (value is None or isinstance(value, str)):
            out += [Case(fmt, path, klass, f(value or "")) for klass, f in TEXT_BAD]
        if kind in ("count", "index", "int", "seed", "fraction", "percent", "positive", "nonneg", "number", "price",
                    "dprice"):
            out += [Case(fmt, path, klass, v) for klass, v in HUGE]
    return out


def tsv_cases(tsv: str) -> list[Case]:
    header = tsv.splitlines()[0].split("\t")
    rows = len(tsv.splitlines()) - 1
    return [Case("tsv", (row, column), klass, cell) for row in range(rows) for column in header
            for klass, cell in TSV_BAD[column]]


def all_cases() -> list[Case]:
    summary, runs = good_repeat(900)
    db_train, tsv = good_dawnbench(900)
    out = (document_cases("run", good_run(900), RUN_KINDS)
           + document_cases("inference", good_inference(900), INFERENCE_KINDS)
           + document_cases("repeat", summary, REPEAT_KINDS)
           + [c for c in document_cases("repeat-run", runs[0][1], RUN_KINDS)
              if c.path[0] not in ("history", "phases", "clocks", "energy", "context", "system", "performance")]
           + document_cases("dawnbench-train", db_train, DAWNBENCH_KINDS)
           + document_cases("dawnbench-inference", good_dawnbench_inference(900), DAWNBENCH_KINDS)
           + tsv_cases(tsv))
    return out


def _put(doc: Any, case: Case) -> Any:
    doc = copy.deepcopy(doc)
    *parents, last = case.path
    node = doc
    for p in parents:
        node = node[p]
    if case.key:
        node[case.value] = node.pop(last)
    else:
        node[last] = case.value
    return doc


def _encode(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")


def request_for(case: Case) -> dict:
    """The multipart form of the upload ``case`` describes (one bad field in an otherwise valid upload)."""
    files: list[tuple[str, tuple[str, bytes]]]
    data = {}
    if case.fmt == "run":
        files = [("submission", ("result.json", _encode(_put(good_run(900), case))))]
    elif case.fmt == "inference":
        files = [("submission", ("inference.json", _encode(_put(good_inference(900), case))))]
    elif case.fmt in ("repeat", "repeat-run"):
        summary, runs = good_repeat(900)
        if case.fmt == "repeat":
            summary = _put(summary, case)
        else:
            runs[0] = (runs[0][0], _put(runs[0][1], case))
        files = [("submission", ("summary.json", _encode(summary)))]
        files += [("run", ("result.json", _encode(doc))) for _, doc in runs]
    elif case.fmt == "tsv":
        doc, tsv = good_dawnbench(900)
        lines = tsv.splitlines()
        header = lines[0].split("\t")
        row, column = case.path
        cells = lines[1 + row].split("\t")
        cells[header.index(column)] = case.value
        lines[1 + row] = "\t".join(cells)
        files = [("submission", ("entry.json", _encode(doc))), ("tsv", ("entry.tsv", ("\n".join(lines) + "\n").encode()))]
        data = {"task": "cifar10"}
    elif case.fmt == "dawnbench-train":
        doc, tsv = good_dawnbench(900)
        files = [("submission", ("entry.json", _encode(_put(doc, case)))), ("tsv", ("entry.tsv", tsv.encode()))]
        data = {"task": "cifar10"}
    else:
        files = [("submission", ("entry.json", _encode(_put(good_dawnbench_inference(900), case))))]
        data = {"task": "cifar10"}
    return {"files": files, "data": data}


def good_uploads() -> list[tuple[str, dict]]:
    """The unmutated originals and legitimately varied uploads: other seeds, dates, hardware and text."""
    cpu = {**GPU_SYSTEM, "gpus": [], "gpu_count": 0, "accelerator": "cpu", "cuda": None, "cudnn": None,
           "cpu_model": "Intel(R) Xeon(R) Platinum 8480+", "torch": "2.13.0+cpu"}
    eight = {**GPU_SYSTEM, "gpu_count": 8, "gpus": [{"name": "NVIDIA A100-SXM4-80GB", "memory_gb": 79.15,
                                                     "capability": "8.0"}] * 8}
    now = datetime.now(timezone.utc)
    out: list[tuple[str, dict]] = []

    def form(name: str, doc: dict, fmt_name: str = "result.json"):
        out.append((name, {"files": [("submission", (fmt_name, _encode(doc)))], "data": {}}))

    form("run original", good_run(900))
    form("run seed 901, CPU, no price", good_run(901, system=cpu, device="cpu", instance=None, price_date=None,
                                                 cost=None))
    form("run seed 902, 8 GPUs, today's price, unicode author",
         good_run(902, system=eight, price_date=now.date().isoformat(), author="Zoë Ångström 李"))
    form("run seed 903, started an hour ago", good_run(903, started=now - timedelta(hours=1)))
    declared = good_run(904, started=datetime(2017, 1, 1, tzinfo=timezone.utc), instance="my lab box",
                        author="محمد (RTL, no bidi controls)")
    declared["system"] = {**declared["system"], "source": "declared", "hardware": "8xNVIDIA H100-SXM5-80GB",
                          "torch_threads": 0, "cpu_cores_physical": None, "ram_gb": None}
    form("run seed 904, 2017-01-01, a declared system", declared)
    form("inference original", good_inference(900), "inference.json")
    form("inference seed 901, CPU, no price", good_inference(901, system=cpu, instance=None, price_date=None),
         "inference.json")
    form("inference seed 902, created today", good_inference(902, created=now - timedelta(minutes=5)),
         "inference.json")
    for seed in (900, 910):
        summary, runs = good_repeat(seed)
        out.append((f"repeat seeds {seed}-{seed + 2}", {
            "files": [("submission", ("summary.json", _encode(summary)))]
            + [("run", ("result.json", _encode(doc))) for _, doc in runs], "data": {}}))
    for seed, date, hardware in ((900, "2019-01-01", "8 x V100 (AWS p3.16xlarge)"),
                                 (901, "2017-10-11", "TPU v2-8 (Google Cloud)"),
                                 (902, now.date().isoformat(), "1× NVIDIA® H100 – 80 GB, «SXM5»")):
        doc, tsv = good_dawnbench(seed, date=date, hardware=hardware)
        out.append((f"dawnbench train {seed} {date}", {
            "files": [("submission", ("entry.json", _encode(doc))), ("tsv", ("entry.tsv", tsv.encode()))],
            "data": {"task": "cifar10"}}))
        out.append((f"dawnbench inference {seed} {date}", {
            "files": [("submission", ("entry.json", _encode(good_dawnbench_inference(seed, date=date,
                                                                                       hardware=hardware))))],
            "data": {"task": "cifar10"}}))
    plain = dict(good_dawnbench_inference(903), latency="2.5", cost="0.000001")  # DAWNBench's decimal strings
    out.append(("dawnbench inference 903, decimal strings", {"files": [("submission", ("e.json", _encode(plain)))],
                                                              "data": {"task": "cifar10"}}))
    return out


# --- running them ---------------------------------------------------------------------------------------------


def post(client, form: dict):
    return client.post("/api/submissions", files=form["files"], data=form["data"], headers=AUTH)


def sample(cases: list[Case], n: int, seed: int = SEED) -> list[Case]:
    """``n`` cases: one of every (format, class) first, then a random draw from the rest (seeded)."""
    rng = random.Random(seed)
    shuffled = cases[:]
    rng.shuffle(shuffled)
    chosen, seen = [], set()
    for c in shuffled:
        if (c.fmt, c.klass) not in seen:
            seen.add((c.fmt, c.klass))
            chosen.append(c)
    taken = {id(c) for c in chosen}
    rest = [c for c in shuffled if id(c) not in taken]
    return chosen + rest[: max(0, n - len(chosen))]


# The uploads the issue found stored (its values): each one is posted on every server.
ISSUE_CASES = [
    Case("run", ("nodes",), "negative", -1), Case("run", ("nodes",), "zero-count", 0),
    Case("run", ("final_accuracy",), "negative", -1), Case("run", ("steps_per_epoch",), "zero-count", 0),
    Case("run", ("seed",), "boolean-for-number", True), Case("run", ("train_s",), "boolean-for-number", True),
    Case("run", ("global_batch_size",), "boolean-for-number", True),
    Case("run", ("price_date",), "future-date", "2999-01-01"), Case("run", ("clocks",), "empty-section", {}),
    Case("run", ("device",), "control-characters", "cuda:0\x00\x01\x1f"),
    Case("run", ("instance",), "control-characters", "aws-p3.2xlarge\x00\x01\x1f"),
    # issue 29's
    Case("run", ("cost_per_hour",), "below-any-price", 1e-300), Case("dawnbench-train", ("costPerHour",),
                                                                    "below-any-price", 1e-300),
    Case("run", ("seed",), "negative-seed", -1), Case("run", ("steps_to_target",), "null-required", None),
    Case("run", ("effective_batch_size",), "null-required", None),
    Case("run", ("train_examples",), "null-required", None), Case("run", ("clock",), "empty-section", {}),
    Case("run", ("instance",), "too-long-text", "x" * 100_000), Case("run", ("optimizer",), "too-long-text",
                                                                     "x" * 100_000),
    *[Case(fmt, (field,), klass, text) for fmt, field in (("run", "framework"), ("run", "author"),
                                                          ("dawnbench-train", "framework"),
                                                          ("dawnbench-train", "author"))
      for klass, text in (("byte-order-mark", "\ufeffxy"), ("zero-width-space", "x\u200by"),
                          ("soft-hyphen", "x\u00ady"), ("word-joiner", "x\u2060y"),
                          ("mongolian-vowel-separator", "x\u180ey"), ("hangul-filler", "xy\u3164"),
                          ("tag-character", "xy\U000e0041"))],
]


def _table(rows: dict) -> str:
    """Per-class counts, one line each: ``class: N cases, statuses {422: N}``."""
    return "; ".join(f"{klass}: {sum(c.values())} ({dict(sorted(c.items()))})" for klass, c in sorted(rows.items()))


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    """A running leaderboard (uvicorn, the limits `serve` uses) on an empty SQLite or PostgreSQL database."""
    store = make_store(request.param, tmp_path_factory.mktemp(f"fuzz-{request.param}"))
    with serving(store) as served:
        served.kind = request.param
        yield served
    store.close()


def test_the_oracle_covers_every_field_of_every_format():
    """Every field of every good upload has a kind in the tables (else all_cases raises), every format and the
    classes the issue named are among the cases, and the sample takes a case of every (format, class)."""
    cases = all_cases()
    classes = {(c.fmt, c.klass) for c in cases}
    assert {c.fmt for c in cases} == {"run", "inference", "repeat", "repeat-run", "dawnbench-train",
                                      "dawnbench-inference", "tsv"}
    for klass in ("boolean-for-number", "negative", "zero-count", "out-of-range", "future-date", "pre-2017-date",
                  "empty-section", "control-characters", "bidi-override", "wrong-type", "huge-number",
                  "nan-like-string", "null-required"):
        assert any(k == klass for _, k in classes), klass
    chosen = sample(cases, SAMPLE)
    assert {(c.fmt, c.klass) for c in chosen} == classes and len(chosen) == max(SAMPLE, len(classes))
    assert sample(cases, SAMPLE) == chosen  # seeded: the same cases every run


def test_hostile_uploads_get_a_422_naming_the_field_and_store_nothing(srv):
    """A seeded sample of the hostile uploads (one of every format x class, the issue's own, the rest at random)
    against the running app: no 5xx, each a 422 with a one-line message naming the field, no row stored; then
    every good upload is stored."""
    from conftest import single_line

    cases = sample(all_cases(), SAMPLE) + ISSUE_CASES
    before = srv.store.count()
    by_class: dict[str, Counter] = defaultdict(Counter)
    problems: list[str] = []
    with srv.client() as client:
        for case in cases:
            r = post(client, request_for(case))
            by_class[case.klass][r.status_code] += 1
            if r.status_code != 422:
                problems.append(f"{case}: HTTP {r.status_code} {r.text[:200]}")
                continue
            message = r.json()["error"]
            if not single_line(message) or case.field not in message:
                problems.append(f"{case}: the message does not name {case.field!r}: {message[:200]}")
        stored_bad = srv.store.count() - before
        good = good_uploads()
        refused_good = []
        for name, form in good:
            r = post(client, form)
            if r.status_code != 201:
                refused_good.append(f"{name}: HTTP {r.status_code} {r.text[:200]}")
            else:
                assert client.get(f"/api/entries/{r.json()['id']}").status_code == 200
    counts = f"{len(cases)} bad uploads on {srv.kind}, by class: {_table(by_class)}"
    assert not [c for c in by_class.values() if any(status >= 500 for status in c)], counts
    assert not problems, f"{len(problems)} problems: {problems[:20]}; {counts}"
    assert stored_bad == 0, f"{stored_bad} rows stored from bad input; {counts}"
    assert not refused_good, f"good uploads refused: {refused_good}"
    assert srv.store.count() - before == len(good)


def test_leaderboard_import_reads_files_with_the_same_readers(tmp_path):
    """`daybreak leaderboard import` of run directories and DAWNBench files refuses what an upload is refused
    for, with the same message, and stores the good ones."""
    from daybreak.leaderboard.ingest.importer import import_paths
    from daybreak.leaderboard.store.database import Store

    runs = tmp_path / "runs"
    run_cases = [c for c in ISSUE_CASES if c.fmt == "run"]
    for i, case in enumerate(run_cases):
        (runs / f"bad-{i}").mkdir(parents=True)
        (runs / f"bad-{i}" / "result.json").write_bytes(_encode(_put(good_run(900), case)))
    (runs / "good").mkdir()
    (runs / "good" / "result.json").write_bytes(_encode(good_run(905)))
    (runs / "good" / "inference.json").write_bytes(_encode(good_inference(905)))
    tree = tmp_path / "CIFAR10" / "train"
    tree.mkdir(parents=True)
    doc, tsv = good_dawnbench(905)
    for name, bad in (("good", doc), ("future", {**doc, "timestamp": "2999-01-01"}),
                      ("bidi", {**doc, "hardware": "\u202e8 x V100"})):
        (tree / f"{name}.json").write_bytes(_encode(bad))
        (tree / f"{name}.tsv").write_text(tsv)
    with Store(f"sqlite:///{tmp_path / 'import.sqlite'}") as store:
        report = import_paths(store, [runs, tmp_path / "CIFAR10"])
        assert (report.stored, report.skipped) == (3, len(run_cases) + 2), report.to_json()
        reasons = {o.path: o.reason for o in report.problems()}
        for i, case in enumerate(run_cases):
            reason = reasons[str(runs / f"bad-{i}" / "result.json")]
            assert case.field in reason and "\n" not in reason, (case, reason)
        assert "timestamp" in reasons[str(tree / "future.json")] and "hardware" in reasons[str(tree / "bidi.json")]


def survey(cases: list[Case]) -> list[tuple[Case, int, str]]:
    """Post every case to a fresh SQLite server: (case, status, body) for each."""
    import tempfile

    from daybreak.leaderboard.store.database import Store

    answers = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'survey.sqlite'}")
        with serving(store) as served, served.client() as client:
            for case in cases:
                r = post(client, request_for(case))
                answers.append((case, r.status_code, r.text))
        store.close()
    return answers


if __name__ == "__main__":  # the whole enumeration, and what the server stored of it
    everything = all_cases()
    answers = survey(everything)
    stored = [c for c, status, _ in answers if status in (200, 201)]
    by_status = Counter(status for _, status, _ in answers)
    print(f"{len(everything)} bad uploads: {dict(sorted(by_status.items()))}; {len(stored)} stored")
    by_class = defaultdict(list)
    for c in stored:
        by_class[c.klass].append(c)
    for klass, cs in sorted(by_class.items(), key=lambda kv: -len(kv[1])):
        print(f"  {klass}: {len(cs)} stored")
        for c in cs:
            print(f"    {c}")
    unnamed = [(c, text) for c, status, text in answers if status == 422 and c.name not in text]
    print(f"{len(unnamed)} refusals that do not name their field")
    for c, text in unnamed[:400]:
        print(f"    {c}: {text[:200]}")
