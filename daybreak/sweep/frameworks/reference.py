"""What the reference programs share (stand-alone like throughput_log: numpy only, no daybreak import).

Their options come from daybreak's settings (``throughput_log.settings()``) or the command line, so each program
runs on its own too::

    python jax_program.py --model resnet50 --batch-size 32 --amp bf16 --image-size 224 --threads 1
    python tensorflow_program.py --model bert_base --compile on --describe --weights bert.npz --batch batch.npz

The workloads are daybreak's built-in ones: ResNet-50 v1.5 on synthetic 3 x S x S images with 1000 classes, SGD
with momentum 0.9 (lr 1e-3, weight decay 5e-5); BERT-base with the masked-LM head on synthetic token sequences,
the same number of masked tokens in every sequence (15% of them, masked_count) and the head scoring only those
positions, AdamW (lr 1e-5, weight decay 0.01).

``--describe`` prints the equivalence figures instead of timing (daybreak.sweep.equivalence compares them with
PyTorch's): the parameter count, the FLOPs of one training step by the framework's own count, and the loss of
``--check-steps`` + 1 training steps in a row on a fixed batch (``--weights``: start from daybreak's PyTorch
weights, an .npz of its state dict; ``--batch``: the batch, an .npz with x, y and, for BERT, positions): the first
is the loss at initialization, each next one the loss after one more update. BatchNorm in training mode, dropout
off, fp32 with TF32 off.
"""

import argparse
import json
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

import throughput_log as tl

NUM_CLASSES = 1000
VOCAB = 30522
MLM_PROBABILITY = 0.15
SGD = dict(lr=1e-3, momentum=0.9, weight_decay=5e-5)
ADAMW = dict(lr=1e-5, weight_decay=0.01, b1=0.9, b2=0.999, eps=1e-8)
BERT = dict(hidden=768, layers=12, heads=12, intermediate=3072, positions=512, types=2, ln_eps=1e-12, dropout=0.1)
BN = dict(momentum=0.1, eps=1e-5)  # PyTorch's convention: new = (1 - momentum) * old + momentum * batch


def options(argv: list[str] | None = None) -> argparse.Namespace:
    asked = tl.settings()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=asked.get("model", "resnet50"), choices=["resnet50", "bert_base"])
    p.add_argument("--batch-size", type=int, default=asked.get("batch_size", 32), help="per device")
    p.add_argument("--amp", default=asked.get("amp", "off"), choices=["off", "bf16", "fp16"])
    p.add_argument("--compile", default="on" if asked.get("compile") else "off", choices=["on", "off"],
                   help="the framework's compiler over the whole training step (torch.compile, XLA; Paddle: CINN); "
                        "off: eager")
    p.add_argument("--devices", type=int, default=asked.get("devices", 1))
    p.add_argument("--device", default=asked.get("device", "cpu"), choices=["cpu", "cuda", "mps"])
    p.add_argument("--threads", type=int, default=asked.get("threads") or 1,
                   help="intra-op and inter-op threads of the process")
    p.add_argument("--warmup", type=int, default=asked.get("warmup", 20))
    p.add_argument("--steps", type=int, default=asked.get("steps", 100))
    p.add_argument("--min-window", type=float, default=asked.get("min_window_s", tl.MIN_WINDOW_S))
    p.add_argument("--image-size", type=int, default=asked.get("image_size") or 224)
    p.add_argument("--seq-len", type=int, default=asked.get("seq_len") or 128)
    p.add_argument("--channels-last", action="store_true", default=bool(asked.get("channels_last")))
    p.add_argument("--describe", action="store_true", help="print the equivalence figures as JSON, time nothing")
    p.add_argument("--check-steps", type=int, default=3, help="--describe: training steps after the first loss")
    p.add_argument("--weights", help="--describe: start from these PyTorch weights (.npz of the state dict)")
    p.add_argument("--batch", help="--describe: the fixed batch (.npz with x, y and for BERT positions)")
    return p.parse_args(argv)


def masked_count(seq_len: int) -> int:
    """The masked tokens per sequence: 15% of them, rounded half up, at least 1 (= daybreak.sweep.worker's)."""
    return max(1, int(seq_len * MLM_PROBABILITY + 0.5))


