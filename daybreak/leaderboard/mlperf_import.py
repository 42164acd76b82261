"""`daybreak leaderboard import-mlperf DIR`: a published MLPerf Training results tree -> scored leaderboard entries.

The layout every round of daybreak.mlperf_benchmarks.ROUNDS (v0.7 to v6.0) publishes
(github.com/mlcommons/training_results_v<round>), and the only one read here::

    <submitter>/systems/<system>.json                         what the system is (division, status, hardware)
    <submitter>/results/<system>/<benchmark>/result_*.txt      one MLPerf log per run
    <submitter>/results/<system>/<benchmark>/scaling.json      the review's scaling factor, where it set one

``DIR`` is the round's checkout (a folder of submitters) or one submitter's folder. The round comes from
``--round`` or from the folder's name (``training_results_v4.0``). Everything else in the tree (``benchmarks/``
source code, ``power/`` measurements, compliance outputs, ``package_checker_params``) is not read.

Each ``<system>/<benchmark>`` folder becomes one entry, scored by MLPerf's own rule (daybreak.leaderboard.
mlperf_rules; the benchmarks, targets, run counts and initialization limits of each round are the table of
daybreak.mlperf_benchmarks): each run's time is run_stop - run_start and its verdict MLPerf's, as `daybreak time
--log --rules mlperf` reads them (``parse_log`` and ``analyze``): converged when its run_stop says ``success``, its
initialization stayed under the round's limit and (closed division) an evaluation met the round's target; the
score is the olympic mean of the converged runs with the non-converged ones counted as the slowest, times the
scaling factor. A folder with another number of result files than the round requires, or with more non-converged
runs than may be dropped, is stored unranked with the reason in its notes. mlperf-logging's RCP check runs on a
copy of each closed-division folder whose benchmark has reference convergence points.

Entries are ``self-reported`` (MLPerf's submitters ran them; the review checked the logs; this host re-ran
nothing), with ``clock_rules="mlperf"``, the round, division and availability, and the structured system read
from ``systems/<system>.json``. ResNet-50 entries go on the ``imagenet`` board beside DAWNBench's, every other
benchmark on its own ``mlperf-*`` board. Like `leaderboard import`, a file or folder that cannot be used is
reported on one line and the rest is imported; the same content is never stored twice.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from daybreak.analysis.stats import coefficient_of_variation
from daybreak.errors import ConfigError
from daybreak.external.mllog_analysis import Analysis, analyze
from daybreak.external.mllog_reader import as_number, parse_log
from daybreak.leaderboard.ingest.importer import ImportReport, Outcome, _not_regular, _read
from daybreak.leaderboard.mlperf_rules import (
    AVAILABILITY, BESIDE_DAWNBENCH, DAWNBENCH_CLOCK, DIVISIONS, init_limit_text,
)
from daybreak.leaderboard.ingest.submission import (
    KIND_TRAIN, MAX_FIELD_CHARS, MAX_SOURCE_CHARS, PROVENANCE_SELF, Submission, SubmissionError, check_date,
    load_json, one_line,
)
from daybreak.leaderboard.ingest.text_rules import printable
from daybreak.leaderboard.ingest.systems import System, accelerator_name
from daybreak.leaderboard.ingest.systems import apply as apply_system
from daybreak.leaderboard.tasks import leaderboard_task
from daybreak.mlperf_benchmarks import (
    BENCHMARK_NAMES, OLD_FORMAT_ROUNDS, ROUND_FOLDER, ROUNDS, Benchmark, Goal, benchmark_of, init_limit, ruleset,
)
from daybreak.mlperf_benchmarks import normalize_round as round_name

if TYPE_CHECKING:
    from daybreak.leaderboard.store.database import Store

FORMAT_MLPERF = "mlperf-training"
MAX_LOG_BYTES = 64 * 1024 * 1024  # the largest published result file (v1.0) is about 4 MB
MAX_RESULT_FILES = 100  # per benchmark folder (unet3d, the most, requires 40)
RESULT_FILE = re.compile(r"^result_.*\.txt$")
SCALING_FILE = "scaling.json"
SUCCESS = "success"


# --- the round ---------------------------------------------------------------------------------------------
def normalize_round(text: str) -> str:
    """'4.0', 'v4.0', 'V4.0', '4.0.0' -> 'v4.0'; ConfigError for anything daybreak cannot read."""
    name = round_name(text)
    if name is None:
        raise ConfigError(f"--round {text!r}: give an MLPerf Training round such as v4.0")
    if name in OLD_FORMAT_ROUNDS:
        raise ConfigError(f"MLPerf Training {name} logged ':::MLL <seconds> key: ...' lines, a format daybreak's "
                          f"mllog reader does not read; import a round from {ROUNDS[0]} on")
    if name not in ROUNDS:
        raise ConfigError(f"MLPerf Training round {name} is not one daybreak knows the rules of (known: "
                          f"{', '.join(ROUNDS)})")
    return name


def resolve_round(root: Path, given: str | None) -> str:
    """The round of the tree at ``root``: ``--round``, else the folder's (or, for a submitter's folder, its
    parent's) name ``training_results_v<round>``. Both given and different: a one-line error."""
    named = None
    for folder in (root.resolve(), root.resolve().parent):
        m = ROUND_FOLDER.search(folder.name)
        if m:
            named = m.group(1).lower()
            break
    if given is not None:
        round_ = normalize_round(given)
        if named is not None and normalize_round(named) != round_:
            raise ConfigError(f"--round {round_} but the folder {root} is named for {named}: which round is it?")
        return round_
    if named is None:
        raise ConfigError(f"{root}: give the round with --round (e.g. --round v4.0): the folder is not named "
                          "training_results_v<round>")
    return normalize_round(named)


