"""`torch.tpu.ops.align_jagged_to_multiple` / `strip_jagged_padding`:
pad a jagged NestedTensor's flat values buffer with trailing rows up to a
multiple of `multiple` (keeping its offsets), and slice them off again.
The point is the same here as on TPU: a values buffer whose length takes
few distinct values keeps the number of compiled program shapes small.
Both are plain torch ops on the values buffer (a cat and a slice view)."""

from __future__ import annotations

from typing import Optional, Union

import torch
from torch.nested._internal.nested_tensor import nested_view_from_values_offsets


def _jagged(op: str, nt) -> None:
    if not isinstance(nt, torch.Tensor) or not nt.is_nested or nt.layout != torch.jagged:
        what = f"{nt.layout} tensor" if isinstance(nt, torch.Tensor) else type(nt).__name__
        raise TypeError(f"torch.tpu.ops.{op}: nt must be a torch.jagged NestedTensor, got a {what}")
    if nt._ragged_idx != 1:
        raise ValueError(f"torch.tpu.ops.{op}: nt's ragged dimension must be dim 1 (values rows), "
                         f"got {nt._ragged_idx}")


def align_jagged_to_multiple(nt: torch.Tensor, multiple: int = 128,
                             padding_value: Union[float, int, bool] = 0.0) -> torch.Tensor:
    """`nt` with its values buffer padded (with padding_value) to a multiple
    of `multiple` rows; offsets unchanged. Returns `nt` if already aligned."""
    _jagged("align_jagged_to_multiple", nt)
    if not isinstance(multiple, int) or multiple < 1:
        raise ValueError(f"torch.tpu.ops.align_jagged_to_multiple: multiple must be a positive int, got {multiple!r}")
    values = nt.values()
    extra = -values.shape[0] % multiple
    if extra == 0:
        return nt
    pad = values.new_full((extra,) + tuple(values.shape[1:]), padding_value)
    return nested_view_from_values_offsets(torch.cat([values, pad]), nt.offsets())


def strip_jagged_padding(nt: torch.Tensor, valid_tokens: Optional[int] = None) -> torch.Tensor:
    """`nt` with its values buffer cut (a view) to the valid rows:
    `valid_tokens` if given (no device read), else offsets[-1]."""
    _jagged("strip_jagged_padding", nt)
    offsets = nt.offsets()
    if valid_tokens is None:
        valid_tokens = int(offsets[-1]) if offsets.numel() else 0
    rows = nt.values().shape[0]
    if not isinstance(valid_tokens, int) or not 0 <= valid_tokens <= rows:
        raise ValueError(f"torch.tpu.ops.strip_jagged_padding: valid_tokens {valid_tokens!r} must be an int in "
                         f"[0, {rows}] (the values buffer's rows)")
    if valid_tokens == rows:
        return nt
    return nested_view_from_values_offsets(nt.values()[:valid_tokens], offsets)
