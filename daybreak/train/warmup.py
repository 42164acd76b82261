"""The warm-up of a timed run: compile / autotune on tensors of the real batches' shapes before the clock needs
them, then put everything back (daybreak.train.runner calls it in the ``warmup`` phase).

It runs only where it buys something (``warmup_pays``): a compiled model (dynamo and inductor compile per
shape), a CUDA device (cuDNN autotunes each convolution shape, CUDA and its libraries start lazily, solvers such as
the whitening's ``eigh`` load cuSOLVER at their first call). Eager on a CPU there is nothing to pay in advance, so
nothing runs: a warm-up there would only add its own time to DAWNBench's clock.

Where it runs, every shape the clock will see is seen first: evaluations run in chunks of exactly ``EVAL_CHUNK``
(the eval set padded to whole chunks, ``BatchPlan.fixed_eval_shapes``), training batches are all full (the tail
of an epoch is dropped), and the recipe's ``warm_up_init`` calls the first-call solvers of its ``init_from_data``.

Two sources of warm-up tensors:

- ``spec_warmup_data``: before the dataset is touched (recipes that ``builds_from_spec``), synthetic examples of
  the task's InputSpec, cut into batches by the same batch source and evaluator classes the run then uses on the
  real data (so the same prepare / augment / index / layout code makes them).
- ``data_warmup_batches``: after the data is loaded (the other recipes), zeros made by the batch source itself.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import torch

from daybreak.data.base import TaskData
from daybreak.recipes import TrainSetup
from daybreak.tasks.batches import BatchPlan, Evaluator, InMemoryBatches, InMemoryClassification, TrainBatches
from daybreak.tasks.evaluate import evaluate
from daybreak.train.step import TrainStep

WARMUP_PASSES = 3  # training steps on each warm-up batch: the optimizer's first step differs from later ones
WARMUP_EVAL_EXAMPLES = 100  # synthetic eval examples per rank (padded to one EVAL_CHUNK, as the real set is)


def warmup_pays(compiled: bool, device: torch.device) -> bool:
    """Whether a run pays first-call costs that a warm-up can take off its clock: compiled graphs, or a GPU (cuDNN
    autotuning per shape, lazy CUDA and library start-up). The one place this is decided; it also fixes the
    evaluation's chunk shape (``BatchPlan.fixed_eval_shapes``)."""
    return compiled or device.type in ("cuda", "mps")

Batch = tuple[torch.Tensor, torch.Tensor]


def warm_up(setup: TrainSetup, step: TrainStep, batches: list[Batch], evaluate_once: Callable[[], Any],
            device: torch.device) -> None:
    """The recipe's ``warm_up_init`` on the first batch, ``WARMUP_PASSES`` training steps on each batch, then one
    evaluation (``evaluate_once``), then the initial weights, BatchNorm statistics, optimizer state, loss scaler
    and every random generator are put back: the run that follows is the run it would have been without a
    warm-up, only without first-call costs."""
    model_state = copy.deepcopy(setup.model.state_dict())
    opt_state = copy.deepcopy(setup.optimizer.state_dict())
    with torch.random.fork_rng(devices=_rng_devices(device)):
        if setup.warm_up_init is not None and batches:
            setup.warm_up_init(batches[0][0])
        step.model.train()
        for _ in range(WARMUP_PASSES):
            for x, y in batches:
                step(x, y)
        evaluate_once()
    setup.model.load_state_dict(model_state)
    setup.optimizer.load_state_dict(opt_state)
    setup.optimizer.zero_grad(set_to_none=True)
    step.scaler = step.backend.grad_scaler()  # the loss scale the warm-up may have moved starts afresh


def _rng_devices(device: torch.device) -> list[int]:
    if device.type == "cuda":
        return [device.index if device.index is not None else torch.cuda.current_device()]
    return []


def spec_warmup_data(input_spec: Any, num_classes: int, batch_size: int, world_size: int) -> TaskData:
    """Synthetic examples of ``input_spec`` (values from its range, labels of the task's classes): two full
    global batches of training data and, per rank, ``WARMUP_EVAL_EXAMPLES`` evaluation examples (padded to one
    ``EVAL_CHUNK`` by the evaluator, as every real chunk is)."""
    g = torch.Generator().manual_seed(0)
    x, y = input_spec.example(2 * batch_size * world_size, num_classes, generator=g)
    ex, ey = input_spec.example(WARMUP_EVAL_EXAMPLES * world_size, num_classes, generator=g)
    return TaskData(train_x=x, train_y=y, eval_x=ex, eval_y=ey, num_classes=num_classes, official=False,
                    source="synthetic examples of the task's InputSpec (warm-up only)")


def spec_warmup(data: TaskData, plan: BatchPlan, *, top5: bool) -> tuple[list[Batch], Evaluator]:
    """One training batch and an evaluator of the in-memory classes on ``data`` (from ``spec_warmup_data``). The
    batch source is prepared without ``init_from_data``: data statistics belong to the run, on its clock."""
    batches = InMemoryBatches(data, plan)
    batches.x = plan.setup.prepare(batches.raw_x)
    first = next(iter(batches.epoch(0)))
    return [first], InMemoryClassification(data, plan, top5=top5)


def data_warmup(batches: TrainBatches, evaluator: Evaluator, data: Any, plan: BatchPlan,
                eval_model: Callable[[], torch.nn.Module]) -> tuple[list[Batch], Callable[[], Any]]:
    """Warm-up batches from the loaded data's batch source (zeros of its exact shapes; the values of the data
    are not touched) and one evaluation by the evaluator's own ``warm_up`` (or a fallback batch)."""
    examples = getattr(batches, "warmup_batches", None)
    pairs = list(examples()) if examples is not None else fallback_warmup_batches(data, plan)
    warm_eval = getattr(evaluator, "warm_up", None)
    if warm_eval is not None:
        return pairs, lambda: warm_eval(eval_model())
    x, y = pairs[0]
    return pairs, lambda: evaluate(eval_model(), x, y, device=plan.device, amp=plan.amp, predict=plan.setup.predict)


def fallback_warmup_batches(data: Any, plan: BatchPlan) -> list[Batch]:
    """For batch sources without ``warmup_batches``: zeros of the eval inputs' shape at the training batch size."""
    n = max(min(plan.batch_size, len(data.eval_x)), 1)
    raw = torch.zeros((n, *data.eval_x.shape[1:]), dtype=data.eval_x.dtype, device=plan.device)
    y = data.eval_y[torch.arange(n) % max(len(data.eval_y), 1)].to(plan.device)
    return [(plan.setup.prepare(raw), y)]


def compile_count() -> int:
    """Frames dynamo has compiled so far in this process (recompilations included)."""
    try:
        from torch._dynamo.utils import counters

        return int(counters["frames"]["total"])
    except Exception:  # noqa: BLE001 - no dynamo: nothing compiles
        return 0
