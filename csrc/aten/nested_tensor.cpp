// Nested tensors on tpu, as far as PyTorch's TransformerEncoder sparsity
// fast path and the basic nested-tensor API need them.
//
// A nested tensor is a NestedTensorImpl: a flat buffer (here a tpu tensor)
// plus host metadata (per-component sizes, strides, offsets; CPU int64
// matrices). NestedTensorImpl derives its key set from the buffer's, so a tpu
// buffer gives NestedTensorPrivateUse1, and only the kernels registered for
// that key below run on it; every other op raises the dispatcher's
// NotImplementedError ("Could not run 'aten::<op>' with arguments from the
// 'NestedTensortpu' backend"), never reaching a dense kernel.
//
// Registered here:
//   PrivateUse1 (dense input): _nested_tensor_from_mask_left_aligned,
//     _nested_tensor_from_mask (padded batch + mask -> nested).
//   NestedTensorPrivateUse1: to_padded_tensor, _to_copy (to/from CPU,
//     dtype; also reached by a CPU nested tensor's .to("tpu"), since the
//     target device joins the dispatch key), _nested_tensor_size/_strides/
//     _storage_offsets, unbind.
// _transformer_encoder_layer_fwd on a nested input is in
// transformer_fastpath.cpp.
#include "aten/nested_tensor.h"

#include <ATen/Dispatch.h>
#include <ATen/NestedTensorImpl.h>
#include <ATen/native/nested/NestedTensorUtils.h>
#include <ATen/ops/_nested_tensor_size_native.h>
#include <ATen/ops/_nested_tensor_storage_offsets_native.h>
#include <ATen/ops/_nested_tensor_strides_native.h>
#include <ATen/ops/_to_copy.h>
#include <ATen/ops/any.h>
#include <ATen/ops/bitwise_and.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <c10/core/WrapDimMinimal.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace torch_tpu::aten::nested {

namespace {

// Row-major [N, k] CPU int64 matrix -> N vectors of k.
std::vector<std::vector<int64_t>> rows_of(const at::Tensor& sizes) {
  TORCH_INTERNAL_ASSERT(sizes.device().is_cpu() && sizes.scalar_type() == at::kLong && sizes.dim() == 2);
  at::Tensor s = sizes.contiguous();
  const int64_t n = s.size(0), k = s.size(1);
  const int64_t* p = s.const_data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> out(n);
  for (int64_t i = 0; i < n; ++i) out[i].assign(p + i * k, p + (i + 1) * k);
  return out;
}

int64_t prod(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t p = 1;
  for (size_t d = from; d < v.size(); ++d) p *= v[d];
  return p;
}

// A host-built index as a device tensor: one host-to-device copy.
at::Tensor device_index(const std::vector<int64_t>& idx, const at::Device& device) {
  return at::tensor(idx, at::TensorOptions().dtype(at::kLong)).to(device);
}

// The fill value CPU's to_padded_tensor uses: infinite padding of an
// integer tensor becomes the type's max/lowest.
c10::Scalar padding_value(double padding, at::ScalarType dtype) {
  if (!std::isinf(padding) || at::isFloatingType(dtype) || at::isComplexType(dtype)) return padding;
  if (dtype == at::kBool) return true;
  c10::Scalar out;
  AT_DISPATCH_INTEGRAL_TYPES(dtype, "to_padded_tensor", [&] {
    out = padding > 0 ? std::numeric_limits<scalar_t>::max() : std::numeric_limits<scalar_t>::lowest();
  });
  return out;
}

// All components share sizes[1:] (e.g. [L_i, D]): the layout where a padded
// tensor is N blocks of rows and one row-gather converts either way.
bool uniform_trailing(const std::vector<std::vector<int64_t>>& sizes) {
  if (sizes.empty() || sizes[0].empty()) return false;
  for (const auto& s : sizes)
    if (!std::equal(s.begin() + 1, s.end(), sizes[0].begin() + 1)) return false;
  return true;
}

}  // namespace

