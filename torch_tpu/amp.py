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


GradScaler = functools.partial(torch.amp.GradScaler, "tpu")
custom_fwd = functools.partial(torch.amp.custom_fwd, device_type="tpu")
custom_bwd = functools.partial(torch.amp.custom_bwd, device_type="tpu")
