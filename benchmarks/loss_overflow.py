"""The fp16 loss overflow behind cifar10_muon's "divergence", shown on a device: the label-smoothed cross-entropy of
fp16 logits summed over a batch, as airbench computes it, against the same loss on float32 logits.

    python benchmarks/loss_overflow.py [--device auto] [--batch 2000] [--out FILE.json]

For each logit gap (the label's logit above the nine others: 3.40, and ln(0.82 / 0.02) = 3.71, where label
smoothing 0.2 puts its optimum) it prints the fp16 ``reduction="sum"`` value, fp16 ``"none"`` summed in float32,
the float32 value, the loss of cifar10_muon's own ``loss_fn`` on the fp16 logits, and whether the fp16 gradient
is finite and equal to the float32 one. With label smoothing PyTorch sums the log-probabilities over the classes
and the batch in the logits' dtype before scaling them by smoothing / classes: 35.4 per example at gap 3.71, so a
batch of 2000 passes fp16's 65,504 and the value is inf while the gradient is finite. The ratio printed is fp16's
value over float32's (inf where it overflows; 1 within rounding elsewhere), measured in the same run.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

GAPS = (3.40, math.log(0.82 / 0.02))
SMOOTHING = 0.2


def logits_at(batch: int, gap: float, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.arange(batch, device=device) % 10
    x = torch.zeros(batch, 10, device=device)
    x[torch.arange(batch, device=device), y] = gap
    return x, y


def measure(device: torch.device, batch: int) -> dict[str, Any]:
    from daybreak.recipes import get_recipe
    from daybreak.tasks import get_task
    from daybreak.train.views import SpecData

    recipe, task = get_recipe("cifar10_muon"), get_task("cifar10")
    spec = SpecData(task.num_classes, task.input_spec, recipe.name)  # what the runner builds it from
    loss_fn = recipe.build(recipe.hyperparameters({"batch_size": batch}), spec, device).loss_fn  # type: ignore[arg-type]
    rows = []
    for gap in GAPS:
        x, y = logits_at(batch, gap, device)
        half = x.half().requires_grad_(True)
        fp16_sum = F.cross_entropy(half, y, label_smoothing=SMOOTHING, reduction="sum")
        fp16_sum.backward()
        grad16 = half.grad
        exact = x.clone().requires_grad_(True)
        f32 = F.cross_entropy(exact, y, label_smoothing=SMOOTHING, reduction="sum")
        f32.backward()
        with torch.no_grad():
            none_then_f32 = F.cross_entropy(half, y, label_smoothing=SMOOTHING, reduction="none").float().sum()
            recipe_loss = loss_fn(half, y)
        assert grad16 is not None and exact.grad is not None
        finite_grad = bool(torch.isfinite(grad16).all())
        rows.append({"gap": round(gap, 4), "fp16_sum": float(fp16_sum.item()), "fp16_none_float32_sum":
                     float(none_then_f32.item()), "float32": float(f32.item()),
                     "cifar10_muon_loss_fn": float(recipe_loss.item()), "fp16_gradient_finite": finite_grad,
                     "gradient_max_abs_difference": float((grad16.float() - exact.grad).abs().max().item()),
                     "ratio_fp16_to_float32": float(fp16_sum.item()) / float(f32.item())})
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    return {"device": str(device), "device_name": name, "torch": torch.__version__, "batch": batch,
            "label_smoothing": SMOOTHING, "rows": rows,
            "overflows": [r["gap"] for r in rows if math.isinf(r["fp16_sum"])],
            "recipe_loss_finite": all(math.isfinite(r["cifar10_muon_loss_fn"]) for r in rows)}


def report(s: dict[str, Any]) -> str:
    lines = [f"fp16 label-smoothed ({s['label_smoothing']}) cross-entropy summed over a batch of {s['batch']} on "
             f"{s['device']} ({s['device_name']}, torch {s['torch']})",
             f"{'gap':>6} {'fp16 sum':>10} {'fp16 none+f32 sum':>18} {'float32':>10} {'cifar10_muon':>13} "
             f"{'fp16 grad':>10} {'ratio':>7}"]
    for r in s["rows"]:
        ratio = "inf" if math.isinf(r["ratio_fp16_to_float32"]) else f"{r['ratio_fp16_to_float32']:.4f}"
        lines.append(f"{r['gap']:>6.2f} {r['fp16_sum']:>10.6g} {r['fp16_none_float32_sum']:>18.6g} "
                     f"{r['float32']:>10.6g} {r['cifar10_muon_loss_fn']:>13.6g} "
                     f"{'finite' if r['fp16_gradient_finite'] else 'NON-FINITE':>10} {ratio:>7}")
    lines.append(f"the fp16 sum overflows at gaps {s['overflows'] or 'none'}; cifar10_muon's loss (on float32 "
                 f"logits) is {'finite at every gap' if s['recipe_loss_finite'] else 'NOT finite'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/loss_overflow.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="auto", help="auto (CUDA when visible), cpu, cuda, ...")
    p.add_argument("--batch", type=int, default=2000, help="examples summed (default 2000, cifar10_muon's batch)")
    p.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = p.parse_args(argv)
    from daybreak.errors import DaybreakError
    from daybreak.measure.device import select_device

    try:
        if args.batch < 1:
            raise DaybreakError(f"--batch {args.batch}: at least 1")
        device = select_device(args.device)
    except DaybreakError as e:
        print(f"loss_overflow: error: {e}", file=sys.stderr)
        return 2
    s = measure(device, args.batch)
    print(report(s))
    if args.out:
        from daybreak.fileio import atomic_write_json

        args.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(args.out, s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
