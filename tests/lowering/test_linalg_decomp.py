"""Dense linear algebra on tpu against PyTorch CPU: Cholesky, triangular
solves, LU (factor, solve, det, slogdet, inv), QR / geqrf / householder
products, eigh, SVD, lstsq, matrix_exp, with gradients of the common ones."""

import pytest
import torch

from utils import assert_close, check, check_grad, make, noncontiguous

F32, F64 = torch.float32, torch.float64
TOL = {F32: dict(atol=1e-4, rtol=1e-4), F64: dict(atol=1e-9, rtol=1e-9)}


def pd(shape, dtype=F32, seed=0):
    n = shape[-1]
    a = make(shape, F64, low=-1, high=1, seed=seed)
    return (a @ a.mT + n * torch.eye(n, dtype=F64)).to(dtype)


def wellcond(shape, dtype=F32, seed=0):
    n = shape[-1]
    a = make(shape, F64, low=-1, high=1, seed=seed)
    if shape[-2] == n:
        a = a + 2 * n * torch.eye(n, dtype=F64) * (1 - 2 * (torch.arange(n) % 2))
    return a.to(dtype)


@pytest.mark.parametrize("shape,dtype", [((4, 4), F32), ((2, 3, 5, 5), F64)])
def test_cholesky(shape, dtype):
    A = pd(shape, dtype)
    check(torch.linalg.cholesky, A, **TOL[dtype])
    check(lambda a: torch.linalg.cholesky(a, upper=True), A, **TOL[dtype])
    check(lambda a: torch.linalg.cholesky_ex(a), A, **TOL[dtype])
    L = torch.linalg.cholesky(A)
    B = make(shape[:-1] + (3,), dtype, seed=2)
    check(torch.cholesky_solve, B, L, **TOL[dtype])
    check(lambda b, u: torch.cholesky_solve(b, u, upper=True), B, L.mT.contiguous(), **TOL[dtype])
    check(torch.cholesky_inverse, L, **TOL[dtype])


def test_cholesky_errors_and_grad():
    A = pd((2, 4, 4))
    A[1, 2, 2] = -100.0
    L, info = torch.linalg.cholesky_ex(A.to("tpu"))
    assert info.tolist() == torch.linalg.cholesky_ex(A)[1].tolist() == [0, 3]
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.cholesky(A.to("tpu"))
    check_grad(lambda a: torch.linalg.cholesky(a @ a.mT + 3 * torch.eye(3, device=a.device)), make((3, 3)), **TOL[F32])


@pytest.mark.parametrize("dtype", [F32])
def test_triangular(dtype):
    A = wellcond((2, 4, 4), dtype)
    B = make((2, 4, 3), dtype, seed=1)
    for upper, left in ((True, True), (False, False)):
        b = B if left else B.mT.contiguous()
        check(lambda a, x: torch.linalg.solve_triangular(a, x, upper=upper, left=left), A, b, **TOL[dtype])
    check(lambda a, x: torch.linalg.solve_triangular(a, x, upper=False, unitriangular=True), A, B, **TOL[dtype])
    for upper, tr in ((True, True), (False, False)):
        check(lambda x, a: torch.triangular_solve(x, a, upper=upper, transpose=tr), B, A, **TOL[dtype])
    # broadcast batch
    check(lambda a, x: torch.linalg.solve_triangular(a, x, upper=True), A[0], B, **TOL[dtype])
    check_grad(lambda a, x: torch.linalg.solve_triangular(a, x, upper=False), A[0], B[0], **TOL[dtype])


@pytest.mark.parametrize("shape,dtype", [((3, 4, 4), F64), ((4, 6), F32)])
def test_lu(shape, dtype):
    A = make(shape, dtype, seed=3)
    check(torch.linalg.lu_factor, A, **TOL[dtype])
    check(torch.linalg.lu, A, **TOL[dtype])
    LU, piv = torch.linalg.lu_factor(A)
    check(torch.lu_unpack, LU, piv, **TOL[dtype])


