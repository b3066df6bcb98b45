"""Special functions (gamma family, erf family, Bessel, orthogonal
polynomials, sinc, logit, entr, xlog1py, zeta) on tpu vs CPU."""

import pytest
import torch

from utils import assert_close, check, check_grad, make, noncontiguous

F32, BF16, F64, I64, BOOL = torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.bool
S = torch.special

# name -> (fn, input range, f32 tolerance (atol, rtol))
UNARY = {
    "lgamma": (torch.lgamma, (-6, 12), (2e-5, 2e-5)),
    "digamma": (torch.digamma, (-6, 12), (3e-5, 3e-5)),
    "erfinv": (torch.erfinv, (-1, 1), (1e-5, 2e-5)),
    "i0": (torch.i0, (-12, 12), (1e-5, 2e-5)),
    "i0e": (S.i0e, (-12, 12), (1e-5, 2e-5)),
    "i1": (S.i1, (-12, 12), (1e-5, 2e-5)),
    "i1e": (S.i1e, (-12, 12), (1e-5, 2e-5)),
    "sinc": (torch.sinc, (-4, 4), (1e-5, 2e-5)),
    "logit": (torch.logit, (0.01, 0.99), (1e-5, 2e-5)),
    "entr": (S.entr, (-1, 5), (1e-5, 2e-5)),
    "erfcx": (S.erfcx, (-5, 60), (1e-5, 2e-5)),
    "log_ndtr": (S.log_ndtr, (-12, 6), (1e-5, 2e-5)),
    "ndtri": (S.ndtri, (0, 1), (1e-5, 2e-5)),
    "airy_ai": (S.airy_ai, (-12, 12), (1e-5, 5e-5)),
    "bessel_j0": (S.bessel_j0, (-15, 15), (1e-5, 2e-5)),
    "bessel_j1": (S.bessel_j1, (-15, 15), (1e-5, 2e-5)),
    "bessel_y0": (S.bessel_y0, (0.01, 15), (1e-5, 2e-5)),
    "bessel_y1": (S.bessel_y1, (0.01, 15), (1e-5, 2e-5)),
    "modified_bessel_i0": (S.modified_bessel_i0, (-12, 12), (1e-5, 2e-5)),
    "modified_bessel_i1": (S.modified_bessel_i1, (-12, 12), (1e-5, 2e-5)),
    "modified_bessel_k0": (S.modified_bessel_k0, (0.01, 12), (1e-5, 2e-5)),
    "modified_bessel_k1": (S.modified_bessel_k1, (0.01, 12), (1e-5, 2e-5)),
    "scaled_modified_bessel_k0": (S.scaled_modified_bessel_k0, (0.01, 12), (1e-5, 2e-5)),
    "scaled_modified_bessel_k1": (S.scaled_modified_bessel_k1, (0.01, 12), (1e-5, 2e-5)),
    "spherical_bessel_j0": (S.spherical_bessel_j0, (-10, 10), (1e-5, 2e-5)),
}

def check_supported(fn, *args, **kw):
    """check() where CPU implements fn for these dtypes (bf16 and integer
    support varies between the special functions)."""
    try:
        fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    except (NotImplementedError, RuntimeError) as e:
        if "not implemented for" in str(e):
            return
        raise
    check(fn, *args, **kw)


EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-6, 2.0, 3.0, -2.5, 5.0, 8.0, 10.0, -10.0, 50.0, 120.0,
         1e10, -1e10, float("inf"), -float("inf"), float("nan")]


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name):
    fn, (lo, hi), (atol, rtol) = UNARY[name]
    # XLA's sine loses precision on huge arguments (airy_ai(-1e10)).
    edges = torch.tensor([e for e in EDGES if name != "airy_ai" or abs(e) < 1e9])
    check(fn, torch.cat([make((64,), F32, low=lo, high=hi), edges]), atol=atol, rtol=rtol)
    check(fn, noncontiguous(make((4, 6), F32, low=lo, high=hi)), atol=atol, rtol=rtol)
    check_supported(fn, make((4, 6), BF16, low=lo, high=hi), atol=2e-2, rtol=2e-2)
    check(fn, make((16,), F64, low=lo, high=hi), atol=1e-6, rtol=1e-6)
    check(lambda t, o: fn(t, out=o), make((), F32, low=lo, high=hi), torch.empty(()), atol=atol, rtol=rtol)


