// set_: pointing a tpu tensor at a storage (or another tensor's storage).
//
// Storage-level code uses it: UntypedStorage.copy_ / .cpu() / .tpu() wrap
// each storage in a byte tensor through set_, so torch.save (storages go to
// the host), torch.load's map_location and storage deepcopy all pass here.
// The storage keeps its buffer; a tensor of another dtype on it reads the
// bytes reinterpreted (see "Complex dtypes and reinterpreted storage").
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/set_native.h>
#include <torch/library.h>

#include "device/storage.h"
#include "exec/storage_resize.h"

namespace torch_tpu::aten {
namespace {

at::Tensor& set_storage_offset(at::Tensor& self, at::Storage source, int64_t storage_offset,
                               at::IntArrayRef size, at::IntArrayRef stride) {
  TORCH_CHECK(source.device().is_privateuseone(), "set_: expected a tpu storage for a tpu tensor, got a storage on ",
              source.device());
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_offset(storage_offset);
  if (stride.data() != nullptr)
    impl->set_sizes_and_strides(size, stride);
  else
    impl->set_sizes_contiguous(size);
  // Like CPU's set_, a view past the storage's end grows the storage.
  if (self.numel() > 0) {
    size_t needed = at::detail::computeStorageNbytes(self.sizes(), self.strides(), self.element_size(),
                                                     static_cast<size_t>(storage_offset));
    exec::grow_storage(self.storage(), needed);
  }
  return self;
}

// set_(): an empty storage of its own.
at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, device::allocator(), /*resizable=*/true);
  return set_storage_offset(self, std::move(storage), 0, {0}, {});
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage_offset));
  m.impl("set_.source_Storage", TORCH_FN(static_cast<at::Tensor& (*)(at::Tensor&, at::Storage)>(at::native::set_)));
  m.impl("set_.source_Tensor", TORCH_FN(at::native::set_tensor_));
  m.impl("set_", TORCH_FN(set_empty));
}

}  // namespace torch_tpu::aten
