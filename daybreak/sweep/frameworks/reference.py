"""What the three reference programs share (stand-alone like throughput_log: numpy only, no daybreak import).

Their options come from daybreak's settings (``throughput_log.settings()``) or the command line, so each program
runs on its own too::

    python jax_program.py --model resnet50 --batch-size 32 --amp bf16 --image-size 224
    python tensorflow_program.py --model bert_base --compile on --describe --weights bert.npz --batch batch.npz

The workloads are daybreak's built-in ones: ResNet-50 v1.5 on synthetic 3 x S x S images with 1000 classes, SGD
with momentum 0.9 (lr 1e-3, weight decay 5e-5); BERT-base with the masked-LM head on synthetic token sequences
(15% of the tokens predicted), AdamW (lr 1e-5, weight decay 0.01). ``--describe`` prints the equivalence figures
instead of timing: the parameter count, the FLOPs of one training step by the framework's own cost analysis, and
the loss on a fixed batch at initialization (``--weights``: start from daybreak's PyTorch weights, an .npz of its
state dict; ``--batch``: the batch, an .npz with x and y), computed in training mode with dropout off.
"""

import argparse
import json
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

import throughput_log as tl

NUM_CLASSES = 1000
VOCAB = 30522
IGNORE_INDEX = -100
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
                   help="the framework's compiler (XLA; Paddle: CINN)")
    p.add_argument("--devices", type=int, default=asked.get("devices", 1))
    p.add_argument("--warmup", type=int, default=asked.get("warmup", 20))
    p.add_argument("--steps", type=int, default=asked.get("steps", 100))
    p.add_argument("--window", type=int, default=asked.get("window", 10))
    p.add_argument("--image-size", type=int, default=asked.get("image_size") or 224)
    p.add_argument("--seq-len", type=int, default=asked.get("seq_len") or 128)
    p.add_argument("--threads", type=int, default=asked.get("threads"))
    p.add_argument("--describe", action="store_true", help="print the equivalence figures as JSON, time nothing")
    p.add_argument("--weights", help="--describe: start from these PyTorch weights (.npz of the state dict)")
    p.add_argument("--batch", help="--describe: the fixed batch (.npz with x and y)")
    return p.parse_args(argv)


def synthetic_batch(opts: argparse.Namespace, seed: int = 1234) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """(x, y) as daybreak's worker makes them: NCHW float32 images and class labels, or token ids and MLM labels
    (IGNORE_INDEX where nothing is predicted)."""
    if opts.batch:
        with np.load(opts.batch) as f:
            return f["x"], f["y"]
    rng = np.random.default_rng(seed)
    b = opts.batch_size * opts.devices
    if opts.model == "resnet50":
        x = rng.standard_normal((b, 3, opts.image_size, opts.image_size), dtype=np.float32)
        return x, rng.integers(0, NUM_CLASSES, (b,)).astype(np.int32)
    ids = rng.integers(1, VOCAB, (b, opts.seq_len)).astype(np.int32)
    labels = np.where(rng.random((b, opts.seq_len)) < MLM_PROBABILITY, ids, IGNORE_INDEX).astype(np.int32)
    return ids, labels


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


def describe(params: int, flops_per_step: int | None, loss: Any, **more: Any) -> None:
    print(json.dumps({"params": int(params), "flops_per_step": flops_per_step, "loss": float(loss), **more}),
          flush=True)


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


def run(opts: argparse.Namespace, step: Callable[[], object], sync: Callable[[], object],
        **start: Any) -> None:
    """Announce the run and time it (warm-up windows first) by daybreak's protocol."""
    tl.start(batch_size=opts.batch_size, devices=opts.devices, amp=opts.amp, input_shape=input_shape(opts),
             optimizer=optimizer_text(opts), **start)
    tl.time_steps(step, sync, opts.warmup, opts.steps, max(1, opts.window), opts.batch_size * opts.devices)
