"""Every ratio of issue 14 in one table, with its goal (`make bench` ends with it).

Runs, one after the other, each printing its own full output first:
  - benchmarks/eager_overhead.py: per-op latency against jax's jit (tpu/jax
    column; goal <= 1.5x for add, matmul and synchronize rows);
  - benchmarks/compile.py --model small: the tutorial GPT (d 128, 4 layers,
    batch 8 x 64, AdamW), Strict / Fused / compiled / compiled with three
    programs per step / PyTorch CPU eager / torchax;
  - benchmarks/compile.py --model gpt2: the GPT-2-small-shaped model, the
    same kinds and inductor;
  - benchmarks/fused_generate.py --models llama --caches dynamic --modes
    strict,fused: cold 64-token greedy generate, Fused Eager's cold start
    over Strict's (item 4; goal <= 2x, tokens equal to CPU's).
Every ratio is taken inside one run (compile.py: per round of interleaved
fresh processes, median over rounds); the load average is printed beside
them, since this machine is shared.

Usage: python benchmarks/issue14.py [--repeats 3] [--skip overhead,small,gpt2,generate] [--quick]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OVERHEAD_GOAL = 1.5
# Rows of eager_overhead.py whose tpu/jax ratio has a goal (issue 14, item 1).
OVERHEAD_ROWS = re.compile(r"^(add|matmul|sync)", re.I)


def run(cmd, timeout):
    print(f"\n$ {' '.join(os.path.relpath(c, os.getcwd()) if c.startswith(HERE) else c for c in cmd)}", flush=True)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        out = proc.stdout + (proc.stderr[-3000:] if proc.returncode else "")
    except subprocess.TimeoutExpired as e:
        out = (e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")) + f"\n(timed out after {timeout} s)"
    print(out, flush=True)
    return out


def overhead_rows(text):
    """(case, tpu/jax) for every row of eager_overhead.py's tables that have a
    `tpu/jax` column: the value is the number right-aligned under it."""
    rows, col_end = [], None
    for line in text.splitlines():
        if "tpu/jax" in line:
            col_end = line.index("tpu/jax") + len("tpu/jax")
            continue
        if col_end is None or not line.strip():
            if not line.strip():
                col_end = None
            continue
        head = line[:col_end]
        m = re.search(r"(\d+(?:\.\d+)?)x?\s*$", head)
        name = line.split()[0]
        if m and not re.match(r"^\d", name):
            rows.append((name, float(m.group(1))))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--skip", default="", help="comma-separated: overhead, small, gpt2, generate")
    p.add_argument("--quick", action="store_true", help="compile.py --quick (smoke run)")
    p.add_argument("--timeout", type=int, default=3600)
    args = p.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    table = []  # (what, goal, value or None, pass or None)
    load0 = os.getloadavg()[0]

    if "overhead" not in skip:
        text = run([sys.executable, os.path.join(HERE, "eager_overhead.py")], args.timeout)
        rows = overhead_rows(text)
        for name, v in rows:
            if OVERHEAD_ROWS.match(name):
                table.append((f"eager: {name} tpu / jax jit", f"<= {OVERHEAD_GOAL:g}x", v, v <= OVERHEAD_GOAL))
        if not rows:
            table.append(("eager: tpu / jax jit (eager_overhead.py)", f"<= {OVERHEAD_GOAL:g}x", None, None))

    for model in ("small", "gpt2"):
        if model in skip:
            continue
        kinds = "strict,fused,compiled,compiled3,cpu,torchax" + (",inductor" if model == "gpt2" else "")
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            path = f.name
        cmd = [sys.executable, os.path.join(HERE, "compile.py"), "--model", model, "--kinds", kinds,
               "--repeats", str(args.repeats), "--json", path] + (["--quick"] if args.quick else [])
        run(cmd, args.timeout)
        try:
            with open(path) as f:
                res = json.load(f)
        except (OSError, ValueError):
            table.append((f"{model}: compile.py", "-", None, None))
            continue
        finally:
            os.unlink(path)
        for g in res["goals"]:
            table.append((g["what"], g["goal"], g["value"], g["pass"]))
        if "torchax" in res["results"] and "error" in res["results"]["torchax"]:
            table.append((f"{model}: torchax: {res['results']['torchax']['error'][:50]}", "-", None, None))

    what = "fused generation cold start / strict's (item 4)"
    if "generate" in skip:
        table.append((what, "<= 2x", None, None))
    else:
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            path = f.name
        tokens = "16" if args.quick else "64"
        run([sys.executable, os.path.join(HERE, "fused_generate.py"), "--models", "llama", "--caches", "dynamic",
             "--modes", "strict,fused", "--tokens", tokens, "--json", path], args.timeout)
        try:
            with open(path) as f:
                rows = json.load(f)["rows"]
        except (OSError, ValueError, KeyError):
            rows = []
        finally:
            os.unlink(path)
        fused = [r for r in rows if r["mode"] == "fused" and "vs_strict" in r]
        if fused:
            v = fused[0]["vs_strict"]
            # Tokens other than CPU's fail the item whatever the time.
            table.append((f"{what}, {tokens} tokens", "<= 2x", v, v <= 2 and all(r["same"] for r in rows)))
        else:
            table.append((what, "<= 2x", None, None))
    print(f"\nissue 14: every ratio with its goal (load average {load0:.1f} at start, "
          f"{os.getloadavg()[0]:.1f} at end; {os.cpu_count()} CPUs)")
    print(f"  {'what':66s} {'goal':>8s} {'measured':>9s}")
    for what, goal, v, ok in table:
        shown = "     n/a" if v is None else f"{v:8.2f}x"
        verdict = "" if ok is None else ("PASS" if ok else "MISS")
        print(f"  {what:66s} {goal:>8s} {shown:>9s} {verdict}")
    print("  (n/a: not measured in this run: torchax not installed, or another benchmark's item)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
