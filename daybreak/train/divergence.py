"""What a non-finite training loss means: a diverged run, or only a loss *value* that overflowed.

The runner sums each step's loss on the device and reads the sum at every evaluation (and every 10 steps while a
progress bar is shown). When that sum is not finite, ``inspect`` looks at the training state before calling the run
``diverged``: the weights and floating buffers of the model, the optimizer's state (momentum buffers), the last
step's gradients, and the last batch's loss recomputed on float32 logits with the current weights. A run has
diverged only when that state is non-finite (gradients count unless a loss scaler skips non-finite steps, as
fp16 autocast's GradScaler does), or when the float32 loss is. Otherwise only the loss value was non-finite -- a
loss summed in a half-precision dtype overflows at 65,504 while its gradient, which does not use the forward value,
stays finite and exact (cifar10_muon's fp16 sum at batch 2000 on an H200) -- and training goes on, with the
record and its one line saying what was seen: ``loss inf at step 4, weights finite, float32 loss 1734``.

Nothing here runs on the hot path: only after a non-finite sum was read, which is rare.
"""

from __future__ import annotations

import math
from typing import Iterable, Literal

import torch

from daybreak.recipes import TrainSetup
from daybreak.records.run import NonFiniteLoss
from daybreak.train.distributed import DistContext


def value_word(value: float) -> Literal["inf", "-inf", "nan"]:
    """'inf', '-inf' or 'nan' for a non-finite float."""
    if math.isnan(value):
        return "nan"
    return "inf" if value > 0 else "-inf"


def _all_finite(tensors: Iterable[torch.Tensor]) -> bool:
    for t in tensors:
        if t.is_floating_point() or t.is_complex():
            if not bool(torch.isfinite(t).all()):
                return False
    return True


def _optimizer_tensors(optimizer: torch.optim.Optimizer) -> Iterable[torch.Tensor]:
    for state in optimizer.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                yield value


@torch.no_grad()
def float32_loss(setup: TrainSetup, batch: tuple[torch.Tensor, torch.Tensor], autocast: object) -> float | None:
    """The loss of ``batch`` with the current weights, its logits upcast to float32 before the recipe's loss: the
    model in training mode (as the step saw it), its floating buffers (BatchNorm's running statistics) put back
    after. None when the recomputation itself fails (a recipe whose loss does not take float32 logits)."""
    model = setup.model
    saved = [(b, b.detach().clone()) for b in model.buffers() if b.is_floating_point()]
    was_training = model.training
    try:
        model.train()
        with autocast:  # type: ignore[attr-defined]  # (a context manager: Backend.autocast())
            logits = model(batch[0])
        return float(setup.loss_fn(logits.float(), batch[1]).float().item())
    except Exception:  # noqa: BLE001 - a diagnosis only: the verdict then rests on the state
        return None
    finally:
        for buffer, copy in saved:
            buffer.copy_(copy)
        model.train(was_training)


def inspect(loss_value: float, step: int, steps_summed: int, setup: TrainSetup, *, scaler_skips: bool,
            batch: tuple[torch.Tensor, torch.Tensor] | None, autocast: object,
            ctx: DistContext | None = None) -> NonFiniteLoss:
    """The verdict on a non-finite loss sum read after ``step`` (summed over the last ``steps_summed`` steps).
    Under torchrun every rank calls it (the loss sum was all-reduced, so all see it) and all get the same verdict."""
    params = list(setup.model.parameters())
    weights_finite = _all_finite(params) and _all_finite(setup.model.buffers())
    optimizer_finite = _all_finite(_optimizer_tensors(setup.optimizer))
    grads = [p.grad for p in params if p.grad is not None]
    gradients_finite = _all_finite(grads) if grads else None
    recomputed = float32_loss(setup, batch, autocast) if batch is not None else None
    recomputed_finite = None if recomputed is None else math.isfinite(recomputed)
    diverged = (not weights_finite or not optimizer_finite or (gradients_finite is False and not scaler_skips)
                or recomputed_finite is False)
    if ctx is not None and ctx.enabled:  # one verdict for all ranks (their states may differ in the last bits)
        flag = ctx.all_reduce_sum(torch.tensor([float(diverged)], device=params[0].device if params else "cpu"))
        diverged = bool(flag.item() > 0)
    word = value_word(loss_value)
    parts = [f"loss {word} {'at' if steps_summed <= 1 else 'by'} step {step}",
             f"weights {'finite' if weights_finite else 'non-finite'}"]
    if not optimizer_finite:
        parts.append("optimizer state non-finite")
    if gradients_finite is False:
        parts.append("gradients non-finite" + (" (the loss scaler skips such steps)" if scaler_skips else ""))
    if recomputed is not None:
        parts.append(f"float32 loss {recomputed:.6g}" if recomputed_finite else
                     f"float32 loss {value_word(recomputed)} too")
    return NonFiniteLoss(step=step, steps_summed=max(steps_summed, 1), loss=word, weights_finite=weights_finite,
                         optimizer_state_finite=optimizer_finite, gradients_finite=gradients_finite,
                         scaler_skips_nonfinite=scaler_skips,
                         float32_loss=recomputed if recomputed_finite else None,
                         float32_loss_finite=recomputed_finite, diverged=diverged, summary=", ".join(parts))
