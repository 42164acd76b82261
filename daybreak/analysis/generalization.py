"""`daybreak evaluate RUN_DIR [--data-dir D]`: a trained model on another labelled set of the task's format.

The run's checkpoint (saved when it first reached the target) is rebuilt with
:func:`daybreak.infer.latency.load_for_inference`, the other set is read by the task's own loader from ``D``
(never downloaded; without ``--data-dir``, the folder the run itself read, see daybreak.infer.run_data) and the
model is evaluated on its eval split with :func:`daybreak.tasks.evaluate.evaluate`
(the recipe's test-time ``predict`` included, as in training). The accuracy is appended to
``RUN_DIR/generalization.json`` (a list, one entry per evaluation) beside the checkpoint's own accuracy.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from daybreak.errors import ConfigError
from daybreak.records.generalization import GeneralizationEntry, load_entries, save_entries

if TYPE_CHECKING:
    import torch

    from daybreak.infer.latency import LoadedRun


def evaluate_run(run_dir: str | Path, data_dir: str | Path | None = None, *, allow_custom_data: bool = False,
                 device: str = "auto", amp: str = "auto", threads: int | None = None,
                 command: list[str] | None = None, write: bool = True) -> GeneralizationEntry:
    from daybreak.infer.latency import load_for_inference
    from daybreak.measure.device import set_threads
    from daybreak.measure.system import system_info
    from daybreak.tasks.evaluate import evaluate

    run_dir = Path(run_dir)
    data_dir = None if data_dir is None else Path(data_dir)
    if data_dir is not None and not data_dir.exists():
        raise ConfigError(f"--data-dir {data_dir}: no such directory")
    if data_dir is not None and not data_dir.is_dir():
        raise ConfigError(f"--data-dir {data_dir}: not a directory (give the folder holding the task's files)")
    from daybreak.records.run import RunResult

    result = RunResult.load(run_dir) if run_dir.is_dir() else None
    if result is not None and data_dir is not None:
        _check_has_data_dir(result.task)
    set_threads(threads)
    t0 = time.perf_counter()
    loaded = load_for_inference(run_dir, device=device, amp=amp, data_dir=data_dir, download=False,
                                allow_custom_data=allow_custom_data)
    if loaded.n == 0:
        raise ConfigError(f"{data_dir or loaded.data_source}: the eval split is empty")
    used = data_dir if data_dir is not None else loaded.data_dir
    run = loaded.result
    if loaded.score_predictions is not None:  # e.g. SQuAD: F1 of the answers decoded from the model's outputs
        metrics = loaded.score_predictions(_outputs(loaded))
        accuracy, top1, top5 = metrics[run.metric], metrics.get("top1"), metrics.get("top5")
    else:
        top1, top5 = evaluate(loaded.model, loaded.inputs, loaded.labels, device=loaded.device, amp=loaded.amp,
                              predict=loaded.predict, top5=loaded.top5)
        accuracy = top5 if run.metric == "top5" and top5 is not None else top1
    original = loaded.checkpoint.get("accuracy")
    if not isinstance(original, (int, float)):
        original = run.final_accuracy
    entry = GeneralizationEntry(
        run_id=run.run_id, task=run.task, recipe=run.recipe, model=run.model, metric=run.metric,
        data_dir=str(used) if used is not None else loaded.data_source,
        data_dir_resolved=str(used.resolve()) if used is not None else loaded.data_source,
        data_default=data_dir is None, data_source=loaded.data_source,
        data_official=loaded.data_official, n=loaded.n, accuracy=accuracy, top1=top1, top5=top5,
        original_accuracy=original, original_data_source=run.data_source,
        difference=None if original is None else accuracy - original,
        checkpoint=run.checkpoint or "checkpoint.pt", checkpoint_epoch=loaded.checkpoint.get("epoch"),
        device=str(loaded.device), amp=loaded.amp, seconds=time.perf_counter() - t0, system=system_info(),
        command=list(command or []),
    )
    if write:
        save_entries(run_dir, [*load_entries(run_dir), entry])
    return entry


def _check_has_data_dir(task_name: str) -> None:
    """A task whose data ships in a package (digits) has no other set to read: --data-dir is a mistake."""
    from daybreak.tasks import get_task, task_names

    task = get_task(task_name)
    if not task.has_data_dir:
        with_files = ", ".join(n for n in task_names() if get_task(n).has_data_dir)
        raise ConfigError(f"task {task.name} reads data bundled in a package ({task.files}) and has no --data-dir; "
                          f"evaluate a run of a task with data files ({with_files})")


def _outputs(loaded: LoadedRun, batch_size: int = 64) -> torch.Tensor:
    """The model's raw outputs (float32, host) for every prepared eval input, in order."""
    import torch

    from daybreak.infer.latency import make_classifier

    classify = make_classifier(loaded)
    with torch.inference_mode():
        return torch.cat([classify(loaded.inputs[i : i + batch_size]) for i in range(0, loaded.n, batch_size)])


def format_entry(e: GeneralizationEntry) -> str:
    orig = "-" if e.original_accuracy is None else f"{e.original_accuracy * 100:.2f}%"
    diff = "-" if e.difference is None else f"{e.difference * 100:+.2f} points"
    return "\n".join([
        f"{e.run_id}: {e.task} / {e.recipe} evaluated on {e.data_dir}"
        + (" (the run's own data)" if e.data_default else "") + f" ({e.n} examples"
        + ("" if e.data_official else ", custom data") + ")",
        f"  accuracy         {e.accuracy * 100:.2f}% {e.metric} (original eval set: {orig}; difference {diff})",
    ])
