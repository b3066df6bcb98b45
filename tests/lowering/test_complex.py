"""Complex tensors on tpu vs CPU: elementwise math, parts and views,
reductions, matmul, FFT magnitudes, spectrograms (stft / istft), rotary
embeddings as Llama's reference code writes them, gradients through complex
intermediates, and linalg.eig / eigvals."""

import pytest
import torch

from utils import assert_close, check

C64, C128, F32 = torch.complex64, torch.complex128, torch.float32
TOL = dict(atol=1e-4, rtol=1e-4)


def cmake(shape, dtype=C64, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    real = torch.float32 if dtype == C64 else torch.float64
    return torch.complex(torch.randn(shape, generator=g, dtype=real),
                         torch.randn(shape, generator=g, dtype=real)) * scale


UNARY = {
    "exp": torch.exp, "log": torch.log, "log2": torch.log2, "log10": torch.log10,
    "log1p": torch.log1p, "expm1": torch.expm1, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "tanh": torch.tanh,
    "sinh": torch.sinh, "cosh": torch.cosh, "asin": torch.asin, "acos": torch.acos,
    "atan": torch.atan, "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh,
    "sigmoid": torch.sigmoid, "reciprocal": torch.reciprocal, "neg": torch.neg,
    "sgn": torch.sgn, "abs": torch.abs, "angle": torch.angle, "conj_physical": torch.conj_physical,
    "exp2": torch.exp2, "square": torch.square,
}


@pytest.mark.parametrize("name", list(UNARY))
@pytest.mark.parametrize("dtype", [C64, C128])
def test_unary(name, dtype):
    out = check(UNARY[name], cmake((5, 7), dtype), **TOL)
    # abs / angle are real; everything else keeps the complex dtype.
    assert out.dtype == UNARY[name](cmake((1,), dtype)).dtype


def test_unary_special_values():
    x = torch.tensor([0j, 1 + 0j, -1 + 0j, 1j, -1j, 2 + 0j, -2 + 0j, complex(float("nan"), 1),
                      complex(float("inf"), 0), complex(0, float("inf"))], dtype=C64)
    for fn in (torch.abs, torch.angle, torch.sgn, torch.isnan, torch.isinf, torch.isfinite,
               torch.nan_to_num, torch.sqrt, torch.asin, torch.acos, torch.atanh):
        check(fn, x, **TOL)


@pytest.mark.parametrize("op", [torch.add, torch.sub, torch.mul, torch.div, torch.pow])
def test_binary(op):
    a, b = cmake((4, 6), seed=1), cmake((6,), seed=2)
    check(op, a, b, **TOL)
    check(op, a, 1.5 - 0.5j, **TOL)  # a complex Python scalar
    check(op, a, torch.randn(4, 6), **TOL)  # real tensor promotes to complex


def test_more_binary():
    a, b = cmake((4, 6), seed=1), cmake((4, 6), seed=2)
    check(torch.logaddexp, a, b, **TOL)
    out = check(torch.float_power, a, 2, **TOL)
    assert out.dtype == C128
    check(lambda t: torch.renorm(t, 2, 0, 1.0), a, **TOL)
    check(torch.lerp, a, b, cmake((4, 6), seed=3) * 0.3, **TOL)


def test_parts_and_views():
    z = cmake((3, 4))
    check(lambda t: t.real * 2, z)
    check(lambda t: t.imag + 1, z)
    check(torch.view_as_real, z)
    check(lambda t: torch.view_as_complex(t.contiguous()), torch.randn(3, 4, 2))
    check(lambda t: t.conj() * t, z, **TOL)
    check(lambda r, a: torch.polar(r, a), torch.rand(3, 4), torch.randn(3, 4), **TOL)
    check(torch.complex, torch.randn(3, 4), torch.randn(3, 4))


def test_view_as_real_write_back():
    """Writing through view_as_real changes the complex tensor it views."""
    z = cmake((2, 3))
    zc, zt = z.clone(), z.to("tpu")
    torch.view_as_real(zc)[..., 1].mul_(-3)
    torch.view_as_real(zt)[..., 1].mul_(-3)
    assert_close(zt, zc)
    zc.real.add_(1)
    zt.real.add_(1)
    assert_close(zt, zc)


@pytest.mark.parametrize("fn", [
    torch.sum, torch.mean, torch.prod,
    lambda t: t.sum(dim=1), lambda t: t.mean(dim=0, keepdim=True), lambda t: t.prod(dim=1),
    lambda t: torch.var(t, dim=1), lambda t: torch.std(t), lambda t: torch.var_mean(t, dim=0),
    lambda t: torch.linalg.vector_norm(t, dim=1), lambda t: torch.linalg.vector_norm(t, ord=1),
    lambda t: torch.linalg.vector_norm(t, ord=float("inf")), lambda t: t.norm(),
    lambda t: torch.cumsum(t, 1), lambda t: torch.cumprod(t, 1),
])
def test_reductions(fn):
    check(fn, cmake((4, 5), scale=0.7), **TOL)


def test_matmul():
    a, b = cmake((5, 3), seed=1), cmake((3, 4), seed=2)
    check(torch.matmul, a, b, **TOL)
    check(torch.bmm, cmake((2, 5, 3)), cmake((2, 3, 4), seed=3), **TOL)
    check(torch.vdot, cmake((6,)), cmake((6,), seed=4), **TOL)
    check(torch.dot, cmake((6,)), cmake((6,), seed=4), **TOL)
    check(lambda x, y: torch.einsum("ij,jk->ik", x, y), a, b, **TOL)
    check(lambda x, y: x @ y.mH, a, a, **TOL)  # conjugate-transpose view operand


def test_rfft_abs():
    x = torch.randn(4, 64)
    out = check(lambda t: torch.fft.rfft(t).abs(), x, **TOL)
    assert out.dtype == F32
    check(lambda t: torch.fft.fft(t).angle(), x, atol=1e-3, rtol=1e-3)
    check(lambda t: torch.fft.irfft(torch.fft.rfft(t) * torch.fft.rfft(t).conj()), x, **TOL)


def test_spectrogram_round_trip():
    """A magnitude spectrogram matches CPU; istft(stft(x)) gives x back."""
    x = torch.randn(2, 800)
    win = torch.hann_window(128)

    def spec(t, w):
        s = torch.stft(t, 128, hop_length=32, window=w, return_complex=True)
        return s.abs() ** 2

    check(spec, x, win, atol=1e-3, rtol=1e-4)

    def round_trip(t, w):
        s = torch.stft(t, 128, hop_length=32, window=w, return_complex=True)
        return torch.istft(s, 128, hop_length=32, window=w, length=t.shape[-1])

    back = check(round_trip, x, win, **TOL)
    assert_close(back, x, atol=1e-4, rtol=1e-4)


# Rotary embeddings as Llama's reference implementation writes them.
def precompute_freqs_cis(dim, end, theta=10000.0, device="cpu"):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=device)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=device, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


