"""linalg.ldl_factor_ex / ldl_solve on tpu vs CPU: Bunch-Kaufman pivots and
info must match LAPACK's exactly."""

import pytest
import torch

from utils import assert_close, make


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_ldl_factor_matches_lapack(dtype, n):
    for seed in range(4):
        a = make((3, n, n), dtype, seed=seed)
        if seed % 2:
            a = a + a.mT  # symmetric; the other seeds exercise "lower triangle only"
        if seed == 2:
            a[0, 0, 0] = 0  # forces 2x2 pivots / interchanges
        if seed == 3:
            a[1] = 0  # a zero matrix: info = 1
        expected = torch.linalg.ldl_factor_ex(a)
        actual = torch.linalg.ldl_factor_ex(a.to("tpu"))
        assert actual.LD.device.type == "tpu"
        assert torch.equal(actual.pivots.cpu(), expected.pivots)
        assert torch.equal(actual.info.cpu(), expected.info)
        assert_close(actual.LD, expected.LD, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ldl_solve(dtype):
    for n in [1, 3, 6]:
        a = make((2, n, n), dtype, seed=n)
        a = a + a.mT
        b = make((2, n, 3), dtype, seed=10 + n)
        ld, piv, _ = torch.linalg.ldl_factor_ex(a)
        expected = torch.linalg.ldl_solve(ld, piv, b)
        actual = torch.linalg.ldl_solve(ld.to("tpu"), piv.to("tpu"), b.to("tpu"))
        assert_close(actual, expected, atol=1e-3, rtol=1e-3)
    # Broadcast batch: one factorization, several right-hand sides.
    a = make((4, 4), torch.float64, seed=20)
    a = a + a.T
    ld, piv, _ = torch.linalg.ldl_factor_ex(a)
    b = make((2, 4, 3), torch.float64, seed=21)
    assert_close(torch.linalg.ldl_solve(ld.to("tpu"), piv.to("tpu"), b.to("tpu")), torch.linalg.ldl_solve(ld, piv, b))


def test_ldl_factor_errors():
    with pytest.raises(RuntimeError, match="square"):
        torch.linalg.ldl_factor_ex(torch.ones(2, 3, device="tpu"))
    with pytest.raises(RuntimeError, match="check_errors"):
        torch.linalg.ldl_factor_ex(torch.ones(2, 2, device="tpu"), check_errors=True)
