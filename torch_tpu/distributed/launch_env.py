"""`torch.tpu.distributed.set_tpu_launch_env(nnodes, nproc_per_node)`, the
reference backend's way to prepare a job before a launcher starts its
workers, and `python -m torch.tpu.distributed`, which prints what it sets.

Called in the launching process, before torchrun or
`torch.multiprocessing.spawn`, it writes the variables every worker
inherits: the rendezvous (`MASTER_ADDR`, `MASTER_PORT`; kept when already
set, so the nodes of a job agree), `WORLD_SIZE` and `LOCAL_WORLD_SIZE`,
jax's coordinator (`TORCH_TPU_COORDINATOR_ADDRESS`, `MASTER_PORT` + 1) and
`TORCH_TPU_TOPOLOGY`. Each worker's rank then comes from torchrun's `RANK`
or from `init_process_group(rank=...)` (torch_tpu.distributed.join_job).
The reference also sets `TORCH_TPU_SLICEBUILDER_ADDRESSES`, one address per
rank for its own slice builder; here jax's coordinator forms the job, so
there is nothing to put there and it is not set.
"""

from __future__ import annotations

import argparse
import os

from .launch import coordinator_address, free_port_pair


def launch_env(nnodes: int = 1, nproc_per_node: int = 1, environ=None) -> dict[str, str]:
    """The variables set_tpu_launch_env would set, from `environ` (os.environ)."""
    environ = os.environ if environ is None else environ
    if nnodes < 1 or nproc_per_node < 1:
        raise ValueError(f"set_tpu_launch_env: nnodes={nnodes} and nproc_per_node={nproc_per_node} must be >= 1")
    world = nnodes * nproc_per_node
    addr = environ.get("MASTER_ADDR") or "127.0.0.1"
    # One machine: a free pair (the store's port and the coordinator's). Several:
    # every node must compute the same port, so torchrun's default.
    port = int(environ.get("MASTER_PORT") or (free_port_pair() if nnodes == 1 else 29500))
    return {
        "MASTER_ADDR": addr,
        "MASTER_PORT": str(port),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(nproc_per_node),
        "TORCH_TPU_COORDINATOR_ADDRESS": environ.get("TORCH_TPU_COORDINATOR_ADDRESS") or coordinator_address(addr, port),
        "TORCH_TPU_TOPOLOGY": environ.get("TORCH_TPU_TOPOLOGY") or f"{world}x1x1",
    }


def set_tpu_launch_env(nnodes: int = 1, nproc_per_node: int = 1) -> dict[str, str]:
    """Writes the job's variables into os.environ (see above) and returns them."""
    env = launch_env(nnodes, nproc_per_node)
    os.environ.update(env)
    return env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m torch.tpu.distributed",
                                 description="Prints the variables set_tpu_launch_env sets.")
    ap.add_argument("--nnodes", type=int, default=1)
    ap.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1)
    args = ap.parse_args(argv)
    for key, value in launch_env(args.nnodes, args.nproc_per_node).items():
        print(f"{key}={value}")
    return 0
