"""The first training call of compile.py's configurations `compiled` and
`torchax`, split into phases: where the cold first step's time goes
(docs/design.md, "First-call compile time").

    python benchmarks/first_call.py [--rounds 3] [--model gpt2|small] [--kinds compiled,torchax]

Each round runs every kind in a fresh process with empty compilation
caches, as compile.py does (the same model, batch, optimizer and step code:
_compile_worker.setup_torch / setup_torchax), and times only the first
training step: wall and process CPU seconds (all threads: XLA compiles on
its own threads). On a shared machine CPU time is the steadier figure.

compiled, by phase: `forward` (the compiled model+loss call), `backward`,
`optimizer` (the compiled AdamW step), `sync`; within forward and
optimizer, `backend` (AOTAutograd and our graph compilers: the time Dynamo
spends in the backend) and `graph run` (the graph's first call: our
dispatch and lowering of its ops, the XLA compile of its fused program,
launching it); the rest of the phase is Dynamo's own tracing, guards and
imports. The summary splits the step into torch's tracing (Dynamo +
backend calls, which is AOTAutograd apart from a few ms) and the graph
runs plus backward and sync (ours, and XLA's); `xla_compile` is the wall
time of XLA compiles. torchax: jax's trace, lowering to StableHLO and XLA
compile (jax's own duration events, wall), and the first call in total.
"""

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPE_DEFAULTS = {"gpt2": dict(layers=2, batch=4), "small": dict(layers=4, batch=8)}


class Clock:
    """Wall and process CPU seconds, summed by name."""

    def __init__(self):
        self.totals = {}

    @contextlib.contextmanager
    def __call__(self, name):
        w, c = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            tw, tc = self.totals.get(name, (0.0, 0.0))
            self.totals[name] = (tw + time.perf_counter() - w, tc + time.process_time() - c)


def first_call_compiled(cfg):
    import torch_tpu
    from torch_tpu.dynamo_backend import tpu_backend

    import _compile_worker as worker

    clock, phase = Clock(), ["setup"]

    def timed_backend(gm, example_inputs, **kwargs):
        with clock(f"{phase[0]}: backend"):
            compiled = tpu_backend(gm, example_inputs, **kwargs)

        def call(*args):
            with clock(f"{phase[0]}: graph run"):
                return compiled(*args)

        return call

    s = worker.setup_torch(cfg, backend=timed_backend)
    xla = {}

    def step(name, fn):  # one phase of _compile_worker's train_step
        phase[0] = name
        before = torch_tpu._C._compile_seconds()
        with clock(name):
            out = fn()
        xla[name] = torch_tpu._C._compile_seconds() - before
        return out

    with s.ctx:
        s.sync(None)
        s.opt.zero_grad(set_to_none=True)
        loss = step("forward", lambda: s.train_fn(s.idx, s.tgt))
        step("backward", loss.backward)
        step("optimizer", s.opt_step)
        step("sync", lambda: s.sync(None))
    return clock.totals, xla


def first_call_torchax(cfg):
    import jax
    from jax._src import dispatch

    import _compile_worker as worker

    events = {dispatch.JAXPR_TRACE_EVENT: "trace", dispatch.JAXPR_TO_MLIR_MODULE_EVENT: "lower",
              dispatch.BACKEND_COMPILE_EVENT: "xla_compile"}
    seen = {}

    def listener(event, seconds, **_):
        if event in events:
            seen[events[event]] = seen.get(events[event], 0.0) + seconds

    s = worker.setup_torchax(cfg)
    jax.block_until_ready(s.state)
    jax.monitoring.register_event_duration_secs_listener(listener)
    clock = Clock()
    with clock("first call"):
        s.sync([s.train_step()])
    return clock.totals, seen


def worker_main(kind, cfg):
    sys.path.insert(0, HERE)
    cfg = dict(cfg, kind=kind)
    if kind == "compiled":
        totals, xla = first_call_compiled(cfg)
        out = dict(phases=totals, xla_compile=xla)
    else:
        totals, seen = first_call_torchax(cfg)
        out = dict(phases=totals, jax=seen)
    print("RESULT " + json.dumps(out), flush=True)


def run_worker(kind, cfg, timeout):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    with tempfile.TemporaryDirectory() as cache:
        env["TORCH_TPU_CACHE_DIR"] = os.path.join(cache, "tpu")
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        if kind == "torchax":
            env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # torchax claims the PrivateUse1 backend
        proc = subprocess.run([sys.executable, __file__, "--worker", kind, json.dumps(cfg)], env=env,
                              capture_output=True, text=True, timeout=timeout)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    if not lines:
        sys.exit(f"{kind} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def load():
    return open("/proc/loadavg").read().split()[0]


def summarize(kind, res):
    p = res["phases"]
    if kind == "torchax":
        w, c = p["first call"]
        parts = ", ".join(f"{k} {v:.2f}" for k, v in res["jax"].items())
        return w, c, f"jax (wall): {parts}"
    w = sum(p[k][0] for k in ("forward", "backward", "optimizer", "sync"))
    c = sum(p[k][1] for k in ("forward", "backward", "optimizer", "sync"))
    runs = [p.get(f"{ph}: graph run", (0.0, 0.0)) for ph in ("forward", "optimizer")]
    ours_c = sum(r[1] for r in runs) + p["backward"][1] + p["sync"][1]
    rows = []
    for ph in ("forward", "backward", "optimizer", "sync"):
        s = f"{ph} {p[ph][0]:.2f}/{p[ph][1]:.2f}"
        subs = [f"{sub} {p[f'{ph}: {sub}'][1]:.2f}" for sub in ("backend", "graph run") if f"{ph}: {sub}" in p]
        rows.append(s + (f" ({', '.join(subs)})" if subs else ""))
    xla = sum(res["xla_compile"].values())
    detail = (f"phases wall/CPU: {'; '.join(rows)}. CPU: torch's tracing {c - ours_c:.2f}, graph runs + backward "
              f"+ sync {ours_c:.2f}; XLA compiles {xla:.2f} wall")
    return w, c, detail


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker_main(sys.argv[2], json.loads(sys.argv[3]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", choices=tuple(SHAPE_DEFAULTS), default="gpt2")
    ap.add_argument("--kinds", default="compiled,torchax")
    ap.add_argument("--timeout", type=int, default=1200)
    args = ap.parse_args()
    cfg = dict(shape=args.model, attn="sdpa", seq=64, lr=3e-4, compile_opt=True, steps=1, warmup=1,
               **SHAPE_DEFAULTS[args.model])
    kinds = args.kinds.split(",")
    results = {k: [] for k in kinds}
    for r in range(args.rounds):
        for kind in kinds:
            before = load()
            res = run_worker(kind, cfg, args.timeout)
            w, c, detail = summarize(kind, res)
            results[kind].append((w, c))
            print(f"round {r + 1} {kind:9s} load {before}->{load()}: first call {w:.2f} s wall, {c:.2f} s CPU; "
                  f"{detail}", flush=True)
    if {"compiled", "torchax"} <= set(kinds):
        for i, what in ((0, "wall"), (1, "CPU")):
            ratios = [a[i] / b[i] for a, b in zip(results["compiled"], results["torchax"])]
            print(f"compiled / torchax, {what}: median {statistics.median(ratios):.2f}x "
                  f"(rounds {', '.join(f'{x:.2f}' for x in ratios)})")


if __name__ == "__main__":
    main()
