"""`daybreak leaderboard score`: AlgoPerf's cross-task score of the leaderboard's own entries.

The leaderboard ranks each task on its own; this view treats the entries of one author (``--by author``, the
default), one system (``--by hardware``), one model or one framework as one multi-task submission and scores it
across the tasks the way `daybreak analyze score` scores runs (:mod:`daybreak.analysis.stats`): per task, the
group's time is its best ranked training time there (a multi-run entry's time is already the olympic mean of its
runs), r = that time / the best group's, and the score is the mean over the tasks of max(0, (r_max - r) /
(r_max - 1)), 0 on a task where the group has no ranked entry. Entries with an empty value of the grouping field
(a daybreak run imported without ``--author``) take no part. Names are grouped as a reader reads them
(daybreak.leaderboard.ingest.text_rules.fold: "Alice", "ALICE" and "Ａｌｉｃｅ" are one author), shown as the group's fastest
entry writes it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

from daybreak.analysis.stats import (
    R_MAX, UNSOLVED, algoperf_score, best_times, performance_ratio, r_max_option, task_score,
)
from daybreak.errors import ConfigError
from daybreak.leaderboard.ranking.objectives import OBJECTIVES, format_hms
from daybreak.leaderboard.tasks import leaderboard_task, task_names
from daybreak.leaderboard.ingest.text_rules import fold

if TYPE_CHECKING:
    from daybreak.leaderboard.store.database import Store

GROUP_BY = ("author", "hardware", "model", "framework")


def leaderboard_score(store: Store, by: str = "author", tasks: Sequence[str] | None = None, r_max: float = R_MAX,
                      provenance: Sequence[str] | None = None) -> dict[str, Any]:
    """{"r_max", "by", "tasks", "best_times_s", "groups": [{"rank", "name", "score", "tasks_solved", "cells"}],
    "left_out", "method"}: every group of ranked training entries, best score first."""
    if by not in GROUP_BY:
        raise ConfigError(f"--by {by}: choose one of {', '.join(GROUP_BY)}")
    r_max = r_max_option(r_max)
    wanted = [leaderboard_task(t).name for t in tasks] if tasks else task_names()
    column = OBJECTIVES["train-time"].column
    times: dict[str, dict[str, float]] = {}
    entry_of: dict[tuple[str, str], int] = {}
    shown: dict[str, str] = {}  # a group's key -> its name as first seen (its fastest entry's)
    left_out = 0
    for task in wanted:
        for r in store.ranked(task, column, provenance=provenance):  # fastest first
            key = fold(str(getattr(r.entry, by, "") or ""))
            if not key:
                left_out += 1
                continue
            name = shown.setdefault(key, " ".join(str(getattr(r.entry, by)).split()))
            row = times.setdefault(name, {})
            if r.value < row.get(task, UNSOLVED):
                row[task] = float(r.value)
                entry_of[(name, task)] = r.entry.id
    # the tasks: those asked for, else every task where some group has a ranked entry
    tasks_scored = wanted if tasks else [t for t in wanted if any(t in row for row in times.values())]
    best = best_times(times, tasks_scored)
    groups: list[dict[str, Any]] = []
    for name, row in times.items():
        cells, ratios = [], []
        for task in tasks_scored:
            t = row.get(task, UNSOLVED)
            ratio = performance_ratio(t, best[task])
            ratios.append(ratio)
            cells.append({"task": task, "time_s": t if math.isfinite(t) else None,
                          "ratio": ratio if math.isfinite(ratio) else None, "task_score": task_score(ratio, r_max),
                          "entry_id": entry_of.get((name, task))})
        groups.append({"name": name, "score": algoperf_score(ratios, r_max) if ratios else 0.0,
                       "tasks_solved": sum(1 for r in ratios if math.isfinite(r)), "cells": cells})
    groups.sort(key=lambda g: (-g["score"], -g["tasks_solved"], g["name"]))
    for rank, g in enumerate(groups, start=1):
        g["rank"] = rank
    return {"r_max": r_max, "by": by, "tasks": tasks_scored,
            "best_times_s": {t: (v if math.isfinite(v) else None) for t, v in best.items()},
            "groups": [{"rank": g.pop("rank"), **g} for g in groups], "left_out": left_out,
            "method": f"entries grouped by {by}; per task the group's best ranked training time; r = it / the best "
                      f"group's; score = mean over the tasks of max(0, (r_max - r) / (r_max - 1)), 0 where the "
                      f"group has no ranked entry (AlgoPerf's integrated performance profile)"}


def format_score(result: dict[str, Any], top: int | None = None) -> str:
    tasks = result["tasks"]
    lines = [f"AlgoPerf score of the leaderboard's training entries grouped by {result['by']} "
             f"(r_max {result['r_max']:g}; 1 = the fastest on every task)"]
    if not result["groups"]:
        return "\n".join(lines + ["no ranked training entries" + (f" with a {result['by']}" if result["left_out"]
                                                                      else "")])
    header = ["#", result["by"], "score", "solved"] + tasks
    body = []
    for g in result["groups"][:top]:
        cells = ["-" if c["time_s"] is None else f"{format_hms(c['time_s'])} (r {c['ratio']:.2f})" for c in g["cells"]]
        body.append([str(g["rank"]), _cut(g["name"], 40), f"{g['score']:.4f}", f"{g['tasks_solved']}/{len(tasks)}",
                     *cells])
    widths = [max(len(x) for x in col) for col in zip(header, *body)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in body]
    if len(tasks) == 1:
        lines.append(f"note: one task only ({tasks[0]}): the score is trivial (1 for the fastest group)")
    if result["left_out"]:
        lines.append(f"note: {result['left_out']} ranked entries have no {result['by']} and take no part")
    return "\n".join(lines)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
