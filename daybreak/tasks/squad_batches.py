"""squad's batch source and evaluator (daybreak.tasks.squad names them, imported only when a run uses them):
training windows on the device, and an evaluator that answers every dev question from its windows' best span and
scores it with the official v1.1 EM/F1 (the windows are the reader's, daybreak.data.squad).
"""

from __future__ import annotations

from typing import Iterator

import torch
from torch import nn

from daybreak.data.base import TaskData
from daybreak.data.squad import SquadData
from daybreak.data.squad_features import answers_from_spans, best_spans, score_answers
from daybreak.measure.device import autocast
from daybreak.tasks.batches import BatchPlan


def _squad(data: TaskData) -> SquadData:
    """The data this task's hooks are given: what its reader made."""
    if not isinstance(data, SquadData):
        raise TypeError(f"squad: expected SquadData, got {type(data).__name__}")
    return data


class SquadTrainBatches:
    """All training features on the device (int32); each step slices a seeded permutation, like the in-memory
    image tasks. Ranks take disjoint slices of the same global order."""

    def __init__(self, data: SquadData, plan: "BatchPlan"):
        world, rank = plan.ctx.world_size, plan.ctx.rank
        self.plan = plan
        self.features = data.train_features()
        n = len(self.features)
        self.batch_size = min(plan.batch_size, max(n // world, 1))
        self.global_batch = self.batch_size * world
        self.offset = rank * self.batch_size
        self.steps_per_epoch = max(n // self.global_batch, 1)
        self.order = torch.Generator().manual_seed(plan.seed)
        self.x: torch.Tensor | None = None
        self.y: torch.Tensor | None = None

    def start(self) -> None:
        non_blocking = self.plan.device.type == "cuda"
        self.x = self.features.x.to(self.plan.device, non_blocking=non_blocking)
        self.y = self.features.y.to(self.plan.device, non_blocking=non_blocking)

    def epoch(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        assert self.x is not None and self.y is not None, "start() first"
        prepare = self.plan.setup.prepare
        perm = torch.randperm(len(self.x), generator=self.order).to(self.plan.device)
        for i in range(self.steps_per_epoch):
            start = i * self.global_batch + self.offset
            idx = perm[start : start + self.batch_size]
            yield prepare(self.x[idx]), self.y[idx]


class SquadEvaluator:
    """EM/F1 over the whole dev set. Rank r answers the questions r, r + world, ... (all windows of a question on
    one rank, so the best span over them is found locally); the EM/F1 sums are added over ranks."""

    def __init__(self, data: SquadData, plan: "BatchPlan"):
        assert data.dev_split is not None
        world, rank = plan.ctx.world_size, plan.ctx.rank
        self.data = data
        self.plan = plan
        dev = data.dev_features()
        self.rows = torch.nonzero(dev.question % world == rank).flatten()
        self.questions = list(range(rank, len(data.dev_split.questions), world))
        x = dev.x[self.rows]
        self.x = x.pin_memory() if plan.device.type == "cuda" else x
        assert dev.offsets is not None and dev.max_context is not None
        valid_end = dev.offsets[self.rows, :, 0] >= 0
        self.valid_end = valid_end.to(plan.device)
        self.valid_start = (valid_end & dev.max_context[self.rows]).to(plan.device)

    @torch.inference_mode()
    def __call__(self, model: nn.Module) -> dict[str, float]:
        p, spans = self.plan, self.data.spans
        bs = self.data.eval_batch_size
        was_training = model.training
        model.eval()
        scores, starts, ends = [], [], []
        try:
            for i in range(0, len(self.x), bs):
                xb = p.setup.prepare(self.x[i : i + bs].to(p.device, non_blocking=True))
                with autocast(p.device, p.amp):
                    logits = model(xb)
                s, a, b = best_spans(logits, self.valid_start[i : i + bs], self.valid_end[i : i + bs],
                                     n_best=spans.n_best, max_answer_len=spans.max_answer_len)
                scores.append(s)
                starts.append(a)
                ends.append(b)
        finally:
            model.train(was_training)
        assert self.data.dev_split is not None
        if scores:
            answers = answers_from_spans(self.data.dev_split, self.data.dev_features(), self.rows,
                                         torch.cat(scores), torch.cat(starts), torch.cat(ends))
        else:
            answers = {}
        em, f1 = score_answers(self.data.dev_split, answers, self.questions)
        sums = torch.tensor([em, f1, float(len(self.questions))], dtype=torch.float64, device=p.device)
        em, f1, n = p.ctx.all_reduce_sum(sums).tolist()
        return {"f1": f1 / max(n, 1.0), "exact_match": em / max(n, 1.0)}


def train_batches(data: TaskData, plan: BatchPlan) -> SquadTrainBatches:
    return SquadTrainBatches(_squad(data), plan)


def evaluator(data: TaskData, plan: BatchPlan) -> SquadEvaluator:
    return SquadEvaluator(_squad(data), plan)
