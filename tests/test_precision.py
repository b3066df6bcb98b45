"""fp32 matmul precision: torch.tpu.precision (DEFAULT one bf16 pass, HIGH
three, HIGHEST fp32) and torch.set_float32_matmul_precision mapped onto it."""

import pytest
import torch

from utils import assert_close


@pytest.fixture(autouse=True)
def _restore():
    prev = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(prev)


def _ab():
    g = torch.Generator().manual_seed(0)
    return torch.randn(64, 128, generator=g), torch.randn(128, 32, generator=g)


def _rel(x, ref):
    return ((x.cpu().double() - ref.double()).norm() / ref.double().norm()).item()


def test_highest_is_default_and_matches_cpu():
    assert torch.tpu.get_precision() == "HIGHEST"
    a, b = _ab()
    assert_close(a.to("tpu") @ b.to("tpu"), a @ b)


def test_default_is_one_bf16_pass():
    a, b = _ab()
    exact = a.double() @ b.double()
    one_pass = a.bfloat16().double() @ b.bfloat16().double()  # what a bf16 pass computes
    with torch.tpu.precision("DEFAULT"):
        assert torch.tpu.get_precision() == "DEFAULT"
        assert torch.get_float32_matmul_precision() == "medium"
        out = a.to("tpu") @ b.to("tpu")
        lin = torch.nn.functional.linear(a.to("tpu"), b.t().to("tpu"))
    assert torch.tpu.get_precision() == "HIGHEST"
    assert_close(out, one_pass.float(), atol=1e-4, rtol=1e-4)
    assert_close(lin, one_pass.float(), atol=1e-4, rtol=1e-4)
    # It differs from fp32 as a bf16 pass does (relative error ~1e-3).
    assert 1e-4 < _rel(out, exact) < 1e-2
    # Back to HIGHEST: the program is recompiled, fp32 again.
    assert _rel(a.to("tpu") @ b.to("tpu"), exact) < 1e-6


def test_high_is_three_passes():
    a, b = _ab()
    exact = a.double() @ b.double()
    torch.tpu.precision("HIGH")  # the setter form
    assert torch.get_float32_matmul_precision() == "high"
    high = _rel(a.to("tpu") @ b.to("tpu"), exact)
    torch.tpu.precision("DEFAULT")
    default = _rel(a.to("tpu") @ b.to("tpu"), exact)
    assert high < 1e-4 and high < default / 20


def test_set_float32_matmul_precision_maps():
    a, b = _ab()
    torch.set_float32_matmul_precision("medium")
    assert torch.tpu.get_precision() == "DEFAULT"
    out = (a.to("tpu") @ b.to("tpu")).cpu()
    torch.set_float32_matmul_precision("highest")
    out2 = (a.to("tpu") @ b.to("tpu")).cpu()
    assert not torch.equal(out, out2)
    assert_close(out2, a @ b)


def test_bf16_and_f64_unaffected():
    a, b = _ab()
    with torch.tpu.precision("DEFAULT"):
        assert_close(a.double().to("tpu") @ b.double().to("tpu"), a.double() @ b.double())
        assert_close(a.bfloat16().to("tpu") @ b.bfloat16().to("tpu"), a.bfloat16() @ b.bfloat16())


def test_bad_value():
    with pytest.raises(ValueError, match="DEFAULT, HIGH, HIGHEST"):
        torch.tpu.precision("LOW")
