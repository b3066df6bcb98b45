"""torch.autocast("tpu") with CUDA's op policy, torch.amp.GradScaler("tpu"),
torch.tpu.get_amp_supported_dtype()."""

import pytest
import torch
from torch import nn

from utils import assert_close

F = nn.functional


def test_supported_dtypes():
    assert torch.bfloat16 in torch.tpu.get_amp_supported_dtype()
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    assert torch.amp.is_autocast_available("tpu")
    with torch.autocast("tpu"):
        assert torch.is_autocast_enabled("tpu")
        assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    assert not torch.is_autocast_enabled("tpu")


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 16, generator=g), torch.randn(16, 4, generator=g), torch.randn(4, generator=g)


# op, CPU reference computing the same thing by hand, expected autocast dtype
LOWER = [
    ("mm", lambda a, b, c: torch.mm(a, b), lambda a, b, c: torch.mm(a.bfloat16(), b.bfloat16())),
    ("matmul", lambda a, b, c: a @ b, lambda a, b, c: a.bfloat16() @ b.bfloat16()),
    ("linear", lambda a, b, c: F.linear(a, b.t(), c),
     lambda a, b, c: F.linear(a.bfloat16(), b.t().bfloat16(), c.bfloat16())),
    ("addmm", lambda a, b, c: torch.addmm(c, a, b), lambda a, b, c: torch.addmm(c.bfloat16(), a.bfloat16(), b.bfloat16())),
    ("bmm", lambda a, b, c: torch.bmm(a[None], b[None]), lambda a, b, c: torch.bmm(a[None].bfloat16(), b[None].bfloat16())),
]


@pytest.mark.parametrize("name,fn,ref", LOWER, ids=[x[0] for x in LOWER])
def test_lower_precision_ops(name, fn, ref):
    a, b, c = _inputs()
    with torch.autocast("tpu"):
        out = fn(a.to("tpu"), b.to("tpu"), c.to("tpu"))
    assert out.dtype == torch.bfloat16
    assert_close(out, ref(a, b, c))
    # Outside autocast the op stays in float32.
    assert fn(a.to("tpu"), b.to("tpu"), c.to("tpu")).dtype == torch.float32


FP32 = [
    ("softmax", lambda x: torch.softmax(x, -1)),
    ("log_softmax", lambda x: F.log_softmax(x, -1)),
    ("sum", lambda x: x.sum()),
    ("exp", lambda x: torch.exp(x)),
    ("layer_norm", lambda x: F.layer_norm(x, (x.shape[-1],))),
    ("mse_loss", lambda x: F.mse_loss(x, x.flip(0))),
    ("pow", lambda x: torch.pow(x, 2)),
    ("norm", lambda x: torch.norm(x)),
]


@pytest.mark.parametrize("name,fn", FP32, ids=[x[0] for x in FP32])
def test_fp32_ops(name, fn):
    x = torch.randn(6, 10).bfloat16()
    with torch.autocast("tpu"):
        out = fn(x.to("tpu"))
    assert out.dtype == torch.float32
    assert_close(out, fn(x.float()), atol=1e-4, rtol=1e-4)


def test_promote_and_banned():
    a = torch.randn(5)
    with torch.autocast("tpu"):
        out = torch.addcmul(a.to("tpu"), a.bfloat16().to("tpu"), a.to("tpu"))
        assert out.dtype == torch.float32
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(torch.rand(3, device="tpu"), torch.rand(3, device="tpu"))
    assert_close(out, torch.addcmul(a, a.bfloat16().float(), a))


def _model(device):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).to(device)


def test_autocast_training_matches_cpu():
    # CPU's autocast has the same policy for linear / relu / mse_loss.
    x, y = torch.randn(32, 8), torch.randn(32, 2)
    res = {}
    for dev in ("cpu", "tpu"):
        m = _model(dev)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        losses = []
        for _ in range(5):
            opt.zero_grad()
            with torch.autocast(dev, dtype=torch.bfloat16):
                out = m(x.to(dev))
                assert out.dtype == torch.bfloat16
                loss = F.mse_loss(out, y.to(dev))
                assert loss.dtype == torch.float32
            loss.backward()
            assert m[0].weight.grad.dtype == torch.float32
            opt.step()
            losses.append(loss.detach().cpu())
        res[dev] = (torch.stack(losses), [p.detach().cpu() for p in m.parameters()])
    assert_close(res["tpu"][0], res["cpu"][0], atol=2e-2, rtol=2e-2)
    for a, b in zip(res["tpu"][1], res["cpu"][1]):
        assert_close(a, b, atol=2e-2, rtol=2e-2)
    assert res["cpu"][0][-1] < res["cpu"][0][0]


