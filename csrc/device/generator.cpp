#include "device/generator.h"

#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <random>

#include "device/guard.h"
#include "runtime/collective_runtime.h"

namespace torch_tpu::device {

// PyTorch's CPU default seed, so an unseeded tpu process is deterministic too.
constexpr uint64_t kDefaultSeed = 67280421310721ULL;

TpuGeneratorImpl::TpuGeneratorImpl(c10::DeviceIndex index)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(kDefaultSeed) {}

void TpuGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t TpuGeneratorImpl::seed() {
  uint64_t s = std::random_device{}();
  s = (s << 32) ^ std::random_device{}();
  set_current_seed(s);
  return s;
}

// State layout: 16 bytes, seed then offset (uint8 CPU tensor, like CUDA's).
void TpuGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.numel() == 16 && new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
              "torch_tpu: RNG state must be a uint8 tensor of 16 bytes, got ", new_state.numel(), " elements");
  const auto* p = static_cast<const uint8_t*>(new_state.data());
  std::memcpy(&seed_, p, 8);
  std::memcpy(&offset_, p + 8, 8);
}

c10::intrusive_ptr<c10::TensorImpl> TpuGeneratorImpl::get_state() const {
  auto t = at::empty({16}, at::TensorOptions().dtype(at::kByte));
  auto* p = t.data_ptr<uint8_t>();
  std::memcpy(p, &seed_, 8);
  std::memcpy(p + 8, &offset_, 8);
  return t.getIntrusivePtr();
}

std::pair<uint64_t, uint64_t> TpuGeneratorImpl::next_key() { return {seed_, offset_++}; }

TpuGeneratorImpl* TpuGeneratorImpl::clone_impl() const {
  auto* g = new TpuGeneratorImpl(device().index());
  g->seed_ = seed_;
  g->offset_ = offset_;
  return g;
}

namespace {
std::mutex g_mu;
std::deque<at::Generator> g_gens;  // deque: references stay valid as it grows
std::optional<uint64_t> g_seed_all;  // seed for default generators made later
}  // namespace

const at::Generator& default_generator(c10::DeviceIndex index) {
  index = index < 0 ? current_device() : own_index(index);
  std::lock_guard<std::mutex> lock(g_mu);
  if (static_cast<c10::DeviceIndex>(g_gens.size()) <= index)  // first use of this device's: is it one?
    TORCH_CHECK(index < device_count(), "torch_tpu: no default generator for tpu:", static_cast<int>(index), " (",
                static_cast<int>(device_count()), " tpu device(s) available)", runtime::job_device_hint());
  while (static_cast<c10::DeviceIndex>(g_gens.size()) <= index) {
    auto g = at::make_generator<TpuGeneratorImpl>(static_cast<c10::DeviceIndex>(g_gens.size()));
    if (g_seed_all) g.set_current_seed(*g_seed_all);
    g_gens.push_back(std::move(g));
  }
  return g_gens[index];
}

void manual_seed_all(uint64_t seed) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_seed_all = seed;
  for (auto& g : g_gens) {
    std::lock_guard<std::mutex> glock(g.mutex());
    g.set_current_seed(seed);
  }
}

at::Generator new_generator(c10::DeviceIndex index) {
  index = index < 0 ? current_device() : own_index(index);
  return at::make_generator<TpuGeneratorImpl>(index);
}

}  // namespace torch_tpu::device
