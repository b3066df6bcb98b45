"""Compiled-graph throughput with and without replay, and Strict Eager.

A 2-layer pre-norm transformer (d=256, 4 heads, causal SDPA, GELU MLP);
one step is forward, a squared-mean loss and backward (gradients set to
None first). Modes, each on a fresh copy of one model:
  - replay: torch.compile(backend="tpu"), calls after the second replayed;
  - compiled, no replay: the same with TORCH_TPU_GRAPH_REPLAY=0 (every call
    dispatches its ops in Fused Eager and flushes once);
  - strict eager: the model uncompiled.
Warm-up steps first (compiles), then `--steps` timed steps ending with one
synchronize. Prints steps/s and the loss of the last step in each mode.

Usage: python benchmarks/graph_replay.py [--steps N] [--batch B] [--seq T]
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


def steps_per_second(model, x, steps, warmup=3):
    params = list(model.parameters())

    def step():
        for p in params:
            p.grad = None
        loss = model(x).square().mean()
        loss.backward()
        return loss

    for _ in range(warmup):
        step()
    torch.tpu.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    torch.tpu.synchronize()
    return steps / (time.perf_counter() - t0), loss.item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--d", type=int, default=256)
    args = ap.parse_args()
    torch.manual_seed(0)
    base = nn.Sequential(Block(args.d, 4), Block(args.d, 4))
    x = torch.randn(args.batch, args.seq, args.d).to("tpu")

    results = {}
    os.environ["TORCH_TPU_GRAPH_REPLAY"] = "1"
    results["compiled, replay"] = steps_per_second(torch.compile(copy.deepcopy(base).to("tpu"), backend="tpu"), x,
                                                   args.steps)
    replays = torch_tpu.compile_stats()["replays"]
    os.environ["TORCH_TPU_GRAPH_REPLAY"] = "0"
    torch._dynamo.reset()
    results["compiled, no replay"] = steps_per_second(torch.compile(copy.deepcopy(base).to("tpu"), backend="tpu"),
                                                      x, args.steps)
    results["strict eager"] = steps_per_second(copy.deepcopy(base).to("tpu"), x, args.steps)
    print(f"2-layer transformer d={args.d}, x {list(x.shape)}, forward+backward, {args.steps} timed steps")
    for name, (sps, loss) in results.items():
        print(f"  {name:20s} {sps:8.1f} steps/s   loss {loss:.6f}")
    print(f"  replay / strict eager: {results['compiled, replay'][0] / results['strict eager'][0]:.2f}x, "
          f"replay / no replay: {results['compiled, replay'][0] / results['compiled, no replay'][0]:.2f}x "
          f"({replays} replayed graph calls)")


if __name__ == "__main__":
    main()
