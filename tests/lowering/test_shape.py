"""Shape / indexing lowering rules: cat (and stack through it), index_select,
gather, flip, roll, tril, triu."""

import pytest
import torch
import torch.nn.functional as F

from utils import assert_close, check, make, noncontiguous

DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool]


# ---- cat / stack -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat(dtype, dim):
    a, b = make((2, 3), dtype), make((2, 3), dtype, seed=1)
    check(lambda a, b: torch.cat([a, b, a], dim), a, b)


def test_cat_shapes_and_noncontiguous():
    a, b = make((2, 3, 4)), make((2, 5, 4), seed=1)
    check(lambda a, b: torch.cat([noncontiguous(a), b], 1), a, b)
    check(lambda a, b: torch.cat([a[:, :, 1:3], b[:, :, ::2]], -2), a, b)
    check(lambda a: torch.cat([a]), a)
    check(lambda a, b: torch.cat((a, b.transpose(0, 1)[:3].transpose(0, 1)), dim=2), a, b)


def test_cat_empty_and_promotion():
    a = make((2, 3))
    check(lambda a, e: torch.cat([a, e, a]), a, torch.empty(0))
    check(lambda a, e: torch.cat([e, a], 1), a, torch.empty(2, 0))
    check(lambda e: torch.cat([e, e]), torch.empty(0))
    # Type promotion: float + int -> float, int32 + int64 -> int64, bool + int.
    check(lambda a, b: torch.cat([a, b]), a, make((2, 3), torch.int64))
    check(lambda a, b: torch.cat([a, b]), make((2, 3), torch.int32), make((1, 3), torch.int64))
    check(lambda a, b: torch.cat([a, b]), make((2, 3), torch.bool), make((1, 3), torch.int32))
    check(lambda a, b: torch.cat([a, b]), make((2,), torch.bfloat16), make((3,), torch.float32))


def test_cat_out():
    a, b = make((2, 3)), make((1, 3), seed=1)
    check(lambda a, b, o: torch.cat([a, b], out=o), a, b, torch.empty(3, 3))
    check(lambda a, b, o: torch.cat([a, b], out=o), a, b, torch.empty(0))


def test_cat_errors():
    a, b = make((2, 3)).to("tpu"), make((2, 4)).to("tpu")
    with pytest.raises(RuntimeError):
        torch.cat([a, b], 0)
    with pytest.raises(IndexError):
        torch.cat([a, a], 2)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_stack(dim):
    a, b = make((2, 3)), make((2, 3), seed=1)
    check(lambda a, b: torch.stack([a, noncontiguous(b), a], dim), a, b)
    check(lambda a, b: torch.stack([a[0], b[1]]), a, b)
    check(lambda a, b: torch.stack([a[0, 0], b[1, 1]]), a, b)


def test_cat_grad():
    a, b = make((2, 3)), make((4, 3), seed=1)
    ca, cb = a.clone().requires_grad_(), b.clone().requires_grad_()
    ta, tb = a.to("tpu").requires_grad_(), b.to("tpu").requires_grad_()
    g = make((6, 3), seed=2)
    torch.cat([ca, cb]).backward(g)
    torch.cat([ta, tb]).backward(g.to("tpu"))
    assert_close(ta.grad, ca.grad)
    assert_close(tb.grad, cb.grad)


# ---- index_select / gather ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_select(dtype):
    x = make((4, 5), dtype)
    idx = torch.tensor([3, 0, 0, 2])
    check(lambda x, i: torch.index_select(x, 0, i), x, idx)
    check(lambda x, i: torch.index_select(x, 1, i), x, idx)
    check(lambda x, i: torch.index_select(x, -1, i.int()), x, idx)


def test_index_select_edge_cases():
    x = make((4, 5, 2))
    check(lambda x, i: x.index_select(1, i), noncontiguous(x), torch.tensor([4, 1]))
    check(lambda x, i: x.index_select(0, i), x, torch.tensor(2))
    check(lambda x, i: x.index_select(0, i), x, torch.tensor([], dtype=torch.long))
    check(lambda x, i: x.index_select(0, i), torch.tensor(3.5), torch.tensor([0]))
    check(lambda x, i, o: torch.index_select(x, 2, i, out=o), x, torch.tensor([1, 1, 0]), torch.empty(0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dtype, dim):
    x = make((3, 4), dtype)
    g = torch.Generator().manual_seed(3)
    size = x.shape[dim]
    idx = torch.randint(0, size, (2, 3), generator=g)
    check(lambda x, i: torch.gather(x, dim, i), x, idx)


def test_gather_3d_and_scalar():
    x = make((2, 3, 4))
    idx = torch.randint(0, 3, (2, 5, 4), generator=torch.Generator().manual_seed(1))
    check(lambda x, i: torch.gather(x, 1, i), noncontiguous(x), idx)
    check(lambda x, i: torch.gather(x, 0, i), torch.tensor(2.0), torch.tensor(0))
    check(lambda x, i: torch.gather(x, 0, i), x, torch.zeros(0, 3, 4, dtype=torch.long))


# ---- flip / roll ------------------------------------------------------------------------------


@pytest.mark.parametrize("dims", [[0], [1], [-1, 0], []])
def test_flip(dims):
    x = make((3, 4, 2))
    check(lambda x: torch.flip(x, dims), x)
    check(lambda x: torch.flip(x, dims), noncontiguous(x))
    check(lambda x: torch.flip(x, dims), make((3, 4, 2), torch.int32))


def test_flip_scalar_and_bool():
    check(lambda x: torch.flip(x, [0]), torch.tensor(1.5))
    check(lambda x: torch.flip(x, [1]), make((2, 3), torch.bool))


@pytest.mark.parametrize("shifts,dims", [(1, 0), (-2, 1), (5, -1), ((1, 2), (0, 1)), (3, None), (-7, None)])
def test_roll(shifts, dims):
    x = make((3, 4))
    if dims is None:
        check(lambda x: torch.roll(x, shifts), x)
    else:
        check(lambda x: torch.roll(x, shifts, dims), x)
        check(lambda x: torch.roll(x, shifts, dims), noncontiguous(x))


def test_roll_dtypes():
    check(lambda x: torch.roll(x, 1, 0), make((5,), torch.int64))
    check(lambda x: torch.roll(x, 2), make((2, 3), torch.bool))


# ---- tril / triu ------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [torch.tril, torch.triu])
@pytest.mark.parametrize("diagonal", [0, 1, -1, 5, -5])
def test_tril_triu(fn, diagonal):
    check(lambda x: fn(x, diagonal), make((4, 5)))
    check(lambda x: fn(x, diagonal), make((2, 3, 3), torch.int64))


@pytest.mark.parametrize("fn", ["tril_", "triu_"])
def test_tril_triu_inplace_out(fn):
    check(lambda x: getattr(x, fn)(1), make((4, 4)))
    check(lambda x: getattr(x, fn)(), noncontiguous(make((3, 5))))
    check(lambda x, o: getattr(torch, fn[:-1])(x, out=o), make((3, 3), torch.bool), torch.empty(3, 3, dtype=torch.bool))


def test_causal_mask():
    n = 6
    check(lambda x: torch.triu(torch.full_like(x, float("-inf")), 1), torch.zeros(n, n))


def test_tril_grad():
    x = make((4, 4))
    c, t = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    g = make((4, 4), seed=1)
    torch.tril(c).backward(g)
    torch.tril(t).backward(g.to("tpu"))
    assert_close(t.grad, c.grad)


def test_constant_pad_and_repeat():
    x = make((2, 3))
    check(lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), x)
    check(lambda x: x.repeat(2, 3), x)
