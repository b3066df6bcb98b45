"""Binary elementwise arithmetic on tpu vs CPU."""

import pytest
import torch

from utils import check, check_grad, make, noncontiguous

F32, BF16, I64, I32, BOOL = torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool
SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((), (3, 1)), ((5, 1), (1, 6))]


def nonzero(t):
    """Integer divisors without zeros."""
    if t.dtype.is_floating_point:
        return t
    return torch.where(t == 0, torch.ones_like(t), t)


BINARY = {
    "add": (lambda a, b: torch.add(a, b), [F32, BF16, I64, I32, BOOL]),
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=2), [F32, BF16, I64, I32]),
    "sub": (lambda a, b: torch.sub(a, b, alpha=3), [F32, BF16, I64, I32]),
    "rsub": (lambda a, b: torch.rsub(a, b, alpha=2), [F32, I64]),
    "mul": (torch.mul, [F32, BF16, I64, I32, BOOL]),
    "div": (torch.div, [F32, BF16, I64, I32, BOOL]),
    "div_trunc": (lambda a, b: torch.div(a, nonzero(b), rounding_mode="trunc"), [F32, BF16, I64, I32]),
    "div_floor": (lambda a, b: torch.div(a, nonzero(b), rounding_mode="floor"), [F32, BF16, I64, I32]),
    "floor_divide": (lambda a, b: torch.floor_divide(a, nonzero(b)), [F32, I64]),
    "remainder": (lambda a, b: torch.remainder(a, nonzero(b)), [F32, BF16, I64, I32]),
    "fmod": (lambda a, b: torch.fmod(a, nonzero(b)), [F32, BF16, I64, I32]),
    "maximum": (torch.maximum, [F32, BF16, I64, I32, BOOL]),
    "minimum": (torch.minimum, [F32, BF16, I64, I32, BOOL]),
    "fmax": (torch.fmax, [F32, I64]),
    "fmin": (torch.fmin, [F32, I64]),
    "atan2": (torch.atan2, [F32, BF16, I64]),
    "hypot": (torch.hypot, [F32, BF16]),
    "xlogy": (torch.xlogy, [F32, I64]),
    "copysign": (torch.copysign, [F32, BF16]),
    "pow": (lambda a, b: torch.pow(a.abs() + 0.5, b) if a.is_floating_point() else torch.pow(a, b), [F32, BF16, I64, I32]),
}


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary(name, shapes):
    fn, dtypes = BINARY[name]
    for dt in dtypes:
        a, b = make(shapes[0], dt, seed=1), make(shapes[1], dt, seed=2)
        check(fn, a, b)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "remainder", "fmod", "maximum", "pow", "atan2"])
def test_mixed_dtypes(name):
    fn = BINARY[name][0]
    a, b = make((3, 4), I64, seed=1), make((3, 4), F32, seed=2)
    check(fn, a, b)
    check(fn, b, nonzero(a))
    check(fn, make((4,), BF16), make((3, 4), F32))
    check(fn, make((4,), I32), make((3, 4), I64, low=1))


@pytest.mark.parametrize("dt", [F32, BF16, I64])
@pytest.mark.parametrize("other", [2, 2.5, -3, True])
def test_scalar_other(dt, other):
    a = make((3, 4), dt)
    check(lambda x: x + other, a)
    check(lambda x: x * other, a)
    check(lambda x: x / other, a)
    if other is not True:  # bool subtraction is an error
        check(lambda x: x - other, a)
        check(lambda x: other - x, a)
    check(lambda x: torch.remainder(x, other), a)
    check(lambda x: torch.fmod(x, other), a)
    check(lambda x: torch.div(x, other, rounding_mode="floor"), a)
    check(lambda x: torch.div(x, other, rounding_mode="trunc"), a)
    if other is not True:
        check(lambda x: torch.remainder(other, nonzero(x)), a)


