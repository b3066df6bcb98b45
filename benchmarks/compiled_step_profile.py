"""Where a compiled training step's time goes: the small tutorial GPT
(benchmarks/_gpt2_small.py, 4 layers, d 128, batch 8 x 64, AdamW with
capturable=True) under torch.compile(backend="tpu"), forward + backward and
optimizer step compiled. Prints the step's wall time (each step waited
for), the host's dispatch time per step (steps queued without waiting:
wall and main-thread CPU), then torch.profiler's table over 5 steps, where
each XLA program is a `tpu: ...` range lasting its device time.
On any XLA platform: run it on a GPU or TPU to split host from device time.
Usage: python benchmarks/compiled_step_profile.py [--steps 20]
"""

import argparse
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

import torch_tpu  # noqa: F401  (registers the device where autoload is off)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _gpt2_small as gpt2  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    torch.manual_seed(0)
    model = gpt2.build(4, "sdpa", shape="small").to("tpu")
    idx, tgt = (t.to("tpu") for t in gpt2.batch(8, 64, shape="small"))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, capturable=True)
    loss_fn = torch.compile(lambda i, t: gpt2.loss_fn(model(i), t), backend="tpu")
    opt_step = torch.compile(opt.step, backend="tpu")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(idx, tgt)
        loss.backward()
        opt_step()
        return loss

    for _ in range(6):  # traces, compiles, then chains the replays
        step()
    torch.tpu.synchronize()
    n = args.steps
    start = time.perf_counter()
    for _ in range(n):
        step()
        torch.tpu.synchronize()
    wall = (time.perf_counter() - start) / n
    start, cpu = time.perf_counter(), time.thread_time()
    for _ in range(n):
        step()
    host, host_cpu = (time.perf_counter() - start) / n, (time.thread_time() - cpu) / n
    torch.tpu.synchronize()
    print(f"{torch.tpu.get_device_name()}: step {wall * 1e3:.1f} ms waited for; dispatch alone "
          f"{host * 1e3:.1f} ms wall, {host_cpu * 1e3:.1f} ms main-thread CPU")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(5):
            step()
        torch.tpu.synchronize()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=60))


if __name__ == "__main__":
    main()
