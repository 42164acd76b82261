"""imagenet_resnet50: ResNet-50 v1.5 to 93% top-5 on the ImageNet validation set (DAWNBench's ImageNet task).

The training recipe is NVIDIA's well-documented one for ResNet-50 v1.5 (DeepLearningExamples): SGD with momentum
0.875, lr 0.256 per 256 images, weight decay 1/32768 (none on BatchNorm and biases), label smoothing 0.1, linear
warm-up then cosine decay, mixed precision (the runner's --amp) and channels-last. Its 90-epoch schedule reaches
~77% top-1 / ~93.5% top-5; 93% top-5 needs far fewer epochs, and the run stops at the first evaluation that meets
it. Progressive resizing (the fast.ai DAWNBench entries: small crops early, full size late) is available through
``size_schedule`` and off by default.

Pixels leave the decoding workers as uint8; the model's first module converts them to float and normalizes them
with the ImageNet mean/std on the device. This keeps host-to-device copies at 1 byte per channel and lets
``daybreak infer`` hold the 50,000 decoded validation images in host memory as uint8 (7.5 GB, not 30 GB of float).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from daybreak.data.base import TaskData
from daybreak.errors import ConfigError
from daybreak.models import create_model
from daybreak.recipes import COUNT, Range, RECIPES, Recipe, TrainSetup

if TYPE_CHECKING:
    from daybreak.data.imagenet_pipeline import PipelineSettings

IMAGENET_MEAN = (0.485, 0.456, 0.406)  # per-channel mean of the ImageNet training images (RGB, after /255)
IMAGENET_STD = (0.229, 0.224, 0.225)   # and their standard deviation

HYPERPARAMETERS: dict[str, Any] = dict(
    batch_size=256,         # per device: what an 80 GB (or, with bf16 and channels-last, a 16 GB) GPU fits for
                            # ResNet-50 at 224; the global batch is world_size x 256
    epochs=40,              # an upper bound: NVIDIA's cosine recipe passes 93% top-5 well before 40 epochs at 224;
                            # the run stops at the first evaluation at the target
    lr=0.256,               # peak SGD lr per 256 images (NVIDIA's value), scaled by batch_size / 256 and linearly
                            # with the number of devices (Goyal et al.'s linear scaling rule)
    momentum=0.875,         # NVIDIA's value for this recipe (a little less than 0.9, for the short warm-up)
    weight_decay=3.0517578125e-05,  # 1/32768 (NVIDIA's value) on conv/linear weights only: decay on BN and biases
                            # hurts short schedules
    label_smoothing=0.1,    # Szegedy et al.'s 0.1: ~+0.5% top-1 for ResNet-50
    warmup_epochs=5,        # linear warm-up from 0 (Goyal et al.'s 5 epochs, needed for large global batches)
    schedule="cosine",      # after warm-up: "cosine" decay to 0, or "linear" (a one-cycle triangle) to 0
    image_size=224,         # training crop size (RandomResizedCrop) when size_schedule is empty
    size_schedule="",       # progressive resizing, "EPOCH:SIZE,...", e.g. "0:128,15:224" (fast.ai's DAWNBench idea:
                            # early epochs at small crops cost ~1/3 as much); "" = image_size throughout
    eval_size=224,          # the validation crop, as in every ImageNet result ...
    eval_resize=256,        # ... of the image resized to a shorter side of 256 (the standard 0.875 crop)
    min_scale=0.08,         # RandomResizedCrop's area range 8%-100% (Inception's augmentation); ratios 3/4-4/3
    flip=True,              # switch: random horizontal flip of training crops
    jpeg_draft=True,        # switch: let libjpeg decode at 1/2-1/8 scale when the crop allows it (same crop, no
                            # upsampling; several times faster to decode large images)
    workers=-1,             # decoding processes per device; -1: all cores but one, divided among local ranks (max 16)
    prefetch=4,             # batches each worker decodes ahead
    eval_batch_size=256,    # validation images per forward pass (memory only; no effect on results)
    channels_last=True,     # switch: NHWC activations, what cuDNN's tensor-core convolutions want (speed only)
)
LIMITS = dict(workers=Range(-1), prefetch=COUNT, image_size=COUNT, eval_size=COUNT, eval_resize=COUNT,
              min_scale=Range(0.0, 1.0, low_open=True))  # the others: see Range in daybreak/recipes/__init__.py


class Normalized(nn.Module):
    """uint8 (or float in 0..255) N x 3 x H x W -> (x / 255 - mean) / std, then ``net``; on the model's device."""

    shift: torch.Tensor  # buffers
    inv_scale: torch.Tensor

    def __init__(self, net: nn.Module, mean: tuple[float, ...] = IMAGENET_MEAN, std: tuple[float, ...] = IMAGENET_STD):
        super().__init__()
        self.net = net
        scale = torch.tensor(std).view(1, -1, 1, 1) * 255.0
        self.register_buffer("shift", torch.tensor(mean).view(1, -1, 1, 1) * 255.0, persistent=False)
        self.register_buffer("inv_scale", 1.0 / scale, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net((x.float() - self.shift) * self.inv_scale)
        return out


def warmup_then(decay: str, warmup: float) -> Callable[[int, int], float]:
    """lr multiplier: linear from 0 to 1 over the first ``warmup`` fraction of steps, then cosine or linear to 0."""
    if decay not in ("cosine", "linear"):
        raise ConfigError(f"schedule={decay!r}: choose cosine or linear")

    def multiplier(step: int, total_steps: int) -> float:
        t = step / max(total_steps, 1)
        if t < warmup:
            return t / warmup
        u = (t - warmup) / max(1.0 - warmup, 1e-12)
        return 0.5 * (1.0 + math.cos(math.pi * u)) if decay == "cosine" else max(1.0 - u, 0.0)

    return multiplier


def pipeline_settings(hp: dict[str, Any]) -> PipelineSettings:
    from daybreak.data.imagenet_pipeline import PipelineSettings, parse_size_schedule

    return PipelineSettings(
        image_size=hp["image_size"], size_schedule=parse_size_schedule(hp["size_schedule"]),
        eval_size=hp["eval_size"], eval_resize=hp["eval_resize"], min_scale=hp["min_scale"], flip=hp["flip"],
        draft=hp["jpeg_draft"], workers=hp["workers"], prefetch=max(hp["prefetch"], 1),
        eval_batch_size=max(hp["eval_batch_size"], 1),
    )


def build(hp: dict[str, Any], data: TaskData, device: torch.device) -> TrainSetup:
    from daybreak.data.imagenet import ImageNetData

    if not isinstance(data, ImageNetData):
        raise ConfigError("recipe imagenet_resnet50 trains on the imagenet task's data")
    if not 0 <= hp["warmup_epochs"] < hp["epochs"]:
        raise ConfigError(f"warmup_epochs={hp['warmup_epochs']}: must be in [0, epochs={hp['epochs']})")
    data.configure(pipeline_settings(hp))
    memory_format = torch.channels_last if hp["channels_last"] else torch.contiguous_format
    model = Normalized(create_model("resnet50", num_classes=data.num_classes))
    model = model.to(device, memory_format=memory_format)  # type: ignore[call-overload]  # (torch's stub lacks it)

    lr = hp["lr"] * hp["batch_size"] / 256
    no_decay: list[torch.Tensor] = [p for m in model.modules() if isinstance(m, nn.BatchNorm2d) for p in m.parameters()]
    no_decay += [m.bias for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d)) and m.bias is not None]
    skip = {id(p) for p in no_decay}
    decay = [p for p in model.parameters() if id(p) not in skip]
    optimizer = torch.optim.SGD(
        [dict(params=decay, weight_decay=hp["weight_decay"]), dict(params=no_decay, weight_decay=0.0)],
        lr=lr, momentum=hp["momentum"],
    )

    def prepare(x: torch.Tensor) -> torch.Tensor:
        return x.contiguous(memory_format=memory_format)  # stays uint8: the model normalizes

    smoothing = hp["label_smoothing"]
    return TrainSetup(
        model=model,
        optimizer=optimizer,
        lr_multiplier=warmup_then(hp["schedule"], hp["warmup_epochs"] / hp["epochs"]),
        loss_fn=lambda logits, y: F.cross_entropy(logits, y, label_smoothing=smoothing),
        prepare=prepare,
    )


