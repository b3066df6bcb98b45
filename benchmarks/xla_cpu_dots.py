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
whatever program we give XLA. The last line times the step's distinct
products together: one program against torch one after another, where
XLA:CPU's thunk executor runs independent dots side by side.
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

STEP_DOTS = [  # (lhs, rhs, lhs read transposed, rhs read transposed): every distinct product of the training step
    ((512, 128), (384, 128), False, True),
    ((32, 64, 32), (32, 32, 64), False, False),
    ((32, 64, 64), (32, 64, 32), False, False),
    ((512, 128), (128, 128), False, True),
    ((512, 128), (512, 128), False, True),
    ((512, 512), (128, 512), False, True),
    ((512, 128), (65, 128), False, True),
    ((512, 65), (512, 128), True, False),
    ((512, 65), (65, 128), False, False),
    ((512, 128), (128, 512), False, False),
    ((512, 128), (512, 512), True, False),
    ((512, 512), (512, 128), False, False),
    ((512, 512), (512, 128), True, False),
    ((512, 128), (128, 128), False, False),
    ((512, 128), (512, 128), True, False),
    ((32, 64, 64), (32, 64, 32), True, False),
    ((32, 64, 32), (32, 64, 32), False, True),
    ((32, 64, 32), (32, 64, 64), True, False),
    ((32, 64, 64), (32, 32, 64), False, True),
    ((512, 384), (384, 128), False, False),
    ((512, 384), (512, 128), True, False),
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
    step_products(args, jax, jnp, np, torch)


def step_products(args, jax, jnp, np, torch):
    """The training step's distinct products together: one jitted program
    holding all of them (XLA may run independent dots side by side on its
    threads, as it does inside the step) against the same products one
    after another in torch, transposed operands read as views in both."""
    rng = np.random.default_rng(0)
    pairs = [(rng.standard_normal(a, np.float32), rng.standard_normal(b, np.float32)) for a, b, _, _ in STEP_DOTS]

    def products(xs):
        out = []
        for (x, y), (_, _, ta, tb) in zip(xs, STEP_DOTS):
            out.append(jnp.matmul(jnp.swapaxes(x, -1, -2) if ta else x, jnp.swapaxes(y, -1, -2) if tb else y,
                                  precision="highest"))
        return out

    program = jax.jit(products)
    jpairs = [(jnp.asarray(x), jnp.asarray(y)) for x, y in pairs]
    tpairs = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in pairs]

    def in_torch():
        return [torch.matmul(x.transpose(-1, -2) if ta else x, y.transpose(-1, -2) if tb else y)
                for (x, y), (_, _, ta, tb) in zip(tpairs, STEP_DOTS)]

    t_torch, t_xla = [], []
    for _ in range(3):
        t_torch.append(median_us(in_torch, args.reps // 3))
        t_xla.append(median_us(lambda: jax.block_until_ready(program(jpairs)), args.reps // 3))
    tt, tx = statistics.median(t_torch), statistics.median(t_xla)
    print(f"the step's {len(STEP_DOTS)} distinct products: torch one after another {tt:.0f} us, "
          f"XLA:CPU in one program {tx:.0f} us: XLA/torch speed {tt / tx:.2f}x")


if __name__ == "__main__":
    main()
