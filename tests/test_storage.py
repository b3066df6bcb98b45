"""Storage and views: views share storage, writes through one are seen by
the others, in-place and out= update the storage, memory is released."""

import gc

import pytest
import torch

from utils import assert_close, make


def test_view_write_is_seen_by_base():
    x = make((4, 6))
    cpu = x.clone()
    t = x.to("tpu")
    v = t[1:3, ::2]
    v.add_(10)
    cpu[1:3, ::2].add_(10)
    assert_close(t, cpu)


def test_base_write_is_seen_by_view():
    t = torch.zeros(3, 4, device="tpu")
    col = t[:, 1]
    row = t.view(12)
    t.fill_(2)
    assert col.cpu().tolist() == [2.0, 2.0, 2.0]
    t[0, 1] = 5  # index_put / copy_ into a select view
    assert col[0].item() == 5
    assert row[1].item() == 5


def test_views_are_metadata_only():
    t = torch.ones(4, 4, device="tpu")
    before = torch.tpu.memory_allocated()
    views = [t.t(), t.view(16), t[1:], t.unsqueeze(0), t.expand(2, 4, 4), t.permute(1, 0), t.transpose(0, 1)]
    assert torch.tpu.memory_allocated() == before
    for v in views:
        assert v.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()


def test_data_ptrs_unique_and_stable():
    a = torch.ones(10, device="tpu")
    b = torch.ones(10, device="tpu")
    pa = a.data_ptr()
    a.add_(1)
    assert a.data_ptr() == pa
    assert a.data_ptr() != b.data_ptr()
    assert a[3:].data_ptr() == pa + 3 * 4


def test_out_and_resize():
    out = torch.empty(0, device="tpu")
    a, b = make((3, 4)), make((3, 4), seed=1)
    torch.add(a.to("tpu"), b.to("tpu"), out=out)
    assert out.shape == (3, 4)
    assert_close(out, a + b)


def test_partial_overlap_in_place_raises_like_cpu():
    x = make((5, 5))
    with pytest.raises(RuntimeError) as cpu_err:
        x.t().add_(x)
    t = x.to("tpu")
    with pytest.raises(type(cpu_err.value), match="single memory location"):
        t.t().add_(t)
    assert_close(t, x)


def test_write_through_transposed_view():
    x = make((4, 5))
    t = x.to("tpu")
    t.t().copy_(x.t() * 3)
    assert_close(t, x * 3)


@pytest.mark.parametrize("case", ["result_keeps_transposed_strides", "channels_last", "permuted_block_at_offset",
                                  "size1_dims", "int64_in_place", "strided_not_dense"])
def test_write_through_dense_permutation(case):
    # Writes whose destination is a permutation of a dense block (lowered as
    # transpose + contiguous write, view.cpp) and one that is not (scatter).
    x = make((8, 6, 4, 5))

    def run(d):
        if case == "result_keeps_transposed_strides":  # elementwise output takes the input's strides
            return x.to(d).transpose(1, 2) * 0.5
        if case == "channels_last":
            return x.to(d).contiguous(memory_format=torch.channels_last) + 1
        if case == "permuted_block_at_offset":
            t = torch.zeros(3, 8, 6, 4, 5, device=d)
            t[1].permute(2, 0, 3, 1).copy_(x.to(d).permute(2, 0, 3, 1) - 2)
            return t
        if case == "size1_dims":
            t = torch.zeros(5, 1, 7, device=d)
            t.permute(2, 1, 0).copy_(torch.arange(35.0).view(7, 1, 5).to(d))
            return t
        if case == "int64_in_place":
            t = torch.arange(120, device=d).view(4, 5, 6)
            t.transpose(0, 2).mul_(3)
            return t
        t = torch.zeros(6, 10, 12, device=d)
        t[:, ::2].transpose(0, 1).add_(x.reshape(5, 6, 32)[..., :12].to(d))
        return t

    cpu, tpu = run("cpu"), run("tpu")
    assert tpu.stride() == cpu.stride()
    assert torch.equal(tpu.cpu(), cpu)


def test_memory_released_after_del():
    torch.tpu.synchronize()
    gc.collect()
    start = torch.tpu.memory_allocated()
    t = torch.ones(1024, 256, device="tpu")
    assert torch.tpu.memory_allocated() == start + 1024 * 256 * 4
    peak = torch.tpu.max_memory_allocated()
    assert peak >= start + 1024 * 256 * 4
    del t
    gc.collect()
    assert torch.tpu.memory_allocated() == start
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == start
    stats = torch.tpu.memory_stats()
    assert stats["allocated_bytes.all.current"] == start
    torch.tpu.empty_cache()


def test_empty_then_partial_write_reads_zeros_elsewhere():
    # An unwritten storage has defined (zero) contents on tpu.
    t = torch.empty(4, device="tpu")
    t[1:3].fill_(1)
    assert t[1:3].cpu().tolist() == [1.0, 1.0]


def test_out_view_keeps_its_strides_through_composite_out_kernels():
    # softmax.int_out and ones/zeros(out=) resize a non-contiguous out to its
    # own sizes, then copy into it: resize_ to the same sizes must keep the
    # strides (as on CPU), or the tensor the out views sees the result
    # scrambled (it did: o restrided to (5, 1) under base).
    x = torch.randn(4, 5)
    for fn in (lambda o, d: torch.softmax(x.to(d), 1, out=o), lambda o, d: torch.log_softmax(x.to(d), 1, out=o),
               lambda o, d: torch.zeros((4, 5), out=o)):
        results = []
        for d in ("cpu", "tpu"):
            base = torch.full((5, 4), 7.0, device=d)
            o = base.t()
            fn(o, d)
            assert o.stride() == (1, 4)
            results.append(base.cpu())
        torch.testing.assert_close(results[1], results[0])
    t = torch.empty(2, 3, device="tpu").t()
    t.resize_(4, 5)  # new sizes: contiguous, as on CPU
    assert t.stride() == (5, 1)
