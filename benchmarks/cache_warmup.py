"""Time to the first training step with an empty compilation cache (cold)
and with the cache the cold run left (warm), each in a fresh process.

The clock runs from just before the model is built to the end of its first
step (the loss read back to the host): building, lowering, compiling or
loading every program the step needs, and running them. Two one-time costs
that no cache can remove are paid before the clock and printed apart: the
runtime start (jax import, XLA client) and PyTorch's own first use of the
same code (the step run once on CPU: lazy imports, autograd and optimizer
set-up; seconds on a busy machine). Whole-process wall times are printed
too.

Usage: python benchmarks/cache_warmup.py [--repeats N]
From Python: measure_warmup(model_code) -> (cold_s, warm_s), where
model_code defines `first_step(device)` (build a model on `device`, run one
training step, read the loss back).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

# The MLP of examples/train_demo.py (SpiralNet) with its Adam step.
MLP_CODE = r"""
import torch, torch.nn as nn, torch.nn.functional as F

def first_step(device):
    torch.manual_seed(0)
    hidden, classes = 128, 3
    model = nn.Sequential(nn.Linear(2, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                          nn.LayerNorm(hidden), nn.Linear(hidden, classes)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 2, generator=g).to(device)
    y = torch.randint(0, classes, (200,), generator=g).to(device)
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()
"""

# Runs in the child: start the runtime, warm PyTorch up on CPU, time
# first_step("tpu"), report.
CHILD = r"""
import json, sys, time
import torch
t0 = time.perf_counter()
torch.tpu.synchronize()  # starts XLA
runtime_s = time.perf_counter() - t0
ns = {}
exec(compile(sys.argv[1], "<model_code>", "exec"), ns)
t1 = time.perf_counter()
ns["first_step"]("cpu")
torch_warmup_s = time.perf_counter() - t1
t2 = time.perf_counter()
ns["first_step"]("tpu")
first_step_s = time.perf_counter() - t2
print("RESULT " + json.dumps({"first_step_s": first_step_s, "runtime_start_s": runtime_s,
                              "torch_warmup_s": torch_warmup_s,
                              **torch.tpu.compile_cache_stats()}))
"""


def _child(model_code: str, cache_dir: str, env: dict | None) -> dict:
    e = dict(os.environ)
    e.pop("TORCH_TPU_PERSISTENT_CACHE", None)
    e.update(env or {})
    e["TORCH_TPU_CACHE_DIR"] = cache_dir
    start = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", CHILD, model_code], capture_output=True, text=True, env=e,
                       timeout=1200)
    wall = time.perf_counter() - start
    if r.returncode != 0:
        raise RuntimeError(f"cache_warmup child failed:\n{r.stderr[-4000:]}")
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")][-1]
    out = json.loads(line[len("RESULT "):])
    out["process_s"] = wall
    return out


def measure_warmup_details(model_code: str = MLP_CODE, env: dict | None = None) -> tuple[dict, dict]:
    """One cold and one warm fresh process on a new temporary cache; returns
    what each reported (first_step_s, process_s, compiles, hits, ...)."""
    cache_dir = tempfile.mkdtemp(prefix="torch_tpu_warmup_")
    try:
        cold = _child(model_code, cache_dir, env)
        warm = _child(model_code, cache_dir, env)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    return cold, warm


def measure_warmup(model_code: str = MLP_CODE, env: dict | None = None) -> tuple[float, float]:
    """(cold_s, warm_s): seconds to the first step with an empty cache and
    with the cache that the cold process filled, each a fresh process."""
    cold, warm = measure_warmup_details(model_code, env)
    return cold["first_step_s"], warm["first_step_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=1, help="cold/warm pairs; the median is reported")
    args = ap.parse_args()
    runs = [measure_warmup_details() for _ in range(args.repeats)]
    runs.sort(key=lambda cw: cw[0]["first_step_s"] / cw[1]["first_step_s"])
    cold, warm = runs[len(runs) // 2]
    for name, r in (("cold", cold), ("warm", warm)):
        print(f"{name}: first step {r['first_step_s']:.3f} s  (process {r['process_s']:.2f} s, runtime start "
              f"{r['runtime_start_s']:.2f} s, PyTorch CPU warm-up {r['torch_warmup_s']:.2f} s; {r['compiles']} XLA compiles {r['compile_seconds']:.2f} s, "
              f"{r['hits']} loaded from disk {r['load_seconds']:.3f} s)")
    print(f"ratio cold/warm, first step: {cold['first_step_s'] / warm['first_step_s']:.1f}x; "
          f"whole process: {cold['process_s'] / warm['process_s']:.1f}x")


if __name__ == "__main__":
    main()