void check_readable(const at::Tensor& nt, const char* op) {
  TORCH_CHECK(nt.is_nested(), op, ": expected a nested tensor");
  const auto* impl = at::native::get_nested_tensor_impl(nt);
  TORCH_CHECK_NOT_IMPLEMENTED(at::native::nested_tensor_impl_is_contiguous(impl), op,
                              ": non-contiguous nested tensors (e.g. transposed) are not supported on tpu; "
                              "only nested tensors with a contiguous buffer are");
}

at::Tensor from_padded(const at::Tensor& padded, const at::Tensor& nested_sizes) {
  const auto sizes = rows_of(nested_sizes);
  const int64_t n = static_cast<int64_t>(sizes.size());
  const int64_t k = nested_sizes.size(1);
  TORCH_CHECK(padded.dim() == k + 1 && padded.size(0) == n, "nested from padded: padded tensor of shape ",
              padded.sizes(), " does not hold ", n, " components of ", k, " dims");
  for (const auto& s : sizes)
    for (int64_t d = 0; d < k; ++d)
      TORCH_CHECK(s[d] >= 0 && s[d] <= padded.size(d + 1), "nested from padded: component size ", s,
                  " exceeds the padded shape ", padded.sizes());
  at::Tensor buffer;
  std::vector<int64_t> trailing(padded.sizes().begin() + std::min<int64_t>(2, padded.dim()), padded.sizes().end());
  bool rows = uniform_trailing(sizes) &&
              std::equal(trailing.begin(), trailing.end(), sizes[0].begin() + 1, sizes[0].end());
  int64_t total = 0;
  for (const auto& s : sizes) total += prod(s);
  if (total == 0) {
    buffer = at::empty({0}, padded.options());
  } else if (rows) {
    // Component i is rows [i*L, i*L + len_i) of the [N*L, row] view.
    const int64_t len = padded.size(1), row = prod(trailing);
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < sizes[i][0]; ++j) idx.push_back(i * len + j);
    buffer = padded.reshape({n * len, row}).index_select(0, device_index(idx, padded.device())).reshape({-1});
  } else {
    std::vector<at::Tensor> parts;
    for (int64_t i = 0; i < n; ++i) {
      at::Tensor c = padded.select(0, i);
      for (int64_t d = 0; d < k; ++d) c = c.narrow(d, 0, sizes[i][d]);
      parts.push_back(c.reshape({-1}));
    }
    buffer = at::cat(parts);
  }
  return at::native::wrap_buffer(buffer.contiguous(), nested_sizes.clone());
}

