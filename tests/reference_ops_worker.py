"""One rank of test_reference_ops.py's 2-rank job (dist_utils.run_job):
torch.tpu.ops' collectives (all_gather_dim, reduce_scatter_dim, send/recv,
ragged_all_to_all with its backward) between two processes, each result
against the answer computed on CPU from every rank's data (which every rank
can rebuild from its seed). Exits 0 when every check passed; prints FAIL
lines and exits 1 otherwise."""

import os
import sys

import torch
import torch.distributed as dist

import torch_tpu  # noqa: F401
import torch.tpu.ops as ops

W = int(os.environ["WORLD_SIZE"])
RANK = int(os.environ["RANK"])
FAILS = []


def data(rank, shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(100 + rank)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(0, 64, shape, generator=g, dtype=dtype)


def check(name, got, want):
    got = got.detach().cpu()
    if got.shape != want.shape or not torch.allclose(got.double(), want.double(), atol=1e-5, rtol=1e-5):
        FAILS.append(f"{name}: got {got.shape} {got.flatten()[:6].tolist()}, want {want.shape} "
                     f"{want.flatten()[:6].tolist()}")


def gather_and_scatter():
    every = [data(r, (4, 6)) for r in range(W)]
    mine = every[RANK].to("tpu")
    check("all_gather_dim 0", ops.all_gather_dim(mine, 0), torch.cat(every, 0))
    check("all_gather_dim -1", ops.all_gather_dim(mine, -1), torch.cat(every, 1))
    total = sum(every)
    check("reduce_scatter_dim sum 1", ops.reduce_scatter_dim(mine, 1), total.chunk(W, 1)[RANK])
    check("reduce_scatter_dim max 0", ops.reduce_scatter_dim(mine, 0, reduce_op="max"),
          torch.stack(every).amax(0).chunk(W, 0)[RANK])
    ints = [data(r, (2, 4), torch.int32) for r in range(W)]
    check("reduce_scatter_dim bor", ops.reduce_scatter_dim(ints[RANK].to("tpu"), 1, reduce_op="bor"),
          (ints[0] | ints[1]).chunk(W, 1)[RANK])


def send_recv():
    # Rank 0 sends two tensors in one call, rank 1 receives both.
    sent = [data(7, (3, 2)), data(8, (5,), torch.int64)]
    if RANK == 0:
        ops.send([t.to("tpu") for t in sent], 1, 0).wait()
    else:
        into = [torch.zeros_like(t).to("tpu") for t in sent]
        ops.recv(into, 0, 0).wait()
        for i, (a, b) in enumerate(zip(into, sent)):
            check(f"recv[{i}]", a, b)


def ragged():
    # Rank r sends rows [r, r + 1 + j) of its operand to rank j at row 2 * r
    # of j's output (sizes differ per pair, so the offsets must travel).
    operands = [data(20 + r, (5, 3)) for r in range(W)]
    outputs = [data(30 + r, (6, 3)) for r in range(W)]
    size = lambda src, dst: 1 + dst  # noqa: E731
    send_sizes = torch.tensor([size(RANK, j) for j in range(W)])
    input_offsets = torch.tensor([RANK] * W)
    output_offsets = torch.tensor([2 * RANK] * W)
    recv_sizes = torch.tensor([size(i, RANK) for i in range(W)])
    op_t = operands[RANK].to("tpu").requires_grad_()
    got = ops.ragged_all_to_all(op_t, outputs[RANK].to("tpu"), input_offsets, send_sizes, output_offsets, recv_sizes,
                                dist.group.WORLD.group_name)
    want = outputs[RANK].clone()
    for i in range(W):
        n = size(i, RANK)
        want[2 * i:2 * i + n] = operands[i][i:i + n]
    check("ragged_all_to_all", got, want)
    # Backward: the gradient of what rank j received from me comes back to my rows.
    ups = [data(40 + r, (6, 3)) for r in range(W)]
    got.backward(ups[RANK].to("tpu"))
    grad = torch.zeros(5, 3)
    for j in range(W):
        n = size(RANK, j)
        grad[RANK:RANK + n] += ups[j][2 * RANK:2 * RANK + n]
    check("ragged_all_to_all backward", op_t.grad, grad)


def main():
    dist.init_process_group()
    for step in (gather_and_scatter, send_recv, ragged):
        try:
            step()
        except Exception as e:  # report and go on: the peer may be waiting in the next step
            FAILS.append(f"{step.__name__}: {type(e).__name__}: {e}")
    dist.barrier()
    dist.destroy_process_group()
    for f in FAILS:
        print(f"FAIL rank {RANK}: {f}", flush=True)
    print(f"rank {RANK}: {len(FAILS)} failure(s)", flush=True)
    sys.exit(1 if FAILS else 0)


if __name__ == "__main__":
    main()
