"""`python -m torch_tpu.distributed.launch --nproc-per-node N script.py ...`

Starts N processes on this machine through torchrun (torch.distributed.run),
each owning one device (its tpu:0). Besides torchrun's RANK, LOCAL_RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT, every rank gets TORCH_TPU_TOPOLOGY
(default `Nx1x1`) and the address of jax's coordinator
(TORCH_TPU_COORDINATOR_ADDRESS, MASTER_PORT + 1). `--print-env` prints
what each rank will get and starts nothing. Plain torchrun works as well:
the runtime derives the coordinator from torchrun's variables.
"""

import argparse
import os
import socket
import sys


def free_port_pair():
    """A port p with p and p + 1 free on 127.0.0.1: torch's store on p, jax's
    coordinator on p + 1."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p >= 65535:
            continue
        try:
            with socket.socket() as s2:
                s2.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
    raise RuntimeError("torch_tpu.distributed.launch: no free port pair for the store and the coordinator")


def coordinator_address(master_addr, master_port) -> str:
    """jax's coordinator: beside torch's store, on the next port (the
    runtime's default too: job_from_env in csrc/runtime/xla_runtime.cpp)."""
    return f"{master_addr}:{int(master_port) + 1}"


def rank_env(nproc, master_addr, master_port, topology):
    """The variables each local rank gets."""
    coordinator = coordinator_address(master_addr, master_port)
    return [
        dict(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc),
             MASTER_ADDR=master_addr, MASTER_PORT=str(master_port), TORCH_TPU_TOPOLOGY=topology,
             TORCH_TPU_COORDINATOR_ADDRESS=coordinator)
        for r in range(nproc)
    ]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m torch_tpu.distributed.launch", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1)
    ap.add_argument("--master-addr", "--master_addr", default="127.0.0.1")
    ap.add_argument("--master-port", "--master_port", type=int, default=None)
    ap.add_argument("--topology", default=os.environ.get("TORCH_TPU_TOPOLOGY"),
                    help="chips as XxYxZ (default: Nx1x1)")
    ap.add_argument("--print-env", action="store_true", help="print each rank's variables and exit")
    ap.add_argument("script", nargs="?")
    ap.add_argument("script_args", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    n = args.nproc_per_node
    topology = args.topology or f"{n}x1x1"
    dims = [int(d) for d in topology.replace(",", "x").split("x")]  # the reference writes 2,2,1
    chips = 1
    for d in dims:
        chips *= d
    if chips != n:
        ap.error(f"topology {topology} has {chips} chips for --nproc-per-node {n}")
    port = args.master_port or (29500 if args.print_env else free_port_pair())
    if args.print_env:
        for env in rank_env(n, args.master_addr, port, topology):
            print(" ".join(f"{k}={v}" for k, v in env.items()))
        return 0
    if not args.script:
        ap.error("a script to run is required")
    os.environ["TORCH_TPU_TOPOLOGY"] = topology
    os.environ["TORCH_TPU_COORDINATOR_ADDRESS"] = coordinator_address(args.master_addr, port)
    from torch.distributed.run import main as torchrun

    torchrun(["--nnodes", "1", "--nproc-per-node", str(n), "--master-addr", args.master_addr, "--master-port",
              str(port), args.script, *args.script_args])
    return 0


if __name__ == "__main__":
    sys.exit(main())
