"""`torch.tpu.ops.max_pool{1,2,3}d` and their `*_backward`: max pooling
that computes no index tensor. The forward is jax.lax.reduce_window(max)
over padding of -inf (the dtype's lowest value for integers); the backward
is jax's derivative of that same function (a select-and-scatter that finds
each window's maximum again in `input`), so no indices are ever stored.
Dilated windows, whose derivative jax lacks, take the first maximum of
strided slices instead (see _dilated).
Both are jax_ops. Output sizes, padding limits and ceil_mode follow
torch.nn.functional.max_pool{n}d, which the tests compare against."""

from __future__ import annotations

from typing import Sequence

import torch

from ..jax_op import jax_op
from . import _checks


def _geometry(size, k, s, p, d, ceil_mode):
    """(output size, high-side padding) of one spatial dimension, as torch
    sizes pooling outputs (aten pooling_output_shape)."""
    span = d * (k - 1) + 1
    out = (size + 2 * p - span + ((s - 1) if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1  # the last window may not start in the right padding
    high = max(p, (out - 1) * s + span - size - p)
    return out, high


def _pool(x, kernel, stride, padding, dilation, ceil_mode):
    import jax
    import jax.numpy as jnp

    nd = len(kernel)
    lead = x.ndim - nd
    geo = [_geometry(x.shape[lead + i], kernel[i], stride[i], padding[i], dilation[i], ceil_mode) for i in range(nd)]
    # A Python scalar that is max's identity: jax then uses its reduce_window_max
    # primitive, which has a derivative (a traced init value would not).
    lowest = -float("inf") if jnp.issubdtype(x.dtype, jnp.floating) else int(jnp.iinfo(x.dtype).min)
    pads = [(0, 0)] * lead + [(padding[i], geo[i][1]) for i in range(nd)]
    if any(d > 1 for d in dilation):
        return _dilated(x, kernel, stride, dilation, [o for o, _ in geo], pads, lowest)
    y = jax.lax.reduce_window(x, lowest, jax.lax.max, (1,) * lead + tuple(kernel), (1,) * lead + tuple(stride), pads)
    return y[(slice(None),) * lead + tuple(slice(0, o) for o, _ in geo)]


def _dilated(x, kernel, stride, dilation, outs, pads, lowest):
    """Dilated windows, which jax's max-pool derivative does not take: one
    strided slice of the padded input per window position, and the first
    maximum among them (torch's choice on ties), picked with a gather whose
    derivative sends the gradient to that one element."""
    import itertools

    import jax
    import jax.numpy as jnp

    lead = x.ndim - len(kernel)
    xp = jnp.pad(x, pads, constant_values=lowest)
    taps = []
    for pos in itertools.product(*[range(k) for k in kernel]):
        start = [0] * lead + [p * d for p, d in zip(pos, dilation)]
        limit = list(x.shape[:lead]) + [b + (o - 1) * s + 1 for b, o, s in zip(start[lead:], outs, stride)]
        taps.append(jax.lax.slice(xp, start, limit, [1] * lead + list(stride)))
    stacked = jnp.stack(taps, axis=-1)
    first = jnp.argmax(stacked, axis=-1, keepdims=True)
    return jnp.take_along_axis(stacked, first, axis=-1)[..., 0]


def _pool_backward(grad_output, x, kernel, stride, padding, dilation, ceil_mode):
    import jax

    _, pullback = jax.vjp(lambda v: _pool(v, kernel, stride, padding, dilation, ceil_mode), x)
    return pullback(grad_output)[0]


_fwd = jax_op("reference_max_pool", _pool)
_bwd = jax_op("reference_max_pool_backward", _pool_backward)


def _args(op, nd, input, kernel_size, stride, padding, dilation, ceil_mode):
    """Checks the arguments as torch's max_pool{nd}d does; returns the
    static arguments as tuples and the output's spatial sizes."""
    _checks.tensor(op, "input", input, ranks=(nd + 1, nd + 2))
    if input.dtype == torch.bool or input.dtype.is_complex:
        raise TypeError(f"torch.tpu.ops.{op}: input ({_checks.describe(input)}) must be a real number type")
    k = _checks.ints(op, "kernel_size", kernel_size, nd, minimum=1)
    s = _checks.ints(op, "stride", stride, nd, minimum=1)
    p = _checks.ints(op, "padding", padding, nd, minimum=0)
    d = _checks.ints(op, "dilation", dilation, nd, minimum=1)
    if not isinstance(ceil_mode, bool):
        raise TypeError(f"torch.tpu.ops.{op}: ceil_mode must be a bool, got {ceil_mode!r}")
    if any(pi > ki // 2 for pi, ki in zip(p, k)):
        raise ValueError(f"torch.tpu.ops.{op}: padding {list(p)} must be at most half of kernel_size {list(k)}")
    spatial = input.shape[-nd:]
    outs = [_geometry(spatial[i], k[i], s[i], p[i], d[i], ceil_mode)[0] for i in range(nd)]
    if any(o < 1 for o in outs) or any(n < 1 for n in input.shape[:-nd]):
        raise ValueError(f"torch.tpu.ops.{op}: input {_checks.describe(input)} with kernel_size {list(k)}, "
                         f"stride {list(s)}, padding {list(p)}, dilation {list(d)} gives output size {outs}")
    return (k, s, p, d, ceil_mode), outs


def _forward(nd, input, kernel_size, stride, padding, dilation, ceil_mode):
    statics, _ = _args(f"max_pool{nd}d", nd, input, kernel_size, stride, padding, dilation, ceil_mode)
    return _fwd(input, *statics)


def _backward(nd, grad_output, input, kernel_size, stride, padding, dilation, ceil_mode):
    op = f"max_pool{nd}d_backward"
    statics, outs = _args(op, nd, input, kernel_size, stride, padding, dilation, ceil_mode)
    _checks.tensor(op, "grad_output", grad_output, floating=True)
    want = list(input.shape[:-nd]) + outs
    if list(grad_output.shape) != want or grad_output.dtype != input.dtype:
        raise ValueError(f"torch.tpu.ops.{op}: grad_output ({_checks.describe(grad_output)}) must be "
                         f"{input.dtype} {want}, the shape of max_pool{nd}d's output for input "
                         f"{_checks.describe(input)}")
    return _bwd(grad_output, input, *statics)


def max_pool1d(input: torch.Tensor, kernel_size: Sequence[int], stride: Sequence[int], padding: Sequence[int],
               dilation: Sequence[int], ceil_mode: bool) -> torch.Tensor:
    """Max pooling of (N, C, L) or (C, L) without indices; every sequence has one entry."""
    return _forward(1, input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool1d_backward(grad_output: torch.Tensor, input: torch.Tensor, kernel_size: Sequence[int],
                        stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                        ceil_mode: bool) -> torch.Tensor:
    """Gradient of max_pool1d w.r.t. input; the maxima are found again in `input`."""
    return _backward(1, grad_output, input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d(input: torch.Tensor, kernel_size: Sequence[int], stride: Sequence[int], padding: Sequence[int],
               dilation: Sequence[int], ceil_mode: bool) -> torch.Tensor:
    """Max pooling of (N, C, H, W) or (C, H, W) without indices; every sequence has two entries."""
    return _forward(2, input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d_backward(grad_output: torch.Tensor, input: torch.Tensor, kernel_size: Sequence[int],
                        stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                        ceil_mode: bool) -> torch.Tensor:
    """Gradient of max_pool2d w.r.t. input; the maxima are found again in `input`."""
    return _backward(2, grad_output, input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool3d(input: torch.Tensor, kernel_size: Sequence[int], stride: Sequence[int], padding: Sequence[int],
               dilation: Sequence[int], ceil_mode: bool) -> torch.Tensor:
    """Max pooling of (N, C, D, H, W) or (C, D, H, W) without indices; every sequence has three entries."""
    return _forward(3, input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool3d_backward(grad_output: torch.Tensor, input: torch.Tensor, kernel_size: Sequence[int],
                        stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                        ceil_mode: bool) -> torch.Tensor:
    """Gradient of max_pool3d w.r.t. input; the maxima are found again in `input`."""
    return _backward(3, grad_output, input, kernel_size, stride, padding, dilation, ceil_mode)
