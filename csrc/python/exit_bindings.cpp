// Exit after backward on tpu: the autograd engine's tpu worker thread may
// still be tearing down the last backward's graph (its GraphTask) when the
// main thread, back from backward, leaves the script and finalises Python.
// If that teardown drops the last reference to a tensor whose Python object
// the main thread has already released, torch takes the GIL on the worker
// during finalisation; Python then ends the thread with pthread_exit, whose
// unwinding through a noexcept destructor aborts the process with
// "terminate called without an active exception" (pytorch/pytorch#38228:
// the same on any device with its own autograd thread, rarer on CUDA where
// the window is shorter). At exit, before finalisation, each tpu device's
// worker is sent a backward of its own: its queue is served in order, so
// once that backward returns the worker has finished the earlier teardown,
// and its own graph holds only tensors Python never saw (no GIL needed to
// drop them).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>  // at::AutoGradMode (not through ATen.h in torch 2.11)
#include <pybind11/pybind11.h>
#include <torch/csrc/autograd/autograd.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "device/guard.h"

namespace py = pybind11;
using namespace torch_tpu;

namespace {

void send_backward_to_each_device() {
  at::AutoGradMode grad_on(true);
  c10::InferenceMode no_inference(false);
  for (c10::DeviceIndex i = 0; i < device::device_count(); ++i) {
    auto opts = at::TensorOptions().device(c10::DeviceType::PrivateUse1, i);
    at::Tensor x = at::empty({1}, opts).requires_grad_(true);
    at::Tensor y = x.view({1});  // its backward is a reshape: no program runs
    torch::autograd::grad({y}, {x}, {at::empty({1}, opts)});
  }
}

// A worker stuck in user code (a hook waiting on a dead peer) must not hang
// the exit: the drain runs on its own thread and is given up after this long,
// as torch's own engine shutdown gives up on its threads.
constexpr auto kDrainLimit = std::chrono::seconds(10);

void drain_autograd_threads() {
  struct Done {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
  };
  auto state = std::make_shared<Done>();
  py::gil_scoped_release no_gil;  // the worker's ops (and the engine) need it free
  std::thread([state] {
    try {
      send_backward_to_each_device();
    } catch (...) {
      // Leaving must not fail: a forked child refuses autograd threads, a
      // broken device has raised before; the race above is then still open.
    }
    std::lock_guard<std::mutex> lock(state->m);
    state->done = true;
    state->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(state->m);
  state->cv.wait_for(lock, kDrainLimit, [&] { return state->done; });
}

}  // namespace

void init_exit_bindings(py::module& m) {
  // Registered with atexit by the runtime when it starts (after jax, so
  // that it runs before jax's own exit hooks shut its backends down).
  m.def("_drain_autograd_threads", &drain_autograd_threads);
}
