// _has_compatible_shallow_copy_type for tpu tensors: a plain tpu tensor and a
// plain dense tensor of another backend (CPU, CUDA, ...) may take each
// other's data by shallow copy, as CPU and CUDA tensors may.
//
// Two callers depend on it. `Module._apply` (`model.to("tpu")`, `.cpu()`,
// `.to(dtype)`) keeps each Parameter object and assigns `param.data` only
// when this says yes; otherwise it makes a new Parameter per module, so an
// optimizer built before the move holds the old ones (it trains nothing) and
// tied weights come apart. `Tensor.data = t` (VariableHooks::set_data) refuses
// a tensor for which this says no. c10's built-in test
// (TensorImpl::has_compatible_shallow_copy_type) lists the dense backends and
// leaves PrivateUse1 out, and says a PrivateUse1 backend overrides this
// operator instead. The shallow copy itself (TensorImpl::shallow_copy_from)
// takes storage, sizes, dtype, device and dispatch keys from the source, so
// a tpu TensorImpl is an ordinary one after it.
//
// Only calls with a tpu tensor among the two arguments reach this kernel, so
// CPU/CUDA-only programs are unaffected.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace torch_tpu::aten {
namespace {

// A plain dense tensor: the Dense functionality on a dense backend, ours
// included (no sparse, quantized or nested tpu tensors exist).
bool plain_dense(c10::DispatchKeySet ks) {
  constexpr auto backends = c10::DispatchKeySet(
      {c10::BackendComponent::CPUBit, c10::BackendComponent::CUDABit, c10::BackendComponent::MPSBit,
       c10::BackendComponent::HIPBit, c10::BackendComponent::XPUBit, c10::BackendComponent::HPUBit,
       c10::BackendComponent::MTIABit, c10::BackendComponent::PrivateUse1Bit});
  return ks.has(c10::DispatchKey::Dense) && ks.has_any(backends) && !ks.has(c10::DispatchKey::Sparse) &&
         !ks.has(c10::DispatchKey::SparseCsr) && !ks.has(c10::DispatchKey::Quantized);
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto* impl = self.unsafeGetTensorImpl();
  if (impl->has_compatible_shallow_copy_type(from.key_set())) return true;
  return plain_dense(self.key_set()) && plain_dense(from.key_set());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

}  // namespace torch_tpu::aten
