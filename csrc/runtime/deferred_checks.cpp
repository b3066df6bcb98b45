#include "runtime/deferred_checks.h"

#include <unordered_map>

#include "runtime/modes.h"

namespace torch_tpu::runtime {

std::atomic<int64_t> g_pending_checks{0};

namespace {

// Pending flags by device, oldest first. The next sync reads them at once
// (reduced on the device, one small transfer per 64: fusing_runtime.cpp,
// first_failed); a program that never syncs would grow the list without
// bound, so past kMaxPending the computed ones are read at once (amortised:
// once per kMaxPending checking ops).
constexpr size_t kMaxPending = 4096;

std::unordered_map<int, std::vector<PendingCheck>>& lists() {
  static auto* m = new std::unordered_map<int, std::vector<PendingCheck>>();
  return *m;
}

}  // namespace

void defer_check(int device, BufferRef flag, CheckRef check) {
  RuntimeLock lock;
  auto& v = lists()[device];
  v.push_back(PendingCheck{std::move(flag), std::move(check)});
  ++g_pending_checks;
  if (eager_mode() == EagerMode::kDebug || v.size() >= kMaxPending) run_checks(device);
}

int64_t pending_check_count(int device) {
  RuntimeLock lock;
  auto it = lists().find(device);
  return it == lists().end() ? 0 : static_cast<int64_t>(it->second.size());
}

std::vector<PendingCheck> take_checks(int device) {
  auto it = lists().find(device);
  if (it == lists().end()) return {};
  std::vector<PendingCheck> out = std::move(it->second);
  it->second.clear();
  g_pending_checks -= static_cast<int64_t>(out.size());
  return out;
}

void restore_checks(int device, std::vector<PendingCheck> checks) {
  if (checks.empty()) return;
  auto& v = lists()[device];
  g_pending_checks += static_cast<int64_t>(checks.size());
  checks.insert(checks.end(), std::make_move_iterator(v.begin()), std::make_move_iterator(v.end()));
  v = std::move(checks);
}

}  // namespace torch_tpu::runtime
