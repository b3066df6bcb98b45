#include "runtime/compile_tier.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace torch_tpu::runtime {
namespace {

thread_local bool t_quick = false;
std::mutex g_mu;
QuickCompileStats g_stats;
std::vector<QuickCompileOption> g_options = {
    {"xla_backend_optimization_level", 0, false},
    {"xla_cpu_use_fusion_emitters", 0, true},
    {"xla_cpu_parallel_codegen_split_count", 1, false},
};

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

std::vector<QuickCompileOption> quick_compile_options() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_options;
}

std::string quick_compile_options_text() {
  std::string out;
  for (const auto& option : quick_compile_options()) {
    if (!out.empty()) out += ';';
    out += option.name + '=' + (option.boolean ? (option.value ? "true" : "false") : std::to_string(option.value));
  }
  return out;
}

std::string set_quick_compile_options(const std::string& text) {
  std::vector<QuickCompileOption> parsed;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    TORCH_CHECK(eq != std::string::npos && eq > 0, "torch_tpu: quick compile options are 'name=value;...', got '",
                item, "'");
    std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    if (value == "true" || value == "false") {
      parsed.push_back({name, value == "true" ? 1 : 0, true});
      continue;
    }
    char* stop = nullptr;
    long long v = std::strtoll(value.c_str(), &stop, 10);
    TORCH_CHECK(!value.empty() && *stop == '\0', "torch_tpu: quick compile option ", name,
                " needs an integer or true/false, got '", value, "'");
    parsed.push_back({name, static_cast<int64_t>(v), false});
  }
  std::string previous = quick_compile_options_text();
  std::lock_guard<std::mutex> lock(g_mu);
  g_options = std::move(parsed);
  return previous;
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
