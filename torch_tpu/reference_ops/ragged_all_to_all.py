"""`torch.tpu.ops.ragged_all_to_all`: each rank sends a slice of rows of
`operand` to every rank, which writes it into its copy of `output` at the
row the sender chose.

jax.lax.ragged_all_to_all exists only inside a jax program spanning the
ranks (shard_map); our programs are per rank, with collectives run by the
`tpu_dist` backend. So this is built from two torch.distributed
all_to_all_single calls: one tells every receiver the offsets its senders
chose, one moves the rows (sizes split as send_sizes / recv_sizes). The
split sizes and offsets are read on the host, which makes this an eager op
(under torch.compile it graph-breaks, as host reads do). The backward w.r.t.
`operand` is the same exchange reversed; w.r.t. `output`, the rows nothing
was written to."""

from __future__ import annotations

from typing import Optional

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import _resolve_process_group

from . import _checks

_OP = "ragged_all_to_all"


def _exchange(rows: torch.Tensor, starts, sizes, recv_sizes, group) -> list[torch.Tensor]:
    """Rows [starts[j], starts[j] + sizes[j]) go to rank j; returns the
    chunks received from each rank (recv_sizes[i] rows from rank i)."""
    send = torch.cat([rows[s:s + n] for s, n in zip(starts, sizes)]).contiguous()
    received = rows.new_empty((sum(recv_sizes),) + tuple(rows.shape[1:]))
    dist.all_to_all_single(received, send, output_split_sizes=list(recv_sizes), input_split_sizes=list(sizes),
                           group=group)
    return list(received.split(list(recv_sizes)))


class _RaggedAllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, operand, output, in_off, send_sizes, out_at, recv_sizes, group):
        result = output.clone()
        for at, chunk in zip(out_at, _exchange(operand, in_off, send_sizes, recv_sizes, group)):
            result[at:at + chunk.shape[0]] = chunk
        ctx.plan = (operand.shape, in_off, send_sizes, out_at, recv_sizes, group)
        return result

    @staticmethod
    def backward(ctx, grad):
        shape, in_off, send_sizes, out_at, recv_sizes, group = ctx.plan
        # The gradient of each received chunk goes back to its sender.
        back = _exchange(grad.contiguous(), out_at, recv_sizes, send_sizes, group)
        grad_operand = grad.new_zeros(shape)
        for s, chunk in zip(in_off, back):
            grad_operand[s:s + chunk.shape[0]] += chunk
        grad_output = grad.clone()
        for at, n in zip(out_at, recv_sizes):
            grad_output[at:at + n] = 0
        return grad_operand, grad_output, None, None, None, None, None


def _host_ints(name: str, t: torch.Tensor, world: int) -> list[int]:
    _checks.tensor(_OP, name, t, device=None, ranks=(1,), integer=True)
    if t.shape[0] != world:
        raise ValueError(f"torch.tpu.ops.{_OP}: {name} ({_checks.describe(t)}) must have one entry per rank "
                         f"({world})")
    values = t.tolist()
    if any(v < 0 for v in values):
        raise ValueError(f"torch.tpu.ops.{_OP}: {name} {values} must not be negative")
    return values


def ragged_all_to_all(operand: torch.Tensor, output: torch.Tensor, input_offsets: torch.Tensor,
                      send_sizes: torch.Tensor, output_offsets: torch.Tensor, recv_sizes: torch.Tensor,
                      process_group_name: str, *, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Rows operand[input_offsets[j]: + send_sizes[j]] go to rank j, landing
    at row output_offsets[j] of j's result; recv_sizes[i] rows come from
    rank i. The result is `output` with the received rows written (or
    `out`, written and returned). Differentiable when `out` is not given."""
    _checks.tensor(_OP, "operand", operand, ranks=range(1, 9))
    _checks.tensor(_OP, "output", output, ranks=range(1, 9))
    if operand.dtype != output.dtype or operand.shape[1:] != output.shape[1:]:
        raise ValueError(f"torch.tpu.ops.{_OP}: operand ({_checks.describe(operand)}) and output "
                         f"({_checks.describe(output)}) must have the same dtype and trailing dimensions")
    try:
        group = _resolve_process_group(process_group_name)
    except Exception as e:
        raise ValueError(f"torch.tpu.ops.{_OP}: no process group named {process_group_name!r}") from e
    world = group.size()
    in_off = _host_ints("input_offsets", input_offsets, world)
    sizes = _host_ints("send_sizes", send_sizes, world)
    out_off = _host_ints("output_offsets", output_offsets, world)
    recv = _host_ints("recv_sizes", recv_sizes, world)
    if any(s + n > operand.shape[0] for s, n in zip(in_off, sizes)):
        raise ValueError(f"torch.tpu.ops.{_OP}: input_offsets {in_off} + send_sizes {sizes} run past operand's "
                         f"{operand.shape[0]} rows")
    # Where each sender's rows land here: sender i chose output_offsets[me] on its side.
    at = torch.empty(world, dtype=torch.int64, device=operand.device)
    dist.all_to_all_single(at, torch.tensor(out_off, dtype=torch.int64, device=operand.device), group=group)
    at = at.tolist()
    if any(a + n > output.shape[0] for a, n in zip(at, recv)):
        raise ValueError(f"torch.tpu.ops.{_OP}: received rows at offsets {at} with recv_sizes {recv} run past "
                         f"output's {output.shape[0]} rows")
    if out is None:
        return _RaggedAllToAll.apply(operand, output, in_off, sizes, at, recv, group)
    _checks.tensor(_OP, "out", out)
    if out.shape != output.shape or out.dtype != output.dtype:
        raise ValueError(f"torch.tpu.ops.{_OP}: out ({_checks.describe(out)}) must match output "
                         f"({_checks.describe(output)})")
    with torch.no_grad():
        return out.copy_(_RaggedAllToAll.apply(operand, output, in_off, sizes, at, recv, group))
