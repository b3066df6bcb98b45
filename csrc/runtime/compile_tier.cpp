#include "runtime/compile_tier.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace torch_tpu::runtime {
namespace {

thread_local bool t_quick = false;
std::mutex g_mu;
QuickCompileStats g_stats;

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TORCH_TPU_QUICK_FIRST_COMPILE");
    return !(v && *v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

}  // namespace

bool quick_compile_active() { return t_quick && enabled(); }

bool set_quick_compile(bool on) {
  bool prev = t_quick;
  t_quick = on;
  return prev;
}

std::string quick_compile_options_text() {
  std::string out;
  for (const auto& option : kQuickCompileOptions) {
    if (!out.empty()) out += ';';
    out += std::string(option.name) + '=' + std::to_string(option.value);
  }
  return out;
}

QuickCompileStats quick_compile_stats() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_stats;
}

void note_quick_compile() {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_stats.quick_compiles;
}

void note_rebuild(double seconds) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_stats.rebuilds;
  g_stats.rebuild_seconds += seconds;
}

}  // namespace torch_tpu::runtime
