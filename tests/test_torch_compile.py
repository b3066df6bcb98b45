"""torch.compile(model, backend="tpu"): each captured graph runs as one fused
program; results and gradients match eager tpu and CPU; a second call with
the same shapes compiles nothing new."""

import copy

import pytest
import torch
import torch.nn as nn

import torch_tpu
from torch_tpu import _C
from compile_models import CNN, MLP, Block
from utils import assert_close

# Compiled vs CPU: the fused program may reassociate float sums (XLA fuses
# across ops), so compare at a few float32 ulps of the values involved.
TOL = dict(atol=2e-5, rtol=2e-5)


pytestmark = pytest.mark.usefixtures("fresh_dynamo")

MODELS = {
    "mlp": (MLP, (6, 12)),
    "cnn": (CNN, (2, 3, 14, 14)),
    "block": (Block, (2, 7, 16)),
}


def run_step(model, x):
    """Forward and backward; returns (output, gradients by parameter name)."""
    for p in model.parameters():
        p.grad = None
    out = model(x)
    (out * out).sum().backward()
    # A compiled module names its parameters "_orig_mod.<name>".
    return out, {n.removeprefix("_orig_mod."): p.grad for n, p in model.named_parameters()}


@pytest.mark.parametrize("name", MODELS)
def test_compiled_matches_eager_and_cpu(name):
    cls, shape = MODELS[name]
    torch.manual_seed(0)
    cpu_model = cls()
    x = torch.randn(shape)
    eager_model = copy.deepcopy(cpu_model).to("tpu")
    compiled_model = copy.deepcopy(cpu_model).to("tpu")
    compiled = torch.compile(compiled_model, backend="tpu")

    ref_out, ref_grads = run_step(cpu_model, x)
    eager_out, eager_grads = run_step(eager_model, x.to("tpu"))
    out, grads = run_step(compiled, x.to("tpu"))

    assert out.device.type == "tpu"
    assert_close(out, ref_out, **TOL)
    assert_close(out, eager_out.cpu(), **TOL)
    for n in ref_grads:
        assert grads[n].device.type == "tpu", n
        assert_close(grads[n], ref_grads[n], **TOL, msg=lambda m: f"grad of {n}: {m}")
        assert_close(grads[n], eager_grads[n].cpu(), **TOL, msg=lambda m: f"grad of {n}: {m}")
    for (n, b), eb, cb in zip(cpu_model.named_buffers(), eager_model.buffers(), compiled_model.buffers()):
        assert_close(cb, b, **TOL, msg=lambda m: f"buffer {n}: {m}")
        assert_close(cb, eb.cpu(), **TOL, msg=lambda m: f"buffer {n}: {m}")
    # One forward and one backward graph, each run as a fused program.
    assert torch_tpu.compile_stats()["graphs"] >= 2


@pytest.mark.parametrize("name", MODELS)
def test_second_call_compiles_nothing(name):
    cls, shape = MODELS[name]
    torch.manual_seed(1)
    model = cls().to("tpu")
    compiled = torch.compile(model, backend="tpu")
    x = torch.randn(shape).to("tpu")
    run_step(compiled, x)
    torch.tpu.synchronize()
    before, stats = _C._compile_count(), torch_tpu.compile_stats()
    out, grads = run_step(compiled, torch.randn(shape).to("tpu"))
    torch.tpu.synchronize()
    after = torch_tpu.compile_stats()
    assert _C._compile_count() == before, "a second call with the same shapes compiled with XLA"
    assert after["graphs"] == stats["graphs"]  # Dynamo/AOTAutograd did not retrace
    assert after["graph_calls"] == stats["graph_calls"] + 2  # forward + backward
    assert after["fused_cache_hits"] >= stats["fused_cache_hits"] + 2


