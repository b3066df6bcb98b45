"""Host memory on XLA:CPU (docs/design.md, "Host memory on XLA:CPU"): a training
step's wall time and page faults with glibc's malloc as it comes (default),
with freed memory kept on one arena (TORCH_TPU_KEEP_HOST_MEMORY=1,
runtime/host_allocator.cpp) and with transparent huge pages for malloc's
large blocks (GLIBC_TUNABLES=glibc.malloc.hugetlb=1), in the same run.

Configurations, each in its own process: the model's training step
(benchmarks/_compile_worker.py's: zero_grad, forward + cross-entropy,
backward, AdamW) in Strict Eager,
compiled with one program per step, and compiled with three programs
(TORCH_TPU_REPLAY_CHAIN=0). Each runs 6 warm-up steps, then `--steps`
steps closed by a sync; printed: the median ms a step and minor page faults
a step (resource.getrusage), and each setting's speed-up over the default.
Usage: python benchmarks/host_memory.py [--model gpt2|small] [--steps 8]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = {"strict": {}, "compiled": {}, "compiled3": {"TORCH_TPU_REPLAY_CHAIN": "0"}}
SETTINGS = {"default": {}, "keep": {"TORCH_TPU_KEEP_HOST_MEMORY": "1"},
            "hugetlb": {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}}


def worker(kind, model, steps):
    import resource
    import time

    sys.path.insert(0, HERE)
    import _compile_worker

    # compile.py's training step for the kind (compiled3: the replays are
    # not chained because CONFIGS sets TORCH_TPU_REPLAY_CHAIN=0).
    batch = (4, 64) if model == "gpt2" else (8, 64)
    cfg = dict(kind=kind, shape=model, layers=2 if model == "gpt2" else 4, attn="sdpa", batch=batch[0],
               seq=batch[1], lr=3e-4, compile_opt=True)
    s = _compile_worker.setup_torch(cfg)

    def step():
        s.train_step()
        s.sync(None)

    with s.ctx:
        for _ in range(6):  # traces, compiles, chains; the heap reaches its high-water mark
            step()
        times, faults = [], []
        for _ in range(steps):
            f0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    print(json.dumps(dict(ms=1000 * statistics.median(times), faults=statistics.median(faults))))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="gpt2", choices=("gpt2", "small"))
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args.worker, args.model, args.steps)
    print(f"{args.model} training step on XLA:CPU, ms a step (page faults a step), speed-up over default")
    print(f"{'configuration':<12}" + "".join(f"{name:>26}" for name in SETTINGS))
    for kind, extra in CONFIGS.items():
        res = {}
        for name, setting in SETTINGS.items():
            env = {k: v for k, v in os.environ.items()
                   if k not in ("GLIBC_TUNABLES", "TORCH_TPU_KEEP_HOST_MEMORY")}
            env.update(extra, **setting)
            out = subprocess.run([sys.executable, __file__, "--worker", kind, "--model", args.model,
                                  "--steps", str(args.steps)], env=env, capture_output=True, text=True, timeout=1800)
            if out.returncode != 0:
                sys.exit(f"{kind} ({name}) failed:\n{out.stderr[-3000:]}")
            res[name] = json.loads(out.stdout.strip().splitlines()[-1])
        base = res["default"]["ms"]
        cells = [f"{r['ms']:.1f} ({r['faults']:.0f}) {base / r['ms']:.2f}x" for r in res.values()]
        print(f"{kind:<12}" + "".join(f"{c:>26}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
