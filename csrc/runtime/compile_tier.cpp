#include "runtime/compile_tier.h"

#include "runtime/compiler_options.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
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

namespace {
std::string options_text(const std::vector<QuickCompileOption>& options) {
  std::string out;
  for (const auto& option : options) {
    if (!out.empty()) out += ';';
    out += option.name + '=' + (option.boolean ? (option.value ? "true" : "false") : std::to_string(option.value));
  }
  return out;
}
}  // namespace

std::string quick_compile_options_text() { return options_text(quick_compile_options()); }

bool small_program_options_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TORCH_TPU_SMALL_PROGRAM_OPTIONS");
    return !(v && *v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

std::vector<QuickCompileOption> tier_options(CompileTier tier) {
  switch (tier) {
    case CompileTier::kOptimised: return {};
    case CompileTier::kQuick: return quick_compile_options();
    case CompileTier::kSmall:
      return {{"xla_cpu_use_fusion_emitters", 0, true}, {"xla_cpu_parallel_codegen_split_count", 1, false}};
    case CompileTier::kTiny: {
      auto options = tier_options(CompileTier::kSmall);
      options.push_back({"xla_backend_optimization_level", 0, false});
      return options;
    }
  }
  return {};
}

std::string tier_options_text(CompileTier tier) { return options_text(tier_options(tier)); }

namespace {

// The elements of the text's largest tensor type, capped at
// kSmallProgramMaxElements + 1 (also for a dynamic dimension). Every
// `tensor<AxBx...xT>` type in the text (parameters, results and every
// intermediate) counts.
int64_t largest_tensor_elements(const std::string& text) {
  constexpr int64_t kOver = kSmallProgramMaxElements + 1;
  static const std::string kTensor = "tensor<";
  int64_t largest = 1;
  for (size_t at = text.find(kTensor); at != std::string::npos; at = text.find(kTensor, at)) {
    at += kTensor.size();
    int64_t elements = 1;
    // Dimensions are digits followed by 'x'; the element type ends them.
    while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) {
      size_t end = at;
      int64_t dim = 0;
      while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) {
        dim = std::min<int64_t>(dim * 10 + (text[end] - '0'), kOver);
        ++end;
      }
      if (end >= text.size() || text[end] != 'x') break;  // digits of a type name (i64): done
      elements = std::min<int64_t>(elements * dim, kOver);
      at = end + 1;
    }
    if (at < text.size() && text[at] == '?') return kOver;  // dynamic dimension: size unknown
    largest = std::max(largest, elements);
    if (largest >= kOver) return kOver;
  }
  return largest;
}

}  // namespace

CompileTier size_tier(const std::string& text) {
  if (text.size() >= kQuickMinTextBytes) return CompileTier::kOptimised;
  int64_t largest = largest_tensor_elements(text);
  if (largest <= kTinyProgramMaxElements) return CompileTier::kTiny;
  if (largest <= kSmallProgramMaxElements) return CompileTier::kSmall;
  return CompileTier::kOptimised;
}

bool is_small_program(const std::string& text) { return size_tier(text) != CompileTier::kOptimised; }

CompileTier compile_tier(const std::string& text, bool cpu) {
  // Off XLA:CPU, and under a user's own options (compiler_options.h), whose
  // choices the tiers' options would overrule, XLA's defaults.
  if (!cpu || compiler_options_id() != 0) return CompileTier::kOptimised;
  // A small text is never compiled quick: it compiles in tens of ms at any
  // level, and its rebuild would cost more than the quick build saves.
  if (quick_compile_active() && text.size() >= kQuickMinTextBytes) return CompileTier::kQuick;
  return small_program_options_enabled() ? size_tier(text) : CompileTier::kOptimised;
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

void note_small_compile(bool tiny) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_stats.small_compiles;
  if (tiny) ++g_stats.tiny_compiles;
}

void note_rebuild(double seconds) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_stats.rebuilds;
  g_stats.rebuild_seconds += seconds;
}

}  // namespace torch_tpu::runtime
