#include "runtime/recompile_log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

namespace torch_tpu::runtime {
namespace {

thread_local const CompileNote* t_note = nullptr;

std::mutex g_mu;
std::deque<RecompileEntry> g_entries;
RecompileStats g_stats;
constexpr size_t kKeep = 256;

}  // namespace

bool log_recompiles() {
  static const bool on = [] {
    const char* v = std::getenv("TORCH_TPU_LOG_RECOMPILES");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

CompileNote::CompileNote(std::string label, std::string reason)
    : label_(std::move(label)), reason_(std::move(reason)), prev_(t_note) {
  t_note = this;
}
CompileNote::~CompileNote() { t_note = prev_; }
const CompileNote* CompileNote::current() { return t_note; }

void record_compile(RecompileEntry e) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_stats.programs;
  if (e.count > 1) {
    ++g_stats.recompiles;
    if (e.kind == "op") ++g_stats.op_recompiles;
    if (e.kind == "fused") ++g_stats.fused_recompiles;
    if (e.kind == "graph") ++g_stats.graph_recompiles;
  }
  if (g_entries.size() >= kKeep) g_entries.pop_front();
  g_entries.push_back(std::move(e));
}

void note_op_reload() {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_stats.op_reloads;
}

std::vector<RecompileEntry> recent_compiles(size_t n) {
  std::lock_guard<std::mutex> lock(g_mu);
  size_t start = g_entries.size() > n ? g_entries.size() - n : 0;
  return std::vector<RecompileEntry>(g_entries.begin() + static_cast<std::ptrdiff_t>(start), g_entries.end());
}

RecompileStats recompile_stats() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_stats;
}

}  // namespace torch_tpu::runtime