def test_new_batch_size_runs_with_concrete_shapes():
    # The second shape makes Dynamo retrace with a symbolic batch size; the
    # backend runs that graph with each call's concrete shapes: one fused
    # program per shape, compiled once, and no retrace for a third shape.
    torch.manual_seed(6)
    cpu_model = MLP()
    compiled = torch.compile(copy.deepcopy(cpu_model).to("tpu"), backend="tpu")
    for b in (6, 7, 8, 7):
        x = torch.randn(b, 12)
        graphs, count = torch_tpu.compile_stats()["graphs"], _C._compile_count()
        out, grads = run_step(compiled, x.to("tpu"))
        ref_out, ref_grads = run_step(cpu_model, x)
        assert_close(out, ref_out, **TOL)
        for n in ref_grads:
            assert_close(grads[n], ref_grads[n], **TOL)
        if b == 8:
            assert torch_tpu.compile_stats()["graphs"] == graphs
    torch.tpu.synchronize()
    assert _C._compile_count() == count  # batch 7 again: every program cached


def test_graph_break_falls_back_to_eager(capsys):
    torch.manual_seed(2)

    class Breaks(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 3)

        def forward(self, x):
            h = torch.tanh(self.a(x))
            print("mid-forward")  # graph break
            scale = h.abs().max().item()  # graph break: a value read on the host
            return self.b(h) / scale

    cpu_model = Breaks()
    x = torch.randn(4, 8)
    model = copy.deepcopy(cpu_model).to("tpu")
    compiled = torch.compile(model, backend="tpu")
    ref_out, ref_grads = run_step(cpu_model, x)
    out, grads = run_step(compiled, x.to("tpu"))
    assert "mid-forward" in capsys.readouterr().out
    assert_close(out, ref_out, **TOL)
    for n in ref_grads:
        assert_close(grads[n], ref_grads[n], **TOL)
    # At least the graphs before and after the break were compiled.
    assert torch_tpu.compile_stats()["graphs"] >= 2

    torch._dynamo.reset()  # else the cached frames of the first compile answer
    with pytest.raises(Exception, match="(?i)graph break|Unsupported"):
        torch.compile(copy.deepcopy(cpu_model).to("tpu"), backend="tpu", fullgraph=True)(x.to("tpu"))


def test_fullgraph_function():
    def f(x, w):
        return torch.softmax(x @ w, dim=-1).sum(0) * 2 + x.mean()

    x, w = torch.randn(5, 6), torch.randn(6, 6)
    compiled = torch.compile(f, backend="tpu", fullgraph=True)
    graphs = torch_tpu.compile_stats()["graphs"]
    out = compiled(x.to("tpu"), w.to("tpu"))
    assert torch_tpu.compile_stats()["graphs"] == graphs + 1  # one inference graph
    assert_close(out, f(x, w), **TOL)


def test_inference_under_no_grad_is_one_fused_program():
    torch.manual_seed(3)
    model = MLP().to("tpu").eval()
    compiled = torch.compile(model, backend="tpu", fullgraph=True)
    x = torch.randn(3, 12)
    with torch.no_grad():
        compiled(x.to("tpu"))
        torch.tpu.synchronize()
        before = torch_tpu.fusion_stats()
        out = compiled(x.to("tpu"))
        after = torch_tpu.fusion_stats()
    assert after["flushes"] == before["flushes"] + 1  # the whole graph: one trace
    assert after["cache_hits"] == before["cache_hits"] + 1
    assert after["fused_ops"] - before["fused_ops"] == 3  # addmm, gelu, addmm
    assert_close(out, model.cpu()(x), **TOL)


def test_compiled_graph_restores_the_eager_mode():
    compiled = torch.compile(lambda x: x * 2 + 1, backend="tpu")
    for mode in ("strict", "debug"):
        with torch_tpu.eager_mode(mode):
            out = compiled(torch.ones(3, device="tpu"))
            assert torch_tpu.get_eager_mode() == mode
        assert_close(out, torch.full((3,), 3.0))


def test_training_loop_with_compiled_model_and_optimizer_step():
    torch.manual_seed(4)
    cpu_model = MLP()
    model = copy.deepcopy(cpu_model).to("tpu")
    compiled = torch.compile(model, backend="tpu")
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (cpu_model, model)]
    # Steps 1 and 2 run the graphs plainly and capture them. In Fused Eager
    # step 3 is the first whose graphs are replays, chained into one trace
    # with the eager ops around them (docs/design.md, "One program per
    # training step"): that program compiles there, and step 4 compiles nothing.
    xs = [torch.randn(6, 12) for _ in range(4)]
    for i, x in enumerate(xs):
        for m, opt, dev in ((cpu_model, opts[0], "cpu"), (compiled, opts[1], "tpu")):
            opt.zero_grad()
            out = m(x.to(dev))
            (out * out).mean().backward()
            opt.step()
        if i == 2:
            count = _C._compile_count()
    assert _C._compile_count() == count, "the fourth training step compiled with XLA"
    for (n, p), q in zip(cpu_model.named_parameters(), model.parameters()):
        assert_close(q, p, **TOL, msg=lambda m: f"{n}: {m}")


