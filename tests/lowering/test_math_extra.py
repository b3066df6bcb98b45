"""Extra math and activation ops (math_extra.cpp, activation_extra.cpp) on tpu vs CPU."""

import math

import pytest
import torch
import torch.nn.functional as F

from utils import check, check_grad, make, noncontiguous

F32, BF16, I64, I32, BOOL = torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool
A = torch.ops.aten
SPECIALS = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.5, -7.0, 1e-3, 1e30, -1e30, math.inf, -math.inf, math.nan])
SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((), (3, 1))]

BINARY = {
    "heaviside": (torch.heaviside, [F32, BF16, I64, BOOL]),
    "logaddexp": (torch.logaddexp, [F32, BF16]),
    "logaddexp2": (torch.logaddexp2, [F32, BF16]),
    "nextafter": (torch.nextafter, [F32, BF16]),
    "gcd": (torch.gcd, [I64, I32]),
    "lcm": (torch.lcm, [I64, I32]),
    "ldexp": (lambda a, b: torch.ldexp(a, b.to(torch.int64) if b.is_floating_point() else b), [F32, BF16, I64]),
    "_add_relu": (lambda a, b: A._add_relu(a, b, alpha=2), [F32, I64]),
}


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary(name, shapes):
    fn, dtypes = BINARY[name]
    for dt in dtypes:
        low, high = (-30, 30) if dt in (I64, I32) else (-3, 3)
        check(fn, make(shapes[0], dt, low=low, high=high, seed=1), make(shapes[1], dt, low=low, high=high, seed=2))


@pytest.mark.parametrize("name", ["heaviside", "logaddexp", "logaddexp2", "nextafter"])
def test_binary_specials(name):
    fn = BINARY[name][0]
    a = SPECIALS.repeat_interleave(len(SPECIALS))
    b = SPECIALS.repeat(len(SPECIALS))
    check(fn, a, b)


def test_binary_forms():
    a, b = make((3, 4), seed=1), make((3, 4), seed=2)
    check(lambda x, y: x.logaddexp_(y) if hasattr(x, "logaddexp_") else torch.logaddexp(x, y, out=x), a, b)
    check(lambda x, y: torch.logaddexp(x, y, out=torch.empty_like(x)), a, b)
    check(lambda x, y: x.heaviside_(y), a.round(), b)
    check(lambda x, y: torch.gcd(x, y, out=torch.empty_like(x)), make((5,), I64, low=-50, high=50), make((5,), I64))
    check(lambda x, y: x.gcd_(y), make((5,), I64, low=-50, high=50, seed=3), make((5,), I64, low=-9, high=9))
    check(lambda x, y: x.lcm_(y), make((5,), I64, low=-50, high=50, seed=3), make((5,), I64, low=-9, high=9))
    check(torch.logaddexp, noncontiguous(a), b)
    check(torch.nextafter, noncontiguous(a), b)
    check(lambda x: A._add_relu(x, 1.5), a)
    check(lambda x, y: A._add_relu_(x, y), a, b)
    # gcd of large numbers (long Euclid chains: consecutive Fibonacci numbers).
    fib = [1, 2]
    while fib[-1] < 2**62:
        fib.append(fib[-1] + fib[-2])
    x = torch.tensor(fib[-30:], dtype=I64)
    check(torch.gcd, x, x.roll(1))
    check(torch.lcm, torch.tensor([0, 0, 4, -6, 12]), torch.tensor([0, 5, 0, 4, -18]))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16])
def test_lcm_that_overflows_a_narrow_type_wraps_like_cpu(dtype):
    # CPU takes the product and its abs in int (C++ promotion), then wraps:
    # lcm(2, 127) in int8 is -2 (abs(254) -> -2), lcm(7, 100) is -68
    hi = torch.iinfo(dtype).max
    a = torch.tensor([2, 7, 2, hi, 3, 0], dtype=dtype)
    b = torch.tensor([hi, 100, hi - 2, 2, 5, 9], dtype=dtype)
    if dtype != torch.uint8:
        a, b = torch.cat([a, -a]), torch.cat([b, b])
    check(torch.lcm, a, b)


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_binary_grad(name):
    fn = BINARY[name][0]
    check_grad(fn, make((3, 4), seed=1), make((4,), seed=2))


