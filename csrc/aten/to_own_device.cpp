// `x.to("tpu:<local rank>")` of a tensor already on this process's device
// returns `x`, as `x.to("cuda:<local rank>")` does on CUDA. In a job the
// local rank names tpu:0 (device/guard.h, own_index) but tensors report
// tpu:0, so PyTorch's composite `to` saw two devices and copied: a script
// that wrote in place through the result (`buf = self.buf.to(device);
// buf.add_(1)`) changed a copy where CUDA changes `self.buf`.
//
// Registered for AutogradPrivateUse1, where it takes the place of `to`'s
// CompositeImplicitAutograd kernel for tpu tensors; it maps the index and
// runs that same kernel (at::native::to), so everything else about `to`
// (dtype, copy=True, memory_format, autograd) is PyTorch's.
#include <ATen/ops/to_native.h>
#include <torch/library.h>

#include "device/guard.h"

namespace torch_tpu::aten {
namespace {

std::optional<c10::Device> own(std::optional<c10::Device> d) {
  if (d && d->type() == c10::DeviceType::PrivateUse1 && d->has_index())
    return c10::Device(d->type(), device::own_index(d->index()));
  return d;
}

at::Tensor to_device(const at::Tensor& self, c10::Device device, c10::ScalarType dtype, bool non_blocking, bool copy,
                     std::optional<c10::MemoryFormat> memory_format) {
  return at::native::to(self, *own(device), dtype, non_blocking, copy, memory_format);
}

at::Tensor to_dtype_layout(const at::Tensor& self, std::optional<c10::ScalarType> dtype,
                           std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                           std::optional<bool> pin_memory, bool non_blocking, bool copy,
                           std::optional<c10::MemoryFormat> memory_format) {
  return at::native::to(self, dtype, layout, own(device), pin_memory, non_blocking, copy, memory_format);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("to.device", TORCH_FN(to_device));
  m.impl("to.dtype_layout", TORCH_FN(to_dtype_layout));
}

}  // namespace torch_tpu::aten
