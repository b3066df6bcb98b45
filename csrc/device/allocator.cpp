#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>

#include "device/guard.h"
#include "device/storage.h"
#include "runtime/modes.h"
#include "runtime/runtime.h"

namespace torch_tpu::device {
namespace {

constexpr int kMaxDevices = 64;

struct Counters {
  std::atomic<int64_t> allocated{0}, peak{0}, allocs{0}, frees{0}, ooms{0};
  std::atomic<int64_t> allocated_total{0}, freed_total{0};
  std::atomic<int64_t> live{0}, live_peak{0};  // allocations not yet freed
  std::atomic<int64_t> limit{-1};  // -1: not yet read from the environment
};
std::array<Counters, kMaxDevices> g_counters;

// The device memory limit: TORCH_TPU_HBM_BYTES, else the chip's own memory
// as XLA reports it, else (XLA:CPU) half of the host's physical memory.
// Until the runtime has started the chip's size is unknown, so the host
// default is used without being kept.
int64_t env_limit() {
  const char* env = std::getenv("TORCH_TPU_HBM_BYTES");
  if (!env) return -1;
  char* end = nullptr;
  long long v = std::strtoll(env, &end, 10);
  TORCH_CHECK(end != env && *end == '\0' && v > 0, "torch_tpu: TORCH_TPU_HBM_BYTES must be a positive integer, got '",
              env, "'");
  return static_cast<int64_t>(v);
}

int64_t host_default_limit() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return int64_t{16} << 30;
  return static_cast<int64_t>(pages) * page / 2;
}

int64_t limit_of(Counters& c) {
  int64_t l = c.limit.load();
  if (l >= 0) return l;
  int64_t d = env_limit();
  if (d < 0) {
    if (!runtime::started()) return host_default_limit();
    int64_t chip = runtime::get().platform().memory_bytes;
    d = chip > 0 ? chip : host_default_limit();
  }
  c.limit.compare_exchange_strong(l, d);
  return c.limit.load();
}

std::string format_size(int64_t bytes) {
  char buf[64];
  double b = static_cast<double>(bytes);
  if (bytes < (int64_t{1} << 10)) std::snprintf(buf, sizeof(buf), "%lld bytes", static_cast<long long>(bytes));
  else if (bytes < (int64_t{1} << 20)) std::snprintf(buf, sizeof(buf), "%.2f KiB", b / (1 << 10));
  else if (bytes < (int64_t{1} << 30)) std::snprintf(buf, sizeof(buf), "%.2f MiB", b / (1 << 20));
  else std::snprintf(buf, sizeof(buf), "%.2f GiB", b / (1 << 30));
  return buf;
}

// Synthetic addresses start high and only grow, so they are unique for the
// life of the process and never collide with host memory PyTorch compares
// them against.
std::atomic<uintptr_t> g_next_address{uintptr_t{1} << 46};

// Live allocations by address, both ways. PyTorch's raw-pointer paths
// (legacy torch.save, pickling a tensor, Storage._set_from_file) wrap a
// storage's data pointer in a new, non-owning storage with at::from_blob;
// storage_buffer() finds the owner's buffer record through this map.
std::mutex g_live_mutex;
std::unordered_map<const void*, StorageBuffer*> g_by_address;
std::unordered_map<const StorageBuffer*, const void*> g_address_of;

void delete_storage_buffer(void* ctx) {
  auto* sb = static_cast<StorageBuffer*>(ctx);
  {
    std::lock_guard<std::mutex> lock(g_live_mutex);
    auto it = g_address_of.find(sb);
    if (it != g_address_of.end()) {
      g_by_address.erase(it->second);
      g_address_of.erase(it);
    }
  }
  auto& c = g_counters[sb->device];
  c.allocated -= static_cast<int64_t>(sb->nbytes);
  c.freed_total += static_cast<int64_t>(sb->nbytes);
  c.frees += 1;
  c.live -= 1;
  delete sb;  // dropping the BufferRef never needs the GIL (runtime defers it)
}

[[noreturn]] void raise_out_of_memory(int device, int64_t size) {
  auto& c = g_counters[device];
  int64_t limit = limit_of(c);
  c.ooms += 1;
  int64_t in_use = c.allocated.load();
  TORCH_CHECK_WITH(OutOfMemoryError, false, "TPU out of memory. Tried to allocate ", format_size(size), ". TPU ", device,
                   " has a total capacity of ", format_size(limit), " of which ",
                   format_size(std::max<int64_t>(limit - in_use, 0)), " is free. Of the allocated memory ",
                   format_size(in_use), " is allocated by PyTorch. (The limit is TORCH_TPU_HBM_BYTES or "
                   "torch.tpu.set_per_process_memory_fraction.)");
}

void raise_peak(std::atomic<int64_t>& peak, int64_t now) {
  int64_t p = peak.load();
  while (now > p && !peak.compare_exchange_weak(p, now)) {
  }
}

// A c10::DeviceAllocator, so that torch.accelerator's memory functions
// (memory_allocated, memory_stats, ...) work on tpu. Storages are not
// cached; reserved is allocated plus the freed device buffers the runtime
// keeps for fused programs to write results into (runtime/donation.h),
// which emptyCache releases.
class TpuAllocator final : public c10::DeviceAllocator {
 public:
  at::DataPtr allocate(size_t nbytes) override {
    int device = current_device();
    TORCH_CHECK(device >= 0 && device < kMaxDevices, "torch_tpu: invalid device ", device);
    auto& c = g_counters[device];
    int64_t limit = limit_of(c);
    int64_t size = static_cast<int64_t>(nbytes);
    int64_t now = (c.allocated += size);
    if (now > limit) {
      c.allocated -= size;
      raise_out_of_memory(device, size);
    }
    auto* sb = new StorageBuffer();
    sb->device = device;
    sb->nbytes = nbytes;
    c.allocated_total += size;
    c.allocs += 1;
    raise_peak(c.peak, now);
    raise_peak(c.live_peak, c.live += 1);
    uintptr_t span = ((nbytes + 255) / 256 + 1) * 256;
    void* address = reinterpret_cast<void*>(g_next_address.fetch_add(span));
    {
      std::lock_guard<std::mutex> lock(g_live_mutex);
      g_by_address[address] = sb;
      g_address_of[sb] = address;
    }
    return {address, sb, &delete_storage_buffer, c10::Device(c10::DeviceType::PrivateUse1, device)};
  }

