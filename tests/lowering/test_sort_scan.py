"""Sorting, selection, scans and searches on tpu against PyTorch CPU: sort
(argsort, msort), topk, kthvalue, median, nanmedian, mode, cummax, cummin,
logcumsumexp, searchsorted, bucketize, histc, _aminmax, allclose.

Inputs avoid ties where PyTorch CPU leaves the index of equal elements
unspecified (its unstable sort, topk, kthvalue and mode)."""

import pytest
import torch

from utils import check, check_grad, make, noncontiguous

F32, BF16, I64, BOOL = torch.float32, torch.bfloat16, torch.int64, torch.bool


def distinct(shape, dtype=F32, seed=0):
    """Values without ties (a permutation), in `dtype`."""
    n = 1
    for s in shape:
        n *= s
    g = torch.Generator().manual_seed(seed)
    return (torch.randperm(n, generator=g) - n // 2).reshape(shape).to(dtype)


def with_nans(shape, seed=0):
    x = distinct(shape, F32, seed) / 4
    flat = x.view(-1)
    if flat.numel() > 2:
        flat[1] = float("nan")
        flat[-1] = float("nan")
    return x


# ---- sort ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, BF16, I64])
@pytest.mark.parametrize("shape", [(), (1,), (7,), (2, 3, 4)])
def test_sort(shape, dtype):
    x = distinct(shape, dtype)
    for d in sorted({0, -1, len(shape) // 2} if shape else {0}):
        check(lambda t: torch.sort(t, d, descending=d == 0), x)


def test_sort_nan_stable_bool_noncontig_out():
    x = with_nans((4, 6))
    x[0, 2] = -0.0
    x[0, 3] = 0.0
    x[2] = float("inf")  # ties: stable sort keeps input order
    check(lambda t: torch.sort(t, dim=1, stable=True), x)
    check(lambda t: torch.sort(t, dim=1, descending=True, stable=True), x)
    check(lambda t: torch.sort(t, dim=0, stable=True), x)
    b = make((3, 8), BOOL)
    check(lambda t: torch.sort(t, dim=1, stable=True), b)
    check(lambda t: torch.sort(t, dim=-1, descending=True, stable=True), b)
    ties = make((4, 9), I64, low=0, high=3)
    check(lambda t: torch.sort(t, dim=1, stable=True), ties)
    check(lambda t: torch.argsort(t, dim=1, stable=True, descending=True), ties)
    check(lambda t: torch.sort(t, 0), noncontiguous(distinct((4, 5))))
    check(lambda t: torch.sort(t, 0), torch.zeros(0, 3))
    check(lambda t, v, i: torch.sort(t, 1, out=(v, i)), distinct((3, 4)), torch.empty(0), torch.empty(0, dtype=I64))
    check(lambda t: torch.argsort(t, 0), distinct((5, 2)))
    check(torch.msort, distinct((5, 2), BF16))


def test_sort_grad():
    check_grad(lambda t: torch.sort(t, 1)[0], distinct((3, 5)))
    check_grad(lambda t: torch.sort(t, 0, descending=True)[0], distinct((3, 5)))


# ---- topk / kthvalue ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, BF16, I64])
def test_topk(dtype):
    x = distinct((4, 6), dtype)
    for k, d, largest in [(1, 1, True), (3, 1, False), (4, 0, True), (0, 1, True), (6, -1, False)]:
        check(lambda t: torch.topk(t, k, d, largest), x)
    check(lambda t: torch.topk(t, 1), distinct((), dtype))
    check(lambda t: torch.topk(t, 2, 0), noncontiguous(distinct((4, 3), dtype)))


def test_topk_nan_out_grad():
    x = with_nans((3, 7))
    check(lambda t: torch.topk(t, 3, 1), x)
    check(lambda t: torch.topk(t, 3, 1, largest=False), x)
    check(lambda t, v, i: torch.topk(t, 2, out=(v, i)), distinct((3, 4)), torch.empty(0), torch.empty(0, dtype=I64))
    check_grad(lambda t: torch.topk(t, 2, 1)[0], distinct((3, 5)))


@pytest.mark.parametrize("dtype", [F32, BF16, I64])
def test_kthvalue(dtype):
    x = distinct((4, 6), dtype)
    for k, d, keep in [(1, 1, False), (3, 1, True), (4, 0, False), (6, -1, False)]:
        check(lambda t: torch.kthvalue(t, k, d, keep), x)
    check(lambda t: torch.kthvalue(t, 1), distinct((), dtype))
    check(lambda t: torch.kthvalue(t, 2, 0), noncontiguous(distinct((4, 3), dtype)))


def test_kthvalue_nan_errors_grad():
    check(lambda t: torch.kthvalue(t, 6, 1), with_nans((3, 7)))
    check(lambda t, v, i: torch.kthvalue(t, 2, out=(v, i)), distinct((3, 4)), torch.empty(0), torch.empty(0, dtype=I64))
    with pytest.raises(RuntimeError, match="out of range"):
        torch.kthvalue(make((2, 3)).to("tpu"), 4, 1)
    check_grad(lambda t: torch.kthvalue(t, 2, 1)[0], distinct((3, 5)))


# ---- median / nanmedian / mode ------------------------------------------------------------------


@pytest.mark.parametrize("op", [torch.median, torch.nanmedian])
@pytest.mark.parametrize("dtype", [F32, BF16, I64])
def test_median(op, dtype):
    for shape in [(), (6,), (2, 3, 4)]:
        x = make(shape, dtype)  # ties are fine: CPU picks the lowest index
        check(op, x)
        check(lambda t: op(t, 0), x)
        check(lambda t: op(t, -1, keepdim=True), x)


@pytest.mark.parametrize("op", [torch.median, torch.nanmedian])
def test_median_nan_noncontig_out_grad(op):
    x = with_nans((4, 7))
    check(op, x)
    check(lambda t: op(t, 1), x)
    check(lambda t: op(t, 0), x)
    x[2] = float("nan")  # a row of NaNs only (nanmedian's index there is CPU's nth_element accident)
    check(op, x)
    check(lambda t: op(t, 1)[0], x)
    check(lambda t: op(t, 0), noncontiguous(make((4, 5))))
    check(lambda t, v, i: op(t, 1, out=(v, i)), make((3, 4)), torch.empty(0), torch.empty(0, dtype=I64))
    check_grad(lambda t: op(t, 1)[0], distinct((3, 5)))
    check_grad(op, distinct((3, 5)))


@pytest.mark.parametrize("dtype", [F32, BF16, I64, BOOL])
def test_mode(dtype):
    # CPU gives the smallest of the most frequent values and (for short
    # rows) the index of its last occurrence.
    x = make((4, 9), dtype, low=0, high=3)
    check(lambda t: torch.mode(t, 1), x)
    check(lambda t: torch.mode(t, 0, keepdim=True), x)
    check(lambda t: torch.mode(t), make((), dtype))
    check(lambda t: torch.mode(t, 0), noncontiguous(make((5, 3), dtype, low=0, high=2)))


def test_mode_grad():
    # (mode's out= form is a CPU/CUDA-only composite that never reaches the engine.)
    check_grad(lambda t: torch.mode(t, 1)[0], torch.tensor([[1.0, 2.0, 2.0, 3.0], [5.0, 4.0, 4.0, 4.0]]))


# ---- cummax / cummin / logcumsumexp ------------------------------------------------------------------


@pytest.mark.parametrize("op", [torch.cummax, torch.cummin])
@pytest.mark.parametrize("dtype", [F32, BF16, I64, BOOL])
def test_cummax_cummin(op, dtype):
    for shape in [(), (9,), (2, 3, 4)]:
        x = make(shape, dtype, low=-2, high=2)  # ties: the last index wins
        check(lambda t: op(t, 0), x)
        check(lambda t: op(t, -1), x)


@pytest.mark.parametrize("op", [torch.cummax, torch.cummin])
def test_cummax_cummin_nan_out_grad(op):
    x = with_nans((3, 8))
    x[1, 4] = float("nan")
    check(lambda t: op(t, 1), x)
    check(lambda t: op(t, 0), noncontiguous(make((4, 5))))
    check(lambda t: op(t, 0), torch.zeros(0, 3))
    check(lambda t, v, i: op(t, 1, out=(v, i)), make((3, 4)), torch.empty(0), torch.empty(0, dtype=I64))
    check_grad(lambda t: op(t, 1)[0], distinct((3, 5)))


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_logcumsumexp(dtype):
    for shape in [(), (9,), (2, 3, 4)]:
        x = make(shape, dtype, low=-20, high=20)
        check(lambda t: torch.logcumsumexp(t, 0), x)
        check(lambda t: torch.logcumsumexp(t, -1), x)


def test_logcumsumexp_special_out_grad():
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[-inf, -inf, 0.0, inf, 1.0], [1.0, nan, 2.0, -inf, 3.0], [-inf, inf, -inf, inf, 0.0]])
    check(lambda t: torch.logcumsumexp(t, 1), x)
    check(lambda t: torch.logcumsumexp(t, 0), noncontiguous(make((4, 5))))
    # out= needs a right-sized out (_logcumsumexp has no meta kernel to resize it).
    check(lambda t, o: torch.logcumsumexp(t, 1, out=o), make((3, 4)), torch.empty(3, 4))
    check(lambda t: torch.logcumsumexp(t, 0), torch.zeros(0, 3))
    check(lambda t: torch.logcumsumexp(t, 0), make((300,), low=-50, high=50), atol=1e-4, rtol=1e-5)
    check_grad(lambda t: torch.logcumsumexp(t, 1), make((3, 6)), atol=1e-4, rtol=1e-4)


# ---- searchsorted / bucketize / histc -------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, BF16, I64])
def test_searchsorted(dtype):
    seq1 = torch.sort(make((10,), dtype, low=-5, high=5))[0]  # with repeats
    seqn = torch.sort(make((3, 4, 7), dtype, low=-5, high=5), -1)[0]
    vals = make((3, 4, 5), dtype, low=-6, high=6)
    for kw in [{}, dict(right=True), dict(side="left", out_int32=True)]:
        check(lambda s, v: torch.searchsorted(s, v, **kw), seq1, vals)
        check(lambda s, v: torch.searchsorted(s, v, **kw), seqn, vals)
    check(lambda s: torch.searchsorted(s, 2), seq1)
    check(lambda s, v: torch.searchsorted(s, v), seq1, noncontiguous(vals))
    check(lambda s, v: torch.searchsorted(s, v), torch.zeros(0, dtype=dtype), vals)


def test_searchsorted_sorter_nan_out():
    s = make((3, 8))
    sorter = torch.argsort(s, -1)
    v = make((3, 5))
    check(lambda s, v, o: torch.searchsorted(s, v, sorter=o), s, v, sorter)
    check(lambda s, v, o: torch.searchsorted(s, v, right=True, sorter=o), s, v, sorter)
    seq = torch.tensor([-1.0, 0.0, 2.0, float("nan")])
    check(lambda s, v: torch.searchsorted(s, v), seq, torch.tensor([float("nan"), 1.0, 3.0, -2.0]))
    check(lambda s, v, o: torch.searchsorted(s, v, out=o), seq, make((4,)), torch.empty(0, dtype=I64))


# CPU refuses a sorter entry outside the row; the gather clamped it and
# answered silently.
@pytest.mark.parametrize("bad", [5, -1])
def test_searchsorted_sorter_out_of_range_raises(bad):
    seq, vals, sorter = torch.tensor([3.0, 1.0]), torch.tensor([2.0]), torch.tensor([0, bad])
    with pytest.raises(RuntimeError, match="sorter index out of range"):
        torch.searchsorted(seq, vals, sorter=sorter)
    with pytest.raises(RuntimeError, match="searchsorted.*out of bounds"):
        torch.searchsorted(seq.to("tpu"), vals.to("tpu"), sorter=sorter.to("tpu")).cpu()


@pytest.mark.parametrize("dtype", [F32, BF16, I64])
def test_bucketize(dtype):
    bounds = torch.sort(make((8,), dtype, low=-5, high=5))[0]
    x = make((4, 6), dtype, low=-6, high=6)
    check(lambda t, b: torch.bucketize(t, b), x, bounds)
    check(lambda t, b: torch.bucketize(t, b, right=True, out_int32=True), x, bounds)
    check(lambda b: torch.bucketize(3, b), bounds)
    check(lambda t, b: torch.bucketize(t, b), make((), dtype), bounds)
    with pytest.raises(RuntimeError, match="1 dimension"):
        torch.bucketize(x.to("tpu"), make((2, 3), dtype).to("tpu"))


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_histc(dtype):
    x = make((200,), dtype, low=-4, high=4)
    check(torch.histc, x)
    check(lambda t: torch.histc(t, 7, -2, 3), x)
    check(lambda t: torch.histc(t, 5, 1, 1), x)  # min == max: the data's range
    check(lambda t: torch.histc(t, 3), torch.full((5,), 2.0, dtype=dtype))  # one value: [v-1, v+1]
    check(lambda t: torch.histc(t, 4), noncontiguous(make((6, 5), dtype)))
    check(lambda t: torch.histc(t, 4, 0, 1), torch.tensor([0.0, 0.25, 0.5, 1.0, 1.5, float("nan"), -1.0], dtype=dtype))
    check(lambda t, o: torch.histc(t, 6, out=o), x, torch.empty(0, dtype=dtype))
    check(lambda t: torch.histc(t, 4), torch.zeros(0, dtype=dtype))


# ---- misc -------------------------------------------------------------------------------------


def test_aminmax_allclose():
    x = make((3, 4))
    check(lambda t: torch._aminmax(t), x)
    check(lambda t: torch._aminmax(t, 1, True), x)
    y = x + 1e-7
    assert torch.allclose(x.to("tpu"), y.to("tpu")) == torch.allclose(x, y)
    assert torch.allclose(x.to("tpu"), (x + 1).to("tpu")) == torch.allclose(x, x + 1)
