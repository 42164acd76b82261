"""airbench-style fast networks for 32x32 images (CIFAR-10), written for daybreak.

Layout (the ideas follow Keller Jordan's airbench; the code is our own)::

    input 3x32x32
    2x2 conv, no padding, 3 -> 24   "patch whitening": 12 eigen-patches of the data and their negatives, frozen
    GELU                            31x31
    block(24 -> 64)                 conv3x3 - maxpool2 - BN - GELU - conv3x3 - BN - GELU    -> 15x15
    block(64 -> 256)                                                                       -> 7x7
    block(256 -> 256)                                                                      -> 3x3
    global max pool, linear (no bias), fixed logit scale

``airbench_net96`` (airbench96): widths 128/384/512 and a third conv in each block with a residual connection
over the last two (conv - pool - BN - GELU = x0; conv - BN - GELU - conv - BN; + x0; GELU), BN momentum 0.1.

BatchNorm layers keep their scale fixed at 1 and learn only their shift (the convs before them are scale-free,
so a learned scale adds little), they update their running statistics quickly (momentum 0.4, airbench's
``batchnorm_momentum`` 0.6 in its 1 - momentum convention) because a training run lasts only a few hundred steps,
and their eps is airbench's 1e-12 (PyTorch's default is 1e-5). ``half_with_float_norms`` makes airbench's fp16
network: every weight in fp16 except BatchNorm's, which stay float32 (cuDNN normalizes fp16 activations with
fp32 statistics). Under autocast instead the convs run in bf16/fp16 while BN runs in float32.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from daybreak.models import register_model

WHITENING_EPS = 5e-4  # added to each eigenvalue before 1/sqrt: keeps the flattest eigen-patches from blowing up
WHITENING_IMAGES = 5000  # the patch covariance of 5,000 images (~4.8M patches) is as good as all 50,000


class ConvBlock(nn.Module):
    """conv3x3 -> maxpool 2 -> BN -> GELU -> conv3x3 -> BN -> GELU; with ``depth`` 3 (airbench96) a third conv
    and a residual connection: x0 = the first GELU's output, then conv - BN - GELU - conv - BN, + x0, GELU."""

    def __init__(self, c_in: int, c_out: int, bn_momentum: float, bn_scale_trainable: bool, bn_eps: float = 1e-12,
                 depth: int = 2):
        super().__init__()
        if depth not in (2, 3):
            raise ValueError(f"depth {depth}: a block has 2 or 3 convs")
        self.depth = depth
        self.conv1 = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        self.pool = nn.MaxPool2d(2)
        self.norm1 = nn.BatchNorm2d(c_out, eps=bn_eps, momentum=bn_momentum)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.norm2 = nn.BatchNorm2d(c_out, eps=bn_eps, momentum=bn_momentum)
        convs, norms = [self.conv1, self.conv2], [self.norm1, self.norm2]
        if depth == 3:
            self.conv3 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
            self.norm3 = nn.BatchNorm2d(c_out, eps=bn_eps, momentum=bn_momentum)
            convs.append(self.conv3)
            norms.append(self.norm3)
        self.act = nn.GELU()
        for conv in convs:
            # Identity-like start: the first c_in output channels pass their input channel through unchanged,
            # so the untrained net already forwards the whitened signal instead of random projections of it.
            with torch.no_grad():
                nn.init.dirac_(conv.weight[: min(conv.in_channels, conv.out_channels)])
        for norm in norms:
            norm.weight.requires_grad_(bn_scale_trainable)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.norm1(self.pool(self.conv1(x))))
        out: torch.Tensor
        if self.depth == 2:
            out = self.act(self.norm2(self.conv2(x)))
            return out
        y = self.norm3(self.conv3(self.act(self.norm2(self.conv2(x)))))
        out = self.act(y + x)
        return out


