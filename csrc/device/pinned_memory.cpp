#include "device/pinned_memory.h"

#include <c10/core/CPUAllocator.h>

#include <mutex>
#include <unordered_set>

namespace torch_tpu::device {
namespace {

std::mutex g_mutex;
std::unordered_set<const void*>& live() {
  static auto* set = new std::unordered_set<const void*>();  // never destroyed: frees may come at exit
  return *set;
}

// The CPU allocation, kept alive until the pinned DataPtr is freed.
struct Pinned {
  c10::DataPtr cpu;
};

void free_pinned(void* ctx) {
  auto* p = static_cast<Pinned*>(ctx);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    live().erase(p->cpu.get());
  }
  delete p;
}

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr cpu = c10::GetCPUAllocator()->allocate(n);
    void* data = cpu.get();
    if (data == nullptr) return cpu;  // zero bytes: nothing to remember
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      live().insert(data);
    }
    return {data, new Pinned{std::move(cpu)}, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

}  // namespace

c10::Allocator* pinned_allocator() {
  static PinnedAllocator allocator;
  return &allocator;
}

bool is_pinned_ptr(const void* ptr) {
  if (ptr == nullptr) return false;
  std::lock_guard<std::mutex> lock(g_mutex);
  return live().count(ptr) > 0;
}

}  // namespace torch_tpu::device
