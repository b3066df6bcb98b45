#include "device/sync_debug.h"
#include "device/warning_prefix.h"

#include <c10/util/Exception.h>

#include <atomic>

namespace torch_tpu::device {
namespace {
std::atomic<int> g_mode{0};
}  // namespace

void set_sync_debug_mode(int mode) {
  TORCH_CHECK(mode >= 0 && mode <= 2, "torch_tpu: invalid sync debug mode ", mode,
              ", expected 0 (default), 1 (warn) or 2 (error)");
  g_mode.store(mode, std::memory_order_relaxed);
}

int sync_debug_mode() { return g_mode.load(std::memory_order_relaxed); }

void on_host_wait(const char* what) {
  int mode = sync_debug_mode();
  if (mode == 0) return;
  if (mode == 1) {
    TORCH_WARN(warning_prefix(WarningCategory::kPerformance), "called a synchronizing tpu operation: ", what);
  } else {
    TORCH_CHECK(false, "called a synchronizing tpu operation: ", what,
                " (torch.tpu.set_sync_debug_mode(\"error\") is on)");
  }
}

}  // namespace torch_tpu::device