at::Tensor to_padded(const at::Tensor& nt, double padding, at::OptionalIntArrayRef output_size) {
  check_readable(nt, "to_padded_tensor");
  const auto* impl = at::native::get_nested_tensor_impl(nt);
  const auto sizes = rows_of(impl->get_nested_sizes());
  const int64_t n = static_cast<int64_t>(sizes.size());
  const int64_t k = impl->get_nested_sizes().size(1);
  at::Tensor buffer = impl->get_buffer();
  const c10::Scalar pad = padding_value(padding, buffer.scalar_type());

  std::vector<int64_t> target(k + 1, 0);
  target[0] = n;
  for (const auto& s : sizes)
    for (int64_t d = 0; d < k; ++d) target[d + 1] = std::max(target[d + 1], s[d]);
  if (output_size.has_value()) {
    TORCH_CHECK(static_cast<int64_t>(output_size->size()) == k + 1, "to_padded_tensor: length of output_size ",
                output_size->size(), " does not match the nested tensor's ", k + 1,
                " dims. Broadcasting is not supported.");
    for (int64_t d = 0; d <= k; ++d) {
      TORCH_CHECK((*output_size)[d] >= target[d], "to_padded_tensor: output_size ", *output_size,
                  " is less than the nested tensor's padded size ", target, ". Truncation is not supported.");
      target[d] = (*output_size)[d];
    }
  }
  if (buffer.numel() == 0) return at::full(target, pad, buffer.options());

  at::Tensor out;
  if (uniform_trailing(sizes)) {
    // One gather from [buffer rows; a padding row]: output row (i, j) is
    // buffer row offset_i + j where j < len_i, the padding row elsewhere.
    std::vector<int64_t> trailing(sizes[0].begin() + 1, sizes[0].end());
    const int64_t row = prod(trailing), len = target[1];
    int64_t total = 0;
    for (const auto& s : sizes) total += s[0];
    std::vector<int64_t> idx(target[0] * len, total);
    int64_t offset = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < sizes[i][0]; ++j) idx[i * len + j] = offset + j;
      offset += sizes[i][0];
    }
    at::Tensor source = at::cat({buffer.view({total, row}), at::full({1, row}, pad, buffer.options())});
    std::vector<int64_t> shape = {target[0], len};
    shape.insert(shape.end(), trailing.begin(), trailing.end());
    out = source.index_select(0, device_index(idx, buffer.device())).view(shape);
    std::vector<int64_t> widths;  // constant_pad_nd order: last dim first
    for (int64_t d = k; d >= 2; --d) widths.insert(widths.end(), {0, target[d] - trailing[d - 2]});
    if (std::any_of(widths.begin(), widths.end(), [](int64_t w) { return w != 0; }))
      out = at::constant_pad_nd(out, widths, pad);
    return out;
  }
  // Components of different trailing sizes: pad each, then stack.
  std::vector<at::Tensor> parts;
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t numel = prod(sizes[i]);
    at::Tensor c = buffer.narrow(0, offset, numel).view(sizes[i]);
    offset += numel;
    std::vector<int64_t> widths;
    for (int64_t d = k - 1; d >= 0; --d) widths.insert(widths.end(), {0, target[d + 1] - sizes[i][d]});
    parts.push_back(widths.empty() ? c : at::constant_pad_nd(c, widths, pad));
  }
  out = at::stack(parts);
  if (target[0] > n) {
    std::vector<int64_t> widths(2 * k, 0);
    widths.insert(widths.end(), {0, target[0] - n});
    out = at::constant_pad_nd(out, widths, pad);
  }
  return out;
}

namespace {

void check_mask(const at::Tensor& t, const at::Tensor& mask, const char* op) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, op, ": expected mask to be of type Bool, but got ",
              mask.scalar_type(), " instead.");
  TORCH_CHECK(mask.dim() == 2, op, ": padding mask should be 2D, got shape ", mask.sizes());
  TORCH_CHECK(t.dim() == 3, op, ": input should be a 3D tensor, N * L * D, got shape ", t.sizes());
  TORCH_CHECK(t.size(0) == mask.size(0) && t.size(1) == mask.size(1), op, ": mask size ", mask.sizes(),
              " should match input size ", t.sizes());
}

// 1 where some row of the mask (True = real position) has a real position
// after a padded one, i.e. the row is not True...True False...False.
at::Tensor has_gap(const at::Tensor& mask) {
  const int64_t len = mask.size(1);
  if (len < 2) return at::zeros({}, mask.options().dtype(at::kLong));
  return at::bitwise_and(mask.narrow(1, 1, len - 1), at::logical_not(mask.narrow(1, 0, len - 1)))
      .any()
      .to(at::kLong);
}

// TransformerEncoder's question: can this padded batch become a nested
// tensor (every row of the mask left-aligned)? One reduction, one host read.
bool nested_tensor_from_mask_left_aligned(const at::Tensor& t, const at::Tensor& mask) {
  check_mask(t, mask, "_nested_tensor_from_mask_left_aligned");
  return has_gap(mask).item<int64_t>() == 0;
}

// The nested tensor of each row's first sum(mask[i]) positions (as CPU's
// kernel, which counts the mask and takes a prefix); with mask_check, a mask
// that is not left-aligned is an error. Lengths (and the check) come back
// in one host read; the buffer is one gather.
at::Tensor nested_tensor_from_mask(const at::Tensor& t, const at::Tensor& mask, bool mask_check) {
  check_mask(t, mask, "_nested_tensor_from_mask");
  const int64_t n = t.size(0);
  at::Tensor lengths = at::sum(mask, {1}, false, at::kLong);
  at::Tensor host = (mask_check ? at::cat({lengths, has_gap(mask).reshape({1})}) : lengths).cpu();
  const int64_t* p = host.const_data_ptr<int64_t>();
  TORCH_CHECK(!mask_check || p[n] == 0, "_nested_tensor_from_mask: mask must be left-aligned without gaps");
  at::Tensor sizes = at::empty({n, 2}, at::TensorOptions().dtype(at::kLong));
  int64_t* s = sizes.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    s[2 * i] = p[i];
    s[2 * i + 1] = t.size(2);
  }
  return from_padded(t, sizes);
}

