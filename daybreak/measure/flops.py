"""FLOPs of one step, counted with ``torch.utils.flop_counter.FlopCounterMode``.

The counter sees the aten ops a step dispatches and adds up the matmul/conv/attention FLOPs (a multiply-add
counts as 2 FLOPs); elementwise ops, norms and the optimizer update are not counted, as is usual for
"model FLOPs". One addition here: PyTorch's table has no entry for the CPU flash-attention kernels that
``scaled_dot_product_attention`` uses on CPU, so they are counted with the same convention as the GPU kernels
(forward: two batched matmuls, Q K^T and P V; backward: four).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch.utils.flop_counter import FlopCounterMode


def _attention_forward_flops(q_shape: Sequence[int], k_shape: Sequence[int], v_shape: Sequence[int]) -> int:
    """Q (B, H, Lq, D) @ K^T (B, H, D, Lk) and P (B, H, Lq, Lk) @ V (B, H, Lk, Dv), 2 FLOPs per multiply-add."""
    *batch, lq, d = q_shape
    lk = k_shape[-2]
    dv = v_shape[-1]
    n = 1
    for b in batch:
        n *= b
    return 2 * n * lq * lk * d + 2 * n * lq * lk * dv


def _cpu_flash_forward(query: Sequence[int], key: Sequence[int], value: Sequence[int], *args: Any,
                       out_shape: Any = None, **kwargs: Any) -> int:
    return _attention_forward_flops(query, key, value)


def _cpu_flash_backward(grad_out: Sequence[int], query: Sequence[int], key: Sequence[int], value: Sequence[int],
                        *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    # dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q: twice the forward's matmul work.
    return 2 * _attention_forward_flops(query, key, value)


def extra_formulas() -> dict[Any, Callable[..., int]]:
    """Formulas for ops PyTorch's counter leaves at zero (only those this torch build has)."""
    out: dict[Any, Callable[..., int]] = {}
    for name, fn in (("_scaled_dot_product_flash_attention_for_cpu", _cpu_flash_forward),
                     ("_scaled_dot_product_flash_attention_for_cpu_backward", _cpu_flash_backward)):
        packet = getattr(torch.ops.aten, name, None)
        if packet is not None:
            out[packet] = fn
    return out


def count_flops(fn: Callable[[], Any]) -> int:
    """Run ``fn()`` once under the FLOP counter and return the FLOPs it dispatched."""
    with FlopCounterMode(display=False, custom_mapping=extra_formulas()) as counter:
        fn()
    return int(counter.get_total_flops())


def step_flops(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor | None,
               loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None, train: bool) -> int:
    """FLOPs of one step on one device: forward (+ loss + backward when ``train``).

    Gradients the count produces are cleared afterwards, so the model is left as it was (except BatchNorm
    running statistics, which a training-mode forward updates).
    """
    if not train:
        def forward() -> None:
            with torch.no_grad():
                model(x)
        return count_flops(forward)

    if loss_fn is None or y is None:
        raise ValueError("a training step needs a loss function and targets")

    def forward_backward() -> None:
        loss_fn(model(x), y).backward()  # type: ignore[no-untyped-call]  # (torch leaves Tensor.backward unannotated)

    try:
        return count_flops(forward_backward)
    finally:
        for p in model.parameters():
            p.grad = None


def format_flops(flops: float | None, unit: str = "FLOP") -> str:
    """1.23e12 -> '1.23 T' + unit."""
    if flops is None:
        return "-"
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(flops) >= scale:
            return f"{flops / scale:.3g} {prefix}{unit}"
    return f"{flops:.3g} {unit}"
