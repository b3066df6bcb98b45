// The tpu random generator: a (seed, offset) pair. Each random op takes the
// pair as a runtime operand keying XLA's counter-based RNG and advances the
// offset, so the same seed gives the same numbers and no two calls repeat.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <utility>

namespace torch_tpu::device {

class TpuGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit TpuGeneratorImpl(c10::DeviceIndex index);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // The key for one random op: (seed, offset), then offset += 1.
  std::pair<uint64_t, uint64_t> next_key();

 private:
  TpuGeneratorImpl* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);
// Seeds every device's default generator, including those not created yet
// (so seeding does not have to start the runtime to count devices).
void manual_seed_all(uint64_t seed);

}  // namespace torch_tpu::device