at::Tensor to_padded_tensor(const at::Tensor& self, double padding, at::OptionalIntArrayRef output_size) {
  return to_padded(self, padding, output_size);
}

// A copy to another device and/or dtype: the buffer copied with dense ops
// (tpu<->CPU transfer, dtype conversion), the sizes kept.
at::Tensor to_copy(const at::Tensor& self, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                   std::optional<at::Device> device, std::optional<bool> pin_memory, bool non_blocking,
                   std::optional<at::MemoryFormat> memory_format) {
  check_readable(self, "_to_copy");
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided, "_to_copy: a nested tensor cannot change layout to ",
              *layout);
  TORCH_CHECK(!memory_format.has_value() || *memory_format == at::MemoryFormat::Preserve ||
                  *memory_format == at::MemoryFormat::Contiguous,
              "_to_copy: memory format ", *memory_format, " is not supported for nested tensors");
  const auto* impl = at::native::get_nested_tensor_impl(self);
  at::Tensor buffer = at::_to_copy(impl->get_buffer(), dtype, at::kStrided, device, pin_memory, non_blocking,
                                   std::nullopt);
  return at::native::wrap_buffer(buffer, impl->get_nested_sizes().clone());
}

std::vector<at::Tensor> unbind(const at::Tensor& self, int64_t dim) {
  check_readable(self, "unbind");
  TORCH_CHECK(c10::maybe_wrap_dim(dim, self.dim()) == 0,
              "unbind(): nested tensor can only be unbound along dimension 0, got dimension ", dim, " instead.");
  // Views of the buffer, as on CPU.
  const auto* impl = at::native::get_nested_tensor_impl(self);
  at::Tensor buffer = impl->get_buffer();
  std::vector<at::Tensor> out;
  int64_t offset = 0;
  for (const auto& s : rows_of(impl->get_nested_sizes())) {
    out.push_back(buffer.narrow(0, offset, prod(s)).view(s));
    offset += prod(s);
  }
  return out;
}

// Ops with a NestedTensorCPU kernel and a CompositeImplicitAutograd one:
// with no NestedTensorPrivateUse1 kernel the dispatcher would run the
// composite on the nested tensor, which fails deep inside with "NestedTensorImpl
// doesn't support sizes". Every other op without a kernel here already gets
// the dispatcher's NotImplementedError.
void not_implemented_for_nested(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "Could not run '", op.schema().operator_name(),
                              "' on a nested tensor on tpu: only TransformerEncoder's fast path and the basic "
                              "nested-tensor API (to_padded_tensor, unbind, .to/.cpu) have tpu kernels; "
                              "convert with to_padded_tensor() first");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_nested_tensor_from_mask_left_aligned", &nested_tensor_from_mask_left_aligned);
  m.impl("_nested_tensor_from_mask", &nested_tensor_from_mask);
}

// PyTorch's own kernels where they only touch the host metadata or copy the
// buffer with dense ops (device-generic).
TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("to_padded_tensor", &to_padded_tensor);
  m.impl("unbind.int", &unbind);
  m.impl("_to_copy", &to_copy);
  m.impl("_nested_tensor_size", &at::native::_nested_tensor_size);
  m.impl("_nested_tensor_strides", &at::native::_nested_tensor_strides);
  m.impl("_nested_tensor_storage_offsets", &at::native::_nested_tensor_storage_offsets);
  for (const char* op : {"linear", "matmul", "matmul.out", "chunk", "narrow", "silu_backward",
                         "value_selecting_reduction_backward"})
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&not_implemented_for_nested>());
}

}  // namespace torch_tpu::aten::nested
