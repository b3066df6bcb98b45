#include "runtime/profiling.h"

#include "runtime/modes.h"

namespace torch_tpu::runtime {

ProgramRange::ProgramRange() {
  // Mostly free when no profiler is on: RecordFunction's own fast path.
  if (at::hasCallbacks()) {
    rf_.emplace(at::RecordScope::USER_SCOPE);
    if (!rf_->isActive()) rf_.reset();
  }
}

void ProgramRange::start(const std::string& what) {
  name_ = "tpu: " + what;
  rf_->before(std::string_view(name_), c10::ArrayRef<const c10::IValue>{});
}

void ProgramRange::finish(const std::vector<BufferRef>& outs) {
  if (!rf_) return;
  for (const auto& o : outs)
    if (o) xla_buffer_wait(*o, name_.c_str());
}

namespace {
bool g_recording = false;
std::vector<std::pair<std::string, std::string>> g_recorded;
}  // namespace

void record_programs(bool on) {
  g_recording = on;
  if (!on) g_recorded.clear();
}
bool recording_programs() { return g_recording; }
void note_program(const std::string& what, const std::string& text) {
  if (g_recording) g_recorded.emplace_back(what, text);
}
std::vector<std::pair<std::string, std::string>> take_recorded_programs() {
  auto out = std::move(g_recorded);
  g_recorded.clear();
  return out;
}

}  // namespace torch_tpu::runtime
