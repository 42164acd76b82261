"""A training board's two plots, as inline SVG drawn here (no plotting library), like the entry page's curve:

- **time vs cost** (log-log): every entry with a price, and the Pareto front, the entries that no other entry
  beats on both (faster *and* no dearer, or cheaper *and* no slower), drawn as the staircase that bounds what
  has been reached and labelled with their models; entries without a price are left out (the caption says how
  many);
- **the record over time**: the best time as of each date, a step line, with each entry that set a record marked.

Every point links to its entry. Everything placed in the SVG is a number formatted here or a text passed through
``markupsafe.escape``.

Impossible values (:func:`impossible`: a time below the 10 ms any run takes, a cost below what the cheapest real
machine charges for that time; a database may hold them from before daybreak refused them) do not set the axes: such
a point is drawn as a hollow triangle at the edge of the plot, its tooltip says why, and it takes no part in the
Pareto front or the record line. One 1e-301 USD entry would otherwise squash every other point into a corner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from typing import Any, Callable, Sequence

from markupsafe import Markup, escape

from daybreak.leaderboard.ingest.plausibility import MIN_CLOCK_S, min_usd_per_hour
from daybreak.leaderboard.ranking.objectives import format_hms, format_usd

WIDTH, HEIGHT = 720, 380
LEFT, RIGHT, TOP, BOTTOM = 72, 150, 20, 48  # the right margin holds the front's labels
FRONT, POINT, RECORD, OFF_SCALE = "#c0392b", "#1f6fb2", "#17613a", "#7d3c98"


@dataclass(frozen=True)
class Point:
    entry_id: int
    model: str
    time_s: float
    cost_usd: float | None
    day: date


def points_of(rows: Sequence[Any]) -> list[Point]:
    """Board rows (list rows or entries, with a time) -> plot points."""
    return [Point(int(r.id), str(r.model), float(r.time_to_target_s), r.train_cost_usd, r.submitted_at.date())
            for r in rows if getattr(r, "time_to_target_s", None) is not None]


def impossible_time(p: Point) -> str | None:
    """Why ``p``'s time cannot be real, or None."""
    if not p.time_s >= MIN_CLOCK_S:
        return f"a time of {p.time_s:g} s is below the {MIN_CLOCK_S:g} s any run takes"
    return None


def impossible(p: Point) -> str | None:
    """Why ``p``'s time or cost cannot be real (then the plots do not scale to it), or None."""
    if impossible_time(p) is not None:
        return impossible_time(p)
    if p.cost_usd is not None and 0 < p.cost_usd < p.time_s / 3600.0 * min_usd_per_hour():
        return (f"{format_usd(p.cost_usd)} is less than the cheapest machine costs for {format_hms(p.time_s)} "
                f"({min_usd_per_hour():g} USD/hour)")
    return None


def pareto_front(points: Sequence[Point]) -> list[Point]:
    """The points with a positive cost that no other point dominates (no slower and no dearer, and better on one),
    by time. Two identical points are both on the front."""
    front: list[Point] = []
    best_cost, best_time = math.inf, math.nan
    for p in sorted((p for p in points if p.cost_usd and p.cost_usd > 0), key=lambda p: (p.time_s, p.cost_usd,
                                                                                          p.entry_id)):
        cost = p.cost_usd
        assert cost is not None  # priced points only
        if cost < best_cost or (cost == best_cost and p.time_s == best_time):
            front.append(p)
            best_cost, best_time = cost, p.time_s
    return front


def record_history(points: Sequence[Point]) -> list[Point]:
    """The points that set a record when they were submitted (faster than every earlier one), by date; on one
    day, only the fastest of that day can."""
    records: list[Point] = []
    for p in sorted(points, key=lambda p: (p.day, p.time_s, p.entry_id)):
        if not records or p.time_s < records[-1].time_s:
            records.append(p)
    return records


# --- axes ------------------------------------------------------------------------------------------------------

_DURATION_TICKS = [1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 18000, 36000, 72000, 180000,
                   360000, 720000, 1800000, 3600000]


def _duration_label(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:g} s"
    if seconds < 3600:
        return f"{seconds / 60:g} min"
    return f"{seconds / 3600:g} h"


def _thin(ticks: list[float], most: int = 8) -> list[float]:
    step = max(1, math.ceil(len(ticks) / most))
    return ticks[::step]


