// Nested tensors (NestedTensorImpl, strided layout) whose buffer lives on
// tpu: conversions between a padded dense tensor and a nested one. A nested
// tensor's component sizes are host metadata (a CPU int64 matrix), so every
// conversion is one gather (index_select) with an index built on the host;
// no device read.
#pragma once

#include <ATen/core/Tensor.h>

namespace torch_tpu::aten::nested {

// The nested tensor whose i-th component is padded[i][:len_0, :len_1, ...]
// where [len_0, len_1, ...] = nested_sizes[i] (CPU int64 [N, padded.dim()-1]).
at::Tensor from_padded(const at::Tensor& padded, const at::Tensor& nested_sizes);

// The dense [N, max sizes...] (or output_size) tensor holding nt's components,
// `padding` everywhere else: to_padded_tensor.
at::Tensor to_padded(const at::Tensor& nt, double padding, at::OptionalIntArrayRef output_size);

// Checks that our kernels can read nt: a nested tensor with a contiguous
// buffer (NotImplementedError naming `op` otherwise).
void check_readable(const at::Tensor& nt, const char* op);

}  // namespace torch_tpu::aten::nested