@pytest.mark.parametrize("dtype", [F32, torch.bfloat16])
def test_rotary_embedding(dtype):
    bsz, seq, heads, hd = 2, 6, 3, 8
    g = torch.Generator().manual_seed(0)
    xq = torch.randn(bsz, seq, heads, hd, generator=g).to(dtype)
    xk = torch.randn(bsz, seq, heads, hd, generator=g).to(dtype)
    fc = precompute_freqs_cis(hd, seq)
    ft = precompute_freqs_cis(hd, seq, device="tpu")
    assert ft.device.type == "tpu"
    assert_close(ft, fc, **TOL)
    q_c, k_c = apply_rotary_emb(xq, xk, fc)
    q_t, k_t = apply_rotary_emb(xq.to("tpu"), xk.to("tpu"), ft)
    tol = TOL if dtype == F32 else dict(atol=1e-2, rtol=1e-2)
    assert_close(q_t, q_c, **tol)
    assert_close(k_t, k_c, **tol)


@pytest.mark.parametrize("loss", [
    lambda a, b: torch.view_as_complex(a.reshape(4, 3, 2)).abs().sum(),
    lambda a, b: (torch.view_as_complex(a.reshape(4, 3, 2))
                  @ torch.view_as_complex(b.reshape(3, 2, 2))).abs().pow(2).sum(),
    lambda a, b: torch.view_as_real(torch.view_as_complex(a.reshape(4, 3, 2)).exp()).sum(),
    lambda a, b: torch.fft.rfft(a.reshape(-1)).abs().sum(),
    lambda a, b: (torch.polar(a[:3, :4].abs() + 0.1, b) * (1 - 2j)).real.sum(),
])
def test_real_loss_gradients(loss):
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(4, 6, generator=g), torch.randn(3, 4, generator=g)
    cpu = [t.clone().requires_grad_() for t in (a, b)]
    tpu = [t.to("tpu").requires_grad_() for t in (a, b)]
    lc, lt = loss(*cpu), loss(*tpu)
    assert_close(lt.detach(), lc.detach(), **TOL)
    lc.backward()
    lt.backward()
    for c, t in zip(cpu, tpu):
        if c.grad is None:
            assert t.grad is None
            continue
        assert t.grad.device.type == "tpu"
        assert_close(t.grad, c.grad, atol=1e-4, rtol=1e-4)


