"""Steady-state latency of small eager ops on tpu, against the floor of XLA
dispatch (the same computation jitted in jax, run in a separate process on
the same XLA platform) and against PyTorch on CPU, all in one run.

Each figure is the mean time per call over a loop of calls followed by one
synchronisation, i.e. the throughput of back-to-back dispatch. The `_sync`
cases wait for every call (an op then torch.tpu.synchronize(), against
jax's op then block_until_ready()): the latency of one op. `sync_idle` is
torch.tpu.synchronize() with nothing left to wait for, against jax's
block_until_ready() on a computed array: the fixed cost of a sync.
Usage: python benchmarks/eager_overhead.py [--iters N] [--baseline TREE]

--cpu-time times the main thread's CPU time (time.thread_time) instead of
the wall clock, in every process: on a machine shared with other work that
preempts the benchmark, this is the dispatch cost itself (what the host
spends per op), while the wall clock also counts the time other processes
ran. (It leaves out time spent waiting, so the _sync cases then count only
the host's side of a sync.)

--baseline TREE also times the tpu cases with another checkout's torch_tpu
(e.g. one built before a change) in a fresh process, interleaved with this
one's, to show what a change to the per-op path costs. The profiler ranges
(csrc/runtime/profiling.h) were checked this way: with no profiler on they
cost one thread-local check per program.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CASES = ["add_1000", "matmul_64", "chain_10", "add_1000_sync", "matmul_64_sync", "sync_idle"]

JAX_SCRIPT = r"""
import json, os, sys, time
import numpy as np
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
iters = int(sys.argv[1])
a = jnp.asarray(np.random.rand(1000).astype(np.float32))
b = jnp.asarray(np.random.rand(1000).astype(np.float32))
m = jnp.asarray(np.random.rand(64, 64).astype(np.float32))
def chain(x):
    for i in range(10):
        x = x * 1.001 + 0.5 if i % 2 == 0 else jnp.tanh(x)
    return x
add = jax.jit(lambda x, y: x + y)
mm = jax.jit(lambda x, y: x @ y)
ready = add(a, b).block_until_ready()
fns = {
    "add_1000": (add, (a, b)),
    "matmul_64": (mm, (m, m)),
    "chain_10": (jax.jit(chain), (a,)),
    "add_1000_sync": (lambda x, y: add(x, y).block_until_ready(), (a, b)),
    "matmul_64_sync": (lambda x, y: mm(x, y).block_until_ready(), (m, m)),
    "sync_idle": (lambda x: x.block_until_ready(), (ready,)),
}
# Ten separately dispatched jitted ops: what an op-by-op eager backend pays at best.
add1 = jax.jit(lambda x: x * 1.001 + 0.5)
tanh = jax.jit(jnp.tanh)
def chain_eager(x):
    for i in range(10):
        x = add1(x) if i % 2 == 0 else tanh(x)
    return x
out = {}
for name, (f, args) in list(fns.items()) + [("chain_10_per_op", (chain_eager, (a,)))]:
    for _ in range(50):
        r = f(*args)
    r.block_until_ready()
    clock = time.thread_time if os.environ.get("EAGER_OVERHEAD_CLOCK") == "thread" else time.perf_counter
    t = clock()
    for _ in range(iters):
        r = f(*args)
    r.block_until_ready()
    out[name] = (clock() - t) / iters
print(json.dumps(out))
"""


def torch_cases(device):
    import torch

    g = torch.Generator().manual_seed(0)
    a = torch.rand(1000, generator=g).to(device)
    b = torch.rand(1000, generator=g).to(device)
    m = torch.rand(64, 64, generator=g).to(device)

    def chain(x):
        for i in range(10):
            x = x * 1.001 + 0.5 if i % 2 == 0 else torch.tanh(x)
        return x

    sync = torch.tpu.synchronize if device == "tpu" else (lambda: None)

    def synced(r):
        sync()
        return r

    return {
        "add_1000": (lambda: a + b),
        "matmul_64": (lambda: m @ m),
        "chain_10": (lambda: chain(a)),
        "add_1000_sync": (lambda: synced(a + b)),
        "matmul_64_sync": (lambda: synced(m @ m)),
        "sync_idle": (lambda: synced(a)),
    }


def time_torch(device, iters):
    import torch

    sync = torch.tpu.synchronize if device == "tpu" else (lambda: None)
    clock = time.thread_time if os.environ.get("EAGER_OVERHEAD_CLOCK") == "thread" else time.perf_counter
    out = {}
    for name, f in torch_cases(device).items():
        for _ in range(50):
            r = f()
        sync()
        t = clock()
        for _ in range(iters):
            r = f()
        sync()
        if device == "tpu":
            r.cpu()
        out[name] = (clock() - t) / iters
    return out


TPU_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
import torch, torch_tpu
assert torch_tpu.__file__.startswith(sys.argv[3]), torch_tpu.__file__
from eager_overhead import time_torch
print(json.dumps(time_torch("tpu", int(sys.argv[1]))))
"""