@pytest.mark.parametrize("fn", [torch.lgamma, torch.i0, S.bessel_j0, S.erfcx, S.log_ndtr])
def test_unary_integer_inputs(fn):
    check_supported(fn, torch.tensor([-2, -1, 0, 1, 2, 5, 30]))
    check_supported(fn, torch.tensor([True, False]))


@pytest.mark.parametrize("fn", [torch.lgamma, torch.digamma, torch.erfinv, torch.i0, torch.sinc, torch.logit])
def test_unary_inplace(fn):
    x = make((3, 4), F32, low=0.05, high=0.95)
    check(lambda t: getattr(t, fn.__name__ + "_")(), x, atol=3e-5, rtol=3e-5)


def test_gamma_accuracy():
    x = torch.linspace(-8, 30, 3001)
    check(torch.lgamma, x, atol=2e-5, rtol=2e-5)
    check(torch.digamma, x, atol=5e-5, rtol=5e-5)
    check(torch.lgamma, torch.tensor([1e5, 1e20, 0.999, 1.001, 1.999, 2.001, -100.5, -3.0]), atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_polygamma(n):
    x = make((6, 5), F32, low=0.1, high=6)
    check(lambda t: torch.polygamma(n, t), x, atol=1e-4, rtol=1e-4)
    check(lambda t: torch.polygamma(n, t), make((4,), F32, low=-3, high=-0.1), atol=1e-3, rtol=1e-3)
    check(lambda t: t.polygamma_(n), x.clone(), atol=1e-4, rtol=1e-4)
    check(lambda t: torch.polygamma(n, t), make((5,), I64, low=1, high=5), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("p", [1, 3])
def test_mvlgamma(p):
    check(lambda t: torch.mvlgamma(t, p), make((4, 5), F32, low=p, high=p + 5), atol=1e-4, rtol=1e-4)


def test_logit_eps_and_backward():
    x = make((5, 5), F32, low=-0.2, high=1.2)
    check(lambda t: torch.logit(t, eps=0.1), x)
    check(lambda t: torch.logit(t, 0.0), x)
    check(torch.logit, x)
    check_grad(lambda t: torch.logit(t, eps=0.2), make((4, 4), F32, low=0, high=1))
    check_grad(torch.logit, make((4, 4), F32, low=0.05, high=0.95))
    check(lambda g, t: torch.ops.aten.logit_backward(g, t, None), make((4,)), torch.tensor([-0.5, 0.0, 0.5, 1.5]))


def test_binary_specials():
    x, y = make((3, 1, 4), F32, low=-2, high=3), make((5, 4), F32, low=-0.9, high=5)
    check(S.xlog1py, x, y)
    check(S.xlog1py, torch.tensor([0.0, 0.0, 1.0, 2.0]), torch.tensor([float("nan"), -1.0, -1.0, float("inf")]))
    check(lambda a: S.xlog1py(a, 2.5), x)
    check(lambda b: S.xlog1py(2.0, b), y)
    check(S.xlog1py, make((4,), I64, low=0, high=4), make((4,), I64, low=0, high=4))
    check_supported(S.xlog1py, make((4, 4), BF16), make((4, 4), BF16, low=0, high=3), atol=2e-2, rtol=2e-2)
    check_grad(S.xlog1py, make((3, 4)), make((3, 4), low=0, high=3))
    q = make((5, 4), F32, low=0.1, high=5)
    check(S.zeta, make((3, 1, 4), F32, low=1.1, high=6), q, atol=1e-4, rtol=1e-4)
    check(S.zeta, torch.tensor([1.0, 0.5, 2.0, 3.0, 2.0, 2.5, 4.0]),
          torch.tensor([1.0, 1.0, 0.0, -2.0, -2.5, -2.5, -7.5]), atol=1e-4, rtol=1e-4)
    check(lambda b: S.zeta(3.0, b), q, atol=1e-4, rtol=1e-4)
    check(lambda a: S.zeta(a, 2.0), make((6,), F32, low=1.5, high=8), atol=1e-4, rtol=1e-4)


GRADS = {
    "lgamma": (torch.lgamma, (0.1, 6)),
    "digamma": (torch.digamma, (0.5, 6)),
    "polygamma2": (lambda t: torch.polygamma(2, t), (0.5, 4)),
    "erfinv": (torch.erfinv, (-0.9, 0.9)),
    "i0": (torch.i0, (-5, 5)),
    "i0e": (S.i0e, (-5, 5)),
    "i1": (S.i1, (-5, 5)),
    "i1e": (S.i1e, (-5, 5)),
    "sinc": (torch.sinc, (-3, 3)),
    "entr": (S.entr, (0.1, 3)),
    "erfcx": (S.erfcx, (-2, 5)),
    "log_ndtr": (S.log_ndtr, (-5, 5)),
    "ndtri": (S.ndtri, (0.05, 0.95)),
    "mvlgamma": (lambda t: torch.mvlgamma(t, 2), (1.0, 5)),
}


@pytest.mark.parametrize("name", list(GRADS))
def test_grad(name):
    fn, (lo, hi) = GRADS[name]
    check_grad(fn, make((3, 4), F32, low=lo, high=hi), atol=1e-4, rtol=1e-4)


POLY = {
    "chebyshev_t": S.chebyshev_polynomial_t,
    "chebyshev_u": S.chebyshev_polynomial_u,
    "chebyshev_v": S.chebyshev_polynomial_v,
    "chebyshev_w": S.chebyshev_polynomial_w,
    "shifted_chebyshev_t": S.shifted_chebyshev_polynomial_t,
    "shifted_chebyshev_u": S.shifted_chebyshev_polynomial_u,
    "shifted_chebyshev_v": S.shifted_chebyshev_polynomial_v,
    "shifted_chebyshev_w": S.shifted_chebyshev_polynomial_w,
    "hermite_h": S.hermite_polynomial_h,
    "hermite_he": S.hermite_polynomial_he,
    "laguerre_l": S.laguerre_polynomial_l,
    "legendre_p": S.legendre_polynomial_p,
}


@pytest.mark.parametrize("name", list(POLY))
def test_polynomial(name):
    fn = POLY[name]
    lo, hi = (0, 1) if name.startswith("shifted") else (-1.2, 1.2)
    x = make((6, 1), F32, low=lo, high=hi)
    n = torch.tensor([-1.0, 0.0, 1.0, 2.0, 3.0, 5.0, 7.5, 9.0, 12.0])
    check(fn, x, n, atol=1e-4, rtol=1e-4)
    # Exact points, integer n, Scalar forms.
    edges = torch.tensor([1.0, -1.0, 0.0, 0.5, 2.0, -3.0, float("nan")]).reshape(7, 1)
    check(fn, edges, torch.tensor([0, 1, 2, 3, 4, 7, 10]), atol=1e-4, rtol=1e-4)
    check(lambda a: fn(a, 4), noncontiguous(make((3, 4), F32, low=lo, high=hi)), atol=1e-4, rtol=1e-4)
    check(lambda b: fn(0.3, b), torch.tensor([0, 2, 5, 11]), atol=1e-4, rtol=1e-4)
    check(fn, make((4,), F64, low=lo, high=hi), torch.tensor([3.0, 8.0, 20.0, 40.0], dtype=F64), atol=1e-6, rtol=1e-6)
    check(lambda a, b, o: fn(a, b, out=o), x, n, torch.empty(6, 9), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["chebyshev_t", "chebyshev_u", "chebyshev_v", "chebyshev_w"])
def test_chebyshev_large_n(name):
    fn = POLY[name]
    x = torch.tensor([-1.05, -0.7, 0.2, 0.99, 1.01, 1.3]).reshape(6, 1)
    check(fn, x, torch.tensor([30.0, 33.0, 40.0, 60.0]), atol=1e-3, rtol=2e-3)


@pytest.mark.parametrize("name", ["hermite_h", "hermite_he", "laguerre_l", "legendre_p"])
def test_recurrence_polynomials_of_high_degree(name):
    # CPU runs the recurrence to n: these were unrolled to 64 steps (P_100
    # came out as P_65) or 128 (double Hermite allows 512); n past int64
    # is a negative degree on CPU (0), past Hermite's limit NaN, and a
    # recurrence that overflows is NaN on both (inf - inf).
    fn = POLY[name]
    x = torch.tensor([0.5, -0.3, 0.9, 1.0, -1.0, 0.0, 2.0, -501.0, float("nan")], dtype=F64).reshape(-1, 1)
    n = torch.tensor([0, 1, 2, 64, 65, 100, 130, 300, 501, 600, 1e20, -3], dtype=F64)
    check(fn, x, n, atol=1e-9, rtol=1e-9)
    check(fn, x.float(), n.float(), atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("fn", [torch.igamma, torch.igammac])
def test_incomplete_gamma(fn):
    a = torch.tensor([0.0, 0.1, 0.5, 1.0, 2.0, 3.5, 7.0, 15.0, 20.0, float("inf"), -1.0]).reshape(-1, 1)
    x = torch.tensor([0.0, 1e-3, 0.3, 0.5, 0.8, 1.0, 1.05, 1.5, 3.0, 8.9, 20.0, 50.0, float("inf"), -1.0])
    check(fn, a, x, atol=1e-5, rtol=1e-4)



def test_incomplete_gamma_inplace():
    check(lambda p, q: p.igamma_(q), make((3, 4), low=0.1, high=5), make((4,), low=0, high=8), atol=1e-5, rtol=1e-4)


def test_standard_gamma_grad_matches_cpu_in_each_regime():
    # Gamma.rsample's backward: a series for x < 0.8, Rice's expansion for
    # alpha > 8 (its polynomial form within 10% of alpha), a rational fit
    # elsewhere. In float64, as CPU (off a TPU).
    g = torch.Generator().manual_seed(0)
    alpha = torch.cat([torch.rand(300, generator=g) * 0.5 + 0.01, torch.rand(300, generator=g) * 8,
                       torch.rand(300, generator=g) * 50 + 8, torch.tensor([9.0, 20.0, 100.0])])
    x = torch._standard_gamma(alpha, generator=g)
    x[-3:] = torch.tensor([9.1, 19.0, 150.0])
    assert (x < 0.8).any() and ((alpha > 8) & (x > 0.9 * alpha) & (x < 1.1 * alpha)).any()
    got = torch._standard_gamma_grad(alpha.to("tpu"), x.to("tpu")).cpu()
    assert_close(got, torch._standard_gamma_grad(alpha, x), atol=1e-6, rtol=1e-5)
    a64, x64 = alpha.double(), x.double()
    assert_close(torch._standard_gamma_grad(a64.to("tpu"), x64.to("tpu")).cpu(), torch._standard_gamma_grad(a64, x64),
                 atol=1e-12, rtol=1e-10)
    zero = torch.zeros(1)  # the series' NaN at x = 0 is 0, as on CPU
    assert torch._standard_gamma_grad(torch.tensor([2.0], device="tpu"), zero.to("tpu")).item() == 0.0


def test_gamma_rsample_backward():
    torch.manual_seed(1)
    a = torch.tensor([0.3, 1.5, 2.0, 12.0], device="tpu", requires_grad=True)
    y = torch.distributions.Gamma(a, torch.full((4,), 2.0, device="tpu")).rsample()
    (y * torch.arange(1.0, 5.0, device="tpu")).sum().backward()
    ac = a.detach().cpu().requires_grad_()
    # the same samples on CPU: y = standard_gamma(a) / rate, so d y / d a = grad(a, y * rate) / rate
    want = torch._standard_gamma_grad(ac.detach(), y.detach().cpu() * 2.0) / 2.0 * torch.arange(1.0, 5.0)
    assert_close(a.grad.cpu(), want, atol=1e-5, rtol=1e-4)


def test_dirichlet_grad_matches_cpu_in_each_regime():
    # Beta's and Dirichlet's rsample backward: series for x near 0 and near 1,
    # Rice's expansion when alpha and beta are both over 6 (its polynomial
    # form within 0.1 sd of the mean), a rational correction elsewhere.
    g = torch.Generator().manual_seed(0)
    n = 500
    alpha = torch.cat([torch.rand(n, generator=g) * 2 + 0.05, torch.rand(n, generator=g) * 20 + 6.5,
                       torch.rand(n, generator=g) * 5 + 0.5, torch.tensor([15.0])])
    beta = torch.cat([torch.rand(n, generator=g) * 2 + 0.05, torch.rand(n, generator=g) * 20 + 6.5,
                      torch.rand(n, generator=g) * 0.5 + 0.05, torch.tensor([15.0])])
    torch.manual_seed(0)
    x = torch.distributions.Beta(alpha, beta).sample().clamp(1e-6, 1 - 1e-6)
    x[-1] = 0.5001  # at the mean: the polynomial form
    total = alpha + beta
    boundary = total * x * (1 - x)
    assert ((x <= 0.5) & (boundary < 2.5)).any() and ((x >= 0.5) & (boundary < 0.75)).any()
    for dtype, tol in [(torch.float32, dict(atol=1e-6, rtol=1e-4)), (torch.float64, dict(atol=1e-12, rtol=1e-10))]:
        args = [t.to(dtype) for t in (x, alpha, total)]
        got = torch._dirichlet_grad(*[t.to("tpu") for t in args]).cpu()
        assert_close(got, torch._dirichlet_grad(*args), **tol)


def test_dirichlet_rsample_backward():
    from torch.distributions.dirichlet import _Dirichlet_backward

    c = torch.tensor([[0.7, 2.0, 9.0], [8.0, 7.0, 0.2]], device="tpu", requires_grad=True)
    torch.manual_seed(3)
    y = torch.distributions.Dirichlet(c).rsample()
    w = torch.arange(1.0, 7.0).view(2, 3)
    (y * w.to("tpu")).sum().backward()
    # CPU's backward of the same sample
    want = _Dirichlet_backward(y.detach().cpu(), c.detach().cpu(), w)
    assert_close(c.grad.cpu(), want, atol=1e-6, rtol=1e-5)


def test_digamma_near_its_poles():
    # Just above and below negative integers: the reflection's tan(pi x) was
    # taken of x - trunc(x), close to +-1, and lost the distance to the pole
    # in f32 (0.2-4% off: -8067479.5 for CPU's -8388607 at -2 + 1.2e-7).
    x = torch.tensor([-6.999965667724609, -4.9999895095825195, -1.9999998807907104, -0.9999833106994629,
                      -3.00002, -0.00001, -0.5, -2.5, -10.7])
    expected = torch.digamma(x.double()).float()
    for fn in (torch.digamma, lambda t: torch.polygamma(0, t)):
        assert_close(fn(x.to("tpu")), expected, rtol=1e-5, atol=0)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("fn", [torch.igamma, torch.igammac])
def test_incomplete_gamma_for_large_a(fn, dtype):
    # a in the hundreds to millions, x near a (Temme's expansion on CPU;
    # float32 gave 0.21 for CPU's 0.5 at a = x = 13437.7), x just outside
    # that band (the series then needs hundreds of terms, not 64), and
    # x = 1e20 (NaN for CPU's 1 and 0).
    a = torch.tensor([25.0, 150.0, 501.0, 1001.2, 13437.7, 4988429.0], dtype=dtype).reshape(-1, 1)
    x = (a * torch.tensor([0.5, 0.9, 0.97, 0.99, 1.0, 1.01, 1.03, 1.1, 2.0], dtype=dtype)).flatten(0)
    a = a.expand(-1, 9).flatten(0)
    a = torch.cat([a, torch.tensor([501.0, 13437.7], dtype=dtype)])
    x = torch.cat([x, torch.tensor([1e20, 1e20], dtype=dtype)])
    check(fn, a, x, atol=2e-5 if dtype == F32 else 1e-12, rtol=1e-4 if dtype == F32 else 1e-10)


def test_zeta_and_polygamma_far_from_the_origin():
    # CPU sums float32 in float64 and runs the direct sum for q < 0 until
    # q + n > 9: zeta(501, 501) is 0 there (was NaN), zeta(5, -1001.2) a
    # thousand-term sum (was 30 terms: polygamma(4, -1001.2) gave ~0 for
    # CPU's 74912.6).
    x = torch.tensor([501.0, 501.0, 1001.2, 5.0, 2.0, 3.0, 1.5])
    q = torch.tensor([501.0, -1001.2, 13437.7, -1001.2, -13437.7, 0.25, float("nan")])
    check(torch.special.zeta, x, q, atol=1e-6, rtol=1e-5)
    p = torch.tensor([-1001.2, -13437.7, -20.5, 3.7, 1e4])
    for n in (2, 3, 4):
        check(lambda t: torch.polygamma(n, t), p, atol=1e-6, rtol=1e-4)
    far = torch.tensor([-4988429.2, 2.5], dtype=F64)  # five million terms first
    check(lambda t: torch.polygamma(4, t), far, atol=1e-9, rtol=1e-9)