def _log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks in [lo, hi], thinned to at most 8."""
    out = [m * 10.0 ** k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1) for m in (1, 2, 5)]
    return _thin([t for t in out if lo <= t <= hi])


class _LogAxis:
    def __init__(self, values: Sequence[float], start: float, length: float, flip: bool = False):
        lo, hi = min(values), max(values)
        self.lo, self.hi = math.log10(lo) - 0.15, math.log10(hi) + 0.15  # a margin around the points
        self.start, self.length, self.flip = start, length, flip

    def __call__(self, v: float) -> float:
        """The position of ``v``; a value outside the axis (an impossible one) at the axis's nearer end."""
        f = (math.log10(v) - self.lo) / (self.hi - self.lo) if v > 0 else 0.0
        f = min(1.0, max(0.0, f))
        return self.start + (1 - f if self.flip else f) * self.length

    @property
    def bounds(self) -> tuple[float, float]:
        return 10 ** self.lo, 10 ** self.hi


def _frame(title: str, x_label: str, y_label: str) -> list[str]:
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="boardplot" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
        f'height="{HEIGHT}" role="img" aria-label="{escape(title)}">', f"<title>{escape(title)}</title>",
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fff" stroke="#999"/>',
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 10}" font-size="12" text-anchor="middle">{x_label}</text>',
        f'<text x="14" y="{TOP + plot_h / 2:.1f}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {TOP + plot_h / 2:.1f})">{y_label}</text>',
    ]


def _x_tick(x: float, label: str) -> list[str]:
    bottom = HEIGHT - BOTTOM
    return [f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{bottom}" stroke="#eee"/>',
            f'<text x="{x:.1f}" y="{bottom + 16}" font-size="11" text-anchor="middle">{escape(label)}</text>']


