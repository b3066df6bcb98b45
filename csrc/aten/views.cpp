// View ops: metadata only, sharing the storage (PyTorch's own generic
// implementations, registered for tpu).
//
// Also the tensor-less factories tril_indices / triu_indices: they have no
// tensor the engine's meta pass could size the output from, so they allocate
// an empty tpu tensor and hand their out= form straight to the engine (its
// CompositeExplicitAutograd kernel would call the functional form again).
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include "exec/op_runner.h"

namespace torch_tpu::aten {
namespace {

at::Tensor empty_index_output(std::optional<at::ScalarType> dtype, std::optional<c10::Device> device) {
  auto opts = at::TensorOptions().dtype(dtype.value_or(at::kLong)).device(device.value_or(c10::DeviceType::PrivateUse1));
  return at::empty({0}, opts);
}

at::Tensor run_indices_out(const char* name, int64_t row, int64_t col, int64_t offset,
                           std::optional<at::ScalarType> dtype, std::optional<c10::Device> device) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "out");
  at::Tensor out = empty_index_output(dtype, device);
  torch::jit::Stack stack{row, col, offset, out};
  exec::run_lowered_op(op, &stack);
  return out;
}

at::Tensor tril_indices(int64_t row, int64_t col, int64_t offset, std::optional<at::ScalarType> dtype,
                        std::optional<at::Layout> layout, std::optional<c10::Device> device,
                        std::optional<bool> pin_memory) {
  return run_indices_out("aten::tril_indices", row, col, offset, dtype, device);
}

at::Tensor triu_indices(int64_t row, int64_t col, int64_t offset, std::optional<at::ScalarType> dtype,
                        std::optional<at::Layout> layout, std::optional<c10::Device> device,
                        std::optional<bool> pin_memory) {
  return run_indices_out("aten::triu_indices", row, col, offset, dtype, device);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("tril_indices", TORCH_FN(tril_indices));
  m.impl("triu_indices", TORCH_FN(triu_indices));
  m.impl("tril_indices.out", torch::CppFunction::makeFromBoxedFunction<&exec::run_lowered_op>());
  m.impl("triu_indices.out", torch::CppFunction::makeFromBoxedFunction<&exec::run_lowered_op>());
}

}  // namespace torch_tpu::aten
