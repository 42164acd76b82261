"""Small pieces shared by recipes: schedules and on-device augmentation."""

from __future__ import annotations

import torch


def triangular(peak_fraction: float, start: float = 0.0, end: float = 0.0):
    """Learning-rate multiplier rising linearly from ``start`` to 1 at ``peak_fraction`` of training, then to ``end``."""

    def multiplier(step: int, total_steps: int) -> float:
        t = step / max(total_steps, 1)
        if t < peak_fraction:
            return start + (1.0 - start) * t / peak_fraction
        return 1.0 + (end - 1.0) * (t - peak_fraction) / max(1.0 - peak_fraction, 1e-12)

    return multiplier


def constant(step: int, total_steps: int) -> float:
    return 1.0


def random_translate(x: torch.Tensor, pad: int, generator: torch.Generator) -> torch.Tensor:
    """Shift each image by up to ``pad`` pixels (zero fill), one random offset per image, on the device."""
    n, _, h, w = x.shape
    padded = torch.nn.functional.pad(x, (pad, pad, pad, pad))
    dx = torch.randint(0, 2 * pad + 1, (n,), device=x.device, generator=generator)
    dy = torch.randint(0, 2 * pad + 1, (n,), device=x.device, generator=generator)
    rows = (dy.view(n, 1) + torch.arange(h, device=x.device).view(1, h))  # n,h
    cols = (dx.view(n, 1) + torch.arange(w, device=x.device).view(1, w))  # n,w
    idx_n = torch.arange(n, device=x.device).view(n, 1, 1)
    # gather per image: padded[n, :, rows[n], cols[n]]
    out = padded.permute(0, 2, 3, 1)[idx_n, rows.view(n, h, 1), cols.view(n, 1, w)].permute(0, 3, 1, 2)
    channels_last = x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
    return out.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def random_flip(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Mirror each image left-right with probability 1/2."""
    flip = torch.rand(x.shape[0], device=x.device, generator=generator) < 0.5
    return torch.where(flip.view(-1, 1, 1, 1), x.flip(-1), x)


def nesterov_translate_setup(model: torch.nn.Module, hp: dict, *, prepare, translate_px: int):
    """The shape the digit recipes share: Nesterov SGD with weight decay, a triangular lr, label-smoothed
    cross-entropy, and (if ``hp["augment"]``) random +-``translate_px`` pixel shifts on the device.

    ``hp`` needs lr, momentum, weight_decay, peak_at, label_smoothing and augment."""
    from daybreak.recipes import TrainSetup

    optimizer = torch.optim.SGD(model.parameters(), lr=hp["lr"], momentum=hp["momentum"], nesterov=True,
                                weight_decay=hp["weight_decay"])

    def augment(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return random_translate(x, translate_px, generator)

    return TrainSetup(
        model=model,
        optimizer=optimizer,
        lr_multiplier=triangular(hp["peak_at"]),
        loss_fn=lambda logits, y: torch.nn.functional.cross_entropy(logits, y, label_smoothing=hp["label_smoothing"]),
        prepare=prepare,
        augment=augment if hp["augment"] else None,
    )