def _y_tick(y: float, label: str) -> list[str]:
    return [f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#eee"/>',
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{escape(label)}</text>']


def _time_ticks(axis: _LogAxis) -> list[float]:
    lo, hi = axis.bounds
    return _thin([t for t in _DURATION_TICKS if lo <= t <= hi])


def _dot(x: float, y: float, p: Point, href: str, cls: str, color: str, r: float, tip: str) -> str:
    return (f'<a href="{escape(href)}"><circle class="{cls}" data-entry="{p.entry_id}" cx="{x:.2f}" cy="{y:.2f}" '
            f'r="{r}" fill="{color}" fill-opacity="0.8"><title>{escape(tip)}</title></circle></a>')


def _off_scale(x: float, y: float, p: Point, href: str, tip: str, why: str) -> str:
    """An impossible point: a hollow triangle where the axes end."""
    d = f"M {x:.2f} {y - 6:.2f} L {x + 5.5:.2f} {y + 4:.2f} L {x - 5.5:.2f} {y + 4:.2f} Z"
    text = f"{tip} - impossible: {why}; drawn at the edge of the plot, off its scale"
    return (f'<a href="{escape(href)}"><path class="off-scale" data-entry="{p.entry_id}" d="{d}" fill="none" '
            f'stroke="{OFF_SCALE}" stroke-width="1.5"><title>{escape(text)}</title></path></a>')


class _Labels:
    """Point labels that overlap neither each other nor a point: each goes above and right of its point, else
    above and left, else is left out (the point's tooltip still names it)."""

    def __init__(self, dots: Sequence[tuple[float, float]]) -> None:
        self.boxes = [(x - 5, y - 5, x + 5, y + 5) for x, y in dots]

    def place(self, x: float, y: float, text: str, color: str) -> str:
        short = text if len(text) <= 28 else text[:27] + "\u2026"
        width = 5.6 * len(short)
        for left, anchor, tx in ((x + 5, "start", x + 5), (x - 5 - width, "end", x - 5)):
            box = (left, y - 17, left + width, y - 6)
            if box[0] >= 0 and box[2] <= WIDTH and box[1] >= 0 and not any(_overlap(box, b) for b in self.boxes):
                self.boxes.append(box)
                return (f'<text x="{tx:.1f}" y="{y - 8:.1f}" font-size="10" fill="{color}" '
                        f'text-anchor="{anchor}">{escape(short)}</text>')
        return ""


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


# --- the two plots ---------------------------------------------------------------------------------------------


def cost_time_svg(points: Sequence[Point], link: Callable[[int], str]) -> Markup:
    """Time vs cost, log-log, with the Pareto front as a staircase; "" when no point has a positive cost."""
    priced = [p for p in points if p.cost_usd and p.cost_usd > 0]
    odd = {p.entry_id: why for p in priced if (why := impossible(p)) is not None}
    sane = [p for p in priced if p.entry_id not in odd]
    if not sane:
        return Markup("")
    front = pareto_front(sane)
    on_front = {p.entry_id for p in front}
    sx = _LogAxis([p.time_s for p in sane], LEFT, WIDTH - LEFT - RIGHT)
    sy = _LogAxis([p.cost_usd for p in sane], TOP, HEIGHT - TOP - BOTTOM, flip=True)  # type: ignore[misc]
    parts = _frame("Training time vs. cost, with the Pareto front", "time to target (log scale)",
                   "cost in USD (log scale)")
    for t in _time_ticks(sx):
        parts += _x_tick(sx(t), _duration_label(t))
    for c in _log_ticks(*sy.bounds):
        parts += _y_tick(sy(c), f"${c:,.0f}" if c >= 1 else f"${c:g}")
    steps = [f"M {sx(front[0].time_s):.2f} {TOP}"]
    for a, b in zip(front, front[1:] + [None]):
        steps.append(f"V {sy(a.cost_usd):.2f} H {sx(b.time_s) if b else WIDTH - RIGHT:.2f}")  # type: ignore[arg-type]
    parts.append(f'<path class="pareto-front" d="{" ".join(steps)}" fill="none" stroke="{FRONT}" stroke-width="1.5"/>')
    labels = _Labels([(sx(p.time_s), sy(p.cost_usd)) for p in priced])  # type: ignore[arg-type]
    for p in sorted(priced, key=lambda p: p.entry_id in on_front):  # the front's dots on top
        x, y = sx(p.time_s), sy(p.cost_usd)  # type: ignore[arg-type]
        tip = f"{p.model}: {format_hms(p.time_s)}, {format_usd(p.cost_usd)} ({p.day.isoformat()})"  # type: ignore
        if p.entry_id in odd:
            parts.append(_off_scale(x, y, p, link(p.entry_id), tip, odd[p.entry_id]))
        elif p.entry_id in on_front:
            parts.append(_dot(x, y, p, link(p.entry_id), "front", FRONT, 5, tip + " - on the Pareto front"))
            parts.append(labels.place(x, y, p.model, FRONT))
        else:
            parts.append(_dot(x, y, p, link(p.entry_id), "point", POINT, 3.5, tip))
    parts.append("</svg>")
    return Markup("".join(parts))


def _date_ticks(lo: int, hi: int) -> list[tuple[int, str]]:
    first, last = date.fromordinal(lo), date.fromordinal(hi)
    if last.year - first.year >= 2:
        days = [date(y, 1, 1) for y in range(first.year, last.year + 2)]
        return [(d.toordinal(), str(d.year)) for d in days if lo <= d.toordinal() <= hi]
    months = [date(y, m, 1) for y in range(first.year, last.year + 1) for m in range(1, 13)]
    inside = [(d.toordinal(), f"{d.year}-{d.month:02d}") for d in months if lo <= d.toordinal() <= hi]
    step = max(1, math.ceil(len(inside) / 8))
    return inside[::step]


def record_svg(points: Sequence[Point], link: Callable[[int], str]) -> Markup:
    """The best time as of each date (a step line to the last entry's date), the record-setting entries marked;
    an entry with an impossible time is marked at the bottom edge and sets no record."""
    odd = {p.entry_id: why for p in points if (why := impossible_time(p)) is not None}
    records = record_history([p for p in points if p.entry_id not in odd])
    if not records:
        return Markup("")
    days = [p.day.toordinal() for p in points]
    lo, hi = min(days) - 20, max(days) + 20
    plot_w = WIDTH - LEFT - RIGHT

    def sx(day: int) -> float:
        return LEFT + (day - lo) / (hi - lo) * plot_w

    sy = _LogAxis([p.time_s for p in records], TOP, HEIGHT - TOP - BOTTOM, flip=True)
    parts = _frame("The training-time record over time", "date submitted", "best time to target (log scale)")
    for day, label in _date_ticks(lo, hi):
        parts += _x_tick(sx(day), label)
    for t in _time_ticks(sy):
        parts += _y_tick(sy(t), _duration_label(t))
    steps = [f"M {sx(records[0].day.toordinal()):.2f} {sy(records[0].time_s):.2f}"]
    for r in records[1:]:
        steps.append(f"H {sx(r.day.toordinal()):.2f} V {sy(r.time_s):.2f}")
    steps.append(f"H {sx(max(days)):.2f}")
    parts.append(f'<path class="record-line" d="{" ".join(steps)}" fill="none" stroke="{RECORD}" '
                 'stroke-width="1.5"/>')
    labels = _Labels([(sx(r.day.toordinal()), sy(r.time_s)) for r in records])
    for r in records:
        x, y = sx(r.day.toordinal()), sy(r.time_s)
        tip = f"{r.model}: {format_hms(r.time_s)}, a record on {r.day.isoformat()}"
        parts.append(_dot(x, y, r, link(r.entry_id), "record", RECORD, 4.5, tip))
        parts.append(labels.place(x, y, r.model, RECORD))
    for p in points:
        if p.entry_id in odd:
            x, y = sx(p.day.toordinal()), sy(p.time_s)
            parts.append(_off_scale(x, y, p, link(p.entry_id), f"{p.model}: {format_hms(p.time_s)} "
                                    f"({p.day.isoformat()})", odd[p.entry_id]))
    parts.append("</svg>")
    return Markup("".join(parts))
