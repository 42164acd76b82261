"""The four DAWNBench objectives and daybreak's two energy objectives, how they are ranked and how they are shown.

- ``train-time``: hours of the first TSV row at or above the target (stored in seconds), shown ``h:mm:ss``;
- ``train-cost``: that time x ``costPerHour``, in USD, shown ``$0.00`` (under a cent: three significant digits);
- ``latency``: milliseconds per example (batch 1), shown with 4 decimals;
- ``inference-cost``: USD to process 10,000 examples (cost per example x 10,000), shown ``$0.00``;
- ``train-energy``: joules to the target under DAWNBench's clock, from daybreak's hardware counters, shown
  ``12.3 kJ`` with the kinds the counters cover (``gpu+cpu_package``);
- ``inference-energy``: joules to process 10,000 examples at batch 1, likewise.

Only daybreak records carry energy (a DAWNBench file has none): an entry without it is not on the energy tables.
Counters differ between machines (a GPU's board, a CPU package, DRAM where it exists), so each row says what its
joules cover.

Smaller is better. Ties go to the earlier submission (its date, then the order in which entries were stored),
and every row gets its own rank. The date that breaks ties is the one the host can vouch for: a file's own date
when the host imports it from the command line, the time the server received it for an upload.

Every row says its provenance (``reproduced``, ``daybreak-run``, ``self-reported``) and can be filtered on it. A
multi-run entry (a ``daybreak repeat`` directory) ranks on the olympic mean of its runs and carries N, the CV and
the fraction that reached the target; where two adjacent rows both have several runs, the lower one carries the
p-value of Welch's t-test between them (the test ``daybreak compare`` uses) and whether it is below 0.05.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeGuard

from daybreak.errors import ConfigError
from daybreak.leaderboard.ranking.query import BoardQuery, QueryError
from daybreak.leaderboard.ranking.query import parse_provenance as parse_provenance  # the CLI's and the web's reader
from daybreak.leaderboard.ingest.submission import PROVENANCE_SELF

if TYPE_CHECKING:
    from daybreak.leaderboard.store.database import Store


NOT_A_NUMBER = "\u2014"  # what a value that is not a finite number shows (never stored since the bounds)


def format_hms(seconds: float) -> str:
    """``h:mm:ss`` like DAWNBench (hours not wrapped at 24), rounded to the nearest second; below a minute with
    milliseconds (``0:00:00.412``), so that sub-second entries do not all show ``0:00:00``."""
    if not math.isfinite(seconds):
        return NOT_A_NUMBER
    if seconds < 59.9995:
        ms = int(math.floor(seconds * 1000 + 0.5))
        return f"0:00:{ms // 1000:02d}.{ms % 1000:03d}"
    total = int(math.floor(seconds + 0.5))
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}"


def format_usd(usd: float) -> str:
    """``$1,234.50``; under a cent with three significant digits (``$0.00421``, ``$0.0000208``), so that cheap
    entries do not all show ``$0.00``."""
    if not math.isfinite(usd):
        return NOT_A_NUMBER
    if 0 < abs(usd) < 0.01:
        decimals = 2 - math.floor(math.log10(abs(usd)))
        return f"${usd:.{decimals}f}" if decimals <= 12 else f"${usd:.3g}"
    return f"${usd:,.2f}"


def format_ms(ms: float) -> str:
    return f"{ms:.4f}" if math.isfinite(ms) else NOT_A_NUMBER


def format_joules(j: float) -> str:
    """``812 J``, ``12.35 kJ``, ``4.2 MJ``: four significant digits at most."""
    if not math.isfinite(j):
        return NOT_A_NUMBER
    for scale, unit in ((1e9, "GJ"), (1e6, "MJ"), (1e3, "kJ")):
        if abs(j) >= scale:
            return f"{j / scale:.4g} {unit}"
    return f"{j:.4g} J"


@dataclass(frozen=True)
class Objective:
    name: str
    title: str
    column: str  # Entry attribute / database column holding the value
    unit: str  # unit of the JSON "value"
    kind: str  # "train" or "inference"
    header: str  # the value column's heading
    fmt: Callable[[float], str]
    noun: str = "value"  # what a ratio to a reference entry compares: "3.2x the reference's time"

    def display(self, value: float) -> str:
        return self.fmt(value)


OBJECTIVES: dict[str, Objective] = {
    o.name: o for o in (
        Objective("train-time", "Training time", "time_to_target_s", "seconds", "train", "Time to target", format_hms,
                  "time"),
        Objective("train-cost", "Training cost", "train_cost_usd", "USD", "train", "Cost (USD)", format_usd, "cost"),
        Objective("latency", "Inference latency", "latency_ms", "ms", "inference", "1-example latency (ms)", format_ms,
                  "latency"),
        Objective("inference-cost", "Inference cost", "inference_cost_10k_usd", "USD", "inference",
                  "Cost for 10,000 examples (USD)", format_usd, "cost"),
        Objective("train-energy", "Training energy", "train_energy_j", "J", "train", "Energy to target", format_joules,
                  "energy"),
        Objective("inference-energy", "Inference energy", "inference_energy_10k_j", "J", "inference",
                  "Energy for 10,000 examples", format_joules, "energy"),
    )
}


ENERGY_OBJECTIVES = ("train-energy", "inference-energy")


def unranked_reason(entry: Any, objective: Objective) -> str:
    """Why ``entry`` has no place on ``objective``'s table, in words true for that objective."""
    reached = getattr(entry, "time_to_target_s", None) is not None or objective.kind == "inference"
    notes: list[str] = getattr(entry, "notes", None) or []
    if objective.name in ENERGY_OBJECTIVES:
        for note in notes:
            if note.startswith("no energy"):  # the importer's note: "no energy: not ranked on X (why)" or "...: why"
                why = note[note.index("(") + 1:-1] if note.endswith(")") and "(" in note else note.split(": ", 1)[-1]
                return f"no energy: {why}"
        if getattr(entry, "source_format", "") == "dawnbench-v1":
            return "no energy figure: DAWNBench submissions carry none"
        if getattr(entry, "source_format", "") == "mlperf-training":
            return ("no energy figure: MLPerf Training results are imported without energy (MLPerf Power's logs are "
                    "not read)")
        if not reached:
            return "did not reach the target"
        return "no energy counter was read for it"
    for note in notes:
        if note.startswith("not scored: "):  # an MLPerf result that is not valid by its rules (import-mlperf's note)
            return note
    if not reached:
        return "did not reach the target"
    if objective.name in ("train-cost", "inference-cost"):
        return "no price given"
    return "no value in the ranked range"


