// view_as_real / view_as_complex: metadata views between a complex storage
// and its (re, im) float pairs (PyTorch's generic kernels). Reads and writes
// through the other dtype reinterpret the storage (lowering/view.cpp).
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <torch/library.h>

namespace torch_tpu::aten {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
}

}  // namespace torch_tpu::aten
