"""The opt-in CPU fallback (exec/cpu_fallback.*): ops with no tpu lowering
run on the CPU through PyTorch's at::native::cpu_fallback when
torch_tpu.cpu_fallback(True) or TORCH_TPU_CPU_FALLBACK=1 says so, and raise
NotImplementedError (saying how to turn it on) otherwise. Results are
compared with CPU; out= results written through views must leave the rest of
the base untouched, as on CPU.

Ops used (no lowering rule, no composite: `_C._lowered_ops()` lacks them):
aten::fake_quantize_per_tensor_affine_cachemask (two outputs, and its out=
form), aten::_upsample_lanczos2d_aa.out (out=). No in-place ATen op lacks a rule;
in-place and out= results take the same write-back path (the schema's
mutable alias, `Tensor(a!)`), tested here through the out= forms."""

import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch_tpu

from utils import assert_close

A = torch.tensor([[0.21, -1.3, 0.04], [2.5, 0.66, -0.07], [13.0, -0.5, 0.3]])
FQ = "aten::fake_quantize_per_tensor_affine_cachemask"


def fake_quant(a):
    return torch.fake_quantize_per_tensor_affine(a, 0.1, 3, -128, 127)


@pytest.fixture
def fallback():
    torch_tpu.reset_cpu_fallback_stats()
    with torch_tpu.cpu_fallback(True):
        yield
    torch_tpu.reset_cpu_fallback_stats()


def test_off_by_default_names_op_and_switch():
    assert not torch_tpu.cpu_fallback_enabled()
    with pytest.raises(NotImplementedError) as e:
        fake_quant(A.to("tpu"))
    msg = str(e.value)
    assert FQ in msg
    assert "torch_tpu.cpu_fallback(True)" in msg and "TORCH_TPU_CPU_FALLBACK=1" in msg


def test_runs_on_cpu_warns_once_and_counts(fallback):
    with pytest.warns(UserWarning, match=FQ + " has no tpu lowering; running it on the CPU"):
        w = fake_quant(A.to("tpu"))
    assert w.device.type == "tpu"
    assert_close(w, fake_quant(A))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second warning would raise
        w2 = fake_quant(A.to("tpu") * 2)
    assert_close(w2, fake_quant(A * 2))
    assert torch_tpu.cpu_fallback_stats() == {FQ: 2}


def test_multiple_outputs_and_view_inputs(fallback):
    big = torch.arange(25.0).view(5, 5) / 7 + torch.eye(5)
    view = big.to("tpu")[1:4, 1:4].t()  # a transposed slice: strided, offset
    assert not view.is_contiguous()
    w, v = torch.ops.aten.fake_quantize_per_tensor_affine_cachemask(view, 0.1, 3, -128, 127)
    w_cpu, v_cpu = torch.ops.aten.fake_quantize_per_tensor_affine_cachemask(big[1:4, 1:4].t(), 0.1, 3, -128, 127)
    assert w.device.type == v.device.type == "tpu"
    assert_close(w, w_cpu)
    assert_close(v, v_cpu)


def test_out_into_views_and_resize(fallback):
    x = torch.arange(2 * 3 * 4 * 4, dtype=torch.float32).view(2, 3, 4, 4) / 10
    op = torch.ops.aten._upsample_lanczos2d_aa.out
    # out= is a view inside a larger tensor: only the view's elements change.
    base_cpu = torch.full((2, 3, 8, 10), -1.0)
    base_tpu = base_cpu.to("tpu")
    op(x, [6, 6], False, None, None, out=base_cpu[:, :, 1:7, 2:8])
    out_view = base_tpu[:, :, 1:7, 2:8]
    r = op(x.to("tpu"), [6, 6], False, None, None, out=out_view)
    assert r.data_ptr() == out_view.data_ptr()
    assert_close(base_tpu, base_cpu)
    # An empty out= is resized to the result's shape, as on CPU.
    out_cpu, out_tpu = torch.empty(0), torch.empty(0, device="tpu")
    op(x, [3, 5], True, None, None, out=out_cpu)
    op(x.to("tpu"), [3, 5], True, None, None, out=out_tpu)
    assert out_tpu.shape == out_cpu.shape == (2, 3, 3, 5)
    assert_close(out_tpu, out_cpu)


def test_multiple_out_tensors(fallback):
    wv = torch.empty(3, 3, device="tpu")
    vv = torch.ones(4, 3, 3, dtype=torch.bool, device="tpu")
    op = torch.ops.aten.fake_quantize_per_tensor_affine_cachemask.out
    ret = op(A.to("tpu"), 0.1, 3, -128, 127, out0=wv, out1=vv[1])
    w_cpu, v_cpu = torch.ops.aten.fake_quantize_per_tensor_affine_cachemask(A, 0.1, 3, -128, 127)
    assert not v_cpu.all()  # the mask has False entries, so the write is seen
    assert_close(wv, w_cpu)
    assert_close(vv[1], v_cpu)
    assert vv[0].all() and vv[2:].all()  # untouched
    assert ret[0] is wv or ret[0].data_ptr() == wv.data_ptr()
    # The out= overload is PyTorch's composite over the functional one.
    assert sum(n for op, n in torch_tpu.cpu_fallback_stats().items() if op.startswith(FQ)) == 1


def test_fused_eager_materialises_inputs(fallback):
    with torch_tpu.eager_mode("fused"):
        y = A.to("tpu") * 2 + 1  # deferred
        w = fake_quant(y)  # reads y on the host
        z = w.sum() + 1
        assert_close(z, fake_quant(A * 2 + 1).sum() + 1)


def test_torch_compile_lets_fallback_ops_through(fallback, fresh_dynamo):
    def f(a):
        return fake_quant(a * 2) + 1

    cf = torch.compile(f, backend="tpu")
    for _ in range(2):
        assert_close(cf(A.to("tpu")), f(A))
    stats = torch_tpu.cpu_fallback_stats()
    assert stats.get(FQ, 0) >= 2, stats


def test_torch_compile_without_fallback_raises_at_compile(fresh_dynamo):
    cf = torch.compile(lambda a: fake_quant(a * 2), backend="tpu")
    with pytest.raises(Exception, match="cpu_fallback"):
        cf(A.to("tpu"))


def test_environment_variable_turns_it_on():
    code = ("import torch, torch_tpu; assert torch_tpu.cpu_fallback_enabled(); "
            "a = torch.tensor([[2.0, 1.0], [1.0, 3.0]]); "
            "fq = lambda t: torch.fake_quantize_per_tensor_affine(t, 0.1, 3, -128, 127); "
            "assert torch.allclose(fq(a.to('tpu')).cpu(), fq(a)); "
            "print(torch_tpu.cpu_fallback_stats())")
    env = dict(os.environ, TORCH_TPU_CPU_FALLBACK="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "{'aten::fake_quantize_per_tensor_affine_cachemask': 1}" in r.stdout
