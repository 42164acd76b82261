"""One training step and one backend object, shared by the timed run, its warm-up and the throughput worker.

``Backend`` is where the device, the autocast precision and the process group are decided, once; ``TrainStep``
is the only place a forward + loss + backward + (clip) + optimizer step is written.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from daybreak.measure.device import autocast, resolve_amp, select_device, synchronize
from daybreak.train.distributed import DistContext


@dataclass
class Backend:
    """The device, its autocast precision and the process group of this process."""

    device: torch.device
    amp: str  # "off", "bf16" or "fp16" (resolved: never "auto")
    ctx: DistContext = field(default_factory=DistContext)

    @classmethod
    def resolve(cls, device: str, amp: str, ctx: DistContext | None = None,
                rank_device: torch.device | None = None) -> "Backend":
        """``device``/``amp`` as the user gave them ("auto", "cuda:1", ...); under torchrun ``rank_device`` is the
        local rank's device, decided by the distributed setup."""
        from daybreak.errors import ConfigError

        dev = rank_device or select_device(device)
        resolved = resolve_amp(amp, dev)
        if resolved == "fp16" and dev.type == "mps":
            raise ConfigError("--amp fp16 with gradient scaling is not supported on MPS; use bf16 or off")
        return cls(dev, resolved, ctx or DistContext())

    def autocast(self) -> AbstractContextManager[None]:
        return autocast(self.device, self.amp)

    def synchronize(self) -> None:
        synchronize(self.device)

    def grad_scaler(self) -> torch.amp.GradScaler:
        """Loss scaling for fp16 (a no-op otherwise)."""
        return torch.amp.GradScaler(self.device.type, enabled=self.amp == "fp16")

    def wrap(self, model: nn.Module) -> nn.Module:
        """DDP across the process group (gradients all-reduced; rank 0's weights broadcast), else the model."""
        if not self.ctx.enabled:
            return model
        return nn.parallel.DistributedDataParallel(model, device_ids=[self.device.index]
                                                   if self.device.type == "cuda" else None)


class TrainStep:
    """forward under autocast -> loss -> (scaled) backward -> unscale + clip -> optimizer step -> scaler update.

    Returns the loss tensor (not read back: the caller decides when to synchronize)."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], backend: Backend, *,
                 clip_grad_norm: float | None = None):
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.backend = backend
        self.clip_grad_norm = clip_grad_norm if clip_grad_norm and clip_grad_norm > 0 else None
        self.scaler = backend.grad_scaler()

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with self.backend.autocast():
            loss = self.loss_fn(self.model(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()  # type: ignore[no-untyped-call]  # (torch's Tensor.backward is unannotated)
        if self.clip_grad_norm is not None:
            self.scaler.unscale_(self.optimizer)  # clip true gradient norms under fp16 too
            nn.utils.clip_grad_norm_([p for g in self.optimizer.param_groups for p in g["params"]],
                                     self.clip_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss
