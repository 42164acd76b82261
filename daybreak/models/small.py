"""Small CNNs for the digit tasks (8x8 digits, 28x28 MNIST)."""

from __future__ import annotations

from torch import nn

from daybreak.models import register_model


def conv_bn(c_in: int, c_out: int, kernel: int = 3) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel, padding=kernel // 2, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


@register_model("digits_cnn")
def digits_cnn(num_classes: int = 10, width: int = 32) -> nn.Module:
    """8x8 -> conv -> conv -> pool 4x4 -> linear. ~40k parameters."""
    return nn.Sequential(
        conv_bn(1, width),
        conv_bn(width, 2 * width),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(2 * width * 16, num_classes),
    )


@register_model("mnist_cnn")
def mnist_cnn(num_classes: int = 10, width: int = 16) -> nn.Module:
    """28x28 -> [conv-bn-relu, pool] x2 -> conv -> global max pool -> linear.

    Kept narrow so that an epoch over 8,000 images takes about a second on 2 CPU cores; BN lets a high
    learning rate work from the first step.
    """
    return nn.Sequential(
        conv_bn(1, width, 5),  # 28x28
        nn.MaxPool2d(2),  # 14x14
        conv_bn(width, 2 * width),
        nn.MaxPool2d(2),  # 7x7
        conv_bn(2 * width, 4 * width),
        nn.AdaptiveMaxPool2d(1),
        nn.Flatten(),
        nn.Linear(4 * width, num_classes),
    )
