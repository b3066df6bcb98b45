// torch.profiler sees tpu programs (docs/design.md, "Profiling"): every
// program the runtime runs (a Strict Eager op, a fused trace, a replay) is
// a RecordFunction range named after its op(s), so it shows in
// `key_averages().table()` and the Chrome trace beside the CPU ops, inside
// the user's `record_function` ranges. Only while a profiler is on does
// the range also wait for the program's outputs, so that its length is the
// program's device time; with no profiler the cost is one check of
// RecordFunction's thread-local callbacks.
#pragma once

#include <ATen/record_function.h>

#include <optional>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace torch_tpu::runtime {

class ProgramRange {
 public:
  ProgramRange();
  bool active() const { return rf_.has_value(); }
  // Starts the range (call only when active()): "tpu: <what>".
  void start(const std::string& what);
  // Waits for the program's outputs when active (its device time).
  void finish(const std::vector<BufferRef>& outs);

 private:
  std::optional<at::RecordFunction> rf_;
  std::string name_;
};

// [estimate] While on, the text of every program a fused trace runs is
// kept (torch_tpu.estimate compiles them for XLA's cost analysis).
void record_programs(bool on);
bool recording_programs();
void note_program(const std::string& what, const std::string& text);
// (what, text) pairs recorded since the last call.
std::vector<std::pair<std::string, std::string>> take_recorded_programs();

}  // namespace torch_tpu::runtime
