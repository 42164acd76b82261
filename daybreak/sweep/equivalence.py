"""Do two frameworks train the same model? The check every reference program (daybreak/sweep/frameworks) passes.

``reference_case`` builds daybreak's PyTorch model with a seeded initialization in which nothing is invisible
(``perturb``: every parameter that starts as a constant - BatchNorm and LayerNorm scales and shifts, biases - gets
seeded random values; in particular the last BatchNorm scale of each ResNet bottleneck, which starts at zero and
would make every residual branch output zero, so that a scrambled branch or a misplaced stride could not change the
loss), writes its weights and a fixed batch as .npz files, and computes the reference figures: the parameter count
and the losses of ``check_steps`` + 1 training steps in a row (the first at initialization, each next one after one
more update of the optimizer: gradients, the update rule and its hyperparameters all show in them). A program's
``--describe`` loads the same files and prints the same figures (daybreak/sweep/frameworks/reference.py);
``compare`` says where they disagree beyond the tolerances below.

Tolerances (measured on this project's CPU, docs/results/throughput.md): the frameworks add up in other orders
(oneDNN, Eigen, XLA kernels), each operation within a few float32 ulps of another's, so the first loss agrees to
~1e-6 relative: LOSS_TOLERANCE 1e-4 leaves room for other CPUs and is far below what a different network gives (a
v1 stride or a scrambled bottleneck: 1e-3 to percents). The backward pass amplifies that rounding towards the input
(ResNet-50's first gradients differ by ~1e-3 relative between JAX and PyTorch on the same weights), so the losses
after the updates drift apart (up to ~2e-4 relative over three SGD steps at a tiny size); what is compared is the change
of the loss over the updates (ResNet-50's falls by a few percent per SGD step on one batch): within STEP_TOLERANCE
(2%) of its size plus STEP_ABSOLUTE (the float32 rounding of the two losses it is the difference of), against at
most 5e-5 measured at ResNet-50 224 px and BERT sequence 128, batch 8 (1e-3 for TensorFlow's BERT: Keras' AdamW);
another update rule (a momentum of 0.8) is far outside.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
from torch import nn

LOSS_TOLERANCE = 1e-4  # relative, each loss
STEP_TOLERANCE = 0.02  # relative, the change of the loss over the updates
STEP_ABSOLUTE = 2e-5  # absolute, on top: the rounding of the two losses the change is the difference of
CHECK_STEPS = 3  # updates after the first loss: momentum and Adam's moments act from the second on


@dataclass
class Figures:
    params: int
    losses: list[float]
    flops_per_step: int | None = None  # the framework's own count (a diagnostic)
    more: dict[str, Any] = field(default_factory=dict)


def perturb(model: nn.Module, seed: int = 0) -> nn.Module:
    """Seeded random values for every parameter that initializes to a constant: the last BatchNorm scale of each
    ResNet bottleneck (zero at initialization) in 0.1..0.3, the other norm scales in 0.8..1.2, norm shifts and
    biases in -0.05..0.05. Small residual branches keep the network as well conditioned as the zero-initialized one
    (with every branch at full scale the activations and gradients grow through the 16 blocks until float32
    rounding alone moves the first layers' gradients by 1%), yet visible: a wrong branch changes the loss."""
    from daybreak.models.resnet50 import Bottleneck

    g = torch.Generator().manual_seed(seed)

    def uniform(t: torch.Tensor, low: float, high: float) -> None:
        t.copy_(low + (high - low) * torch.rand(t.shape, generator=g))

    with torch.no_grad():
        last = {id(m.bn3) for m in model.modules() if isinstance(m, Bottleneck)}
        for module in model.modules():
            if isinstance(module, (nn.BatchNorm2d, nn.LayerNorm)):
                uniform(module.weight, *((0.1, 0.3) if id(module) in last else (0.8, 1.2)))
                uniform(module.bias, -0.05, 0.05)
            elif isinstance(module, nn.Linear) and module.bias is not None:
                uniform(module.bias, -0.05, 0.05)
        for name, p in model.named_parameters():
            if name.endswith("predictions.bias"):  # BERT's decoder bias
                uniform(p, -0.05, 0.05)
    return model


Arrays = dict[str, npt.NDArray[Any]]
Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def make_batch(model_name: str, batch: int, image_size: int, seq_len: int, seed: int = 7) -> Arrays:
    """The fixed batch as arrays: x (NCHW float32 images, or token ids), y (labels), positions (BERT)."""
    from daybreak.sweep.worker import synthetic_tokens

    g = torch.Generator().manual_seed(seed)
    if model_name == "resnet50":
        return {"x": torch.randn(batch, 3, image_size, image_size, generator=g).numpy(),
                "y": torch.randint(0, 1000, (batch,), generator=g).numpy().astype(np.int32)}
    ids, positions, labels = synthetic_tokens(batch, seq_len, 30522, g)
    return {"x": ids.numpy().astype(np.int32), "y": labels.numpy().astype(np.int32),
            "positions": positions.numpy().astype(np.int32)}


def torch_training(model_name: str, model: nn.Module, batch: Arrays, optimizer_kwargs: dict[str, float] | None = None
                   ) -> tuple[nn.Module, torch.Tensor, torch.Tensor, Loss, torch.optim.Optimizer]:
    """(the module a step calls, x, y, the loss, the optimizer) as daybreak's throughput worker trains them, in
    the equivalence's mode: BatchNorm in training mode, dropout off. ``optimizer_kwargs`` change the optimizer's
    hyperparameters (a model trained another way, for the tests)."""
    more = optimizer_kwargs or {}
    from daybreak.sweep.worker import MaskedLMBatch, make_optimizer, mlm_loss

    y = torch.from_numpy(np.asarray(batch["y"])).long()
    if model_name == "resnet50":
        model.train()
        return (model, torch.from_numpy(np.asarray(batch["x"])), y, F.cross_entropy,
                make_optimizer(torch.optim.SGD, model, True,
                               **{**dict(lr=1e-3, momentum=0.9, weight_decay=5e-5), **more}))
    ids = torch.from_numpy(np.asarray(batch["x"])).long()
    positions = torch.from_numpy(np.asarray(batch["positions"])).long()
    runnable = MaskedLMBatch(model, ids.shape[1]).eval()  # dropout off (BERT has no BatchNorm)

    return (runnable, torch.cat([ids, positions], dim=1), y, mlm_loss,
            make_optimizer(torch.optim.AdamW, model, True, **{**dict(lr=1e-5, weight_decay=0.01), **more}))


def torch_figures(model_name: str, model: nn.Module, batch: Arrays,
                  check_steps: int = CHECK_STEPS, optimizer_kwargs: dict[str, float] | None = None) -> Figures:
    """PyTorch's figures for ``model`` (modified in place: it is trained) on ``batch``."""
    from daybreak.measure.flops import step_flops
    from daybreak.models import count_parameters

    runnable, x, y, loss_fn, optimizer = torch_training(model_name, model, batch, optimizer_kwargs)
    flops = step_flops(runnable, x, y, loss_fn, True)
    losses = []
    for _ in range(check_steps + 1):
        loss = loss_fn(runnable(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]  # (torch's Tensor.backward is unannotated)
        optimizer.step()
        losses.append(float(loss.detach()))
    return Figures(params=count_parameters(model), losses=losses, flops_per_step=flops)


@dataclass
class Case:
    model: str
    weights: Path  # .npz of the PyTorch state dict
    batch: Path  # .npz: x, y (, positions)
    figures: Figures
    batch_size: int
    image_size: int
    seq_len: int


def reference_case(model_name: str, folder: Path, batch_size: int = 8, image_size: int = 224, seq_len: int = 128,
                   check_steps: int = CHECK_STEPS, seed: int = 0,
                   build: Callable[[], nn.Module] | None = None) -> Case:
    """daybreak's model (``build()`` instead, for a variant), perturbed, its weights and a batch written to
    ``folder``, and PyTorch's figures."""
    from daybreak.models import create_model

    torch.manual_seed(seed)
    model = perturb(build() if build is not None else create_model(model_name), seed)
    folder.mkdir(parents=True, exist_ok=True)
    weights, batch_file = folder / f"{model_name}-weights.npz", folder / f"{model_name}-batch.npz"
    np.savez(weights, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
    batch = make_batch(model_name, batch_size, image_size, seq_len)
    np.savez(batch_file, **batch)  # type: ignore[arg-type]  # (numpy's stub types savez's keywords narrowly)
    figures = torch_figures(model_name, model, batch, check_steps)
    return Case(model_name, weights, batch_file, figures, batch_size, image_size, seq_len)


def compare(reference: Figures, said: Figures) -> list[str]:
    """Where ``said`` (a program's --describe) is not the same model trained the same way as ``reference``."""
    problems = []
    if said.params != reference.params:
        problems.append(f"{said.params:,} parameters, not {reference.params:,}")
    if len(said.losses) != len(reference.losses):
        return problems + [f"{len(said.losses)} losses, not {len(reference.losses)}"]
    a, b = said.losses[0], reference.losses[0]
    if not abs(a - b) <= LOSS_TOLERANCE * abs(b):
        problems.append(f"loss at initialization {a:.7g}, not {b:.7g} ({a / b - 1:+.2e} relative; tolerance "
                        f"{LOSS_TOLERANCE:g})")
    for k in range(1, len(reference.losses)):
        change, expected = said.losses[k] - said.losses[0], reference.losses[k] - reference.losses[0]
        if not abs(change - expected) <= STEP_TOLERANCE * abs(expected) + STEP_ABSOLUTE:
            problems.append(f"the loss changed by {change:+.6g} over {k} update(s), not {expected:+.6g} (tolerance "
                            f"{STEP_TOLERANCE:.0%} + {STEP_ABSOLUTE:g})")
    return problems
