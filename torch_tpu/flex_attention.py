"""`torch.nn.attention.flex_attention` on tpu (docs/design.md, "FlexAttention").

flex_attention is a higher-order op whose device-generic implementation
(`sdpa_dense` and `sdpa_dense_backward`, CompositeExplicitAutograd) builds
the whole score matrix from ATen ops: the score_mod and mask_mod are traced
functions, applied with vmap. Every one of those ops has a tpu lowering, so
eager flex_attention, its backward (captured buffers included) and
`torch.compile(flex_attention, backend="tpu")` run as they are; under
torch.compile the graph is one fused XLA program. Three things stop a tpu
user short of that, and each is filled here, right after its module is
imported:

- `_validate_device` refuses every device outside a fixed set
  ({cuda, cpu, xpu, hpu, mps}) and has no hook to add one: tpu now passes it
  (the CPU-only refusal of backward does not apply: tpu runs the dense
  backward). Other devices get torch's own check.
- In Fused Eager a KV cache grown by `torch.cat` is a BoundedTensor
  (auto_bucket.py: stored padded to a size bucket), whose Python dispatch
  Dynamo cannot trace, and flex_attention compiles its op with Dynamo even
  in eager; such a key or value failed ("Skip calling
  `torch.compiler.disable()`d function"). `_enforce_mem_layouts`, where
  flex_attention takes q, k and v in the layout it computes with, now also
  hands it a BoundedTensor's real entries as a plain tensor. (So in Fused
  Eager flex attention over a growing cache runs at each exact length, a
  program per length; scaled_dot_product_attention keeps the buckets.)
- Under `torch.autocast("tpu")` the op has no AutocastPrivateUse1 kernel
  (torch registers the autocast shim for AutocastCPU and AutocastCUDA
  only): it now has one that does what torch's does, casting q, k and v to
  the autocast dtype and running the op with tpu's autocast excluded.
"""

from __future__ import annotations

import functools

import torch
from torch._C import DispatchKey

from . import _import_hooks


def _adjust_frontend(module) -> None:
    _accept_tpu(module)
    _plain_layouts(module)


def _plain_layouts(module) -> None:
    original = module._enforce_mem_layouts
    if _import_hooks.is_marked(original):
        return

    @functools.wraps(original)
    def _enforce_mem_layouts(query, key, value):
        from .bounded_tensor import BoundedTensor

        query, key, value = (t.unpadded() if isinstance(t, BoundedTensor) else t for t in (query, key, value))
        return original(query, key, value)

    _import_hooks.mark(_enforce_mem_layouts)
    module._enforce_mem_layouts = _enforce_mem_layouts


def _accept_tpu(module) -> None:
    original = module._validate_device
    if _import_hooks.is_marked(original):
        return

    @functools.wraps(original)
    def _validate_device(query, key, value):
        if query.device.type == "tpu":
            return None  # q, k and v share a device (checked before this)
        return original(query, key, value)

    _import_hooks.mark(_validate_device)
    module._validate_device = _validate_device


def _autocast_kernel(module) -> None:
    hop = module.flex_attention
    if DispatchKey.AutocastPrivateUse1 in hop.py_kernels:
        return
    from torch.amp.autocast_mode import _cast

    @hop.py_impl(DispatchKey.AutocastPrivateUse1)
    def _flex_attention_autocast_tpu(query, key, value, score_mod, block_mask, scale, kernel_options,
                                     score_mod_other_buffers=(), mask_mod_other_buffers=()):
        dtype = torch.get_autocast_dtype("tpu")
        query, key, value = (_cast(t, "tpu", dtype) for t in (query, key, value))
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(DispatchKey.AutocastPrivateUse1)):
            return hop(query, key, value, score_mod, block_mask, scale, kernel_options,
                       score_mod_other_buffers, mask_mod_other_buffers)


_HOOKS = {
    "torch.nn.attention.flex_attention": _adjust_frontend,
    "torch._higher_order_ops.flex_attention": _autocast_kernel,
}


def install() -> None:
    _import_hooks.install(_HOOKS)