# --- the tree ----------------------------------------------------------------------------------------------
@dataclass
class BenchmarkFolder:
    path: Path
    submitter: str  # the folder's name (the systems JSON's "submitter" is shown where it says one)
    system: str
    benchmark: Benchmark
    system_json: Path
    source: str  # what the leaderboard shows: <tree>/<submitter>/results/<system>/<benchmark>


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _listing(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir(), key=lambda p: p.name)
    except OSError as e:
        raise SubmissionError(f"{folder}: cannot list it ({e.strerror or e})") from None


def submitter_folders(root: Path) -> list[Path]:
    """The submitters' folders under ``root`` (or ``root`` itself when it is one): those with a ``results``
    folder. ConfigError when there is none."""
    if not root.is_dir():
        raise ConfigError(f"{root}: not a folder (give the checkout of an MLPerf Training results round, e.g. "
                          "training_results_v4.0)")
    if _is_dir(root / "results"):
        return [root]
    try:
        found = [p for p in _listing(root) if not p.name.startswith(".") and _is_dir(p) and _is_dir(p / "results")]
    except SubmissionError as e:
        raise ConfigError(str(e)) from None
    if not found:
        raise ConfigError(f"{root}: not an MLPerf Training results tree: expected "
                          "<submitter>/results/<system>/<benchmark>/result_*.txt and <submitter>/systems/<system>.json")
    return found


def collect(root: Path, round_: str) -> tuple[list[BenchmarkFolder], list[Outcome]]:
    """Every benchmark folder under ``root`` that can become an entry, and one outcome for each thing under a
    ``results`` folder that cannot (symbolic links are reported and never followed)."""
    folders: list[BenchmarkFolder] = []
    problems: list[Outcome] = []

    def skip(path: Path, reason: str, files: int = 0) -> None:
        problems.append(Outcome(str(path), "skipped", reason, files=files))

    def folders_in(parent: Path, file_here: str) -> Iterator[Path]:
        """The folders listed in ``parent``; a skip for an unlistable parent, a link or a file in it."""
        try:
            children = _listing(parent)
        except SubmissionError as e:
            skip(parent, str(e).removeprefix(f"{parent}: "))
            return
        for child in children:
            if os.path.islink(child):
                skip(child, "a symbolic link (not followed)")
            elif not _is_dir(child):
                skip(child, file_here, files=1)
            else:
                yield child

    for sub in submitter_folders(root):
        base = [root.name] if sub == root else [root.name, sub.name]
        for system in folders_in(sub / "results", "a file directly under results/: expected a folder per system "
                                                  "(results/<system>/<benchmark>/result_*.txt)"):
            for bench in folders_in(system, "a file directly under a system folder: expected "
                                            "results/<system>/<benchmark>/result_*.txt"):
                if (b := benchmark_of(bench.name, round_)) is None:
                    skip(bench, _unknown_benchmark(bench.name, round_))
                else:
                    source = "/".join([*base, "results", system.name, bench.name])
                    folders.append(BenchmarkFolder(bench, sub.name, system.name, b,
                                                   sub / "systems" / f"{system.name}.json",
                                                   one_line(printable(source), MAX_SOURCE_CHARS)))
    return folders, problems


def _unknown_benchmark(name: str, round_: str) -> str:
    if name in BENCHMARK_NAMES:
        return f"{name!r} is not a benchmark of MLPerf Training {round_} (is --round right?)"
    return (f"{one_line(printable(name), 60)!r} is not an MLPerf Training benchmark folder daybreak knows (known: "
            f"{', '.join(BENCHMARK_NAMES)})")


# --- systems/<system>.json ---------------------------------------------------------------------------------
_FRAMEWORKS = {name.lower(): name for name in (
    "PyTorch", "MXNet", "TensorFlow", "JAX", "tinygrad", "PaddlePaddle", "MindSpore", "NeMo", "HugeCTR", "DGL",
    "MaxText", "DeepSpeed", "OneFlow", "Chainer", "Megatron-LM")}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def clean_text(value: Any, limit: int = MAX_FIELD_CHARS) -> str:
    """A systems-JSON value as one short line of text ("" for null, lists and objects)."""
    if value is None or isinstance(value, (dict, list, bool)):
        return ""
    text = re.sub(r"\s+", " ", _CONTROL.sub(" ", str(value))).strip()
    return text[:limit]