def test_lu_singular_info():
    A = make((2, 4, 4))
    A[1, :, 1] = 0
    A[1, :, 0] = 0
    exp = torch.linalg.lu_factor_ex(A)
    got = torch.linalg.lu_factor_ex(A.to("tpu"))
    assert got[2].tolist() == exp[2].tolist()
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.inv(A.to("tpu"))


@pytest.mark.parametrize("dtype", [F32])
def test_solve_inv_det(dtype):
    A = wellcond((3, 4, 4), dtype)
    B = make((3, 4, 2), dtype, seed=1)
    check(torch.linalg.solve, A, B, **TOL[dtype])
    check(lambda a, b: torch.linalg.solve(a, b, left=False), A, B.mT.contiguous(), **TOL[dtype])
    check(torch.linalg.solve, A, B[..., 0], **TOL[dtype])
    check(torch.linalg.solve, A[0], B, **TOL[dtype])
    check(torch.linalg.inv, A, **TOL[dtype])
    check(torch.linalg.det, make((3, 4, 4), dtype, seed=5), **TOL[dtype])
    check(torch.linalg.slogdet, make((3, 4, 4), dtype, seed=6), **TOL[dtype])
    LU, piv = torch.linalg.lu_factor(A)
    check(torch.linalg.lu_solve, LU, piv, B, **TOL[dtype])


def test_solve_grads():
    A = wellcond((4, 4))
    B = make((4, 3), seed=1)
    check_grad(torch.linalg.solve, A, B, **TOL[F32])
    check_grad(torch.linalg.inv, A, **TOL[F32])
    check_grad(torch.linalg.det, make((4, 4), seed=5), **TOL[F32])
    check_grad(lambda a: torch.linalg.slogdet(a)[1], make((4, 4), seed=5), **TOL[F32])


@pytest.mark.parametrize("shape,dtype", [((2, 6, 4), F64), ((4, 6), F32)])
def test_qr(shape, dtype):
    A = make(shape, dtype, seed=4)
    for mode in ("reduced", "complete", "r"):
        check(lambda a: torch.linalg.qr(a, mode=mode), A, **TOL[dtype])
    check(torch.geqrf, A, **TOL[dtype])
    a, tau = torch.geqrf(A)
    k = min(shape[-2:])
    check(torch.linalg.householder_product, a[..., :k], tau, **TOL[dtype])
    m = shape[-2]
    C = make(shape[:-2] + (m, 3), dtype, seed=5)
    for tr in (False, True):
        check(lambda x, t, c: torch.ormqr(x, t, c, left=True, transpose=tr), a, tau, C, **TOL[dtype])
        check(lambda x, t, c: torch.ormqr(x, t, c, left=False, transpose=tr), a, tau, C.mT.contiguous(), **TOL[dtype])


def test_qr_grad():
    check_grad(lambda a: torch.linalg.qr(a)[0].sum(-1) + torch.linalg.qr(a)[1].sum(-2)[:3].sum(), make((5, 3)), **TOL[F32])


def _eig_compare(A, dtype, uplo="L"):
    w, V = torch.linalg.eigh(A.to("tpu"), UPLO=uplo)
    we, Ve = torch.linalg.eigh(A, UPLO=uplo)
    assert_close(w, we, **TOL[dtype])
    # Vectors up to sign (distinct eigenvalues).
    assert_close(V.abs(), Ve.abs(), **TOL[dtype])
    S = torch.tril(A) + torch.tril(A, -1).mT if uplo == "L" else torch.triu(A) + torch.triu(A, 1).mT
    assert_close((V * w.unsqueeze(-2)) @ V.mT, S, **TOL[dtype])


@pytest.mark.parametrize("dtype", [F32])
def test_eigh(dtype):
    A = make((3, 5, 5), dtype, seed=7)
    _eig_compare(A, dtype)
    _eig_compare(A, dtype, "U")
    check(torch.linalg.eigvalsh, A, **TOL[dtype])
    check_grad(lambda a: torch.linalg.eigvalsh(a + a.mT), make((4, 4)), **TOL[F32])
    check_grad(lambda a: torch.linalg.eigh(a + a.mT)[1].abs().sum(-1), make((4, 4)), **TOL[F32])


