// The device guard: PyTorch's way of switching the current tpu device.
// There is one in-order stream per device; events are markers on it.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <chrono>

#include "device/guard.h"
#include "runtime/collective_runtime.h"
#include "runtime/runtime.h"

namespace torch_tpu::device {
namespace {

thread_local c10::DeviceIndex t_current_device = 0;
// set by set_device before the runtime started, outside a job's environment:
// checked (and mapped by own_index) when first read
thread_local bool t_unchecked = false;

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (old.index() != d.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return {kType, current_device()}; }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kType, "torch_tpu: expected a tpu device, got ", d);
    if (d.index() >= 0) set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) t_current_device = d.index(), t_unchecked = false;
  }
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kType, own_index(d.index())));
  }
  c10::Stream getDefaultStream(c10::Device d) const override { return getStream(d); }
  c10::Stream getNewStream(c10::Device d, int) const override { return getStream(d); }
  c10::Stream exchangeStream(c10::Stream s) const override { return getStream(s.device()); }
  c10::DeviceIndex deviceCount() const noexcept override {
    try {
      return device_count();
    } catch (...) {
      return 0;
    }
  }
  // Programs on a device run in issue order (one stream per device), so an
  // event is a point in that queue: recording it waits for the work queued
  // so far and notes the time, which makes query, synchronize and
  // elapsed_time exact (at the cost of a wait per record).
  struct TpuEvent {
    c10::DeviceIndex device = -1;
    int64_t time_ns = 0;
  };
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "Event device index ",
                static_cast<int>(device_index), " does not match recording stream's device index ",
                static_cast<int>(stream.device_index()), ".");
    if (*event == nullptr) *event = new TpuEvent();
    auto* e = static_cast<TpuEvent*>(*event);
    e->device = stream.device_index();
    runtime::get().synchronize(e->device);
    e->time_ns = now_ns();
  }
  void block(void*, const c10::Stream&) const override {}  // one in-order queue: nothing to wait for
  bool queryEvent(void* event) const override {
    return true;  // recording waited for the work before it
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<TpuEvent*>(event);
  }
  bool queryStream(const c10::Stream& s) const override {
    runtime::get().synchronize(s.device_index());  // exact: the work is done once this returns
    return true;
  }
  void synchronizeStream(const c10::Stream& s) const override { runtime::get().synchronize(s.device_index()); }
  void synchronizeEvent(void* event) const override {}  // recording already waited
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "Both events must be recorded before calculating elapsed time.");
    return static_cast<double>(static_cast<TpuEvent*>(end)->time_ns - static_cast<TpuEvent*>(start)->time_ns) / 1e6;
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    runtime::get().synchronize(own_index(index));
  }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace

namespace {
void check_and_set(c10::DeviceIndex index) {
  index = own_index(index);
  TORCH_CHECK(index >= 0 && index < device_count(), "torch_tpu: invalid device index ", static_cast<int>(index),
              " (", static_cast<int>(device_count()), " tpu device(s) available)", runtime::job_device_hint());
  t_current_device = index;
  t_unchecked = false;
}
}  // namespace

c10::DeviceIndex current_device() {
  if (C10_UNLIKELY(t_unchecked)) {  // starts the runtime
    c10::DeviceIndex wanted = t_current_device;
    t_current_device = 0, t_unchecked = false;  // a bad index raises once, as set_device would have
    check_and_set(wanted);
  }
  return t_current_device;
}

c10::DeviceIndex own_index(c10::DeviceIndex index) {
  if (index <= 0) return index;  // the common case starts nothing
  const runtime::JobInfo& job = runtime::job();
  // A process that does own several devices keeps their indexes.
  return job.active && index == job.local_rank && index >= device_count() ? 0 : index;
}

void set_current_device(c10::DeviceIndex index) {
  // A torch.multiprocessing.spawn worker calls set_device(rank) before
  // init_process_group(rank=...) tells the runtime its job (there are no
  // torchrun variables): starting the runtime here would start it alone.
  // So the index waits, unchecked, for its first use.
  if (index >= 0 && !runtime::started() && !runtime::job_from_env().active) {
    t_current_device = index;
    t_unchecked = true;
    return;
  }
  check_and_set(index);
}

c10::DeviceIndex device_count() { return static_cast<c10::DeviceIndex>(runtime::get().device_count()); }

}  // namespace torch_tpu::device
