// resize_: new sizes with contiguous strides, growing the storage if needed.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "exec/storage_resize.h"

namespace torch_tpu::aten {
namespace {

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (memory_format && *memory_format != at::MemoryFormat::Preserve) impl->empty_tensor_restride(*memory_format);
  if (self.numel() > 0) {
    size_t needed = static_cast<size_t>(self.storage_offset() + self.numel()) * self.element_size();
    exec::grow_storage(self.storage(), needed);
  }
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("resize_", TORCH_FN(resize_)); }

}  // namespace torch_tpu::aten