def _count(value: Any) -> int | None:
    """'8', 8, ' 16 ' -> an int; anything else (a range, '-', '') -> None."""
    number = as_number(value.strip() if isinstance(value, str) else value)
    return int(number) if number is not None and number >= 0 and float(number).is_integer() else None


def framework_of(text: str) -> tuple[str, str]:
    """MLPerf's free-text ``framework`` -> (name, version) as far as it says: 'PyTorch 2.2.0' -> ('PyTorch',
    '2.2.0'); 'MXNet NVIDIA Release 23.04' -> ('MXNet', '') (23.04 is NVIDIA's container release, not MXNet's
    version); a text naming no framework daybreak knows -> (text, '')."""
    m = re.search(r"(?i)\b(" + "|".join(re.escape(k) for k in _FRAMEWORKS) + r")\b", text)
    if not m:
        return text, ""
    name = _FRAMEWORKS[m.group(1).lower()]
    container = re.search(r"(?i)\b(ngc|release|container)\b", text) is not None
    version = re.match(r"[\s,-]*v?(\d+(?:\.\d+)+)\b", text[m.end():])
    return name, (version.group(1) if version and not container else "")


@dataclass
class SystemDesc:
    doc: dict[str, Any]
    data: bytes
    division: str  # "closed" / "open" / "" (not stated: the logs' submission_division then)
    availability: str  # "available" / "preview" / "rdi" / ""
    cloud: bool
    status: str  # as written
    system: System
    hardware: str
    framework: str
    name: str
    framework_note: str = ""  # how the framework of a systems JSON that lists several was chosen


def frameworks_listed(text: str) -> list[str]:
    """The frameworks a systems JSON's ``framework`` lists, each as written, where it lists several that name
    different frameworks daybreak knows ('NGC MXNet 23.09, NGC PyTorch 23.09, NGC HugeCTR 23.09'); [] for a text
    of one framework (a version, a toolkit or a CUDA release beside it is not another framework)."""
    parts = [p.strip() for p in re.split(r"[,;]", text) if p.strip()]
    named = [(p, framework_of(p)[0]) for p in parts]
    known = [(p, name) for p, name in named if name.lower() in _FRAMEWORKS]
    return [p for p, _ in known] if len({name for _, name in known}) > 1 else []


def implementations(folder: "BenchmarkFolder") -> list[str]:
    """The names of ``<submitter>/benchmarks/<benchmark>/implementations/*``: the code the submitter published for
    the benchmark, one folder per implementation ('pytorch', 'mxnet', 'hugectr', 'primergy-cdi-A100x8-mxnet-ngc23.09')."""
    where = folder.path.parents[2] / "benchmarks" / folder.path.name / "implementations"
    try:
        return sorted(p.name for p in where.iterdir() if _is_dir(p) and not os.path.islink(p))
    except OSError:
        return []


def system_for_benchmark(system: SystemDesc, folder: "BenchmarkFolder") -> SystemDesc:
    """``system`` with the framework of ``folder``'s benchmark: a systems JSON may list several frameworks (one per
    benchmark the system ran); the one its benchmark's implementation folder names is the benchmark's. Where none
    or several of them are named there, every one is kept, and the note says so: never silently the first."""
    listed = frameworks_listed(system.framework)
    if not listed:
        return system
    impl = implementations(folder)
    where = f"benchmarks/{folder.path.name}/implementations/"
    matching = [f for f in listed if any(framework_of(f)[0].lower() in i.lower() for i in impl)]
    if len(matching) == 1:
        name, version = framework_of(matching[0])
        chosen = next(i for i in impl if name.lower() in i.lower())
        note = (f"the systems JSON lists {len(listed)} frameworks ({system.framework}); {folder.path.name}'s is "
                f"{matching[0]}, the one its implementation folder {where}{chosen} names")
        return replace(system, framework=matching[0][:MAX_FIELD_CHARS], framework_note=note,
                       system=replace(system.system, framework_name=name[:50], framework_version=version[:50]))
    why = (f"its implementation folders ({', '.join(impl)}) name {len(matching)} of them" if impl else
           f"the tree has no {where} folder to tell which {folder.path.name} used")
    names = " / ".join(dict.fromkeys(framework_of(f)[0] for f in listed))
    return replace(system, framework_note=f"the systems JSON lists {len(listed)} frameworks ({system.framework}) and "
                                          f"{why}: all are kept", system=replace(system.system, framework_name=names[:50],
                                                                                 framework_version=""))


