"""XLA:CPU's matrix products against PyTorch's on this CPU, at the small
tutorial GPT's shapes (benchmarks/compile.py --model small: 512 tokens,
d 128, MLP 512, vocabulary 65), in one process, interleaved.

The compiled training step of that model is one XLA program whose YNNPACK
fusions (its dots) are about 60% of its thunk time (time_program.py
--profile). This measures the floor under it: a lone f32 dot through
`jax.jit` (XLA:CPU, precision HIGHEST, which is what an f32 matmul lowers
to) against `torch.mm` on CPU with the same number of threads. The XLA
time includes jax's dispatch of one call, measured as a jitted add of two
one-element arrays and also subtracted (inside a program there is none).
A ratio below 1 is XLA:CPU's dot being slower than PyTorch's CPU kernels,
whatever program we give XLA.
Usage: python benchmarks/xla_cpu_dots.py [--reps 200] [--threads 2]
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

SHAPES = [  # (m, k, n): forward, and the weight / input gradients
    (512, 128, 384),  # qkv projection
    (512, 128, 512),  # MLP up
    (512, 512, 128),  # MLP down; its input gradient
    (512, 128, 128),  # attention output projection
    (128, 512, 128),  # a weight gradient: x^T g, x read transposed
    (512, 128, 65),  # tied head
]


def median_us(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    args = p.parse_args()
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    dot = jax.jit(lambda x, y: jnp.dot(x, y, precision="highest"))
    add, one = jax.jit(lambda x, y: x + y), jnp.ones((1,), jnp.float32)
    dispatch = median_us(lambda: add(one, one).block_until_ready(), args.reps)
    print(f"f32 dots, median of {args.reps} calls; torch on {args.threads} threads, XLA:CPU "
          f"({jax.devices()[0].device_kind}) with its own pool; load average {os.getloadavg()[0]:.1f}; "
          f"jax's dispatch of a call {dispatch:.0f} us")
    print(f"{'m x k x n':>16} {'MFLOP':>7} {'torch us':>9} {'XLA us':>8} {'torch GF/s':>10} {'XLA GF/s':>9} "
          f"{'XLA/torch speed':>15} {'less dispatch':>13}")
    ratios, net_ratios = [], []
    for m, k, n in SHAPES:
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
        ta, tb, ja, jb = torch.from_numpy(a), torch.from_numpy(b), jnp.asarray(a), jnp.asarray(b)
        t_torch, t_xla = [], []
        for _ in range(3):  # interleaved rounds: a burst of other work hits both
            t_torch.append(median_us(lambda: torch.mm(ta, tb), args.reps // 3))
            t_xla.append(median_us(lambda: dot(ja, jb).block_until_ready(), args.reps // 3))
        tt, tx = statistics.median(t_torch), statistics.median(t_xla)
        flops = 2 * m * k * n
        net = max(tx - dispatch, 1.0)
        ratios.append(tt / tx)
        net_ratios.append(tt / net)
        print(f"{f'{m} x {k} x {n}':>16} {flops / 1e6:7.1f} {tt:9.0f} {tx:8.0f} {flops / tt / 1e3:10.0f} "
              f"{flops / tx / 1e3:9.0f} {tt / tx:14.2f}x {tt / net:12.2f}x")
    print(f"median XLA/torch speed {statistics.median(ratios):.2f}x, {statistics.median(net_ratios):.2f}x less "
          f"dispatch (below 1: XLA:CPU's dot is slower)")


if __name__ == "__main__":
    main()
