"""imagenet's batch source and evaluator (daybreak.tasks.imagenet names them, imported only when a run uses them):
a sharded, seeded training loader and a sharded top-1/top-5 evaluator, both streaming JPEGs through DataLoader
workers from the reader's decode pipeline (daybreak.data.imagenet).
"""

from __future__ import annotations

from typing import Iterator

import torch
from torch import nn

from daybreak.data.base import TaskData
from daybreak.data.imagenet import ImageNetData
from daybreak.data.imagenet_pipeline import EvalOrder, ImageFiles, ShardedBatches, make_loader, to_device, unpack
from daybreak.tasks.batches import BatchPlan
from daybreak.tasks.evaluate import correct_counts


def _imagenet(data: TaskData) -> ImageNetData:
    """The data this task's hooks are given: what its reader (or stand-in) made."""
    if not isinstance(data, ImageNetData):
        raise TypeError(f"imagenet: expected ImageNetData, got {type(data).__name__}")
    return data


class ImageNetTrainBatches:
    def __init__(self, data: "ImageNetData", plan: "BatchPlan"):
        self.plan = plan
        world, rank = plan.ctx.world_size, plan.ctx.rank
        n = len(data.train)
        batch = min(plan.batch_size, max(n // world, 1))
        self.sampler = ShardedBatches(n, batch, world, rank, plan.seed, data.settings)
        self.steps_per_epoch = self.sampler.steps
        self.loader = make_loader(ImageFiles(data.root, data.train, data.settings), self.sampler, data.settings,
                                  plan.device)

    def start(self) -> None:
        return None  # workers start with the first epoch's iterator (inside the clock: they read training data)

    def epoch(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        device, prepare = self.plan.device, self.plan.setup.prepare
        self.sampler.set_epoch(epoch)
        for batch in self.loader:
            x, y = unpack(batch)
            yield prepare(to_device(x, device)), y.to(device, non_blocking=device.type == "cuda")


class ImageNetEvaluator:
    """Top-1 / top-5 over the val set: rank r takes images r, r + world, ...; counts are summed over ranks."""

    def __init__(self, data: "ImageNetData", plan: "BatchPlan"):
        self.plan = plan
        world, rank = plan.ctx.world_size, plan.ctx.rank
        s = data.settings
        order = EvalOrder(list(range(rank, len(data.val), world)), s.eval_batch_size, s.eval_size)
        self.loader = make_loader(ImageFiles(data.root, data.val, s), order, s, plan.device)

    def __call__(self, model: nn.Module) -> dict[str, float]:
        p = self.plan
        counts = torch.zeros(3, dtype=torch.long, device=p.device)
        for batch in self.loader:
            x, y = unpack(batch)
            x = p.setup.prepare(to_device(x, p.device))
            counts += correct_counts(model, x, y.to(p.device, non_blocking=True), device=p.device, amp=p.amp,
                                     batch_size=len(x), predict=p.setup.predict, top5=True)
        c1, c5, n = (int(v) for v in p.ctx.all_reduce_sum(counts).tolist())
        return {"top1": c1 / max(n, 1), "top5": c5 / max(n, 1)}


def train_batches(data: TaskData, plan: BatchPlan) -> ImageNetTrainBatches:
    return ImageNetTrainBatches(_imagenet(data), plan)


def evaluator(data: TaskData, plan: BatchPlan) -> ImageNetEvaluator:
    return ImageNetEvaluator(_imagenet(data), plan)


def inference_inputs(data: TaskData) -> torch.Tensor:
    return _imagenet(data).inference_inputs()


def stand_in(classes: int, examples: int) -> ImageNetData:
    return ImageNetData.stand_in(classes)  # shapes only; batches come from the pipeline