def read_system(path: Path) -> SystemDesc:
    """``systems/<system>.json`` -> what an entry shows of the system (SubmissionError with one line)."""
    if os.path.islink(path) or not os.path.lexists(path):
        raise SubmissionError(f"{path}: " + ("a symbolic link (not followed)" if os.path.islink(path) else
                                             "missing: every results/<system> needs its systems/<system>.json"))
    data = _read(path)
    doc = load_json(data, str(path))
    if not isinstance(doc, dict):
        raise SubmissionError(f"{path}: not a JSON object")
    division = DIVISIONS.get(clean_text(doc.get("division")).lower(), "")
    status = clean_text(doc.get("status"), 100)
    availability, cloud = AVAILABILITY.get(status.lower(), ("", False))
    nodes, per_node = _count(doc.get("number_of_nodes")), _count(doc.get("accelerators_per_node"))
    accelerator = clean_text(doc.get("accelerator_model_name"), 200)
    name = clean_text(doc.get("system_name"), 200) or path.stem
    framework = clean_text(doc.get("framework"), 200)
    fw_name, fw_version = framework_of(framework)
    cpu = clean_text(doc.get("host_processor_model_name"), 200)
    count = nodes * per_node if nodes is not None and per_node is not None else None
    system = System(accelerator=accelerator_name(accelerator)[:100] if accelerator else "",
                    accelerator_count=count, cpu=cpu, framework_name=fw_name[:50], framework_version=fw_version[:50],
                    cloud_instance=name[:100] if cloud else "")
    parts = [name]
    if accelerator:
        scale = (f"{nodes} node{'s' if nodes != 1 else ''} x {per_node} " if nodes is not None and per_node is not None
                 else "")
        parts.append(f"{scale}{accelerator}")
    if cpu:
        hosts = _count(doc.get("host_processors_per_node"))
        parts.append(f"{hosts} x {cpu} per node" if hosts else f"{cpu} host")
    return SystemDesc(doc=doc, data=data, division=division, availability=availability, cloud=cloud, status=status,
                      system=system, hardware=clean_text("; ".join(parts)), framework=framework or "unknown",
                      name=name)


# --- one run -----------------------------------------------------------------------------------------------
@dataclass
class Run:
    name: str  # the file's name: result_0.txt
    sha256: str
    converged: bool = False
    time_s: float | None = None  # run_stop - run_start (MLPerf's time of the run), when both are logged
    reason: str = ""  # why it did not converge
    goal_label: str = ""  # the round's target, in words
    malformed: str = ""  # the first malformed record (the run then counts as not converged)
    analysis: Analysis | None = None
    target: float | None = None
    division: str = ""  # what the log's submission_division says
    stop_ms: float | None = None
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        a = self.analysis
        return {"file": self.name, "sha256": self.sha256, "converged": self.converged, "time_s": self.time_s,
                "reason": self.reason or None, "run_start_ms": a.run_start.time_ms if a and a.run_start else None,
                "run_stop_ms": a.run_stop.time_ms if a and a.run_stop else None,
                "run_stop_status": a.run_stop_status if a else None,
                "target": self.target,
                "accuracy_at_target": a.target_eval.accuracy if a and a.target_eval else None,
                "evaluations": len(a.evaluations) if a else 0}


def read_run(path: Path, bench: Benchmark, round_: str) -> Run:
    """One result file, read with daybreak's mllog reader (``parse_log``, ``analyze`` with the round's goal and
    MLPerf's verdict, as `daybreak time --log` reads it): MLPerf's time of the run, run_stop - run_start, and what
    ``judge`` needs."""
    data = _read(path, MAX_LOG_BYTES)
    run = Run(path.name, hashlib.sha256(data).hexdigest())
    events, bad = parse_log(data, mlperf=True)
    declared = next((e.value for e in events if e.key == "submission_division" and isinstance(e.value, str)), "")
    run.division = DIVISIONS.get(declared.strip().lower(), "")
    if bad:
        b = bad[0]
        run.malformed = f"line {b.lineno}: {b.reason}" + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
        run.reason = f"malformed log ({run.malformed}): MLPerf's summarizer drops a log that does not parse"
    if not events:
        run.reason = run.reason or ("no :::MLLOG records (a v0.5/v0.6 ':::MLL' log?)" if b":::MLL " in data
                                    else "no :::MLLOG records")
        return run
    gbs = next((int(v) for e in events if e.key == "global_batch_size"
                for v in [as_number(e.value)] if v is not None and float(v).is_integer()), None)
    goal = _goal(bench, round_, gbs)
    run.target = goal.headline.target
    run.goal_label = goal.label
    run.analysis = analyze(events, target=goal.headline.target, rules="mlperf", tolerance=None, unit="fraction",
                           goal=goal, mlperf_round=round_, malformed=bad)
    a = run.analysis
    if a.run_stop is not None:
        run.stop_ms = a.run_stop.time_ms
    if a.run_start is not None and a.run_stop is not None and a.run_stop.time_ms > a.run_start.time_ms:
        run.time_s = (a.run_stop.time_ms - a.run_start.time_ms) / 1000.0
    return run


