"""A CUDA training script launched by torch.multiprocessing.spawn (as
pytorch/examples' DDP tutorial, multigpu.py), with "cuda" changed to "tpu":
no torchrun variables; each worker gets its rank as an argument, calls
set_device(rank) before init_process_group(backend="nccl", rank=...,
world_size=...). DDP trains 3 steps; both ranks must end at the weights of
one CPU process trained on the global batch (1e-5). argv: port, then "env"
(MASTER_ADDR/MASTER_PORT set by the script), "tcp" (init_method
tcp://host:port, no MASTER_* variables) or "reference" (the reference
backend's torch.tpu.distributed.set_tpu_launch_env in the parent, which
sets them). Prints "spawned job ok"."""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD = 2


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def batches(world, n=3, per_rank=4):
    g = torch.Generator().manual_seed(5)
    return [(torch.randn(world * per_rank, 8, generator=g), torch.randn(world * per_rank, 1, generator=g))
            for _ in range(n)]


def worker(rank, port, how):
    torch.tpu.set_device(rank)  # was torch.cuda.set_device(rank)
    if how == "env":
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group(backend="nccl", rank=rank, world_size=WORLD)
    elif how == "reference":
        assert os.environ["MASTER_PORT"] == str(port) and os.environ["LOCAL_WORLD_SIZE"] == str(WORLD)
        dist.init_process_group(rank=rank, world_size=WORLD)
    else:
        dist.init_process_group(backend="nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    assert dist.get_rank() == rank and dist.get_world_size() == WORLD
    net = DDP(model().to(rank), device_ids=[rank])
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in batches(WORLD):
        mine = slice(rank * 4, (rank + 1) * 4)
        opt.zero_grad()
        F.mse_loss(net(x[mine].to(rank)), y[mine].to(rank)).backward()
        opt.step()
    ref = model()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for x, y in batches(WORLD):
        ref_opt.zero_grad()
        F.mse_loss(ref(x), y).backward()
        ref_opt.step()
    for p, q in zip(net.module.parameters(), ref.parameters()):
        assert p.device == torch.device("tpu:0"), p.device
        diff = (p.detach().cpu() - q.detach()).abs().max().item()
        assert diff <= 1e-5, f"rank {rank}: parameters {diff} away from one CPU process"
    t = torch.full((3,), float(rank + 1), device="tpu")
    dist.all_reduce(t)
    assert t.cpu().tolist() == [3.0] * 3, t
    dist.destroy_process_group()


if __name__ == "__main__":
    if sys.argv[2] == "reference":
        os.environ["MASTER_PORT"] = sys.argv[1]  # kept by set_tpu_launch_env (the test's free port)
        torch.tpu.distributed.set_tpu_launch_env(nnodes=1, nproc_per_node=WORLD)
    mp.spawn(worker, args=(int(sys.argv[1]), sys.argv[2]), nprocs=WORLD)
    print("spawned job ok")
