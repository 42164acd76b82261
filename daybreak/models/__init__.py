"""Model registry: ``create_model("mnist_cnn", num_classes=10)``, like timm's create_model."""

from __future__ import annotations

from typing import Any, Callable

from torch import nn

from daybreak.registry import Registry

# Filled on first use from every module of this package and the "daybreak.models" entry-point group.
MODELS: Registry[Callable[..., nn.Module]] = Registry("model", package=__name__, entry_point_group="daybreak.models")
register_model = MODELS.register


def create_model(name: str, **kwargs: Any) -> nn.Module:
    return MODELS.get(name)(**kwargs)


def model_names() -> list[str]:
    return MODELS.names()


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