UNARY = {
    "deg2rad": (torch.deg2rad, [F32, BF16, I64]),
    "rad2deg": (torch.rad2deg, [F32, BF16, I64]),
    "isinf": (torch.isinf, [F32, BF16, I64, BOOL]),
    "isposinf": (torch.isposinf, [F32, BF16, I64, BOOL]),
    "isneginf": (torch.isneginf, [F32, BF16, I64, BOOL]),
    "angle": (torch.angle, [F32, BF16, I64, BOOL]),
    "hardshrink": (lambda x: F.hardshrink(x, 0.7), [F32, BF16]),
    "softshrink": (lambda x: F.softshrink(x, 0.7), [F32, BF16]),
    "frexp": (torch.frexp, [F32, BF16]),
    "clone": (torch.clone, [F32, BF16, I64, BOOL]),
    "celu": (lambda x: F.celu(x, 0.6), [F32, BF16]),
    "prelu_scalar": (lambda x: F.prelu(x, torch.tensor([0.3], dtype=x.dtype, device=x.device)), [F32, BF16]),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name):
    fn, dtypes = UNARY[name]
    for dt in dtypes:
        for shape in [(), (7,), (3, 5)]:
            check(fn, make(shape, dt, seed=len(shape)))
    check(fn, noncontiguous(make((3, 5), F32)))
    if fn is not torch.frexp:
        check(fn, SPECIALS)


def test_unary_forms():
    x = make((3, 4))
    check(lambda t: t.deg2rad_(), x)
    check(lambda t: torch.rad2deg(t, out=torch.empty_like(t)), x)
    check(lambda t: torch.isinf(t), x / 0)
    check(lambda t: torch.isposinf(t, out=torch.empty(3, 4, dtype=BOOL, device=t.device)), x / 0)
    check(lambda t: torch.frexp(t, out=(torch.empty_like(t), torch.empty(3, 4, dtype=I32, device=t.device))), x)
    check(lambda t: F.hardshrink(t[:, ::2], 0.3), x)
    check(lambda t: torch.ones(3, device=t.device).clone() + t.clone()[0, :3], x)
    # frexp: zeros, infinities, NaN, subnormals and extremes.
    check(torch.frexp, torch.tensor([0.0, -0.0, 1.0, -1.0, 0.75, 1e-40, -3e-42, 3e38, 1e-3, 1234.5]))
    check(torch.frexp, torch.tensor([1.0, 0.1, -1e300, 1e-310, 3.0], dtype=torch.float64))


@pytest.mark.parametrize("name", ["deg2rad", "hardshrink", "softshrink", "celu", "prelu_scalar"])
def test_unary_grad(name):
    fn = UNARY[name][0]
    x = make((4, 5), low=-2, high=2)
    check_grad(fn, x)


def test_isin():
    elems = make((3, 4), I64, low=-5, high=5, seed=1)
    tests = make((6,), I64, low=-5, high=5, seed=2)
    check(torch.isin, elems, tests)
    check(lambda a, b: torch.isin(a, b, invert=True), elems, tests)
    check(torch.isin, elems.float(), tests)
    check(torch.isin, make((5,), BF16).round(), make((2, 3), BF16).round())
    check(lambda a: torch.isin(a, 3), elems)
    check(lambda b: torch.isin(2, b), tests)
    check(torch.isin, elems, torch.empty(0, dtype=I64))
    check(torch.isin, torch.tensor([1.0, math.nan, 2.0]), torch.tensor([math.nan, 2.0]))
    check(lambda a, b: torch.isin(a, b, out=torch.empty(3, 4, dtype=BOOL, device=a.device)), elems, tests)
    check(torch.isin, noncontiguous(elems), tests)


@pytest.mark.parametrize("dt", [F32, BF16, I64])
def test_trace(dt):
    for shape in [(4, 4), (3, 5), (6, 2), (0, 3)]:
        check(torch.trace, make(shape, dt))
    check(torch.trace, noncontiguous(make((4, 5), dt)))


