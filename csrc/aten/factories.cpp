// Tensor creation on tpu: storage only; contents arrive with the first write.
#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "device/guard.h"
#include "device/storage.h"

namespace torch_tpu::aten {
namespace {

c10::DeviceIndex index_of(std::optional<c10::Device> device) {
  if (device && device->has_index()) return device->index();
  return device::current_device();
}

constexpr c10::DispatchKeySet kTpuKeys(c10::DispatchKey::PrivateUse1);

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout || *layout == at::kStrided, "torch_tpu: only strided tensors are supported, got layout ",
              *layout);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index_of(device)));
  return at::detail::empty_generic(size, device::allocator(), kTpuKeys,
                                   dtype.value_or(c10::get_default_dtype_as_scalartype()), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  TORCH_CHECK(!layout || *layout == at::kStrided, "torch_tpu: only strided tensors are supported, got layout ",
              *layout);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index_of(device)));
  return at::detail::empty_strided_generic(size, stride, device::allocator(), kTpuKeys,
                                           dtype.value_or(c10::get_default_dtype_as_scalartype()));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
}

}  // namespace torch_tpu::aten
