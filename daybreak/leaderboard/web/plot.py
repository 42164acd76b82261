"""The accuracy-vs-time curve of a training entry as inline SVG, drawn here (no plotting library).

Everything placed in the SVG is a number formatted here or a label passed through ``markupsafe.escape``.
"""

from __future__ import annotations

import math

from markupsafe import Markup, escape

WIDTH, HEIGHT = 720, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 24, 20, 48


def _nice_step(span: float, ticks: int = 6) -> float:
    if span <= 0:
        return 1.0
    raw = span / ticks
    power: float = 10 ** math.floor(math.log10(raw))  # an int from 1 up, a float below
    for m in (1, 2, 2.5, 5, 10):
        if m * power >= raw:
            return m * power
    return 10 * power


def _ticks(lo: float, hi: float) -> list[float]:
    step = _nice_step(hi - lo)
    first = math.ceil(lo / step - 1e-9) * step
    out: list[float] = []
    v = first
    while v <= hi + step * 1e-9 and len(out) < 50:
        out.append(round(v, 10))
        v += step
    return out


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def curve_svg(points: list[list[float | None]], target: float, *, metric: str, reached_hours: float | None = None,
              title: str = "", percent: bool = True, axis: str | None = None) -> Markup:
    """``points``: [hours, accuracy fraction, epoch|None]; ``target``: fraction. Returns safe SVG markup.
    ``percent`` False (an MLPerf metric that is not a percent: AUC, a loss, FID): the values as they are, on an
    axis spanning them and the target, labelled ``axis``."""
    scale_y = 100.0 if percent else 1.0
    pts = [(float(p[0]), float(p[1]) * scale_y) for p in points
           if p and p[0] is not None and p[1] is not None and math.isfinite(p[0]) and math.isfinite(p[1])]
    if not pts:
        return Markup("")
    target_pct = target * scale_y
    span_h = max(p[0] for p in pts) or 1.0
    if span_h * 3600 < 180:
        unit, scale = "seconds", 3600.0
    elif span_h < 3:
        unit, scale = "minutes", 60.0
    else:
        unit, scale = "hours", 1.0
    pts = [(h * scale, a) for h, a in pts]
    x_hi = span_h * scale
    if percent:
        y_lo = max(0.0, math.floor(min(min(p[1] for p in pts), target_pct) / 10.0) * 10.0)
        y_hi = 100.0
    else:
        lo, hi = min(min(p[1] for p in pts), target_pct), max(max(p[1] for p in pts), target_pct)
        pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
        y_lo, y_hi = lo - pad, hi + pad
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(h: float) -> float:
        return LEFT + h / x_hi * plot_w

    def sy(a: float) -> float:
        return TOP + (1 - (a - y_lo) / (y_hi - y_lo)) * plot_h

    label = axis or {"f1": "F1 (%)", "top1": "top-1 accuracy (%)", "top5": "top-5 accuracy (%)"}.get(metric,
                                                                                                 "accuracy (%)")
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="curve" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title or "accuracy versus time")}">',
        f"<title>{escape(title or 'accuracy versus training time')}</title>",
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fff" stroke="#999"/>',
    ]
    for t in _ticks(0.0, x_hi):
        x = sx(t)
        parts.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + plot_h}" stroke="#eee"/>')
        parts.append(f'<text x="{x:.1f}" y="{TOP + plot_h + 16}" font-size="11" text-anchor="middle">{_fmt(t)}</text>')
    for t in _ticks(y_lo, y_hi):
        y = sy(t)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{_fmt(t)}</text>')
    parts.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 10}" font-size="12" text-anchor="middle">'
                 f"training time ({unit})</text>")
    parts.append(f'<text x="14" y="{TOP + plot_h / 2:.1f}" font-size="12" text-anchor="middle" '
                 f'transform="rotate(-90 14 {TOP + plot_h / 2:.1f})">{label}</text>')
    ty = sy(target_pct)
    parts.append(f'<line x1="{LEFT}" y1="{ty:.1f}" x2="{LEFT + plot_w}" y2="{ty:.1f}" stroke="#c0392b" '
                 'stroke-dasharray="6 4"/>')
    parts.append(f'<text x="{LEFT + 6}" y="{ty - 5:.1f}" font-size="11" fill="#c0392b" text-anchor="start">'
                 f"target {_fmt(target_pct)}{'%' if percent else ''}</text>")
    path = " ".join(f"{sx(h):.2f},{sy(a):.2f}" for h, a in pts)
    parts.append(f'<polyline fill="none" stroke="#1f6fb2" stroke-width="2" points="{path}"/>')
    if len(pts) <= 200:
        parts.extend(f'<circle cx="{sx(h):.2f}" cy="{sy(a):.2f}" r="2.5" fill="#1f6fb2"/>' for h, a in pts)
    if reached_hours is not None and math.isfinite(reached_hours):
        reached = reached_hours * scale
        hit = next(((h, a) for h, a in pts if abs(h - reached) <= 1e-9 * max(1.0, h)), None)
        if hit:
            parts.append(f'<circle cx="{sx(hit[0]):.2f}" cy="{sy(hit[1]):.2f}" r="6" fill="none" stroke="#c0392b" '
                         'stroke-width="2"/>')
    parts.append("</svg>")
    return Markup("".join(parts))
