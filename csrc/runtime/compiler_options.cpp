#include "runtime/compiler_options.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>

namespace torch_tpu::runtime {
namespace {

std::mutex g_mutex;
std::vector<std::vector<XlaOption>> g_blocks;  // outermost first
std::optional<bool> g_excess;
std::unordered_map<std::string, uint32_t> g_ids{{"", 0}};  // interned texts
std::atomic<uint32_t> g_id{0};                              // read on every op's key: lock-free

std::vector<XlaOption> merged_locked() {
  std::map<std::string, std::string> m;
  for (const auto& block : g_blocks)
    for (const auto& [name, value] : block) m[name] = value;
  if (g_excess) m["xla_allow_excess_precision"] = *g_excess ? "true" : "false";
  return {m.begin(), m.end()};
}

std::string text_of(const std::vector<XlaOption>& options) {
  std::string text;
  for (const auto& [name, value] : options) text += name + '=' + value + ';';
  return text;
}

void update_id_locked() {
  std::string text = text_of(merged_locked());
  auto [it, added] = g_ids.emplace(text, static_cast<uint32_t>(g_ids.size()));
  g_id.store(it->second, std::memory_order_release);
}

}  // namespace

std::optional<int> xla_effort_level(const std::string& value) {
  if (value.size() != 2 || value[0] != 'O' || value[1] < '0' || value[1] > '3') return std::nullopt;
  return 10 * (value[1] - '0') + 9;  // O0 = 9, O1 = 19, O2 = 29, O3 = 39
}

void push_compiler_options(const std::vector<XlaOption>& options) {
  for (const auto& [name, value] : options)
    TORCH_CHECK_VALUE(name.rfind("xla_", 0) == 0, "torch.tpu.compiler.custom_compiler_options: '", name,
                      "' is not an XLA option (their names start with 'xla_')");
  for (const auto& [name, value] : options)
    TORCH_CHECK_VALUE((name != "xla_optimization_level" && name != "xla_memory_fitting_level") ||
                          xla_effort_level(value),
                      "torch.tpu.compiler.custom_compiler_options: ", name, " takes 'O0', 'O1', 'O2' or 'O3', got '",
                      value, "'");
  std::lock_guard<std::mutex> lock(g_mutex);
  g_blocks.push_back(options);
  update_id_locked();
}

void pop_compiler_options() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_blocks.empty()) return;
  g_blocks.pop_back();
  update_id_locked();
}

void set_allow_excess_precision(std::optional<bool> allow) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_excess = allow;
  update_id_locked();
}

std::optional<bool> allow_excess_precision_setting() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_excess;
}

namespace {
// XLA_FLAGS' value of --xla_allow_excess_precision, if it has one.
std::optional<bool> xla_flags_excess() {
  const char* flags = std::getenv("XLA_FLAGS");
  if (flags == nullptr) return std::nullopt;
  std::string s = flags;
  const std::string name = "--xla_allow_excess_precision";
  size_t at = s.rfind(name);
  if (at == std::string::npos) return std::nullopt;
  size_t end = at + name.size();
  if (end >= s.size() || s[end] != '=') return true;  // a bare boolean flag
  std::string value = s.substr(end + 1, s.find_first_of(" \t", end) - end - 1);
  return !(value == "false" || value == "0" || value == "False");
}
}  // namespace

bool allow_excess_precision(bool platform_default) {
  if (auto set = allow_excess_precision_setting()) return *set;
  return xla_flags_excess().value_or(platform_default);
}

bool xla_flags_set_excess_precision() { return xla_flags_excess().has_value(); }

std::vector<XlaOption> compiler_options() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return merged_locked();
}

std::string compiler_options_text() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return text_of(merged_locked());
}

uint32_t compiler_options_id() { return g_id.load(std::memory_order_acquire); }

}  // namespace torch_tpu::runtime
