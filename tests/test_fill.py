"""Constant fills of a whole tensor (csrc/exec/fill.*): `zero_` and
`fill_.Scalar` (torch.zeros, ones, full, zeros_like, an optimizer's state)
are made on the host and handed to the device in Strict Eager, so a shape
never seen before compiles no program. Every value is checked against CPU,
for every dtype; views that do not cover their storage keep the program path
and must leave the rest of the storage alone. In Fused Eager a fill stays in
its trace (the host path is not taken), with the same values."""

import pytest
import torch

import torch_tpu
from torch_tpu import _C

FUSED = torch_tpu.get_eager_mode() == "fused"

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128]
# A value each dtype holds exactly (as CPU converts it).
VALUES = {torch.bool: True, torch.uint8: 200, torch.int8: -7, torch.int16: -300, torch.int32: 1 << 20,
          torch.int64: -(1 << 40), torch.float16: 1.5, torch.bfloat16: -2.25, torch.float32: 3.1,
          torch.float64: -1e300, torch.complex64: complex(1.5, -2), torch.complex128: complex(-1e200, 3)}


def counts():
    return _C._compile_count(), _C._host_fills()


def same(t, ref):
    got = t.cpu()
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert torch.equal(got, ref), (got, ref)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_factories_equal_cpu_and_compile_nothing(dtype):
    # A shape no other test uses, per dtype: a program path would compile.
    shape = (3, 5 + DTYPES.index(dtype))
    v = VALUES[dtype]
    c0, h0 = counts()
    z = torch.zeros(shape, dtype=dtype, device="tpu")
    o = torch.ones(shape, dtype=dtype, device="tpu")
    f = torch.full(shape, v, dtype=dtype, device="tpu")
    zl = torch.zeros_like(f)
    c1, h1 = counts()
    same(z, torch.zeros(shape, dtype=dtype))
    same(o, torch.ones(shape, dtype=dtype))
    same(f, torch.full(shape, v, dtype=dtype))
    same(zl, torch.zeros(shape, dtype=dtype))
    if not FUSED:
        assert c1 == c0, "a whole-tensor fill compiled a program"
        assert h1 - h0 == 4


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_in_place_fill_of_written_tensor(dtype):
    cpu = torch.arange(24).reshape(4, 6).to(dtype)
    t = cpu.to("tpu")
    v = VALUES[dtype]
    c0, h0 = counts()
    t.fill_(v)
    cpu.fill_(v)
    same(t, cpu)
    t.zero_()
    cpu.zero_()
    same(t, cpu)
    c1, h1 = counts()
    if not FUSED:
        assert (c1, h1 - h0) == (c0, 2)
    # Still an ordinary tensor afterwards: ops read the filled buffer.
    same(t + t, cpu + cpu)


def test_large_fills_equal_cpu():
    # Past the allocator's mmap threshold: zero pages, and the doubling copy.
    n = (1 << 20) + 3
    z = torch.zeros(n, device="tpu")
    f = torch.full((n,), -0.5, dtype=torch.float64, device="tpu")
    assert z.cpu().abs().sum().item() == 0
    assert torch.equal(f.cpu(), torch.full((n,), -0.5, dtype=torch.float64))
    assert (f * 2).sum().item() == -n


def test_views_keep_the_program_path():
    cpu = torch.arange(40, dtype=torch.float32).reshape(5, 8)
    t = cpu.to("tpu")
    h0 = _C._host_fills()
    t[1:3].fill_(7)  # a slice: the rest of the storage stays
    cpu[1:3].fill_(7)
    t[:, ::2].zero_()  # strided
    cpu[:, ::2].zero_()
    same(t, cpu)
    # The whole storage, but not in row-major order: the program path too.
    t.t().fill_(-3)
    cpu.t().fill_(-3)
    same(t, cpu)
    assert _C._host_fills() == h0


def test_dtype_view_of_storage():
    # A float view of a complex storage (view_as_real) filled whole: the
    # complex tensor reads the filled bytes.
    cpu = torch.randn(6, dtype=torch.complex64)
    t = cpu.to("tpu")
    r = torch.view_as_real(t)
    r.fill_(1.25)
    torch.view_as_real(cpu).fill_(1.25)
    same(t, cpu)
    same(r, torch.view_as_real(cpu))


def test_empty_and_zero_dim():
    e = torch.zeros(0, 3, device="tpu")
    same(e, torch.zeros(0, 3))
    s = torch.full((), 4.5, device="tpu")
    same(s, torch.full((), 4.5))
    assert s.item() == 4.5


def test_value_errors_as_cpu():
    t = torch.empty(3, dtype=torch.uint8, device="tpu")
    with pytest.raises(RuntimeError) as cpu_err:
        torch.empty(3, dtype=torch.uint8).fill_(300)
    with pytest.raises(RuntimeError) as tpu_err:
        t.fill_(300)
    assert str(tpu_err.value) == str(cpu_err.value)


def test_autograd_of_filled_tensor():
    w = torch.ones(4, 3, device="tpu", requires_grad=True)
    (w * 2).sum().backward()
    same(w.grad, torch.full((4, 3), 2.0))
    w.grad.zero_()
    same(w.grad, torch.zeros(4, 3))


def test_fused_trace_keeps_its_fill():
    # Inside a Fused Eager trace the fill is one of the trace's ops (XLA
    # folds it into its readers): the host path is not taken.
    x = torch.randn(5, 7)
    t = x.to("tpu")
    h0 = _C._host_fills()
    with torch_tpu.eager_mode("fused"):
        z = torch.zeros(5, 7, device="tpu")
        z.add_(t)
        o = torch.ones_like(z).mul_(3)
        r = z + o
        torch_tpu.mark_step()
    assert _C._host_fills() == h0
    same(r, x + 3)


def test_fused_result_buffers_compile_no_zeros_program():
    # A fused program writes large results into recycled or new buffers
    # (donation.h): the new ones are made on the host, so the only XLA
    # compile here is the fused program itself.
    n = 96 * 1024 + 5  # floats: above the donation threshold, a size no other test uses
    x = torch.randn(n)
    t = x.to("tpu")
    torch.tpu.synchronize()
    c0 = _C._compile_count()
    f0 = _C._fusion_stats()["compiles"]
    with torch_tpu.eager_mode("fused"):
        a = (t * 2).sin()
        b = a + 1
        torch_tpu.mark_step()
    torch.tpu.synchronize()
    fused = _C._fusion_stats()["compiles"] - f0
    assert fused == 1
    assert _C._compile_count() - c0 == fused
    torch.testing.assert_close(b.cpu(), (x * 2).sin() + 1)
    torch.testing.assert_close(a.cpu(), (x * 2).sin())