@pytest.mark.parametrize("dt", [F32, BF16, I64, BOOL])
def test_addr(dt):
    s, v1, v2 = make((3, 4), dt, seed=1), make((3,), dt, seed=2), make((4,), dt, seed=3)
    check(torch.addr, s, v1, v2)
    check(torch.addr, make((4,), dt), v1, v2)
    if dt != BOOL:
        check(lambda a, b, c: torch.addr(a, b, c, beta=2, alpha=3), s, v1, v2)
        check(lambda a, b, c: torch.addr(a, b, c, beta=0), s, v1, v2)
    else:
        check(lambda a, b, c: torch.addr(a, b, c, beta=False), s, v1, v2)
    check(lambda a, b, c: a.addr_(b, c), s, v1, v2)
    if dt == F32:
        nan_self = torch.full((3, 4), math.nan)
        check(lambda a, b, c: torch.addr(a, b, c, beta=0), nan_self, v1, v2)
        check(lambda a, b, c: torch.addr(a, b, c, out=torch.empty(3, 4, device=a.device)), s, v1, v2)
        check_grad(lambda a, b, c: torch.addr(a, b, c, beta=0.5, alpha=2), s, v1, v2)


@pytest.mark.parametrize("dt", [F32, BF16, I64])
def test_cross(dt):
    a, b = make((4, 3), dt, seed=1), make((4, 3), dt, seed=2)
    check(torch.linalg.cross, a, b)
    check(lambda x, y: torch.linalg.cross(x, y, dim=0), make((3, 2), dt), make((3, 2), dt, seed=4))
    check(lambda x, y: torch.cross(x, y, dim=1), make((2, 3, 5), dt), make((1, 3, 5), dt, seed=4))
    check(torch.linalg.cross, make((1, 3), dt), make((2, 3), dt, seed=5))
    check(lambda x, y: torch.linalg.cross(x, y, out=torch.empty(4, 3, dtype=dt, device=x.device)), a, b)
    if dt == F32:
        check(torch.linalg.cross, noncontiguous(a), b)
        check_grad(torch.linalg.cross, a, b)


@pytest.mark.parametrize("p", [1, 2, 3.5, math.inf])
def test_renorm(p):
    x = make((4, 3, 5), seed=1)
    check(lambda t: torch.renorm(t, p, 0, 5.0), x)
    check(lambda t: torch.renorm(t, p, -1, 3.0), x)
    check(lambda t: torch.renorm(t, p, 1, 4.0), make((4, 3, 5), BF16))
    check(lambda t: t.renorm_(p, 1, 4.0), noncontiguous(x))
    check_grad(lambda t: torch.renorm(t, p, 1, 4.0), x)


def test_dist_and_native_norm():
    a, b = make((4, 5), seed=1), make((5,), seed=2)
    for p in [0, 1, 2, 3.5, math.inf, -math.inf]:
        check(lambda x, y: torch.dist(x, y, p), a, b)
    check_grad(lambda x, y: torch.dist(x, y, 3), a, b)
    # native_norm has no dense CPU kernel: compare with linalg.vector_norm.
    t = a.to("tpu")
    for p in [1, 2, 3.5, math.inf, 0]:
        torch.testing.assert_close(A.native_norm(t, p).cpu(), torch.linalg.vector_norm(a, p))
        got = A.native_norm(t, p, [1], True, None).cpu()
        torch.testing.assert_close(got, torch.linalg.vector_norm(a, p, dim=1, keepdim=True))


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_glu(dim):
    x = make((4, 6, 2), seed=1)
    check(lambda t: F.glu(t, dim), x)
    check(lambda t: F.glu(t, dim), make((4, 6, 2), BF16))
    check_grad(lambda t: F.glu(t, dim), x)
    if dim == -1:
        check(lambda t: F.glu(t, dim), noncontiguous(x))
        check(lambda t: A.glu(t, -1, out=torch.empty(4, 6, 1, device=t.device)), x)


def test_glu_jvp_ops():
    x, dx = make((4, 6), seed=1), make((4, 6), seed=2)
    glu = F.glu(x, 1)
    check(lambda *a: A.glu_jvp(*a, 1), glu, x, dx)
    gx, gg, dg = make((4, 6), seed=3), make((4, 3), seed=4), make((4, 3), seed=5)
    check(lambda *a: A.glu_backward_jvp(*a, 1), gx, gg, x, dg, dx)
    check(lambda g, t: A.glu_backward(g, t, 0), make((2, 6), seed=6), make((4, 6), seed=7))
    # forward-mode AD goes through glu_jvp.
    import torch.func

    def jvp(t, d):
        return torch.func.jvp(lambda u: F.glu(u, 1), (t,), (d,))[1]

    check(jvp, x, dx)


