"""Gradient comparison helper shared by the elementwise-family tests."""

import torch

from utils import assert_close, make


def check_grad(fn, *args, atol=None, rtol=None, seed=7):
    """Backward of fn(*args) on CPU vs tpu with the same upstream gradient;
    compares the outputs and the .grad of every floating-point argument."""
    cpu = [a.clone().requires_grad_(a.is_floating_point()) if isinstance(a, torch.Tensor) else a for a in args]
    tpu = [
        a.clone().to("tpu").requires_grad_(a.is_floating_point()) if isinstance(a, torch.Tensor) else a for a in args
    ]
    out_c = fn(*cpu)
    g = make(out_c.shape, out_c.dtype, seed=seed)
    out_c.backward(g)
    out_t = fn(*tpu)
    assert out_t.device.type == "tpu"
    out_t.backward(g.to("tpu"))
    assert_close(out_t.detach(), out_c.detach(), atol=atol, rtol=rtol)
    for c, t in zip(cpu, tpu):
        if isinstance(c, torch.Tensor) and c.requires_grad:
            assert t.grad is not None
            assert_close(t.grad, c.grad, atol=atol, rtol=rtol)