@dataclass
class Batch:
    """ResNet-50: x NCHW float32 images, y class labels. BERT: x token ids (B, L), positions the sorted positions of
    each sequence's masked tokens (B, P), y their labels (B, P)."""

    x: npt.NDArray[Any]
    y: npt.NDArray[Any]
    positions: npt.NDArray[Any] | None = None


def synthetic_batch(opts: argparse.Namespace, seed: int = 1234) -> Batch:
    """The batch of ``--batch`` or one made as daybreak's worker makes them (not the same numbers)."""
    if opts.batch:
        with np.load(opts.batch) as f:
            return Batch(f["x"], f["y"], f["positions"] if "positions" in f.files else None)
    rng = np.random.default_rng(seed)
    b = opts.batch_size * opts.devices
    if opts.model == "resnet50":
        x = rng.standard_normal((b, 3, opts.image_size, opts.image_size), dtype=np.float32)
        return Batch(x, rng.integers(0, NUM_CLASSES, (b,)).astype(np.int32))
    ids = rng.integers(1, VOCAB, (b, opts.seq_len)).astype(np.int32)
    positions = np.sort(np.argsort(rng.random((b, opts.seq_len)), axis=1)[:, :masked_count(opts.seq_len)], axis=1)
    return Batch(ids, np.take_along_axis(ids, positions, axis=1).astype(np.int32), positions.astype(np.int32))


def torch_weights(opts: argparse.Namespace) -> dict[str, npt.NDArray[Any]] | None:
    """daybreak's PyTorch state dict (name -> array), or None."""
    if not opts.weights:
        return None
    with np.load(opts.weights) as f:
        return {k: f[k] for k in f.files}


def input_shape(opts: argparse.Namespace) -> list[int]:
    return [3, opts.image_size, opts.image_size] if opts.model == "resnet50" else [opts.seq_len]


def optimizer_text(opts: argparse.Namespace) -> str:
    if opts.model == "resnet50":
        return f"SGD(lr={SGD['lr']:g}, momentum={SGD['momentum']:g}, weight_decay={SGD['weight_decay']:g})"
    return f"AdamW(lr={ADAMW['lr']:g}, weight_decay={ADAMW['weight_decay']:g})"


def describe(params: int, flops_per_step: int | None, losses: list[float], **more: Any) -> None:
    """The equivalence figures (see the module's docstring) as one JSON line."""
    print(json.dumps({"params": int(params), "flops_per_step": flops_per_step, "loss": float(losses[0]),
                      "losses": [float(v) for v in losses], **more}), flush=True)


def check(opts: argparse.Namespace, framework: str, supported_amp: tuple[str, ...] = ("off", "bf16"),
          compiler_off_ok: bool = True, compiler_on_ok: bool = True, several_devices: bool = False,
          why: dict[str, str] | None = None) -> bool:
    """Report what this framework's program cannot run (``throughput_log.unsupported``); True when it can run."""
    why = why or {}
    if opts.describe:
        return True
    if opts.amp not in supported_amp:
        tl.unsupported(why.get("amp", f"{framework}: AMP {opts.amp} is not supported by this program"))
    elif opts.compile == "off" and not compiler_off_ok:
        tl.unsupported(why["compile_off"])
    elif opts.compile == "on" and not compiler_on_ok:
        tl.unsupported(why["compile_on"])
    elif opts.devices > 1 and not several_devices:
        tl.unsupported(why.get("devices", f"{framework}: this program runs one device"))
    else:
        return True
    return False


def fail(opts: argparse.Namespace, reason: str) -> int:
    """The program cannot run what was asked here (the device is missing, ...): say so and end (exit status)."""
    if opts.describe:
        raise SystemExit(reason)
    tl.failed(reason)
    return 0


def run(opts: argparse.Namespace, step: Callable[[], object], sync: Callable[[], object], **start: Any) -> None:
    """Announce what runs (``start``: framework, version, compiler, device, device_name, threads, inter_op_threads,
    math_precision, flops_per_step, layout, ...) and time it by daybreak's protocol."""
    what = dict(batch_size=opts.batch_size, devices=opts.devices, amp=opts.amp, input_shape=input_shape(opts),
                optimizer=optimizer_text(opts))
    what.update(start)
    tl.start(**what)
    tl.time_steps(step, sync, opts.warmup, opts.steps, opts.batch_size * opts.devices, opts.min_window)
