"""Ops whose output shape depends on the data: nonzero, masked_select,
boolean-mask indexing, unique*, bincount, repeat_interleave. Each reads the
size from the device, then runs a program compiled for that size."""

import pytest
import torch
import torch_tpu

from utils import check, make


def _masked(shape, dtype, seed=0):
    x = make(shape, dtype, seed=seed)
    return x * (make(shape, torch.float32, seed=seed + 1) > 0).to(dtype)


@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 4), (2, 0, 3), (2, 3, 4)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_nonzero(shape, dtype):
    x = _masked(shape, dtype)
    check(torch.nonzero, x)
    check(lambda t: torch.nonzero(t, as_tuple=True), x)
    check(torch.argwhere, x)


def test_nonzero_static_pads_and_truncates():
    x = _masked((4, 5), torch.float32)
    for size in (0, 3, 40):
        check(lambda t: torch.nonzero_static(t, size=size, fill_value=-7), x)


@pytest.mark.parametrize("shape", [(10,), (3, 4), (2, 3, 4)])
def test_masked_select_and_mask_indexing(shape):
    x = make(shape, torch.float32)
    mask = make(shape, torch.float32, seed=3) > 0
    check(torch.masked_select, x, mask)
    check(lambda t, m: t[m], x, mask)
    check(lambda t, m: t[m.reshape(m.shape[0], -1)[:, 0]], x, mask)  # mask over the leading dim only
    # Broadcast mask.
    check(torch.masked_select, x, mask[..., :1])
    # out=: resized from empty, and into a strided view of the right size.
    check(lambda t, m: torch.masked_select(t, m, out=torch.empty(0, device=t.device)), x, mask)
    n = int(mask.sum())
    check(lambda t, m: torch.masked_select(t, m, out=torch.zeros(n, 2, device=t.device)[:, 0]), x, mask)


def test_mask_assignment_and_accumulate():
    x = make((4, 6), torch.float32)
    mask = make((4, 6), torch.float32, seed=5) > 0

    def assign(t, m):
        t = t.clone()
        t[m] = 3.0
        t[m[:, 0]] += 1.0
        return t

    check(assign, x, mask)


def test_mask_shape_mismatch_raises_index_error():
    x = torch.zeros(3, 4, device="tpu")
    with pytest.raises(IndexError, match="does not match the shape"):
        x[torch.ones(3, 5, dtype=torch.bool, device="tpu")]


def test_masked_select_gradient():
    x = make((3, 4), torch.float32).requires_grad_()
    mask = make((3, 4), torch.float32, seed=3) > 0
    xt = x.detach().to("tpu").requires_grad_()
    torch.masked_select(x, mask).sum().backward()
    torch.masked_select(xt, mask.to("tpu")).sum().backward()
    torch.testing.assert_close(xt.grad.cpu(), x.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16])
@pytest.mark.parametrize("kw", [{}, {"return_inverse": True, "return_counts": True}])
def test_unique(dtype, kw):
    x = (make((5, 6), torch.float32) * 3).round().to(dtype)
    check(lambda t: torch.unique(t, **kw), x)
    check(lambda t: torch.unique_consecutive(t, **kw), x)
    check(lambda t: torch.unique(t, dim=1, **kw), x)
    check(lambda t: torch.unique_consecutive(t, dim=0, **kw), x)


def test_unique_negative_zero_and_empty():
    check(torch.unique, torch.tensor([0.0, -0.0, 1.0, -0.0]))
    check(lambda t: torch.unique(t, return_inverse=True, return_counts=True), torch.zeros(0))


@pytest.mark.parametrize("weights", [None, torch.float32, torch.float64])
def test_bincount(weights):
    x = torch.tensor([3, 1, 2, 3, 1, 1, 5])
    w = None if weights is None else make((7,), weights)
    check(lambda t, *ws: torch.bincount(t, *ws), x, *([] if w is None else [w]))
    check(lambda t: torch.bincount(t, minlength=10), x)
    check(lambda t: torch.bincount(t), torch.zeros(0, dtype=torch.int64))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32])
def test_bincount_of_small_integer_types(dtype):
    # scatter's index must be int32/int64; bincount takes any integer type
    x = torch.tensor([3, 1, 2, 3, 1, 1, 5], dtype=dtype)
    check(torch.bincount, x)
    check(lambda t, w: torch.bincount(t, w), x, make((7,)))


def test_bincount_rejects_negative():
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.bincount(torch.tensor([1, -1], device="tpu"))


def test_repeat_interleave():
    check(torch.repeat_interleave, torch.tensor([1, 0, 3, 2]))
    x = make((3, 4), torch.float32)
    check(lambda t, r: torch.repeat_interleave(t, r, dim=0), x, torch.tensor([2, 0, 1]))
    check(lambda t: t.repeat_interleave(2, dim=1), x)
    with pytest.raises(RuntimeError, match="negative"):
        torch.repeat_interleave(torch.tensor([1, -1], device="tpu"))


def test_each_size_compiles_once():
    x = torch.tensor([1.0, 0.0, 2.0, 0.0], device="tpu")
    torch.nonzero(x)
    before = torch_tpu._C._compile_count()
    torch.nonzero(x * 3)          # same size: nothing new
    torch.nonzero(x.flip(0))
    assert torch_tpu._C._compile_count() - before <= 2  # mul and flip only
    before = torch_tpu._C._compile_count()
    torch.nonzero(torch.ones(4, device="tpu"))  # new size: the fixed-size program only
    assert torch_tpu._C._compile_count() - before <= 2  # ones fill + nonzero_static
