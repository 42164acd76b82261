"""ScoreAnalysis: the record of `daybreak analyze score` (score.json), computed by daybreak.analysis.score.

An AlgoPerf-style cross-task score: for each task, each submission's time-to-target divided by the fastest
submission's (its performance ratio r); the score is the mean over the tasks of max(0, (r_max - r) / (r_max - 1)),
0 for a task it never solved. Unsolved times are ``None`` here (JSON has no infinity).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from daybreak.records.base import Record
from daybreak.records.provenance import Provenance

JSON_FILE = "score.json"


class ScoreCell(BaseModel):
    """One submission on one task: its runs and what they score."""

    task: str  # the task's name, or NAME@TARGET when the runs of a task have several targets
    n_runs: int = 0  # 0: the submission has no run on this task (it scores 0 there)
    n_reached: int = 0
    times_s: list[float | None] = Field(default_factory=list)  # each run's time-to-target (None: not reached)
    time_s: float | None = None  # the median of times_s, an unreached run counting as infinitely slow; None: unsolved
    ratio: float | None = None  # time_s / the fastest submission's time on this task; None: unsolved
    task_score: float = 0.0  # max(0, (r_max - ratio) / (r_max - 1)); 0 when unsolved
    run_dirs: list[str] = Field(default_factory=list)


class ScoreSubmission(BaseModel):
    name: str
    rank: int  # 1 = the highest score; ties share nothing: the order is score, then tasks solved, then name
    score: float  # in [0, 1], by ScoreAnalysis.numerics (what ranks): exact, or as AlgoPerf's code computes it
    tasks_solved: int
    score_exact: float | None = None  # the mean of the task scores = the normalized area under the profile
    score_official: float | None = None  # AlgoPerf's code: the trapezoid of the profile on its 100-point tau grid
    cells: list[ScoreCell]  # one per task, in the order of ScoreAnalysis.tasks
    profile: list[tuple[float, float]] = Field(default_factory=list)  # (tau, fraction of tasks with r <= tau) at
    # every step of the profile from tau = 1 to r_max (exact), or at the official grid's 100 points (official)


class ScoreAnalysis(Record):
    FILE = JSON_FILE
    WHAT = "score"

    schema_version: int = 1
    kind: Literal["daybreak.score"] = "daybreak.score"
    r_max: float
    rules: str  # the rule set whose clock gave every time (dawnbench, mlperf)
    by: str  # what made a submission: recipe, optimizer, arm, label (NAME=PATH labels always win)
    numerics: Literal["exact", "official"] = "exact"  # how the profile is integrated (see daybreak.analysis.score)
    tasks: list[str]
    best_times_s: dict[str, float | None]  # task -> the fastest submission's time (None: nobody solved it)
    submissions: list[ScoreSubmission]  # best score first
    method: str = ("AlgoPerf's benchmark score (the integrated performance profile): per task, a submission's time "
                   "is the median time-to-target of its runs, an unreached run counting as infinitely slow (so a "
                   "task is solved when more than half of its runs reached the target); r = time / the fastest "
                   "submission's time on that task; task score = max(0, (r_max - r) / (r_max - 1)), 0 for an "
                   "unsolved task or one without runs; score = the mean of the task scores over every task, which "
                   "equals 1 / (r_max - 1) x the integral from 1 to r_max of the performance profile rho(tau) = "
                   "the fraction of tasks with r <= tau")
    notes: list[str] = Field(default_factory=list)
    provenance: Provenance
