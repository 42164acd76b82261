"""The views of a sweep folder, rewritten from results.jsonl: results.csv, results.md and the plots."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from daybreak.fileio import atomic_write_text
from daybreak.records.throughput import (
    CSV_FILE, MARKDOWN_FILE, RESULTS_FILE, Amp, ThroughputResult, latest_by_key, load_results, to_csv, to_markdown,
    with_scaling,
)
from daybreak.sweep.grid import AMP_ORDER

if TYPE_CHECKING:
    from matplotlib.axes import Axes

THROUGHPUT_PLOT = "throughput_vs_batch.png"
SPEEDUP_PLOT = "speedup_vs_devices.png"

# one subplot: model, mode, device, seq_len, image_size, data, channels_last, threads, framework
GroupKey = tuple[str, str, str, int | None, int | None, str | None, bool, int | None, str]


# --- views --------------------------------------------------------------------------------------------------

def current_rows(out: Path, log: Callable[[str], None] | None = None) -> list[ThroughputResult]:
    """The latest record of every configuration in ``out``, with speedups filled in."""
    return with_scaling(list(latest_by_key(load_results(out / RESULTS_FILE, warn=log)).values()))


def write_views(out: Path, plots: bool = True, log: Callable[[str], None] | None = None) -> list[Path]:
    rows = current_rows(out, log)
    written = [atomic_write_text(out / CSV_FILE, to_csv(rows)), atomic_write_text(out / MARKDOWN_FILE, to_markdown(rows))]
    if plots:
        written += write_plots(out, rows, log)
    return written


def _group_key(r: ThroughputResult) -> GroupKey:
    c = r.config
    return (c.model, c.mode, c.device, c.seq_len, c.image_size, c.data, c.channels_last, c.threads,
            c.series())


def _group_title(key: GroupKey) -> str:
    model, mode, device, seq_len, image_size, data, channels_last, threads, framework = key
    extras = [framework if framework != "pytorch" else "", f"seq {seq_len}" if seq_len else "",
              f"{image_size}px" if image_size else "", data or "", "NHWC" if channels_last else "",
              f"{threads} thr/proc" if threads else "", device]
    return f"{model} {mode} ({', '.join(e for e in extras if e)})"


def _mark_flagged(ax: Axes, points: list[tuple[float, float]]) -> None:
    """A red ring and '(!)' on each point whose row has a flag (a figure above its ceiling: see results.md)."""
    if not points:
        return
    labels = {h.get_label() for h in ax.get_legend_handles_labels()[0]}
    label = None if "flagged (!): above its ceiling, see results.md" in labels else \
        "flagged (!): above its ceiling, see results.md"
    ax.scatter([x for x, _ in points], [y for _, y in points], s=160, facecolors="none", edgecolors="red",
               linewidths=2, zorder=4, label=label)
    for x, y in points:
        ax.annotate("(!)", (x, y), textcoords="offset points", xytext=(6, 6), color="red", fontsize=9,
                    fontweight="bold")


def _points(rows: list[ThroughputResult], x: Callable[[ThroughputResult], float | None],
            y: Callable[[ThroughputResult], float | None]) -> list[tuple[float, float, bool]]:
    """(x, y, whether the row has a flag) of one plotted line, in the order of x (rows of the plotted kinds have
    both: a measured row its batch size and samples/s, a scaled one its speedup)."""
    points = [(xv, yv, bool(r.flags)) for r in rows if (xv := x(r)) is not None and (yv := y(r)) is not None]
    return sorted(points, key=lambda p: p[0])


def write_plots(out: Path, rows: list[ThroughputResult], log: Callable[[str], None] | None = None) -> list[Path]:
    """throughput_vs_batch.png always; speedup_vs_devices.png when more than one device count was measured."""
    ok = [r for r in rows if r.status == "ok" and r.samples_per_s]
    if not ok:
        return []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        if log:
            log("matplotlib is not installed: no plots (pip install matplotlib)")
        return []

    groups: dict[GroupKey, list[ThroughputResult]] = {}
    for r in ok:
        groups.setdefault(_group_key(r), []).append(r)
    written = []

    fig, axes = plt.subplots(len(groups), 1, figsize=(7, 4 * len(groups)), squeeze=False)
    for ax, (key, group) in zip(axes[:, 0], groups.items()):
        lines: dict[tuple[Amp, bool, int, int], list[ThroughputResult]] = {}
        for r in group:
            lines.setdefault((r.config.amp, r.config.compile, r.config.nodes, r.config.devices), []).append(r)
        for (amp, compiled, nodes, devices), line in sorted(lines.items(), key=lambda kv: (
                AMP_ORDER.index(kv[0][0]), kv[0][1], kv[0][2], kv[0][3])):
            points = _points(line, lambda r: r.batch_size, lambda r: r.samples_per_s)
            label = f"{'fp32' if amp == 'off' else amp}{' compiled' if compiled else ''}, {nodes * devices} dev"
            ax.plot([x for x, _, _ in points], [y for _, y, _ in points], marker="o", label=label)
            _mark_flagged(ax, [(x, y) for x, y, flagged in points if flagged])
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size per device")
        ax.set_ylabel("samples/s (median)")
        ax.set_title(_group_title(key))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    path = out / THROUGHPUT_PLOT
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    scaled = [r for r in ok if r.speedup is not None]
    if len({r.world_size for r in scaled}) > 1:
        sgroups: dict[GroupKey, list[ThroughputResult]] = {}
        for r in scaled:
            sgroups.setdefault(_group_key(r), []).append(r)
        fig, axes = plt.subplots(len(sgroups), 1, figsize=(7, 4 * len(sgroups)), squeeze=False)
        for ax, (key, group) in zip(axes[:, 0], sgroups.items()):
            slines: dict[tuple[Amp, bool, int], list[ThroughputResult]] = {}
            for r in group:
                slines.setdefault((r.config.amp, r.config.compile, r.config.batch_size), []).append(r)
            # perfect scaling on the rows' basis: the device count on GPUs, the ratio of total threads on CPUs
            measured = sorted({(r.world_size, r.ideal_speedup) for r in group if r.ideal_speedup is not None})
            ideal = sorted(dict([(1, 1.0)] + measured).items())
            bases = sorted({r.efficiency_basis for r in group if r.efficiency_basis})
            ax.plot([w for w, _ in ideal], [i for _, i in ideal], linestyle="--", color="grey",
                    label=f"ideal ({', '.join(bases) or 'devices'})")
            for (amp, compiled, batch), sline in sorted(slines.items(), key=lambda kv: (
                    AMP_ORDER.index(kv[0][0]), kv[0][1], kv[0][2])):
                spoints = _points(sline, lambda r: r.world_size, lambda r: r.speedup)
                label = f"{'fp32' if amp == 'off' else amp}{' compiled' if compiled else ''}, bs {batch}/device"
                ax.plot([x for x, _, _ in spoints], [y for _, y, _ in spoints], marker="o", label=label)
                _mark_flagged(ax, [(x, y) for x, y, flagged in spoints if flagged])
            ax.set_xticks(sorted({1, *(r.world_size for r in group)}))
            ax.set_xlabel("devices (processes)")
            ax.set_ylabel("speedup vs 1 device")
            ax.set_title(_group_title(key))
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize="small")
        fig.tight_layout()
        path = out / SPEEDUP_PLOT
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    else:
        (out / SPEEDUP_PLOT).unlink(missing_ok=True)
    return written