@pytest.mark.parametrize("opt_cls, kw", [(torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
                                         (torch.optim.Adam, dict(lr=0.01))])
def test_compiled_optimizer_step(opt_cls, kw):
    torch.manual_seed(5)
    cpu_model = nn.Linear(8, 4)
    model = copy.deepcopy(cpu_model).to("tpu")
    cpu_opt, opt = opt_cls(cpu_model.parameters(), **kw), opt_cls(model.parameters(), **kw)

    # Not fullgraph: PyTorch's optimizers break the graph themselves (state
    # initialisation on the first step).
    @torch.compile(backend="tpu")
    def step():
        opt.step()

    for i in range(3):
        x = torch.randn(5, 8)
        for m in (cpu_model, model):
            m.zero_grad()
            m(x.to(m.weight.device)).pow(2).sum().backward()
        cpu_opt.step()
        count = _C._compile_count()
        step()
        torch.tpu.synchronize()
        if i == 2:  # the optimizer state exists from step 1 on: nothing new
            assert _C._compile_count() == count
    for p, q in zip(cpu_model.parameters(), model.parameters()):
        assert_close(q, p, **TOL)


def test_backend_is_registered_lazily():
    import torch._dynamo

    assert "tpu" in torch._dynamo.list_backends()
    # Decompositions keep ops that have a lowering rule whole.
    table = torch_tpu.dynamo_backend.decompositions()
    assert torch.ops.aten.gelu.default not in table
    assert torch.ops.aten.native_layer_norm_backward.default not in table


def test_log_recompiles(tmp_path):
    # One line per XLA compile, naming the fused graph; nothing for a cached call.
    import os
    import subprocess
    import sys

    script = (
        "import torch, torch_tpu\n"
        "f = torch.compile(lambda x: (x * 2).sin() + 1, backend='tpu', fullgraph=True)\n"
        "x = torch.ones(4).to('tpu')  # an upload: compiles nothing\n"
        "f(x); f(x); torch.tpu.synchronize()\n"
    )
    env = dict(os.environ, TORCH_TPU_LOG_RECOMPILES="1", TORCH_TPU_CACHE_DIR="")
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("torch_tpu: XLA compile #")]
    assert len(lines) == 1, r.stderr[-2000:]
    assert "fused program of 3 ops" in lines[0] and "[program " in lines[0], lines[0]


def test_grouped_mm_float32_compiles_on_tpu_and_cpu_tracing_is_unchanged():
    """Transformers' MoE experts call grouped_mm on tpu in every dtype; torch's
    meta kernel for it is CUDA's (bf16 only), so Dynamo failed on a float32 MoE
    model (issue 16 zoo). torch_tpu.fake_impls answers for tpu tensors only."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    torch.manual_seed(0)
    a, w = torch.randn(16, 32), torch.randn(4, 24, 32)
    offs = torch.tensor([3, 3, 9, 14], dtype=torch.int32)  # an empty group, rows past the end

    def fn(a, w, offs):
        return torch.nn.functional.grouped_mm(a * 2, w.transpose(-2, -1), offs=offs).relu()

    want = fn(a, w, offs)
    got = torch.compile(fn, backend="tpu", fullgraph=True)(a.to("tpu"), w.to("tpu"), offs.to("tpu"))
    assert got.shape == want.shape and got.dtype == want.dtype
    assert_close(got.cpu()[:14], want[:14], atol=1e-5, rtol=1e-5)
    with FakeTensorMode(), pytest.raises(RuntimeError, match="BF16"):
        torch._grouped_mm(torch.empty(16, 32), torch.empty(4, 32, 24), offs=torch.empty(4, dtype=torch.int32))
