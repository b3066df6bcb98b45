"""Recompile visibility (TORCH_TPU_LOG_RECOMPILES=1, torch_tpu.recompile_log(),
compile_stats() counters) and errors raised inside torch.compile graphs.

Each case runs in a fresh process: reasons compare with the previous program
of the same op, which in the test process depends on what ran before."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

PRELUDE = "import json, sys, torch, torch_tpu\n"


def clean_env(**extra):
    # Strict Eager whatever mode the suite runs in (`make test` runs it again
    # under TPU_DEFER_AND_FUSE=1): these cases are about per-op programs.
    env = {k: v for k, v in os.environ.items()
           if k not in ("TORCH_LOGS", "TORCH_TPU_LOG_RECOMPILES", "TPU_DEFER_AND_FUSE", "TPU_LAUNCH_BLOCKING")}
    env.update(extra)
    return env


def run_script(tmp_path, body, log=True, name="script.py"):
    path = tmp_path / name
    path.write_text(PRELUDE + textwrap.dedent(body))
    env = clean_env(TORCH_TPU_CACHE_DIR="", **({"TORCH_TPU_LOG_RECOMPILES": "1"} if log else {}))
    r = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r, path


def lines_for(stderr, what):
    return [ln for ln in stderr.splitlines() if ln.startswith("torch_tpu: XLA compile #") and f" for {what} " in ln]


def last_json(stdout):
    return json.loads([ln for ln in stdout.splitlines() if ln.startswith("{") or ln.startswith("[")][-1])


def test_eager_reasons_shape_dtype_arg_scalar(tmp_path):
    r, _ = run_script(tmp_path, """
        a = torch.ones(4, 8).to("tpu"); b = torch.ones(4, 8).to("tpu")
        torch.add(a, b); torch.add(a, b)                    # one compile, then a hit
        a2 = torch.ones(4, 16).to("tpu"); b2 = torch.ones(4, 16).to("tpu")
        torch.add(a2, b2)                                   # shape
        torch.add(a2, b2, alpha=2.5)                        # Scalar kind int -> float
        a3, b3 = a2.to(torch.bfloat16), b2.to(torch.bfloat16)
        torch.add(a3, b3, alpha=2.5)                        # dtype
        torch.cumsum(a, 0); torch.cumsum(a, 1)              # int argument
        torch.mm(a, b.t()); torch.set_float32_matmul_precision("medium"); torch.mm(a, b.t())  # precision
        torch.tpu.synchronize()
        print(json.dumps([e for e in torch_tpu.recompile_log() if e["what"].startswith(("aten::add", "aten::cumsum"))]))
        print(json.dumps(torch_tpu.compile_stats()))
    """)
    add = lines_for(r.stderr, "aten::add.Tensor")  # structured ops reach the engine in their functional form (aten/structured_direct.cpp)
    assert len(add) == 4, r.stderr[-3000:]
    assert add[0].endswith(": first compile") and "(#1 for this op)" in add[0], add[0]
    assert "(#2 for this op)" in add[1] and "input 0 'self' shape [4, 8] -> [4, 16]" in add[1], add[1]
    assert "input 1 'other' shape [4, 8] -> [4, 16]" in add[1], add[1]
    assert "arg 'alpha' Scalar kind int -> float" in add[2], add[2]
    assert "input 0 'self' dtype float32 -> bfloat16" in add[3], add[3]
    cumsum = [ln for ln in r.stderr.splitlines() if ln.startswith("torch_tpu: XLA compile #") and "aten::cumsum" in ln]
    assert len(cumsum) == 2 and "arg 'dim' 0 -> 1" in cumsum[1], cumsum
    mm = [ln for ln in r.stderr.splitlines() if ln.startswith("torch_tpu: XLA compile #") and "aten::mm" in ln]
    assert len(mm) == 2 and mm[1].endswith(": matmul precision highest -> medium"), mm

    entries = json.loads(r.stdout.splitlines()[-2])
    adds = [e for e in entries if e["what"] == "aten::add.Tensor"]
    assert [e["count"] for e in adds] == [1, 2, 3, 4], adds
    assert all(e["kind"] == "op" and e["how"] == "compile" for e in adds), adds
    assert adds[1]["reason"].startswith("input 0 'self' shape [4, 8] -> [4, 16]"), adds[1]
    stats = json.loads(r.stdout.splitlines()[-1])
    assert stats["op_recompiles"] >= 4 and stats["recompiles"] >= stats["op_recompiles"], stats  # add x3, cumsum


def test_no_log_without_env_but_counters_move(tmp_path):
    r, _ = run_script(tmp_path, """
        before = torch_tpu.compile_stats()["op_recompiles"]
        torch.neg(torch.ones(3).to("tpu")); torch.neg(torch.ones(5).to("tpu")); torch.neg(torch.ones(5).to("tpu"))
        print(json.dumps(torch_tpu.compile_stats()["op_recompiles"] - before))
    """, log=False)
    assert "torch_tpu: XLA compile" not in r.stderr, r.stderr[-2000:]
    assert json.loads(r.stdout.splitlines()[-1]) == 1  # neg [3] then [5]: one recompile; the third call hits


def test_evicted_program_is_a_reload_not_a_recompile(tmp_path):
    path = tmp_path / "evict.py"
    path.write_text(PRELUDE + textwrap.dedent("""
        x = torch.ones(3).to("tpu")
        for _ in range(2):
            torch.neg(x); torch.exp(x); torch.sin(x)   # capacity 2: each evicts the oldest
        torch.tpu.synchronize()
        print(json.dumps(torch_tpu.compile_log.recompile_stats()))
    """))
    env = clean_env(TORCH_TPU_CACHE_DIR="", TORCH_TPU_LOG_RECOMPILES="1", TORCH_TPU_PROGRAM_CACHE_SIZE="2")
    r = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    stats = json.loads(r.stdout.splitlines()[-1])
    assert stats["op_reloads"] >= 3 and stats["op_recompiles"] == 0, stats
    assert "(reloaded: evicted from the program cache)" in r.stderr, r.stderr[-3000:]


def test_compiled_function_new_shape(tmp_path):
    r, _ = run_script(tmp_path, """
        def fn(x):
            return (x * 2).sin() + 1
        f = torch.compile(fn, backend="tpu")
        f(torch.ones(4).to("tpu")); f(torch.ones(4).to("tpu"))
        f(torch.ones(8).to("tpu"))
        torch.tpu.synchronize()
        print(json.dumps([e for e in torch_tpu.recompile_log() if e["kind"] in ("graph", "fused")]))
        print(json.dumps(torch_tpu.compile_stats()))
    """)
    graph = [ln for ln in r.stderr.splitlines() if ln.startswith("torch_tpu: compile graph")]
    assert len(graph) == 2, r.stderr[-3000:]
    assert "of fn (script.py:" in graph[0] and graph[0].endswith("(#1 for this frame): first compile"), graph[0]
    assert "(#2 for this frame)" in graph[1] and "input 'l_x_' shape [4] -> " in graph[1], graph[1]
    assert "Recompiling function fn" in r.stderr, r.stderr[-3000:]  # Dynamo's own guard-failure log
    fused = [ln for ln in r.stderr.splitlines() if "XLA compile #" in ln and "fused program of 3 ops" in ln]
    assert len(fused) == 2, r.stderr[-3000:]
    assert "(#2 for this op sequence)" in fused[1] and "op 0 of 3 (aten::mul.Tensor) runs another program" in fused[1]
    assert "shape [4] -> [8]" in fused[1], fused[1]

    entries = json.loads(r.stdout.splitlines()[-2])
    assert [(e["kind"], e["count"]) for e in entries] == [("graph", 1), ("fused", 1), ("graph", 2), ("fused", 2)]
    stats = json.loads(r.stdout.splitlines()[-1])
    assert stats["graph_recompiles"] == 1 and stats["fused_recompiles"] == 1, stats
    assert stats["recompiles"] == stats["graph_recompiles"] + stats["fused_recompiles"] + stats["op_recompiles"]


ERRORS = """
def no_lowering(x):
    y = x * 2
    return torch.quantize_per_tensor(y, 0.1, 0, torch.quint8).int_repr() + 1  # LINE no_lowering


