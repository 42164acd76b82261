"""Batched evaluation: top-1 (and top-5) accuracy of a model on a prepared eval set.

In the tasks layer: task files' evaluators, the runner's warm-up and ``daybreak evaluate`` all count the same way.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from daybreak.measure.device import autocast

EVAL_CHUNK = 1024  # examples per forward pass of an evaluation (the last chunk is what is left, or padded)


def padded_to_chunks(x: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
    """``x`` with zero rows appended up to a whole number of chunks (at least one), so that every forward pass of
    an evaluation has the same batch size: a compiled or cuDNN-autotuned model then meets no new shape after its
    warm-up, whatever the size of the eval set. The padding rows are never counted (``correct_counts``'
    ``examples``); each example's logits do not depend on the others' (eval mode). ``chunk``: EVAL_CHUNK."""
    chunk = chunk or EVAL_CHUNK
    missing = -len(x) % chunk if len(x) else chunk
    if not missing:
        return x
    return torch.cat([x, x.new_zeros((missing, *x.shape[1:]))])


@torch.inference_mode()
def correct_counts(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    device: torch.device,
    amp: str = "off",
    batch_size: int | None = None,
    predict: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None = None,
    top5: bool = False,
    examples: int | None = None,
) -> torch.Tensor:
    """Returns a tensor [top-1 correct, top-5 correct (0 unless asked), examples] on the device. ``examples``: the
    first rows of ``x`` that are examples (``y`` has one label each); the rows after them are padding
    (``padded_to_chunks``), run through the model and never counted. Default: every row. ``batch_size``: the
    rows of one forward pass, EVAL_CHUNK by default."""
    batch_size = batch_size or EVAL_CHUNK
    n = len(x) if examples is None else examples
    was_training = model.training
    model.eval()
    correct1 = torch.zeros((), dtype=torch.long, device=device)
    correct5 = torch.zeros((), dtype=torch.long, device=device)
    try:
        for i in range(0, len(x), batch_size):
            xb = x[i : i + batch_size].to(device, non_blocking=True)
            keep = min(len(xb), n - i)
            if keep <= 0:  # a chunk of padding only: nothing to count
                break
            yb = y[i : i + keep].to(device, non_blocking=True)
            with autocast(device, amp):
                logits = predict(model, xb) if predict is not None else model(xb)
            logits = logits[:keep].float()
            correct1 += (logits.argmax(dim=1) == yb).sum()
            if top5:
                k = min(5, logits.shape[1])
                correct5 += (logits.topk(k, dim=1).indices == yb.unsqueeze(1)).any(dim=1).sum()
    finally:
        model.train(was_training)
    return torch.stack([correct1, correct5, torch.tensor(n, dtype=torch.long, device=device)])


def accuracies(counts: torch.Tensor, top5: bool) -> tuple[float, float | None]:
    """[top-1 correct, top-5 correct, n] -> (top1, top5 or None) as fractions."""
    c1, c5, n = (int(v) for v in counts.tolist())
    n = max(n, 1)
    return c1 / n, (c5 / n if top5 else None)


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, device: torch.device, amp: str = "off",
             batch_size: int | None = None, predict: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None = None,
             top5: bool = False) -> tuple[float, float | None]:
    """Returns (top1, top5 or None) as fractions. ``x``/``y`` may live on the host or the device."""
    counts = correct_counts(model, x, y, device=device, amp=amp, batch_size=batch_size, predict=predict, top5=top5)
    return accuracies(counts, top5)