def _goal(bench: Benchmark, round_: str, global_batch_size: int | None = None) -> Goal:
    """The round's target of a benchmark of that round (benchmark_of finds only those)."""
    goal = bench.goal(round_, global_batch_size)
    assert goal is not None, f"{bench.name} is not a benchmark of {round_}"
    return goal


def judge(run: Run, bench: Benchmark, division: str) -> Run:
    """Did the run converge? MLPerf's verdict on its log (daybreak.external.mllog_analysis.mlperf_verdict, the
    reading of `daybreak time --log --rules mlperf`): run_stop status success, the initialization under the
    round's limit (the compliance checker's; its summarizer counts a run that breaks it as not converged) and, in
    the closed division, an evaluation that met the round's target."""
    a = run.analysis
    run.converged = False
    if run.reason or a is None or a.mlperf is None:
        return run
    if not a.mlperf.reached:
        run.reason = a.mlperf.reason
        return run
    run.converged = True
    dawn = a.clocks.get("dawnbench")
    if a.target_eval is not None and run.time_s is not None and a.run_start is not None:  # time_s needs run_start
        end_s = (a.target_eval.end_ms - a.run_start.time_ms) / 1000.0
        if abs(end_s - run.time_s) > 0.0005:
            run.notes.append(f"{run.name}: run_stop comes {run.time_s - end_s:.3f} s after the end of its first "
                             "evaluation at the target; MLPerf's time runs to run_stop")
    elif dawn is not None and a.target_eval is None:
        run.notes.append(f"{run.name}: no evaluation before run_stop met the target (evaluated offline or after "
                         "the clock); MLPerf's time runs to run_stop")
    return run


# --- scoring -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Score:
    seconds: float | None  # the olympic mean x the scaling factor; None: not a valid result
    why_not: str = ""  # "not scored: ..." when seconds is None
    kept: tuple[float, ...] = ()  # the times averaged


def mlperf_score(times_s: list[float], failed: int, bench: Benchmark, files: int, round_: str,
                 scaling_factor: float = 1.0) -> Score:
    """MLPerf's score of a benchmark folder (SUMMARIZER ``_compute_strong_score_standalone``; RULES "Benchmark
    Results"): sort the converged runs' times, drop the ``bench.dropped`` fastest and the ``bench.dropped - failed``
    slowest (each non-converged run counts as one of the slowest), average the rest, times the scaling factor.
    Not a valid result: another number of result files than the round requires (PACKAGE), or more non-converged
    runs than may be dropped."""
    required = bench.runs(round_)
    if files != required:
        return Score(None, f"not scored: {files} result file{'s' if files != 1 else ''}; MLPerf Training {round_} "
                           f"requires exactly {required} for {bench.title} (its package checker refuses the folder)")
    if failed > bench.max_failed:
        return Score(None, f"not scored: {failed} of {files} runs did not converge; a valid result may have at most "
                           f"{bench.max_failed} (each counted as one of the slowest and dropped)")
    ordered = sorted(times_s)
    kept = ordered[bench.dropped: len(ordered) - (bench.dropped - failed)]
    if not kept:
        return Score(None, "not scored: no run is left after dropping the fastest and the slowest")
    return Score(sum(kept) / len(kept) * scaling_factor, "", tuple(kept))


def _scaling_factor(folder: Path) -> tuple[float, bytes | None]:
    path = folder / SCALING_FILE
    if not os.path.lexists(path):
        return 1.0, None
    why = _not_regular(path)
    if why is not None:
        raise SubmissionError(f"{path}: {why}")
    data = _read(path)
    doc = load_json(data, str(path))
    factor = as_number(doc.get("scaling_factor")) if isinstance(doc, dict) else None
    if factor is None or not 0 < factor <= 100:
        raise SubmissionError(f"{path}: 'scaling_factor' must be a number above 0 and at most 100 (MLPerf "
                              "multiplies the score by it)")
    return factor, data


