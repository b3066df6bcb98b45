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

The detection is the tpu kernel of `aten::cat` (csrc/aten/cat_growth.cpp):
every cat runs the lowered op and notes its result; only a cat that grows a
noted result in a later trace calls `_bound` here. Outside Fused Eager,
with autograd on, during a graph capture, or with bucketing off
(TPU_FUSE_BUCKET=0 or set_enabled(False)) it is the plain op; so is it
while a torch.compile graph's ops run (`in_graph`), which they do in Fused
Eager: a graph's results are plain tensors, as the graph's own trace
promised (a BoundedTensor returned by one reached Dynamo's next frame,
which traced into its Python dispatch and failed). A result
that becomes bounded is a wrapper subclass: its values, shape and every op
are a tensor's, but it has no storage of its own (`data_ptr()` is 0,
`untyped_storage()` is not the padded buffer).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading

import torch

from . import _C

_enabled = os.environ.get("TPU_FUSE_BUCKET", "1") != "0"  # on unless TPU_FUSE_BUCKET=0
_stats = {"bucketed": 0}
_graph = threading.local()  # depth of compiled-graph runs on this thread (in_graph)


def install() -> None:
    """Hands the current setting to the cat kernel."""
    _C._set_cat_bucketing(_bound if _enabled else None)


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


@contextlib.contextmanager
def in_graph():
    """No automatic buckets inside: a compiled graph's ops are running."""
    _graph.depth = getattr(_graph, "depth", 0) + 1
    try:
        yield
    finally:
        _graph.depth -= 1


def _bound(out: torch.Tensor, d: int) -> torch.Tensor:
    """`out`, a cat's result grown along dim `d` from the last step, padded
    to the bucket of its size (called by the cat kernel)."""
    if getattr(_graph, "depth", 0):
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


install()
atexit.register(_C._set_cat_bucketing, None)  # drop the Python function before the interpreter goes
