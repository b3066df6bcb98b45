"""The opt-in CPU fallback (exec/cpu_fallback.*): ops with no tpu lowering
run on the CPU through PyTorch's at::native::cpu_fallback when
torch_tpu.cpu_fallback(True) or TORCH_TPU_CPU_FALLBACK=1 says so, and raise
NotImplementedError (saying how to turn it on) otherwise. Results are
compared with CPU; out= results written through views must leave the rest of
the base untouched, as on CPU.

Ops used (no lowering rule, no composite: `_C._lowered_ops()` lacks them):
aten::_linalg_eigvals, aten::linalg_eig (two outputs, and its out= form),
aten::_upsample_lanczos2d_aa.out (out=). No in-place ATen op lacks a rule;
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

A = torch.tensor([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.5, 0.0, 4.0]])


@pytest.fixture
def fallback():
    torch_tpu.reset_cpu_fallback_stats()
    with torch_tpu.cpu_fallback(True):
        yield
    torch_tpu.reset_cpu_fallback_stats()


def test_off_by_default_names_op_and_switch():
    assert not torch_tpu.cpu_fallback_enabled()
    with pytest.raises(NotImplementedError) as e:
        torch.linalg.eigvals(A.to("tpu"))
    msg = str(e.value)
    assert "aten::_linalg_eigvals" in msg
    assert "torch_tpu.cpu_fallback(True)" in msg and "TORCH_TPU_CPU_FALLBACK=1" in msg


def test_runs_on_cpu_warns_once_and_counts(fallback):
    with pytest.warns(UserWarning, match="aten::_linalg_eigvals has no tpu lowering; running it on the CPU"):
        w = torch.linalg.eigvals(A.to("tpu"))
    assert w.device.type == "tpu"
    assert_close(w, torch.linalg.eigvals(A))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second warning would raise
        w2 = torch.linalg.eigvals(A.to("tpu") * 2)
    assert_close(w2, torch.linalg.eigvals(A * 2))
    assert torch_tpu.cpu_fallback_stats() == {"aten::_linalg_eigvals": 2}


def test_multiple_outputs_and_view_inputs(fallback):
    big = torch.arange(25.0).view(5, 5) / 7 + torch.eye(5)
    view = big.to("tpu")[1:4, 1:4].t()  # a transposed slice: strided, offset
    assert not view.is_contiguous()
    w, v = torch.linalg.eig(view)
    w_cpu, v_cpu = torch.linalg.eig(big[1:4, 1:4].t())
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
    wv = torch.empty(3, dtype=torch.complex64, device="tpu")
    vv = torch.zeros(4, 3, dtype=torch.complex64, device="tpu")
    ret = torch.linalg.eig(A.to("tpu"), out=(wv, vv[1:]))
    w_cpu, v_cpu = torch.linalg.eig(A)
    assert_close(wv, w_cpu)
    assert_close(vv[1:], v_cpu)
    assert_close(vv[0], torch.zeros(3, dtype=torch.complex64))  # untouched row
    assert ret[0] is wv or ret[0].data_ptr() == wv.data_ptr()
    assert torch_tpu.cpu_fallback_stats()["aten::linalg_eig.out"] == 1


def test_fused_eager_materialises_inputs(fallback):
    with torch_tpu.eager_mode("fused"):
        y = A.to("tpu") * 2 + 1  # deferred
        w = torch.linalg.eigvals(y)  # reads y on the host
        z = w.real.sum() + 1
        assert_close(z, torch.linalg.eigvals(A * 2 + 1).real.sum() + 1)


def test_torch_compile_lets_fallback_ops_through(fallback, fresh_dynamo):
    def f(a):
        return torch.linalg.eigvals(a * 2).real + 1

    cf = torch.compile(f, backend="tpu")
    for _ in range(2):
        assert_close(cf(A.to("tpu")), f(A))
    stats = torch_tpu.cpu_fallback_stats()  # AOTAutograd decomposes eigvals into linalg_eig
    assert stats.get("aten::linalg_eig", 0) + stats.get("aten::_linalg_eigvals", 0) >= 2, stats


def test_torch_compile_without_fallback_raises_at_compile(fresh_dynamo):
    cf = torch.compile(lambda a: torch.linalg.eigvals(a * 2).real, backend="tpu")
    with pytest.raises(Exception, match="cpu_fallback"):
        cf(A.to("tpu"))


def test_environment_variable_turns_it_on():
    code = ("import torch, torch_tpu; assert torch_tpu.cpu_fallback_enabled(); "
            "a = torch.tensor([[2.0, 1.0], [1.0, 3.0]]); "
            "assert torch.allclose(torch.linalg.eigvals(a.to('tpu')).cpu(), torch.linalg.eigvals(a)); "
            "print(torch_tpu.cpu_fallback_stats())")
    env = dict(os.environ, TORCH_TPU_CPU_FALLBACK="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "{'aten::_linalg_eigvals': 1}" in r.stdout