# --- one benchmark folder -> one entry ---------------------------------------------------------------------
def read_folder(folder: BenchmarkFolder, round_: str) -> tuple[Submission, list[Outcome]]:
    """A ``results/<system>/<benchmark>`` folder -> its entry and the outcomes of its files that could not be
    used (a malformed log is reported and counted as a run that did not converge)."""
    bench = folder.benchmark
    what = str(folder.path)
    system = system_for_benchmark(read_system(folder.system_json), folder)
    problems: list[Outcome] = []
    result_files: list[Path] = []
    ignored_dirs: list[str] = []
    for item in _listing(folder.path):
        if os.path.islink(item):
            problems.append(Outcome(str(item), "skipped", "a symbolic link (not followed)"))
        elif _is_dir(item):
            # MLPerf reads <benchmark>/result_*.txt only (power/ measurements, raw logs): a folder holding result
            # files is a misplaced result and said so; any other is not read
            held = [p for p in _listing(item) if RESULT_FILE.match(p.name)] if item.name != "power" else []
            if held:
                problems.append(Outcome(str(item), "skipped", f"a folder inside a benchmark folder holding "
                                        f"{len(held)} result_*.txt file{'s' if len(held) != 1 else ''}: MLPerf reads "
                                        "only the result files directly in the benchmark folder", files=len(held)))
            else:
                ignored_dirs.append(item.name)
        elif RESULT_FILE.match(item.name):
            why = _not_regular(item)
            if why is None:
                result_files.append(item)
            else:
                problems.append(Outcome(str(item), "skipped", why))
    if not result_files:
        raise SubmissionError(f"{what}: no result_*.txt files")
    if len(result_files) > MAX_RESULT_FILES:
        raise SubmissionError(f"{what}: {len(result_files)} result files, more than the {MAX_RESULT_FILES} read")
    factor, scaling_bytes = _scaling_factor(folder.path)
    runs: list[Run] = []
    for path in sorted(result_files, key=_run_order):
        try:
            run = read_run(path, bench, round_)
        except SubmissionError as e:
            run = Run(path.name, "", reason=f"unreadable ({_reason(str(e), path)})")
            run.malformed = run.reason
        if run.malformed:
            problems.append(Outcome(str(path), "skipped", f"{run.malformed}; counted as a run that did not converge",
                                    files=0))  # the file is counted with its folder's entry
        runs.append(run)
    # the systems JSON's division; where it names none (v0.7 has 'divison' typos), the logs' submission_division
    division = system.division or next((r.division for r in runs if r.division), "")
    if not division:
        raise SubmissionError(f"{folder.system_json}: no 'division' (closed or open), and the logs declare no "
                              "submission_division either")
    for run in runs:
        judge(run, bench, division)
    sub = _submission(folder, round_, system, division, runs, factor, scaling_bytes, ignored_dirs)
    return sub, problems


