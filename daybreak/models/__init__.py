"""Model registry: ``create_model("mnist_cnn", num_classes=10)``, like timm's create_model."""

from __future__ import annotations

from typing import Any, Callable

from torch import nn

from daybreak.registry import Registry

MODELS: Registry[Callable[..., nn.Module]] = Registry("model")
register_model = MODELS.register


def create_model(name: str, **kwargs: Any) -> nn.Module:
    _import_all()
    return MODELS.get(name)(**kwargs)


def model_names() -> list[str]:
    _import_all()
    return MODELS.names()


def _import_all() -> None:
    from daybreak.models import bert, resnet50, resnet_cifar, small, span_bert  # noqa: F401


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
