"""Convolutions and pooling on tpu against PyTorch CPU: conv1d/2d/3d and
their transposes (stride, padding, dilation, groups, output_padding, bias)
with input/weight/bias gradients; max/avg/adaptive/fractional pools with
indices and gradients; max_unpool."""

import pytest
import torch
import torch.nn.functional as F

from utils import check, check_grad, make, noncontiguous

F32, BF16 = torch.float32, torch.bfloat16
BF16_TOL = dict(atol=6e-2, rtol=3e-2)


def tol(dtype):
    return BF16_TOL if dtype == BF16 else dict(atol=1e-4, rtol=1e-4)


# ---- convolution ---------------------------------------------------------------

CONV_CASES = [
    # (nd, in_shape, weight_shape, kwargs)
    (1, (2, 4, 9), (6, 2, 3), dict(stride=2, padding=1, groups=2)),
    (2, (2, 4, 7, 6), (6, 2, 3, 2), dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)),
    (2, (1, 3, 5, 5), (4, 3, 3, 3), dict(padding="same")),
    (3, (1, 2, 4, 5, 6), (3, 2, 2, 3, 2), dict(stride=2, padding=1)),
]
CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
CONVT = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv(case, dtype):
    nd, xs, ws, kw = CONV_CASES[case]
    x, w, b = make(xs, dtype), make(ws, dtype, seed=1), make(ws[:1], dtype, seed=2)
    check(lambda x, w, b: CONV[nd](x, w, b, **kw), x, w, b, **tol(dtype))
    check(lambda x, w: CONV[nd](x, w, **kw), x, w, **tol(dtype))


def test_conv_layouts_and_unbatched():
    x, w = make((2, 4, 7, 6)), make((6, 4, 3, 3), seed=1)
    check(lambda x, w: F.conv2d(x, w, padding=1), noncontiguous(x), noncontiguous(w), **tol(F32))
    check(lambda x, w: F.conv2d(x, w), x[0], w, **tol(F32))  # unbatched
    check(lambda x, w: F.conv2d(x, w, stride=3), x.to(memory_format=torch.channels_last), w, **tol(F32))
    check(lambda x, w: F.conv1d(x, w), make((2, 3, 5), torch.int64), make((2, 3, 2), torch.int64, seed=1))


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv_grad(case):
    nd, xs, ws, kw = CONV_CASES[case]
    check_grad(lambda x, w, b: CONV[nd](x, w, b, **kw), make(xs), make(ws, seed=1), make(ws[:1], seed=2),
               **tol(F32))
    check_grad(lambda x, w: CONV[nd](x, w, **kw), make(xs), make(ws, seed=1), **tol(F32))


CONVT_CASES = [
    (1, (2, 4, 5), (4, 3, 3), dict(stride=2, padding=2)),
    (2, (2, 4, 5, 4), (4, 3, 3, 2), dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2), dilation=(1, 2), groups=2)),
    (3, (1, 2, 3, 4, 3), (2, 2, 2, 3, 2), dict(stride=2, padding=1, output_padding=1)),
]


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("case", range(len(CONVT_CASES)))
def test_conv_transpose(case, dtype):
    nd, xs, ws, kw = CONVT_CASES[case]
    out_ch = ws[1] * kw.get("groups", 1)
    x, w, b = make(xs, dtype), make(ws, dtype, seed=1), make((out_ch,), dtype, seed=2)
    check(lambda x, w, b: CONVT[nd](x, w, b, **kw), x, w, b, **tol(dtype))


@pytest.mark.parametrize("case", range(len(CONVT_CASES)))
def test_conv_transpose_grad(case):
    nd, xs, ws, kw = CONVT_CASES[case]
    out_ch = ws[1] * kw.get("groups", 1)
    check_grad(lambda x, w, b: CONVT[nd](x, w, b, **kw), make(xs), make(ws, seed=1), make((out_ch,), seed=2),
               **tol(F32))


def test_conv_errors():
    x, w = make((1, 3, 5, 5)).to("tpu"), make((4, 2, 3, 3)).to("tpu")
    with pytest.raises(RuntimeError):
        F.conv2d(x, w)
    with pytest.raises(RuntimeError):
        F.conv2d(x, make((4, 3, 3, 3), BF16).to("tpu"))


# ---- pooling ---------------------------------------------------------------------