# Gradients with respect to complex leaves (CPU's conjugate-Wirtinger
# convention). sigmoid and tanh once lost the conj in their backward
# kernels: a silent wrong gradient, which OpInfo's float32 gradient
# comparison does not see.
COMPLEX_GRAD = {
    "sigmoid": lambda x, y: torch.sigmoid(x), "tanh": lambda x, y: torch.tanh(x),
    "tanh_chain": lambda x, y: torch.tanh(torch.sigmoid(x) * y),
    "exp_log_sqrt": lambda x, y: x.exp() + (y * y).log() + x.sqrt(), "div_reciprocal": lambda x, y: x / y + y.reciprocal(),
    "abs_angle": lambda x, y: x.abs() * y.angle(), "pow": lambda x, y: x ** 2.5, "sin_cosh": lambda x, y: x.sin() * y.cosh(),
    "matmul": lambda x, y: x.reshape(2, 3) @ y.reshape(3, 2), "fft": lambda x, y: torch.fft.fft(x * y),
    "cumprod_prod": lambda x, y: x.cumprod(0) + y.prod(), "sgn_where": lambda x, y: torch.where(x.real > 0, x.sgn(), y),
    "logsumexp": lambda x, y: torch.logsumexp(x * y, 0), "inv_det": lambda x, y: torch.linalg.inv(
        x.reshape(2, 3)[:, :2] + 3 * torch.eye(2, device=x.device)) * torch.linalg.det(y.reshape(2, 3)[:, 1:]),
}


@pytest.mark.parametrize("name", sorted(COMPLEX_GRAD))
def test_gradients_of_complex_leaves(name):
    a, b = cmake((6,), seed=11), cmake((6,), seed=12)
    grads = []
    for d in ("cpu", "tpu"):
        x, y = a.to(d).detach().requires_grad_(), b.to(d).detach().requires_grad_()
        out = COMPLEX_GRAD[name](x, y)
        # a real loss of a complex output, mixing parts
        loss = (out * out.conj()).real.sum() + 0.3 * out.real.sum()
        if out.is_complex():
            loss = loss + 0.7 * out.imag.sum()
        loss.backward()
        grads.append((x.grad, y.grad))
    for c, t in zip(*grads):
        assert (c is None) == (t is None)
        if c is not None:
            assert_close(t, c, atol=1e-4, rtol=1e-4)


def _sorted_eigvals(w):
    w = w.cpu().to(torch.complex128)
    key = w.real * 1e3 + w.imag  # well-separated test spectra: sort by value
    return torch.gather(w, -1, torch.argsort(key, dim=-1))


@pytest.mark.parametrize("dtype,shape", [
    (F32, (5, 5)), (C64, (6, 6)), (torch.float64, (2, 4, 4)), (C128, (3, 3)), (F32, (1, 1)),
])
def test_eig(dtype, shape):
    """linalg.eig of general matrices: A V = V diag(w), unit eigenvectors,
    and the same spectrum as CPU (eigenvector phases and eigenvalue order
    are not defined, so those are not compared)."""
    g = torch.Generator().manual_seed(5)
    if dtype.is_complex:
        A = torch.randn(*shape, dtype=dtype, generator=g)
    else:
        A = torch.randn(*shape, dtype=dtype, generator=g)
    w_c, _ = torch.linalg.eig(A)
    w_t, V_t = torch.linalg.eig(A.to("tpu"))
    assert w_t.device.type == "tpu" and w_t.dtype == w_c.dtype and V_t.dtype == w_c.dtype
    assert V_t.shape == A.shape
    tol = 1e-4 if dtype in (F32, C64) else 1e-9
    Ac = A.to(w_c.dtype)
    w, V = w_t.cpu(), V_t.cpu()
    assert_close(Ac @ V, V * w.unsqueeze(-2), atol=tol * 10, rtol=tol * 10)
    assert_close(torch.linalg.vector_norm(V, dim=-2), torch.ones(w.shape, dtype=w.real.dtype), atol=tol, rtol=tol)
    assert_close(_sorted_eigvals(w), _sorted_eigvals(w_c), atol=tol * 10, rtol=tol * 10)
    ev = torch.linalg.eigvals(A.to("tpu"))
    assert_close(_sorted_eigvals(ev), _sorted_eigvals(w_c), atol=tol * 10, rtol=tol * 10)
    out = torch.empty(0, dtype=w_c.dtype, device="tpu")  # linalg_eigvals.out had no rule
    torch.linalg.eigvals(A.to("tpu"), out=out)
    assert_close(out.cpu(), ev.cpu(), atol=0, rtol=0)


