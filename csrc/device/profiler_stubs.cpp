// PyTorch's profiler stubs for PrivateUse1 (torch/csrc/profiler/stubs/base.h):
// the route PyTorch's profiler takes for a device without a kineto plugin
// (ProfilerState::KINETO_PRIVATEUSE1_FALLBACK, i.e.
// `torch.autograd.profiler.profile(use_device="tpu", use_kineto=False)`):
// it records an "event" when each op starts and ends and reports their
// difference as the op's device time. An event here is a timestamp taken
// once the device has finished everything queued (XLA has no device-side
// events we could record without waiting), so the profiled run is
// synchronous. The stubs are used only while such a profiler is on.
#include <torch/csrc/profiler/stubs/base.h>

#include <c10/util/ApproximateClock.h>

#include <chrono>
#include <memory>

#include "device/guard.h"
#include "runtime/runtime.h"

namespace torch_tpu::device {
namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct TpuProfilerStubs final : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    c10::DeviceIndex d = current_device();
    if (device) *device = d;
    if (runtime::started()) runtime::get().synchronize(d);
    *event = std::make_shared<int64_t>(steady_ns());
    if (cpu_ns) *cpu_ns = c10::getTime();
  }
  // Microseconds, as the CUDA stubs return.
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* a,
                const torch::profiler::impl::ProfilerVoidEventStub* b) const override {
    auto t0 = *static_cast<const int64_t*>(a->get());
    auto t1 = *static_cast<const int64_t*>(b->get());
    return static_cast<float>(t1 - t0) / 1000.0f;
  }
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    for (int d = 0; d < device_count(); ++d) op(d);
  }
  void synchronize() const override {
    if (!runtime::started()) return;
    for (int d = 0; d < device_count(); ++d) runtime::get().synchronize(d);
  }
};

struct Register {
  Register() {
    static TpuProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} g_register;

}  // namespace
}  // namespace torch_tpu::device
