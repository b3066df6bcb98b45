"""Unary math, clamp, where and masked_fill on tpu vs CPU."""

import pytest
import torch

from utils import check, check_grad, make, noncontiguous

F32, BF16, F16, I64, I32, BOOL = torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool

# name -> (fn, input range)
FLOAT_UNARY = {
    "exp": (torch.exp, (-5, 5)),
    "exp2": (torch.exp2, (-5, 5)),
    "expm1": (torch.expm1, (-2, 2)),
    "log": (torch.log, (0.01, 10)),
    "log2": (torch.log2, (0.01, 10)),
    "log10": (torch.log10, (0.01, 10)),
    "log1p": (torch.log1p, (-0.9, 5)),
    "sqrt": (torch.sqrt, (0, 10)),
    "rsqrt": (torch.rsqrt, (0.1, 10)),
    "sin": (torch.sin, (-6, 6)),
    "cos": (torch.cos, (-6, 6)),
    "tan": (torch.tan, (-1.4, 1.4)),
    "asin": (torch.asin, (-1, 1)),
    "acos": (torch.acos, (-1, 1)),
    "atan": (torch.atan, (-10, 10)),
    "sinh": (torch.sinh, (-5, 5)),
    "cosh": (torch.cosh, (-5, 5)),
    "tanh": (torch.tanh, (-5, 5)),
    "asinh": (torch.asinh, (-10, 10)),
    "acosh": (torch.acosh, (1, 10)),
    "atanh": (torch.atanh, (-0.99, 0.99)),
    "sigmoid": (torch.sigmoid, (-10, 10)),
    "erf": (torch.erf, (-4, 4)),
    "erfc": (torch.erfc, (-4, 9)),
}


@pytest.mark.parametrize("name", list(FLOAT_UNARY))
def test_float_unary(name):
    fn, (lo, hi) = FLOAT_UNARY[name]
    for shape in [(), (7,), (3, 5)]:
        check(fn, make(shape, F32, low=lo, high=hi))
    check(fn, make((4, 6), BF16, low=lo, high=hi))
    check(fn, noncontiguous(make((4, 6), F32, low=lo, high=hi)))
    if lo < 0 < hi or lo >= 0:
        check(fn, make((5,), I64, low=max(lo, -3), high=min(hi, 3) if hi > 1 else 1))
    out = torch.empty(3, 5)
    check(lambda x, o: fn(x, out=o), make((3, 5), F32, low=lo, high=hi), out)
    check(lambda x: getattr(x, name + "_")(), make((3, 5), F32, low=lo, high=hi))


@pytest.mark.parametrize("name", list(FLOAT_UNARY))
def test_float_unary_specials(name):
    fn = FLOAT_UNARY[name][0]
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-6, -1e-6, 2.0, 20.0, -20.0, 100.0, -100.0, 1e20,
                      -1e20, float("inf"), -float("inf"), float("nan")])
    check(fn, x)


def test_erf_accuracy():
    x = torch.linspace(-6, 6, 2001)
    check(torch.erf, x, atol=1e-6, rtol=1e-6)
    check(torch.erfc, torch.linspace(-3, 10, 2001), atol=1e-30, rtol=2e-5)
    check(torch.erf, torch.linspace(-1e-3, 1e-3, 101), atol=1e-12, rtol=1e-6)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "sigmoid", "sin", "erf", "asinh", "atan", "log1p"])
def test_float_unary_grad(name):
    fn, (lo, hi) = FLOAT_UNARY[name]
    check_grad(fn, make((3, 4), low=max(lo, 0.1) if lo >= 0 else lo, high=hi))


ROUNDING = {
    "abs": torch.abs,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "round": torch.round,
    "trunc": torch.trunc,
    "sign": torch.sign,
    "sgn": torch.sgn,
    "neg": torch.neg,
}


@pytest.mark.parametrize("name", list(ROUNDING))
@pytest.mark.parametrize("dt", [F32, BF16, I64, I32])
def test_rounding(name, dt):
    fn = ROUNDING[name]
    check(fn, make((3, 5), dt, low=-5, high=5))
    check(fn, make((), dt))
    check(lambda x: getattr(x, name + "_")(), make((4,), dt))


