"""The SparseCore embedding ops of `torch.tpu.ops` (sparse_dense_matmul*,
sparse_gather*, sparse_iota, sparse_map_row): they raise
NotImplementedError on this backend.

They run on the TPU's SparseCores and take their sparse inputs in the
SparseCore input-preprocessing format (per-partition CSR row pointers,
embedding/sample ids, padding sentinels, per-partition id limits), which
the reference neither documents nor publishes, and sparse_map_row runs a
SparseCore MLIR body. Guessing that format would give plausible but wrong
results; raising names the op and what to use instead."""

from __future__ import annotations

from typing import Sequence

import torch

_WHY = ("runs on TPU SparseCore hardware over the SparseCore input-preprocessing format, which this backend "
        "(XLA on the TensorCore / CPU) does not have")
_INSTEAD = {
    "sparse_dense_matmul": "torch.nn.functional.embedding_bag (mode='sum', per_sample_weights)",
    "sparse_gather": "torch.index_select",
    "sparse_gather_backward": "Tensor.index_add",
}


def _unsupported(op: str):
    instead = _INSTEAD.get(op)
    hint = f"; use {instead} on tpu tensors instead" if instead else ""
    raise NotImplementedError(f"torch.tpu.ops.{op} is not implemented on this backend: it {_WHY}{hint}")


def sparse_dense_matmul(row_pointers: torch.Tensor, embedding_ids: torch.Tensor, sample_ids: torch.Tensor,
                        gains: torch.Tensor, embedding_table: torch.Tensor, device_batch_size: int,
                        max_ids_per_partition: int, max_unique_ids_per_partition: int) -> torch.Tensor:
    _unsupported("sparse_dense_matmul")


def sparse_dense_matmul_grad_with_sgd(row_pointers: torch.Tensor, embedding_ids: torch.Tensor,
                                      sample_ids: torch.Tensor, gains: torch.Tensor, embedding_table: torch.Tensor,
                                      activations_grad: torch.Tensor, learning_rate: torch.Tensor,
                                      device_batch_size: int, max_ids_per_partition: int,
                                      max_unique_ids_per_partition: int, computation_name: str) -> torch.Tensor:
    _unsupported("sparse_dense_matmul_grad_with_sgd")


def sparse_dense_matmul_grad_with_adagrad(row_pointers: torch.Tensor, embedding_ids: torch.Tensor,
                                          sample_ids: torch.Tensor, gains: torch.Tensor,
                                          embedding_table: torch.Tensor, accumulator: torch.Tensor,
                                          activations_grad: torch.Tensor, learning_rate: torch.Tensor,
                                          epsilon: float, device_batch_size: int, max_ids_per_partition: int,
                                          max_unique_ids_per_partition: int,
                                          computation_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    _unsupported("sparse_dense_matmul_grad_with_adagrad")


def sparse_dense_matmul_grad_with_adam(row_pointers: torch.Tensor, embedding_ids: torch.Tensor,
                                       sample_ids: torch.Tensor, gains: torch.Tensor, embedding_table: torch.Tensor,
                                       momentum: torch.Tensor, velocity: torch.Tensor,
                                       activations_grad: torch.Tensor, alpha_t: torch.Tensor, beta_1: float,
                                       beta_2: float, epsilon: float, device_batch_size: int,
                                       max_ids_per_partition: int, max_unique_ids_per_partition: int,
                                       computation_name: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _unsupported("sparse_dense_matmul_grad_with_adam")


def sparse_dense_matmul_activation_unstack(stacked_activations: torch.Tensor, per_feature_batch_sizes: Sequence[int],
                                           per_feature_dims: Sequence[int]) -> list[torch.Tensor]:
    _unsupported("sparse_dense_matmul_activation_unstack")


def sparse_dense_matmul_gradient_stack(unstacked_gradients: Sequence[torch.Tensor], stacked_batch_size: int,
                                       stacked_feature_dim: int) -> torch.Tensor:
    _unsupported("sparse_dense_matmul_gradient_stack")


def sparse_gather(row_pointers: torch.Tensor, indices: torch.Tensor, operand: torch.Tensor,
                  max_non_zeroes_per_row: int) -> torch.Tensor:
    _unsupported("sparse_gather")


def sparse_gather_backward(grad_output: torch.Tensor, indices: torch.Tensor,
                           grad_operand: torch.Tensor) -> torch.Tensor:
    _unsupported("sparse_gather_backward")


def sparse_iota(row_pointers: torch.Tensor, max_non_zeroes: int, max_non_zeroes_per_row: int) -> torch.Tensor:
    _unsupported("sparse_iota")


def sparse_map_row(csr_tensors: Sequence[torch.Tensor], csr_lengths: Sequence[int], dense_args: Sequence[torch.Tensor],
                   body_mlir: str, dummy_outputs: Sequence[torch.Tensor], max_non_zeroes_per_row: int, pad_value: int,
                   max_pad_per_row: int, wait_threshold: float, result_row_pointer_op_index: int) -> list[torch.Tensor]:
    _unsupported("sparse_map_row")
