"""Launching daybreak itself under torchrun (torch.distributed.run): one place builds the command line.

Used by `daybreak run --nproc-per-node N` and by the throughput sweep's multi-device configurations.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from daybreak.errors import ConfigError


@dataclass(frozen=True)
class LaunchSpec:
    nproc_per_node: int = 1
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None  # HOST:PORT of the rendezvous (node 0) for several nodes

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes

    @property
    def multi_process(self) -> bool:
        return self.world_size > 1

    def validate(self) -> "LaunchSpec":
        if self.nproc_per_node < 1:
            raise ConfigError(f"--nproc-per-node {self.nproc_per_node}: must be >= 1")
        if self.nnodes < 1:
            raise ConfigError(f"--nnodes {self.nnodes}: must be >= 1")
        if not 0 <= self.node_rank < self.nnodes:
            raise ConfigError(f"--node-rank {self.node_rank}: must be in 0..{self.nnodes - 1}")
        if self.nnodes > 1:
            if not self.rdzv_endpoint:
                raise ConfigError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (the address of node 0)")
            host, _, port = self.rdzv_endpoint.rpartition(":")
            if not host or not port.isdigit():
                raise ConfigError(f"--rdzv-endpoint {self.rdzv_endpoint!r}: expected HOST:PORT")
        return self


def torchrun_command(spec: LaunchSpec, module: str, args: list[str]) -> list[str]:
    """``python -m torch.distributed.run ... -m MODULE ARGS``: no restarts, a failure of any rank ends all."""
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={spec.nproc_per_node}",
           "--max-restarts=0", "--monitor-interval=0.5"]
    if spec.nnodes == 1:
        cmd.append("--standalone")  # a free local port, no external rendezvous
    else:
        # static: global rank = --node-rank x processes + local rank, so node 0 hosts rank 0, which writes the
        # records into node 0's --out (c10d ranks the nodes in the order they arrive and ignores --node-rank)
        cmd += [f"--nnodes={spec.nnodes}", f"--node-rank={spec.node_rank}", "--rdzv-backend=static",
                f"--rdzv-endpoint={spec.rdzv_endpoint}"]
    return cmd + ["-m", module, *args]

