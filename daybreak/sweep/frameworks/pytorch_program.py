"""ResNet-50 v1.5 and BERT-base (masked-LM head) training steps in PyTorch, timed by daybreak's throughput protocol
(throughput_log), so that PyTorch's row of a framework comparison is timed exactly as every other framework's: each
repeat a fresh process with its own warm-up.

The one reference program that imports daybreak: its model, workload and training step ARE daybreak's
(daybreak.models, daybreak.sweep.worker's build_workload and make_train_step), not a copy. Eager is daybreak's
TrainStep; ``--compile on`` is torch.compile over the whole step (forward, loss, backward and optimizer:
daybreak.sweep.worker.compile_whole_step), as XLA compiles JAX's and TensorFlow's. Threads: torch.set_num_threads
and set_num_interop_threads. fp32 is true fp32 on a GPU (TF32 off for matmuls and cuDNN convolutions), as in every
reference program. One device per process (several: `--protocol worker`, which runs torchrun + DDP).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import reference as ref

OPTS = ref.options()
# torch.compile's code generation in this process, not in a pool of worker processes: the threads asked, and every
# CPU second of the run counted as the run's (daybreak.sweep.load)
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from daybreak.records.throughput import ThroughputConfig  # noqa: E402
from daybreak.sweep import equivalence  # noqa: E402
from daybreak.sweep.worker import build_workload, make_train_step, math_precision, model_step_flops  # noqa: E402
from daybreak.train.distributed import DistContext  # noqa: E402


def main() -> int:
    opts = OPTS
    if not ref.check(opts, "pytorch", supported_amp=("off", "bf16", "fp16"), why={
            "devices": "PyTorch: this program runs one device; several run as torchrun processes with DDP "
                       "(--protocol worker)"}):
        return 0
    torch.set_num_threads(opts.threads)
    torch.set_num_interop_threads(opts.threads)
    if opts.device == "cuda" and not torch.cuda.is_available():
        ref.fail(opts, f"asked for cuda: torch {torch.__version__} sees no GPU")
        return 0
    if opts.device == "mps" and not torch.backends.mps.is_available():
        ref.fail(opts, "asked for mps: MPS is not available")
        return 0
    device = torch.device(opts.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 is fp32, as in every reference program
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
    if opts.describe:
        return describe(opts)
    config = ThroughputConfig(model=opts.model, batch_size=opts.batch_size, amp=opts.amp, compile=opts.compile == "on",
                              device=device.type, channels_last=opts.channels_last,
                              image_size=opts.image_size if opts.model == "resnet50" else None,
                              seq_len=opts.seq_len if opts.model == "bert_base" else None)
    torch.manual_seed(0)
    work = build_workload(config, opts.batch_size, device, 0, 1)
    work.model.train()
    step_loss, optimizer, compiler = make_train_step(work, device, opts.amp, config.compile, DistContext())
    holder: dict[str, torch.Tensor] = {}

    def step() -> None:
        holder["loss"] = step_loss()

    def sync() -> float | None:
        return float(holder["loss"].detach()) if "loss" in holder else None  # reading the loss waits for the device

    ref.run(opts, step, sync, framework="pytorch", version=torch.__version__, compiler=compiler,
            device=device.type, device_name=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            threads=torch.get_num_threads(), inter_op_threads=torch.get_num_interop_threads(),
            math_precision=math_precision(config, device), flops_per_step=model_step_flops(config, opts.batch_size),
            optimizer=optimizer, layout="NHWC" if opts.channels_last else "NCHW",
            **({"channels_last": True} if opts.channels_last else {}))
    return 0


def describe(opts: argparse.Namespace) -> int:
    """The equivalence figures (daybreak.sweep.equivalence.torch_figures) from --weights and --batch."""
    from daybreak.models import create_model

    weights, batch = ref.torch_weights(opts), opts.batch
    model = create_model(opts.model)
    if weights is not None:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    arrays = dict(np.load(batch)) if batch else _synthetic(opts)
    figures = equivalence.torch_figures(opts.model, model, arrays, opts.check_steps)
    ref.describe(figures.params, figures.flops_per_step, figures.losses, framework="pytorch", version=torch.__version__)
    return 0


def _synthetic(opts: argparse.Namespace) -> dict[str, Any]:
    b = ref.synthetic_batch(opts)
    return {"x": b.x, "y": b.y, **({"positions": b.positions} if b.positions is not None else {})}


if __name__ == "__main__":
    sys.exit(main())
