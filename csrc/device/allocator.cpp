#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <mutex>

#include "device/guard.h"
#include "device/storage.h"

namespace torch_tpu::device {
namespace {

constexpr int kMaxDevices = 64;

struct Counters {
  std::atomic<int64_t> allocated{0}, peak{0}, allocs{0}, frees{0};
};
std::array<Counters, kMaxDevices> g_counters;

// Synthetic addresses start high and only grow, so they are unique for the
// life of the process and never collide with host memory PyTorch compares
// them against.
std::atomic<uintptr_t> g_next_address{uintptr_t{1} << 46};

void delete_storage_buffer(void* ctx) {
  auto* sb = static_cast<StorageBuffer*>(ctx);
  auto& c = g_counters[sb->device];
  c.allocated -= static_cast<int64_t>(sb->nbytes);
  c.frees += 1;
  delete sb;  // dropping the BufferRef never needs the GIL (runtime defers it)
}

class TpuAllocator final : public at::Allocator {
 public:
  at::DataPtr allocate(size_t nbytes) override {
    int device = current_device();
    TORCH_CHECK(device >= 0 && device < kMaxDevices, "torch_tpu: invalid device ", device);
    auto* sb = new StorageBuffer();
    sb->device = device;
    sb->nbytes = nbytes;
    auto& c = g_counters[device];
    int64_t now = (c.allocated += static_cast<int64_t>(nbytes));
    c.allocs += 1;
    int64_t peak = c.peak.load();
    while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {
    }
    uintptr_t span = ((nbytes + 255) / 256 + 1) * 256;
    void* address = reinterpret_cast<void*>(g_next_address.fetch_add(span));
    return {address, sb, &delete_storage_buffer, c10::Device(c10::DeviceType::PrivateUse1, device)};
  }

  at::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK(false, "torch_tpu: tpu memory cannot be copied through raw pointers; use Tensor.copy_");
  }
};

TpuAllocator g_allocator;

}  // namespace

at::Allocator* allocator() { return &g_allocator; }

StorageBuffer& storage_buffer(const c10::Storage& storage) {
  void* ctx = storage.data_ptr().get_context();
  TORCH_CHECK(ctx != nullptr && storage.data_ptr().get_deleter() == &delete_storage_buffer,
              "torch_tpu: storage was not allocated by the tpu allocator");
  return *static_cast<StorageBuffer*>(ctx);
}

MemoryStats memory_stats(int device) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "torch_tpu: invalid device ", device);
  auto& c = g_counters[device];
  return {c.allocated.load(), c.peak.load(), c.allocs.load(), c.frees.load()};
}

void reset_peak_memory(int device) {
  auto& c = g_counters[device];
  c.peak = c.allocated.load();
}

}  // namespace torch_tpu::device
