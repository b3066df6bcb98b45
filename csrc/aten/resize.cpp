// resize_: new sizes with contiguous strides (same sizes: unchanged), growing
// the storage if needed.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "exec/storage_resize.h"

namespace torch_tpu::aten {
namespace {

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  // Same sizes: strides are kept, as CPU's and CUDA's resize_ keep them. A
  // composite out= kernel resizes a non-contiguous out to its own sizes and
  // then copies into it (softmax's, ones'): restriding it there left the
  // result out of place for the tensor it views (base.t() as out).
  if (self.sizes() != size) impl->set_sizes_contiguous(size);
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
