"""torch's scan on tpu as one stablehlo.while against the unrolled dense kernel
(docs/design.md, "Loops as one stablehlo.while"): a compiled RNN (tanh cell,
batch 8, input 64, hidden 128) over L steps, first call (trace + XLA compile,
persistent cache off) and steady-state call, each configuration in its own
process (`TORCH_TPU_LOOPS=0` for the unrolled form), ratios within the run.
Usage: python benchmarks/scan_loop.py [--lengths 64,512]
"""

import argparse
import json
import os
import subprocess
import sys
import time


def worker(length: int) -> dict:
    import torch
    from torch._higher_order_ops.scan import scan

    import torch_tpu

    g = torch.Generator().manual_seed(0)
    xs = torch.randn(length, 8, 64, generator=g).to("tpu")
    h0 = torch.zeros(8, 128, device="tpu")
    w = (torch.randn(128, 128, generator=g) * 0.1).to("tpu")
    u = (torch.randn(64, 128, generator=g) * 0.1).to("tpu")

    def rnn(xs, h0):
        def cell(h, x):
            h2 = torch.tanh(h @ w + x @ u)
            return h2, h2.sum(-1)

        return scan(cell, h0, xs)

    f = torch.compile(rnn, backend="tpu", fullgraph=True)
    start = time.perf_counter()
    out = f(xs, h0)
    torch.tpu.synchronize()
    first = time.perf_counter() - start
    times = []
    for _ in range(11):
        start = time.perf_counter()
        out = f(xs, h0)
        torch.tpu.synchronize()
        times.append(time.perf_counter() - start)
    times.sort()
    return {"first_s": first, "step_s": times[len(times) // 2], "checksum": out[0].sum().item(),
            "xla_compiles": torch_tpu.compile_stats()["xla_compiles"]}


def run(length: int, loops: bool) -> dict:
    env = dict(os.environ, TORCH_TPU_LOOPS="1" if loops else "0", TORCH_TPU_PERSISTENT_CACHE="0")
    out = subprocess.run([sys.executable, __file__, "--worker", str(length)], env=env, capture_output=True,
                         text=True, timeout=900, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lengths", default="64,512")
    p.add_argument("--worker", type=int)
    args = p.parse_args()
    if args.worker is not None:
        print(json.dumps(worker(args.worker)))
        return
    print("| steps | first call: loop / unrolled (s) | ratio | step: loop / unrolled (ms) | ratio | XLA compiles |")
    print("|---|---|---|---|---|---|")
    for length in (int(v) for v in args.lengths.split(",")):
        loop, unrolled = run(length, True), run(length, False)
        assert abs(loop["checksum"] - unrolled["checksum"]) <= 1e-3 * max(1.0, abs(unrolled["checksum"]))
        print(f"| {length} | {loop['first_s']:.2f} / {unrolled['first_s']:.2f} | "
              f"{unrolled['first_s'] / loop['first_s']:.1f}x | {loop['step_s'] * 1e3:.2f} / "
              f"{unrolled['step_s'] * 1e3:.2f} | {unrolled['step_s'] / loop['step_s']:.1f}x | "
              f"{loop['xla_compiles']} / {unrolled['xla_compiles']} |")


if __name__ == "__main__":
    main()
