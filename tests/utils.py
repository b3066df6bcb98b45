"""Shared test helpers: run the same function on CPU and on tpu, compare."""

from __future__ import annotations

import torch

TOL = {
    torch.float32: dict(atol=1e-5, rtol=1.3e-6 * 10),
    torch.float64: dict(atol=1e-7, rtol=1e-7),
    torch.bfloat16: dict(atol=1e-2, rtol=1.6e-2),
    torch.float16: dict(atol=1e-3, rtol=1e-3),
}


def to_tpu(x):
    """Moves tensors (in nested lists/tuples/dicts) to tpu, keeping the rest."""
    if isinstance(x, torch.Tensor):
        return x.to("tpu")
    if isinstance(x, (list, tuple)):
        return type(x)(to_tpu(v) for v in x)
    if isinstance(x, dict):
        return {k: to_tpu(v) for k, v in x.items()}
    return x


def to_cpu(x):
    if isinstance(x, torch.Tensor):
        return x.cpu()
    if isinstance(x, (list, tuple)):
        return type(x)(to_cpu(v) for v in x)
    if isinstance(x, dict):
        return {k: to_cpu(v) for k, v in x.items()}
    return x


def assert_close(actual, expected, atol=None, rtol=None, **kw):
    """torch.testing.assert_close with dtype-aware default tolerances."""
    if isinstance(expected, torch.Tensor) and atol is None and expected.dtype in TOL:
        atol, rtol = TOL[expected.dtype]["atol"], TOL[expected.dtype]["rtol"]
    torch.testing.assert_close(to_cpu(actual), expected, atol=atol, rtol=rtol, equal_nan=True, **kw)


def check(fn, *args, atol=None, rtol=None, **kwargs):
    """fn(*args) on CPU vs fn(*args moved to tpu); the tpu result must come
    back on tpu and match. Inputs are cloned so in-place ops are compared."""
    cpu_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    tpu_args = to_tpu([a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    expected = fn(*cpu_args, **kwargs)
    actual = fn(*tpu_args, **to_tpu(kwargs))
    for r in (actual if isinstance(actual, (list, tuple)) else [actual]):
        if isinstance(r, torch.Tensor):
            assert r.device.type == "tpu", f"result on {r.device}, expected tpu"
    assert_close(actual, expected, atol=atol, rtol=rtol)
    # Arguments mutated in place must match as well.
    for c, t in zip(cpu_args, tpu_args):
        if isinstance(c, torch.Tensor):
            assert_close(t, c, atol=atol, rtol=rtol)
    return actual


def check_grad(fn, *inputs, grad_out=None, atol=None, rtol=None):
    """fn(*inputs) on CPU and on tpu copies, then backward with the same
    upstream gradient (random unless `grad_out`): outputs and the .grad of
    every floating-point tensor input must match."""

    def prepare(x, device):
        if not isinstance(x, torch.Tensor):
            return x
        return x.detach().clone().to(device).requires_grad_(x.is_floating_point())

    cpu = [prepare(x, "cpu") for x in inputs]
    tpu = [prepare(x, "tpu") for x in inputs]
    out_c, out_t = fn(*cpu), fn(*tpu)
    assert out_t.device.type == "tpu", f"result on {out_t.device}, expected tpu"
    assert_close(out_t.detach(), out_c.detach(), atol=atol, rtol=rtol)
    g = grad_out if grad_out is not None else make(out_c.shape, out_c.dtype, seed=7)
    out_c.backward(g)
    out_t.backward(g.to("tpu"))
    for c, t in zip(cpu, tpu):
        if not (isinstance(c, torch.Tensor) and c.requires_grad):
            continue
        if c.grad is None:
            assert t.grad is None
        else:
            assert t.grad is not None and t.grad.device.type == "tpu"
            assert_close(t.grad, c.grad, atol=atol, rtol=rtol)


def noncontiguous(t: torch.Tensor) -> torch.Tensor:
    """The same values as `t` in a transposed-and-strided layout."""
    if t.dim() == 0:
        return t
    big = torch.stack([t, t], dim=-1).transpose(0, -1).contiguous().transpose(0, -1)
    out = big[..., 0]
    assert out.shape == t.shape
    return out


def make(shape, dtype=torch.float32, low=-3.0, high=3.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)
    return torch.randint(int(low), int(high) + 1, shape, generator=g, dtype=dtype)
