"""Fake (shape-only) kernels for ops whose PyTorch meta kernel is narrower
than what runs on tpu.

Dynamo traces with fake tensors, which take an op's output shape from its
meta kernel. PyTorch's meta kernel for `aten::_grouped_mm` carries the CUDA
kernel's restrictions (bf16 inputs only), while the op's CompositeExplicit
kernel — what CPU and tpu run — computes every floating dtype. Transformers
picks `grouped_mm` for its MoE experts on tpu in every dtype (its
`_can_use_grouped_mm`), so a float32 MoE model failed under
`torch.compile(backend="tpu")` with "Expected inputs of BF16 type" while its
eager forward matched CPU. `torch.library.register_fake` is PyTorch's hook for
this; the kernel here answers for tpu tensors and hands every other device
to PyTorch's own meta kernel, so CUDA and CPU tracing are unchanged.
Registering costs about 0.1 s, so it happens when Dynamo loads
(dynamo_backend's registry hook), not at `import torch`.
"""

from __future__ import annotations

import torch


def _on_tpu(*ts):
    return any(isinstance(t, torch.Tensor) and t.device.type == "tpu" for t in ts)


def _grouped_mm_fake(mat_a, mat_b, offs=None, bias=None, out_dtype=None):
    if not _on_tpu(mat_a, mat_b):
        from torch._meta_registrations import meta_grouped_mm

        return meta_grouped_mm(mat_a, mat_b, offs=offs, bias=bias, out_dtype=out_dtype)
    torch._check(mat_a.dtype == mat_b.dtype and mat_a.is_floating_point(),
                 lambda: f"_grouped_mm: expected floating inputs of one dtype, got "
                         f"{mat_a.dtype} and {mat_b.dtype}")
    torch._check(mat_a.dim() in (2, 3) and mat_b.dim() in (2, 3),
                 lambda: f"_grouped_mm: operands must be 2-D or 3-D, got {mat_a.dim()}-D and {mat_b.dim()}-D")
    a2, b2 = mat_a.dim() == 2, mat_b.dim() == 2
    torch._check((offs is not None) == (a2 or b2),
                 lambda: "_grouped_mm: offs is required exactly when an operand is 2-D")
    if a2 and b2:
        size = [offs.size(0), mat_a.size(0), mat_b.size(1)]
    elif a2:
        torch._check(offs.size(0) == mat_b.size(0), lambda: "_grouped_mm: matrix batch sizes have to match")
        size = [mat_a.size(0), mat_b.size(-1)]
    elif b2:
        torch._check(offs.size(0) == mat_a.size(0), lambda: "_grouped_mm: matrix batch sizes have to match")
        size = [mat_a.size(1), mat_b.size(1)]
    else:
        torch._check(mat_a.size(0) == mat_b.size(0), lambda: "_grouped_mm: batched dimension has to match")
        size = [mat_a.size(0), mat_a.size(1), mat_b.size(-1)]
    return mat_a.new_empty(size, dtype=out_dtype or mat_a.dtype)


_installed = False


def install() -> None:
    global _installed
    if not _installed:
        _installed = True
        # allow_override: torch 2.11's default refuses an op that already
        # has a Meta kernel (2.13's default allows it).
        torch.library.register_fake("aten::_grouped_mm", _grouped_mm_fake, allow_override=True)