  at::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK(false, "torch_tpu: tpu memory cannot be copied through raw pointers; use Tensor.copy_");
  }

  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {
    if (runtime::started()) runtime::release_recycled();
  }
  void recordStream(const c10::DataPtr&, c10::Stream) override {}  // one in-order stream per device

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    TORCH_CHECK(device >= 0 && device < kMaxDevices, "torch_tpu: invalid device ", static_cast<int>(device));
    auto& c = g_counters[device];
    c10::CachingDeviceAllocator::DeviceStats s;
    constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    c10::CachingAllocator::Stat bytes;
    bytes.current = c.allocated.load();
    bytes.peak = c.peak.load();
    bytes.allocated = c.allocated_total.load();
    bytes.freed = c.freed_total.load();
    c10::CachingAllocator::Stat count;
    count.current = c.live.load();
    count.peak = c.live_peak.load();
    count.allocated = c.allocs.load();
    count.freed = c.frees.load();
    for (auto* stat : {&s.allocated_bytes, &s.reserved_bytes, &s.active_bytes, &s.requested_bytes}) (*stat)[kAll] = bytes;
    s.reserved_bytes[kAll].current += runtime::recycled_bytes(device);
    for (auto* stat : {&s.allocation, &s.segment, &s.active}) (*stat)[kAll] = count;
    s.num_ooms = c.ooms.load();
    return s;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    auto& c = g_counters[device];
    c.allocs = 0;
    c.frees = 0;
    c.allocated_total = 0;
    c.freed_total = 0;
    c.ooms = 0;
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    auto& c = g_counters[device];
    c.peak = c.allocated.load();
    c.live_peak = c.live.load();
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    auto& c = g_counters[device];
    int64_t limit = limit_of(c);
    return {static_cast<size_t>(std::max<int64_t>(limit - c.allocated.load(), 0)), static_cast<size_t>(limit)};
  }
};

TpuAllocator g_allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator)

}  // namespace

at::Allocator* allocator() { return &g_allocator; }

StorageBuffer& storage_buffer(const c10::Storage& storage) {
  void* ctx = storage.data_ptr().get_context();
  if (ctx != nullptr && storage.data_ptr().get_deleter() == &delete_storage_buffer)
    return *static_cast<StorageBuffer*>(ctx);
  // A non-owning storage (at::from_blob) over a live tpu storage's address:
  // it shares that storage's buffer record, whole (an interior pointer has
  // no buffer of its own to name).
  std::lock_guard<std::mutex> lock(g_live_mutex);
  auto it = g_by_address.find(storage.data_ptr().get());
  TORCH_CHECK(it != g_by_address.end(), "torch_tpu: storage was not allocated by the tpu allocator");
  TORCH_CHECK(storage.nbytes() == it->second->nbytes, "torch_tpu: a storage wrapping tpu memory at ",
              storage.data_ptr().get(), " must cover its whole allocation (", it->second->nbytes, " bytes), got ",
              storage.nbytes(), " bytes");
  return *it->second;
}

MemoryStats memory_stats(int device) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "torch_tpu: invalid device ", device);
  auto& c = g_counters[device];
  return {c.allocated.load(), c.peak.load(), c.allocs.load(), c.frees.load(),
          c.ooms.load(), c.allocated_total.load(), c.freed_total.load(), limit_of(c), c.live.load()};
}

void check_can_allocate(int device, int64_t bytes) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "torch_tpu: invalid device ", device);
  auto& c = g_counters[device];
  if (c.allocated.load() + bytes > limit_of(c)) raise_out_of_memory(device, bytes);
}

void set_memory_limit(int device, int64_t bytes) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "torch_tpu: invalid device ", device);
  g_counters[device].limit = bytes < 0 ? -1 : bytes;  // -1: read again on next use
}

void reset_peak_memory(int device) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "torch_tpu: invalid device ", device);
  g_allocator.resetPeakStats(static_cast<c10::DeviceIndex>(device));
}

void reset_accumulated_memory(int device) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "torch_tpu: invalid device ", device);
  g_allocator.resetAccumulatedStats(static_cast<c10::DeviceIndex>(device));
}

}  // namespace torch_tpu::device
