"""Collective bandwidth: tpu_dist (XLA's collectives) against Gloo on CPU tensors.

    python -m torch_tpu.distributed.launch --nproc-per-node 2 benchmarks/collectives.py [--max-mib 64]
        [--min-mib 1] [--ops all_reduce,all_gather] [--skip-ddp]

Rank 0 prints one line per (collective, size): the median time of a few
calls and the bus bandwidth (NCCL's convention: all_reduce moves
2(W-1)/W of the buffer per rank, all_gather and reduce_scatter (W-1)/W),
for tpu_dist on tpu tensors and Gloo on cpu tensors, and their ratio; and
the time of the same collective as a plain jax program on the same devices
in the same processes (`jax.shard_map` of `psum` / `all_gather` /
`psum_scatter`, jit-compiled: XLA's own collective with jax's dispatch,
the floor under tpu_dist's). The three run interleaved, one call of each
per repetition, so they share the machine's load; the load average is
printed before and after.
Then the step time of DDP (an MLP of --ddp-width, SGD) with W processes
against one process training alone on the same per-rank batch.
TORCH_TPU_DIST_CHECK=0 measures tpu_dist without its rank check (the tiny
all-gather inside each collective's program that catches mismatched ranks).
The DDP line also gives the W-process step without the gradient all-reduce
(`no_sync`) and one all-reduce of the gradients' bytes alone.

Profiling one collective end to end (docs/design.md, "Where a collective's
time goes"): run a loop of it on 2 ranks and attach
`perf record -g -p <rank 0's pid> -- sleep 4` once it is warm; XLA:CPU's
`GlooCommunicator`, gloo's TCP transport, the kernel's page faults and
Python all show with their callers (`perf report --no-children`).
"""

import argparse
import datetime
import os
import statistics
import time

import torch
import torch.distributed as dist

import torch_tpu  # noqa: F401


def timed(fn, reps):
    return timed_each({"": fn}, reps)[0][""]


def timed_each(fns, reps):
    """Median wall time and CPU time (this process, all its threads) of each
    of `fns`, called in turn once per repetition. The CPU time is the work
    a call makes this process do (ours, XLA's, gloo's; waiting in a
    blocking read costs none), which the machine's load hardly changes."""
    for fn in fns.values():  # compile / warm up
        fn()
        fn()
    ts = {k: [] for k in fns}
    cs = {k: [] for k in fns}
    for _ in range(reps):
        for k, fn in fns.items():
            dist.barrier(device_ids=None)
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            ts[k].append(time.perf_counter() - t0)
            cs[k].append(time.process_time() - c0)
    return ({k: statistics.median(v) for k, v in ts.items()}, {k: statistics.median(v) for k, v in cs.items()})


def collective(name, n, W, dev):
    """A function running one call of torch.distributed's collective on
    `dev` tensors (tpu: then waiting for its result)."""
    x = torch.ones(n, device=dev)
    if name == "all_reduce":
        def run():
            dist.all_reduce(x)
    elif name == "all_gather":
        out = torch.empty(n * W, device=dev)

        def run():
            dist.all_gather_into_tensor(out, x)
    else:
        big = torch.ones(n * W, device=dev)

        def run():
            dist.reduce_scatter_tensor(x, big)

    def fn():
        run()
        if dev == "tpu":
            torch.tpu.synchronize()
    return fn


