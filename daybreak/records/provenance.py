"""Provenance: where an analysis record (repeat, lesion, compare, threshold, scaling, roofline) came from."""

from __future__ import annotations

from datetime import datetime, timezone

from pydantic import BaseModel, Field

from daybreak.measure.system import SystemInfo


class Provenance(BaseModel):
    """Where an analysis came from: the inputs, the command and the machine that computed it."""

    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    command: list[str] = Field(default_factory=list)
    inputs: list[str] = Field(default_factory=list)  # the paths the analysis read
    system: SystemInfo | None = None