def runtime_check(x):
    y = x * 2
    return y.uniform_(2.0, 1.0) + 1  # LINE runtime_check


def bad_matmul(a, b):
    return (a @ b).relu()  # LINE bad_matmul


def report(fn, *args):
    try:
        torch.compile(fn, backend="tpu")(*args)
        print(json.dumps({"fn": fn.__name__, "raised": None}))
    except Exception as e:
        print(json.dumps({"fn": fn.__name__, "raised": type(e).__name__, "mro": [c.__name__ for c in type(e).__mro__],
                          "msg": str(e)}))


x = torch.ones(4).to("tpu")
report(no_lowering, x)
report(runtime_check, x)
report(bad_matmul, torch.ones(2, 3).to("tpu"), torch.ones(4, 5).to("tpu"))
# The process goes on: a good graph still runs and gives the right result.
ok = torch.compile(lambda t: t * 3, backend="tpu")(x)
print(json.dumps({"fn": "ok", "value": ok.cpu().tolist()}))
"""


def test_errors_in_compiled_graphs_name_op_and_line(tmp_path):
    r, path = run_script(tmp_path, ERRORS, log=False, name="model_errors.py")
    results = {d["fn"]: d for d in (json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{"))}
    src = path.read_text().splitlines()

    def line_of(tag):
        return next(i + 1 for i, ln in enumerate(src) if ln.endswith(f"# LINE {tag}"))

    # No lowering, no decomposition, no kernel: found when the graph compiles
    # (Dynamo wraps the backend's NotImplementedError in BackendCompilerFailed).
    nl = results["no_lowering"]
    assert "RuntimeError" in nl["mro"], nl
    assert "NotImplementedError: torch_tpu: aten::quantize_per_tensor has no tpu lowering" in nl["msg"], nl["msg"]
    assert "graph node 'quantize_per_tensor' (aten.quantize_per_tensor.default)" in nl["msg"], nl["msg"]
    assert f'model_errors.py", line {line_of("no_lowering")}, in no_lowering' in nl["msg"], nl["msg"]
    assert "torch.quantize_per_tensor(y" in nl["msg"], nl["msg"]

    # A check on values only the real call sees: raised while the graph runs,
    # same type, with the op and the line added.
    rc = results["runtime_check"]
    assert rc["raised"] == "RuntimeError", rc
    assert "uniform_ expects to return a [from, to) range" in rc["msg"], rc["msg"]
    assert "torch_tpu: raised by aten.uniform.default (graph node 'uniform')" in rc["msg"], rc["msg"]
    assert f'line {line_of("runtime_check")}' in rc["msg"] and "uniform" in rc["msg"], rc["msg"]

    # Dynamo finds this one while tracing with fake tensors and names the line itself.
    bm = results["bad_matmul"]
    assert "RuntimeError" in bm["mro"], bm
    assert "must have same reduction dim" in bm["msg"] and f'line {line_of("bad_matmul")}' in bm["msg"], bm["msg"]

    assert results["ok"]["value"] == [3.0, 3.0, 3.0, 3.0]


def test_annotate_graph_error_leaves_foreign_errors_alone():
    import torch
    from torch_tpu.compile_errors import annotate_graph_error

    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    exc = ValueError("not from the graph")
    assert annotate_graph_error(gm, exc) is exc
    try:
        gm.forward(None)  # raises in the generated code at the add node (gm() strips the traceback)
    except TypeError as e:
        new = annotate_graph_error(gm, e)
    assert type(new) is TypeError and "torch_tpu: raised by <built-in function add>" in str(new), str(new)
    assert annotate_graph_error(gm, new) is new  # annotated once only


def test_disk_cache_load_is_logged_with_its_reason(tmp_path):
    # A second process finds the program on disk: no XLA compile, but still a
    # new program in this process, logged as a load with the same reason.
    path = tmp_path / "load.py"
    path.write_text(PRELUDE + textwrap.dedent("""
        torch.neg(torch.ones(3).to("tpu")); torch.neg(torch.ones(6).to("tpu"))
        torch.tpu.synchronize()
        print(json.dumps([e for e in torch_tpu.recompile_log() if e["what"].startswith("aten::neg")]))
    """))
    env = clean_env(TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"), TORCH_TPU_LOG_RECOMPILES="1")
    runs = [subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=600)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-3000:]
    first, second = (json.loads(r.stdout.splitlines()[-1]) for r in runs)
    assert [e["how"] for e in first] == ["compile", "compile"], first
    assert [e["how"] for e in second] == ["load", "load"], second
    assert [e["reason"] for e in second] == [e["reason"] for e in first], (first, second)
    assert "shape [3] -> [6]" in second[1]["reason"], second
    loads = [ln for ln in runs[1].stderr.splitlines() if ln.startswith("torch_tpu: XLA cache load for aten::neg")]
    assert len(loads) == 2, loads
    assert loads[1].endswith("input 0 'self' shape [3] -> [6]"), loads
