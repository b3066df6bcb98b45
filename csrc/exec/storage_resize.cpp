#include "exec/storage_resize.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <map>
#include <tuple>

#include "device/storage.h"
#include "hlo/ops.h"
#include "lowering/context.h"
#include "runtime/runtime.h"

namespace torch_tpu::exec {

namespace {

// Gives `storage` a fresh allocation of `new_nbytes` holding its first
// elements, zero-padded when growing (the buffer stays unwritten if it was).
void reallocate(const c10::Storage& storage, size_t new_nbytes) {
  auto& old_sb = device::storage_buffer(storage);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, old_sb.device));
  at::DataPtr fresh = device::allocator()->allocate(new_nbytes);
  auto* new_sb = static_cast<device::StorageBuffer*>(fresh.get_context());
  if (old_sb.buffer && new_nbytes > 0) {
    int64_t itemsize = static_cast<int64_t>(c10::elementSize(old_sb.dtype));
    // Shrinking must not cut an element in half; growing only adds zeros.
    TORCH_CHECK(new_nbytes >= storage.nbytes() || new_nbytes % itemsize == 0,
                "torch_tpu: cannot shrink a storage holding ", old_sb.dtype,
                " elements to ", new_nbytes, " bytes (not a multiple of ", itemsize, ")");
    int64_t old_n = static_cast<int64_t>(storage.nbytes()) / itemsize;
    int64_t new_n = static_cast<int64_t>(new_nbytes) / itemsize;
    runtime::RuntimeLock lock;
    static auto* programs = new std::map<std::tuple<int, int64_t, int64_t, int>, runtime::ExecutableRef>();
    auto key = std::make_tuple(static_cast<int>(old_sb.dtype), old_n, new_n, old_sb.device);
    auto it = programs->find(key);
    if (it == programs->end()) {
      hlo::Builder b;
      auto e = lowering::element_type(old_sb.dtype);
      hlo::Value old = b.parameter(hlo::TensorType{e, {old_n}});
      hlo::Value resized = new_n >= old_n ? hlo::pad(old, hlo::constant(b, e, 0), {0}, {new_n - old_n})
                                          : hlo::slice(old, {0}, {new_n});
      it = programs->emplace(key, runtime::get().compile(b.module_text({resized}), old_sb.device, "resize_")).first;
    }
    new_sb->buffer = runtime::get().execute(*it->second, {old_sb.buffer})[0];
    new_sb->dtype = old_sb.dtype;
  }
  // The StorageImpl stays the same object, so views keep seeing it.
  auto* impl = storage.unsafeGetStorageImpl();
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(new_nbytes);
}

}  // namespace

void grow_storage(const c10::Storage& storage, size_t new_nbytes) {
  if (new_nbytes > storage.nbytes()) reallocate(storage, new_nbytes);
}

void resize_storage_bytes(const c10::Storage& storage, size_t new_nbytes) {
  TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
  if (new_nbytes != storage.nbytes()) reallocate(storage, new_nbytes);
}

}  // namespace torch_tpu::exec