def test_shrink_backward_ops():
    g, x = make((3, 4), seed=1), make((3, 4), seed=2)
    x[0, :3] = torch.tensor([0.5, -0.5, 0.0])
    check(lambda a, b: A.hardshrink_backward(a, b, 0.5), g, x)
    check(lambda a, b: A.softshrink_backward(a, b, 0.5), g, x)
    check(lambda a, b: A.softshrink_backward(a, b, 0.5, grad_input=torch.empty_like(a)), g, x)


def test_rrelu():
    x = make((4, 5), seed=1)
    # Eval mode is deterministic.
    check(lambda t: F.rrelu(t, 0.1, 0.3, training=False), x)
    check(lambda t: F.rrelu(t, training=False), make((4, 5), BF16))
    check_grad(lambda t: F.rrelu(t, 0.1, 0.3, training=False), x)
    # Training draws slopes in [lower, upper) for x <= 0 and records them.
    t = x.to("tpu")
    noise = torch.empty_like(t)
    out = A.rrelu_with_noise(t, noise, 0.1, 0.3, True)
    out, noise = out.cpu(), noise.cpu()
    neg = x <= 0
    assert ((noise[neg] >= 0.1) & (noise[neg] < 0.3)).all()
    assert (noise[~neg] == 1).all()
    torch.testing.assert_close(out, x * noise)
    assert len(noise[neg].unique()) > 1
    g = make((4, 5), seed=3)
    check(lambda a, b, c: A.rrelu_with_noise_backward(a, b, c, 0.1, 0.3, True, False), g, x, noise)
    check(lambda a, b, c: A.rrelu_with_noise_backward(a, b, c, 0.1, 0.3, False, False), g, x, noise)
    # Autograd through training-mode rrelu uses the recorded noise.
    t = x.to("tpu").requires_grad_()
    y = F.rrelu(t, 0.1, 0.3, training=True)
    y.backward(g.to("tpu"))
    torch.testing.assert_close(t.grad.cpu(), g * (y.detach().cpu() / x))


@pytest.mark.parametrize("wshape", [(1,), (3,)])
def test_prelu(wshape):
    x, w = make((2, 3, 4), seed=1), make(wshape, seed=2, low=0, high=1)
    check(F.prelu, x, w)
    check(F.prelu, make((2, 3, 4), BF16), w.bfloat16())
    check_grad(F.prelu, x, w)
    g = make((2, 3, 4), seed=3)
    check(A._prelu_kernel_backward, g, x, w.reshape(-1, 1))


@pytest.mark.parametrize("use_gelu", [False, True])
def test_addmm_activation(use_gelu):
    s, m1, m2 = make((5,), seed=1), make((3, 4), seed=2), make((4, 5), seed=3)
    check(lambda a, b, c: A._addmm_activation(a, b, c, use_gelu=use_gelu), s, m1, m2)
    check(lambda a, b, c: A._addmm_activation(a, b, c, beta=0.5, alpha=2, use_gelu=use_gelu), make((3, 5)), m1, m2)
    check(lambda a, b, c: A._addmm_activation(a, b, c, use_gelu=use_gelu), s.bfloat16(), m1.bfloat16(), m2.bfloat16())


def test_trilinear_bilinear():
    a, b = make((4, 5), seed=1), make((4, 6), seed=2)
    w, bias = make((3, 5, 6), seed=3), make((3,), seed=4)
    check(F.bilinear, a, b, w, bias)
    check(lambda *t: A._trilinear(*t, [1, 3], [0], [1, 2], [2, 3]), a, w, b)
    check_grad(F.bilinear, a, b, w, bias)


def test_div_trunc_bf16_rounds_quotient_first():
    # CPU rounds the bf16 quotient (17.9459 -> 18) before truncating.
    a = torch.tensor([-3.890625, 7.0, -1.0], dtype=BF16)
    b = torch.tensor([-0.216796875, 0.3, 3.0], dtype=BF16)
    check(lambda x, y: torch.div(x, y, rounding_mode="trunc"), a, b)
    check(lambda x, y: torch.div(x, y, rounding_mode="trunc"), make((4, 6), BF16, seed=1), make((6,), BF16, seed=2))

