// aten::_has_compatible_shallow_copy_type for tpu tensors: a dense tpu
// tensor and a dense CPU (or tpu) tensor are shallow-copy compatible, as
// PyTorch treats CPU and CUDA. The check itself is PyTorch's
// TensorImpl::has_compatible_shallow_copy_type, whose list of "dense"
// backends leaves PrivateUse1 out; its callers are what makes the
// difference:
//   - Module._apply (`model.to("tpu")`) then moves each Parameter in place
//     (`param.data = moved`), as for CUDA, instead of building a new plain
//     Parameter per module. So tied weights stay tied, and
//     UninitializedParameter (lazy modules: LazyConv2d, LazyLinear, ...)
//     keeps its class, so lazy initialisation still happens at the first
//     forward on tpu (it failed with "weight should have at least three
//     dimensions": the plain [0] Parameter was taken as initialised).
//   - `t.data = other` (VariableHooks::set_data) accepts the pair.
// Both tensors are plain strided TensorImpls, so the shallow copy is the
// same metadata copy CUDA's is. The op is CompositeImplicitAutograd and
// dispatches on the highest backend of its two arguments, so a CPU/tpu pair
// reaches this kernel.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace torch_tpu::aten {

namespace {

bool dense_cpu_or_tpu(const at::Tensor& t) {
  if (t.layout() != at::kStrided) return false;
  auto ks = t.key_set();
  if (!ks.has(c10::DispatchKey::Dense) && !ks.has_backend(c10::BackendComponent::CPUBit)) return false;
  return t.device().type() == at::kCPU || t.device().type() == at::kPrivateUse1;
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if (self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set())) return true;
  // Subclasses of TensorImpl (functional, wrapper, nested...) keep PyTorch's answer.
  if (typeid(*self.unsafeGetTensorImpl()) != typeid(c10::TensorImpl) ||
      typeid(*from.unsafeGetTensorImpl()) != typeid(c10::TensorImpl))
    return false;
  return dense_cpu_or_tpu(self) && dense_cpu_or_tpu(from) &&
         (self.device().type() == at::kPrivateUse1 || from.device().type() == at::kPrivateUse1);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", &has_compatible_shallow_copy_type);
}
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", &has_compatible_shallow_copy_type);
}

}  // namespace torch_tpu::aten
