"""The four DAWNBench objectives, how they are ranked and how they are shown.

- ``train-time``: hours of the first TSV row at or above the target (stored in seconds), shown ``h:mm:ss``;
- ``train-cost``: that time x ``costPerHour``, in USD, shown ``$0.00``;
- ``latency``: milliseconds per example (batch 1), shown with 4 decimals;
- ``inference-cost``: USD to process 10,000 examples (cost per example x 10,000), shown ``$0.00``.

Smaller is better. Ties go to the earlier submission (its date, then the order in which entries were stored),
and every row gets its own rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from daybreak.errors import ConfigError


def format_hms(seconds: float) -> str:
    """``h:mm:ss`` like DAWNBench (hours not wrapped at 24), rounded to the nearest second."""
    total = int(math.floor(seconds + 0.5))
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}"


def format_usd(usd: float) -> str:
    return f"${usd:,.2f}"


def format_ms(ms: float) -> str:
    return f"{ms:.4f}"


@dataclass(frozen=True)
class Objective:
    name: str
    title: str
    column: str  # Entry attribute / database column holding the value
    unit: str  # unit of the JSON "value"
    kind: str  # "train" or "inference"
    header: str  # the value column's heading
    fmt: Callable[[float], str]

    def display(self, value: float) -> str:
        return self.fmt(value)


OBJECTIVES: dict[str, Objective] = {
    o.name: o for o in (
        Objective("train-time", "Training time", "time_to_target_s", "seconds", "train", "Time to target", format_hms),
        Objective("train-cost", "Training cost", "train_cost_usd", "USD", "train", "Cost (USD)", format_usd),
        Objective("latency", "Inference latency", "latency_ms", "ms", "inference", "1-example latency (ms)", format_ms),
        Objective("inference-cost", "Inference cost", "inference_cost_10k_usd", "USD", "inference",
                  "Cost for 10,000 examples (USD)", format_usd),
    )
}


def get_objective(name: str) -> Objective:
    try:
        return OBJECTIVES[name]
    except KeyError:
        raise ConfigError(f"unknown objective {name!r}; known: {', '.join(OBJECTIVES)}") from None


def sort_key(value: float, submitted_at: Any, entry_id: int) -> tuple:
    """Smaller value first; ties: the earlier submission, then the entry stored first."""
    return (value, submitted_at, entry_id)


def rank_entries(entries: list[Any], objective: Objective, top: int | None = None) -> list[dict[str, Any]]:
    """Entries (anything with the Entry attributes) -> ranked rows, sorted here (the store sorts the same way)."""
    valued = [e for e in entries if getattr(e, objective.column, None) is not None]
    valued.sort(key=lambda e: sort_key(getattr(e, objective.column), e.submitted_at, e.id))
    if top is not None:
        valued = valued[:top]
    return [row(e, objective, rank) for rank, e in enumerate(valued, start=1)]


def row(entry: Any, objective: Objective, rank: int) -> dict[str, Any]:
    """One leaderboard row, as `daybreak leaderboard show --json` and /api/ give it."""
    value = float(getattr(entry, objective.column))
    return {
        "rank": rank,
        "value": value,
        "unit": objective.unit,
        "display": objective.display(value),
        "model": entry.model,
        "hardware": entry.hardware,
        "framework": entry.framework,
        "author": entry.author,
        "date": entry.submitted_at.date().isoformat(),
        "source": entry.source,
        "entry_id": entry.id,
        "task": entry.task,
        "objective": objective.name,
        "accuracy": entry.accuracy,
    }


def leaderboard(store, task: str, objective: str | Objective, top: int | None = None) -> list[dict[str, Any]]:
    """Ranked rows of one task x objective from the store."""
    obj = objective if isinstance(objective, Objective) else get_objective(objective)
    ranked = store.ranked(task, obj.column, limit=top)
    return [row(r.entry, obj, rank) for rank, r in enumerate(ranked, start=1)]