class AirbenchNet(nn.Module):
    def __init__(self, num_classes: int = 10, widths: tuple[int, int, int] = (64, 256, 256),
                 eigen_patches: int = 12, logit_scale: float = 1 / 9, bn_momentum: float = 0.4,
                 bn_scale_trainable: bool = False, bn_eps: float = 1e-12, block_depth: int = 2):
        super().__init__()
        self.eigen_patches = eigen_patches
        self.whiten = nn.Conv2d(3, 2 * eigen_patches, kernel_size=2, padding=0, bias=True)
        assert self.whiten.bias is not None  # (bias=True)
        with torch.no_grad():
            self.whiten.bias.zero_()  # airbench's start; init_whitening sets the weights
        self.act = nn.GELU()
        blocks, c_in = [], 2 * eigen_patches
        for width in widths:
            blocks.append(ConvBlock(c_in, width, bn_momentum, bn_scale_trainable, bn_eps, depth=block_depth))
            c_in = width
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveMaxPool2d(1)
        self.head = nn.Linear(c_in, num_classes, bias=False)
        self.logit_scale = logit_scale  # a constant, not a parameter: tempers the logits the loss sees

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.act(self.whiten(x)))
        out: torch.Tensor = self.head(self.pool(x).flatten(1)) * self.logit_scale
        return out

    @torch.no_grad()
    def init_whitening(self, train_images_prepared: torch.Tensor, max_images: int = WHITENING_IMAGES,
                       eps: float = WHITENING_EPS, centred: bool = False) -> None:
        """Set the 2x2 first layer to whiten the data's patches, then freeze its weights.

        With C the second moment of all 2x2x3 patches of (up to ``max_images``) normalized training images (as
        airbench: the patches' uncentred covariance, ``patches.T @ patches / n``) and C = V diag(lambda) V^T,
        filter k is v_k / sqrt(lambda_k + eps) for the ``eigen_patches`` largest eigenvalues (of 12, so all of them
        by default); filters k + eigen_patches are their negatives, so that GELU keeps both signs of each
        component. The bias is left as it is (zero from construction, as in airbench; it trains for the recipe's
        ``whiten_bias_epochs``). So each of the first ``eigen_patches`` output channels has a second moment of
        lambda_k / (lambda_k + eps) ~ 1 on those images, and different channels are uncorrelated in that sense.
        ``centred``: the covariance about the patch mean instead, and a bias that subtracts the mean (mean-0
        outputs); on mean/std-normalized images the two nearly agree.
        """
        k = self.whiten.kernel_size
        x = train_images_prepared[:max_images].float()
        c = x.shape[1]
        dim = c * k[0] * k[1]
        # N, C, H', W', kh, kw -> N, H', W', C, kh, kw -> patches flattened in the conv weight's (C, kh, kw) order
        patches = x.unfold(2, k[0], 1).unfold(3, k[1], 1).permute(0, 2, 3, 1, 4, 5).reshape(-1, dim)
        mean = patches.mean(dim=0) if centred else torch.zeros(dim, dtype=patches.dtype, device=patches.device)
        cov = second_moment(patches - mean) / max(len(patches) - int(centred), 1)
        eigenvalues, eigenvectors = torch.linalg.eigh(cov)  # ascending
        order = eigenvalues.argsort(descending=True)[: self.eigen_patches]
        filters = eigenvectors[:, order].T / torch.sqrt(eigenvalues[order].clamp_min(0) + eps).unsqueeze(1)
        weight = torch.cat([filters, -filters])
        self.whiten.weight.copy_(weight.to(self.whiten.weight.dtype).view_as(self.whiten.weight))
        if centred:
            assert self.whiten.bias is not None  # (bias=True)
            self.whiten.bias.copy_(-(weight @ mean.double()).to(self.whiten.bias.dtype))
        self.whiten.weight.requires_grad_(False)


def second_moment(patches: torch.Tensor) -> torch.Tensor:
    """``patches.T @ patches`` in float64, from a float32 product with TF32 off whatever the run allows: a run on
    an Ampere or later GPU allows TF32 for its matmuls (``--tf32``), which would round the patches to 10 bits of
    mantissa before the covariance whose smallest eigenvalues set the whitening's largest gains; airbench computes
    it in plain float32 (PyTorch's default)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return torch.matmul(patches.T, patches).double()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def half_with_float_norms(model: nn.Module) -> nn.Module:
    """airbench's fp16 network: every parameter and buffer in fp16 except BatchNorm's (float32)."""
    model.half()
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.float()
    return model


@register_model("airbench_net")
def airbench_net(num_classes: int = 10, widths: tuple[int, int, int] = (64, 256, 256),
                 **kwargs: Any) -> AirbenchNet:
    """~1.97M parameters (1,972,792 for 10 classes with the default widths), 3 blocks, 32x32 input."""
    return AirbenchNet(num_classes=num_classes, widths=widths, **kwargs)


@register_model("airbench_net96")
def airbench_net96(num_classes: int = 10, widths: tuple[int, int, int] = (128, 384, 512),
                   **kwargs: Any) -> AirbenchNet:
    """airbench96's network: 3 convs per block with a residual over the last two, BN momentum 0.1 (PyTorch's
    default, which airbench96 keeps); 9,918,776 parameters for 10 classes."""
    kwargs.setdefault("bn_momentum", 0.1)
    kwargs.setdefault("block_depth", 3)
    return AirbenchNet(num_classes=num_classes, widths=widths, **kwargs)