def tpu_in_tree(tree, iters):
    """The tpu cases timed in a fresh process importing torch_tpu from `tree`."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    here = os.path.dirname(os.path.abspath(__file__))
    run = subprocess.run([sys.executable, "-c", TPU_SCRIPT, str(iters), here, os.path.abspath(tree)],
                         capture_output=True, text=True, env=env, cwd=os.path.abspath(tree))
    if run.returncode != 0:
        sys.exit(f"timing {tree} failed:\n{run.stderr}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def compare_baseline(baseline, iters, rounds=3):
    this_tree = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    mine, base = [], []
    for _ in range(rounds):  # interleaved: the machine's load drifts
        mine.append(tpu_in_tree(this_tree, iters))
        base.append(tpu_in_tree(baseline, iters))
    print(f"\nthis tree against {baseline} (median of {rounds} interleaved fresh processes)")
    print(f"{'case':<16}{'this us':>10}{'baseline us':>13}{'ratio':>8}")
    for name in CASES:
        a = statistics.median(r[name] for r in mine)
        b = statistics.median(r[name] for r in base)
        print(f"{name:<16}{a * 1e6:>10.1f}{b * 1e6:>13.1f}{a / b:>8.2f}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3,
                   help="jax and tpu timings alternate this many times (medians): the machine's load drifts")
    p.add_argument("--cpu-time", action="store_true", help="time the main thread's CPU time, not the wall clock")
    p.add_argument("--baseline", help="another checkout whose torch_tpu to time the tpu cases against")
    args = p.parse_args()
    if args.cpu_time:
        os.environ["EAGER_OVERHEAD_CLOCK"] = "thread"  # this process and the ones it starts

    import torch

    jax_runs, tpu_runs = [], []
    for _ in range(args.rounds):
        jax_run = subprocess.run([sys.executable, "-c", JAX_SCRIPT, str(args.iters)], capture_output=True, text=True)
        if jax_run.returncode != 0:
            sys.exit(f"jax reference failed:\n{jax_run.stderr}")
        jax_runs.append(json.loads(jax_run.stdout.strip().splitlines()[-1]))
        tpu_runs.append(time_torch("tpu", args.iters))
    jax_t = {k: statistics.median(r[k] for r in jax_runs) for k in jax_runs[0]}
    tpu_t = {k: statistics.median(r[k] for r in tpu_runs) for k in tpu_runs[0]}
    cpu_t = time_torch("cpu", args.iters)
    print(f"platform: {torch.tpu.get_device_name()}; {args.iters} calls per case, "
          f"median of {args.rounds} alternating jax/tpu rounds; "
          f"{'main-thread CPU time' if args.cpu_time else 'wall clock'}\n")
    print(f"{'case':<16}{'tpu us':>10}{'jax jit us':>12}{'torch cpu us':>14}{'tpu/jax':>10}{'tpu/cpu':>10}")
    for name in CASES:
        print(f"{name:<16}{tpu_t[name] * 1e6:>10.1f}{jax_t[name] * 1e6:>12.1f}{cpu_t[name] * 1e6:>14.1f}"
              f"{tpu_t[name] / jax_t[name]:>10.2f}{tpu_t[name] / max(cpu_t[name], 1e-9):>10.2f}")
    per_op = jax_t["chain_10_per_op"]
    print(f"\nchain_10 against ten separately jitted jax ops ({per_op * 1e6:.1f} us): "
          f"tpu/jax = {tpu_t['chain_10'] / per_op:.2f}")
    if args.baseline:
        compare_baseline(args.baseline, args.iters)


if __name__ == "__main__":
    main()
