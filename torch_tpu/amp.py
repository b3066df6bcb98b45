"""Mixed precision on tpu: torch.autocast("tpu") (bfloat16 by default) and
torch.amp.GradScaler("tpu"); torch.tpu.amp offers the torch.cuda.amp-style
names. The op policy (which ops run in bfloat16, which in float32) is CUDA's,
registered in C++ (csrc/aten/autocast.cpp)."""

from __future__ import annotations

import functools

import torch

__all__ = ["autocast", "GradScaler", "get_amp_supported_dtype", "custom_fwd", "custom_bwd"]


def get_amp_supported_dtype() -> list[torch.dtype]:
    """Dtypes torch.autocast("tpu", dtype=...) accepts; bfloat16 is the TPU's."""
    return [torch.bfloat16, torch.float16]


def _set_default_dtype() -> None:
    # PyTorch defaults every PrivateUse1 backend to float16; a TPU computes in
    # bfloat16. (The setting is per thread, as PyTorch keeps it.)
    torch.set_autocast_dtype("tpu", torch.bfloat16)


class autocast(torch.amp.autocast_mode.autocast):
    """torch.autocast("tpu", ...) with bfloat16 as the default dtype."""

    def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.bfloat16, cache_enabled: bool = True):
        super().__init__("tpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


def _let_higher_order_ops_through() -> None:
    """Under torch.autocast("tpu"), higher-order ops (torch.cond, while_loop,
    scan, flex_attention's backward, the activation-checkpoint wrappers...)
    found no kernel: torch lets autocast fall through every HOP for CPU, CUDA
    and XPU only (`_HIGHER_ORDER_OP_DEFAULT_FALLTHROUGH_DISPATCH_KEYS`), so
    each raised "could not find kernel for HigherOrderOperator ... at
    dispatch key AutocastPrivateUse1", eager or under torch.compile. They
    now fall through for tpu too, as for CUDA: the ops inside autocast by
    their own kernels. A HOP with its own tpu autocast kernel keeps it."""
    from torch import _ops

    key = torch._C.DispatchKey.AutocastPrivateUse1
    if key not in _ops._HIGHER_ORDER_OP_DEFAULT_FALLTHROUGH_DISPATCH_KEYS:
        _ops._HIGHER_ORDER_OP_DEFAULT_FALLTHROUGH_DISPATCH_KEYS.append(key)  # HOPs made from now on
    for hop in list(_ops._higher_order_ops.values()):  # those made already
        if key not in hop.py_kernels:
            hop.fallthrough(key)


GradScaler = functools.partial(torch.amp.GradScaler, "tpu")
custom_fwd = functools.partial(torch.amp.custom_fwd, device_type="tpu")
custom_bwd = functools.partial(torch.amp.custom_bwd, device_type="tpu")
