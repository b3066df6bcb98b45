"""`torch.tpu.ops.splash_sdpa`: the reference's drop-in for
F.scaled_dot_product_attention backed by jax's Pallas splash-attention TPU
kernel. Here it is our scaled_dot_product_attention (lowered by the engine,
with its own backward) with the same masks: causal by default, or a
sliding window when `local_window_size` is given (query i sees keys
i - local_window_size .. i), or none.

The remaining options pick the kernel's tiling (block_*), its backward
variant (use_fused_bwd_kernel, use_vmap_bwd) and its operand layouts
(*_layout). They change how the TPU kernel runs, never the result, and XLA
chooses its own tiling here: they are checked for well-formedness and
otherwise have no effect."""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from . import _checks

_OP = "splash_sdpa"
_LAYOUTS = ("HEAD_DIM_MINOR", "SEQ_MINOR")


def _window_mask(q_len: int, kv_len: int, window: int, device) -> torch.Tensor:
    """True where query i may attend key j: i - window <= j <= i."""
    i = torch.arange(q_len, device=device).unsqueeze(1)
    j = torch.arange(kv_len, device=device).unsqueeze(0)
    return (j <= i) & (j >= i - window)


def splash_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: Optional[float] = None,
                is_causal: bool = True, local_window_size: Optional[int] = None, enable_gqa: bool = False,
                block_q: int = 512, block_kv: int = 512, block_dkv: int = 512, block_kv_compute: int = 512,
                block_q_dkv: int = 512, block_kv_dkv: int = 512, block_kv_dkv_compute: int = 512,
                block_q_dq: Optional[int] = None, block_kv_dq: Optional[int] = None,
                use_fused_bwd_kernel: bool = True, use_vmap_bwd: bool = True, q_layout: str = "HEAD_DIM_MINOR",
                k_layout: str = "HEAD_DIM_MINOR", v_layout: str = "HEAD_DIM_MINOR") -> torch.Tensor:
    """Attention of q (B, H, S, D) over k, v (B, Hkv, S, D); differentiable.
    enable_gqa must say whether Hkv != H (H a multiple of Hkv)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        _checks.tensor(_OP, name, t, ranks=(4,), floating=True)
    if not (q.dtype == k.dtype == v.dtype) or k.shape != v.shape or q.shape[0] != k.shape[0] \
            or q.shape[3] != k.shape[3]:
        raise ValueError(f"torch.tpu.ops.{_OP}: q ({_checks.describe(q)}), k ({_checks.describe(k)}) and v "
                         f"({_checks.describe(v)}) must share dtype, batch and head_dim, and k and v their shape")
    heads, kv_heads = q.shape[1], k.shape[1]
    if enable_gqa != (heads != kv_heads) or heads % kv_heads:
        raise ValueError(f"torch.tpu.ops.{_OP}: enable_gqa ({enable_gqa}) does not match inputs: "
                         f"n_heads={heads}, n_kv_heads={kv_heads}")
    for name, layout in (("q_layout", q_layout), ("k_layout", k_layout), ("v_layout", v_layout)):
        if layout not in _LAYOUTS:
            raise ValueError(f"torch.tpu.ops.{_OP}: {name} {layout!r} is not one of {list(_LAYOUTS)}")
    blocks = dict(block_q=block_q, block_kv=block_kv, block_dkv=block_dkv, block_kv_compute=block_kv_compute,
                  block_q_dkv=block_q_dkv, block_kv_dkv=block_kv_dkv, block_kv_dkv_compute=block_kv_dkv_compute,
                  block_q_dq=block_q_dq, block_kv_dq=block_kv_dq)
    for name, b in blocks.items():
        if b is not None and (not isinstance(b, int) or b < 1):
            raise ValueError(f"torch.tpu.ops.{_OP}: {name} must be a positive int, got {b!r}")
    if local_window_size is not None:
        if not isinstance(local_window_size, int) or local_window_size < 0:
            raise ValueError(f"torch.tpu.ops.{_OP}: local_window_size must be a non-negative int, got "
                             f"{local_window_size!r}")
        mask = _window_mask(q.shape[2], k.shape[2], local_window_size, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=enable_gqa)
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
