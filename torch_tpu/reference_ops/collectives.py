"""`torch.tpu.ops.all_gather_dim`, `reduce_scatter_dim`, `send`, `recv`.

The gather/scatter pair are torch's functional collectives
(`torch.ops._c10d_functional`, the ops torch.compile traces) run by the
group's `tpu_dist` backend. Those gather and scatter along dim 0, so the
chosen dim is moved to the front and back: concatenating (or splitting)
along a dim commutes with moving it. Like the reference, no autograd.

send/recv are torch.distributed point-to-point over the default group,
batched so that one Work answers for a list of tensors (tpu_dist pairs
transfers between two ranks in posting order; the tag is passed on and, as
with NCCL, does not reorder them)."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
import torch.distributed as dist

from . import _checks

_REDUCE_OPS = ("sum", "avg", "product", "min", "max", "band", "bor", "bxor")


def _group(op: str, group: Optional[dist.ProcessGroup]) -> dist.ProcessGroup:
    if not dist.is_initialized():
        raise RuntimeError(f"torch.tpu.ops.{op}: the default process group is not initialized; call "
                           "torch.distributed.init_process_group first")
    return dist.group.WORLD if group is None else group


def _dim(op: str, input: torch.Tensor, dim: int) -> int:
    if input.dim() == 0:
        raise ValueError(f"torch.tpu.ops.{op}: input ({_checks.describe(input)}) must have at least one dimension")
    if not isinstance(dim, int) or not -input.dim() <= dim < input.dim():
        raise ValueError(f"torch.tpu.ops.{op}: dim {dim!r} is out of range for input {_checks.describe(input)}")
    return dim % input.dim()


def all_gather_dim(input: torch.Tensor, dim: int, group: Optional[dist.ProcessGroup] = None) -> torch.Tensor:
    """Every rank's `input` concatenated along `dim` in rank order (size
    input.size(dim) * group size there)."""
    op = "all_gather_dim"
    _checks.tensor(op, "input", input)
    dim = _dim(op, input, dim)
    group = _group(op, group)
    front = input.movedim(dim, 0).contiguous()
    gathered = torch.ops._c10d_functional.all_gather_into_tensor(front, group.size(), group.group_name)
    return torch.ops._c10d_functional.wait_tensor(gathered).movedim(0, dim)


def reduce_scatter_dim(input: torch.Tensor, dim: int, group: Optional[dist.ProcessGroup] = None,
                       reduce_op: str = "sum") -> torch.Tensor:
    """`input` reduced over the ranks with `reduce_op`, of which this rank
    keeps its chunk along `dim` (input.size(dim) // group size)."""
    op = "reduce_scatter_dim"
    _checks.tensor(op, "input", input)
    dim = _dim(op, input, dim)
    group = _group(op, group)
    if reduce_op not in _REDUCE_OPS:
        raise ValueError(f"torch.tpu.ops.{op}: reduce_op {reduce_op!r} is not one of {list(_REDUCE_OPS)}")
    if reduce_op.startswith("b") and (input.dtype.is_floating_point or input.dtype.is_complex):
        raise TypeError(f"torch.tpu.ops.{op}: reduce_op {reduce_op!r} needs an integer input, got "
                        f"{_checks.describe(input)}")
    if input.shape[dim] % group.size():
        raise ValueError(f"torch.tpu.ops.{op}: input.size({dim}) of {_checks.describe(input)} is not divisible "
                         f"by the group size {group.size()}")
    front = input.movedim(dim, 0).contiguous()
    scattered = torch.ops._c10d_functional.reduce_scatter_tensor(front, reduce_op, group.size(), group.group_name)
    return torch.ops._c10d_functional.wait_tensor(scattered).movedim(0, dim)


def _p2p(op: str, fn, tensors: Sequence[torch.Tensor], peer: int, tag: int) -> Any:
    group = _group(op, None)
    if isinstance(tensors, torch.Tensor) or not isinstance(tensors, (list, tuple)) or not tensors:
        raise TypeError(f"torch.tpu.ops.{op}: tensors must be a non-empty list of tensors")
    for i, t in enumerate(tensors):
        _checks.tensor(op, f"tensors[{i}]", t)
    if not isinstance(peer, int) or not 0 <= peer < group.size():
        raise ValueError(f"torch.tpu.ops.{op}: rank {peer!r} is not in the default group of {group.size()} ranks")
    # One coalesced batch: its single Work completes when every transfer has.
    works = dist.batch_isend_irecv([dist.P2POp(fn, t, peer, tag=tag) for t in tensors])
    return works[0] if len(works) == 1 else _Works(works)


class _Works:
    """The Works of a batch a backend did not coalesce, waited for as one."""

    def __init__(self, works):
        self._works = works

    def wait(self, timeout=None):
        for w in self._works:
            w.wait() if timeout is None else w.wait(timeout)
        return True

    def is_completed(self):
        return all(w.is_completed() for w in self._works)


def send(tensors: Sequence[torch.Tensor], dst: int, tag: int) -> Any:
    """Sends each tensor to rank `dst` of the default group; returns a Work
    whose wait() returns when the sends are done."""
    return _p2p("send", dist.isend, tensors, dst, tag)


def recv(tensors: Sequence[torch.Tensor], src: int, tag: int) -> Any:
    """Receives into each tensor (same shapes and dtypes as those sent)
    from rank `src`; wait() on the returned Work before reading them."""
    return _p2p("recv", dist.irecv, tensors, src, tag)
