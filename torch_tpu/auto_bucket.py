"""Fused Eager: a dimension that grows by `torch.cat` is padded to buckets
without a user mark (docs/design.md "Bounded dynamism").

A decode loop grows its KV cache, token buffer and attention mask by one
step each time (`x = torch.cat([x, new], dim)`), so every op that reads
them would compile once per length. Here, in Fused Eager and with autograd
off, a `cat` whose first non-empty piece is itself the result of a `cat`
along the same dim, made before the last trace ran (the next step of a
loop, not a second cat in the same step or graph), returns a BoundedTensor
(bounded_tensor.py): the same value, stored padded along that dim to the
next power of two. From then on every op on it runs through the
padding rules (bounded_rules.py), which mask padded entries out of
reductions, softmax, contractions and argmax, so results are exact and the
programs depend on the bucket only; an op no rule covers runs on the real
sizes (compiled per size, with a warning), as for a marked tensor.

The hook is a Python kernel for `aten::cat` on the tpu device (PyTorch's
supported `torch.library` registration), installed the first time Fused
Eager is turned on with bucketing enabled (or by set_enabled(True)); it runs the engine's own `cat.out`. Outside Fused
Eager, with autograd on, during a graph capture, or unless enabled
(TPU_FUSE_BUCKET=1 or set_enabled(True): off by default, see below)
it only forwards. A result that becomes bounded is a wrapper subclass: its
values, shape and every op are a tensor's, but it has no storage of its own
(`data_ptr()` is 0, `untyped_storage()` is not the padded buffer).
"""

from __future__ import annotations

import functools
import os

import torch

_lib = None
# Opt-in (TPU_FUSE_BUCKET=1): every op on a BoundedTensor goes through Python,
# so a warm generate runs several times slower than a split one (design.md).
_enabled = os.environ.get("TPU_FUSE_BUCKET", "0") == "1"
_stats = {"bucketed": 0}


def install() -> None:
    """Registers the cat kernel (once per process), only when bucketing is
    enabled: a disabled hook would still cost every cat a Python call."""
    global _lib
    if _lib is not None or not _enabled:
        return
    _lib = torch.library.Library("aten", "IMPL")
    _lib.impl("cat", _cat, "PrivateUse1")


def set_enabled(on: bool) -> bool:
    """Turns automatic bucketing on or off (TPU_FUSE_BUCKET's setting at
    start); returns the previous setting."""
    global _enabled
    prev, _enabled = _enabled, bool(on)
    install()
    return prev


def stats() -> dict:
    """`bucketed`: cat results made BoundedTensors automatically."""
    return dict(_stats)


def _cat(tensors, dim=0):
    dtype = functools.reduce(torch.promote_types, [t.dtype for t in tensors])
    out = torch.ops.aten.cat.out(tensors, dim, out=torch.empty(0, dtype=dtype, device=tensors[0].device))
    if not _enabled or out.dim() == 0 or torch.is_grad_enabled() or torch.compiler.is_compiling():
        return out
    from . import _C

    if _C._get_eager_mode() != 2 or _C._replay_capture_active():  # Strict Eager has no trace to keep stable
        return out
    d = dim % out.dim()
    first = next((t for t in tensors if t.numel() > 0), None)
    flushes = _C._fusion_stats()["flushes"]
    grown = getattr(first, "_tpu_cat_grown", None) if first is not None else None
    if grown is None or grown[0] != d or grown[1] == flushes:
        # The next cat of this result along d makes it bounded if a trace
        # ran in between (the next step of a loop; not a second cat in the
        # same step, or in a graph).
        out._tpu_cat_grown = (d, flushes)
        return out
    from .bounded_graph import bucket, pad_to
    from .bounded_tensor import BoundedTensor

    shape = list(out.shape)
    want = list(shape)
    want[d] = bucket(shape[d], None)
    room = list(want)
    room[d] += 1  # the next growth by one stays in the same storage layout (bounded_rules.growth)
    _stats["bucketed"] += 1
    return BoundedTensor(pad_to(out, want, room), shape, {d: None})