@pytest.mark.parametrize("shape,dtype", [((2, 6, 4), F32), ((4, 6), F64)])
def test_svd(shape, dtype):
    A = make(shape, dtype, seed=8)
    for full in (False, True):
        U, S, Vh = torch.linalg.svd(A.to("tpu"), full_matrices=full)
        Ue, Se, Vhe = torch.linalg.svd(A, full_matrices=full)
        tol = dict(atol=1e-3, rtol=1e-3) if dtype == F32 else dict(atol=1e-7, rtol=1e-7)
        assert_close(S, Se, **tol)
        k = S.shape[-1]
        assert_close(U[..., :k].abs(), Ue[..., :k].abs(), **tol)
        assert_close(Vh[..., :k, :].abs(), Vhe[..., :k, :].abs(), **tol)
        assert_close((U[..., :k] * S.unsqueeze(-2)) @ Vh[..., :k, :], A, **tol)
        eye = torch.eye(U.shape[-1], dtype=dtype)
        assert_close(U.mT @ U, eye.expand(U.shape[:-2] + eye.shape), **tol)
    check(torch.linalg.svdvals, A, **TOL[dtype])
    check_grad(lambda a: torch.linalg.svdvals(a), make((4, 3), seed=9), **TOL[F32])


def test_svd_rank_deficient():
    A = make((5, 2), seed=1) @ make((2, 4), seed=2)
    U, S, Vh = torch.linalg.svd(A.to("tpu"))
    assert_close(S, torch.linalg.svdvals(A), atol=1e-3, rtol=1e-3)
    assert_close((U[:, :4] * S) @ Vh, A, atol=1e-3, rtol=1e-3)
    assert_close(U.mT @ U, torch.eye(5), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [F32])
def test_matrix_exp(dtype):
    check(torch.linalg.matrix_exp, make((3, 4, 4), dtype, seed=3), **TOL[dtype])
    check(torch.linalg.matrix_exp, make((4, 4), dtype, low=-0.1, high=0.1, seed=3), **TOL[dtype])
    check(torch.linalg.matrix_exp, torch.zeros(3, 3, dtype=dtype))
    check_grad(torch.linalg.matrix_exp, make((3, 3), low=-1, high=1), **TOL[F32])


# linalg_lstsq has no meta kernel: torch.linalg.lstsq hands its .out form
# empty out= tensors, which the engine resizes to the rule's results.
@pytest.mark.parametrize("dtype", [F32])
def test_lstsq(dtype):
    A, B = make((2, 6, 4), dtype, seed=1), make((2, 6, 3), dtype, seed=2)
    check(lambda a, b: torch.linalg.lstsq(a, b).solution, A, B, **TOL[dtype])
    A, B = make((3, 5), dtype, seed=1), make((3, 2), dtype, seed=2)
    check(lambda a, b: torch.linalg.lstsq(a, b).solution, A, B, **TOL[dtype])


# Every output (residuals, rank, singular values) per driver, shapes as CPU's.
@pytest.mark.parametrize("driver", [None, "gels", "gelsd", "gelss", "gelsy"])
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((5, 3), (5, 2)), ((5, 3), (5,)), ((2, 5, 3), (2, 5))])
def test_lstsq_outputs_per_driver(driver, shapes):
    A, B = make(shapes[0], F32, seed=1), make(shapes[1], F32, seed=2)
    check(lambda a, b: tuple(torch.linalg.lstsq(a, b, driver=driver)), A, B, **TOL[F32])


@pytest.mark.parametrize("shapes", [((), ()), ((3, 2), ()), ((3, 2), (4,)), ((3, 2), (4, 2))])
def test_lstsq_bad_shapes_raise_like_cpu(shapes):
    A, B = torch.ones(shapes[0]), torch.ones(shapes[1])
    with pytest.raises(RuntimeError) as cpu_err:
        torch.linalg.lstsq(A, B)
    with pytest.raises(RuntimeError, match="torch.linalg.lstsq") as tpu_err:
        torch.linalg.lstsq(A.to("tpu"), B.to("tpu"))
    assert str(tpu_err.value).splitlines()[0] == str(cpu_err.value).splitlines()[0]
