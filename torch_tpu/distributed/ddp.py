"""`DistributedDataParallel(model, device_ids=[local_rank])` on tpu.

CUDA scripts name each process's GPU by its local rank, and pass it to DDP
as `device_ids=[local_rank], output_device=local_rank` (accelerate's
`prepare()` does too). In a tpu job each process owns one device, `tpu:0`
(docs/design.md, "Distributed"), so on rank >= 1 DDP's forward failed
inside torch with "IndexError: list index out of range" (its side stream
for `tpu:<local_rank>`), after the other ranks had gone ahead. For a module
on tpu, DDP's device index `LOCAL_RANK` means the process's own device and
is given to DDP as 0; any other index that is not the process's device
raises an error saying so. Modules on other devices pass through unchanged.
torch offers no hook for this: DDP's `__init__` is wrapped.
"""

from __future__ import annotations

import functools
import inspect
import os

import torch

_WRAPPED = "_torch_tpu_wrapped"


def _own_index(value, what: str):
    """`value` (an int, a torch.device or a string) as this process's tpu index, 0."""
    if value is None:
        return None
    device = value if isinstance(value, torch.device) else (
        torch.device(value) if isinstance(value, str) else torch.device("tpu", int(value)))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type != "tpu" or device.index not in (None, 0, local_rank):
        raise ValueError(f"DistributedDataParallel: {what}={value!r} does not name this process's device: in a "
                         f"tpu job each process owns one device, tpu:0 (this is local rank {local_rank}); pass "
                         f"device_ids=[{local_rank}] (the local rank, as on CUDA), [0] or nothing")
    return 0


def _on_tpu(module) -> bool:
    return any(p.device.type == "tpu" for p in module.parameters())


def install() -> None:
    ddp = torch.nn.parallel.DistributedDataParallel
    original = ddp.__init__
    if getattr(original, _WRAPPED, False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        ids, out = bound.arguments.get("device_ids"), bound.arguments.get("output_device")
        if (ids or out is not None) and _on_tpu(bound.arguments["module"]):
            if ids:
                bound.arguments["device_ids"] = [_own_index(i, "device_ids") for i in ids]
            if out is not None:
                bound.arguments["output_device"] = _own_index(out, "output_device")
        return original(*bound.args, **bound.kwargs)

    setattr(__init__, _WRAPPED, True)
    ddp.__init__ = __init__
