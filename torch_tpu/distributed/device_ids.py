"""`device_ids=[local_rank]` on tpu: DDP, FSDP (its `device_id`) and barrier
as CUDA scripts call them.

CUDA scripts name each process's GPU by its local rank and pass it on:
`DistributedDataParallel(model, device_ids=[local_rank],
output_device=local_rank)` and `dist.barrier(device_ids=[local_rank])`
(accelerate's `prepare()` and `wait_for_everyone()` do both). In a tpu job
each process owns one device, `tpu:0` (docs/design.md, "Distributed"), so on
rank >= 1 DDP's forward failed inside torch with "IndexError: list index
out of range" (its side stream for `tpu:<local_rank>`), and barrier with
"invalid device index" (its tensor on `tpu:<local_rank>`), after the other
ranks had gone ahead to wait for it. Here the index `LOCAL_RANK` means the
process's own device and reaches torch as 0; any other index that is not
the process's device raises an error saying so. Modules on other devices,
and barriers in jobs whose accelerator is not tpu, pass through unchanged.
torch offers no hook for these: DDP's and FSDP's `__init__` and `barrier`
are wrapped.
"""

from __future__ import annotations

import functools
import inspect
import os

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from .. import _import_hooks
from .._import_hooks import is_marked, mark
from . import tpu_is_accelerator


def _own_index(value, what: str):
    """`value` (an int, a torch.device or a string) as this process's tpu index, 0."""
    if value is None:
        return None
    device = value if isinstance(value, torch.device) else (
        torch.device(value) if isinstance(value, str) else torch.device("tpu", int(value)))
    # the index LOCAL_RANK names tpu:0 by the runtime's rule (own_index in csrc/device/guard.h)
    if device.type != "tpu" or (device.index is not None and torch.tpu._utils._get_device_index(device.index) != 0):
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        raise ValueError(f"{what}={value!r} does not name this process's device: in a "
                         f"tpu job each process owns one device, tpu:0 (this is local rank {local_rank}); pass "
                         f"device_ids=[{local_rank}] (the local rank, as on CUDA), [0] or nothing")
    return 0


def _on_tpu(module) -> bool:
    return any(p.device.type == "tpu" for p in module.parameters())


def _wrap_ddp_init(original):
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        ids, out = bound.arguments.get("device_ids"), bound.arguments.get("output_device")
        if (ids or out is not None) and _on_tpu(bound.arguments["module"]):
            if ids:
                bound.arguments["device_ids"] = [_own_index(i, "DistributedDataParallel: device_ids") for i in ids]
            if out is not None:
                bound.arguments["output_device"] = _own_index(out, "DistributedDataParallel: output_device")
        return original(*bound.args, **bound.kwargs)

    return mark(__init__)


def _wrap_barrier(original):
    signature = inspect.signature(original)

    @functools.wraps(original)
    def barrier(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        ids = bound.arguments.get("device_ids")
        # torch builds the barrier's device from its accelerator and ids[0]
        if isinstance(ids, list) and ids and tpu_is_accelerator():
            bound.arguments["device_ids"] = [_own_index(i, "barrier: device_ids") for i in ids]
        return original(*bound.args, **bound.kwargs)

    return mark(barrier)


def _wrap_fsdp_init(original):
    """FSDP (FSDP1) takes one `device_id`, an int (the accelerator's) or a
    torch.device; `device_id=local_rank` made rank 1 fail with "Inconsistent
    compute device and `device_id` on rank 1: tpu:0 vs tpu:1"."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        device_id = bound.arguments.get("device_id")
        names_tpu = (isinstance(device_id, torch.device) and device_id.type == "tpu") or (
            isinstance(device_id, int) and tpu_is_accelerator())
        if names_tpu:
            index = _own_index(device_id, "FullyShardedDataParallel: device_id")
            bound.arguments["device_id"] = torch.device("tpu", index) if isinstance(device_id, torch.device) else index
        return original(*bound.args, **bound.kwargs)

    return mark(__init__)


def _patch_fsdp(module) -> None:
    fsdp = module.FullyShardedDataParallel
    if not is_marked(fsdp.__init__):
        fsdp.__init__ = _wrap_fsdp_init(fsdp.__init__)


_HOOKS = {"torch.distributed.fsdp.fully_sharded_data_parallel": _patch_fsdp}


def install() -> None:
    _import_hooks.install(_HOOKS)  # FSDP1 is not imported with torch: wrapped when it is
    ddp = torch.nn.parallel.DistributedDataParallel
    if not is_marked(ddp.__init__):
        ddp.__init__ = _wrap_ddp_init(ddp.__init__)
    if not is_marked(c10d.barrier):
        c10d.barrier = _wrap_barrier(c10d.barrier)
    dist.barrier = c10d.barrier
