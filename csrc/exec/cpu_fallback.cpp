#include "exec/cpu_fallback.h"
#include "device/warning_prefix.h"

#include <ATen/native/CPUFallback.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace torch_tpu::exec {

namespace {

std::atomic<int> g_enabled{-1};  // -1: not read from the environment yet
std::mutex g_mutex;
std::map<std::string, int64_t>* g_counts = new std::map<std::string, int64_t>();

std::string full_name(const c10::FunctionSchema& s) {
  return s.overload_name().empty() ? s.name() : s.name() + "." + s.overload_name();
}

// at::native::cpu_fallback writes an in-place or out= result back with
// _copy_from_and_resize(cpu_result, tpu_tensor): the tpu tensor takes the
// result's shape (out= may be resized by the CPU kernel) and its values,
// through copy_, so a view writes into its base's storage.
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  dst.copy_(self);
  return dst;
}

}  // namespace

bool cpu_fallback_enabled() {
  int v = g_enabled.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("TORCH_TPU_CPU_FALLBACK");
    int from_env = e != nullptr && *e != '\0' && std::strcmp(e, "0") != 0 ? 1 : 0;
    g_enabled.compare_exchange_strong(v, from_env);
    v = g_enabled.load();
  }
  return v == 1;
}

void set_cpu_fallback(bool on) { g_enabled.store(on ? 1 : 0); }

void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::string name = full_name(op.schema());
  bool first;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    first = (*g_counts)[name]++ == 0;
  }
  if (first)
    TORCH_WARN(warning_prefix(WarningCategory::kPerformance), "torch_tpu: ", name, " has no tpu lowering; running it on the CPU (its tensors are copied to the "
               "host and back; torch_tpu.cpu_fallback_stats() counts such calls). Warned once per op.");
  at::native::cpu_fallback(op, stack);
}

std::map<std::string, int64_t> cpu_fallback_stats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return *g_counts;
}

void reset_cpu_fallback_stats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_counts->clear();
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("_copy_from_and_resize", &copy_from_and_resize); }

}  // namespace torch_tpu::exec