MLLOG_BENCHMARK = "resnet"  # MLPerf's name for this benchmark (its submission_benchmark value)


def mllog_events(hp: dict[str, Any], data: TaskData, global_batch_size: int) -> dict[str, Any]:
    """MLPerf ResNet's hyperparameter keys (closed_resnet / closed_resnet_sgd) with this recipe's values.

    For the runner to write after ``build`` (global_batch_size and submission_benchmark are the recorder's own
    header events; see MLLOG_BENCHMARK)."""
    train = getattr(data, "train", None)
    train_samples = len(train) if train is not None else 0
    steps_per_epoch = max(train_samples // max(global_batch_size, 1), 1)
    return {
        "train_samples": train_samples,
        "gradient_accumulation_steps": 1,
        "opt_name": "sgd",
        "sgd_opt_base_learning_rate": hp["lr"] * global_batch_size / 256,
        "sgd_opt_end_learning_rate": 0.0,
        "sgd_opt_momentum": hp["momentum"],
        "sgd_opt_weight_decay": hp["weight_decay"],
        "sgd_opt_learning_rate_decay_steps": steps_per_epoch * (hp["epochs"] - hp["warmup_epochs"]),
        "opt_learning_rate_warmup_epochs": hp["warmup_epochs"],
        "opt_learning_rate_decay_schedule": f"{hp['schedule']} after linear warm-up",
        "model_bn_span": hp["batch_size"],
    }


RECIPES.add("imagenet_resnet50", Recipe(
    name="imagenet_resnet50", task="imagenet", model="resnet50",
    summary="ResNet-50 v1.5, SGD 0.256/256 momentum 0.875, label smoothing 0.1, 5-epoch warm-up + cosine, "
            "RandomResizedCrop + flip at 224 (optional progressive resizing), channels-last",
    defaults=HYPERPARAMETERS, limits=LIMITS, build=build, batch_scaling="per-device", lr_scaling="linear",
    switches=("flip", "jpeg_draft", "channels_last"),
    mllog_benchmark=MLLOG_BENCHMARK, mllog_metric="top1", mllog_target=0.759,  # MLPerf resnet: 75.90% top-1
    mllog_events=mllog_events,
))
