"""The warm-up of a timed run: compile / autotune on the real batches' shapes before the training clock, then
restore the initial weights (daybreak.train.runner calls it in the ``warmup`` phase)."""

from __future__ import annotations

import copy
from typing import Any

import torch

from daybreak.recipes import TrainSetup
from daybreak.tasks.batches import BatchPlan, Evaluator, TrainBatches
from daybreak.tasks.evaluate import evaluate
from daybreak.train.step import TrainStep


def warm_up(setup: TrainSetup, step: TrainStep, batches: TrainBatches, evaluator: Evaluator, data: Any,
             plan: BatchPlan) -> None:
    """Compile / autotune on tensors of exactly the real batches' shapes, dtypes and memory layouts (from the
    batch source and evaluator themselves, on synthetic values), then restore the initial weights and optimizer
    state. Three training steps (the optimizer's first step differs from later ones), then one evaluation."""
    model_state = copy.deepcopy(setup.model.state_dict())
    opt_state = copy.deepcopy(setup.optimizer.state_dict())
    examples = getattr(batches, "warmup_batches", None)
    pairs = list(examples()) if examples is not None else fallback_warmup_batches(data, plan)
    step.model.train()
    for _ in range(3):
        for x, y in pairs:
            step(x, y)
    eval_model = setup.model if isinstance(step.model, torch.nn.parallel.DistributedDataParallel) else step.model
    warm_eval = getattr(evaluator, "warm_up", None)
    if warm_eval is not None:
        warm_eval(eval_model)
    else:
        x, y = pairs[0]
        evaluate(eval_model, x, y, device=plan.device, amp=plan.amp, predict=setup.predict)
    setup.model.load_state_dict(model_state)
    setup.optimizer.load_state_dict(opt_state)
    setup.optimizer.zero_grad(set_to_none=True)


def fallback_warmup_batches(data: Any, plan: BatchPlan) -> list[tuple[torch.Tensor, torch.Tensor]]:
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