def _run_order(path: Path) -> tuple[int | str, ...]:
    """result_2.txt before result_10.txt."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", path.name))


def _date(ms: float | None, what: str) -> datetime:
    if ms is None or not 946684800000 <= ms <= 32503680000000:  # 2000..3000: epoch milliseconds
        raise SubmissionError(f"{what}: the runs' time_ms are not epoch milliseconds: the results cannot be dated")
    return check_date(datetime.fromtimestamp(ms / 1000.0, timezone.utc).replace(tzinfo=None),
                      f"{what}: the last run_stop")


def _submission(folder: BenchmarkFolder, round_: str, system: SystemDesc, division: str, runs: list[Run],
                factor: float, scaling_bytes: bytes | None, ignored_dirs: list[str]) -> Submission:
    bench = folder.benchmark
    what = str(folder.path)
    board = leaderboard_task(bench.board)
    times = [r.time_s for r in runs if r.converged and r.time_s is not None]
    failed = len(runs) - len(times)
    required = bench.runs(round_)
    score = mlperf_score(times, failed, bench, len(runs), round_, factor)
    stops = [r.stop_ms for r in runs if r.stop_ms is not None]
    submitted_at = _date(max(stops) if stops else None, what)
    converged = [r for r in runs if r.converged]
    representative = (min(converged, key=lambda r: abs((r.time_s or 0) - (score.seconds or 0) / factor))
                      if converged else next((r for r in runs if r.analysis and r.analysis.evaluations), None))
    a = representative.analysis if representative is not None else None
    goal = a.goal if a is not None and a.goal is not None else _goal(bench, round_)
    target = goal.headline.target
    accuracy = _accuracy(a)
    rcp = rcp_check(folder.path, round_) if division == "closed" else None
    submitter = clean_text(system.doc.get("submitter"), 200) or folder.submitter
    limit = init_limit(round_, division)
    span = bench.span(round_)
    notes = [f"MLPerf Training {round_}, {division} division: {submitter}'s {folder.system}, {bench.title}; "
             f"{len(runs)} result file{'s' if len(runs) != 1 else ''} ({required} required), {len(times)} "
             "converged; each run's time is run_stop - run_start of its log and its verdict MLPerf's, read as "
             "`daybreak time --log --rules mlperf` reads it",
             f"timed by the rules of MLPerf Training {round_}: the clock from run_start to run_stop, never paused, "
             f"evaluation included; initialization before run_start excluded when it took less than {limit.text} "
             f"({division} division; a run whose initialization took longer counts as not converged, as MLPerf's "
             f"summarizer counts it); target {goal.label}. Sources: {span.source if span else ''}; {limit.source}"
             .replace("<round>", ruleset(round_))]
    if score.seconds is not None:
        def the(n: int, what: str) -> str:
            return f"the {what}" if n == 1 else f"the {n} {what}"

        dropped = [the(bench.dropped, "fastest")]
        if bench.dropped - failed:
            dropped.append(the(bench.dropped - failed, "slowest"))
        if failed:
            dropped.append(f"{the(failed, 'run')} that did not converge (counted as the slowest)")
        notes.append(f"score: MLPerf's olympic mean {score.seconds:.3f} s ({score.seconds / 60:.3f} min) of "
                     f"{len(score.kept)} runs, {' and '.join(dropped)} dropped"
                     + (f"; times the review's scaling factor {factor:g} (scaling.json)" if factor != 1.0 else "")
                     + (f"; {rcp.text}" if rcp is not None else ""))
    else:
        notes.append(score.why_not + (f"; {rcp.text}" if rcp is not None else ""))
    for r in runs:
        if not r.converged:
            notes.append(f"{r.name} did not converge: {r.reason}")
        notes.extend(r.notes)
    if division == "open":
        notes.append("open division: MLPerf does not hold it to the closed division's target, so a run converged "
                     "when its run_stop says success and its initialization stayed under the open division's limit")
    if bench.board in BESIDE_DAWNBENCH:
        notes.append(f"MLPerf rules, not DAWNBench's: target {goal.label} (this board's DAWNBench target: "
                     f"{board.target_label}); the clock runs from run_start to run_stop, model initialization before "
                     f"run_start excluded (up to {init_limit_text(round_, division)}), evaluation included; "
                     f"{DAWNBENCH_CLOCK}")
    if system.framework_note:
        notes.append(system.framework_note)
    if not system.availability:
        notes.append(f"systems JSON status {system.status!r} is none of MLPerf's (available, preview, rdi)")
    if system.cloud:
        notes.append(f"available in the cloud (status {system.status!r}): its cloud system is named "
                     f"{system.name!r}")
    if system.division and system.division != division:
        notes.append(f"the systems JSON says division {system.division!r}, the logs {division!r}")
    if not system.division:
        notes.append("the systems JSON names no division: the logs' submission_division is used")
    if ignored_dirs:
        notes.append(f"not read: {', '.join(d + '/' for d in ignored_dirs)} (MLPerf's score reads the result files "
                     "directly in the benchmark folder; power/ holds MLPerf Power measurements)")
    notes = [one_line(n, 900) for n in notes]
    document = {
        "kind": FORMAT_MLPERF, "round": round_, "division": division, "submitter": submitter,
        "system": folder.system, "benchmark": bench.name, "board": bench.board, "required_runs": required,
        "dropped_each_end": bench.dropped, "scaling_factor": factor, "score_s": score.seconds,
        "not_scored": score.why_not or None, "target": goal.label, "metric": bench.quality.name,
        "unit": bench.quality.unit, "init_limit_s": limit.seconds, "rules_source": span.source if span else "",
        "rcp": None if rcp is None else rcp.summary(),
        "runs": [r.summary() for r in runs], "system_description": system.doc,
    }
    model = f"MLPerf {bench.title} ({submitter}, {folder.system})"
    sub = Submission(
        kind=KIND_TRAIN, task=board.name, source_format=FORMAT_MLPERF, source=folder.source,
        model=model[:MAX_FIELD_CHARS], hardware=system.hardware or folder.system, framework=system.framework,
        submitted_at=submitted_at, metric=bench.quality.name, target=target, accuracy=accuracy,
        accuracy_unit=bench.quality.unit, document=document, author=submitter,
        time_to_target_s=score.seconds,
        curve=_curve(a), tsv_columns=["epoch", "hours", bench.quality.name] if a is not None else [],
        notes=notes, runs_n=len(runs), runs_reached=len(times), runs_cv=coefficient_of_variation(times),
        run_times_s=times or None, provenance=PROVENANCE_SELF,
        provenance_detail=one_line(f"MLPerf Training {round_} {division} division, published by MLCommons: run and "
                                   f"reported by {submitter}, reviewed by the round's submitters; not re-run by this "
                                   "host" + (f"; {rcp.short}" if rcp is not None else ""), 300),
        clock_rules="mlperf", mlperf_round=round_, division=division, availability=system.availability,
    )
    apply_system(sub, system.system)
    hashed = {"round": round_, "division": division, "submitter": folder.submitter, "system": folder.system,
              "benchmark": bench.name, "system_json": hashlib.sha256(system.data).hexdigest(),
              "scaling_json": hashlib.sha256(scaling_bytes).hexdigest() if scaling_bytes is not None else None,
              "results": {r.name: r.sha256 for r in runs}}
    return sub.finish(hashed)


def _accuracy(a: Analysis | None) -> float:
    """The representative run's value at the target (its first evaluation meeting it, offline ones included: the
    earliest checkpoint by its step where the records number them, as offline evaluations complete in any order),
    else its best, in the metric's own unit (a fraction, a loss, a score)."""
    if a is None or not a.evaluations or a.goal is None:
        return 0.0
    met = [e for e in a.evaluations if a.goal.met(e.values)]
    if not met:
        return a.best_accuracy or 0.0
    return min(met, key=lambda e: (e.step is None, e.step or 0, e.index)).accuracy


