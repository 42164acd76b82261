"""Vendor datasheet peaks (catalog/datasheet_peaks.json) and model FLOPs utilization against them.

The catalog holds, per GPU model, the dense (no sparsity) peak TFLOP/s for fp32 (CUDA cores), tf32, bf16 and fp16
(tensor cores, FP32 accumulate), each row with its source, URL and date. A GPU is found by the name torch reports
(``torch.cuda.get_device_name()``, e.g. "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"). A name no row matches,
or a precision the GPU has no datasheet figure for, gives ``None`` with the reason, never a guess.

These are the vendor's ceilings; ``daybreak peak`` measures what this machine actually reaches (a roofline's
ceiling). MFU against the datasheet is the usual comparison across papers; against the measured peak, the honest one
for this machine. Both have their place; say which.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Mapping

PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16")
ALIASES = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16"}


@dataclass(frozen=True)
class GpuPeaks:
    """One catalog row: a GPU model's dense peak TFLOP/s per precision, and where the figures come from."""

    model: str
    match: tuple[str, ...]  # regular expressions, case-insensitive, searched in the torch device name
    tflops: Mapping[str, float | None]  # precision -> dense TFLOP/s (None: no native support)
    source: str
    url: str
    date: str  # of the datasheet revision (YYYY-MM)
    basis: str  # "datasheet" (as printed, sparsity figures halved), "derived" (e.g. per GPU of a board), "third-party"
    notes: str | None = None
    datasheet_sparse: Mapping[str, float] = field(default_factory=dict)  # the figures as printed "with sparsity"

    def matches(self, device_name: str) -> bool:
        return any(re.search(p, device_name, re.IGNORECASE) for p in self.match)


@dataclass(frozen=True)
class PeakLookup:
    """The datasheet peak for one device name and precision; ``tflops`` None with ``reason`` when unknown."""

    device_name: str
    precision: str
    model: str | None = None
    tflops: float | None = None
    reason: str | None = None
    source: str | None = None
    url: str | None = None
    date: str | None = None
    basis: str | None = None

    @property
    def flops_per_s(self) -> float | None:
        return None if self.tflops is None else self.tflops * 1e12


@dataclass(frozen=True)
class Mfu:
    """Model FLOPs utilization: achieved model FLOP/s / datasheet peak (``value`` None with ``reason``)."""

    value: float | None
    model_flops_per_s: float
    peak: PeakLookup
    reason: str | None = None


def _canonical(precision: str) -> str:
    p = ALIASES.get(precision.lower(), precision.lower())
    if p not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; known: {', '.join(PRECISIONS)}")
    return p


@lru_cache(maxsize=1)
def datasheet_rows() -> tuple[GpuPeaks, ...]:
    """Every catalog row, in file order."""
    text = resources.files("daybreak").joinpath("catalog/datasheet_peaks.json").read_text(encoding="utf-8")
    rows = []
    for item in json.loads(text)["gpus"]:
        rows.append(GpuPeaks(model=item["model"], match=tuple(item["match"]),
                             tflops={p: item["tflops"].get(p) for p in PRECISIONS}, source=item["source"],
                             url=item["url"], date=item["date"], basis=item["basis"], notes=item.get("notes"),
                             datasheet_sparse=dict(item.get("datasheet_sparse") or {})))
    return tuple(rows)


def match_gpu(device_name: str) -> GpuPeaks | None:
    """The row whose patterns match ``device_name`` (the first, should two ever match), else None."""
    return next((row for row in datasheet_rows() if row.matches(device_name)), None)


def datasheet_peak(device_name: str, precision: str) -> PeakLookup:
    """The dense datasheet peak of ``device_name`` (as torch reports it) for ``precision`` (fp32, tf32, bf16,
    fp16; float32/bfloat16/float16 accepted)."""
    p = _canonical(precision)
    row = match_gpu(device_name)
    if row is None:
        known = ", ".join(r.model for r in datasheet_rows())
        return PeakLookup(device_name, p, reason=f"no datasheet peak for {device_name!r}: not in "
                                                 f"catalog/datasheet_peaks.json (known: {known})")
    found = PeakLookup(device_name, p, model=row.model, source=row.source, url=row.url, date=row.date, basis=row.basis)
    value = row.tflops.get(p)
    if value is None:
        return replace(found, reason=f"{row.model} has no {p} peak in its datasheet (no native {p} support)")
    return replace(found, tflops=float(value))


def mfu(model_flops_per_s: float, device_name: str, precision: str) -> Mfu:
    """``model_flops_per_s`` (per GPU: the model's FLOPs per step / seconds per step / GPUs) as a fraction of the
    datasheet peak of ``device_name`` at ``precision``. Unknown GPU or precision: ``value`` None and ``reason``."""
    if not (model_flops_per_s >= 0 and math.isfinite(model_flops_per_s)):
        raise ValueError(f"model_flops_per_s must be a finite number >= 0, not {model_flops_per_s}")
    peak = datasheet_peak(device_name, precision)
    if peak.flops_per_s is None:
        return Mfu(None, model_flops_per_s, peak, peak.reason)
    return Mfu(model_flops_per_s / peak.flops_per_s, model_flops_per_s, peak)


__all__ = ["ALIASES", "GpuPeaks", "Mfu", "PRECISIONS", "PeakLookup", "datasheet_peak", "datasheet_rows",
           "match_gpu", "mfu"]