def test_float_specials():
    a = torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), float("nan"), 5.5, -5.5, 1e-30, 7.0])
    b = torch.tensor([0.0, 2.0, -0.0, 0.0, 2.0, -3.0, 1.0, -2.0, 2.0, 3.0, float("nan")])
    for fn in [torch.div, torch.remainder, torch.fmod, torch.maximum, torch.minimum, torch.fmax, torch.fmin,
               torch.atan2, torch.hypot, torch.xlogy, torch.copysign, torch.pow,
               lambda x, y: torch.div(x, y, rounding_mode="floor"),
               lambda x, y: torch.div(x, y, rounding_mode="trunc")]:
        check(fn, a, b)
        check(fn, b, a)


def test_integer_semantics():
    a = torch.tensor([7, -7, 7, -7, 0, 5, -1, 1, 2, 3, -2], dtype=I64)
    b = torch.tensor([2, 2, -2, -2, 3, 1, -3, -5, 0, -1, -3], dtype=I64)
    bb = nonzero(b)
    check(lambda x, y: torch.div(x, y, rounding_mode="floor"), a, bb)
    check(lambda x, y: torch.div(x, y, rounding_mode="trunc"), a, bb)
    check(torch.remainder, a, bb)
    check(torch.fmod, a, bb)
    check(torch.pow, a, b)  # negative integer exponents
    check(lambda x: torch.pow(x, 3), a)
    check(lambda x: torch.pow(2, x.abs()), a)


def test_pow_overloads():
    a = make((3, 4), F32)
    check(lambda x: torch.pow(x, 2), a)
    check(lambda x: torch.pow(x, 3.0), a)
    check(lambda x: torch.pow(x.abs(), 0.5), a)
    check(lambda x: torch.pow(x, -2), a)
    check(lambda x: torch.pow(2.0, x), a)
    check(lambda x: torch.square(x), a)
    check(lambda x: x ** 2, make((3,), BF16))
    check(lambda x: torch.pow(x, 0.5), make((3,), I64, low=0))
    check(lambda x: torch.float_power(x, 2), make((3,), F32))


def test_ternary():
    s, t1, t2 = make((3, 4), seed=1), make((3, 4), seed=2), make((4,), seed=3)
    check(lambda a, b, c: torch.addcmul(a, b, c, value=0.5), s, t1, t2)
    check(lambda a, b, c: torch.addcdiv(a, b, c, value=-2), s, t1, t2)
    check(lambda a, b, c: torch.addcmul(a, b, c), s.bfloat16(), t1.bfloat16(), t2.bfloat16())
    check(lambda a, b, c: torch.addcmul(a, b, c, value=2), *(make((3, 4), I64, seed=i) for i in range(3)))
    check(lambda a, b: torch.lerp(a, b, 0.3), s, t1)
    check(lambda a, b: torch.lerp(a, b, 0.9), s, t2)
    check(lambda a, b, w: torch.lerp(a, b, w), s, t1, make((3, 4), low=-1, high=2, seed=4))
    check(lambda a, b: torch.lerp(a, b, 0.7), s.bfloat16(), t1.bfloat16())


@pytest.mark.parametrize("dt", [F32, BF16, I64, I32])
def test_unary_arith(dt):
    a = make((2, 5), dt)
    check(torch.neg, a)
    check(torch.reciprocal, nonzero(a))
    check(lambda x: -x, noncontiguous(a))