def with_nans(shape, dtype=F32):
    x = make(shape, dtype)
    flat = x.view(-1)
    flat[0] = float("nan")
    flat[1] = float("nan")
    flat[7] = float("nan")
    return x


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_max_pool(dtype):
    x = make((2, 3, 9, 8), dtype)
    check(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), x)
    check(lambda x: F.max_pool2d(x, (3, 2), (2, 2), (1, 1), dilation=(1, 2), ceil_mode=True, return_indices=True), x)
    check(lambda x: F.max_pool2d(x, 2, return_indices=True), with_nans((2, 3, 6, 6), dtype))
    check(lambda x: F.max_pool1d(x, 3, 2, return_indices=True), x[0])
    check(lambda x: F.max_pool3d(x, 2, 1, 1, return_indices=True), make((2, 2, 4, 5, 3), dtype))
    check(lambda x: F.max_pool2d(x, 2), noncontiguous(x))
    # Ties resolve to the first maximum.
    check(lambda x: F.max_pool2d(x, 3, 1, return_indices=True), torch.ones(1, 1, 4, 4, dtype=dtype))


def test_max_pool_grad():
    check_grad(lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), make((2, 3, 9, 8)))
    check_grad(lambda x: F.max_pool1d(x, 2), make((2, 3, 9)))
    check_grad(lambda x: F.max_pool3d(x, 2, 1), make((1, 2, 4, 5, 3)))


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_avg_pool(dtype):
    x = make((2, 3, 9, 8), dtype)
    check(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), x, **tol(dtype))
    check(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), x, **tol(dtype))
    check(lambda x: F.avg_pool2d(x, (3, 2), 1, (1, 1), divisor_override=2), noncontiguous(x), **tol(dtype))
    check(lambda x: F.avg_pool1d(x, 3, 2, 1), x[0], **tol(dtype))
    if dtype == F32:  # CPU has no bf16 avg_pool3d
        check(lambda x: F.avg_pool3d(x, 2, 1, 1, ceil_mode=True, count_include_pad=False), make((2, 2, 4, 5, 3)))


def test_avg_pool_grad():
    check_grad(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), make((2, 3, 9, 8)))
    check_grad(lambda x: F.avg_pool3d(x, 2, 1, 1, divisor_override=3), make((1, 2, 4, 5, 3)))
    check_grad(lambda x: F.avg_pool1d(x, 3, 2, 1), make((2, 3, 9)))


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_adaptive_pools(dtype):
    x = make((2, 3, 9, 8), dtype)
    check(lambda x: F.adaptive_avg_pool2d(x, (4, 3)), x, **tol(dtype))
    check(lambda x: F.adaptive_avg_pool1d(x, 4), x[0], **tol(dtype))
    check(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), make((2, 2, 5, 4, 3), dtype), **tol(dtype))
    check(lambda x: F.adaptive_max_pool2d(x, (4, 3), return_indices=True), with_nans((2, 3, 9, 8), dtype))
    check(lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True), noncontiguous(x[0]))
    check(lambda x: F.adaptive_max_pool3d(x, (2, 3, 2), return_indices=True), make((2, 2, 5, 4, 3), dtype))


def test_adaptive_pools_grad():
    check_grad(lambda x: F.adaptive_avg_pool2d(x, (4, 3)), make((2, 3, 9, 8)))
    check_grad(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), make((1, 2, 5, 4, 3)))
    check_grad(lambda x: F.adaptive_max_pool2d(x, (4, 3)), make((2, 3, 9, 8)))
    check_grad(lambda x: F.adaptive_max_pool3d(x, (2, 3, 2)), make((1, 2, 5, 4, 3)))


def test_fractional_max_pool():
    rs = torch.rand(2, 3, 2, generator=torch.Generator().manual_seed(3))
    x = make((2, 3, 9, 8))
    check(lambda x, r: F.fractional_max_pool2d(x, 2, output_size=(5, 4), _random_samples=r, return_indices=True), x, rs)
    rs3 = torch.rand(2, 3, 3, generator=torch.Generator().manual_seed(4))
    check(lambda x, r: F.fractional_max_pool3d(x, 2, output_size=(3, 3, 2), _random_samples=r, return_indices=True),
          make((2, 3, 6, 5, 4)), rs3)
    check_grad(lambda x: F.fractional_max_pool2d(x, 2, output_size=(5, 4), _random_samples=rs.to(x.device)), x)


def test_max_unpool():
    o, i = F.max_pool2d(make((2, 3, 8, 8)), 2, return_indices=True)
    check(lambda o, i: F.max_unpool2d(o, i, 2), o, i)
    check(lambda o, i: F.max_unpool2d(o, i, 2, output_size=(9, 9)), o, i)
    o, i = F.max_pool3d(make((2, 2, 4, 4, 4)), 2, return_indices=True)
    check(lambda o, i: F.max_unpool3d(o, i, 2), o, i)
    o, i = F.max_pool1d(make((2, 3, 8)), 2, return_indices=True)
    check(lambda o, i: F.max_unpool1d(o, i, 2), o, i)


def test_lp_pool():
    check(lambda x: F.lp_pool2d(x, 2, 2), make((2, 3, 8, 6)), **tol(F32))
    check(lambda x: F.lp_pool1d(x, 3, 2), make((2, 3, 8)), **tol(F32))
