"""Compiled-graph throughput with and without replay, and Strict Eager.

A 2-layer pre-norm transformer (d=256, 4 heads, causal SDPA, GELU MLP);
one step is forward, a squared-mean loss and backward (gradients set to
None first). Modes, each on a fresh copy of one model:
  - replay: torch.compile(backend="tpu"), calls after the second replayed;
  - compiled, no replay: the same with TORCH_TPU_GRAPH_REPLAY=0 (every call
    dispatches its ops in Fused Eager and flushes once);
  - strict eager: the model uncompiled.
Warm-up steps first (compiles, capture), then `--rounds` interleaved rounds
of `--steps` timed steps per mode, each ending with one synchronize (the
machine's load varies). Prints the median steps/s and the last loss per mode.

Usage: python benchmarks/graph_replay.py [--steps N] [--rounds R] [--batch B] [--seq T] [--d D]
"""

import argparse
import copy
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


def make_step(model, x):
    params = list(model.parameters())

    def step():
        for p in params:
            p.grad = None
        loss = model(x).square().mean()
        loss.backward()
        return loss

    return step


def timed(step, steps, replay):
    """(steps per second, process CPU ms per step, last loss) of `steps`
    calls ending with a synchronize. CPU time (all threads, XLA's included)
    is less disturbed by other processes than wall time."""
    os.environ["TORCH_TPU_GRAPH_REPLAY"] = "1" if replay else "0"
    torch.tpu.synchronize()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        loss = step()
    torch.tpu.synchronize()
    t1, c1 = time.perf_counter(), time.process_time()
    return steps / (t1 - t0), (c1 - c0) * 1e3 / steps, loss.item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--d", type=int, default=256)
    args = ap.parse_args()
    torch.manual_seed(0)
    base = nn.Sequential(Block(args.d, 4), Block(args.d, 4))
    x = torch.randn(args.batch, args.seq, args.d).to("tpu")
    # (name, step, replay on): each on its own copy; the two compiled ones
    # are separate Dynamo compilations (separate replay caches).
    modes = [
        ("compiled, replay", make_step(torch.compile(copy.deepcopy(base).to("tpu"), backend="tpu"), x), True),
        ("compiled, no replay", make_step(torch.compile(copy.deepcopy(base).to("tpu"), backend="tpu"), x), False),
        ("strict eager", make_step(copy.deepcopy(base).to("tpu"), x), False),
    ]
    for _, step, replay in modes:  # warm-up: compiles, capture
        timed(step, 3, replay)
    before = torch_tpu.compile_stats()
    # Interleaved rounds (the machine's load changes): median per mode.
    runs = {name: [] for name, _, _ in modes}
    for _ in range(args.rounds):
        for name, step, replay in modes:
            runs[name].append(timed(step, args.steps, replay))
    after = torch_tpu.compile_stats()
    print(f"2-layer transformer d={args.d}, x {list(x.shape)}, forward+backward; "
          f"median of {args.rounds} interleaved rounds of {args.steps} steps")
    med = {}
    for name, r in runs.items():
        sps = sorted(v for v, _, _ in r)
        cpu = sorted(c for _, c, _ in r)[len(r) // 2]
        med[name] = sps[len(sps) // 2]
        print(f"  {name:20s} {med[name]:8.1f} steps/s  (min {sps[0]:.1f}, max {sps[-1]:.1f})  "
              f"{cpu:6.2f} CPU ms/step   loss {r[-1][2]:.6f}")
    print(f"  replay / strict eager: {med['compiled, replay'] / med['strict eager']:.2f}x, "
          f"replay / no replay: {med['compiled, replay'] / med['compiled, no replay']:.2f}x; "
          f"timed part: {after['replays'] - before['replays']} replayed graph calls, "
          f"{after['xla_compiles'] - before['xla_compiles']} XLA compiles")


if __name__ == "__main__":
    main()
