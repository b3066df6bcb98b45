"""Time StableHLO programs alone on XLA:CPU, through jax's client.

    TORCH_TPU_DUMP_DIR=/tmp/d python train.py      # writes every program sent to XLA
    python benchmarks/time_program.py /tmp/d/0022-fused_program_of_657_ops.mlir \\
        "/tmp/d/0022-fused_program_of_657_ops.mlir::xla_disable_hlo_passes=transpose-folding" \\
        /tmp/torchax_step.mlir --reps 15 [--profile 30]

Each argument is a program file, optionally followed by `::name=value;...`:
XLA debug options for that compile only (CompileOptions.env_option_overrides,
so variants of one program compare in one process). @main's parameters get
fixed random values of their types (integers in [0, 60): valid token ids
for the small GPT's 65-symbol vocabulary); donated ones are put afresh
before every run, outside the timing. Runs interleave the programs, so a
burst of other work on the shared machine lands on all of them; reported:
the median and minimum of wall and process CPU seconds per run (on a
loaded machine CPU time is the steadier figure).

`--profile N` also records the runs with XLA:CPU's per-thunk trace events
(--xla_cpu_enable_xprof_traceme) and prints, per program, the N thunk
families (fusion kinds, dots, copies, scatters...) with the most time.
Thunks run concurrently on the executor's threads, so the sum exceeds the wall.
"""

import argparse
import collections
import glob
import os
import re
import statistics
import sys
import tempfile
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("programs", nargs="+")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--profile", type=int, default=0, metavar="N")
    return p.parse_args()


def main():
    args = parse_args()
    if args.profile:
        os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_xprof_traceme=true"
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import numpy as np
    import jax

    jax.config.update("jax_enable_x64", True)  # our programs use i64 and f64 scalars
    from jax._src.lib import xla_client as xc
    from jax.extend.backend import get_backend

    backend, dev = get_backend("cpu"), jax.devices("cpu")[0]
    np_types = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64, "i32": np.int32,
                "i8": np.int8, "ui8": np.uint8, "ui32": np.uint32, "ui64": np.uint64, "i1": np.bool_}
    progs = []
    for spec in args.programs:
        path, _, opts = spec.partition("::")
        text = open(path).read()
        sig = re.search(r"func\.func (?:public )?@main\((.*?)\)\s*->", text, re.S)
        if sig is None:
            sys.exit(f"{path}: no @main")
        rng = np.random.default_rng(0)
        inputs = []
        for t in re.findall(r"%arg\d+: tensor<([^>]*)>", sig.group(1)):
            *dims, dt = t.split("x")
            shape = [int(d) for d in dims]
            if dt not in np_types:
                sys.exit(f"{path}: parameter type {t} not handled")
            if dt.startswith("f"):
                v = (rng.standard_normal(shape) * 0.02).astype(np_types[dt])
            elif dt == "i1":
                v = np.zeros(shape, np.bool_)
            else:
                v = rng.integers(0, 60, size=shape).astype(np_types[dt])
            inputs.append(v)
        options = xc.CompileOptions()
        overrides = []
        for kv in filter(None, opts.split(";")):
            k, _, v = kv.partition("=")
            overrides.append((k, v == "true" if v in ("true", "false") else int(v) if v.lstrip("-").isdigit() else v))
        if overrides:
            options.env_option_overrides = overrides
        start = time.perf_counter()
        exe = backend.compile_and_load(text.encode(), xc.DeviceList((dev,)), options)
        progs.append(dict(name=os.path.basename(path) + (f" [{opts}]" if opts else ""), exe=exe, inputs=inputs,
                          compile_s=time.perf_counter() - start, wall=[], cpu=[]))

    def run(p):
        bufs = [jax.device_put(v, dev) for v in p["inputs"]]  # donated parameters are consumed
        for b in bufs:
            b.block_until_ready()
        w, c = time.perf_counter(), time.process_time()
        for shard in p["exe"].execute_sharded(bufs).disassemble_into_single_device_arrays():
            for a in shard:
                a.block_until_ready()
        return time.perf_counter() - w, time.process_time() - c

    for p in progs:  # warm-up
        run(p)
        run(p)
    for _ in range(args.reps):
        for p in progs:
            w, c = run(p)
            p["wall"].append(w)
            p["cpu"].append(c)
    for p in progs:
        ms = lambda xs: f"median {1e3 * statistics.median(xs):7.2f} min {1e3 * min(xs):7.2f}"
        print(f"{p['name']}\n    wall ms {ms(p['wall'])}   cpu ms {ms(p['cpu'])}   (compile {p['compile_s']:.1f} s)")

    if args.profile:
        from jax._src.lib import _profile_data

        for p in progs:
            d = tempfile.mkdtemp(prefix="time_program_")
            jax.profiler.start_trace(d)
            for _ in range(args.reps):
                run(p)
            jax.profiler.stop_trace()
            data = _profile_data.ProfileData.from_file(glob.glob(d + "/**/*.xplane.pb", recursive=True)[0])
            total, count = collections.Counter(), collections.Counter()
            for plane in data.planes:
                for line in plane.lines:
                    if line.name == "python":
                        continue
                    for ev in line.events:
                        if ev.name.startswith(("ThunkExecutor", "ThreadpoolListener", "H2D", "Slinky", "end: ", "$")):
                            continue
                        fam = re.sub(r"\.\d+$", "", ev.name)
                        total[fam] += ev.duration_ns
                        count[fam] += 1
            print(f"{p['name']}: thunk time by family, ms per run (sum {sum(total.values()) / 1e6 / args.reps:.1f})")
            for fam, ns in total.most_common(args.profile):
                print(f"    {ns / 1e6 / args.reps:8.3f}  x{count[fam] // args.reps:<4d} {fam}")


if __name__ == "__main__":
    main()
