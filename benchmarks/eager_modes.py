"""Training-step throughput of Strict, Fused and Debug Eager, in one run.

Two models, small enough that XLA:CPU is not compute-bound (so the figure
shows dispatch cost, which is what the modes change):
  - mlp: 3 linear layers with GELU, AdamW;
  - gpt: a GPT-style decoder (token + position embeddings, N blocks of causal
    self-attention and MLP with pre-LayerNorm, a vocabulary head), AdamW.
Each mode trains a fresh model with the same seed; a step is zero_grad,
forward, cross-entropy, backward, optimizer step (in fused mode the step
ends at the optimizer step, which flushes). The timed loop ends with one
synchronize. Final losses are compared across modes.

The cold/warm start-up part (persistent compilation cache) lives in
benchmarks/cache_warmup.py when present; it is run at the end (hook below).

Usage: python benchmarks/eager_modes.py [--steps N] [--layers L] [--models mlp,gpt]
"""

import argparse
import importlib.util
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        mask = torch.ones(t, t, device=x.device, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=64, d=32, heads=4, layers=2, ctx=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def make_mlp(args):
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 10))
    x = torch.randn(32, 64)
    y = torch.randint(0, 10, (32,))
    return model, x, y, lambda out, y: F.cross_entropy(out, y)


def make_gpt(args):
    model = GPT(layers=args.layers)
    idx = torch.randint(0, 64, (4, 16))
    tgt = torch.randint(0, 64, (4, 16))
    return model, idx, tgt, lambda out, y: F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def run(mode, make, args):
    """Returns (steps/s, final loss, programs compiled while timing, warm-up
    seconds: the first steps, which compile every program)."""
    torch.manual_seed(0)
    model, x, y, loss_fn = make(args)
    model = model.to("tpu")
    x, y = x.to("tpu"), y.to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    with torch_tpu.eager_mode(mode):
        start = time.perf_counter()
        for _ in range(args.warmup):  # compiles every program (and the fused one)
            step()
        torch.tpu.synchronize()
        warm = time.perf_counter() - start
        compiles = torch_tpu._C._compile_count()
        start = time.perf_counter()
        for _ in range(args.steps):
            loss = step()
        torch.tpu.synchronize()
        elapsed = time.perf_counter() - start
        compiles = torch_tpu._C._compile_count() - compiles
        final = loss.item()
    return args.steps / elapsed, final, compiles, warm


def cache_warmup_hook():
    """Cold/warm start-up with the persistent compilation cache, from
    benchmarks/cache_warmup.py's `measure_warmup(model_code, env)`: seconds to
    the first training step in a fresh process with an empty cache (cold) and
    with the cache it filled (warm), in Strict and in Fused Eager."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache_warmup.py")
    if not os.path.exists(path):
        print("\ncache warm-up: benchmarks/cache_warmup.py not present (skipped)")
        return
    spec = importlib.util.spec_from_file_location("cache_warmup", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    print("\ncache warm-up (benchmarks/cache_warmup.py, its MLP, fresh processes):")
    for mode, env in (("strict", {"TPU_DEFER_AND_FUSE": "0"}), ("fused", {"TPU_DEFER_AND_FUSE": "1"})):
        cold, warm = mod.measure_warmup(env=env)
        print(f"  {mode:7s} first step: cold {cold:.3f} s, warm {warm:.3f} s ({cold / warm:.1f}x)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--models", default="mlp,gpt")
    p.add_argument("--no-cache-warmup", action="store_true")
    args = p.parse_args()
    print(f"platform: {torch.tpu.platform()}  steps: {args.steps} (after {args.warmup} warm-up steps)")
    print("modes run in this order; per-op programs compiled by strict are reused, so fused warm-up is mostly its fused compile")
    makers = {"mlp": make_mlp, "gpt": make_gpt}
    for name in args.models.split(","):
        res = {m: run(m, makers[name], args) for m in ("strict", "fused", "debug")}
        label = name if name == "mlp" else f"gpt ({args.layers} layers)"
        print(f"\n{label}")
        for m, (sps, loss, compiles, warm) in res.items():
            ratio = sps / res["strict"][0]
            print(f"  {m:7s} {sps:8.2f} steps/s  {ratio:5.2f}x strict  final loss {loss:.6f}  "
                  f"compiles while timed: {compiles}  warm-up {warm:.2f} s")
        diff = abs(res["fused"][1] - res["strict"][1])
        print(f"  |fused - strict| final loss: {diff:.2e}")
    if not args.no_cache_warmup:
        cache_warmup_hook()


if __name__ == "__main__":
    sys.exit(main())
