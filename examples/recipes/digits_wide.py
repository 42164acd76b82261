"""A complete user recipe for the digits task: a wider MLP-free CNN with AdamW and a cosine schedule.

Run it without editing daybreak:

    daybreak run digits --recipe examples/recipes/digits_wide.py
    daybreak run digits --recipe examples/recipes/digits_wide.py --set lr=0.003 --seed 2
    python -c "import daybreak; print(daybreak.run('digits', recipe='examples/recipes/digits_wide.py').status)"

A recipe file registers exactly one ``Recipe``. The runner calls ``build(hp, data, device)`` once, inside model
initialization; ``data`` is the task's *training* data only (``data.train_x``, ``data.train_y``,
``data.num_classes``): the evaluation split stays with the runner, so a recipe cannot tune on it. Everything the
returned ``TrainSetup`` does runs under the clock rules like the built-in recipes, and the run records this file's
SHA-256 (``context.recipe_sha256``) and marks the run unofficial (a user's recipe is not a reference recipe).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from daybreak.recipes import COUNT, FRACTION, RECIPES, Recipe, TrainSetup
from daybreak.recipes.common import random_translate

# Every hyperparameter in one block, with its unit and the reason for its value. `--set KEY=VALUE` overrides any
# of them (typed by the default's type); numbers must be finite and >= 0 unless LIMITS says otherwise.
HYPERPARAMETERS: dict[str, Any] = dict(
    batch_size=128,        # the global batch (images per step on all devices together): 10 steps/epoch on 1,347
    epochs=15,             # the schedule's length; the run stops at the first evaluation at the target
    lr=0.004,              # peak AdamW lr (per step); AdamW is forgiving on this small problem
    weight_decay=0.05,     # decoupled weight decay (AdamW)
    warmup=0.1,            # fraction of the steps with a linear warm-up, then cosine decay to 0
    width=64,              # channels of the first conv block (the second has 2x)
    label_smoothing=0.05,  # a little smoothing; the digits labels are clean
    ema=0.9,               # EMA of the weights used for evaluation (0 switches it off): steadier accuracy
    clip=1.0,              # global gradient-norm clip (0 switches it off)
    translate=True,        # +-1 pixel shifts of the training images on the device
)
LIMITS = dict(warmup=FRACTION, width=COUNT, ema=FRACTION)


class WideCNN(nn.Module):
    def __init__(self, num_classes: int, width: int):
        super().__init__()
        w = width

        def block(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.GELU())

        self.features = nn.Sequential(block(1, w), block(w, w), nn.MaxPool2d(2), block(w, 2 * w), nn.MaxPool2d(2))
        self.head = nn.Linear(2 * w, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).mean(dim=(2, 3)))


def build(hp: dict[str, Any], data: Any, device: torch.device) -> TrainSetup:
    model = WideCNN(data.num_classes, hp["width"]).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=hp["lr"], weight_decay=hp["weight_decay"])

    def lr_multiplier(step: int, total: int) -> float:  # linear warm-up, then cosine to 0
        t = step / max(total, 1)
        if t < hp["warmup"]:
            return t / hp["warmup"]
        return 0.5 * (1 + math.cos(math.pi * (t - hp["warmup"]) / max(1 - hp["warmup"], 1e-12)))

    # An exponential moving average of the weights, updated after every step (a hook inside the clock) and
    # evaluated instead of the raw weights (eval_model).
    ema = torch.optim.swa_utils.AveragedModel(
        model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(hp["ema"]), use_buffers=True)

    def on_step(step: int, total: int) -> None:
        ema.update_parameters(model)

    return TrainSetup(
        model=model,
        optimizer=optimizer,
        lr_multiplier=lr_multiplier,
        loss_fn=lambda logits, y: nn.functional.cross_entropy(logits, y, label_smoothing=hp["label_smoothing"]),
        prepare=lambda x: (x.float() - 4.88) / 6.02,  # digits pixels are 0..16: the training set's mean and std
        augment=(lambda x, g: random_translate(x, 1, g)) if hp["translate"] else None,
        clip_grad_norm=hp["clip"] or None,
        on_step=on_step if hp["ema"] > 0 else None,
        eval_model=(lambda: ema.module) if hp["ema"] > 0 else None,
    )


RECIPES.add("digits_wide", Recipe(
    name="digits_wide", task="digits", model="user:WideCNN",
    summary="a user recipe: wider CNN, AdamW, warm-up + cosine, EMA weights for evaluation, gradient clipping",
    defaults=HYPERPARAMETERS, limits=LIMITS, build=build, batch_scaling="global",
    switches=("translate",),
))