def test_rounding_specials():
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.0, 3.7, -3.7, float("inf"), float("nan")])
    for fn in [torch.round, torch.floor, torch.ceil, torch.trunc, torch.frac, torch.sign, torch.abs, torch.signbit]:
        check(fn, x)
    check(torch.sign, torch.tensor([True, False]))
    check(torch.frac, make((3, 4), BF16))
    check(lambda t: torch.round(t, decimals=2), make((3, 4), F32))
    check(lambda t: torch.round(t, decimals=-1), make((3, 4), F32, low=-100, high=100))
    check(lambda t: torch.round(t, decimals=3), make((3, 4), F32))


@pytest.mark.parametrize("dt", [F32, BF16, F16, I64, I32, BOOL])
def test_predicates(dt):
    x = make((4, 5), dt)
    if dt.is_floating_point:
        x[0, 0], x[1, 1], x[2, 2] = float("nan"), float("inf"), -float("inf")
        x[3, 3] = -0.0
    for fn in [torch.isnan, torch.isinf, torch.isfinite, torch.signbit, torch.logical_not, torch.nan_to_num]:
        if dt == BOOL and fn is torch.signbit:
            continue
        check(fn, x)
    if dt.is_floating_point:
        check(lambda t: torch.nan_to_num(t, nan=1.5, posinf=100.0, neginf=-7.0), x)
        check(lambda t: t.nan_to_num_(posinf=3.0), x)
    if not dt.is_floating_point:
        check(torch.bitwise_not, x)
        check(lambda t: ~t, x)


@pytest.mark.parametrize("dt", [F32, BF16, I64, I32])
def test_clamp(dt):
    x = make((4, 5), dt, low=-5, high=5)
    check(lambda t: torch.clamp(t, -2, 3), x)
    check(lambda t: torch.clamp(t, min=-1), x)
    check(lambda t: torch.clamp(t, max=1), x)
    check(lambda t: torch.clamp(t, 3, -2), x)  # min > max gives max
    check(lambda t: torch.clamp_min(t, 0), x)
    check(lambda t: torch.clamp_max(t, 0), x)
    check(lambda t: torch.clip(t, -1, 1), x)
    check(lambda t, lo, hi: torch.clamp(t, lo, hi), x, make((5,), dt, low=-3, high=0), make((4, 1), dt, low=0, high=3))
    check(lambda t, lo: torch.clamp(t, min=lo), x, make((5,), dt, low=-3, high=0))
    check(lambda t, hi: torch.clamp(t, max=hi), x, make((5,), dt, low=-3, high=0))
    check(lambda t: t.clamp_(-1, 2), x)
    check(lambda t: t.clamp_min_(0), x)
    check(lambda t, o: torch.clamp(t, -1, 1, out=o), x, torch.empty(4, 5, dtype=dt))
    check(lambda t: torch.clamp(t, -1, 1), noncontiguous(x))


def test_clamp_specials():
    x = torch.tensor([float("nan"), 1.0, -5.0, float("inf"), -float("inf")])
    check(lambda t: torch.clamp(t, -2, 3), x)
    check(lambda t: torch.clamp(t, 0.5), make((3,), I64))  # promotes to float
    check_grad(lambda t: torch.clamp(t, -1, 1), make((3, 4)))
    check_grad(lambda t, lo: torch.clamp(t, min=lo), make((3, 4)), make((3, 4), seed=3))


@pytest.mark.parametrize("dt", [F32, BF16, I64, BOOL])
def test_where(dt):
    c = make((3, 4), BOOL, seed=5)
    a, b = make((3, 4), dt, seed=1), make((4,), dt, seed=2)
    check(torch.where, c, a, b)
    check(torch.where, c[0], a, b)
    check(lambda c, a: torch.where(c, a, 0), c, a)
    check(lambda c, b: torch.where(c, 1, b), c, b)
    check(lambda c: torch.where(c, 1.5, -2.0), c)
    check(lambda c, a, b: torch.where(c, a, b), noncontiguous(c), noncontiguous(a), a)
    check(lambda c, a, b, o: torch.where(c, a, b, out=o), c, a, b, torch.empty(3, 4, dtype=dt))


def test_where_promotion_and_grad():
    c = make((3, 4), BOOL, seed=5)
    check(torch.where, c, make((3, 4), I64), make((3, 4), F32))
    check(torch.where, c, make((3, 4), BF16), make((3, 4), F32))
    check(lambda c, a: torch.where(c, a, 2.5), c, make((3, 4), I64))
    check(lambda c, a, b: a.where(c, b), c, make((3, 4)), make((3, 4)))
    check_grad(lambda a, b: torch.where(a > 0, a, b), make((3, 4), seed=1), make((3, 4), seed=2))