def get_objective(name: str) -> Objective:
    try:
        return OBJECTIVES[name]
    except KeyError:
        raise ConfigError(f"unknown objective {name!r}; known: {', '.join(OBJECTIVES)}") from None


def sort_key(value: float, submitted_at: Any, entry_id: int) -> tuple[float, Any, int]:
    """Smaller value first; ties: the earlier submission, then the entry stored first."""
    return (value, submitted_at, entry_id)


def _rankable(value: Any) -> TypeGuard[float]:
    from daybreak.leaderboard.store.database import MAX_RANKED_VALUE

    return isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value <= MAX_RANKED_VALUE


def rank_entries(entries: list[Any], objective: Objective, top: int | None = None,
                 provenance: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Entries (anything with the Entry attributes) -> ranked rows, sorted here (the store sorts the same way)."""
    valued = [e for e in entries if _rankable(getattr(e, objective.column, None))
              and (not provenance or (getattr(e, "provenance", None) or PROVENANCE_SELF) in provenance)]
    valued.sort(key=lambda e: sort_key(getattr(e, objective.column), getattr(e, "ranked_at", None) or e.submitted_at,
                                       e.id))
    if top is not None:
        valued = valued[:top]
    return rows_from(valued, objective)


def _samples(entry: Any, objective: Objective) -> list[float]:
    """What the significance test compares for ``objective``: the runs' times, or their costs."""
    from daybreak.leaderboard.store.database import run_times

    times = run_times(entry)
    if objective.name == "train-time":
        return times
    if objective.name == "train-cost" and getattr(entry, "cost_per_hour", None):
        return [t / 3600.0 * entry.cost_per_hour for t in times]
    return []


def significance(above: Any, below: Any, objective: Objective) -> dict[str, Any] | None:
    """Welch's t-test (daybreak compare's) between two adjacent multi-run rows; None unless both have >= 2 runs."""
    from daybreak.analysis.compare import ALPHA, compare_times

    a, b = _samples(above, objective), _samples(below, objective)
    if len(a) < 2 or len(b) < 2:
        return None
    res = compare_times(a, b, ALPHA)
    p = res["welch_p"]
    significant = (p < ALPHA) if p is not None else res["verdict"] in ("A faster", "B faster")
    return {"p_value": p, "significant": significant, "alpha": ALPHA, "test": "Welch's t-test (two-sided)"}


def rules_label(entry: Any) -> str:
    """The clock an entry's time follows: "DAWNBench v1", "MLPerf v4.0 closed"."""
    if (getattr(entry, "clock_rules", None) or "dawnbench") == "dawnbench":
        return "DAWNBench v1"
    round_ = getattr(entry, "mlperf_round", None) or ""
    if round_ and not round_.startswith("v"):
        round_ = f"v{round_}"
    return " ".join(p for p in ("MLPerf", round_, getattr(entry, "division", None) or "") if p)


def system_fields(entry: Any) -> dict[str, Any]:
    """The structured system and rule set of a row (schema 4 columns; "" / None where not stated)."""
    return {"accelerator": getattr(entry, "accelerator", None) or "",
            "accelerator_count": getattr(entry, "accelerator_count", None),
            "cpu": getattr(entry, "cpu", None) or "", "framework_name": getattr(entry, "framework_name", None) or "",
            "framework_version": getattr(entry, "framework_version", None) or "",
            "cloud_instance": getattr(entry, "cloud_instance", None) or "", "rules": rules_label(entry),
            "clock_rules": getattr(entry, "clock_rules", None) or "dawnbench",
            "mlperf_round": getattr(entry, "mlperf_round", None) or "",
            "division": getattr(entry, "division", None) or "",
            "availability": getattr(entry, "availability", None) or ""}


def row(entry: Any, objective: Objective, rank: int, above: Any = None, compare: bool = True) -> dict[str, Any]:
    """One leaderboard row, as `daybreak leaderboard show --json` and /api/ give it; ``above``: the entry ranked just
    before it, compared with Welch's test when ``compare``."""
    from daybreak.leaderboard.store.database import run_times

    value = float(getattr(entry, objective.column))
    runs = None
    if getattr(entry, "runs_n", None):
        reached = entry.runs_reached or 0
        runs = {"n": entry.runs_n, "reached": reached, "reached_fraction": reached / entry.runs_n,
                "cv": entry.runs_cv, "times_s": run_times(entry), "score": "olympic mean"}
    status = getattr(entry, "reproduction_status", None)
    reproduction = None
    if status or getattr(entry, "reproduction_of", None):
        reproduction = {"status": status, "ratio": getattr(entry, "reproduction_ratio", None),
                        "reproduced_by": getattr(entry, "reproduced_by", None),
                        "reproduction_of": getattr(entry, "reproduction_of", None)}
    test = significance(above, entry, objective) if above is not None and compare else None
    display = objective.display(value)
    clock_rules = getattr(entry, "clock_rules", None) or "dawnbench"
    covers = getattr(entry, "energy_covers", None) or None
    if objective.name in ENERGY_OBJECTIVES and covers:
        display += f" ({covers})"
    return {
        "rank": rank,
        "value": value,
        "unit": objective.unit,
        "display": display,
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
        "provenance": getattr(entry, "provenance", None) or PROVENANCE_SELF,
        "provenance_detail": getattr(entry, "provenance_detail", None) or "",
        "runs": runs,
        "rule_set": rules_of(entry, clock_rules),  # "rules" (system_fields): the short label
        "reproduction": reproduction,
        **system_fields(entry),
        "p_value_vs_above": None if test is None else test["p_value"],
        "significant_vs_above": None if test is None else test["significant"],
        **({"energy_covers": covers} if objective.name in ENERGY_OBJECTIVES else {}),
    }


def rules_of(entry: Any, clock_rules: str) -> dict[str, Any]:
    """The rule set a row's time follows: DAWNBench v1's clock, or MLPerf Training's (round, division,
    availability, and the target the row reached, which on a DAWNBench board is not the board's)."""
    if clock_rules != "mlperf":
        return {"clock_rules": clock_rules, "label": "DAWNBench v1"}
    from daybreak.metrics import metric_named

    metric = metric_named(entry.metric)
    parts = [p for p in (getattr(entry, "mlperf_round", None), getattr(entry, "division", None)) if p]
    label = "MLPerf Training " + " ".join(parts) + (" division" if getattr(entry, "division", None) else "")
    return {"clock_rules": clock_rules, "label": label.strip(),
            "mlperf_round": getattr(entry, "mlperf_round", None) or None,
            "division": getattr(entry, "division", None) or None,
            "availability": getattr(entry, "availability", None) or None,
            "target": entry.target, "target_label": metric.target_label(entry.target) if metric else None}


def rows_from(entries: Sequence[Any], objective: Objective, first_rank: int = 1, above: Any = None
              ) -> list[dict[str, Any]]:
    """Rows of already-ranked entries; ``above``: the entry ranked just before the first one (for the test)."""
    out = []
    for i, e in enumerate(entries):
        out.append(row(e, objective, first_rank + i, above))
        above = e
    return out


def leaderboard(store: Store, task: str, objective: str | Objective, top: int | None = None, offset: int = 0,
                provenance: Sequence[str] | None = None, query: BoardQuery | None = None) -> list[dict[str, Any]]:
    """Rows ``offset+1`` .. ``offset+top`` of one task x objective from the store, filtered and ordered by
    ``query``; each row's rank is its rank on the objective among the rows the filters keep. Adjacent rows are
    compared (Welch's test) only in rank order."""
    obj = objective if isinstance(objective, Objective) else get_objective(objective)
    query = query or BoardQuery()
    if provenance:
        query = query.replace(provenance=tuple(provenance))
    start = max(0, offset - 1) if query.ranked_order else offset
    limit = None if top is None else top + (offset - start)
    ranked = store.ranked(task, obj.column, limit=limit, offset=start, query=query)
    above = None
    if offset > start and ranked:
        above, ranked = ranked[0].entry, ranked[1:]
    return [row(r.entry, obj, r.rank, above if i == 0 else ranked[i - 1].entry, compare=query.ranked_order)
            for i, r in enumerate(ranked)]


def with_reference(rows: list[dict[str, Any]], reference: Any, objective: Objective) -> list[dict[str, Any]]:
    """Each row's value as a ratio to ``reference``'s (an entry with a positive value on ``objective``): the
    rows gain ``ref_ratio`` and ``ref_text`` ("3.2x the reference's time")."""
    ref_value = float(getattr(reference, objective.column))
    for r in rows:
        ratio = r["value"] / ref_value
        r["ref_ratio"] = ratio
        r["ref_text"] = f"{ratio:.3g}x the reference's {objective.noun}"
    return rows


def reference_value(reference: Any, task: str, objective: Objective) -> float:
    """The value ``reference`` (a list row, or None) has on this board; a one-line QueryError when it has none."""
    if reference is None:
        raise QueryError("ref: no such entry")
    value = getattr(reference, objective.column, None) if reference.task == task else None
    if not _rankable(value) or value <= 0:
        raise QueryError(f"ref: entry {reference.id} has no {objective.noun} on the {task} {objective.name} board")
    return float(value)
