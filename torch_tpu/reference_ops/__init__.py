"""The ops of the reference backend's `torch.tpu.ops` (torch_tpu_names/ops.py
re-exports them), one small file per family.

The reference implements them as TPU kernels (Pallas, SparseCore, its own
collectives). Here each one is built from what this backend already runs:
ops that exist in jax (ragged_dot, optimization_barrier, reduce_window max
pooling) are `torch_tpu.jax_op`s, so they work in Strict Eager, Fused Eager
and torch.compile with jax's derivative; attention is our
scaled_dot_product_attention; the collectives are torch.distributed's over
the `tpu_dist` backend. The SparseCore embedding ops raise
NotImplementedError (sparsecore.py says why)."""

from .attention import splash_sdpa
from .barrier import optimization_barrier
from .collectives import all_gather_dim, recv, reduce_scatter_dim, send
from .jagged import align_jagged_to_multiple, strip_jagged_padding
from .pooling import (max_pool1d, max_pool1d_backward, max_pool2d, max_pool2d_backward, max_pool3d,
                      max_pool3d_backward)
from .ragged import ragged_dot, ragged_dot_weight_grad
from .ragged_all_to_all import ragged_all_to_all
from .sparsecore import (sparse_dense_matmul, sparse_dense_matmul_activation_unstack,
                         sparse_dense_matmul_grad_with_adagrad, sparse_dense_matmul_grad_with_adam,
                         sparse_dense_matmul_grad_with_sgd, sparse_dense_matmul_gradient_stack, sparse_gather,
                         sparse_gather_backward, sparse_iota, sparse_map_row)

__all__ = [
    "align_jagged_to_multiple", "all_gather_dim", "max_pool1d", "max_pool1d_backward", "max_pool2d",
    "max_pool2d_backward", "max_pool3d", "max_pool3d_backward", "optimization_barrier", "ragged_all_to_all",
    "ragged_dot", "ragged_dot_weight_grad", "recv", "reduce_scatter_dim", "send", "sparse_dense_matmul",
    "sparse_dense_matmul_activation_unstack", "sparse_dense_matmul_grad_with_adagrad",
    "sparse_dense_matmul_grad_with_adam", "sparse_dense_matmul_grad_with_sgd", "sparse_dense_matmul_gradient_stack",
    "sparse_gather", "sparse_gather_backward", "sparse_iota", "sparse_map_row", "splash_sdpa", "strip_jagged_padding",
]
