// Growing a tpu storage in place (resize_, out= tensors that need more room).
#pragma once

#include <c10/core/Storage.h>

namespace torch_tpu::exec {

// Gives `storage` a new buffer of `new_nbytes` (its old elements first, then
// zeros) behind a new data pointer; every tensor on the storage sees it.
void grow_storage(const c10::Storage& storage, size_t new_nbytes);

// UntypedStorage.resize_: grows as above or keeps the first `new_nbytes`
// (0 frees the buffer, as FSDP does between uses).
void resize_storage_bytes(const c10::Storage& storage, size_t new_nbytes);

}  // namespace torch_tpu::exec