# --- reference convergence points --------------------------------------------------------------------------
@dataclass(frozen=True)
class RcpCheck:
    """mlperf-logging's RCP check of a benchmark folder (``rcp_checker.check_directory``, pruned RCPs, as its
    summarizer runs it on a closed-division folder): whether the runs converge no faster than the reference allows,
    and the factor the rules normalize a faster-than-the-reference-mean score by."""

    passed: bool
    message: str  # "RCP found", "RCP Interpolation", "Missing RCP, ...", ...
    normalization: float

    @property
    def short(self) -> str:
        return f"RCP check: {'pass' if self.passed else 'FAIL'} ({self.message}), normalization {self.normalization:.4f}"

    @property
    def text(self) -> str:
        return (f"RCP check (mlperf-logging's rcp_checker, pruned reference convergence points): "
                f"{'pass' if self.passed else 'FAIL'} ({self.message}); normalization factor {self.normalization:.4f}"
                + (" (the rules scale a score by it when the runs converge faster than the reference's mean; the "
                   "review sets it in scaling.json)" if self.normalization != 1.0 else ""))

    def summary(self) -> dict[str, Any]:
        return {"passed": self.passed, "message": self.message, "normalization": self.normalization}


def rcp_check(folder: Path, round_: str) -> RcpCheck | None:
    """The RCP check of ``folder`` where mlperf-logging has reference convergence points for its benchmark in
    ``round_`` (None where it has none). The checker runs as the summarizer runs it, on a copy of the folder's
    result files: it writes a scaling.json where it runs, and nothing is written into the tree read."""
    import logging
    import shutil
    import tempfile
    from importlib import resources

    try:
        points = resources.files("mlperf_logging.rcp_checker") / f"training_{ruleset(round_)}" / \
            f"rcps_{folder.name}.json"
        if not points.is_file():
            return None
        from mlperf_logging.rcp_checker import rcp_checker
    except (ImportError, OSError):
        return None
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)  # the checker logs every step, and warns on stderr for each run it reads
    try:
        with tempfile.TemporaryDirectory(prefix="daybreak-rcp-") as tmp:
            copy = Path(tmp) / folder.name
            copy.mkdir()
            for item in _listing(folder):
                if RESULT_FILE.match(item.name) and _not_regular(item) is None:
                    shutil.copyfile(item, copy / item.name)
            passed, message, norm = rcp_checker.check_directory(str(copy), "training", ruleset(round_), False,
                                                                False, rcp_pass="pruned_rcps", set_scaling=True)
    except Exception as e:  # noqa: BLE001 - an outside tool on published files: its failure is reported, not raised
        return RcpCheck(False, f"the RCP checker could not read the folder ({type(e).__name__}: "
                               f"{one_line(str(e), 80)})", 1.0)
    finally:
        logging.disable(previous)
    return RcpCheck(bool(passed), one_line(str(message), 120), float(norm))


def _curve(a: Analysis | None) -> list[tuple[float, float, float | None]]:
    """(hours since run_start, accuracy, epoch) of each evaluation of the representative run."""
    if a is None:
        return []
    return [(e.clock_s.get("mlperf", e.elapsed_s) / 3600.0, e.accuracy, e.epoch if e.epoch_known else None)
            for e in a.evaluations]


# --- the whole tree ----------------------------------------------------------------------------------------
def import_mlperf(store: Store, root: Path, round_: str | None = None) -> tuple[str, ImportReport]:
    """Score and store every benchmark folder of the tree at ``root`` -> (the round, the report). One entry per
    transaction; the same content is never stored twice; a folder or file that cannot be used is reported and the
    import goes on (only a database error stops it)."""
    round_ = resolve_round(root, round_)
    folders, problems = collect(root, round_)
    report = ImportReport()
    for folder in folders:
        try:
            sub, file_problems = read_folder(folder, round_)
        except SubmissionError as e:
            report.outcomes.append(Outcome(str(folder.path), "skipped", _reason(str(e), folder.path), files=0))
            continue
        except (RecursionError, MemoryError, ValueError, TypeError, OverflowError, KeyError, AttributeError) as e:
            report.outcomes.append(Outcome(str(folder.path), "skipped",
                                           f"unexpected problem while reading it ({type(e).__name__}: "
                                           f"{one_line(str(e), 120)})", files=0))
            continue
        entry_id, created = store.add(sub)
        scored = "" if sub.time_to_target_s is not None else next(
            (n for n in sub.notes if n.startswith("not scored")), "not scored")
        report.outcomes.append(Outcome(str(folder.path), "stored" if created else "duplicate", scored,
                                       entry_id=entry_id, files=sub.runs_n or 0))
        report.outcomes.extend(file_problems)
    report.outcomes.extend(problems)
    report.outcomes.sort(key=lambda o: o.path)
    return round_, report


def _reason(message: str, path: Path) -> str:
    prefix = str(path) + ": "
    return message[len(prefix):] if message.startswith(prefix) else message
