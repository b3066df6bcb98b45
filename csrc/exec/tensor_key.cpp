#include "exec/tensor_key.h"

#include <algorithm>

#include "device/storage.h"

namespace torch_tpu::exec {

// Eight raw bytes: keys are only compared, never read, and formatting
// numbers as text was a third of the per-op key's cost.
void append_int(std::string& k, int64_t v) { k.append(reinterpret_cast<const char*>(&v), sizeof(v)); }

void append_tensor_layout(std::string& k, const at::Tensor& t, SeenStorages& storages, bool offset_is_operand) {
  append_int(k, static_cast<int>(t.scalar_type()));
  for (auto s : t.sizes()) append_int(k, s);
  k += '/';
  for (auto s : t.strides()) append_int(k, s);
  k += '@';
  append_int(k, offset_is_operand ? -1 : t.storage_offset());
  append_int(k, static_cast<int64_t>(t.storage().nbytes()));
  int buffer_dtype = -1;
  if (t.is_privateuseone()) {
    const auto& sb = device::storage_buffer(t.storage());
    if (sb.buffer) buffer_dtype = static_cast<int>(sb.dtype);
  }
  append_int(k, buffer_dtype);
  // Lazy conjugate / negative views are read as what they stand for
  // (LowerCtx::read_tensor), so they need programs of their own.
  if (t.is_conj()) k += 'c';
  if (t.is_neg()) k += 'n';
  const void* impl = t.storage().unsafeGetStorageImpl();
  size_t pos = std::find(storages.begin(), storages.end(), impl) - storages.begin();
  if (pos == storages.size()) storages.push_back(impl);
  k += 's';
  append_int(k, static_cast<int64_t>(pos));
}

}  // namespace torch_tpu::exec