def test_inplace_and_out():
    a, b = make((3, 4), seed=1), make((3, 4), seed=2)
    check(lambda x, y: x.add_(y, alpha=2), a, b)
    check(lambda x, y: x.sub_(y), a, b)
    check(lambda x, y: x.mul_(y), a, b)
    check(lambda x, y: x.div_(y), a, b)
    check(lambda x, y: x.div_(y, rounding_mode="floor"), a, b)
    check(lambda x, y: x.remainder_(y), a, b)
    check(lambda x, y: x.pow_(2), a, b)
    check(lambda x, y: x.clamp_(-1, 1).addcmul_(y, y, value=0.1), a, b)
    check(lambda x, y: x.lerp_(y, 0.25), a, b)
    check(lambda x, y: x.neg_(), a, b)
    check(lambda x, y: x.mul_(2).add_(1), make((3, 4), I64), b)
    check(lambda x, y: x.add_(y), a, make((4,), I64))  # float self, int other
    # writes through a view
    check(lambda x, y: x[:, 1:3].mul_(y[:, :2]), a, b)
    check(lambda x, y: x.t().add_(3), a, b)
    # out=
    check(lambda x, y, o: torch.add(x, y, out=o), a, b, torch.empty(3, 4))
    check(lambda x, y, o: torch.mul(x, y, out=o), a, b, torch.empty(0))
    check(lambda x, y, o: torch.div(x, y, out=o), a, b, torch.empty(3, 4, dtype=torch.float64))
    check(lambda x, y, o: torch.atan2(x, y, out=o), a, b, torch.empty(3, 4))
    check(lambda x, y, o: torch.maximum(x, y, out=o), a, b, torch.empty(3, 4))


def test_noncontiguous():
    a, b = noncontiguous(make((4, 5), seed=1)), noncontiguous(make((4, 5), seed=2))
    check(torch.add, a, b)
    check(torch.mul, a.t(), b.t())
    check(lambda x, y: torch.div(x, y, rounding_mode="floor"), a, b)
    check(torch.pow, a.abs(), b)
    check(torch.maximum, a[::2], b[1::2])


def test_errors():
    a = make((3,), BF16).to("tpu")
    with pytest.raises(RuntimeError):
        torch.add(a, torch.ones(4, device="tpu"))
    with pytest.raises(RuntimeError):
        torch.ones(3, dtype=I64, device="tpu").div_(2.5)
    with pytest.raises(RuntimeError):
        torch.sub(torch.ones(3, dtype=BOOL, device="tpu"), torch.ones(3, dtype=BOOL, device="tpu"))


GRADS = {
    "add": lambda a, b: torch.add(a, b, alpha=0.5),
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "pow": lambda a, b: torch.pow(a.abs() + 0.5, b),
    "pow_scalar": lambda a, b: a ** 3 + b ** 2,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "atan2": torch.atan2,
    "hypot": torch.hypot,
    "lerp": lambda a, b: torch.lerp(a, b, 0.3),
    "addcmul": lambda a, b: torch.addcmul(a, a, b, value=0.5),
    "addcdiv": lambda a, b: torch.addcdiv(a, a, b, value=0.5),
    "remainder": torch.remainder,
    "neg_recip": lambda a, b: torch.reciprocal(a) - b,
    "xlogy": lambda a, b: torch.xlogy(a, b.abs() + 0.1),
}


@pytest.mark.parametrize("name", list(GRADS))
def test_grad(name):
    check_grad(GRADS[name], make((3, 4), seed=1), make((3, 4), seed=2))


# bf16 with a tensor operand of another dtype: TensorIterator (CPU, CUDA)
# rounds the operand to bf16 before computing in float32, except mul/div's
# 0-dim second operand, which both read unrounded. Bit-exact against CPU.
ROUNDED_OPERANDS = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "remainder": torch.remainder,
    "atan2": torch.atan2,
    "hypot": torch.hypot,
    "logaddexp": torch.logaddexp,
    "xlogy": torch.xlogy,
    "xlog1py": torch.special.xlog1py,
}


@pytest.mark.parametrize("name", sorted(ROUNDED_OPERANDS))
@pytest.mark.parametrize("operand", ["f32_0dim_tpu", "f32_0dim_cpu", "f64_0dim_cpu", "int64_tensor"])
@pytest.mark.parametrize("first", [False, True])
def test_bf16_with_other_dtype_operand_rounds_like_cpu(name, operand, first):
    if name == "div_floor" and operand == "int64_tensor" and first:
        pytest.skip("CPU rounds floor division's intermediates to bf16: quotients in the thousands tie differently")
    fn = ROUNDED_OPERANDS[name]
    g = torch.Generator().manual_seed(0)
    x = ((torch.rand(2048, generator=g) + 0.05) * 3).to(BF16)
    if operand == "int64_tensor":
        other = torch.randint(200, 5000, (2048,), generator=g)
    else:
        other = torch.tensor(0.1234567, dtype=F32 if operand.startswith("f32") else torch.float64)
    dev_other = other.to("tpu") if operand != "f32_0dim_cpu" and operand != "f64_0dim_cpu" else other
    want = fn(other, x) if first else fn(x, other)
    got = (fn(dev_other, x.to("tpu")) if first else fn(x.to("tpu"), dev_other)).cpu()
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def test_bf16_xlogy_rounds_the_log_like_cpu():
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randn(4096, generator=g) * 3).to(BF16), (torch.rand(4096, generator=g) * 3).to(BF16)
    for fn in (torch.xlogy, torch.special.xlog1py):
        torch.testing.assert_close(fn(x.to("tpu"), y.to("tpu")).cpu(), fn(x, y), rtol=0, atol=0)


