"""Runs every OpInfo entry of PyTorch's op_db on tpu against CPU and writes
docs/opinfo.md (the coverage report).

    python tools/opinfo_report.py                 # everything -> docs/opinfo.md
    python tools/opinfo_report.py --ops add,sort  # some entries, printed only
    python tools/opinfo_report.py --ops add --dtypes float32 --no-grads
    python tools/opinfo_report.py --dtypes complex64 --no-grads --no-errors --merge
                                                  # one dtype's column, merged into
                                                  # the existing docs/opinfo.md
    python tools/opinfo_report.py --modules       # op_db, then module_db (own section)
    python tools/opinfo_report.py --modules-only  # module_db only -> its section
    python tools/opinfo_report.py --modules-only --entries nn.LSTM,nn.GRU

Entries run in worker processes (so a crash or hang costs one entry, not the
run); each worker runs tests/opinfo/harness.py on the entries it is sent.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
RESULT = "@@opinfo-result "
ENTRY_TIMEOUT_S = 900


# ---------------------------------------------------------------- worker side
def worker_main(args):
    import torch  # noqa: F401  (autoloads torch_tpu)
    import torch_tpu

    from tests.opinfo import harness

    entries = harness.all_entries()
    dtypes = args.dtypes.split(",")
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints go to stderr; results keep their own line
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        c0, s0 = torch_tpu._C._compile_count(), torch_tpu._C._compile_seconds()
        t0 = time.time()
        res = harness.run_entry(entries[name], dtypes=dtypes, grads=not args.no_grads,
                                errors=not args.no_errors, max_samples=args.max_samples)
        res.update(name=name, seconds=time.time() - t0,
                   compiles=torch_tpu._C._compile_count() - c0,
                   compile_seconds=torch_tpu._C._compile_seconds() - s0)
        out.write(RESULT + json.dumps(res) + "\n")


# ---------------------------------------------------------------- driver side
class Worker:
    def __init__(self, args):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--dtypes", args.dtypes]
        if args.no_grads:
            cmd.append("--no-grads")
        if args.no_errors:
            cmd.append("--no-errors")
        if args.max_samples is not None:
            cmd += ["--max-samples", str(args.max_samples)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL if not args.verbose else None,
                                     text=True, bufsize=1, cwd=ROOT)
        self.entry = None
        self.started = 0.0

    def send(self, name):
        self.entry, self.started = name, time.time()
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()

    def kill(self):
        self.proc.kill()
        self.proc.wait()


def failed_entry(name, why):
    return {"name": name, "crash": why, "forward": {}, "grad": None, "errors": None,
            "seconds": 0, "compiles": 0, "compile_seconds": 0}


def run_all(names, args, progress, worker_cls=None):
    todo = list(names)
    results = {}
    workers = []
    sel = selectors.DefaultSelector()

    def spawn():
        w = (worker_cls or Worker)(args)
        workers.append(w)
        sel.register(w.proc.stdout, selectors.EVENT_READ, w)
        feed(w)

    def feed(w):
        if todo:
            w.send(todo.pop(0))
        else:
            w.entry = None

    def retire(w, why):
        sel.unregister(w.proc.stdout)
        w.kill()
        workers.remove(w)
        if w.entry is not None:
            results[w.entry] = failed_entry(w.entry, why)
            progress(results[w.entry])
        if todo:
            spawn()

    for _ in range(min(args.jobs, len(todo))):
        spawn()
    while any(w.entry is not None for w in workers):
        for key, _ in sel.select(timeout=5):
            w = key.data
            line = w.proc.stdout.readline()
            if not line:  # the worker died
                retire(w, f"worker process died (exit code {w.proc.wait()})")
                continue
            if line.startswith(RESULT):
                res = json.loads(line[len(RESULT):])
                results[res["name"]] = res
                progress(res)
                feed(w)
        for w in list(workers):
            if w.entry is not None and time.time() - w.started > ENTRY_TIMEOUT_S:
                retire(w, f"timed out after {ENTRY_TIMEOUT_S} s")
    for w in workers:
        w.kill()
    return [results[n] for n in names if n in results]


def verdict(res):
    """Short text for one check ('pass', 'FAIL: ...', '-' for not applicable)."""
    if res is None:
        return "-"
    if res["status"] == "pass":
        return "pass"
    if res["status"] == "fail":
        return "FAIL: " + res["detail"].replace("|", "\\|").replace("\n", " ")[:160]
    if res["status"] == "unsupported":
        return "-"
    return "no samples"


def summarize(results, dtypes):
    tot = {}
    for d in dtypes:
        applicable = [r for r in results if "crash" in r or
                      (r["forward"].get(d, {}).get("status") in ("pass", "fail"))]
        tot[d] = (sum(1 for r in applicable if "crash" not in r and r["forward"][d]["status"] == "pass"),
                  len(applicable))
    grads = [r for r in results if "crash" in r or (r["grad"] and r["grad"]["status"] in ("pass", "fail"))]
    tot["grad"] = (sum(1 for r in grads if "crash" not in r and r["grad"]["status"] == "pass"), len(grads))
    errs = [r for r in results if "crash" in r or (r["errors"] and r["errors"]["status"] in ("pass", "fail"))]
    tot["errors"] = (sum(1 for r in errs if "crash" not in r and r["errors"]["status"] == "pass"), len(errs))
    # Error inputs counted case by case as well (the target is per error input).
    return tot


def pct(p, n):
    return f"{p}/{n} ({100.0 * p / n:.1f}%)" if n else "0/0"


def native_op_count():
    """ATen ops that reach the tpu engine and have a lowering rule there."""
    import torch
    import torch_tpu

    rules = set(torch_tpu._C._lowered_ops())
    native = set()
    for s in torch._C._jit_get_all_schemas():
        if not s.name.startswith("aten::"):
            continue
        base = s.name[len("aten::"):]
        rule = base[:-1] if base.endswith("_") and not base.endswith("__") and base[:-1] in rules else base
        if rule not in rules:
            continue
        full = s.name + ("." + s.overload_name if s.overload_name else "")
        try:
            has = lambda k: torch._C._dispatch_has_kernel_for_dispatch_key(full, k)  # noqa: E731
            composite = has("CompositeImplicitAutograd")
            if composite and not has("PrivateUse1"):
                continue
        except RuntimeError:
            continue
        native.add(rule)
    return len(native), len(rules)


def merge_results(path, results, dtypes):
    """The earlier report's results at `path` (its .json) with this run's
    forward columns for `dtypes` put in (a crashed entry fails those columns
    only); returns (results, all dtypes in column order)."""
    with open(os.path.splitext(path)[0] + ".json") as f:
        old = json.load(f)["results"]
    by_name = {r["name"]: r for r in old}
    old_dtypes = []
    for r in old:
        for d in r.get("forward", {}):
            if d not in old_dtypes:
                old_dtypes.append(d)
    for new in results:
        base = by_name.setdefault(new["name"], failed_entry(new["name"], "not in the earlier run"))
        if "crash" in new:
            fwd = {d: {"status": "fail", "samples": 0, "detail": "CRASH: " + new["crash"]} for d in dtypes}
        else:
            fwd = new["forward"]
        base.setdefault("forward", {}).update(fwd)
        for k in ("compiles", "compile_seconds"):
            base[k] = base.get(k, 0) + new.get(k, 0)
    return [by_name[n] for n in sorted(by_name)], old_dtypes + [d for d in dtypes if d not in old_dtypes]


def write_report(results, dtypes, path, wall, args, merged=None):
    tot = summarize(results, dtypes)
    n_native, n_rules = native_op_count()
    compile_s = sum(r["compile_seconds"] for r in results)
    compiles = sum(r["compiles"] for r in results)
    lines = [
        "# OpInfo coverage on `tpu`",
        "",
        "Generated by `make opinfo` (tools/opinfo_report.py): every entry of PyTorch's",
        "`op_db` run on `tpu` (XLA:CPU here) and compared with the same call on CPU.",
        "Forward: every sample input of the entry, per dtype (where CPU supports the",
        "dtype). Gradients: float32, differentiable entries, same upstream gradient.",
        "Errors: each `error_inputs` case must behave as on CPU: raise PyTorch's declared",
        "exception type where CPU raises, nothing where CPU accepts the case.",
        f"Tolerances: float32 and complex64 atol=rtol=1e-3 (as PyTorch's test_compare_cpu),",
        "bfloat16 atol=rtol=2e-2, integers and bool exact. Random or uninitialised outputs",
        "(dropout, normal, empty, ...) are compared on shape and dtype only.",
        "",
        (f"torch {__import__('torch').__version__}, {len(results)} entries; the "
         f"{', '.join(merged)} column(s) from a separate run of {wall / 60:.1f} min with {args.jobs} "
         "worker processes, merged into the earlier report (the sample limit below is that run's)"
         if merged else
         f"torch {__import__('torch').__version__}, {len(results)} entries, "
         f"run in {wall / 60:.1f} min with {args.jobs} worker processes")
        + (f"; at most the first {args.max_samples} samples of each entry per check."
           if args.max_samples else "; every sample."),
        "",
        "## Totals",
        "",
        "| check | entries passing |",
        "|---|---|",
    ]
    for d in dtypes:
        lines.append(f"| forward {d} | {pct(*tot[d])} |")
    lines.append(f"| gradients float32 | {pct(*tot['grad'])} |")
    lines.append(f"| error inputs | {pct(*tot['errors'])} |")
    lines += [
        "",
        f"Natively lowered ATen ops (a rule in csrc/lowering that the tpu engine runs): "
        f"**{n_native}** ({n_rules} rule names).",
        "",
        f"XLA compiles during the run: {compiles}, {compile_s:.0f} s in total, "
        f"{1000 * compile_s / max(compiles, 1):.0f} ms per compile on average.",
        "",
        "## Entries",
        "",
        "| entry | " + " | ".join(dtypes) + " | grad f32 | error inputs |",
        "|---|" + "---|" * (len(dtypes) + 2),
    ]
    for r in sorted(results, key=lambda r: r["name"]):
        if "crash" in r:
            lines.append(f"| {r['name']} | CRASH: {r['crash']} |" + " |" * (len(dtypes) + 1))
            continue
        cells = [verdict(r["forward"].get(d)) for d in dtypes] + [verdict(r["grad"]), verdict(r["errors"])]
        lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.splitext(path)[0] + ".json", "w") as f:
        json.dump({"totals": tot, "native_ops": n_native, "results": results}, f, indent=0)
    return tot


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", help="comma-separated entry names (op.name or op.name.variant)")
    ap.add_argument("--dtypes", default="float32,bfloat16,int64,bool,complex64")
    ap.add_argument("--no-grads", action="store_true")
    ap.add_argument("--no-errors", action="store_true")
    ap.add_argument("--max-samples", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=None, help="report path (default docs/opinfo.md for a full run)")
    ap.add_argument("--merge", action="store_true",
                    help="put this run's forward columns into the existing report (docs/opinfo.json) "
                         "instead of replacing it")
    ap.add_argument("--verbose", action="store_true", help="show the workers' stderr")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    add_module_args(ap)
    args = ap.parse_args()
    if args.worker:
        return worker_main(args)
    if args.module_worker:
        return module_worker_main(args)
    if args.modules_only:
        return modules_main(args)

    from tests.opinfo import harness

    names = sorted(harness.all_entries())
    if args.ops:
        wanted = args.ops.split(",")
        names = [n for n in names if n in wanted or n.split(".")[0] in wanted
                 or any(n.startswith(w + ".") for w in wanted)]
    dtypes = args.dtypes.split(",")
    # Workers compile into a fresh on-disk cache (shared by the workers, removed
    # at exit) so the report's compile counts and times are real compiles, not
    # loads from an earlier run. An explicit TORCH_TPU_CACHE_DIR is respected.
    if "TORCH_TPU_CACHE_DIR" not in os.environ:
        import atexit, shutil, tempfile
        fresh = tempfile.mkdtemp(prefix="opinfo-xla-cache-")
        os.environ["TORCH_TPU_CACHE_DIR"] = fresh
        atexit.register(shutil.rmtree, fresh, True)
    out = args.out or (None if args.ops else os.path.join(ROOT, "docs", "opinfo.md"))
    t0 = time.time()
    done = [0]
    try:
        from tqdm import tqdm
        bar = tqdm(total=len(names), unit="entry", disable=out is None)
    except ImportError:
        bar = None

    def progress(res):
        done[0] += 1
        if bar is not None and out is not None:
            bar.update(1)
            bar.set_postfix_str(res["name"][:30])
        bad = "crash" in res or any(
            v and v["status"] == "fail" for v in list(res["forward"].values()) + [res["grad"], res["errors"]])
        if out is None or bad and args.verbose:
            cells = ("CRASH " + res["crash"]) if "crash" in res else "  ".join(
                f"{k}={verdict(v)}" for k, v in list(res["forward"].items())
                + [("grad", res["grad"]), ("errors", res["errors"])] if v is not None)
            print(f"[{done[0]}/{len(names)}] {res['name']}: {cells}", flush=True)

    results = run_all(names, args, progress)
    if bar is not None:
        bar.close()
    wall = time.time() - t0
    if out and args.merge:
        kept = read_module_section(out)
        merged, all_dtypes = merge_results(out, results, dtypes)
        write_report(merged, all_dtypes, out, wall, args, merged=dtypes)
        restore_module_section(out, kept)
        tot = summarize(results, dtypes)
        print(f"merged {', '.join(dtypes)} into {out} ({wall / 60:.1f} min)")
    elif out:
        kept = read_module_section(out)
        tot = write_report(results, dtypes, out, wall, args)
        restore_module_section(out, kept)
        print(f"wrote {out} in {wall / 60:.1f} min")
    else:
        tot = summarize(results, dtypes)
    for k, v in tot.items():
        print(f"  {k:>9}: {pct(*v)}")
    if args.modules:
        modules_main(args)


# ------------------------------------------------------------ ModuleInfo suite
# module_db entries (tests/opinfo/module_harness.py) in their own workers and
# their own section of docs/opinfo.md, between the markers below, so the op
# table above and this one are written independently.
MODULE_BEGIN = "<!-- moduleinfo:begin (tools/opinfo_report.py --modules-only) -->"
MODULE_END = "<!-- moduleinfo:end -->"
MODULE_DTYPES = "float32,bfloat16"


def add_module_args(ap):
    ap.add_argument("--modules", action="store_true", help="after op_db, run module_db too")
    ap.add_argument("--modules-only", action="store_true", help="run only module_db (its section of the report)")
    ap.add_argument("--entries", help="module_db entries to run (comma-separated, e.g. nn.LSTM); printed only")
    ap.add_argument("--modules-budget", type=float, default=None,
                    help="stop sending module entries after this many minutes (the rest are listed as not run)")
    ap.add_argument("--modules-continue", action="store_true",
                    help="keep the entries of docs/opinfo_modules.json and run only the others")
    ap.add_argument("--module-worker", action="store_true", help=argparse.SUPPRESS)


def module_worker_main(args):
    import torch  # noqa: F401  (autoloads torch_tpu)
    import torch_tpu

    from tests.opinfo import module_harness

    entries = module_harness.all_entries()
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        c0 = torch_tpu._C._compile_count()
        t0 = time.time()
        res = {"modules": module_harness.run_entry(entries[name], name, dtypes=tuple(MODULE_DTYPES.split(",")),
                                                   max_samples=args.max_samples)}
        res.update(name=name, seconds=time.time() - t0, compiles=torch_tpu._C._compile_count() - c0,
                   compile_seconds=0)
        out.write(RESULT + json.dumps(res) + "\n")


class ModuleWorker(Worker):
    def __init__(self, args):
        cmd = [sys.executable, os.path.abspath(__file__), "--module-worker"]
        if args.max_samples is not None:
            cmd += ["--max-samples", str(args.max_samples)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL if not args.verbose else None,
                                     text=True, bufsize=1, cwd=ROOT)
        self.entry = None
        self.started = 0.0


def module_cells(r):
    if "crash" in r:
        return ["CRASH: " + r["crash"]] + ["" for _ in range(3)]
    cells = []
    for d in MODULE_DTYPES.split(","):
        m = r["modules"][d]
        cells += [verdict(m["forward"]), verdict(m["backward"])]
    return cells


def module_totals(results):
    tot = {}
    for d in MODULE_DTYPES.split(","):
        for check in ("forward", "backward"):
            app = [r for r in results if "crash" in r or r["modules"][d][check]["status"] in ("pass", "fail")]
            ok = sum(1 for r in app if "crash" not in r and r["modules"][d][check]["status"] == "pass")
            tot[f"{check} {d}"] = (ok, len(app))
    both = [r for r in results if "crash" in r or r["modules"]["float32"]["forward"]["status"] in ("pass", "fail")]
    tot["float32 forward+backward"] = (sum(
        1 for r in both if "crash" not in r and r["modules"]["float32"]["forward"]["status"] == "pass"
        and r["modules"]["float32"]["backward"]["status"] != "fail"), len(both))
    return tot


def module_section(results, names, wall, args):
    done = {r["name"] for r in results}
    not_run = [n for n in names if n not in done]
    tot = module_totals(results)
    lines = [
        MODULE_BEGIN,
        "## ModuleInfo (`module_db`)",
        "",
        "Every `module_db` entry: the module built on CPU (seeded), deep-copied to `tpu`",
        "(lazy modules initialised by a first CPU forward, as PyTorch's",
        "test_cpu_gpu_parity does), the same inputs on both; train and eval mode",
        "(eval also under `no_grad`, where PyTorch takes its inference fast paths);",
        "forward outputs, then parameter and input gradients from the same upstream",
        "gradient. float32 atol=rtol=1e-3; bfloat16 2e-2, tried for every entry (samples",
        "CPU itself rejects in bf16 are skipped; CPU rounds each op to bf16, tpu computes",
        "in f32 and rounds once, so long bf16 gradient sums may differ by more).",
        "Modules random in training (dropout, RReLU) compare shapes only there.",
        "",
        f"{len(results)} of {len(names)} entries run in {wall / 60:.1f} min"
        + (f" (the budget of {args.modules_budget:g} min ended the run; not run: "
           + ", ".join(not_run) + ")" if not_run else "")
        + (f"; at most the first {args.max_samples} samples of each." if args.max_samples else "; every sample."),
        "",
        "| check | entries passing |",
        "|---|---|",
    ]
    for k, v in tot.items():
        lines.append(f"| {k} | {pct(*v)} |")
    lines += ["", "| module | float32 fwd | float32 bwd | bfloat16 fwd | bfloat16 bwd |", "|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: r["name"]):
        lines.append(f"| {r['name']} | " + " | ".join(module_cells(r)) + " |")
    lines.append(MODULE_END)
    return "\n".join(lines) + "\n", tot


def read_module_section(path):
    try:
        text = open(path).read()
    except OSError:
        return None
    if MODULE_BEGIN in text and MODULE_END in text:
        return text[text.index(MODULE_BEGIN):text.index(MODULE_END) + len(MODULE_END)] + "\n"
    return None


def restore_module_section(path, section):
    if not section:
        return
    text = open(path).read()
    if MODULE_BEGIN in text and MODULE_END in text:
        text = text[:text.index(MODULE_BEGIN)] + section + text[text.index(MODULE_END) + len(MODULE_END) + 1:]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)


def modules_main(args):
    from tests.opinfo import module_harness

    names = sorted(module_harness.all_entries())
    if args.entries:
        wanted = args.entries.split(",")
        names = [n for n in names if n in wanted]
    out = None if args.entries else os.path.join(ROOT, "docs", "opinfo.md")
    if "TORCH_TPU_CACHE_DIR" not in os.environ:
        import atexit, shutil, tempfile
        fresh = tempfile.mkdtemp(prefix="moduleinfo-xla-cache-")
        os.environ["TORCH_TPU_CACHE_DIR"] = fresh
        atexit.register(shutil.rmtree, fresh, True)
    kept, kept_wall = [], 0.0
    json_path = os.path.join(ROOT, "docs", "opinfo_modules.json")
    if args.modules_continue and out and os.path.exists(json_path):
        prev = json.load(open(json_path))
        kept = [r for r in prev["results"] if r["name"] in names]
        kept_wall = prev.get("wall", 0.0)
    todo_names = [n for n in names if n not in {r["name"] for r in kept}]
    t0 = time.time()
    done = [len(kept)]

    def progress(res):
        done[0] += 1
        print(f"[{done[0]}/{len(names)}] {res['name']}: " + "  ".join(module_cells(res)), flush=True)

    # In chunks, so a time budget can end the run between chunks.
    results, chunk = list(kept), 8
    for i in range(0, len(todo_names), chunk):
        if args.modules_budget is not None and time.time() - t0 > 60 * args.modules_budget:
            break
        results += run_all(todo_names[i:i + chunk], args, progress, worker_cls=ModuleWorker)
    wall = time.time() - t0 + kept_wall
    text, tot = module_section(results, names, wall, args)
    if out:
        restore_module_section(out, text)
        with open(os.path.join(ROOT, "docs", "opinfo_modules.json"), "w") as f:
            json.dump({"totals": tot, "wall": wall, "results": results}, f, indent=0)
        print(f"wrote the ModuleInfo section of {out} in {wall / 60:.1f} min")
    for k, v in tot.items():
        print(f"  {k}: {pct(*v)}")


if __name__ == "__main__":
    sys.exit(main())
