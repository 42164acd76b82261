"""`daybreak report PATHS... --out DIR`: index.html + report.md with every table and plot that applies.

For run directories: a run table (with the energy to target where the run's counters measured it) and
accuracy-vs-time curves, accuracy against energy for the runs that carry energy (and, for the others, why they do
not), the threshold-sensitivity table and curve, the
roofline of each run (ceilings from ``daybreak peak``'s cache or ``--peak``), the inference record of each run
(``daybreak infer``: latency percentiles, throughput, cost, re-checked accuracy; or how to make one),
generalization results if any;
for repeat directories also the stability summary and its plot; for lesion directories the lesion table and
bars; for sweep directories the throughput scaling table and plot and the roofline of every configuration; runs
at several device counts add a time-to-target vs time-per-epoch scaling table. A section that cannot be made
says why in one line (the rest of the report stands). Every string taken from a record is HTML-escaped; the plots
are PNG files beside index.html.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable

from daybreak.analysis.tables import markdown_table, md_text  # noqa: F401 (re-exported)
from daybreak.analysis.sources import AnalyzedRun, classify, provenance, runs_in, unique_labels
from daybreak.errors import ConfigError, DaybreakError
from daybreak.fileio import atomic_write_text
from daybreak.records.provenance import Provenance
from daybreak.version import __version__

HTML_FILE = "index.html"
MARKDOWN_FILE = "report.md"
JSON_FILE = "report.json"
MAX_RUN_COLUMNS = 10  # threshold table: one column per run up to this many runs


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def html_table(header: list[str], body: list[list[str]]) -> str:
    out = ["<table>", "<thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr></thead>", "<tbody>"]
    out += ["<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in body]
    out += ["</tbody>", "</table>"]
    return "\n".join(out)


@dataclass
class Section:
    title: str
    parts: list[tuple[str, Any]] = field(default_factory=list)  # ("table", (header, body)) | ("img", name) | ("text", s)

    def table(self, header: list[str], body: list[list[str]]) -> None:
        self.parts.append(("table", (header, body)))

    def image(self, name: str, alt: str) -> None:
        self.parts.append(("img", (name, alt)))

    def text(self, s: str) -> None:
        self.parts.append(("text", s))


@dataclass
class ReportInputs:
    runs: list[AnalyzedRun] = field(default_factory=list)
    repeats: list[tuple[Path, Any]] = field(default_factory=list)  # (dir, RepeatSummary)
    lesions: list[tuple[Path, Any]] = field(default_factory=list)  # (dir, LesionSummary)
    sweeps: list[Path] = field(default_factory=list)
    kinds: list[tuple[str, str]] = field(default_factory=list)  # (path, kind)


def gather(paths: list[str | Path]) -> ReportInputs:
    from daybreak.records.lesion import LesionSummary
    from daybreak.records.repeat import RepeatSummary

    if not paths:
        raise ConfigError("give at least one run, repeat, lesion or sweep directory")
    got = ReportInputs()
    seen: set[Path] = set()
    for p in paths:
        kind, folder = classify(p)
        got.kinds.append((str(p), kind))
        if kind == "sweep":
            got.sweeps.append(folder)
            continue
        if kind == "repeat":
            got.repeats.append((folder, RepeatSummary.load(folder)))
        if kind == "lesion":
            got.lesions.append((folder, LesionSummary.load(folder)))
        folder_runs = runs_in(folder)
        if kind == "runs" and len(folder_runs) >= 2 and len(
                {(r.result.task, r.result.recipe, r.result.target) for r in folder_runs}) == 1:
            from daybreak.analysis.repeat import summarize_runs

            got.repeats.append((folder, summarize_runs(folder_runs)))  # e.g. multi-device seeds run one by one
        for run in folder_runs:
            if run.path.resolve() not in seen:
                seen.add(run.path.resolve())
                got.runs.append(run)
    return got


def _sec(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f} s"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.2f}%"


def joules(j: float | None) -> str:
    """Joules as the report shows them (J, kJ, MJ)."""
    if j is None:
        return "-"
    return f"{j:.3g} J" if j < 1e3 else f"{j / 1e3:.4g} kJ" if j < 1e6 else f"{j / 1e6:.4g} MJ"


def run_energy(r: Any) -> str:
    """Joules to the target under the run's headline rule set (at the last evaluation when it was not reached),
    with the kinds the counters cover; ``-`` when the run carries none."""
    e = r.energy
    if not e.available:
        return "-"
    if e.joules_to_target.get(r.rules) is not None:
        text = joules(e.joules_to_target[r.rules])
    elif e.joules_at_end.get(r.rules) is not None:
        text = joules(e.joules_at_end[r.rules]) + " (not reached; at the last evaluation)"
    else:
        return "-"
    return text + f" ({'+'.join(e.covers)})" if e.covers else text


def energy_notes(runs: list[AnalyzedRun]) -> list[str]:
    """One line per reason for the runs that carry no energy (their ``energy.unavailable``)."""
    labels = unique_labels(runs)
    by_reason: dict[str, list[str]] = {}
    for run in runs:
        r = run.result
        if r.energy.available and any(h.energy_j.get(r.rules) is not None for h in r.history):
            continue
        reasons = "; ".join(dict.fromkeys(r.energy.unavailable.values())) if r.energy.unavailable else (
            "the counters were readable but no evaluation recorded joules" if r.energy.available else
            "a record made before daybreak measured energy")
        by_reason.setdefault(reasons[:300], []).append(labels[run.path])
    out = []
    for reason, which in by_reason.items():
        shown = ", ".join(which[:5]) + (f" and {len(which) - 5} more" if len(which) > 5 else "")
        out.append(f"No energy for {shown}: {reason}.")
    return out


def run_table(runs: list[AnalyzedRun]) -> tuple[list[str], list[list[str]]]:
    header = ["run", "task", "recipe", "model", "status", "target", "time to target", "energy to target", "epochs",
              "final acc.", "best acc.", "device", "amp", "devices", "hardware", "official", "path"]
    body = []
    labels = unique_labels(runs)
    for run in runs:
        r = run.result
        body.append([labels[run.path], r.task, r.recipe, r.model, r.status, f"{r.target * 100:.2f}% {r.metric}",
                     _sec(r.time_to_target_s), run_energy(r),
                     "-" if r.epochs_to_target is None else f"{r.epochs_to_target:g}",
                     _pct(r.final_accuracy), _pct(r.best_accuracy), r.device, r.amp, str(r.world_size),
                     r.system.hardware_summary(), "yes" if r.official else "no", str(run.path)])
    return header, body


def repeat_table(s: Any) -> tuple[list[str], list[list[str]]]:
    t, e = s.time_to_target, s.epochs_to_target
    rows = [
        ["runs (seeds)", f"{s.n_runs} ({', '.join(str(x) for x in s.seeds)})"],
        ["reached", f"{s.n_reached}/{s.n_runs} ({(s.reached_fraction or 0) * 100:.0f}%)"],
        ["mean time to target", _sec(t.mean_s)],
        ["std (ddof=1)", _sec(t.std_s)],
        ["coefficient of variation", "-" if t.cv is None else f"{t.cv * 100:.2f}%"],
        ["geometric mean", _sec(t.geometric_mean_s)],
        [f"{t.confidence * 100:g}% CI of the geometric mean (Student t on the log times)",
         "-" if t.ci_low_s is None else f"{t.ci_low_s:.3f} - {t.ci_high_s:.3f} s"],
        ["olympic mean (drop fastest and slowest)", _sec(t.olympic_mean_s)],
        ["min / median / max", f"{_sec(t.min_s)} / {_sec(t.median_s)} / {_sec(t.max_s)}"],
        ["epochs to target (min / median / max)",
         "-" if e.min is None else f"{e.min:g} / {e.median:g} / {e.max:g} ({', '.join(f'{v:g}' for v in e.values)})"],
        ["unreached runs", s.unreached_policy],
    ]
    return ["statistic", "value"], rows


def generalization_table(runs: list[AnalyzedRun]) -> tuple[list[str], list[list[str]]] | None:
    from daybreak.records.generalization import load_entries

    body = []
    for run in runs:
        try:
            entries = load_entries(run.path)
        except DaybreakError:
            continue
        for en in entries:
            body.append([en.run_id, en.data_dir, str(en.n), _pct(en.accuracy), _pct(en.original_accuracy),
                         "-" if en.difference is None else f"{en.difference * 100:+.2f} points",
                         "yes" if en.data_official else "no", en.evaluated_at.strftime("%Y-%m-%d %H:%M")])
    if not body:
        return None
    return ["run", "data dir", "n", "accuracy", "original", "difference", "official data", "evaluated"], body


def _why(e: BaseException) -> str:
    """One line saying why something could not be made: a daybreak error's own message; for anything else its
    first line and its type (a bug to report), never a traceback."""
    text = str(e).strip()
    line = text.splitlines()[0].strip() if text else ""
    if len(line) > 240:
        line = line[:237] + "..."
    if isinstance(e, DaybreakError):
        return line or type(e).__name__
    return f"{line or 'no message'} (unexpected {type(e).__name__} inside daybreak; please report it)"


def _ms(value: float | None) -> str:
    """Milliseconds as `daybreak infer` prints them."""
    if value is None:
        return "-"
    return f"{value:.4f}" if value < 1 else f"{value:.3f}" if value < 100 else f"{value:.1f}"


INFER_HINT = ("run `daybreak infer RUN_DIR` to measure batch-1 latency, throughput and cost of the run's checkpoint "
              "(it writes RUN_DIR/inference.json)")


def inference_section(runs: list[AnalyzedRun]) -> Section:
    """Latency percentiles, throughput, cost and the re-checked accuracy of every run with an inference.json."""
    from daybreak.records.inference import INFERENCE_FILE, InferenceResult

    s = Section("Inference")
    labels = unique_labels(runs)
    body, missing, problems, extra = [], [], [], []
    first = None
    for run in runs:
        label = labels[run.path]
        if not (run.path / INFERENCE_FILE).is_file():
            missing.append(label)
            continue
        try:
            r = InferenceResult.load(run.path)
        except DaybreakError as e:
            problems.append(f"{label}: {_why(e)}")
            continue
        first = first or r
        lat, t = r.latency, r.throughput
        cost = "-" if r.cost_per_10k_usd is None else f"${r.cost_per_10k_usd:.4g}" + (
            f" ({r.instance})" if r.instance else f" (at ${r.cost_per_hour:.3f}/h)" if r.cost_per_hour else "")
        measured = r.energy
        if measured is not None and measured.joules_per_10k is not None:
            energy = joules(measured.joules_per_10k) + (f" ({'+'.join(measured.covers)})" if measured.covers else "")
        else:
            energy = "-"
            why = ("a record made before daybreak measured energy" if measured is None else
                   "; ".join(dict.fromkeys(measured.unavailable.values())) or "no counter")
            extra.append(f"{label}: no inference energy: {why[:300]}.")
        body.append([
            label, f"{r.n_examples:,}", _ms(lat.mean_ms), _ms(lat.p50_ms), _ms(lat.p90_ms), _ms(lat.p99_ms),
            _ms(lat.max_ms),
            "-" if t is None else f"{t.examples_per_s:,.1f} examples/s (batch {t.batch_size})", cost, energy,
            f"{r.accuracy * 100:.2f}% {r.metric}", f"{r.target * 100:.2f}%",
            "yes" if r.valid else f"no: {r.reason or 'below the target'}",
            f"{r.settings.device}, {r.settings.amp}" + (", compiled" if r.settings.compile else ""),
        ])
        if r.loadgen is not None:
            ss, off = r.loadgen.single_stream, r.loadgen.offline
            parts = []
            if ss is not None:
                parts.append(f"SingleStream p90 {_ms(ss.p90_ms)} ms ({'VALID' if ss.valid else 'INVALID'})")
            if off is not None:
                parts.append("Offline " + ("-" if off.samples_per_s is None else f"{off.samples_per_s:,.1f}")
                             + f" samples/s ({'VALID' if off.valid else 'INVALID'})")
            if parts:
                extra.append(f"{label}: MLCommons LoadGen {'; '.join(parts)}.")
    if body:
        s.table(["run", "examples", "mean (ms)", "p50 (ms)", "p90 (ms)", "p99 (ms)", "max (ms)", "throughput",
                 "cost per 10,000", "energy per 10,000", "accuracy (re-checked)", "target", "valid", "device"], body)
        assert first is not None
        s.text("Latency: every example of the eval set classified one at a time (batch 1), nearest-rank "
               f"percentiles; mean = total / N (DAWNBench's figure). Timed: {first.clock_included}. Not timed: "
               f"{first.clock_excluded}.")
        s.text("Throughput: whole passes over the eval set at the batch shown (median pass). Cost: mean latency x the "
               "price per hour, for 10,000 examples (DAWNBench's inference cost). Energy: the counters' joules over "
               "the batch-1 pass, per 10,000 examples. Accuracy: the run's metric on the very predictions that were "
               "timed; valid when at or above the run's target.")
        for line in extra:
            s.text(line)
    for line in problems:
        s.text(line)
    if missing and not body and not problems:
        s.text(f"No inference record in {'this run' if len(runs) == 1 else 'these runs'}: {INFER_HINT}.")
    elif missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        s.text(f"No inference record for {shown}: {INFER_HINT}.")
    return s


def roofline_section(got: ReportInputs, out: Path, images: list[Path], *, peak_file: Path | None,
                     measure_peak: bool, command: list[str] | None,
                     log: Callable[[str], None] | None) -> Section:
    from daybreak.analysis import plots
    from daybreak.analysis import roofline as rl

    finder = rl.PeakFinder(peak_file, measure=measure_peak, log=log)
    points, peaks, rnotes = [], {}, []
    profiles: dict[tuple[Any, ...], rl.StepProfile] = {}
    labels = unique_labels(got.runs)
    for run in got.runs:
        try:
            point, peak = rl.run_point(run.path, run.result, finder, None, profiles, labels[run.path])
            points.append(point)
            if peak is not None:
                peaks[peak.machine_key] = peak
        except Exception as e:  # noqa: BLE001 - one run that cannot be rebuilt must not sink the report
            rnotes.append(f"{labels[run.path]}: no roofline point: {_why(e)}")
    for folder in got.sweeps:
        try:
            pts, pks = rl.sweep_points(folder, finder, log)
            points += pts
            for pk in pks:
                peaks[pk.machine_key] = pk
        except Exception as e:  # noqa: BLE001
            rnotes.append(f"{folder}: no roofline points: {_why(e)}")
    s = Section("Roofline")
    if not points:
        for n in rnotes:
            s.text(n)
        return s
    analysis = rl.RooflineAnalysis(points=points, peaks=list(peaks.values()), notes=rnotes,
                                   provenance=provenance([p.source for p in points], command))
    atomic_write_text(out / rl.JSON_FILE, analysis.model_dump_json(indent=2) + "\n")
    s.table(*rl.table_rows(analysis))
    try:
        images.append(plots.roofline_plot(analysis, out / "roofline.png"))
        s.image("roofline.png", "roofline with each run or configuration")
    except Exception as e:  # noqa: BLE001 - the table stands without its plot
        s.text(f"No roofline plot: {_why(e)}")
    s.text("FLOPs: " + analysis.flops_method + ".")
    s.text("Bytes: " + analysis.bytes_method + ".")
    s.text("Achieved: " + analysis.achieved_method + ".")
    grouped: dict[str, list[str]] = {}
    for p in points:
        for n in p.notes:
            grouped.setdefault(n, []).append(p.label)
    for n, point_labels in grouped.items():
        s.text(f"{point_labels[0]}: {n}" if len(point_labels) == 1 else f"{len(point_labels)} points: {n}")
    if not any(p.peak_flops_per_s for p in points):
        s.text("No peak measurement for these devices: run `daybreak peak` on that machine, or pass --peak.")
    for n in rnotes:
        s.text(n)
    return s


def build_report(paths: list[str | Path], out: Path, *, peak_file: Path | None = None, measure_peak: bool = False,
                 roofline: bool = True, command: list[str] | None = None,
                 log: Callable[[str], None] | None = None) -> list[Path]:
    from daybreak.analysis import plots
    from daybreak.analysis import scaling as sc
    from daybreak.analysis import threshold as th
    from daybreak.analysis.lesion import table_rows as lesion_rows

    got = gather(paths)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    sections: list[Section] = []
    images: list[Path] = []
    notes: list[str] = []

    def add(title: str, make: Callable[[], Section | None]) -> None:
        """One section; if it cannot be made, the section says why in one line (the rest of the report stands)."""
        try:
            made = make()
        except Exception as e:  # noqa: BLE001 - a failing section must not sink the report
            made = Section(title)
            made.text(f"This section could not be made: {_why(e)}")
        if made is not None:
            sections.append(made)

    inputs = Section("Inputs")
    inputs.table(["path", "kind"], [[p, k] for p, k in got.kinds])
    sections.append(inputs)

    def runs_section() -> Section:
        s = Section("Runs")
        s.table(*run_table(got.runs))
        images.append(plots.curves_plot(got.runs, out / "curves.png"))
        s.image("curves.png", "accuracy against training time of every run")
        with_energy = [r for r in got.runs if r.result.energy.available
                       and any(h.energy_j.get(r.result.rules) is not None for h in r.result.history)]
        if with_energy:
            images.append(plots.energy_plot(with_energy, out / "energy.png"))
            s.image("energy.png", "accuracy against the energy counted under each run's headline clock")
            s.text("Energy: the hardware counters (GPU through NVML, CPU package and DRAM through powercap/RAPL, "
                   "where they exist) read at the clock's own boundaries; joules are counted over exactly the "
                   "stretches the run's headline clock counts as time, all ranks together with each counter once. "
                   "Nothing is estimated.")
        for line in energy_notes(got.runs):
            s.text(line)
        return s

    if got.runs:
        add("Runs", runs_section)

    def repeat_section(i: int, folder: Path, summary: Any) -> Section:
        s = Section(f"Stability: {summary.task} / {summary.recipe} ({folder})")
        s.table(*repeat_table(summary))
        name = f"repeat-{i}.png"
        images.append(plots.repeat_plot(summary, out / name))
        s.image(name, "time to target of each seed with the mean and its confidence interval")
        if not summary.complete:
            s.text("This repeat is incomplete: some seeds have not run yet.")
        return s

    for i, (folder, summary) in enumerate(got.repeats):
        add(f"Stability ({folder})", partial(repeat_section, i, folder, summary))

    by_task: dict[str, list[AnalyzedRun]] = {}
    for run in got.runs:
        by_task.setdefault(run.result.task, []).append(run)

    def threshold_section(i: int, task_name: str, task_runs: list[AnalyzedRun]) -> Section:
        a = th.analyze_threshold([], runs=task_runs, command=command)
        s = Section("Threshold sensitivity" + (f": {task_name}" if len(by_task) > 1 else ""))
        if len(a.runs) <= MAX_RUN_COLUMNS:
            s.table(*th.table_rows(a))
        else:
            s.table(["threshold", "mean (reached)", "reached"],
                    [[f"{t * 100:.2f}%", _sec(m), f"{c}/{len(a.runs)}"]
                     for t, m, c in zip(a.thresholds, a.mean_times_s, a.reached_counts)])
        name = f"threshold-{i}.png"
        images.append(plots.threshold_plot(a, out / name))
        s.image(name, "time to each accuracy threshold")
        s.text(a.method + ".")
        for n in a.notes:
            s.text(n)
        return s

    for i, (task_name, task_runs) in enumerate(by_task.items()):
        add("Threshold sensitivity" + (f": {task_name}" if len(by_task) > 1 else ""),
            partial(threshold_section, i, task_name, task_runs))

    def lesion_section(i: int, folder: Path, lesion: Any) -> Section:
        s = Section(f"Lesion study: {lesion.recipe} ({folder})")
        s.table(*lesion_rows(lesion))
        name = f"lesion-{i}.png"
        images.append(plots.lesion_plot(lesion, out / name))
        s.image(name, "time-to-target ratio and final accuracy of each variant")
        s.text(lesion.method + ".")
        return s

    for i, (folder, lesion) in enumerate(got.lesions):
        add(f"Lesion study ({folder})", partial(lesion_section, i, folder, lesion))

    def scaling_section() -> Section | None:
        try:
            scaling = sc.analyze_scaling([str(p) for p in got.sweeps], command=command,
                                         runs=got.runs if len({r.result.world_size for r in got.runs}) > 1 else None)
        except DaybreakError as e:
            notes.append(f"scaling: {e}")
            return None
        s = Section("Scaling")
        if scaling.throughput:
            s.table(*sc.throughput_table(scaling))
        if scaling.runs:
            s.table(*sc.runs_table(scaling))
        images.append(plots.scaling_plot(scaling, out / "scaling.png"))
        s.image("scaling.png", "speedup against devices")
        s.text(scaling.method + ".")
        for f in sc.flag_lines(scaling):
            s.text(f"(!) {f}")
        for n in scaling.notes:
            s.text(n)
        return s

    if got.sweeps or len({r.result.world_size for r in got.runs}) > 1:
        add("Scaling", scaling_section)

    if roofline and (got.runs or got.sweeps):
        add("Roofline", lambda: roofline_section(got, out, images, peak_file=peak_file, measure_peak=measure_peak,
                                                 command=command, log=log))

    if got.runs:
        add("Inference", lambda: inference_section(got.runs))

    def generalization_section() -> Section | None:
        gen = generalization_table(got.runs)
        if not gen:
            return None
        s = Section("Generalization")
        s.table(*gen)
        return s

    if got.runs:
        add("Generalization", generalization_section)

    prov = provenance([p for p, _ in got.kinds], command)
    written = [
        atomic_write_text(out / HTML_FILE, render_html(sections, prov, notes)),
        atomic_write_text(out / MARKDOWN_FILE, render_markdown(sections, prov, notes)),
        atomic_write_text(out / JSON_FILE, json.dumps(dict(
            kind="daybreak.report", sections=[s.title for s in sections], images=[p.name for p in images],
            notes=notes, provenance=json.loads(prov.model_dump_json()), daybreak_version=__version__),
            indent=2) + "\n"),
    ]
    return written + images


def render_html(sections: list[Section], prov: Provenance, notes: list[str]) -> str:
    css = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;"
           "margin:1em 0;font-size:0.9em}th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}"
           "th{background:#f0f0f0}img{max-width:100%;border:1px solid #eee}.note{color:#555}")
    out = ["<!DOCTYPE html>", "<html lang=\"en\">", "<head>", "<meta charset=\"utf-8\">",
           "<title>daybreak report</title>", f"<style>{css}</style>", "</head>", "<body>",
           "<h1>daybreak report</h1>",
           f"<p class=\"note\">Made {_e(prov.created_at.strftime('%Y-%m-%d %H:%M:%S UTC'))} on "
           f"{_e(prov.system.hardware_summary() if prov.system else '-')}"
           f" (torch {_e(prov.system.torch if prov.system else '-')}); command: "
           f"<code>{_e(' '.join(prov.command) or '-')}</code></p>"]
    out.append("<ul>" + "".join(f"<li><a href=\"#s{i}\">{_e(s.title)}</a></li>" for i, s in enumerate(sections)) + "</ul>")
    for i, s in enumerate(sections):
        out.append(f"<h2 id=\"s{i}\">{_e(s.title)}</h2>")
        for kind, value in s.parts:
            if kind == "table":
                out.append(html_table(*value))
            elif kind == "img":
                name, alt = value
                out.append(f"<p><img src=\"{_e(name)}\" alt=\"{_e(alt)}\"></p>")
            else:
                out.append(f"<p class=\"note\">{_e(value)}</p>")
    for n in notes:
        out.append(f"<p class=\"note\">{_e(n)}</p>")
    out += ["</body>", "</html>", ""]
    return "\n".join(out)


def render_markdown(sections: list[Section], prov: Provenance, notes: list[str]) -> str:
    out = ["# daybreak report", "",
           f"Made {prov.created_at.strftime('%Y-%m-%d %H:%M:%S UTC')} on "
           f"{md_text(prov.system.hardware_summary() if prov.system else '-')}; command: "
           f"`{' '.join(prov.command).replace('`', chr(39)) or '-'}`", ""]
    for s in sections:
        out += [f"## {md_text(s.title)}", ""]
        for kind, value in s.parts:
            if kind == "table":
                out += [markdown_table(*value), ""]
            elif kind == "img":
                out += [f"![{md_text(value[1])}]({value[0]})", ""]
            else:
                out += [md_text(value), ""]
    out += [f"Note: {md_text(n)}" for n in notes]
    return "\n".join(out) + "\n"