def test_eig_known_spectrum():
    """A rotation-like real matrix with complex eigenvalues, and a matrix
    built from a known spectrum (repeated eigenvalue included)."""
    rot = torch.tensor([[0.0, -2.0], [2.0, 0.0]])
    w, V = torch.linalg.eig(rot.to("tpu"))
    assert_close(_sorted_eigvals(w), torch.tensor([-2j, 2j], dtype=torch.complex128), atol=1e-5, rtol=1e-5)
    g = torch.Generator().manual_seed(1)
    S = torch.randn(4, 4, dtype=torch.float64, generator=g)
    lam = torch.tensor([3.0, -1.0, 0.5, 3.0], dtype=torch.float64)
    A = S @ torch.diag(lam) @ torch.linalg.inv(S)
    w = torch.linalg.eigvals(A.to("tpu"))
    assert_close(_sorted_eigvals(w), _sorted_eigvals(lam.to(torch.complex128)), atol=1e-6, rtol=1e-6)


# Complex linear algebra: the real algorithms' complex forms (lowering/
# linalg_cplx.h). Non-unique outputs are compared as PyTorch's OpInfo does:
# |U|, |V| (phase-free), or through a reconstruction.
def _hpd(n, seed=3):
    a = cmake((2, n, n), seed=seed)
    return a @ a.mH + n * torch.eye(n)


LINALG = {
    "qr": lambda a, b: torch.linalg.qr(a),
    "geqrf_ormqr": lambda a, b: torch.ormqr(*torch.geqrf(a), b, left=True, transpose=True),
    "cholesky_solve_upper": lambda a, b: torch.cholesky_solve(
        b, torch.linalg.cholesky(a @ a.mH + 4 * torch.eye(4, device=a.device), upper=True), upper=True),
    "lu_solve_adjoint": lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, adjoint=True),
    "solve_right": lambda a, b: torch.linalg.solve(a, b.mT, left=False),
    "det_slogdet": lambda a, b: (torch.linalg.det(a), *torch.linalg.slogdet(a)),
    "triangular_solve_transpose": lambda a, b: torch.triangular_solve(b, a.tril() + 3 * torch.eye(4, device=a.device),
                                                                      upper=False, transpose=True),
    "eigh": lambda a, b: (lambda r: (r[0], r[1].abs()))(torch.linalg.eigh(a @ a.mH, UPLO="U")),
    "svd_wide": lambda a, b: (lambda r: (r[0].abs(), r[1], r[2][..., :3, :].abs()))(torch.linalg.svd(a[..., :3, :])),
    "lstsq_wide": lambda a, b: torch.linalg.lstsq(a[..., :3, :], b[..., :3, :]).solution,
    "matrix_exp": lambda a, b: torch.linalg.matrix_exp(0.3 * a),
}


@pytest.mark.parametrize("name", list(LINALG))
def test_linalg_complex(name):
    a, b = cmake((2, 4, 4), seed=4), cmake((2, 4, 3), seed=5)
    check(LINALG[name], a, b, atol=1e-4, rtol=1e-4)


def test_linalg_complex_reconstructs():
    """Complex128 (x64): A = U S V^H (tall), A V = V diag(w) (Hermitian)."""
    a = cmake((5, 3), C128, seed=6).to("tpu")
    U, S, Vh = torch.linalg.svd(a, full_matrices=False)
    assert_close(U @ torch.diag(S).to(a.dtype) @ Vh, a.cpu(), atol=1e-10, rtol=1e-10)
    h = _hpd(4).to(C128).to("tpu")
    w, V = torch.linalg.eigh(h)
    assert w.dtype == torch.float64
    assert_close(V @ torch.diag_embed(w).to(h.dtype) @ V.mH, h.cpu(), atol=1e-9, rtol=1e-9)


def test_ldl_complex_symmetric():
    a = cmake((4, 4), seed=7)
    a = a + a.mT  # complex symmetric, not Hermitian
    check(lambda x: torch.linalg.ldl_factor_ex(x), a, atol=1e-4, rtol=1e-4)
    with pytest.raises(RuntimeError, match="hermitian=True"):
        torch.linalg.ldl_factor_ex(_hpd(4)[0].to("tpu"), hermitian=True)


def test_logcumsumexp():
    # Large imaginary parts: the result's imaginary part depends on the
    # combine order, which must be CPU's.
    check(lambda t: torch.logcumsumexp(t, 1), cmake((3, 6), seed=8, scale=9.0), **TOL)
