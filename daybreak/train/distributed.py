"""torch.distributed for time-to-accuracy runs: set up from torchrun's environment, a few collectives, teardown.

A function you call, not a class you inherit: ``init_distributed`` reads RANK/WORLD_SIZE/LOCAL_RANK (set by
torchrun) and returns a ``DistContext``; with no such environment it returns the single-process context and
every collective is a no-op.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from daybreak.errors import ConfigError

DEFAULT_TIMEOUT_S = 300  # a collective that waits longer than this ends the run (a hung or dead rank)


class Terminated(Exception):
    """Raised in a worker that received SIGTERM (torchrun stops the others when one rank fails)."""


@dataclass
class DistContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    nodes: int = 1
    backend: str | None = None

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.enabled:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def broadcast_buffers(self, model: torch.nn.Module) -> None:
        """Make every rank's BN running statistics rank 0's, so that all ranks evaluate rank 0's weights."""
        if self.enabled:
            for buffer in model.buffers():
                dist.broadcast(buffer, src=0)

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()


def in_torchrun() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def init_distributed(device_name: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[DistContext, torch.device | None]:
    """Join the process group torchrun prepared. Returns (context, device for this rank or None = choose as usual)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistContext(), None
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world_size)))
    nodes = max(world_size // max(local_world, 1), 1)
    want = (device_name or "auto").lower()
    use_cuda = torch.cuda.is_available() and want in ("auto", "cuda") or want.startswith("cuda")
    if use_cuda:
        if not torch.cuda.is_available():
            raise ConfigError(f"--device {device_name}: CUDA is not available")
        if local_rank >= torch.cuda.device_count():
            raise ConfigError(f"rank {rank}: local rank {local_rank} but only {torch.cuda.device_count()} GPUs here; "
                              "lower --nproc-per-node")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    elif want in ("auto", "cpu"):
        device = torch.device("cpu")
        backend = "gloo"
    else:
        raise ConfigError(f"--device {device_name}: multi-process runs support cuda and cpu")
    # SIGTERM from the launcher (another rank died, or the user stopped it) becomes an exception, so the
    # run is recorded as failed instead of vanishing.
    signal.signal(signal.SIGTERM, _raise_terminated)
    dist.init_process_group(backend=backend, timeout=timedelta(seconds=timeout_s),
                            device_id=device if backend == "nccl" else None)
    return DistContext(rank=rank, world_size=world_size, local_rank=local_rank, nodes=nodes, backend=backend), device


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated("terminated by the launcher (SIGTERM): another rank failed or the run was stopped")


def destroy(ctx: DistContext) -> None:
    if ctx.enabled and dist.is_initialized():
        dist.destroy_process_group()


def injected_fault_step(ctx: DistContext) -> int | None:
    """Fault injection for tests of failure handling: DAYBREAK_FAULT_INJECT="rank=R,step=S" makes rank R raise
    at step S. Returns S for this rank, else None."""
    spec = os.environ.get("DAYBREAK_FAULT_INJECT")
    if not spec:
        return None
    fields = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
    return int(fields["step"]) if int(fields.get("rank", -1)) == ctx.rank and "step" in fields else None
