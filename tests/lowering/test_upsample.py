"""Upsampling (interpolate), grid_sample and unfold/fold lowering rules:
forward vs CPU in several configurations, bf16, non-contiguous inputs and
gradients."""

import pytest
import torch
import torch.nn.functional as F

from utils import check, check_grad, make, noncontiguous

FLOATS = [torch.float32, torch.bfloat16]

# (mode, input shape, align_corners choices)
MODES = [
    ("nearest", (2, 3, 5), [None]),
    ("nearest", (2, 3, 4, 5), [None]),
    ("nearest", (1, 2, 3, 4, 5), [None]),
    ("nearest-exact", (2, 3, 4, 5), [None]),
    ("nearest-exact", (1, 2, 3, 4, 5), [None]),
    ("linear", (2, 3, 5), [False, True]),
    ("bilinear", (2, 3, 4, 5), [False, True]),
    ("bicubic", (2, 3, 4, 5), [False, True]),
    ("trilinear", (1, 2, 3, 4, 5), [False, True]),
]
CASES = [(m, s, a) for m, s, al in MODES for a in al]


def _kw(mode, align):
    return {} if align is None else {"align_corners": align}


@pytest.mark.parametrize("mode,shape,align", CASES)
@pytest.mark.parametrize("how", ["up_size", "down_size", "scale", "scale_frac"])
def test_interpolate_forward(mode, shape, align, how):
    x = make(shape)
    nsp = len(shape) - 2
    if how == "up_size":
        kw = dict(size=tuple(s * 2 + 1 for s in shape[2:]))
    elif how == "down_size":
        kw = dict(size=tuple(max(1, s // 2) for s in shape[2:]))
    elif how == "scale":
        kw = dict(scale_factor=2.0)
    else:
        kw = dict(scale_factor=(1.7,) * nsp)
    check(lambda t: F.interpolate(t, mode=mode, **kw, **_kw(mode, align)), x)


@pytest.mark.parametrize("mode,shape,align", CASES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_interpolate_grad(mode, shape, align, dtype):
    x = make(shape, dtype)
    size = tuple(s + 3 for s in shape[2:])
    tol = {} if dtype == torch.float32 else dict(atol=5e-2, rtol=5e-2)
    check_grad(lambda t: F.interpolate(t, size=size, mode=mode, **_kw(mode, align)), x, **tol)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [(2, 3), (9, 7), (3, 11)])
def test_interpolate_antialias(mode, align, size):
    x = make((2, 3, 6, 8))
    check_grad(lambda t: F.interpolate(t, size=size, mode=mode, align_corners=align, antialias=True), x,
               atol=1e-4, rtol=1e-4)


def test_interpolate_noncontiguous_and_int():
    x = make((2, 3, 4, 5))
    check(lambda t: F.interpolate(noncontiguous(t), scale_factor=2, mode="bilinear"), x)
    check(lambda t: F.interpolate(noncontiguous(t), size=(3, 7), mode="nearest"), x)
    xi = make((2, 3, 4, 5), torch.uint8, low=0, high=200)
    check(lambda t: F.interpolate(t, size=(7, 3), mode="nearest"), xi)
    xl = make((2, 3, 4), torch.uint8, low=0, high=200)
    check(lambda t: F.interpolate(t, scale_factor=3, mode="nearest-exact"), xl)
    with pytest.raises(NotImplementedError):
        F.interpolate(make((2, 3, 4), torch.int64).to("tpu"), scale_factor=2, mode="nearest")


# ---- nan / inf reach only the outputs whose taps read them --------------------------

# (mode, input shape, extra kwargs); every mode takes align_corners.
TAP_MODES = [
    ("linear", (1, 2, 8), {}),
    ("bilinear", (1, 2, 5, 6), {}),
    ("bicubic", (1, 2, 5, 6), {}),
    ("trilinear", (1, 2, 3, 4, 5), {}),
    ("bilinear", (1, 2, 5, 6), {"antialias": True}),
    ("bicubic", (1, 2, 5, 6), {"antialias": True}),
]
TAP_CASES = [(m, s, kw, a) for m, s, kw in TAP_MODES for a in (False, True)]
TAP_IDS = [f"{m}{'_aa' if kw else ''}-{s}-align{a}" for m, s, kw, a in TAP_CASES]
NEAREST_CASES = [("nearest", (1, 2, 5, 6), {}, None), ("nearest-exact", (1, 2, 3, 4, 5), {}, None)]


def _tap_size(shape, how):
    sp = shape[2:]
    if how == "up":
        return tuple(s * 2 + 1 for s in sp)
    if how == "down":
        return tuple(max(1, s // 2) for s in sp)
    if how == "same":
        return tuple(sp)
    # The first spatial axis keeps its size (CPU copies it, or skips it antialiased).
    return (sp[0],) + tuple(s * 2 + 1 for s in sp[1:])


def _with_nonfinite(x):
    flat = x.view(-1)
    flat[3], flat[x.numel() // 2], flat[-5] = float("nan"), float("inf"), float("-inf")
    return x


@pytest.mark.parametrize("mode,shape,kw,align", TAP_CASES, ids=TAP_IDS)
@pytest.mark.parametrize("how", ["up", "down", "same_first", "same"])
def test_interpolate_nonfinite_input(mode, shape, kw, align, how):
    # A dense [out, in] matrix times the input made every output of the row nan.
    x = _with_nonfinite(make(shape))
    size = _tap_size(shape, how)
    out = check(lambda t: F.interpolate(t, size=size, mode=mode, align_corners=align, **kw), x)
    if how == "up":
        assert out.isfinite().any()  # (downsampled by a wide filter, every output may read one)


@pytest.mark.parametrize("mode,shape,kw,align", TAP_CASES + NEAREST_CASES, ids=TAP_IDS + ["nearest", "nearest-exact"])
@pytest.mark.parametrize("how", ["up", "down", "same_first", "same"])
def test_interpolate_nonfinite_grad(mode, shape, kw, align, how):
    # A nan (and an inf) in grad_output reach only the input taps of that output.
    size = _tap_size(shape, how)
    akw = {} if align is None else {"align_corners": align}
    fn = lambda t: F.interpolate(t, size=size, mode=mode, **akw, **kw)
    g = _with_nonfinite(make(fn(make(shape)).shape, seed=7))
    g.view(-1)[0] = float("nan")
    check_grad(fn, make(shape), grad_out=g)


@pytest.mark.parametrize("mode,shape,kw,align", TAP_CASES, ids=TAP_IDS)
def test_interpolate_negative_zero(mode, shape, kw, align):
    # -0 inputs: the sums start from -0 (as on CPU), not +0.
    x = -torch.zeros(shape)
    size = _tap_size(shape, "up")
    fn = lambda t: F.interpolate(t, size=size, mode=mode, align_corners=align, **kw)
    assert torch.equal(fn(x.to("tpu")).cpu().signbit(), fn(x).signbit())


# ---- grid_sample -------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_2d(mode, padding, align):
    x = make((2, 3, 5, 6))
    grid = make((2, 4, 7, 2), low=-1.3, high=1.3, seed=1)
    fn = lambda t, g: F.grid_sample(t, g, mode=mode, padding_mode=padding, align_corners=align)
    check(fn, x, grid)
    if mode != "nearest":
        check_grad(fn, x, grid, atol=1e-4, rtol=1e-4)
    else:
        check_grad(fn, x, grid)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_3d(mode, padding):
    x = make((2, 2, 3, 4, 5))
    grid = make((2, 2, 3, 4, 3), low=-1.3, high=1.3, seed=1)
    fn = lambda t, g: F.grid_sample(t, g, mode=mode, padding_mode=padding, align_corners=False)
    check(fn, x, grid)
    if mode == "bilinear":
        check_grad(fn, x, grid, atol=1e-4, rtol=1e-4)


def test_grid_sample_bf16_noncontiguous():
    x = make((1, 2, 5, 6), torch.bfloat16)
    grid = make((1, 3, 4, 2), torch.bfloat16, low=-1, high=1, seed=2)
    # CPU computes bf16 grid sampling in bf16 steps; tpu computes in f32 and
    # rounds once, so compare with the f32 result of the same inputs.
    out = F.grid_sample(x.to("tpu"), grid.to("tpu"), align_corners=False)
    assert out.dtype == torch.bfloat16
    ref = F.grid_sample(x.float(), grid.float(), align_corners=False)
    torch.testing.assert_close(out.cpu().float(), ref, atol=2e-2, rtol=2e-2)
    check(lambda t, g: F.grid_sample(noncontiguous(t), g, align_corners=True), make((1, 2, 5, 6)), make((1, 3, 4, 2), low=-1, high=1))


@pytest.mark.parametrize("align", [False, True])
def test_affine_grid(align):
    theta = make((2, 2, 3), low=-1, high=1)
    check_grad(lambda t: F.affine_grid(t, [2, 3, 4, 5], align_corners=align), theta)


# ---- unfold / fold -------------------------------------------------------------------


@pytest.mark.parametrize("cfg", [
    dict(kernel_size=2),
    dict(kernel_size=(2, 3), stride=(2, 1), padding=1, dilation=(1, 2)),
    dict(kernel_size=3, stride=2, padding=(0, 1)),
])
@pytest.mark.parametrize("dtype", FLOATS)
def test_unfold_fold(cfg, dtype):
    x = make((2, 3, 6, 7), dtype)
    tol = {} if dtype == torch.float32 else dict(atol=5e-2, rtol=5e-2)
    check_grad(lambda t: F.unfold(t, **cfg), x, **tol)
    cols = F.unfold(x.float(), **cfg).to(dtype)
    check_grad(lambda t: F.fold(t, output_size=(6, 7), **cfg), cols, **tol)
    # Unbatched and non-contiguous.
    check(lambda t: F.unfold(noncontiguous(t[0]), **cfg), x)
    check(lambda t: F.fold(noncontiguous(t[0]), output_size=(6, 7), **cfg), cols)
