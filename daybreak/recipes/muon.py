"""Muon for convolution filters, as airbench94_muon uses it, beside Nesterov SGD for everything else: one optimizer.

Why not ``torch.optim.Muon`` (torch 2.13 ships one): it accepts 2-D parameters only (a conv filter is 4-D), keeps
its momentum as an exponential average (``buf.lerp_(grad, 1 - momentum)``) where airbench sums
(``buf = momentum * buf + grad``), runs 5 Newton-Schulz steps where airbench runs 3, and does not renormalize the
weights. airbench94_muon (KellerJordan/cifar10-airbench) does, for each filter W with gradient G, per step:

    buf <- momentum * buf + G;  G' = G + momentum * buf (Nesterov)
    W   <- W * sqrt(out_channels) / ||W||_F          (every filter bank keeps the norm of a unit-norm row each)
    W   <- W - lr * orthogonalize(G' reshaped to out_channels x (in_channels * k * k))

``orthogonalize`` is the quintic Newton-Schulz iteration with coefficients (3.4445, -4.7750, 2.0315): on the
gradient scaled to unit Frobenius norm it pushes every singular value towards ~1 (between about 0.5 and 1.5,
not exactly 1), i.e. towards U V^T of G's SVD, in bf16 on a GPU (float32 on a CPU, where bf16 matmuls may be
emulated). Groups with ``muon=False`` take PyTorch SGD's Nesterov step with weight decay coupled to the lr.
The code is our own.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import torch

NEWTON_SCHULZ = (3.4445, -4.7750, 2.0315)  # the quintic's coefficients (airbench / Keller Jordan's Muon)


def orthogonalize(g: torch.Tensor, steps: int = 3, eps: float = 1e-7) -> torch.Tensor:
    """About U V^T of ``g``'s SVD (2-D), by ``steps`` quintic Newton-Schulz iterations on ``g / ||g||``."""
    a, b, c = NEWTON_SCHULZ
    x = g.bfloat16() if g.is_cuda else g.float()
    x = x / (x.norm() + eps)  # the top singular value is then at most 1
    tall = g.size(0) > g.size(1)
    if tall:
        x = x.T
    for _ in range(steps):
        s = x @ x.T
        x = a * x + (b * s + c * s @ s) @ x
    out: torch.Tensor = x.T if tall else x
    return out


class Muon(torch.optim.Optimizer):
    """Muon on the groups with ``muon=True`` (2-D or conv filters), Nesterov SGD on the others (``weight_decay``
    coupled to the lr, as torch.optim.SGD). ``orthogonalize_fn`` may be a compiled ``orthogonalize``."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0.0, nesterov: bool = True,
                 weight_decay: float = 0.0, muon: bool = False, newton_schulz_steps: int = 3,
                 normalize_weights: bool = True,
                 orthogonalize_fn: Callable[[torch.Tensor, int], torch.Tensor] | None = None):
        if lr < 0 or momentum < 0 or weight_decay < 0 or newton_schulz_steps < 1:
            raise ValueError("lr, momentum and weight_decay must be >= 0 and newton_schulz_steps >= 1")
        defaults = dict(lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay, muon=muon,
                        newton_schulz_steps=newton_schulz_steps, normalize_weights=normalize_weights)
        super().__init__(params, defaults)
        self.orthogonalize = orthogonalize_fn or orthogonalize

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                direction = self._momentum(p, p.grad, group)
                if group["muon"]:
                    self._muon_update(p, direction, group)
                else:
                    p.add_(direction, alpha=-group["lr"])
        return loss

    def _momentum(self, p: torch.Tensor, g: torch.Tensor, group: dict[str, Any]) -> torch.Tensor:
        """The (Nesterov) momentum direction of ``p`` with gradient ``g``; SGD groups add their coupled weight decay
        to the gradient first."""
        if not group["muon"] and group["weight_decay"]:
            g = g.add(p, alpha=group["weight_decay"])
        if not group["momentum"]:
            return g
        state = self.state[p]
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(g) if group["muon"] else g.detach().clone()
            if not group["muon"]:  # torch.optim.SGD's first step: the buffer is the gradient itself
                buf = state["momentum_buffer"]
                return g.add(buf, alpha=group["momentum"]) if group["nesterov"] else buf
        buf = state["momentum_buffer"]
        buf.mul_(group["momentum"]).add_(g)
        return g.add(buf, alpha=group["momentum"]) if group["nesterov"] else buf

    def _muon_update(self, p: torch.Tensor, direction: torch.Tensor, group: dict[str, Any]) -> None:
        if group["normalize_weights"]:
            p.mul_(len(p) ** 0.5 / p.norm())
        update = self.orthogonalize(direction.reshape(len(direction), -1), group["newton_schulz_steps"])
        p.add_(update.reshape(p.shape).to(p.dtype), alpha=-group["lr"])
