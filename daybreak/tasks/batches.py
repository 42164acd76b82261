"""Where training batches and evaluations come from: what a task's data hands the runner's loop.

- ``InMemoryBatches``: the whole (small) dataset lives on the device; ``prepare`` runs once on all of it inside
  the clock, then every step slices a seeded permutation. The default (digits, MNIST, CIFAR-10).
- ``InMemoryClassification``: sharded top-1/top-5 evaluation of in-memory tensors. The default evaluator.

A task whose data does not fit in memory (ImageNet) or whose metric is not classification accuracy (SQuAD's F1)
has its task file (``daybreak/tasks/<name>.py``) set ``Task.make_train_batches`` / ``Task.make_evaluator`` to build
its own objects with the same methods; the runner calls them with the data and a ``BatchPlan``.

This module sits in the tasks layer, below train/: task files build on it, and the runner imports it. What it
needs of the recipe's ``TrainSetup`` and of the distributed context is spelled out as protocols
(``PreparedSetup``, ``RankContext``), so it imports neither recipes nor train.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Protocol

import torch
from torch import nn

from daybreak.errors import DataError
from daybreak.tasks.evaluate import correct_counts, padded_to_chunks

if TYPE_CHECKING:
    from daybreak.data.base import TaskData


class PreparedSetup(Protocol):
    """What batch sources and evaluators use of a recipe's ``TrainSetup`` (daybreak.recipes); read only."""

    @property
    def prepare(self) -> Callable[[torch.Tensor], torch.Tensor]: ...
    @property
    def augment(self) -> Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None: ...
    @property
    def predict(self) -> Callable[[nn.Module, torch.Tensor], torch.Tensor] | None: ...
    @property
    def init_from_data(self) -> Callable[[torch.Tensor, torch.Tensor], None] | None: ...


class RankContext(Protocol):
    """What they use of the run's distributed context (daybreak.train.distributed.DistContext)."""

    rank: int
    world_size: int

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor: ...


@dataclass
class BatchPlan:
    """What a batch source or evaluator needs to know about the run."""

    setup: PreparedSetup
    batch_size: int  # per device
    epochs: int
    seed: int
    device: torch.device
    amp: str
    ctx: RankContext
    # every evaluation forward pass at one batch size (the eval set padded to whole chunks): where shapes cost
    # something the first time (compile, cuDNN autotuning), the warm-up then covers every shape the clock sees
    fixed_eval_shapes: bool = False


class TrainBatches(Protocol):
    steps_per_epoch: int

    def start(self) -> None:
        """Runs inside the clock, before the first step (one-time preparation of the training data)."""

    def epoch(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """This rank's (input, target) batches of one epoch, on the device, ready for the model."""


class Evaluator(Protocol):
    def __call__(self, model: nn.Module) -> dict[str, float]:
        """Metrics of ``model`` on the whole eval split (all ranks together), e.g. {"top1": .., "top5": ..}."""


class InMemoryBatches:
    def __init__(self, data: "TaskData", plan: BatchPlan):
        world, rank = plan.ctx.world_size, plan.ctx.rank
        self.plan = plan
        if data.train_x is None or data.train_y is None:
            raise DataError("this task's data holds no training tensors: its task file must make its training "
                            "batches (make_train_batches)")
        self.raw_x = data.train_x.to(plan.device)
        self.y = data.train_y.to(plan.device)
        self.batch_size = min(plan.batch_size, max(len(self.raw_x) // world, 1))
        self.global_batch = self.batch_size * world
        self.offset = rank * self.batch_size
        self.steps_per_epoch = max(len(self.raw_x) // self.global_batch, 1)
        self.order = torch.Generator().manual_seed(plan.seed)  # the same order on every rank
        self.aug = torch.Generator(device=plan.device).manual_seed(plan.seed + 1 + rank)
        self.x: torch.Tensor | None = None

    def start(self) -> None:
        setup = self.plan.setup
        self.x = setup.prepare(self.raw_x)
        if setup.init_from_data is not None:
            setup.init_from_data(self.x, self.y)

    def warmup_batches(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Batches with exactly the shapes, dtypes and memory layouts of ``epoch``'s (every batch is full: the
        tail that does not fill a global batch is dropped), made by the same code path on zeros: the training
        data's values are not touched."""
        setup = self.plan.setup
        n = min(len(self.raw_x), max(self.batch_size * 2, 1))
        fake_x = setup.prepare(torch.zeros((n, *self.raw_x.shape[1:]), dtype=self.raw_x.dtype, device=self.plan.device))
        fake_y = torch.zeros(n, dtype=self.y.dtype, device=self.plan.device)
        idx = torch.randperm(n, generator=torch.Generator().manual_seed(0)).to(self.plan.device)[: self.batch_size]
        x = fake_x[idx]
        if setup.augment is not None:
            x = setup.augment(x, torch.Generator(device=self.plan.device).manual_seed(0))
        return [(x, fake_y[idx])]

    def epoch(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        assert self.x is not None, "start() first"
        augment = self.plan.setup.augment
        perm = torch.randperm(len(self.x), generator=self.order).to(self.plan.device)
        for i in range(self.steps_per_epoch):
            start = i * self.global_batch + self.offset
            idx = perm[start : start + self.batch_size]
            x = self.x[idx]
            if augment is not None:
                x = augment(x, self.aug)
            yield x, self.y[idx]


class InMemoryClassification:
    """Each rank evaluates every world-th example; correct counts are summed over ranks, so the accuracy is
    exactly that of one process evaluating the same weights on the whole set."""

    def __init__(self, data: "TaskData", plan: BatchPlan, *, top5: bool):
        world, rank = plan.ctx.world_size, plan.ctx.rank
        self.plan = plan
        self.top5 = top5
        self.raw_x = data.eval_x[rank::world]
        self.examples = len(self.raw_x)
        if plan.fixed_eval_shapes:
            self.raw_x = padded_to_chunks(self.raw_x)
        self.y = data.eval_y[rank::world].to(plan.device)
        self.x: torch.Tensor | None = None  # prepared at the first evaluation (counted as evaluation time)

    def warm_up(self, model: nn.Module) -> None:
        """One evaluation on zeros of exactly this rank's eval inputs (same count, so the same chunk shapes)."""
        p = self.plan
        fake = p.setup.prepare(torch.zeros_like(self.raw_x, device=p.device))
        correct_counts(model, fake, torch.zeros_like(self.y), device=p.device, amp=p.amp, predict=p.setup.predict,
                       top5=self.top5, examples=self.examples)

    def __call__(self, model: nn.Module) -> dict[str, float]:
        p = self.plan
        if self.x is None:
            self.x = p.setup.prepare(self.raw_x.to(p.device))
        counts = p.ctx.all_reduce_sum(correct_counts(model, self.x, self.y, device=p.device, amp=p.amp,
                                                     predict=p.setup.predict, top5=self.top5,
                                                     examples=self.examples))
        c1, c5, n = (int(v) for v in counts.tolist())
        metrics = {"top1": c1 / max(n, 1)}
        if self.top5:
            metrics["top5"] = c5 / max(n, 1)
        return metrics


class DataHooks(Protocol):
    """What the runner's data plumbing needs of a task (daybreak.tasks.Task has it); read only."""

    @property
    def make_train_batches(self) -> Callable[["TaskData", BatchPlan], TrainBatches] | None: ...
    @property
    def make_evaluator(self) -> Callable[["TaskData", BatchPlan], Evaluator] | None: ...
    @property
    def measures_top5(self) -> bool: ...


def train_batches_for(task: DataHooks, data: "TaskData", plan: BatchPlan) -> TrainBatches:
    if task.make_train_batches is not None:
        return task.make_train_batches(data, plan)
    return InMemoryBatches(data, plan)


def evaluator_for(task: DataHooks, data: "TaskData", plan: BatchPlan) -> Evaluator:
    if task.make_evaluator is not None:
        return task.make_evaluator(data, plan)
    return InMemoryClassification(data, plan, top5=task.measures_top5)
