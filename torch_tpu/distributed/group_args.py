"""`init_process_group` and `new_group` as CUDA scripts call them:
`backend="nccl"` and `device_id=torch.device("cuda", local_rank)`.

A script written for CUDA calls `init_process_group(backend="nccl")` (or
`"cpu:gloo,cuda:nccl"`, which becomes `"cpu:gloo,tpu:nccl"` when "cuda" is
changed to "tpu"), and some `new_group(backend="nccl")`. NCCL is CUDA's
collective engine; a tpu job's is tpu_dist, XLA's collectives. A torch
without NCCL (the CPU build a TPU host runs) refused the script with
"Distributed package doesn't have NCCL built in". So in a process whose
accelerator is tpu, with no NCCL in torch, "nccl" alone is read as no
backend (torch's default for tpu, `tpu_dist_gloo`: tpu tensors over
tpu_dist, cpu tensors over Gloo; for new_group, the default group's), and
`<device>:nccl` inside a `"device:backend"` string as `<device>:tpu_dist`,
with a warning saying so. A torch with NCCL keeps the name.

`device_id` binds the group to the process's device; torch checks its index
against the device count, so `tpu:<local_rank>` failed on rank >= 1 ("out of
range") although that index names the process's device, tpu:0
(`own_index` in csrc/device/guard.h); it reaches torch as tpu:0. torch has
no hook for either: `init_process_group` and `new_group` are wrapped.
"""

from __future__ import annotations

import functools
import inspect
import urllib.parse

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from .._import_hooks import is_marked, mark
from . import BACKEND, join_job, tpu_is_accelerator
from ..warning_categories import TORCH_TPU as _TORCH_TPU, warn as _warn


def _entry(entry: str) -> str:
    device, colon, name = entry.partition(":")  # "tpu:nccl" -> "tpu:tpu_dist"
    return f"{device}:{BACKEND}" if colon and name.strip() == "nccl" else entry


def tpu_backend(backend):
    """`backend` with NCCL's name read as tpu's (see above); others unchanged."""
    if not isinstance(backend, str) or "nccl" not in backend.lower() or dist.is_nccl_available() \
            or not tpu_is_accelerator():
        return backend
    text = backend.strip().lower()
    new = None if text == "nccl" else ",".join(_entry(e) for e in text.split(","))
    read = f"{new!r}" if new else "the default for tpu (tpu_dist for tpu tensors, Gloo for cpu tensors)"
    # Python's default filter shows it once per calling line.
    _warn(f"torch_tpu: this torch has no NCCL; backend {backend!r} is read as {read}: "
          f"XLA's collectives carry tpu tensors", category=_TORCH_TPU, stacklevel=3)
    return new


def own_device(device_id):
    """A tpu `device_id` (int or torch.device) with the local rank read as tpu:0."""
    if not tpu_is_accelerator():
        return device_id
    if isinstance(device_id, int) or (isinstance(device_id, torch.device) and device_id.type == "tpu"
                                      and device_id.index is not None):
        index = device_id if isinstance(device_id, int) else device_id.index
        return torch.device("tpu", torch.tpu._utils._get_device_index(index))
    return device_id


def _tcp_address(arguments):
    """(host, port) of an init_method "tcp://host:port", or None."""
    method = arguments.get("init_method")
    if not isinstance(method, str) or not method.startswith("tcp://"):
        return None
    parsed = urllib.parse.urlparse(method)
    return (parsed.hostname, parsed.port) if parsed.hostname and parsed.port else None


def _wrap(original):
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        if "rank" in bound.arguments and "world_size" in bound.arguments:  # init_process_group's
            join_job(bound.arguments["rank"], bound.arguments["world_size"], _tcp_address(bound.arguments))
        if "backend" in bound.arguments:
            bound.arguments["backend"] = tpu_backend(bound.arguments["backend"])
        if "device_id" in bound.arguments:
            bound.arguments["device_id"] = own_device(bound.arguments["device_id"])
        return original(*bound.args, **bound.kwargs)

    return mark(wrapper)


def install() -> None:
    for name in ("init_process_group", "new_group"):
        original = getattr(c10d, name)
        if not is_marked(original):
            setattr(c10d, name, _wrap(original))
        setattr(dist, name, getattr(c10d, name))