def jax_collective(name, n, W):
    """The collective as a plain jax program over the job's W devices: a
    function running one call (the result ready)."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), ("x",))
    body = {"all_reduce": lambda a: jax.lax.psum(a, "x"),
            "all_gather": lambda a: jax.lax.all_gather(a, "x", tiled=True),
            "reduce_scatter": lambda a: jax.lax.psum_scatter(a, "x", tiled=True)}[name]
    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    local = n * W if name == "reduce_scatter" else n
    x = jax.make_array_from_single_device_arrays(
        (local * W,), NamedSharding(mesh, P("x")), [jax.device_put(np.ones(local, np.float32), jax.local_devices()[0])])
    return lambda: f(x).block_until_ready()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-mib", type=int, default=64)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--ddp-width", type=int, default=512)
    ap.add_argument("--ddp-steps", type=int, default=10)
    ap.add_argument("--skip-bandwidth", action="store_true")
    ap.add_argument("--ops", default="all_reduce,all_gather,reduce_scatter", help="comma-separated collectives")
    ap.add_argument("--min-mib", type=float, default=0, help="smallest size measured (default 1 KiB)")
    ap.add_argument("--skip-ddp", action="store_true")
    args = ap.parse_args()
    factors = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1}  # times (W - 1) / W
    ops = [] if args.skip_bandwidth else args.ops.split(",")
    for name in ops:
        if name not in factors:
            ap.error(f"--ops: unknown collective {name!r} (choose from {', '.join(factors)})")
    dist.init_process_group("cpu:gloo,tpu:tpu_dist", timeout=datetime.timedelta(seconds=300))
    W, rank = dist.get_world_size(), dist.get_rank()
    sizes = []
    b = 1024
    while b <= args.max_mib << 20:
        if b >= args.min_mib * (1 << 20):
            sizes.append(b)
        b *= 4
    if rank == 0:
        print(f"load average {os.getloadavg()[0]:.1f} at the start", flush=True)
        print(f"{'collective':<15}{'bytes':>10}{'tpu_dist ms':>13}{'gloo ms':>10}{'tpu GB/s':>10}{'gloo GB/s':>10}"
              f"{'ratio':>7}{'jax ms':>9}{'jax/gloo':>9}   CPU ms a call: tpu_dist / gloo / jax")
    for name in ops:
        factor = factors[name] * (W - 1) / W
        for nbytes in sizes:
            n = nbytes // 4
            fns = {dev: collective(name, n, W, dev) for dev in ("tpu", "cpu")}
            fns["jax"] = jax_collective(name, n, W)
            res, cpu = timed_each(fns, args.reps)
            if rank == 0:
                bw = {d: factor * nbytes / t / 1e9 for d, t in res.items()}
                print(f"{name:<15}{nbytes:>10}{res['tpu'] * 1e3:>13.3f}{res['cpu'] * 1e3:>10.3f}"
                      f"{bw['tpu']:>10.3f}{bw['cpu']:>10.3f}{bw['tpu'] / bw['cpu']:>7.2f}"
                      f"{res['jax'] * 1e3:>9.3f}{bw['jax'] / bw['cpu']:>9.2f}   {cpu['tpu'] * 1e3:.2f} / "
                      f"{cpu['cpu'] * 1e3:.2f} / {cpu['jax'] * 1e3:.2f}", flush=True)
    if rank == 0:
        print(f"load average {os.getloadavg()[0]:.1f} at the end of the bandwidth table", flush=True)
    if not args.skip_ddp:
        ddp_step_time(args, W, rank)
    dist.destroy_process_group()


def ddp_step_time(args, W, rank):
    """Median step (forward, backward, SGD, synchronize) of one process alone
    and of DDP over W processes, each on a per-rank batch of 32."""
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    def model():
        torch.manual_seed(0)
        w = args.ddp_width
        return nn.Sequential(nn.Linear(w, w), nn.GELU(), nn.Linear(w, w), nn.GELU(), nn.Linear(w, w)).to("tpu")

    x = torch.randn(32, args.ddp_width, device="tpu")

    def run(net, sync=True):
        opt = torch.optim.SGD(net.parameters(), lr=0.01)

        def step():
            opt.zero_grad()
            if sync:
                net(x).square().mean().backward()
            else:
                with net.no_sync():  # DDP without its gradient all-reduce
                    net(x).square().mean().backward()
            opt.step()
            torch.tpu.synchronize()

        for _ in range(3):
            step()
        ts = []
        for _ in range(args.ddp_steps):
            t0 = time.perf_counter()
            step()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts)

    alone = run(model()) if rank == 0 else None  # the other ranks wait at the barrier
    dist.barrier()
    ddp = run(DDP(model()))
    # where the W-process step's time goes: the same step without the
    # gradient all-reduce (W processes sharing the machine), and the
    # all-reduce of the gradients' bytes alone (DDP's one bucket here)
    unsynced = run(DDP(model()), sync=False)
    n = sum(p.numel() for p in model().parameters())
    grads = torch.ones(n, device="tpu")

    def reduce_grads():
        dist.all_reduce(grads)
        torch.tpu.synchronize()

    reduce = timed(reduce_grads, args.ddp_steps)
    if rank == 0:
        print(f"DDP step, MLP of {n * 4 / 2**20:.1f} MiB of parameters, batch 32 per rank: 1 process "
              f"{alone * 1e3:.1f} ms, {W} processes {ddp * 1e3:.1f} ms ({ddp / alone:.2f}x the time for "
              f"{W}x the samples); {W} processes without the gradient all-reduce (no_sync) {unsynced * 1e3:.1f} ms; "
              f"one all_reduce of the {n * 4 / 2**20:.1f} MiB of gradients {reduce * 1e3:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