@pytest.mark.parametrize("dt", [F32, BF16, I64, BOOL])
def test_masked_fill(dt):
    x = make((3, 4), dt)
    m = make((3, 4), BOOL, seed=3)
    check(lambda t, m: t.masked_fill(m, 1), x, m)
    check(lambda t, m: t.masked_fill(m[0], 0), x, m)  # broadcast mask
    check(lambda t, m: t.masked_fill_(m, 1), x, m)
    check(lambda t, m, v: t.masked_fill(m, v), x, m, make((), dt, seed=9))
    check(lambda t, m: t.t().masked_fill_(m.t(), 0), x, m)
    if dt.is_floating_point:
        check(lambda t, m: t.masked_fill(m, float("-inf")), x, m)
        check(lambda t, m: t.masked_fill(m, 2.5), x, m)
        check_grad(lambda t: t.masked_fill(t > 0, 0.0), make((3, 4)))


# StableHLO's abs and sign refuse unsigned operands: uint8 abs, sign, sgn,
# gcd, lcm and softsign failed to compile.
@pytest.mark.parametrize("fn", [torch.abs, torch.sign, torch.sgn, torch.nn.functional.softsign,
                                lambda t: torch.gcd(t, t.flip(0)), lambda t: torch.lcm(t % 10, t.flip(0) % 10)])
def test_unsigned_abs_and_sign(fn):
    check(fn, make((17,), torch.uint8, low=0, high=255))


@pytest.mark.parametrize("fn", [torch.asinh, torch.special.bessel_j1, torch.sign, torch.sgn])
def test_sign_of_zero_like_cpu(fn):
    # Odd functions keep -0 (asinh(-0) = -0); sign gives +0 at -0 as CPU's
    # (0 < x) - (x < 0) does.
    x = torch.tensor([-0.0, 0.0, 1.5, -1.5])
    want, got = fn(x), fn(x.to("tpu")).cpu()
    torch.testing.assert_close(got, want)
    assert torch.equal(got.signbit(), want.signbit())


@pytest.mark.parametrize("fn", [torch.erf, torch.erfc, torch.erfinv, torch.special.ndtr, torch.special.log_ndtr,
                                torch.nn.functional.gelu])
def test_float64_erf_family_has_float64_accuracy(fn):
    # float32-fitted coefficients gave ~3e-8 relative error in float64.
    x = torch.linspace(-0.999, 0.999, 801, dtype=torch.float64) if fn is torch.erfinv else \
        torch.linspace(-4.5, 4.5, 801, dtype=torch.float64)
    torch.testing.assert_close(fn(x.to("tpu")).cpu(), fn(x), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("dt", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("fn", [torch.sqrt, torch.asin, torch.acos, torch.acosh, torch.asinh])
def test_complex_branch_cuts_honour_negative_zero(fn, dt):
    # x - 0i on the real cuts and -0 + iy on asinh's imaginary cut: the C99
    # side of the cut, as CPU (sqrt(-4 - 0i) = -2i).
    real = torch.tensor([-4.0, 2.0, -0.5, 3.0, 0.3, -0.0, -0.0, -0.0])
    imag = torch.tensor([-0.0, -0.0, -0.0, -0.0, -0.0, 2.0, -3.0, 0.5])
    z = torch.complex(real, imag).to(dt)
    torch.testing.assert_close(fn(z.to("tpu")).cpu(), fn(z), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dt", [torch.complex64, torch.complex128])
def test_complex_log2_log10_at_zero_and_abs_of_inf_nan(dt):
    z = torch.tensor([0j, 1 + 0j, 4 + 2j], dtype=dt)
    for fn in (torch.log2, torch.log10):
        torch.testing.assert_close(fn(z.to("tpu")).cpu(), fn(z), equal_nan=True)  # log2(0) = -inf + 0i, not nan
    w = torch.tensor([complex(float("inf"), float("nan")), complex(float("nan"), -float("inf"))], dtype=dt)
    torch.testing.assert_close(w.to("tpu").abs().cpu(), w.abs())  # inf (C99 hypot)
