"""daybreak's own records as leaderboard submissions: result.json (training) and inference.json (inference).

Time to target is read from the run's history, against the *leaderboard's* target for the task (the task's
default), so a run made with a custom target counts only if its history passes the default one too. Runs
recorded ``official: false`` (custom data, non-default target) are refused: the leaderboard compares like
with like.
"""

from __future__ import annotations

from typing import Any

from daybreak.errors import ConfigError
from daybreak.leaderboard.submission import (
    FORMAT_INFERENCE, FORMAT_RUN, KIND_INFERENCE, KIND_TRAIN, Submission, SubmissionError, as_naive_utc, one_line,
    parse_number, reaches,
)
from daybreak.leaderboard.tasks import LeaderboardTask, get_task, task_names


def _task(name: Any, what: str) -> LeaderboardTask:
    try:
        return get_task(str(name))
    except ConfigError:
        raise SubmissionError(f"{what}: task {one_line(str(name), 40)!r} has no leaderboard "
                              f"(known: {', '.join(task_names())})") from None


def _validation_message(err: Exception) -> str:
    errors = getattr(err, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "record"
        return f"{where}: {one_line(first.get('msg', ''), 120)}"
    return one_line(str(err), 160)


def _check_text(value: str, key: str, what: str) -> str:
    from daybreak.leaderboard.submission import text_field

    return text_field({key: value}, key, what, required=False)


def parse_run(doc: dict, *, source: str, what: str | None = None) -> Submission:
    """A daybreak ``result.json`` (kind ``daybreak.run``) -> a training submission."""
    from pydantic import ValidationError

    from daybreak.records.run import RunResult

    what = what or source
    try:
        run = RunResult.model_validate(doc)
    except ValidationError as e:
        raise SubmissionError(f"{what}: invalid run record: {_validation_message(e)}") from None
    task = _task(run.task, what)
    if not run.official:
        reasons = "; ".join(run.unofficial_reasons) or "no reason recorded"
        raise SubmissionError(f"{what}: unofficial run ({one_line(reasons, 160)}); "
                              "the leaderboard takes official runs only")
    if run.metric != task.metric:
        raise SubmissionError(f"{what}: the run measured {run.metric!r} but {task.name} is ranked on {task.metric!r}")
    if not run.history:
        raise SubmissionError(f"{what}: the run has no evaluations (history is empty)")
    hours_at, converted = _dawnbench_clock(run)
    previous = -1.0
    for i, h in enumerate(run.history):
        for name, value in (("elapsed_s", h.elapsed_s), ("accuracy", h.accuracy), ("epoch", h.epoch)):
            parse_number(value, f"{what}: history[{i}].{name}")  # finite
        t = parse_number(hours_at[i], f"{what}: history[{i}] DAWNBench clock")
        if t < 0 or t <= previous:
            raise SubmissionError(f"{what}: history[{i}]'s DAWNBench clock {t:g} s is not after the previous "
                                  "evaluation's (time must increase)")
        if not 0.0 <= h.accuracy <= 1.0:
            raise SubmissionError(f"{what}: history[{i}].accuracy {h.accuracy:g} is not a fraction 0..1")
        previous = t
    index = next((i for i, h in enumerate(run.history) if reaches(h.accuracy, task.target)), None)
    first = None if index is None else run.history[index]
    if first is None:
        best = max(h.accuracy for h in run.history)
        raise SubmissionError(f"{what}: never reached the target {task.target * 100:g}% {task.metric} "
                              f"(best {best * 100:.2f}%)")
    cost_per_hour = run.cost_per_hour
    if cost_per_hour is not None:
        cost_per_hour = parse_number(cost_per_hour, f"{what}: cost_per_hour")
        if cost_per_hour <= 0:
            cost_per_hour = None
    seconds = hours_at[index]
    hours = seconds / 3600.0
    notes = ["accuracy read as fraction (daybreak record)",
             f"target reached at epoch {first.epoch:g} ({seconds:.3f} s under DAWNBench v1's clock rules: data "
             "loading, init and training; evaluation and record writes excluded)"]
    if converted:
        notes.append(converted)
    if cost_per_hour is None:
        notes.append("no cost_per_hour: not ranked on train-cost")
    sub = Submission(
        kind=KIND_TRAIN, task=task.name, source_format=FORMAT_RUN, source=source,
        model=_check_text(f"{run.model} ({run.recipe} recipe)", "model", what),
        hardware=_check_text(run.system.hardware_summary(), "hardware", what),
        framework=_check_text(run.framework, "framework", what),
        submitted_at=as_naive_utc(run.finished_at or run.started_at), metric=task.metric, target=task.target,
        accuracy=first.accuracy, accuracy_unit="fraction", document=doc, author="", author_email="",
        code_url="https://pypi.org/project/daybreak/", time_to_target_s=seconds,
        epochs_to_target=first.epoch, cost_per_hour=cost_per_hour,
        train_cost_usd=None if cost_per_hour is None else hours * cost_per_hour,
        curve=[(t / 3600.0, h.accuracy, h.epoch) for t, h in zip(hours_at, run.history)],
        tsv_columns=["epoch", "hours", "accuracy"], notes=notes,
    )
    return sub.finish({"document": doc})


def _dawnbench_clock(run: RunResult) -> tuple[list[float], str | None]:
    """Each evaluation's time under DAWNBench v1's rules, whatever the run's headline rule set. Records made
    before the rule sets (no ``clock_s``) timed training only: their init time is added back (and evaluation
    taken out where it was counted), and a note says the figure was converted."""
    if all("dawnbench" in h.clock_s for h in run.history):
        return [h.clock_s["dawnbench"] for h in run.history], None
    init = run.init_s or 0.0
    out, evals = [], 0.0
    for h in run.history:
        evals += h.eval_s
        out.append(init + h.elapsed_s - (evals if run.clock.eval_included else 0.0))
    return out, ("converted from a record made before clock rule sets: init_s added to the training clock"
                 + (", evaluation taken out" if run.clock.eval_included else ""))


def parse_inference(doc: dict, *, source: str, what: str | None = None) -> Submission:
    """A daybreak ``inference.json`` (kind ``daybreak.inference``) -> an inference submission."""
    what = what or source
    record = _inference_record(doc, what)
    task = _task(record.get("task"), what)
    latency = record.get("latency") or {}
    mean_ms = parse_number(latency.get("mean_ms") if isinstance(latency, dict) else None, f"{what}: latency.mean_ms")
    if mean_ms <= 0:
        raise SubmissionError(f"{what}: latency.mean_ms must be greater than 0")
    accuracy = parse_number(record.get("accuracy"), f"{what}: accuracy")
    if not 0.0 <= accuracy <= 1.0:
        raise SubmissionError(f"{what}: accuracy {accuracy:g} is not a fraction 0..1")
    if record.get("metric") not in (None, task.metric):
        raise SubmissionError(f"{what}: the record measured {record.get('metric')!r} but {task.name} is ranked on "
                              f"{task.metric!r}")
    if record.get("valid") is False:
        reason = one_line(str(record.get("reason") or "accuracy below target"), 160)
        raise SubmissionError(f"{what}: not valid: {reason}")
    if record.get("data_official") is False:
        raise SubmissionError(f"{what}: measured on unofficial data; the leaderboard takes official data only")
    if not reaches(accuracy, task.target):
        raise SubmissionError(f"{what}: accuracy {accuracy * 100:.2f}% is below the target {task.target * 100:g}% "
                              f"{task.metric}")
    per_example = record.get("cost_per_example_usd")
    per_example = None if per_example is None else parse_number(per_example, f"{what}: cost_per_example_usd")
    per_10k = record.get("cost_per_10k_usd")
    per_10k = None if per_10k is None else parse_number(per_10k, f"{what}: cost_per_10k_usd")
    if per_10k is None and per_example is not None:
        per_10k = per_example * 10_000
    if per_example is None and per_10k is not None:
        per_example = per_10k / 10_000
    if per_10k is not None and per_10k <= 0:
        per_example = per_10k = None
    hardware = record.get("hardware_summary") or _hardware(record.get("system"))
    created = record.get("created_at")
    submitted = _datetime(created, what)
    notes = ["accuracy read as fraction (daybreak record)", "latency: mean of the batch-1 pass over the eval set"]
    if per_10k is None:
        notes.append("no price: not ranked on inference-cost")
    sub = Submission(
        kind=KIND_INFERENCE, task=task.name, source_format=FORMAT_INFERENCE, source=source,
        model=_check_text(f"{record.get('model', '')} ({record.get('recipe', '?')} recipe)", "model", what),
        hardware=_check_text(str(hardware), "hardware", what),
        framework=_check_text(str(record.get("framework", "")), "framework", what),
        submitted_at=submitted, metric=task.metric, target=task.target, accuracy=accuracy, accuracy_unit="fraction",
        document=doc, code_url="https://pypi.org/project/daybreak/", latency_ms=mean_ms,
        cost_per_example_usd=per_example, inference_cost_10k_usd=per_10k, notes=notes,
    )
    return sub.finish({"document": doc})


def _inference_record(doc: dict, what: str) -> dict:
    """Validate with daybreak's InferenceResult when it is available; read the plain dict otherwise."""
    try:
        from daybreak.records.inference import InferenceResult
    except ImportError:  # pragma: no cover - the record module is part of daybreak
        return doc
    from pydantic import ValidationError

    try:
        record = InferenceResult.model_validate(doc)
    except ValidationError as e:
        raise SubmissionError(f"{what}: invalid inference record: {_validation_message(e)}") from None
    out = record.model_dump(mode="python")
    system = getattr(record, "system", None)
    if system is not None and hasattr(system, "hardware_summary"):
        out["hardware_summary"] = system.hardware_summary()
    return out


def _hardware(system: Any) -> str:
    if isinstance(system, dict):
        gpus = system.get("gpus") or []
        if gpus:
            names = [g.get("name", "?") for g in gpus if isinstance(g, dict)]
            return "; ".join(f"{names.count(n)} x {n}" for n in sorted(set(names)))
        return f"{system.get('cpu_model', 'CPU')} (CPU only)"
    return "unknown"


def _datetime(value: Any, what: str):
    from datetime import datetime

    if isinstance(value, datetime):
        return as_naive_utc(value)
    if isinstance(value, str):
        try:
            return as_naive_utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            pass
    raise SubmissionError(f"{what}: created_at {one_line(str(value), 40)!r} is not an ISO date-time")
