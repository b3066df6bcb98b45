// Helpers the sparse COO kernels share (sparse_coo.cpp, sparse_coo_ops.cpp).
#pragma once

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>

#include <utility>

namespace torch_tpu::aten::sparse {

// One index tensor per sparse dim of `sparse`, as index_put_ and index take them.
c10::List<std::optional<at::Tensor>> index_rows(const at::Tensor& sparse);

// Row-major position of each stored entry among the dims of `sizes`, from
// `indices` ([sizes.size(), nnz] int64): one int64 key per entry, ordered as
// coalesce orders entries. (PyTorch's flatten_indices goes through a
// CPU/CUDA-only kernel stub.)
at::Tensor flat_positions(const at::Tensor& indices, at::IntArrayRef sizes);

// For each entry of `wanted` (sparse), where coalesced `source` (sparse,
// the same sparse sizes) stores its index: the position among source's
// entries and whether it is stored there at all.
std::pair<at::Tensor, at::Tensor> find_entries(const at::Tensor& source, const at::Tensor& wanted);

// The values `self` (sparse) holds at each index of `mask` (sparse, the same
// sizes), summed over duplicates; zero where `self` stores nothing.
at::Tensor values_at(const at::Tensor& self, const at::Tensor& mask);

}  // namespace torch_tpu::aten::sparse
