"""`daybreak repeat`, `daybreak lesion` and `daybreak ab`: experiments whose trials are fresh `daybreak run`
processes (daybreak.experiments.engine), started by an executor (local subprocesses or Slurm), arms interleaved.

- repeat: one arm, N seeds -> summary.json (RepeatSummary: stability of time-to-target, accuracy vs target);
- lesion: the recipe and, for each switch, the recipe with it off -> lesion.json (each variant / the full recipe,
  a paired ratio with its interval);
- ab: a baseline and a candidate (recipes, --set variants, config files, a recipe file at two commits, or two
  external programs) over N seed pairs -> ab.json (the paired ratio of time-to-target, cost and energy, its
  interval, p-value and verdict).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from daybreak.analysis.repeat import summarize
from daybreak.config import RunConfig
from daybreak.errors import ConfigError
import daybreak.executors as ex
from daybreak.experiments.engine import (
    ExperimentLock, counted, execute, log, open_experiment, raise_if_stopped, wall_elapsed_s,
)
from daybreak.experiments.plan import ExperimentConfig, arm_config, seeds_for
from daybreak.experiments.stats import arm_stats, compare
from daybreak.records.experiment import AbSummary, Arm, Experiment, Trial
from daybreak.records.repeat import RepeatSummary
from daybreak.records.run import RunResult

if TYPE_CHECKING:
    from daybreak.records.lesion import LesionSummary

FULL = "full"
ONE_PROCESS = "fresh processes, one per trial (experiment.json)"


def arm_options(config: RunConfig) -> dict[str, Any]:
    """The options every trial of an arm runs with (JSON values; the seed and output are per trial)."""
    keep = {name for name, opt in RunConfig.options().items() if opt.recorded} - {"seed"}
    return config.model_dump(mode="json", include=keep)


def check_config(config: RunConfig) -> Any:
    """Resolve once here so that every mistake (task, recipe, hyperparameters, price) is one line before any trial."""
    from daybreak.train.spec import resolve_run_spec

    return resolve_run_spec(config.with_(nproc_per_node=1, nnodes=1, node_rank=0, rdzv_endpoint=None), world_size=1)


def check_nodes(run: RunConfig, exp: ExperimentConfig, exec_options: "ex.ExecutorOptions",
                external: bool = False) -> None:
    """--nnodes M > 1: every trial spans M nodes, so the same command runs on each node (its --node-rank) and the
    nodes must start the same trials in the same order: one at a time, here, with a fixed number of pairs."""
    from daybreak.launch import LaunchSpec

    LaunchSpec(run.nproc_per_node, run.nnodes, run.node_rank, run.rdzv_endpoint).validate()
    if run.nnodes == 1:
        return
    if exec_options.executor != "local" or (exec_options.parallel or 1) > 1:
        raise ConfigError("--nnodes > 1 runs each trial on every node in step: use --executor local with one "
                          "trial at a time (no --parallel)")
    if exp.until_width is not None:
        raise ConfigError("--until-significant decides on node 0 alone; with --nnodes > 1 give a fixed --runs")
    if external:
        raise ConfigError("--a-cmd/--b-cmd run an external program on this node only; drop --nnodes")


def _follow(record: Experiment) -> None:
    """Note on a node other than 0: the trials are done, node 0 recorded them."""
    if record.node_rank != 0:
        log(f"node {record.node_rank}: took part in {len(record.trials)} trials; node 0's --out holds the "
            f"experiment's records")


def executor_options(exec_options: "ex.ExecutorOptions", arms: list[Arm], label: str) -> "ex.ExecutorOptions":
    """Checked (a ConfigError before anything is written) and, for an experiment of several arms, one trial at a
    time unless asked otherwise: the two arms of a pair never run side by side on one machine (each would time
    its neighbour's load), whatever the number of GPUs. ``--parallel N`` (local) asks for it; a Slurm job array
    places its tasks where the cluster wants (``--slurm-additional exclusive`` keeps each alone on its node)."""
    ex.check_options(exec_options)
    if len(arms) > 1 and exec_options.executor != "slurm" and exec_options.parallel is None:
        from dataclasses import replace

        if exec_options.executor == "local" and len(ex.visible_gpus()) > 1:
            log(f"{label}: one trial at a time, so that the arms of a pair never run side by side (--parallel N "
                "runs N at once)")
        return replace(exec_options, parallel=1)
    return exec_options


def _executor_record(exec_options: "ex.ExecutorOptions") -> dict[str, Any]:
    from dataclasses import asdict

    return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(exec_options).items()}


def _out(exp: ExperimentConfig) -> Path:
    if exp.out is None:
        raise ConfigError("--out DIR is required: the experiment directory")
    return exp.out


# --- repeat -----------------------------------------------------------------------------------------------------------

def repeat(run: RunConfig, exp: ExperimentConfig, exec_options: "ex.ExecutorOptions",
           invocation: list[str]) -> RepeatSummary | None:
    """The summary (None on a node other than 0 of a multi-node experiment: node 0 records it)."""
    spec = check_config(run)
    check_nodes(run, exp, exec_options)
    out = _out(exp)
    arms = [Arm(name="repeat", directory="", config=arm_options(run))]
    exec_options = executor_options(exec_options, arms, "repeat")
    with ExperimentLock(out, invocation):
        record = open_experiment(out, "repeat", arms, seeds_for(run.seed, exp.runs), exp,
                                 _executor_record(exec_options), spec.rules, invocation, node=run)
        executor = ex.make_executor(exec_options, out)
        execute(out, record, executor, lambda r: write_repeat(out, r, spec.target), "repeat")
        _follow(record)
        if record.node_rank:
            return None
        raise_if_stopped(out, record, "repeat", RepeatSummary.FILE)
        return RepeatSummary.load(out)


def repeat_summary(out: Path, record: Experiment, arm: str, target: float, folder: Path | None = None) -> RepeatSummary | None:
    """The RepeatSummary of one arm's finished trials (its runs re-read from their directories)."""
    folder = folder or out
    done = [t for t in record.trials if t.arm == arm and t.state in ("done", "failed")]
    counted_keys = {t.key for t in counted(record, arm)}
    rows: list[tuple[Trial, RunResult]] = []
    for t in done:
        try:
            rows.append((t, RunResult.load(out / t.run_dir)))
        except Exception:  # noqa: BLE001 - a trial without a readable record is counted in experiment.json only
            continue
    kept = [(t, r) for t, r in rows if t.key in counted_keys]
    if not kept:
        return None

    def rel(t: Trial) -> str:
        return str((out / t.run_dir).relative_to(folder))

    latest = len(record.invocations) - 1
    summary = summarize([(rel(t), r, t.invocation < latest) for t, r in kept], overrides=next(a for a in record.arms if a.name == arm).config.get("overrides"),
                        inputs=[str(out / t.run_dir) for t, _ in rows], command=record.invocations[-1],
                        complete=record.complete, confidence=record.confidence, scored_runs=record.scored_runs)
    flags = {t.key: t for t, _ in rows}
    by_dir = {rel(t): t for t, _ in kept}
    for row in summary.runs:
        trial = by_dir.get(row.run_dir)
        if trial is not None:
            row.busy, row.data_load_s, row.model_init_s = trial.busy, trial.data_load_s, trial.model_init_s
    stats = arm_stats(record, arm, target)
    summary.accuracy = stats.accuracy
    summary.n_busy = sum(1 for t in flags.values() if t.busy)
    summary.cold_start_spread = stats.cold_start_spread
    summary.trials = ONE_PROCESS
    return summary


def write_repeat(out: Path, record: Experiment, target: float) -> None:
    summary = repeat_summary(out, record, "repeat", target)
    if summary is not None:
        summary.save(out)


# --- lesion -----------------------------------------------------------------------------------------------------------

def lesion(run: RunConfig, switches_text: str | None, exp: ExperimentConfig, exec_options: "ex.ExecutorOptions",
           invocation: list[str]) -> LesionSummary | None:
    """The summary (None on a node other than 0 of a multi-node experiment: node 0 records it)."""
    from daybreak.analysis.lesion import lesion_variants, parse_switches

    spec = check_config(run)
    check_nodes(run, exp, exec_options)
    recipe = spec.recipe_obj()
    if not recipe.switches:
        raise ConfigError(f"recipe {recipe.name} has no switches to turn off (a lesion study needs one; see "
                          f"`daybreak recipes {recipe.name}`, or declare switches=(...) in its Recipe)")
    switches = parse_switches(switches_text, recipe)
    out = _out(exp)
    base = arm_options(run)
    arms = [Arm(name=name, directory=name, config=arm_config(base, overrides=overrides), switched_off=off)
            for name, off, overrides in lesion_variants(recipe, switches, run.overrides)]
    exec_options = executor_options(exec_options, arms, "lesion")
    from daybreak.records.lesion import LesionSummary

    with ExperimentLock(out, invocation):
        record = open_experiment(out, "lesion", arms, seeds_for(run.seed, exp.runs), exp,
                                 _executor_record(exec_options), spec.rules, invocation, node=run)
        executor = ex.make_executor(exec_options, out)
        execute(out, record, executor, lambda r: write_lesion(out, r, spec), "lesion")
        _follow(record)
        if record.node_rank:
            return None
        raise_if_stopped(out, record, "lesion", LesionSummary.FILE)
        return LesionSummary.load(out)


def write_lesion(out: Path, record: Experiment, spec: Any) -> None:
    from daybreak.analysis.lesion import lesion_summary, write_lesion_views

    per_arm = {}
    for arm in record.arms:
        s = repeat_summary(out, record, arm.name, spec.target, folder=out / arm.directory)
        if s is not None:
            s.save(out / arm.directory)
            per_arm[arm.name] = s
    if FULL not in per_arm:
        return
    comparisons = {arm.name: compare(record, FULL, arm.name) for arm in record.arms if arm.name != FULL}
    summary = lesion_summary(spec, record, per_arm, comparisons)
    summary.save(out)
    write_lesion_views(summary, out)


# --- ab ---------------------------------------------------------------------------------------------------------------

def ab(arms: list[Arm], exp: ExperimentConfig, exec_options: "ex.ExecutorOptions", invocation: list[str],
       first_seed: int = 0, files: dict[Path, str] | None = None, node: RunConfig | None = None) -> AbSummary | None:
    """``arms``: [baseline, candidate]. Pairs of trials with the same seed (``first_seed``, +1, ...), interleaved;
    with --until-significant, further pairs until the interval is narrow enough or the budget is spent. ``files``:
    recipe files to write into the experiment directory once it is open (an arm's recipe at a commit). ``node``:
    the shared options that say which node this is (--node-rank, --rdzv-endpoint; a trial's config records
    neither). None on a node other than 0 (node 0 records the summary)."""
    specs = _arm_specs(arms, files or {})
    for a in arms:
        config = RunConfig(**a.config)
        if node is not None:
            config = config.with_(node_rank=node.node_rank, rdzv_endpoint=node.rdzv_endpoint)
        check_nodes(config, exp, exec_options, external=a.program is not None)
    if len({s.rules for s in specs}) != 1 or len({s.task for s in specs}) != 1:
        raise ConfigError("both arms must time the same task under the same --rules")
    if specs[0].target != specs[1].target:
        raise ConfigError(f"the arms have different targets ({specs[0].target:g}, {specs[1].target:g}): a ratio of "
                          "times to different targets compares nothing")
    out = _out(exp)
    exec_options = executor_options(exec_options, arms, "ab")
    with ExperimentLock(out, invocation):
        record = open_experiment(out, "ab", arms, seeds_for(first_seed, exp.runs), exp,
                                 _executor_record(exec_options), specs[0].rules, invocation, node=node)
        for path, text in (files or {}).items():
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
        executor = ex.make_executor(exec_options, out)
        state: dict[str, str] = {"stop": f"all {exp.runs} pairs run"}
        more = _until(exp, arms, state) if exp.until_width is not None else None
        execute(out, record, executor, lambda r: write_ab(out, r, specs[0], state["stop"]), "ab", more=more)
        _follow(record)
        if record.node_rank:
            return None
        raise_if_stopped(out, record, "ab", AbSummary.FILE)
        return AbSummary.load(out)


def _arm_specs(arms: list[Arm], files: dict[Path, str]) -> list[Any]:
    """Each arm's options checked (check_config); an arm whose recipe is one of ``files`` (not written yet) is
    checked with a stand-in copy of it in a temporary folder."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="daybreak-ab-") as tmp:
        specs = []
        for arm in arms:
            config = dict(arm.config)
            recipe = Path(config["recipe"]) if config.get("recipe") else None
            if recipe is not None and recipe in files:
                stand_in = Path(tmp) / arm.name / recipe.name
                stand_in.parent.mkdir(parents=True, exist_ok=True)
                stand_in.write_text(files[recipe], encoding="utf-8")
                config["recipe"] = str(stand_in)
            specs.append(check_config(RunConfig(**config)))
    return specs


def _until(exp: ExperimentConfig, arms: list[Arm], state: dict[str, str]) -> Callable[[Experiment], list[int]]:
    from daybreak.analysis.paired import relative_width

    until_width = exp.until_width
    assert until_width is not None  # made only for --until-width (ab)

    def more(record: Experiment) -> list[int]:
        est = compare(record, arms[0].name, arms[1].name).time
        width = relative_width(est)
        n = len(record.seeds)
        power = est.power_words()
        power = f"; {power}" if power else ""
        if width is not None and width <= until_width:
            state["stop"] = f"the interval is {width:.3f} wide (<= {until_width:g}) after {n} pairs"
            return []
        if n >= exp.pair_limit:
            state["stop"] = f"--max-runs {exp.pair_limit} pairs reached (interval width {_w(width)}){power}"
            return []
        if exp.budget_s is not None and wall_elapsed_s(record) >= exp.budget_s:
            state["stop"] = f"--budget {exp.budget_s:g} s spent after {n} pairs (interval width {_w(width)}){power}"
            return []
        log(f"ab: interval width {_w(width)} > {until_width:g} after {n} pairs: one more pair{power}")
        return [max(record.seeds) + 1]

    return more


def _w(width: float | None) -> str:
    return "unbounded" if width is None else f"{width:.3f}"


def write_ab(out: Path, record: Experiment, spec: Any, stop: str) -> None:
    from daybreak.analysis.sources import provenance
    from daybreak.records.ab_views import write_ab_views

    base, cand = record.arms[0].name, record.arms[1].name
    summary = AbSummary(task=spec.task, metric=spec.task_obj().metric.name, target=spec.target, rules=record.rules,
                        arms=[arm_stats(record, a.name, spec.target) for a in record.arms],
                        comparison=compare(record, base, cand), stop_reason=stop if record.complete else "unfinished",
                        complete=record.complete,
                        provenance=provenance([str(out / t.run_dir) for t in record.trials], record.invocations[-1]))
    summary.save(out)
    write_ab_views(summary, out)


def recipe_at_commit(recipe_file: str, commit: str, out: Path, arm: str) -> tuple[Path, str]:
    """A recipe file as it was at ``commit`` (``git show``) -> (where it goes in the experiment directory, its text);
    nothing is written here (``ab`` writes it once the experiment is open). The file is named by the commit's hash,
    so that a ``--resume`` after ``HEAD`` moved is refused for its other recipe instead of running it."""
    path = Path(recipe_file).expanduser().resolve()
    try:
        top = subprocess.run(["git", "-C", str(path.parent), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, check=True).stdout.strip()
        rel = path.relative_to(top).as_posix()
        full = subprocess.run(["git", "-C", top, "rev-parse", "--verify", f"{commit}^{{commit}}"],
                              capture_output=True, text=True, check=True).stdout.strip()
        text = subprocess.run(["git", "-C", top, "show", f"{full}:{rel}"], capture_output=True, text=True,
                              check=True).stdout
    except (OSError, ValueError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", "") or str(e)
        raise ConfigError(f"--{arm}-commit {commit}: cannot read {recipe_file} at that commit "
                          f"({detail.strip().splitlines()[0] if detail.strip() else 'git failed'})") from None
    return out / "recipes" / f"{arm}-{full[:12]}-{path.name}", text
