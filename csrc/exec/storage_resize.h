// Growing a tpu storage in place (resize_, out= tensors that need more room).
#pragma once

#include <c10/core/Storage.h>

namespace torch_tpu::exec {

// Gives `storage` a new buffer of `new_nbytes` (its old elements first, then
// zeros) behind a new data pointer; every tensor on the storage sees it.
void grow_storage(const c10::Storage& storage, size_t new_nbytes);

}  // namespace torch_tpu::exec
