"""daybreak's own records as leaderboard submissions: result.json (training), inference.json (inference) and a
`daybreak repeat` directory (one multi-run entry).

Time to target is read from the run's history under DAWNBench v1's clock rules, against the *leaderboard's*
target for the task (the task's default), so a run made with a custom target counts only if its history passes
the default one too. Runs recorded ``official: false`` (custom data, non-default target) are refused: the
leaderboard compares like with like. Every record is validated by its model in pydantic's strict mode
(:func:`daybreak.leaderboard.ingest.submission.validate_record`: no booleans or strings for numbers, the model's
constraints), and every run record passes :mod:`daybreak.leaderboard.ingest.plausibility` first.
A multi-run entry ranks on the olympic mean of its runs (recomputed here from their histories).

Energy (the ``train-energy`` and ``inference-energy`` objectives) is read only from daybreak's own counters: a run's
joules counted under DAWNBench's clock up to the first evaluation at or above the leaderboard's target
(``history[i].energy_j["dawnbench"]``, which is ``energy.joules_to_target["dawnbench"]`` for a run made with the
default target), and an inference record's joules per 10,000 examples of its batch-1 pass. A record without them
is not ranked on those objectives; one whose figures are not physical is refused (see plausibility).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict

from daybreak.errors import ConfigError
from daybreak.leaderboard.ingest.plausibility import (
    check_clock_shape, check_inference_energy, check_latency, check_power, check_price, check_price_date,
    check_price_per_example, check_run, check_time, close,
)
from daybreak.leaderboard.ingest.submission import (
    FORMAT_INFERENCE, FORMAT_REPEAT, FORMAT_RUN, KIND_INFERENCE, KIND_TRAIN, MAX_QUANTITY, MAX_SECONDS, Submission,
    SubmissionError, as_naive_utc, check_date, number_field, one_line, parse_number, reaches, text_field,
    validate_record,
)
from daybreak.leaderboard.ingest.systems import apply as apply_system
from daybreak.leaderboard.ingest.systems import from_run_document, section
from daybreak.leaderboard.tasks import LeaderboardTask, leaderboard_task, task_names

if TYPE_CHECKING:
    from daybreak.records.repeat import RepeatSummary
    from daybreak.records.run import RunResult
    from daybreak.records.significance import TargetSignificance


def _task(name: Any, what: str) -> LeaderboardTask:
    try:
        return leaderboard_task(str(name))
    except ConfigError:
        raise SubmissionError(f"{what}: task {one_line(str(name), 40)!r} has no leaderboard "
                              f"(known: {', '.join(task_names())})") from None


def _check_text(value: str, key: str, what: str) -> str:
    return text_field({key: value}, key, what, required=False)


EXTERNAL_RECIPE = "external"  # the recipe name `daybreak time` records carry (daybreak.external.timer.RECIPE)
EXTERNAL_DETAIL = ("external program timed by `daybreak time`: its accuracy and timestamps are the program's own "
                   "claims")


def load_run(doc: dict[str, Any], what: str) -> RunResult:
    """A daybreak ``result.json`` document -> RunResult, validated strictly (submission.validate_record: JSON
    types as the model declares them, and the model's constraints); one-line SubmissionError if it is not one."""
    from daybreak.records.run import RunResult

    run = validate_record(RunResult, doc, what, "run record")
    check_clock_shape(doc, what)
    return run


def is_external(run: RunResult) -> bool:
    return run.recipe == EXTERNAL_RECIPE or run.device == "external"


def run_time(run: RunResult, task: LeaderboardTask, what: str, *, allow_unreached: bool = False
             ) -> tuple[list[float], str | None, int | None]:
    """(DAWNBench clock of every evaluation, conversion note or None, index of the first evaluation at or above
    the leaderboard's target or None). Checks everything in :mod:`daybreak.leaderboard.ingest.plausibility`."""
    check_run(run, what)
    if run.metric != task.metric:
        raise SubmissionError(f"{what}: metric: the run measured {run.metric!r} but {task.name} is ranked on "
                              f"{task.metric!r}")
    if not run.history:
        raise SubmissionError(f"{what}: the run has no evaluations (history is empty)")
    hours_at, converted = _dawnbench_clock(run)
    previous = -1.0
    for i, h in enumerate(run.history):
        t = parse_number(hours_at[i], f"{what}: history[{i}] DAWNBench clock")
        if t < 0 or t <= previous or t > MAX_SECONDS:
            raise SubmissionError(f"{what}: history[{i}]'s DAWNBench clock {t:g} s is not after the previous "
                                  "evaluation's (time must increase)")
        previous = t
    index = next((i for i, h in enumerate(run.history) if reaches(h.accuracy, task.target)), None)
    if index is None and not allow_unreached:
        best = max(h.accuracy for h in run.history)
        raise SubmissionError(f"{what}: never reached the target {task.target * 100:g}% {task.metric} "
                              f"(best {best * 100:.2f}%)")
    if index is not None:
        check_time(run, hours_at[index], run.history[index].step, what)
    return hours_at, converted, index


def run_energy(run: RunResult, index: int | None, seconds: float | None, what: str
               ) -> tuple[float | None, str, str | None]:
    """(joules under DAWNBench's clock to the leaderboard's target, the kinds they cover, why there are none)."""
    if index is None or seconds is None:
        return None, "", None
    value = run.history[index].energy_j.get("dawnbench")
    if value is None:
        reasons = "; ".join(dict.fromkeys(run.energy.unavailable.values())) if run.energy.unavailable else ""
        return None, "", reasons or "the run recorded no energy"
    check_power(value, seconds, run.world_size, f"{what}: energy to target")
    return float(value), "+".join(run.energy.covers), None


def parse_run(doc: dict[str, Any], *, source: str, what: str | None = None, allow_unreached: bool = False
              ) -> Submission:
    """A daybreak ``result.json`` (kind ``daybreak.run``) -> a training submission (self-reported: the importer
    or the reproduction sets the provenance)."""
    what = what or source
    run = load_run(doc, what)
    task = _task(run.task, what)
    if not run.official:
        reasons = "; ".join(run.unofficial_reasons) or "no reason recorded"
        raise SubmissionError(f"{what}: unofficial run ({one_line(reasons, 160)}); "
                              "the leaderboard takes official runs only")
    hours_at, converted, index = run_time(run, task, what, allow_unreached=allow_unreached)
    first = None if index is None else run.history[index]
    cost_per_hour = run.cost_per_hour
    if cost_per_hour is not None and cost_per_hour <= 0:
        cost_per_hour = None
    seconds = None if index is None else hours_at[index]
    notes = ["accuracy read as fraction (daybreak record)"]
    if first is not None:
        notes.append(f"target reached at epoch {first.epoch:g} ({seconds:.3f} s under DAWNBench v1's clock rules: "
                     "data loading, init and training; evaluation and record writes excluded)")
    else:
        best = max(h.accuracy for h in run.history)
        notes.append(f"did not reach the target {task.target * 100:g}% {task.metric} (best {best * 100:.2f}%)")
    if converted:
        notes.append(converted)
    if cost_per_hour is None and first is not None:
        notes.append("no cost_per_hour: not ranked on train-cost")
    energy, covers, no_energy = run_energy(run, index, seconds, what)
    if energy is not None:
        notes.append(f"energy to target {energy:.6g} J under DAWNBench v1's clock ({covers or 'no kind named'}; "
                     "daybreak's hardware counters)")
    elif no_energy:
        notes.append(f"no energy: not ranked on train-energy ({one_line(no_energy, 200)})")
    external = is_external(run)
    sub = Submission(
        kind=KIND_TRAIN, task=task.name, source_format=FORMAT_RUN, source=source,
        model=_check_text(f"{run.model} ({run.recipe} recipe)" if not external else f"{run.model} (external program)",
                          "model", what),
        hardware=_check_text(run.system.hardware_summary(), "hardware", what),
        framework=_check_text(run.framework, "framework", what),
        submitted_at=as_naive_utc(run.finished_at or run.started_at), metric=task.metric, target=task.target,
        accuracy=(first or max(run.history, key=lambda h: h.accuracy)).accuracy, accuracy_unit="fraction",
        document=doc, **attribution(run, what),
        time_to_target_s=seconds, epochs_to_target=None if first is None else first.epoch,
        cost_per_hour=cost_per_hour,
        train_cost_usd=None if cost_per_hour is None or seconds is None else seconds / 3600.0 * cost_per_hour,
        train_energy_j=energy, energy_covers=covers if energy is not None else "",
        curve=[(t / 3600.0, h.accuracy, h.epoch) for t, h in zip(hours_at, run.history)],
        tsv_columns=["epoch", "hours", "accuracy"], notes=notes,
        provenance_detail=EXTERNAL_DETAIL if external else "",
    )
    apply_system(sub, from_run_document(doc))
    return sub.finish({"document": doc})


class Attribution(TypedDict):
    """Who ran a record and what code (Submission's fields of the same names)."""

    author: str
    author_email: str
    code_url: str
    code_commit: str
    recipe_sha256: str


def attribution(run: RunResult, what: str) -> Attribution:
    """Who ran it and what code: the run's ``--author``, its git commit and recipe hash, and a link to that commit
    when the checkout had a remote on a known host (else the remote's own URL, else no link: the page shows the
    commit and the recipe hash as text)."""
    ctx = run.context
    commit = ctx.git_commit or ""
    return {"author": _check_text(run.author or "", "author", what),
            "author_email": _check_text(run.author_email or "", "author_email", what),
            "code_url": _check_text(code_link(ctx.git_remote, commit), "code_url", what),
            "code_commit": commit if re.fullmatch(r"[0-9a-f]{7,64}", commit) else "",
            "recipe_sha256": (ctx.recipe_sha256 or "") if re.fullmatch(r"[0-9a-f]{64}", ctx.recipe_sha256 or "")
            else ""}


_SCP_REMOTE = re.compile(r"^(?:[\w.-]+@)?(?P<host>[\w.-]+):(?P<path>[^/][^:]*)$")
_BROWSE = {"github.com": "{base}/tree/{commit}", "gitlab.com": "{base}/-/tree/{commit}",
           "bitbucket.org": "{base}/src/{commit}", "codeberg.org": "{base}/src/commit/{commit}"}


def code_link(remote: str | None, commit: str) -> str:
    """A web link to ``commit`` in ``remote`` (``git@github.com:o/r.git`` and ``https://github.com/o/r`` ->
    ``https://github.com/o/r/tree/COMMIT``); a remote on another host: its https URL as it is; "" otherwise."""
    if not remote:
        return ""
    m = _SCP_REMOTE.match(remote)
    if m:
        host, path = m.group("host"), m.group("path")
    elif remote.startswith(("https://", "http://", "ssh://", "git://")):
        rest = remote.split("://", 1)[1]
        hostport, _, path = rest.partition("/")
        host = hostport.rpartition("@")[2].split(":")[0]
    else:
        return ""
    path = path.strip("/").removesuffix(".git")
    if host in _BROWSE and path.count("/") >= 1:
        base = f"https://{host}/{path}"
        return _BROWSE[host].format(base=base, commit=commit) if commit else base
    return remote if remote.startswith("https://") else ""


def run_summary(run: RunResult, hours_at: list[float], index: int | None, energy_j: float | None = None,
                energy_covers: str = "") -> dict[str, Any]:
    """The compact per-run part of a multi-run entry's document (what its page and a reproduction need)."""
    first = None if index is None else run.history[index]
    return {
        "seed": run.seed, "run_id": run.run_id, "status": run.status, "reached": first is not None,
        "dawnbench_s": None if index is None else hours_at[index],
        "dawnbench_j": energy_j, "energy_covers": energy_covers,
        "epochs_to_target": None if first is None else first.epoch,
        "steps_to_target": None if first is None else first.step,
        "best_accuracy": max(h.accuracy for h in run.history), "rules": run.rules, "world_size": run.world_size,
        "eval_every_epochs": run.eval_every_epochs, "eval_every_steps": run.eval_every_steps,
        "hardware": run.system.hardware_summary(), "device": run.device,
        "started_at": run.started_at.isoformat(),
        "curve": [[round(t, 9), h.accuracy, h.epoch] for t, h in zip(hours_at, run.history)],
    }


MAX_REPEAT_RUNS = 100


def parse_repeat(summary_doc: dict[str, Any], run_docs: list[tuple[str, dict[str, Any]]], *, source: str,
                 what: str | None = None) -> Submission:
    """A ``daybreak repeat`` directory -> one training entry ranked by the olympic mean of its runs' DAWNBench
    times (MLPerf's score: the fastest and the slowest run dropped), with N, the CV and the fraction that reached
    the target. ``run_docs``: (name, result.json document) for every run the summary lists, in its order.

    The statistics are recomputed here from the runs' own histories (each run passes every check a single run
    does); the summary must agree with its runs (task, recipe, model, metric, target, seeds, statuses, and
    everything :func:`check_summary` recomputes)."""
    from daybreak.records.repeat import RepeatSummary
    from daybreak.analysis.stats import coefficient_of_variation, olympic_mean, target_significance

    what = what or source
    summary = validate_record(RepeatSummary, summary_doc, what, "repeat summary")
    if not summary.complete:
        raise SubmissionError(f"{what}: the repeat is not complete (seeds are still to run)")
    task = _task(summary.task, what)
    if not summary.runs or len(summary.runs) > MAX_REPEAT_RUNS:
        raise SubmissionError(f"{what}: a repeat needs 1 to {MAX_REPEAT_RUNS} runs, not {len(summary.runs)}")
    if summary.n_runs != len(summary.runs) or len(run_docs) != len(summary.runs):
        raise SubmissionError(f"{what}: the summary lists {len(summary.runs)} runs (n_runs {summary.n_runs}) but "
                              f"{len(run_docs)} run records came with it")
    seeds = [r.seed for r in summary.runs]
    if len(set(seeds)) != len(seeds) or seeds != list(summary.seeds):
        raise SubmissionError(f"{what}: the runs' seeds {seeds} are not the summary's distinct seeds")
    runs: list[RunResult] = []
    compact: list[dict[str, Any]] = []
    times: list[float] = []
    energies: list[tuple[float, str]] = []
    no_energy: list[str] = []
    for i, (listed, (name, doc)) in enumerate(zip(summary.runs, run_docs)):
        run_what = f"{what}: run {one_line(name, 80)}"
        run = load_run(doc, run_what)
        if not run.official:
            raise SubmissionError(f"{run_what}: unofficial run; the leaderboard takes official runs only")
        if (run.task, run.recipe, run.seed, run.run_id) != (summary.task, summary.recipe, listed.seed, listed.run_id):
            raise SubmissionError(f"{run_what}: task/recipe/seed/run_id {run.task}/{run.recipe}/{run.seed}/"
                                  f"{one_line(run.run_id, 40)} is not what the summary lists")
        if run.status != listed.status:
            raise SubmissionError(f"{what}: runs[{i}].status {one_line(listed.status, 40)!r} is not its run "
                                  f"record's ({run.status})")
        for field in ("model", "metric", "target"):
            if getattr(run, field) != getattr(summary, field):
                raise SubmissionError(f"{what}: {field} {one_line(str(getattr(summary, field)), 40)!r} is not its "
                                      f"runs' ({one_line(str(getattr(run, field)), 40)!r})")
        if runs and run.hyperparameters != runs[0].hyperparameters:
            raise SubmissionError(f"{run_what}: other hyperparameters than the first run's")
        if is_external(run):
            raise SubmissionError(f"{run_what}: a `daybreak time` record of an external program; a multi-run entry "
                                  "is made of daybreak runs")
        hours_at, _converted, index = run_time(run, task, run_what, allow_unreached=True)
        seconds = None if index is None else hours_at[index]
        joules, covers, why = run_energy(run, index, seconds, run_what)
        runs.append(run)
        compact.append(run_summary(run, hours_at, index, joules, covers))
        if index is not None:
            times.append(hours_at[index])
            if joules is None:
                no_energy.append(f"seed {run.seed}: {why}")
            else:
                energies.append((joules, covers))
    check_summary(summary, runs, what)
    score = olympic_mean(times)
    if score is None:
        raise SubmissionError(f"{what}: {len(times)} of {len(runs)} runs reached the target "
                              f"{task.target * 100:g}% {task.metric}; the olympic mean needs at least 3")
    first_headline = {r.rules for r in runs}
    if first_headline == {"dawnbench"} and summary.time_to_target.olympic_mean_s is not None \
            and not close(summary.time_to_target.olympic_mean_s, score, rel=1e-4, abs_tol=1e-3):
        raise SubmissionError(f"{what}: the summary's olympic mean {summary.time_to_target.olympic_mean_s:g} s is "
                              f"not its runs' ({score:g} s)")
    cost = runs[0].cost_per_hour if runs[0].cost_per_hour and runs[0].cost_per_hour > 0 else None
    cv = coefficient_of_variation(times)
    representative = min((c for c in compact if c["reached"]), key=lambda c: abs(c["dawnbench_s"] - score))
    epochs = sorted(c["epochs_to_target"] for c in compact if c["reached"])
    notes = [f"{len(runs)} runs (seeds {', '.join(str(s) for s in seeds)}), {len(times)} reached the target: ranked "
             f"by the olympic mean of their DAWNBench-clock times ({score:.3f} s; the fastest and the slowest "
             "dropped)",
             f"curve: seed {representative['seed']}, the run closest to the olympic mean"]
    if cost is None:
        notes.append("no cost_per_hour: not ranked on train-cost")
    energy, energy_covers = None, ""
    if energies and not no_energy and len({c for _, c in energies}) == 1:
        energy, energy_covers = olympic_mean([j for j, _ in energies]), energies[0][1]
        if energy is not None:
            notes.append(f"energy: the olympic mean of the reached runs' joules under DAWNBench v1's clock "
                         f"({energy:.6g} J; {energy_covers})")
    elif no_energy:
        notes.append(f"no energy: not ranked on train-energy ({one_line('; '.join(no_energy), 200)})")
    elif energies:
        notes.append("no energy: the runs' counters cover different kinds; not ranked on train-energy")
    finals = [r.final_accuracy if r.final_accuracy is not None else r.history[-1].accuracy for r in runs]
    significance = target_significance(finals, task.target, alpha=0.01, confidence=0.99)
    notes.append(accuracy_note(significance, task))
    document = {"kind": FORMAT_REPEAT, "summary": summary_doc, "runs": compact,
                "accuracy_significance": significance.model_dump(mode="json")}
    sub = Submission(
        kind=KIND_TRAIN, task=task.name, source_format=FORMAT_REPEAT, source=source,
        model=_check_text(f"{summary.model} ({summary.recipe} recipe, {len(runs)} runs)", "model", what),
        hardware=_check_text(runs[0].system.hardware_summary(), "hardware", what),
        framework=_check_text(runs[0].framework, "framework", what),
        submitted_at=max(as_naive_utc(r.finished_at or r.started_at) for r in runs), metric=task.metric,
        target=task.target,
        accuracy=next(p[1] for p in representative["curve"] if reaches(p[1], task.target)),
        accuracy_unit="fraction", document=document, **attribution(runs[0], what),
        time_to_target_s=score, epochs_to_target=epochs[len(epochs) // 2], cost_per_hour=cost,
        train_cost_usd=None if cost is None else score / 3600.0 * cost,
        train_energy_j=energy, energy_covers=energy_covers if energy is not None else "",
        curve=[(p[0] / 3600.0, p[1], p[2]) for p in representative["curve"]],
        tsv_columns=["epoch", "hours", "accuracy"], notes=notes,
        runs_n=len(runs), runs_reached=len(times), runs_cv=cv, run_times_s=times,
    )
    apply_system(sub, from_run_document(run_docs[0][1]))
    return sub.finish({"summary": summary_doc, "runs": [doc for _, doc in run_docs]})


def accuracy_note(sig: TargetSignificance, task: LeaderboardTask) -> str:
    """The multi-run entry's accuracy against the target, as the nanoGPT speedrun judges a record: the mean final
    accuracy above the target at p < 0.01 (one-sided t-test), with its 99% interval."""
    def pct(a: float | None) -> str:
        assert a is not None  # the runs' final accuracies are checked finite: their mean and interval exist
        return f"{a:.4f}" if task.metric == "f1" else f"{a * 100:.2f}%"

    interval = (f" ({sig.confidence * 100:g}% CI {pct(sig.ci_low)} to {pct(sig.ci_high)})" if sig.ci_low is not None
                else "")
    verdict = ("above the target at p < 0.01" if sig.significant else "not shown above the target at p < 0.01")
    p = f", p = {sig.p_value:.2g}" if sig.p_value is not None else (f"; {sig.note}" if sig.note else "")
    return (f"final accuracy: {sig.n_at_or_above_target} of {sig.n} runs at or above the target; mean "
            f"{pct(sig.mean)}{interval}: {verdict}{p}")


def check_summary(summary: RepeatSummary, runs: list[RunResult], what: str) -> None:
    """A repeat summary is what daybreak's summarize makes of its runs (daybreak.analysis.repeat): each listed run
    as its record says, the reached count and fraction, and every statistic of the times and epochs to target
    recomputed from the runs (daybreak.analysis.stats); the significance test's figures within their ranges; the
    summary made in [2017, tomorrow]."""
    from daybreak.analysis.stats import epoch_stats, time_stats

    def same(a: float | None, b: float | None) -> bool:
        if a is None or b is None:
            return a is None and b is None
        return close(float(a), float(b), rel=1e-6, abs_tol=1e-9)

    for i, (listed, run) in enumerate(zip(summary.runs, runs)):
        run_reached = run.reached
        expected = {"reached": run_reached, "time_to_target_s": run.time_to_target_s if run_reached else None,
                    "epochs_to_target": run.epochs_to_target if run_reached else None,
                    "final_accuracy": run.final_accuracy, "best_accuracy": run.best_accuracy, "train_s": run.train_s}
        for name, value in expected.items():
            given = getattr(listed, name)
            if (given != value) if isinstance(value, bool) or isinstance(given, bool) else not same(given, value):
                raise SubmissionError(f"{what}: runs[{i}].{name} {given} is not its run record's ({value})")
        if listed.device != run.device:
            raise SubmissionError(f"{what}: runs[{i}].device is not its run record's")
    reached = [r.time_to_target_s for r in summary.runs if r.reached and r.time_to_target_s is not None]
    if summary.n_reached != len(reached):
        raise SubmissionError(f"{what}: n_reached {summary.n_reached} but {len(reached)} of its runs reached the "
                              "target")
    if not same(summary.reached_fraction, len(reached) / len(summary.runs)):
        raise SubmissionError(f"{what}: reached_fraction {summary.reached_fraction} is not n_reached / n_runs")
    if not 0.0 < summary.time_to_target.confidence < 1.0:
        raise SubmissionError(f"{what}: time_to_target.confidence {summary.time_to_target.confidence:g} is not a "
                              "level between 0 and 1")
    epochs = epoch_stats([r.epochs_to_target for r in summary.runs
                          if r.reached and r.time_to_target_s is not None and r.epochs_to_target is not None])
    for section, recomputed in (("time_to_target", time_stats(reached, summary.time_to_target.confidence)),
                                ("epochs_to_target", epochs)):
        for name in type(recomputed).model_fields:
            given, value = getattr(getattr(summary, section), name), getattr(recomputed, name)
            if isinstance(value, list):
                if len(given) != len(value):
                    raise SubmissionError(f"{what}: {section}.{name} lists {len(given)} values, its runs "
                                          f"{len(value)}")
                bad = next((j for j, (g, v) in enumerate(zip(given, value)) if not same(g, v)), None)
                if bad is not None:
                    raise SubmissionError(f"{what}: {section}.{name}[{bad}] {given[bad]:g} is not its runs' "
                                          f"({value[bad]:g})")
            elif not same(given, value):
                raise SubmissionError(f"{what}: {section}.{name} {given} is not its runs' ({value})")
    a = summary.accuracy
    if a is not None:
        if a.mean is not None and not 0.0 <= a.mean <= 1.0:
            raise SubmissionError(f"{what}: accuracy.mean {a.mean:g} is not a fraction 0..1")
        if a.n_at_or_above_target > a.n:
            raise SubmissionError(f"{what}: accuracy.n_at_or_above_target {a.n_at_or_above_target} is more than "
                                  f"accuracy.n {a.n}")
    if summary.cold_start_spread is not None and summary.cold_start_spread < 1.0:
        raise SubmissionError(f"{what}: cold_start_spread {summary.cold_start_spread:g} is below 1 (a max / min)")
    check_date(summary.provenance.created_at, f"{what}: provenance.created_at "
                                              f"{summary.provenance.created_at.date().isoformat()}")


def _dawnbench_clock(run: RunResult) -> tuple[list[float], str | None]:
    """Each evaluation's time under DAWNBench v1's rules, whatever the run's headline rule set. Records made
    before the rule sets (no ``clock_s``) timed training only: their init time is added back (and evaluation
    taken out where it was counted), and a note says the figure was converted."""
    if all("dawnbench" in h.clock_s for h in run.history):
        return [h.clock_s["dawnbench"] for h in run.history], None
    init = run.init_s or 0.0
    out, evals = [], 0.0
    for h in run.history:
        evals += h.eval_s
        out.append(init + h.elapsed_s - (evals if run.clock.eval_included else 0.0))
    return out, ("converted from a record made before clock rule sets: init_s added to the training clock"
                 + (", evaluation taken out" if run.clock.eval_included else ""))


def parse_inference(doc: dict[str, Any], *, source: str, what: str | None = None) -> Submission:
    """A daybreak ``inference.json`` (kind ``daybreak.inference``) -> an inference submission."""
    what = what or source
    record = _inference_record(doc, what)
    task = _task(record.get("task"), what)
    latency = record.get("latency") or {}
    mean_ms = parse_number(latency.get("mean_ms") if isinstance(latency, dict) else None, f"{what}: latency.mean_ms")
    if mean_ms <= 0:
        raise SubmissionError(f"{what}: latency.mean_ms must be greater than 0")
    if mean_ms > MAX_QUANTITY:
        raise SubmissionError(f"{what}: latency.mean_ms {mean_ms:g} is out of range (at most {MAX_QUANTITY:g})")
    accuracy = parse_number(record.get("accuracy"), f"{what}: accuracy")
    if not 0.0 <= accuracy <= 1.0:
        raise SubmissionError(f"{what}: accuracy {accuracy:g} is not a fraction 0..1")
    if record.get("metric") not in (None, task.metric):
        raise SubmissionError(f"{what}: metric: the record measured {record.get('metric')!r} but {task.name} is "
                              f"ranked on {task.metric!r}")
    if record.get("valid") is False:
        reason = one_line(str(record.get("reason") or "accuracy below target"), 160)
        raise SubmissionError(f"{what}: not valid: {reason}")
    if record.get("data_official") is False:
        raise SubmissionError(f"{what}: measured on unofficial data; the leaderboard takes official data only")
    if not reaches(accuracy, task.target):
        raise SubmissionError(f"{what}: accuracy {accuracy * 100:.2f}% is below the target {task.target * 100:g}% "
                              f"{task.metric}")
    per_example = number_field(record, "cost_per_example_usd", what, required=False, positive=False)
    per_10k = number_field(record, "cost_per_10k_usd", what, required=False, positive=False,
                           maximum=MAX_QUANTITY * 10_000)
    if per_10k is None and per_example is not None:
        per_10k = per_example * 10_000
    if per_example is None and per_10k is not None:
        per_example = per_10k / 10_000
    if per_10k is not None and per_10k <= 0:
        per_example = per_10k = None
    cost_per_hour = record.get("cost_per_hour")
    check_price(cost_per_hour if isinstance(cost_per_hour, (int, float)) else None, what)
    check_price_per_example(per_example, mean_ms, what, "cost_per_10k_usd / 10,000" if record.get("cost_per_10k_usd")
                            is not None else "cost_per_example_usd")
    hardware = record.get("hardware_summary") or _hardware(record.get("system"))
    created = record.get("created_at")
    submitted = check_date(_datetime(created, what), f"{what}: created_at")
    check_price_date(record.get("price_date"), what)
    check_latency(record, what)
    notes = ["accuracy read as fraction (daybreak record)", "latency: mean of the batch-1 pass over the eval set"]
    if per_10k is None:
        notes.append("no price: not ranked on inference-cost")
    energy = check_inference_energy(record, what)
    energy_record = section(record, "energy")
    covers = "+".join(str(k) for k in energy_record.get("covers") or []) if energy is not None else ""
    if energy is not None:
        notes.append(f"energy {energy:.6g} J per 10,000 examples of the batch-1 pass ({covers or 'no kind named'}; "
                     "daybreak's hardware counters)")
    else:
        why = "; ".join(dict.fromkeys(str(v) for v in (energy_record.get("unavailable") or {}).values()))
        notes.append("no energy: not ranked on inference-energy"
                     + (f" ({one_line(why, 200)})" if why else " (a record made before daybreak measured energy)"
                        if not energy_record else ""))
    sub = Submission(
        kind=KIND_INFERENCE, task=task.name, source_format=FORMAT_INFERENCE, source=source,
        model=_check_text(f"{record.get('model', '')} ({record.get('recipe', '?')} recipe)", "model", what),
        hardware=_check_text(str(hardware), "hardware", what),
        framework=_check_text(str(record.get("framework", "")), "framework", what),
        submitted_at=submitted, metric=task.metric, target=task.target, accuracy=accuracy, accuracy_unit="fraction",
        document=doc, code_url="https://pypi.org/project/daybreak/", latency_ms=mean_ms,
        cost_per_example_usd=per_example, inference_cost_10k_usd=per_10k, inference_energy_10k_j=energy,
        energy_covers=covers, notes=notes,
    )
    apply_system(sub, from_run_document(record))
    return sub.finish({"document": doc})


def _inference_record(doc: dict[str, Any], what: str) -> dict[str, Any]:
    """The document validated strictly as daybreak's InferenceResult (submission.validate_record), as a dict."""
    from daybreak.records.inference import InferenceResult

    record = validate_record(InferenceResult, doc, what, "inference record")
    out = record.model_dump(mode="python")
    system = getattr(record, "system", None)
    if system is not None and hasattr(system, "hardware_summary"):
        out["hardware_summary"] = system.hardware_summary()
    return out


def _hardware(system: Any) -> str:
    if isinstance(system, dict):
        gpus = system.get("gpus") or []
        if gpus:
            names = [g.get("name", "?") for g in gpus if isinstance(g, dict)]
            return "; ".join(f"{names.count(n)} x {n}" for n in sorted(set(names)))
        return f"{system.get('cpu_model', 'CPU')} (CPU only)"
    return "unknown"


def _datetime(value: Any, what: str) -> datetime:
    if isinstance(value, datetime):
        return as_naive_utc(value)
    if isinstance(value, str):
        try:
            return as_naive_utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            pass
    raise SubmissionError(f"{what}: created_at {one_line(str(value), 40)!r} is not an ISO date-time")
