"""`torch.tpu.ops.optimization_barrier`: jax.lax.optimization_barrier as a
jax_op, so the program carries a real `stablehlo.optimization_barrier` (XLA
neither fuses, reorders nor deduplicates work across it) in Strict Eager,
inside a Fused Eager trace and in torch.compile graphs. Its derivative,
jax's, is a barrier on the gradients."""

from __future__ import annotations

from typing import Sequence

import torch

from ..jax_op import jax_op
from . import _checks


def _barrier(*xs):
    import jax

    return jax.lax.optimization_barrier(xs)


_op = jax_op("reference_optimization_barrier", _barrier)


def optimization_barrier(inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Returns the tensors of `inputs`, in order, after an XLA optimization
    barrier: everything producing them runs before it, everything that uses
    the returned tensors after it. Use the returned tensors. The results are
    new (contiguous) tensors with the same values, shapes and dtypes."""
    if isinstance(inputs, torch.Tensor) or not isinstance(inputs, (list, tuple)):
        raise TypeError("torch.tpu.ops.optimization_barrier: inputs must be a list or tuple of tensors, "
                        f"got {type(inputs).__name__}")
    for i, t in enumerate(inputs):
        _checks.tensor("optimization_barrier", f"inputs[{i}]", t)
    if not inputs:
        return []
    out = _op(*inputs)
    return [out] if isinstance(out, torch.Tensor) else list(out)
