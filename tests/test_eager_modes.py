"""Execution modes: Strict Eager (asynchronous), Debug Eager (every op waits)
and Fused Eager (ops deferred into one compiled program per trace)."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu
from torch_tpu import _C
from utils import assert_close


@pytest.fixture(autouse=True)
def restore_mode():
    prev = torch_tpu.get_eager_mode()
    yield
    torch_tpu.eager_mode(prev)


def pending():
    return torch_tpu.fusion_stats()["pending_ops"]


# ---- API ----------------------------------------------------------------------


def test_mode_setter_and_context_manager():
    torch_tpu.eager_mode("strict")
    assert torch_tpu.get_eager_mode() == "strict"
    with torch_tpu.eager_mode("fused"):
        assert torch_tpu.get_eager_mode() == "fused"
        with torch.tpu.eager_mode("debug"):
            assert torch.tpu.get_eager_mode() == "debug"
        assert torch_tpu.get_eager_mode() == "fused"
    assert torch_tpu.get_eager_mode() == "strict"
    torch_tpu.eager_mode("debug")  # plain call: stays set
    assert torch_tpu.get_eager_mode() == "debug"
    with pytest.raises(ValueError, match="strict, debug, fused"):
        torch_tpu.eager_mode("lazy")
    assert torch_tpu.get_eager_mode() == "debug"


def test_env_vars_pick_the_initial_mode():
    import subprocess
    import sys

    code = "import torch, torch_tpu; print(torch_tpu.get_eager_mode())"
    for env, want in [({}, "strict"), ({"TPU_LAUNCH_BLOCKING": "1"}, "debug"), ({"TPU_DEFER_AND_FUSE": "1"}, "fused")]:
        import os

        e = {k: v for k, v in os.environ.items() if k not in ("TPU_LAUNCH_BLOCKING", "TPU_DEFER_AND_FUSE")}
        e.update(env)
        out = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=300)
        assert out.stdout.strip() == want, out.stderr


# ---- Strict: asynchronous --------------------------------------------------------


def test_strict_python_runs_ahead_of_the_device():
    torch_tpu.eager_mode("strict")
    m = torch.randn(768, 768, device="tpu") / 768**0.5
    y = m @ m
    torch.tpu.synchronize()  # compiled and idle
    for _ in range(30):
        y = y @ m
    # The ops are queued, not done: the last result is still being computed.
    assert not _C._is_ready(y)
    torch.tpu.synchronize()
    assert _C._is_ready(y)
    ref = m.cpu()
    expect = ref @ ref
    for _ in range(30):
        expect = expect @ ref
    assert_close(y, expect, atol=1e-3, rtol=1e-3)


# ---- Debug: every op waits ----------------------------------------------------------


def test_debug_each_op_is_done_when_it_returns():
    m = torch.randn(768, 768, device="tpu") / 768**0.5
    torch.tpu.synchronize()
    with torch_tpu.eager_mode("debug"):
        y = m
        for _ in range(5):
            y = y @ m
            assert _C._is_ready(y)


def test_debug_error_is_raised_by_the_op_that_fails():
    x = torch.randn(8, device="tpu")
    y = x * 2
    _C._test_invalidate_buffer(x)  # the device loses x's memory
    with torch_tpu.eager_mode("debug"):
        with pytest.raises(RuntimeError, match="XLA execution failed"):
            x + 1  # this line raises
        assert_close(y, torch.zeros(8) + y.cpu())  # other values are unaffected


def test_fused_error_names_the_deferred_ops():
    x = torch.randn(8, device="tpu")
    _C._test_invalidate_buffer(x)
    with torch_tpu.eager_mode("fused"):
        z = (x + 1).exp()  # deferred: no error yet
        with pytest.raises(RuntimeError, match=r"deferred ops .*aten::add.*aten::exp.*(eager_mode\(\"debug\"\))"):
            z.cpu()
        with pytest.raises(RuntimeError, match="deferred ops"):  # the value stays failed
            z.cpu()
        w = torch.ones(3, device="tpu") * 2  # later ops run normally
        assert_close(w, torch.full((3,), 2.0))


# ---- Fused ------------------------------------------------------------------------


def train(mode, steps=4):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)).to("tpu")
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    x = torch.randn(10, 6).to("tpu")
    y = torch.randint(0, 3, (10,)).to("tpu")
    losses = []
    with torch_tpu.eager_mode(mode):
        for _ in range(steps):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


def test_fused_training_matches_strict_and_cpu():
    strict_losses, strict_params = train("strict")
    fused_losses, fused_params = train("fused")
    assert fused_losses == pytest.approx(strict_losses, rel=1e-6, abs=1e-6)
    for a, b in zip(fused_params, strict_params):
        assert_close(a, b)
    # and against PyTorch on CPU
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    x = torch.randn(10, 6)
    y = torch.randint(0, 3, (10,))
    for _ in range(4):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    for a, b in zip(fused_params, model.parameters()):
        assert_close(a, b.detach(), atol=1e-5, rtol=1e-4)
    assert fused_losses[-1] == pytest.approx(loss.item(), rel=1e-4)


def test_repeated_step_reuses_the_fused_program():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1)).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(4, 8, device="tpu")
    with torch_tpu.eager_mode("fused"):
        for _ in range(3):  # per-op programs and the step's fused program(s) compile here
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()  # ends the step: flushes
        stats = torch_tpu.fusion_stats()
        compiles = _C._compile_count()
        for _ in range(4):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        after = torch_tpu.fusion_stats()
    assert _C._compile_count() == compiles  # nothing compiled: every trace hit the cache
    assert after["compiles"] == stats["compiles"]
    assert after["cache_hits"] >= stats["cache_hits"] + 4
    assert after["fused_ops"] - stats["fused_ops"] >= 4 * 10  # whole steps ran fused


def test_item_and_print_flush():
    x = torch.arange(6.0, device="tpu")
    torch.tpu.synchronize()
    with torch_tpu.eager_mode("fused"):
        s = (x * 2).sum()
        assert pending() >= 2
        assert not _C._is_ready(s)
        assert s.item() == 30.0
        assert pending() == 0
        y = x.view(2, 3) + 1
        assert pending() >= 1
        text = str(y)
        assert pending() == 0
        assert "tensor([[1., 2., 3.]," in text and "device='tpu:0'" in text


def test_mark_step_synchronize_and_leaving_fused_flush():
    torch_tpu.eager_mode("strict")  # the mode the block returns to (the suite may run fused)
    x = torch.ones(4, device="tpu")
    torch.tpu.synchronize()
    with torch_tpu.eager_mode("fused"):
        y = x + 1
        assert pending() == 1
        torch_tpu.mark_step()
        assert pending() == 0
        z = y * 3
        torch.tpu.synchronize()
        assert pending() == 0 and _C._is_ready(z)
        w = z - 1
        assert pending() == 1
    assert pending() == 0  # leaving fused mode ran it
    torch.tpu.synchronize()
    assert _C._is_ready(w)
    assert_close(w, torch.full((4,), 5.0))


def test_fused_inplace_and_views():
    base = torch.arange(12.0).reshape(3, 4)
    with torch_tpu.eager_mode("fused"):
        t = base.to("tpu")
        v = t[1:, ::2]  # a strided view
        row = t[0]
        v.mul_(10)
        t.add_(1)
        row.neg_()
        u = t.t().contiguous()
        v.sub_(u.t()[1:, ::2])  # reads the storage v is a view of
        assert pending() > 0
        ref = base.clone()
        rv, rrow = ref[1:, ::2], ref[0]
        rv.mul_(10)
        ref.add_(1)
        rrow.neg_()
        ru = ref.t().contiguous()
        rv.sub_(ru.t()[1:, ::2])
        assert_close(t, ref)
        assert_close(v, rv)
        assert_close(u, ru)


def test_fused_dropped_intermediates_and_random():
    torch.manual_seed(3)
    x = torch.randn(5, 5, device="tpu")
    with torch_tpu.eager_mode("fused"):
        torch.manual_seed(7)
        a = torch.rand(5, 5, device="tpu")
        b = torch.rand(5, 5, device="tpu")
        c = x @ a + b  # x @ a is dropped before the flush: not a result
        del a
        out = c.cpu()
    torch.manual_seed(7)
    a2 = torch.rand(5, 5, device="tpu")
    b2 = torch.rand(5, 5, device="tpu")
    assert_close(out, (x @ a2 + b2).cpu())
    assert not torch.equal(a2.cpu(), b2.cpu())


def test_fused_data_dependent_ops():
    x = torch.tensor([0.0, 3.0, -1.0, 2.0], device="tpu")
    with torch_tpu.eager_mode("fused"):
        m = (x * 2) > 0
        picked = x[m]  # needs the mask's count from the device: flushes
        assert_close(picked, torch.tensor([3.0, 2.0]))
        assert torch.nonzero(x + 1).cpu().flatten().tolist() == [0, 1, 3]