def test_pow_of_uint8_wraps_the_exponent_like_cpu():
    # The exponent takes the result's dtype first (an int64 0-dim -7 is
    # uint8 249, as CPU casts it); XLA read uint8 249 as -7 and gave 0.
    a = torch.tensor([6, 4, 5, 1, 0, 255], dtype=torch.uint8)
    check(lambda x: torch.pow(x, torch.tensor(-7)), a)
    check(lambda x, e: torch.pow(x, e), a, torch.tensor([249, 3, 7, 0, 2, 200], dtype=torch.uint8))


@pytest.mark.parametrize("dt", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8])
def test_integer_pow_wraps_like_cpu(dt):
    # XLA's integer power overflowed as undefined behaviour: 55 ** 127 in
    # int64 gave 8238111181504701561 for CPU's 5131385751627792775.
    info = torch.iinfo(dt)
    a = torch.tensor([55, -55, 127, 3, 0, 1, -1, 2, 7], dtype=torch.int64).clamp(info.min, info.max).to(dt)
    e = torch.tensor([127, 127, 127, 40, 0, 100, 101, 63, 5], dtype=torch.int64).clamp(0, info.max).to(dt)
    check(torch.pow, a, e)
    check(lambda x: torch.pow(x, 33), a)


def test_pow_of_complex_zero_base_like_cpu():
    # XLA's 0^z is exp(z log 0), NaN; CPU's is 0 where Re z > 0.
    z = torch.tensor([0, 1, 0, 2, 0], dtype=torch.complex64)
    check(lambda x: torch.pow(x, 1 + 2j), z)
    check(lambda x, e: torch.pow(x, e), z, torch.tensor([1 + 2j, 2, 0.5j, -1, 3], dtype=torch.complex64))
    check(lambda x: torch.pow(x, 2), z)


def test_pow_half_exponents_are_sqrt_at_negative_zero_and_inf():
    x = torch.tensor([-0.0, 0.0, -float("inf"), float("inf"), 4.0, 0.25])
    for e in (0.5, -0.5):
        want, got = torch.pow(x, e), torch.pow(x.to("tpu"), e).cpu()
        torch.testing.assert_close(got, want, equal_nan=True)
        assert torch.equal(got[:2].signbit(), want[:2].signbit())


@pytest.mark.parametrize("dt", [torch.float32, torch.complex64, torch.complex128])
def test_pow_special_scalar_exponents_like_cpu(dt):
    # CPU computes exponents 2, 3, -1, -2 as products/reciprocals: exact where
    # power's polar form is not ((1+2i)^2 = -3+4i).
    x = torch.tensor([1 + 2j, 10j, -3 + 0.5j, 0.25 - 1j], dtype=dt) if dt.is_complex else torch.randn(64)
    for e in (2, 3, -1, -2):
        torch.testing.assert_close(torch.pow(x.to("tpu"), e).cpu(), torch.pow(x, e), rtol=2e-7 if e < 0 else 0,
                                   atol=0)
    z = torch.tensor([-4 + 0j], dtype=dt).conj() if dt.is_complex else torch.tensor([-0.0, 4.0])
    torch.testing.assert_close(torch.pow(z.to("tpu"), 0.5).cpu(), torch.pow(z, 0.5))
