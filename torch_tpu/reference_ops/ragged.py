"""`torch.tpu.ops.ragged_dot` and `ragged_dot_weight_grad` (grouped matmul,
as in Mixture-of-Experts layers): jax.lax.ragged_dot as a jax_op. Its
backward is jax's derivative (a ragged_dot for lhs, a ragged-contracting
ragged_dot_general for rhs); ragged_dot_weight_grad is that rhs derivative
on its own, so it always agrees with the autograd result.

group_sizes must sum to lhs's row count. jax would leave rows past the sum
zero (or drop groups past the rows) without a word, so an eager call reads
the sum and raises; under torch.compile the values are unknown while
tracing and the check is left out."""

from __future__ import annotations

from typing import Optional

import torch

from ..jax_op import jax_op
from . import _checks


def _ragged_dot(lhs, rhs, group_sizes):
    import jax
    import jax.numpy as jnp

    return jax.lax.ragged_dot(lhs, rhs, group_sizes.astype(jnp.int32))


def _weight_grad(lhs, grad_output, group_sizes):
    import jax
    import jax.numpy as jnp

    g, k, n = group_sizes.shape[0], lhs.shape[1], grad_output.shape[1]
    sizes = group_sizes.astype(jnp.int32)
    # ragged_dot is linear in rhs: its pullback at any rhs is d(out)/d(rhs).
    _, pullback = jax.vjp(lambda rhs: jax.lax.ragged_dot(lhs, rhs, sizes), jnp.zeros((g, k, n), lhs.dtype))
    return pullback(grad_output)[0]


_dot = jax_op("reference_ragged_dot", _ragged_dot)
_wgrad = jax_op("reference_ragged_dot_weight_grad", _weight_grad)


def _check_groups(op: str, rows_name: str, rows: torch.Tensor, group_sizes: torch.Tensor, groups: Optional[int]):
    _checks.tensor(op, "group_sizes", group_sizes, ranks=(1,), integer=True)
    if groups is not None and group_sizes.shape[0] != groups:
        raise ValueError(f"torch.tpu.ops.{op}: group_sizes ({_checks.describe(group_sizes)}) must have one entry "
                         f"per group of rhs ({groups})")
    if not _checks.compiling():
        total = int(group_sizes.sum())
        if total != rows.shape[0] or bool((group_sizes < 0).any()):
            raise ValueError(f"torch.tpu.ops.{op}: group_sizes {group_sizes.tolist()} must be non-negative and sum "
                             f"to the rows of {rows_name} ({_checks.describe(rows)}), got sum {total}")


def ragged_dot(lhs: torch.Tensor, rhs: torch.Tensor, group_sizes: torch.Tensor, *,
               out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Grouped matmul: lhs (m, k) is split into len(group_sizes) consecutive
    row groups, group i (group_sizes[i] rows) times rhs[i] (k, n); returns
    (m, n), or writes it into `out` and returns `out`. Differentiable w.r.t.
    lhs and rhs when `out` is not given."""
    op = "ragged_dot"
    _checks.tensor(op, "lhs", lhs, ranks=(2,), floating=True)
    _checks.tensor(op, "rhs", rhs, ranks=(3,), floating=True)
    if lhs.dtype != rhs.dtype or lhs.shape[1] != rhs.shape[1]:
        raise ValueError(f"torch.tpu.ops.{op}: lhs ({_checks.describe(lhs)}) and rhs ({_checks.describe(rhs)}) "
                         "must have the same dtype and lhs.shape[1] == rhs.shape[1]")
    _check_groups(op, "lhs", lhs, group_sizes, rhs.shape[0])
    result = _dot(lhs, rhs, group_sizes)
    if out is None:
        return result
    _checks.tensor(op, "out", out)
    if out.shape != result.shape or out.dtype != result.dtype:
        raise ValueError(f"torch.tpu.ops.{op}: out ({_checks.describe(out)}) must be {result.dtype} "
                         f"{list(result.shape)}")
    with torch.no_grad():  # the reference's out= form is not differentiable
        return out.copy_(result)


def ragged_dot_weight_grad(lhs: torch.Tensor, grad_output: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """The gradient of ragged_dot w.r.t. rhs: (g, k, n) whose slice i is
    lhs[rows of group i].T @ grad_output[rows of group i]."""
    op = "ragged_dot_weight_grad"
    _checks.tensor(op, "lhs", lhs, ranks=(2,), floating=True)
    _checks.tensor(op, "grad_output", grad_output, ranks=(2,), floating=True)
    if lhs.dtype != grad_output.dtype or lhs.shape[0] != grad_output.shape[0]:
        raise ValueError(f"torch.tpu.ops.{op}: lhs ({_checks.describe(lhs)}) and grad_output "
                         f"({_checks.describe(grad_output)}) must have the same dtype and row count")
    _check_groups(op, "lhs", lhs, group_sizes, None)
    return _wgrad(lhs, grad_output, group_sizes)