@pytest.mark.parametrize("fused", [False, True])
def test_grad_scaler_matches_cpu(fused):
    # A huge initial scale overflows the first steps: GradScaler skips them and
    # backs off, on tpu exactly as on CPU.
    x, y = torch.randn(16, 8), torch.randn(16, 2) * 10  # loss ~100: loss * 2**127 overflows
    res = {}
    for dev in ("cpu", "tpu"):
        m = _model(dev)
        opt = torch.optim.Adam(m.parameters(), lr=1e-2, fused=fused)
        scaler = torch.amp.GradScaler(dev, init_scale=2.0 ** 127, growth_interval=2)
        scales = []
        for _ in range(8):
            opt.zero_grad()
            with torch.autocast(dev, dtype=torch.bfloat16):
                loss = F.mse_loss(m(x.to(dev)), y.to(dev))
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        res[dev] = (scales, [p.detach().cpu() for p in m.parameters()])
    assert res["tpu"][0] == res["cpu"][0]
    assert res["cpu"][0][0] < 2.0 ** 127  # it did back off
    s = res["cpu"][0]
    assert any(b > a for a, b in zip(s, s[1:]))  # and grew again
    for a, b in zip(res["tpu"][1], res["cpu"][1]):
        assert_close(a, b, atol=2e-2, rtol=2e-2)


def test_unscale_and_update_scale_ops():
    grads = [torch.tensor([1.0, 2.0]), torch.tensor([[3.0, float("inf")]]), torch.tensor([4.0])]
    for bad in (False, True):
        gs = [g.clone() if bad else g.nan_to_num(posinf=5.0) for g in grads]
        ref = [g.clone() for g in gs]
        found_cpu, found_tpu = torch.zeros(1), torch.zeros(1, device="tpu")
        tg = [g.to("tpu") for g in gs]
        torch._amp_foreach_non_finite_check_and_unscale_(ref, found_cpu, torch.tensor([0.5]))
        torch._amp_foreach_non_finite_check_and_unscale_(tg, found_tpu, torch.tensor([0.5], device="tpu"))
        assert_close(found_tpu, found_cpu)
        for a, b in zip(tg, ref):
            assert_close(a, b)
        for found in (found_cpu, torch.zeros(1)):
            s_c, t_c = torch.tensor([4.0]), torch.tensor([1], dtype=torch.int32)
            s_t, t_t = s_c.to("tpu"), t_c.to("tpu")
            torch._amp_update_scale_(s_c, t_c, found, 2.0, 0.5, 2)
            torch._amp_update_scale_(s_t, t_t, found.to("tpu"), 2.0, 0.5, 2)
            assert_close(s_t, s_c)
            assert_close(t_t, t_c)


def test_conv_in_lower_precision():
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(2, 3, 8, 8, generator=g), torch.randn(4, 3, 3, 3, generator=g), torch.randn(4, generator=g)
    with torch.autocast("tpu"):
        out = F.conv2d(x.to("tpu"), w.to("tpu"), b.to("tpu"), padding=1)
    assert out.dtype == torch.bfloat16
    ref = F.conv2d(x.bfloat16().float(), w.bfloat16().float(), b.bfloat16().float(), padding=1)
    assert_close(out.float(), ref, atol=5e-2, rtol=2e-2)


@pytest.mark.parametrize("compiled", [False, True])
def test_higher_order_ops_under_autocast(compiled, fresh_dynamo):
    """torch.cond (a higher-order op) under autocast: torch lets autocast
    through HOPs for CPU and CUDA only, so on tpu it found no kernel; its
    branches autocast op by op, as on CPU, forward and backward."""
    a, b, _ = _inputs()

    def f(x, w):
        return torch.cond(x.sum() > 0, lambda x, w: x @ w, lambda x, w: x @ w + 1, (x, w))

    def run(device):
        x = a.to(device).requires_grad_()
        fn = torch.compile(f, backend="tpu" if device == "tpu" else "aot_eager") if compiled else f
        with torch.autocast(device, dtype=torch.bfloat16):
            out = fn(x, b.to(device))
        out.float().square().sum().backward()
        return out, x.grad

    (out, grad), (ref, ref_grad) = run("tpu"), run("cpu")
    assert out.dtype == ref.dtype == torch.bfloat16
    assert_close(out.float(), ref.float(), atol=2e-2, rtol=2e-2)
    assert_close(grad, ref_grad, atol=5e-2, rtol=2e-2)
