"""Batched evaluation: top-1 (and top-5) accuracy of a model on a prepared eval set.

In the tasks layer: task files' evaluators, the runner's warm-up and ``daybreak evaluate`` all count the same way.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from daybreak.measure.device import autocast

EVAL_CHUNK = 1024  # examples per forward pass of an evaluation (the last chunk is what is left)


@torch.inference_mode()
def correct_counts(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    device: torch.device,
    amp: str = "off",
    batch_size: int = EVAL_CHUNK,
    predict: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None = None,
    top5: bool = False,
) -> torch.Tensor:
    """Returns a tensor [top-1 correct, top-5 correct (0 unless asked), examples] on the device."""
    was_training = model.training
    model.eval()
    correct1 = torch.zeros((), dtype=torch.long, device=device)
    correct5 = torch.zeros((), dtype=torch.long, device=device)
    try:
        for i in range(0, len(x), batch_size):
            xb = x[i : i + batch_size].to(device, non_blocking=True)
            yb = y[i : i + batch_size].to(device, non_blocking=True)
            with autocast(device, amp):
                logits = predict(model, xb) if predict is not None else model(xb)
            logits = logits.float()
            correct1 += (logits.argmax(dim=1) == yb).sum()
            if top5:
                k = min(5, logits.shape[1])
                correct5 += (logits.topk(k, dim=1).indices == yb.unsqueeze(1)).any(dim=1).sum()
    finally:
        model.train(was_training)
    return torch.stack([correct1, correct5, torch.tensor(len(x), dtype=torch.long, device=device)])


def accuracies(counts: torch.Tensor, top5: bool) -> tuple[float, float | None]:
    """[top-1 correct, top-5 correct, n] -> (top1, top5 or None) as fractions."""
    c1, c5, n = (int(v) for v in counts.tolist())
    n = max(n, 1)
    return c1 / n, (c5 / n if top5 else None)


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, device: torch.device, amp: str = "off",
             batch_size: int = EVAL_CHUNK, predict: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None = None,
             top5: bool = False) -> tuple[float, float | None]:
    """Returns (top1, top5 or None) as fractions. ``x``/``y`` may live on the host or the device."""
    counts = correct_counts(model, x, y, device=device, amp=amp, batch_size=batch_size, predict=predict, top5=top5)
    return accuracies(counts, top5)
